//! The Deployment controller, as upstream's `pkg/controller/deployment` (SEMANTICS.md,
//! "Deployment"; seed 001): a Deployment owns ReplicaSets named `<deployment>-<pod-template-hash>`
//! and moves pods from the old ones to the new one by its strategy.
//!
//! Layout, as upstream's: this file watches and dispatches ([`reconcile`]: deleted -> status
//! only; paused -> [`sync::sync`]; scaling event -> [`sync::sync`]; otherwise the strategy);
//! [`sync`] holds the shared machinery (new ReplicaSet, scaling, cleanup, status);
//! [`rolling`] and [`recreate`] the strategies; [`rollback`] the revision bookkeeping a
//! rollback by template revert needs; [`progress`] status, conditions and the deadline;
//! [`util`] the pure helpers.
//!
//! The controller reads ReplicaSets and pods from its own watches, grouped by owner
//! ([`OwnerIndex`]), so a sync costs in proportion to the Deployment's own ReplicaSets. The
//! ReplicaSets' statuses (kept by the ReplicaSet controller) are what it counts pods by, as
//! upstream; its own pod watch serves Recreate, which must see old pods gone.

pub mod progress;
pub mod recreate;
pub mod rollback;
pub mod rolling;
pub mod sync;
pub mod util;

use crate::{
    owner_index::{Change, Ingest, Key, OwnerIndex, key, key_of},
    ownership,
    runtime::{Action, Backoff, WorkQueue, run_workers},
};
use api::{
    intstr::IntOrPercentError,
    pod::{controller_of, controller_ref},
    selector::LabelSelector,
};
use events::{EventType, Recorder};
use futures::StreamExt;
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, ReplicaSet},
        core::v1::Pod,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use std::sync::Arc;
use tokio::sync::watch;
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

/// How the Deployment controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Concurrent syncs (upstream's `--concurrent-deployment-syncs`, 5).
    pub workers: usize,
    /// Retry delays of failed syncs.
    pub backoff: Backoff,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: 5,
            backoff: Backoff::default(),
        }
    }
}

/// What every sync shares.
pub struct Context {
    client: Client,
    config: Config,
    deployments: OwnerIndex<Deployment>,
    replica_sets: OwnerIndex<ReplicaSet>,
    pods: OwnerIndex<Pod>,
    recorder: Recorder,
}

pub(crate) fn error_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Runs the Deployment controller until dropped (like every controller of this crate). Syncs
/// start once the Deployment, ReplicaSet and pod watches have listed.
pub async fn run(client: Client, config: Config) {
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), COMPONENT, None),
        client,
        config,
        deployments: OwnerIndex::default(),
        replica_sets: OwnerIndex::default(),
        pods: OwnerIndex::default(),
    });
    let queue: WorkQueue<Key> = WorkQueue::new(ctx.config.backoff);
    let (synced_tx, mut synced_rx) = watch::channel(false);
    let ingest = ingest(Arc::clone(&ctx), queue.clone(), synced_tx);
    let workers = async {
        if synced_rx.wait_for(|s| *s).await.is_err() {
            return;
        }
        run_workers("deployment", queue.clone(), ctx.config.workers, |k: Key| {
            let ctx = Arc::clone(&ctx);
            async move {
                match ctx.deployments.get(&k) {
                    Some(d) => reconcile(d, ctx).await,
                    None => Ok(Action::await_change()),
                }
            }
        })
        .await
    };
    tokio::join!(ingest, workers);
}

enum Event {
    Deployment(Result<watcher::Event<Deployment>, watcher::Error>),
    ReplicaSet(Result<watcher::Event<ReplicaSet>, watcher::Error>),
    Pod(Result<watcher::Event<Pod>, watcher::Error>),
}

async fn ingest(ctx: Arc<Context>, queue: WorkQueue<Key>, synced: watch::Sender<bool>) {
    let c = || ctx.client.clone();
    let cfg = watcher::Config::default;
    let streams = vec![
        watcher(Api::<Deployment>::all(c()), cfg())
            .default_backoff()
            .map(Event::Deployment)
            .boxed(),
        watcher(Api::<ReplicaSet>::all(c()), cfg())
            .default_backoff()
            .map(Event::ReplicaSet)
            .boxed(),
        watcher(Api::<Pod>::all(c()), cfg())
            .default_backoff()
            .map(Event::Pod)
            .boxed(),
    ];
    let mut events = futures::stream::select_all(streams);
    let mut deployments = Ingest::new(ctx.deployments.clone());
    let mut replica_sets = Ingest::new(ctx.replica_sets.clone());
    let mut pods = Ingest::new(ctx.pods.clone());
    while let Some(event) = events.next().await {
        match event {
            Event::Deployment(Ok(e)) => {
                for change in deployments.handle(e) {
                    let (Change::Added(d) | Change::Updated { new: d, .. } | Change::Deleted(d)) =
                        change;
                    queue.add(key_of(d.as_ref()));
                }
            }
            Event::ReplicaSet(Ok(e)) => {
                for change in replica_sets.handle(e) {
                    on_replica_set_change(&ctx, &queue, change);
                }
            }
            Event::Pod(Ok(e)) => {
                for change in pods.handle(e) {
                    // Only a pod's disappearance matters here: Recreate waits for it.
                    if let Change::Deleted(pod) = change
                        && let Some(k) = owner_of_pod(&ctx, &pod)
                    {
                        queue.add(k);
                    }
                }
            }
            Event::Deployment(Err(error))
            | Event::ReplicaSet(Err(error))
            | Event::Pod(Err(error)) => {
                tracing::warn!(%error, "deployment controller watch failed; retrying");
            }
        }
        if deployments.synced() && replica_sets.synced() && pods.synced() && !*synced.borrow() {
            synced.send_replace(true);
        }
    }
}

/// The Deployment a controller reference names, if the index holds it with that uid.
fn resolve(ctx: &Context, namespace: &str, meta: &ObjectMeta) -> Option<Key> {
    let r = controller_of(meta)?;
    if r.kind != "Deployment" {
        return None;
    }
    let k = key(namespace, &r.name);
    let d = ctx.deployments.get(&k)?;
    (d.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(k)
}

fn owner_of_pod(ctx: &Context, pod: &Pod) -> Option<Key> {
    let ns = pod.namespace().unwrap_or_default();
    let r = controller_of(&pod.metadata)?;
    let rs = ctx.replica_sets.get(&key(&ns, &r.name))?;
    if rs.metadata.uid.as_deref() != Some(r.uid.as_str()) {
        return None;
    }
    resolve(ctx, &ns, &rs.metadata)
}

fn selector_of(d: &Deployment) -> Option<LabelSelector> {
    LabelSelector::from_label_selector(&d.spec.as_ref()?.selector).ok()
}

/// Deployments in the ReplicaSet's namespace whose selector matches it (for orphans).
fn matching_deployments(ctx: &Context, rs: &ReplicaSet) -> Vec<Key> {
    let ns = rs.namespace().unwrap_or_default();
    ctx.deployments
        .in_namespace(&ns)
        .iter()
        .filter(|d| {
            selector_of(d)
                .is_some_and(|s| !s.is_empty() && s.matches_labels(rs.metadata.labels.as_ref()))
        })
        .map(|d| key_of(d.as_ref()))
        .collect()
}

fn on_replica_set_change(ctx: &Context, queue: &WorkQueue<Key>, change: Change<ReplicaSet>) {
    match change {
        Change::Added(rs) => {
            let ns = rs.namespace().unwrap_or_default();
            match resolve(ctx, &ns, &rs.metadata) {
                Some(k) => queue.add(k),
                None if controller_of(&rs.metadata).is_none() => {
                    for k in matching_deployments(ctx, &rs) {
                        queue.add(k);
                    }
                }
                None => {}
            }
        }
        Change::Updated { old, new } => {
            if old.metadata.resource_version == new.metadata.resource_version {
                return;
            }
            let ns = new.namespace().unwrap_or_default();
            let ref_changed = controller_of(&old.metadata) != controller_of(&new.metadata);
            if ref_changed && let Some(k) = resolve(ctx, &ns, &old.metadata) {
                queue.add(k);
            }
            match resolve(ctx, &ns, &new.metadata) {
                Some(k) => queue.add(k),
                None if controller_of(&new.metadata).is_none()
                    && (ref_changed || old.metadata.labels != new.metadata.labels) =>
                {
                    for k in matching_deployments(ctx, &new) {
                        queue.add(k);
                    }
                }
                None => {}
            }
        }
        Change::Deleted(rs) => {
            let ns = rs.namespace().unwrap_or_default();
            if let Some(k) = resolve(ctx, &ns, &rs.metadata) {
                queue.add(k);
            }
        }
    }
}

/// The ReplicaSets `d` controls after adoption and release (upstream's
/// `getReplicaSetsForDeployment`).
async fn claim_replica_sets(
    ctx: &Context,
    d: &Deployment,
    selector: &LabelSelector,
) -> Result<Vec<ReplicaSet>, Error> {
    let ns = d.namespace().unwrap_or_default();
    let uid = d.metadata.uid.clone().unwrap_or_default();
    let mut candidates = ctx.replica_sets.controlled_by(&uid);
    candidates.extend(ctx.replica_sets.orphans(&ns));
    let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let name = d.name_any();
    let claimed = ownership::claim(
        &api,
        &controller_ref("apps/v1", "Deployment", &d.metadata),
        d.metadata.deletion_timestamp.is_some(),
        candidates,
        |rs| selector.matches_labels(rs.metadata.labels.as_ref()),
        || async {
            let fresh = deployments.get(&name).await?;
            Ok(fresh.metadata.uid == d.metadata.uid && fresh.metadata.deletion_timestamp.is_none())
        },
    )
    .await?;
    Ok(claimed.into_iter().map(|rs| (*rs).clone()).collect())
}

/// Syncs one Deployment (upstream's `syncDeployment`). Returns a requeue for the progress
/// deadline when a rollout is waiting on it.
pub async fn reconcile(d: Arc<Deployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let d_key = key_of(d.as_ref());
    let mut d = (*d).clone();
    let rollout = match Rollout::of(&d) {
        Ok(r) => r,
        Err(error) => return Ok(invalid(&d_key, error)),
    };
    let Some(selector) = selector_of(&d) else {
        tracing::warn!(deployment = %d_key, "invalid selector");
        return Ok(Action::await_change());
    };
    if selector.is_empty() {
        ctx.recorder.record(
            &events::reference(&d),
            EventType::Warning,
            "SelectingAll",
            "This deployment is selecting all pods. A non-empty selector is required.",
        );
        let status = d.status.get_or_insert_with(Default::default);
        if status.observed_generation.unwrap_or(0) < d.metadata.generation.unwrap_or(0) {
            status.observed_generation = d.metadata.generation;
            sync::write_status(&ctx, &mut d).await?;
        }
        return Ok(Action::await_change());
    }

    let rs_list = claim_replica_sets(&ctx, &d, &selector).await?;
    if d.metadata.deletion_timestamp.is_some() {
        let rss = sync::replica_sets(&ctx, &mut d, &rollout, &rs_list, false).await?;
        sync::sync_status(&ctx, &mut d, &rollout, &rss).await?;
        return Ok(Action::await_change());
    }
    if let Some(cond) = progress::paused_condition(&d, jiff::Timestamp::now()) {
        progress::set(d.status.get_or_insert_with(Default::default), cond);
        sync::write_status(&ctx, &mut d).await?;
    }
    if d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
        || sync::is_scaling_event(&rollout, &rs_list)
    {
        sync::sync(&ctx, &mut d, &rollout, &rs_list).await?;
        return Ok(Action::await_change());
    }
    let requeue = if rollout.rolling {
        rolling::rollout(&ctx, &mut d, &rollout, &rs_list).await?
    } else {
        recreate::rollout(&ctx, &mut d, &rollout, &rs_list).await?
    };
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

fn invalid(d_key: &str, error: IntOrPercentError) -> Action {
    // Validation rejects these; retrying would not help.
    tracing::warn!(deployment = %d_key, %error, "invalid rolling update parameters");
    Action::await_change()
}
