//! The ReplicaSet controller, as upstream's `pkg/controller/replicaset`: keeps
//! `spec.replicas` active pods matching the selector, adopting orphans and releasing pods that no
//! longer match, and reports `replicas`, `fullyLabeledReplicas`, `readyReplicas`,
//! `availableReplicas`, `observedGeneration` and the `ReplicaFailure` condition.
//!
//! - Event handlers on the shared cache's ReplicaSets and pods queue ReplicaSet keys; the cache
//!   groups pods by controller uid, so a sync looks at its own pods only.
//! - [`Expectations`] keep a sync from acting on a cache that has not yet seen the sync's own
//!   creations and deletions; the pod handler lowers them.
//! - [`ReplicaSetController`] implements the [`Controller`] contract: one ReplicaSet in, an
//!   [`Action`] (requeue for the time until a ready pod becomes available, never to poll) or an
//!   error (retried with backoff) out.
//! - The controller is generic over the owner kind ([`ReplicaOwner`]): [`ReplicaManager`] over
//!   ReplicaSets is [`ReplicaSetController`], over ReplicationControllers it is
//!   [`crate::replicationcontroller::ReplicationManager`], as upstream runs one controller for both.

pub mod owner;
pub mod ranking;
pub mod status;

pub use owner::ReplicaOwner;

use crate::{
    disruption_gate::DisruptionGate,
    runtime::{Action, Controller, WorkQueue},
    util::expectations::Expectations,
    util::ownership,
    util::pod_control::{PodChange, PodControl, Target},
};
use api::{
    pod::{controller_of, controller_ref},
    selector::LabelSelector,
};
use events::Recorder;
use informer::{Change, Informer, Informers, Key, Shared, Subscription, key, key_of, split_key};
use k8s_openapi::{
    api::{apps::v1::ReplicaSet, core::v1::Pod},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{Api, Client, ResourceExt, api::PostParams};
use std::{sync::Arc, time::Duration};

/// The event source name of the ReplicaSet controller, as upstream's.
pub const COMPONENT: &str = <ReplicaSet as ReplicaOwner>::COMPONENT;

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the ReplicaSet (or ReplicationController) controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How it runs: concurrent syncs (upstream's `--concurrent-replicaset-syncs` and
    /// `--concurrent-rc-syncs`, 5); retry delays of failed syncs.
    pub run: crate::runtime::Config<5>,
    /// Most pods created or deleted by one sync (upstream's `BurstReplicas`, 500).
    pub burst_replicas: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            run: Default::default(),
            burst_replicas: 500,
        }
    }
}

/// The replica controller over owners of kind `K`: the shared cache's owners and pods, its queue
/// of owner keys, and the expectations that keep a sync from acting on a cache that has not yet
/// seen the sync's own creations and deletions.
pub struct ReplicaManager<K: ReplicaOwner> {
    client: Client,
    config: Config,
    replica_sets: Informer<K>,
    pods: Informer<Pod>,
    expectations: Expectations,
    recorder: Recorder,
    queue: WorkQueue<Key>,
    /// Budget-aware updates: the pods of an old ReplicaSet of a Deployment that asks are
    /// deleted only as its budgets allow ([`crate::disruption_gate`]).
    gate: DisruptionGate,
}

/// The ReplicaSet controller.
pub type ReplicaSetController = ReplicaManager<ReplicaSet>;

impl<K: ReplicaOwner> Controller for ReplicaManager<K> {
    const NAME: &'static str = K::CONTROLLER;
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_rs = Arc::clone(self);
        let on_pod = Arc::clone(self);
        vec![
            self.replica_sets
                .subscribe(move |c| on_rs.replica_set_changed(c)),
            self.pods.subscribe(move |c| on_pod.pod_changed(c)),
            {
                let q = Arc::clone(self);
                self.gate.subscribe(move |key| q.queue.add(key))
            },
        ]
    }

    async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        match self.replica_sets.get(&key) {
            Some(rs) => self.sync(rs).await,
            None => {
                self.expectations.forget(&key);
                Ok(Action::await_change())
            }
        }
    }
}

impl<K: ReplicaOwner> ReplicaManager<K> {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), K::COMPONENT, None),
            queue: config.run.queue(),
            replica_sets: informers.get(),
            pods: informers.get(),
            expectations: Expectations::default(),
            gate: DisruptionGate::for_replica_sets(informers),
            client,
            config,
        })
    }

    /// Its disruption gate, whose default `--honor-disruption-budgets` sets.
    pub fn disruption_gate(&self) -> &DisruptionGate {
        &self.gate
    }

    // ---- event handlers (upstream's addPod/updatePod/deletePod and the ReplicaSet handlers) ----

    fn replica_set_changed(&self, change: &Change<K>) {
        let k = change.object().key();
        if let Change::Deleted(_) = change {
            self.expectations.forget(&k);
        }
        self.queue.add(k);
    }

    /// The owner a controller reference names, if the cache holds it with that uid.
    fn resolve(&self, namespace: &str, meta: &ObjectMeta) -> Option<Key> {
        let r = controller_of(meta)?;
        if r.kind != K::kind(&()) {
            return None;
        }
        let k = key(namespace, &r.name);
        let rs = self.replica_sets.get(&k)?;
        (rs.meta().uid.as_deref() == Some(r.uid.as_str())).then_some(k)
    }

    /// The owners in the pod's namespace whose selector matches it (for orphans).
    fn matching_replica_sets(&self, pod: &Pod) -> Vec<Key> {
        let ns = pod.namespace().unwrap_or_default();
        self.replica_sets
            .store()
            .in_namespace(&ns)
            .iter()
            .filter(|rs| {
                rs.selector().is_ok_and(|sel| {
                    !sel.is_empty() && sel.matches_labels(pod.metadata.labels.as_ref())
                })
            })
            .map(|rs| rs.key())
            .collect()
    }

    fn pod_deleted(&self, pod: &Pod) {
        let ns = pod.namespace().unwrap_or_default();
        if let Some(k) = self.resolve(&ns, &pod.metadata) {
            self.expectations.deletion_observed(&k, &key_of(pod));
            self.queue.add(k);
        }
    }

    fn pod_changed(&self, change: &Change<Pod>) {
        match change {
            Change::Added(pod) => {
                if pod.facts().deleting {
                    // A restarted controller may first see a pod already being deleted.
                    return self.pod_deleted(pod);
                }
                let ns = pod.namespace().unwrap_or_default();
                match self.resolve(&ns, &pod.metadata) {
                    Some(k) => {
                        self.expectations.creation_observed(&k);
                        self.queue.add(k);
                    }
                    None if controller_of(&pod.metadata).is_none() => {
                        for k in self.matching_replica_sets(pod) {
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
                let labels_changed = old.metadata.labels != new.metadata.labels;
                if new.facts().deleting {
                    // Graceful deletion: the pod is as good as gone for the ReplicaSet now.
                    self.pod_deleted(new);
                    if labels_changed {
                        self.pod_deleted(old);
                    }
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
                        && (labels_changed || ref_changed) =>
                    {
                        for k in self.matching_replica_sets(new) {
                            self.queue.add(k);
                        }
                    }
                    None => {}
                }
            }
            Change::Deleted(pod) => self.pod_deleted(pod),
        }
    }

    /// Syncs one owner: claims its pods, creates or deletes pods if its expectations are met,
    /// and writes its status.
    async fn sync(&self, rs: Shared<K>) -> Result<Action, Error> {
        let rs_key = rs.key();
        let (ns, name) = split_key(&rs_key);
        let needs_sync = self.expectations.satisfied(&rs_key);
        let selector: LabelSelector = match rs.selector() {
            Ok(s) => s,
            Err(error) => {
                // Validation prevents this; retrying would not help.
                tracing::warn!(kind = %K::kind(&()), key = %rs_key, %error, "invalid selector");
                return Ok(Action::await_change());
            }
        };
        let uid = rs.meta().uid.clone().unwrap_or_default();
        let mut candidates = self.pods.store().controlled_by(&uid);
        candidates.extend(self.pods.store().orphans(ns));
        candidates.retain(|p| p.facts().active);
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let controller = owner_ref::<K>(rs.meta());
        let rs_api: Api<K> = Api::namespaced(self.client.clone(), ns);
        let pods = ownership::claim(
            &pods_api,
            &controller,
            rs.meta().deletion_timestamp.is_some(),
            candidates,
            |p| !selector.is_empty() && selector.matches_labels(p.metadata.labels.as_ref()),
            || async {
                let fresh = rs_api.get(name).await?;
                Ok(fresh.meta().uid == rs.meta().uid && fresh.meta().deletion_timestamp.is_none())
            },
        )
        .await?;

        let desired = rs.replicas().max(0) as usize;
        let mut failure = None;
        if needs_sync
            && rs.meta().deletion_timestamp.is_none()
            && let Err(e) = self.manage_replicas(&rs, &rs_key, &pods, desired).await
        {
            let reason = if pods.len() < desired {
                "FailedCreate"
            } else {
                "FailedDelete"
            };
            failure = Some((reason, e));
        }

        let now = clock::now();
        let template_labels = rs
            .template()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref());
        let counts = status::count(&pods, template_labels, rs.min_ready_seconds(), now);
        let current = rs.replica_status();
        // The generation counts as observed only by a sync whose pod list holds every pod this
        // controller created: with creates in flight the status may count fewer pods than
        // exist, and a Deployment that scaled this ReplicaSet down counts it by its status
        // once the generation is observed (issue 43). Upstream advances it on every sync.
        let observed = if needs_sync {
            rs.meta().generation
        } else {
            current.as_ref().and_then(|s| s.observed_generation)
        };
        let next = status::next_status(
            current.as_ref(),
            &counts,
            observed,
            failure
                .as_ref()
                .map(|(reason, e)| (*reason, crate::util::api_error::message(e))),
            now,
        );
        if current.as_ref() != Some(&next) {
            let mut updated = K::clone(&rs);
            updated.set_replica_status(next);
            rs_api
                .replace_status(name, &PostParams::default(), &updated)
                .await?;
        }
        if let Some((_, e)) = failure {
            return Err(e.into());
        }
        if !needs_sync && let Some(after) = self.expectations.expires_in(&rs_key) {
            return Ok(Action::requeue(after));
        }
        Ok(match counts.next_available {
            // Availability is measured in whole seconds of lastTransitionTime; a few milliseconds
            // late is fine, early would need another round.
            Some(d) => Action::requeue(d.unsigned_abs() + Duration::from_millis(10)),
            None => Action::await_change(),
        })
    }

    /// Creates or deletes pods so that `pods` approaches `desired`, at most `burst_replicas` at a
    /// time.
    async fn manage_replicas(
        &self,
        rs: &K,
        rs_key: &str,
        pods: &[Shared<Pod>],
        desired: usize,
    ) -> Result<(), kube::Error> {
        let control = PodControl::new(&self.client, &self.recorder, rs, rs_key, &self.expectations);
        if pods.len() < desired {
            let diff = (desired - pods.len()).min(self.config.burst_replicas);
            let pods = vec![pod_from_template(rs); diff];
            control.create_pods(pods, 1).await.into_result()
        } else if pods.len() > desired {
            let diff = (pods.len() - desired).min(self.config.burst_replicas);
            let related = self.related_pods(rs, pods);
            let mut victims = ranking::pods_to_delete(pods, &related, diff);
            if self.gate.replica_set_honors(rs.meta()) {
                let reference = events::reference(rs);
                victims = self
                    .gate
                    .ask(&self.recorder, &reference, rs_key, victims, |p| {
                        Some(Arc::clone(p))
                    })
                    .await?
                    .allowed;
            }
            let changes = victims
                .iter()
                .map(|p| PodChange::Delete(Target::of(p)))
                .collect();
            control.change(changes, false).await.into_result()
        } else {
            Ok(())
        }
    }

    /// The active pods of `rs` and of every owner with the same controller: a Deployment's
    /// scale-down spreads over nodes as a whole (upstream's `getIndirectlyRelatedPods`).
    fn related_pods(&self, rs: &K, own: &[Shared<Pod>]) -> Vec<Shared<Pod>> {
        let Some(owner) = controller_of(rs.meta()) else {
            return own.to_vec();
        };
        let mut related = own.to_vec();
        for sibling in self.replica_sets.store().controlled_by(&owner.uid) {
            if sibling.meta().uid == rs.meta().uid {
                continue;
            }
            let uid = sibling.meta().uid.clone().unwrap_or_default();
            related.extend(
                self.pods
                    .store()
                    .controlled_by(&uid)
                    .into_iter()
                    .filter(|p| p.facts().active),
            );
        }
        related
    }
}

/// The controller reference to an owner of kind `K` with metadata `meta`.
fn owner_ref<K: ReplicaOwner>(meta: &ObjectMeta) -> OwnerReference {
    controller_ref(&K::api_version(&()), &K::kind(&()), meta)
}

/// A pod for `rs` from its template (upstream's `GetPodFromTemplate`).
fn pod_from_template<K: ReplicaOwner>(rs: &K) -> Pod {
    let template = rs.template().cloned().unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", rs.name_any())),
            namespace: rs.namespace(),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner_ref::<K>(rs.meta())]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}
