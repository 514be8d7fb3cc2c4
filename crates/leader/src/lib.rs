//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics
//! (`k8s.io/client-go/tools/leaderelection`), so that of several `rollwright controllers` (or
//! `scheduler`) processes on one cluster only one acts, and another takes over when it dies.
//!
//! - The Lease's `holderIdentity` names the leader; it renews `renewTime` every retry period.
//! - A candidate takes the Lease when its holder is empty, or when the record has not changed for
//!   `leaseDurationSeconds` as measured on the candidate's own clock since it last saw a change
//!   (client-go's `observedTime`: clocks of different machines are never compared).
//! - Unlike client-go, which notices a change only at its next jittered poll (up to 2.2 retry
//!   periods late) and acts on an expiry only at the poll after that, a candidate also watches the
//!   Lease: it sees each renewal as it is written and tries again the moment the lease expires, so
//!   a standby takes over a killed leader's Lease within the lease duration of the kill (client-go:
//!   up to about 20 s at the defaults). Timing from a later observation only makes it wait longer,
//!   so the watch cannot make two leaders overlap; when it is refused or fails, polling decides.
//! - A leader that cannot renew for the renew deadline (shorter than the lease duration) stops
//!   acting before anyone else may take over, so two leaders never overlap.
//! - Every write is a compare-and-swap on the Lease's `resourceVersion`.
//! - On a clean shutdown the leader releases the Lease (empty holder), so the next one takes over
//!   at its next retry instead of after the lease duration.
//!
//! kube-rs has no elector in the version this workspace uses, hence this crate.

#![warn(missing_docs)]

mod decision;

use std::{future::Future, time::Duration};

pub use decision::{Decision, decide};
use futures::{Stream, StreamExt};
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{
    Api, Client,
    api::{PostParams, Resource},
};
use tokio::time::Instant;

/// The timings of an election. The defaults are kube-controller-manager's and kube-scheduler's.
#[derive(Clone, Debug)]
pub struct Config {
    /// How long a Lease whose record does not change keeps others out (`leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long the leader keeps acting without a successful renewal.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader to renew.
    pub retry_period: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why an election could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration would let two leaders overlap.
    #[error("the renew deadline ({0:?}) must be shorter than the lease duration ({1:?})")]
    Timings(Duration, Duration),
}

/// One candidate for one Lease.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    config: Config,
    /// The record as last seen, and when (on this process's clock) it last changed.
    observed: Option<(LeaseSpec, Instant)>,
}

/// How [`Elector::run`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown was asked (the Lease was released if held).
    Shutdown,
    /// The work being led ended by itself.
    WorkEnded,
}

impl Elector {
    /// A candidate named `identity` for the Lease `namespace/name`.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: impl Into<String>,
        config: Config,
    ) -> Result<Self, Error> {
        if config.renew_deadline >= config.lease_duration {
            return Err(Error::Timings(config.renew_deadline, config.lease_duration));
        }
        Ok(Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.into(),
            config,
            observed: None,
        })
    }

    /// An identity unique to this process, as client-go's users build one (host name and
    /// something unique on the host): `PREFIX-HOST_PID`.
    pub fn unique_identity(prefix: &str) -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".into());
        format!("{prefix}-{host}_{}", std::process::id())
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Campaigns for the Lease and, each time it is won, runs `lead()` until leadership is lost
    /// (the work is then dropped, so it stops, and the campaign resumes) or `shutdown` completes
    /// (the work is dropped and the Lease released).
    pub async fn run<F, W>(mut self, shutdown: impl Future, mut lead: F) -> Ended
    where
        F: FnMut() -> W,
        W: Future<Output = ()>,
    {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                _ = self.acquire() => {}
                _ = &mut shutdown => return Ended::Shutdown,
            }
            tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
            let outcome = tokio::select! {
                _ = lead() => Some(Ended::WorkEnded),
                _ = self.keep() => None,
                _ = &mut shutdown => Some(Ended::Shutdown),
            };
            match outcome {
                Some(ended) => {
                    self.release().await;
                    return ended;
                }
                None => tracing::warn!(
                    lease = %self.name,
                    identity = %self.identity,
                    "lost leadership; stopped acting, campaigning again"
                ),
            }
        }
    }

    /// Tries every retry period (with client-go's jitter), and at the moment the record it watches
    /// expires, until this candidate holds the Lease.
    async fn acquire(&mut self) {
        let mut changes = std::pin::pin!(self.record_changes());
        loop {
            if self.try_acquire_or_renew().await {
                return;
            }
            let jitter = self
                .config
                .retry_period
                .mul_f64(rand::random::<f64>() * 1.2);
            let retry_at = Instant::now() + self.config.retry_period + jitter;
            loop {
                let wake = self
                    .expiry()
                    .map_or(retry_at, |expiry| expiry.min(retry_at));
                tokio::select! {
                    _ = tokio::time::sleep_until(wake) => break,
                    Some(spec) = changes.next() => self.observe(spec, Instant::now()),
                }
            }
        }
    }

    /// The Lease's record each time the API server reports a write of it (failures are retried
    /// with backoff; a candidate not allowed to watch keeps polling alone).
    fn record_changes(&self) -> impl Stream<Item = LeaseSpec> + use<> {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        watcher(self.api.clone(), config)
            .default_backoff()
            .applied_objects()
            .filter_map(|lease| async move {
                match lease {
                    Ok(lease) => lease.spec,
                    Err(e) => {
                        tracing::debug!(error = %e, "watching the lease failed");
                        None
                    }
                }
            })
    }

    /// Notes `spec` as seen at `at` if it differs from the record last seen: the lease's validity
    /// is counted from the first sight of each record.
    fn observe(&mut self, spec: LeaseSpec, at: Instant) {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|(seen, _)| !same_record(seen, &spec));
        if changed {
            self.observed = Some((spec, at));
        }
    }

    /// When another holder's Lease, as last seen, expires for this candidate.
    fn expiry(&self) -> Option<Instant> {
        let (record, at) = self.observed.as_ref()?;
        decision::expiry(record, &self.identity, *at, self.config.lease_duration)
    }

    /// Renews every retry period; returns when no renewal succeeded for the renew deadline.
    async fn keep(&mut self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = last_renewal + self.config.renew_deadline;
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(true) => last_renewal = Instant::now(),
                Ok(false) => {}
                Err(_) => return,
            }
            if Instant::now() >= deadline {
                return;
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: one look at the Lease and at most one write.
    async fn try_acquire_or_renew(&mut self) -> bool {
        let now = Instant::now();
        let current = match self.api.get_opt(&self.name).await {
            Ok(current) => current,
            Err(e) => {
                tracing::debug!(error = %e, lease = %self.name, "reading the lease failed");
                return false;
            }
        };
        let spec = current.as_ref().and_then(|l| l.spec.clone());
        if let Some(spec) = &spec {
            self.observe(spec.clone(), now);
        }
        let observed_at = self.observed.as_ref().map_or(now, |(_, at)| *at);
        let decision = decide(
            spec.as_ref(),
            &self.identity,
            observed_at,
            now,
            self.config.lease_duration,
        );
        let wall = MicroTime(clock::now());
        let record = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            // Whole seconds on the wire, rounded up so that others never wait less than we renew.
            lease_duration_seconds: Some(self.config.lease_duration.as_secs_f64().ceil() as i32),
            acquire_time: acquired.or_else(|| Some(wall.clone())),
            renew_time: Some(wall.clone()),
            lease_transitions: Some(transitions),
            ..Default::default()
        };
        let written = match (decision, current) {
            (Decision::Wait, _) => return false,
            (Decision::Create, _) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..Default::default()
                    },
                    spec: Some(record(0, None)),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            (Decision::Renew, Some(mut lease)) => {
                let acquired = lease.spec.as_ref().and_then(|s| s.acquire_time.clone());
                let transitions = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.lease_transitions)
                    .unwrap_or(0);
                lease.spec = Some(record(transitions, acquired));
                self.replace(lease).await
            }
            (Decision::Take { transitions }, Some(mut lease)) => {
                lease.spec = Some(record(transitions, None));
                self.replace(lease).await
            }
            // A decision to renew or take always comes with the Lease it was made on.
            (_, None) => return false,
        };
        match written {
            Ok(lease) => {
                if let Some(spec) = lease.spec {
                    self.observed = Some((spec, Instant::now()));
                }
                true
            }
            Err(e) => {
                // A conflict means another candidate wrote first: it leads, or renewed.
                tracing::debug!(error = %e, lease = %self.name, "writing the lease failed");
                false
            }
        }
    }

    /// Compare-and-swap on the Lease's `resourceVersion` (kept from the read).
    async fn replace(&self, lease: Lease) -> kube::Result<Lease> {
        debug_assert!(lease.meta().resource_version.is_some());
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
    }

    /// Gives the Lease up if this candidate holds it (client-go's `ReleaseOnCancel`): the holder
    /// is emptied and the duration shortened, so the next candidate takes over at once.
    async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(clock::now()));
        match self.replace(lease).await {
            Ok(_) => {
                tracing::info!(lease = %self.name, identity = %self.identity, "released leadership")
            }
            Err(e) => tracing::warn!(error = %e, lease = %self.name, "releasing the lease failed"),
        }
    }
}

/// Whether two records are the same (client-go compares the whole record to notice renewals).
fn same_record(a: &LeaseSpec, b: &LeaseSpec) -> bool {
    a.holder_identity == b.holder_identity
        && a.renew_time == b.renew_time
        && a.acquire_time == b.acquire_time
        && a.lease_transitions == b.lease_transitions
        && a.lease_duration_seconds == b.lease_duration_seconds
}
