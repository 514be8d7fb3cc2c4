//! The Deployment controller, as upstream's `pkg/controller/deployment` (SEMANTICS.md,
//! "Deployment"; seed 001): a Deployment owns ReplicaSets named `<deployment>-<pod-template-hash>`
//! and moves pods from the old ones to the new one by its strategy.
//!
//! Layout, as upstream's: this file maps cache events to Deployment keys and dispatches
//! ([`DeploymentController`]'s sync: deleted -> status
//! only; paused -> [`sync::sync`]; scaling event -> [`sync::sync`]; otherwise the strategy);
//! [`sync`] holds the shared machinery (new ReplicaSet, scaling, cleanup, status);
//! [`rolling`] and [`recreate`] the strategies; [`rollback`] the revision bookkeeping a
//! rollback by template revert needs; [`progress`] status, conditions and the deadline;
//! [`util`] the pure helpers.
//!
//! The controller reads ReplicaSets and pods from the shared cache, grouped by owner, so a sync
//! costs in proportion to the Deployment's own ReplicaSets. The ReplicaSets' statuses (kept by
//! the ReplicaSet controller) are what it counts pods by, as upstream; the pod handler serves
//! Recreate, which must see old pods gone.

pub mod progress;
pub mod recreate;
pub mod rollback;
pub mod rolling;
pub mod sync;
pub mod util;

use crate::{
    runtime::{Action, Controller, WorkQueue},
    util::ownership,
};
use api::{
    intstr::IntOrPercentError,
    pod::{controller_of, controller_ref},
    selector::LabelSelector,
};
use events::{EventType, Recorder};
use informer::{Change, Informer, Informers, Key, Subscription, key};
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, ReplicaSet},
        core::v1::Pod,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Api, Client, ResourceExt};
use std::sync::Arc;
use util::Rollout;

/// The event source name, as upstream's.
pub const COMPONENT: &str = "deployment-controller";

/// Why a sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed (a conflict means the cache was stale; the retry sees fresh data).
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// The new ReplicaSet's name is taken by another template; `status.collisionCount` was
    /// bumped and the next sync hashes anew.
    #[error("hash collision: replica set {0} exists with another template")]
    HashCollision(String),
}

/// How the Deployment controller runs (upstream's `--concurrent-deployment-syncs` is 5).
pub type Config = crate::runtime::Config;

/// The Deployment controller: the shared cache's Deployments, ReplicaSets and pods, and its
/// queue of Deployment keys. The strategy modules take it as upstream's take `dc`.
pub struct DeploymentController {
    client: Client,
    deployments: Informer<Deployment>,
    replica_sets: Informer<ReplicaSet>,
    pods: Informer<Pod>,
    recorder: Recorder,
    queue: WorkQueue<Key>,
    autorollback: crate::autorollback::AutoRollback,
    /// ReplicaSets this controller wrote that the cache may not show yet: a sync counts
    /// pods by its own last writes, never by older sizes (`maxSurge` stays strict).
    written: crate::util::written::Written<ReplicaSet>,
    /// Budget-aware updates ([`crate::disruption_gate`]): how far old ReplicaSets may shrink.
    gate: crate::disruption_gate::DisruptionGate,
}

impl Controller for DeploymentController {
    const NAME: &'static str = "deployment";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let (on_d, on_rs, on_pod) = (Arc::clone(self), Arc::clone(self), Arc::clone(self));
        vec![
            self.deployments
                .subscribe(move |c| on_d.queue.add(c.object().key())),
            self.replica_sets
                .subscribe(move |c| on_rs.replica_set_changed(c)),
            self.pods.subscribe(move |c| {
                // Only a pod's disappearance matters here: Recreate waits for it.
                if let Change::Deleted(pod) = c
                    && let Some(k) = on_pod.owner_of_pod(pod)
                {
                    on_pod.queue.add(k);
                }
                // ... and a pod's failure, for the automatic rollback.
                if let Change::Updated { old, new } = c
                    && crate::autorollback::pod_signal_changed(old, new)
                    && let Some(k) = on_pod.owner_of_pod(new)
                {
                    on_pod.queue.add(k);
                }
            }),
            {
                let q = Arc::clone(self);
                self.gate.subscribe(move |key| q.queue.add(key))
            },
        ]
    }

    async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        match self.deployments.get(&key) {
            Some(d) => self.sync_deployment(Deployment::clone(&d)).await,
            None => Ok(Action::await_change()),
        }
    }
}

fn selector_of(d: &Deployment) -> Option<LabelSelector> {
    LabelSelector::from_label_selector(&d.spec.as_ref()?.selector).ok()
}

impl DeploymentController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), COMPONENT, None),
            queue: config.queue(),
            deployments: informers.get(),
            replica_sets: informers.get(),
            pods: informers.get(),
            autorollback: crate::autorollback::AutoRollback::new(
                informers,
                client.clone(),
                COMPONENT,
            ),
            written: crate::util::written::Written::default(),
            gate: crate::disruption_gate::DisruptionGate::new(informers),
            client,
        })
    }

    /// Its disruption gate, whose default `--honor-disruption-budgets` sets.
    pub fn disruption_gate(&self) -> &crate::disruption_gate::DisruptionGate {
        &self.gate
    }

    /// The Deployment a controller reference names, if the cache holds it with that uid.
    fn resolve(&self, namespace: &str, meta: &ObjectMeta) -> Option<Key> {
        let r = controller_of(meta)?;
        if r.kind != "Deployment" {
            return None;
        }
        let k = key(namespace, &r.name);
        let d = self.deployments.get(&k)?;
        (d.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(k)
    }

    fn owner_of_pod(&self, pod: &Pod) -> Option<Key> {
        let ns = pod.namespace().unwrap_or_default();
        let r = controller_of(&pod.metadata)?;
        let rs = self.replica_sets.get(&key(&ns, &r.name))?;
        if rs.metadata.uid.as_deref() != Some(r.uid.as_str()) {
            return None;
        }
        self.resolve(&ns, &rs.metadata)
    }

    /// Deployments in the ReplicaSet's namespace whose selector matches it (for orphans).
    fn matching_deployments(&self, rs: &ReplicaSet) -> Vec<Key> {
        let ns = rs.namespace().unwrap_or_default();
        self.deployments
            .store()
            .in_namespace(&ns)
            .iter()
            .filter(|d| {
                selector_of(d)
                    .is_some_and(|s| !s.is_empty() && s.matches_labels(rs.metadata.labels.as_ref()))
            })
            .map(|d| d.key())
            .collect()
    }

    fn replica_set_changed(&self, change: &Change<ReplicaSet>) {
        self.written.observe(change);
        match change {
            Change::Added(rs) => {
                let ns = rs.namespace().unwrap_or_default();
                match self.resolve(&ns, &rs.metadata) {
                    Some(k) => self.queue.add(k),
                    None if controller_of(&rs.metadata).is_none() => {
                        for k in self.matching_deployments(rs) {
                            self.queue.add(k);
                        }
                    }
                    None => {}
                }
            }
            Change::Updated { old, new } => {
                if change.is_resync() {
                    return;
                }
                let ns = new.namespace().unwrap_or_default();
                let ref_changed = controller_of(&old.metadata) != controller_of(&new.metadata);
                if ref_changed && let Some(k) = self.resolve(&ns, &old.metadata) {
                    self.queue.add(k);
                }
                match self.resolve(&ns, &new.metadata) {
                    Some(k) => self.queue.add(k),
                    None if controller_of(&new.metadata).is_none()
                        && (ref_changed || old.metadata.labels != new.metadata.labels) =>
                    {
                        for k in self.matching_deployments(new) {
                            self.queue.add(k);
                        }
                    }
                    None => {}
                }
            }
            Change::Deleted(rs) => {
                let ns = rs.namespace().unwrap_or_default();
                if let Some(k) = self.resolve(&ns, &rs.metadata) {
                    self.queue.add(k);
                }
            }
        }
    }

    /// The ReplicaSets `d` controls after adoption and release (upstream's
    /// `getReplicaSetsForDeployment`), each as this controller last wrote it if the cache is
    /// behind.
    async fn claim_replica_sets(
        &self,
        d: &Deployment,
        selector: &LabelSelector,
    ) -> Result<Vec<ReplicaSet>, Error> {
        let ns = d.namespace().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let mut candidates = self.replica_sets.store().controlled_by(&uid);
        candidates.extend(self.replica_sets.store().orphans(&ns));
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
        let name = d.name_any();
        let claimed = ownership::claim(
            &api,
            &controller_ref("apps/v1", "Deployment", &d.metadata),
            d.metadata.deletion_timestamp.is_some(),
            candidates,
            |rs| selector.matches_labels(rs.metadata.labels.as_ref()),
            || async {
                let fresh = deployments.get(&name).await?;
                Ok(fresh.metadata.uid == d.metadata.uid
                    && fresh.metadata.deletion_timestamp.is_none())
            },
        )
        .await?;
        let claimed = claimed
            .into_iter()
            .map(|rs| ReplicaSet::clone(&rs))
            .collect();
        // A ReplicaSet this controller created that the cache has yet to show is counted too.
        Ok(self.written.fresher(claimed, |rs| {
            controller_of(&rs.metadata).is_some_and(|r| r.uid == uid)
        }))
    }

    /// Syncs one Deployment (upstream's `syncDeployment`). Returns a requeue for the progress
    /// deadline when a rollout is waiting on it.
    async fn sync_deployment(&self, mut d: Deployment) -> Result<Action, Error> {
        let d_key = informer::key_of(&d);
        let rollout = match Rollout::of(&d) {
            Ok(r) => r,
            Err(error) => return Ok(invalid(&d_key, error)),
        };
        let Some(selector) = selector_of(&d) else {
            tracing::warn!(deployment = %d_key, "invalid selector");
            return Ok(Action::await_change());
        };
        if selector.is_empty() {
            self.recorder.record(
                &events::reference(&d),
                EventType::Warning,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            );
            let status = d.status.get_or_insert_with(Default::default);
            if status.observed_generation.unwrap_or(0) < d.metadata.generation.unwrap_or(0) {
                status.observed_generation = d.metadata.generation;
                sync::write_status(self, &mut d).await?;
            }
            return Ok(Action::await_change());
        }

        let rs_list = self.claim_replica_sets(&d, &selector).await?;
        if d.metadata.deletion_timestamp.is_some() {
            let rss = sync::replica_sets(self, &mut d, &rollout, &rs_list, false).await?;
            sync::sync_status(self, &mut d, &rollout, &rss).await?;
            return Ok(Action::await_change());
        }
        // Automatic rollback (rollwright, issue #22): a failed rollout's template reverted.
        let rollback =
            self.autorollback
                .deployment(&mut d, &rs_list, &self.pods, rollout.max_unavailable);
        if rollback.await? == crate::autorollback::Outcome::Stop {
            return Ok(Action::await_change());
        }
        if let Some(cond) = progress::paused_condition(&d, clock::now()) {
            progress::set(d.status.get_or_insert_with(Default::default), cond);
            sync::write_status(self, &mut d).await?;
        }
        if d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
            || sync::is_scaling_event(&rollout, &rs_list)
        {
            sync::sync(self, &mut d, &rollout, &rs_list).await?;
            return Ok(Action::await_change());
        }
        let requeue = if rollout.rolling {
            rolling::rollout(self, &mut d, &rollout, &rs_list).await?
        } else {
            recreate::rollout(self, &mut d, &rollout, &rs_list).await?
        };
        Ok(requeue.map_or_else(Action::await_change, Action::requeue))
    }
}

fn invalid(d_key: &str, error: IntOrPercentError) -> Action {
    // Validation rejects these; retrying would not help.
    tracing::warn!(deployment = %d_key, %error, "invalid rolling update parameters");
    Action::await_change()
}
