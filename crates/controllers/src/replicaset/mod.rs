//! The ReplicaSet controller, as upstream's `pkg/controller/replicaset`: keeps
//! `spec.replicas` active pods matching the selector, adopting orphans and releasing pods that no
//! longer match, and reports `replicas`, `fullyLabeledReplicas`, `readyReplicas`,
//! `availableReplicas`, `observedGeneration` and the `ReplicaFailure` condition.
//!
//! - Watches of ReplicaSets and pods feed [`OwnerIndex`]es (pods grouped by controller uid, so a
//!   sync looks at its own pods only) and queue ReplicaSet keys on a [`WorkQueue`].
//! - [`Expectations`] keep a sync from acting on a cache that has not yet seen the sync's own
//!   creations and deletions; the pod watch lowers them.
//! - [`reconcile`] is the contract: one ReplicaSet in, an [`Action`] (requeue for the time until
//!   a ready pod becomes available, never to poll) or an error (retried with backoff) out.

pub mod ranking;
pub mod status;

use crate::{
    expectations::Expectations,
    owner_index::{Change, Ingest, Key, OwnerIndex, key, key_of, split_key},
    ownership,
    runtime::{Action, Backoff, WorkQueue, run_workers},
};
use api::{
    pod::{controller_of, controller_ref, is_active},
    selector::LabelSelector,
};
use events::{EventType, Recorder};
use futures::{StreamExt, future::join_all};
use k8s_openapi::{
    api::{apps::v1::ReplicaSet, core::v1::Pod},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use std::{sync::Arc, time::Duration};
use tokio::sync::watch;

/// The event source name, as upstream's.
pub const COMPONENT: &str = "replicaset-controller";

/// Why a sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
}

/// How the ReplicaSet controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Concurrent syncs (upstream's `--concurrent-replicaset-syncs`, 5).
    pub workers: usize,
    /// Most pods created or deleted by one sync (upstream's `BurstReplicas`, 500).
    pub burst_replicas: usize,
    /// Retry delays of failed syncs.
    pub backoff: Backoff,
    /// A delay before each pod event is applied: zero in production; tests set it to play a
    /// slow watch, which is what expectations protect against.
    pub pod_watch_lag: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: 5,
            burst_replicas: 500,
            backoff: Backoff::default(),
            pod_watch_lag: Duration::ZERO,
        }
    }
}

/// What every sync shares.
pub struct Context {
    client: Client,
    config: Config,
    replica_sets: OwnerIndex<ReplicaSet>,
    pods: OwnerIndex<Pod>,
    expectations: Expectations,
    recorder: Recorder,
}

fn error_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Runs the ReplicaSet controller until dropped (like every controller of this crate). Syncs
/// start once both watches have listed (upstream's `WaitForCacheSync`), so nothing is decided on
/// a half-filled cache.
pub async fn run(client: Client, config: Config) {
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), COMPONENT, None),
        client,
        config,
        replica_sets: OwnerIndex::default(),
        pods: OwnerIndex::default(),
        expectations: Expectations::default(),
    });
    let queue: WorkQueue<Key> = WorkQueue::new(ctx.config.backoff);
    let (synced_tx, mut synced_rx) = watch::channel(false);
    let ingest = ingest(Arc::clone(&ctx), queue.clone(), synced_tx);
    let workers = async {
        if synced_rx.wait_for(|s| *s).await.is_err() {
            return;
        }
        run_workers("replicaset", queue.clone(), ctx.config.workers, |k: Key| {
            let ctx = Arc::clone(&ctx);
            async move {
                match ctx.replica_sets.get(&k) {
                    Some(rs) => reconcile(rs, ctx).await,
                    None => {
                        ctx.expectations.forget(&k);
                        Ok(Action::await_change())
                    }
                }
            }
        })
        .await
    };
    tokio::join!(ingest, workers);
}

enum Event {
    ReplicaSet(Result<watcher::Event<ReplicaSet>, watcher::Error>),
    Pod(Result<watcher::Event<Pod>, watcher::Error>),
}

/// Applies watch events to the indexes and expectations, and queues the ReplicaSets they concern
/// (upstream's `addPod`/`updatePod`/`deletePod` and the ReplicaSet handlers).
async fn ingest(ctx: Arc<Context>, queue: WorkQueue<Key>, synced: watch::Sender<bool>) {
    let rs_events = watcher(
        Api::<ReplicaSet>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(Event::ReplicaSet)
    .boxed();
    let pod_events = watcher(
        Api::<Pod>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(Event::Pod)
    .boxed();
    let mut events = futures::stream::select(rs_events, pod_events);
    let mut rs_ingest = Ingest::new(ctx.replica_sets.clone());
    let mut pod_ingest = Ingest::new(ctx.pods.clone());
    while let Some(event) = events.next().await {
        match event {
            Event::ReplicaSet(Ok(e)) => {
                for change in rs_ingest.handle(e) {
                    match change {
                        Change::Added(rs) | Change::Updated { new: rs, .. } => {
                            queue.add(key_of(rs.as_ref()))
                        }
                        Change::Deleted(rs) => {
                            let k = key_of(rs.as_ref());
                            ctx.expectations.forget(&k);
                            queue.add(k);
                        }
                    }
                }
            }
            Event::Pod(Ok(e)) => {
                if !ctx.config.pod_watch_lag.is_zero() {
                    tokio::time::sleep(ctx.config.pod_watch_lag).await;
                }
                for change in pod_ingest.handle(e) {
                    on_pod_change(&ctx, &queue, change);
                }
            }
            Event::ReplicaSet(Err(error)) | Event::Pod(Err(error)) => {
                tracing::warn!(%error, "replicaset controller watch failed; retrying");
            }
        }
        if rs_ingest.synced() && pod_ingest.synced() && !*synced.borrow() {
            synced.send_replace(true);
        }
    }
}

/// The ReplicaSet a controller reference names, if the index holds it with that uid.
fn resolve(ctx: &Context, namespace: &str, meta: &ObjectMeta) -> Option<Key> {
    let r = controller_of(meta)?;
    if r.kind != "ReplicaSet" {
        return None;
    }
    let k = key(namespace, &r.name);
    let rs = ctx.replica_sets.get(&k)?;
    (rs.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(k)
}

/// The ReplicaSets in the pod's namespace whose selector matches it (for orphans).
fn matching_replica_sets(ctx: &Context, pod: &Pod) -> Vec<Key> {
    let ns = pod.namespace().unwrap_or_default();
    ctx.replica_sets
        .in_namespace(&ns)
        .iter()
        .filter(|rs| {
            LabelSelector::from_label_selector(
                &rs.spec
                    .as_ref()
                    .map(|s| s.selector.clone())
                    .unwrap_or_default(),
            )
            .is_ok_and(|sel| !sel.is_empty() && sel.matches_labels(pod.metadata.labels.as_ref()))
        })
        .map(|rs| key_of(rs.as_ref()))
        .collect()
}

fn pod_deleted(ctx: &Context, queue: &WorkQueue<Key>, pod: &Pod) {
    let ns = pod.namespace().unwrap_or_default();
    if let Some(k) = resolve(ctx, &ns, &pod.metadata) {
        ctx.expectations.deletion_observed(&k, &key_of(pod));
        queue.add(k);
    }
}

fn on_pod_change(ctx: &Context, queue: &WorkQueue<Key>, change: Change<Pod>) {
    match change {
        Change::Added(pod) => {
            if pod.metadata.deletion_timestamp.is_some() {
                // A restarted controller may first see a pod already being deleted.
                return pod_deleted(ctx, queue, &pod);
            }
            let ns = pod.namespace().unwrap_or_default();
            match resolve(ctx, &ns, &pod.metadata) {
                Some(k) => {
                    ctx.expectations.creation_observed(&k);
                    queue.add(k);
                }
                None if controller_of(&pod.metadata).is_none() => {
                    for k in matching_replica_sets(ctx, &pod) {
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
            let labels_changed = old.metadata.labels != new.metadata.labels;
            if new.metadata.deletion_timestamp.is_some() {
                // Graceful deletion: the pod is as good as gone for the ReplicaSet now.
                pod_deleted(ctx, queue, &new);
                if labels_changed {
                    pod_deleted(ctx, queue, &old);
                }
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
                    && (labels_changed || ref_changed) =>
                {
                    for k in matching_replica_sets(ctx, &new) {
                        queue.add(k);
                    }
                }
                None => {}
            }
        }
        Change::Deleted(pod) => pod_deleted(ctx, queue, &pod),
    }
}

/// Syncs one ReplicaSet: claims its pods, creates or deletes pods if its expectations are met,
/// and writes its status.
pub async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let rs_key = key_of(rs.as_ref());
    let (ns, name) = split_key(&rs_key);
    let needs_sync = ctx.expectations.satisfied(&rs_key);
    let spec = rs.spec.clone().unwrap_or_default();
    let selector = match LabelSelector::from_label_selector(&spec.selector) {
        Ok(s) => s,
        Err(error) => {
            // Validation prevents this; retrying would not help.
            tracing::warn!(replicaset = %rs_key, %error, "invalid selector");
            return Ok(Action::await_change());
        }
    };
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let mut candidates: Vec<Arc<Pod>> = ctx.pods.controlled_by(&uid);
    candidates.extend(ctx.pods.orphans(ns));
    candidates.retain(|p| is_active(p));
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let controller = controller_ref("apps/v1", "ReplicaSet", &rs.metadata);
    let rs_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), ns);
    let pods =
        ownership::claim(
            &pods_api,
            &controller,
            rs.metadata.deletion_timestamp.is_some(),
            candidates,
            |p| !selector.is_empty() && selector.matches_labels(p.metadata.labels.as_ref()),
            || async {
                let fresh = rs_api.get(name).await?;
                Ok(fresh.metadata.uid == rs.metadata.uid
                    && fresh.metadata.deletion_timestamp.is_none())
            },
        )
        .await?;

    let desired = spec.replicas.unwrap_or(1).max(0) as usize;
    let mut failure = None;
    if needs_sync
        && rs.metadata.deletion_timestamp.is_none()
        && let Err(e) = manage_replicas(&ctx, &rs, &rs_key, &pods, desired).await
    {
        let reason = if pods.len() < desired {
            "FailedCreate"
        } else {
            "FailedDelete"
        };
        failure = Some((reason, e));
    }

    let now = jiff::Timestamp::now();
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let counts = status::count(
        &pods,
        template_labels,
        spec.min_ready_seconds.unwrap_or(0),
        now,
    );
    let next = status::next_status(
        rs.status.as_ref(),
        &counts,
        rs.metadata.generation,
        failure
            .as_ref()
            .map(|(reason, e)| (*reason, error_message(e))),
        now,
    );
    if rs.status.as_ref() != Some(&next) {
        let mut updated = (*rs).clone();
        updated.status = Some(next);
        rs_api
            .replace_status(name, &PostParams::default(), &updated)
            .await?;
    }
    if let Some((_, e)) = failure {
        return Err(e.into());
    }
    if !needs_sync && let Some(after) = ctx.expectations.expires_in(&rs_key) {
        return Ok(Action::requeue(after));
    }
    Ok(match counts.next_available {
        // Availability is measured in whole seconds of lastTransitionTime; a few milliseconds
        // late is fine, early would need another round.
        Some(d) => Action::requeue(d.unsigned_abs() + Duration::from_millis(10)),
        None => Action::await_change(),
    })
}

/// A pod for `rs` from its template (upstream's `GetPodFromTemplate`).
fn pod_from_template(rs: &ReplicaSet) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", rs.name_any())),
            namespace: rs.namespace(),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![controller_ref("apps/v1", "ReplicaSet", &rs.metadata)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// Creates or deletes pods so that `pods` approaches `desired`, at most `burst_replicas` at a
/// time, recording expectations first.
async fn manage_replicas(
    ctx: &Context,
    rs: &ReplicaSet,
    rs_key: &str,
    pods: &[Arc<Pod>],
    desired: usize,
) -> Result<(), kube::Error> {
    let ns = rs.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let reference = events::reference(rs);
    if pods.len() < desired {
        let diff = (desired - pods.len()).min(ctx.config.burst_replicas);
        ctx.expectations.expect_creations(rs_key, diff);
        let template = pod_from_template(rs);
        let (created, error) = status::slow_start(diff, 1, || {
            let api = api.clone();
            let template = template.clone();
            async move { api.create(&PostParams::default(), &template).await }
        })
        .await;
        for pod in &created {
            ctx.recorder.record(
                &reference,
                EventType::Normal,
                "SuccessfulCreate",
                format!("Created pod: {}", pod.name_any()),
            );
        }
        // Pods never created will never be observed.
        ctx.expectations
            .lower_creations(rs_key, diff - created.len());
        if let Some(e) = error {
            ctx.recorder.record(
                &reference,
                EventType::Warning,
                "FailedCreate",
                format!("Error creating: {}", error_message(&e)),
            );
            return Err(e);
        }
    } else if pods.len() > desired {
        let diff = (pods.len() - desired).min(ctx.config.burst_replicas);
        let related = related_pods(ctx, rs, pods);
        let victims = ranking::pods_to_delete(pods, &related, diff);
        ctx.expectations
            .expect_deletions(rs_key, victims.iter().map(|p| key_of(p.as_ref())));
        let results = join_all(victims.iter().map(|pod| {
            let api = api.clone();
            async move {
                (
                    pod,
                    api.delete(&pod.name_any(), &DeleteParams::default()).await,
                )
            }
        }))
        .await;
        let mut first_error = None;
        for (pod, result) in results {
            match result {
                Ok(_) => ctx.recorder.record(
                    &reference,
                    EventType::Normal,
                    "SuccessfulDelete",
                    format!("Deleted pod: {}", pod.name_any()),
                ),
                Err(e) => {
                    ctx.expectations
                        .deletion_observed(rs_key, &key_of(pod.as_ref()));
                    if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                        ctx.recorder.record(
                            &reference,
                            EventType::Warning,
                            "FailedDelete",
                            format!("Error deleting: {}", error_message(&e)),
                        );
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
    }
    Ok(())
}

/// The active pods of `rs` and of every ReplicaSet with the same controller: a Deployment's
/// scale-down spreads over nodes as a whole (upstream's `getIndirectlyRelatedPods`).
fn related_pods(ctx: &Context, rs: &ReplicaSet, own: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    let Some(owner) = controller_of(&rs.metadata) else {
        return own.to_vec();
    };
    let mut related = own.to_vec();
    for sibling in ctx.replica_sets.controlled_by(&owner.uid) {
        if sibling.metadata.uid == rs.metadata.uid {
            continue;
        }
        let uid = sibling.metadata.uid.clone().unwrap_or_default();
        related.extend(
            ctx.pods
                .controlled_by(&uid)
                .into_iter()
                .filter(|p| is_active(p)),
        );
    }
    related
}
