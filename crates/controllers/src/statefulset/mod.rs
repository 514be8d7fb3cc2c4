//! The StatefulSet controller, as upstream's `pkg/controller/statefulset`: pods with a stable
//! identity (`<set>-<ordinal>`) and stable storage (a claim per template and ordinal), created
//! and deleted in order or in parallel, rolled from the highest ordinal down to the partition
//! within `maxUnavailable` (seed 003), in place when only images change (seed 004), with the
//! template history in ControllerRevisions ([`crate::history`]).
//!
//! Structure, like the Deployment's:
//! - this file dispatches: it reads the set ([`Set`]) and turns one sync's decisions into API
//!   calls;
//! - [`pods`]: identity and the order of creation and deletion (the scaling pass);
//! - [`update`]: the rolling update (partition, maxUnavailable, in-place);
//! - [`status`]: the counts and revisions in `status`;
//! - [`volumes`]: claims from `volumeClaimTemplates` and their retention policy.
//!
//! Beyond upstream: in-place updates, pausing a rollout ([`PAUSED`]), replacing a pod stuck
//! not ready on an old revision once the template moves on (upstream #67250), and paced
//! rollouts ([`crate::pacing`]).

pub mod identity;
pub mod pods;
pub mod status;
pub mod sync;
pub mod update;
pub mod volumes;

use crate::{
    history,
    runtime::{Action, Controller, WorkQueue},
    switches::Switches,
    util::owners::{Owner, Owners, parse_selector},
    util::ownership,
};
use api::{pod::controller_ref, selector::LabelSelector};
use informer::{Change, Informer, Informers, Key, Shared, Subscription, key_of};
use k8s_openapi::{
    api::{
        apps::v1::{ControllerRevision, StatefulSet},
        core::v1::{PersistentVolumeClaim, Pod},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject},
};
use pods::Ordinals;
use serde_json::Value;
use std::{sync::Arc, time::Duration};
use sync::{Children, Syncer};

pub use crate::switches::{PAUSED, POD_UPDATE_POLICY};

/// A StatefulSet as the controller keeps it: the typed object plus what is derived from it once
/// per change.
#[derive(Clone, Debug)]
pub struct Set {
    /// The object.
    pub sts: StatefulSet,
    /// Its selector, parsed.
    pub selector: LabelSelector,
    /// Whether image-only updates patch pods in place.
    pub in_place: bool,
    /// Whether its rolling update is paused.
    pub paused: bool,
    /// Its pacing annotations ([`crate::pacing`]).
    pub pacing: crate::pacing::Pacing,
}

impl Owner for Set {
    const KIND: &'static str = "StatefulSet";

    /// Reads a StatefulSet from its JSON, keeping the rollwright fields the typed API lacks.
    fn from_json(value: Value) -> Result<Self, String> {
        let Switches { in_place, paused } = Switches::read(&value);
        let sts: StatefulSet = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let selector = parse_selector(sts.spec.as_ref().map(|s| &s.selector))?;
        let pacing = crate::pacing::Pacing::read(sts.metadata.annotations.as_ref());
        Ok(Self {
            sts,
            selector,
            in_place,
            paused,
            pacing,
        })
    }

    fn meta(&self) -> &ObjectMeta {
        &self.sts.metadata
    }

    fn selector(&self) -> &LabelSelector {
        &self.selector
    }
}

impl Set {
    /// `namespace/name`.
    pub fn key(&self) -> Key {
        key_of(&self.sts)
    }

    /// The set's name.
    pub fn name(&self) -> &str {
        self.sts.metadata.name.as_deref().unwrap_or("")
    }

    /// The set's uid.
    pub fn uid(&self) -> &str {
        self.sts.metadata.uid.as_deref().unwrap_or("")
    }

    /// The ordinals it keeps.
    pub fn ordinals(&self) -> Ordinals {
        let spec = self.sts.spec.as_ref();
        Ordinals {
            start: spec
                .and_then(|s| s.ordinals.as_ref())
                .and_then(|o| o.start)
                .unwrap_or(0)
                .max(0),
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1).max(0),
        }
    }

    /// `OrderedReady` (the default) rather than `Parallel`.
    pub fn ordered(&self) -> bool {
        self.sts
            .spec
            .as_ref()
            .and_then(|s| s.pod_management_policy.as_deref())
            != Some("Parallel")
    }

    /// `RollingUpdate` (the default) rather than `OnDelete`.
    pub fn rolling(&self) -> bool {
        self.sts
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate")
    }

    /// The lowest ordinal a rolling update may replace: `start + partition`.
    pub fn partition_ordinal(&self) -> i32 {
        let partition = self
            .sts
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0)
            .max(0);
        self.ordinals().start.saturating_add(partition)
    }

    /// `maxUnavailable` resolved against `replicas` ([`update::max_unavailable`]).
    pub fn max_unavailable(&self) -> Result<i32, api::intstr::IntOrPercentError> {
        let value = self
            .sts
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.max_unavailable.as_ref())
            .and_then(|v| serde_json::to_value(v).ok());
        update::max_unavailable(value.as_ref(), self.ordinals().replicas)
    }

    /// `minReadySeconds`.
    pub fn min_ready_seconds(&self) -> i32 {
        self.sts
            .spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    /// Whether a rolling update may replace pods of old revisions now.
    pub fn replaces_old_pods(&self) -> bool {
        self.rolling() && !self.paused
    }
}

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How it runs: concurrent syncs of different sets (upstream: 5); retry delays of failed syncs.
    pub run: crate::runtime::Config<5>,
    /// How long unobserved creations, deletions and in-place updates hold a set back at most.
    pub expectations_ttl: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            run: Default::default(),
            expectations_ttl: crate::util::expectations::EXPECTATIONS_TTL,
        }
    }
}

/// Why a sync failed (it is retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    /// The history could not be brought up to date.
    #[error(transparent)]
    History(#[from] history::Error),
    /// The set cannot be acted on as it stands.
    #[error("StatefulSet {0}: {1}")]
    Invalid(Key, String),
    /// A claim of an earlier life of the ordinal is still being deleted; the pod waits for it
    /// to go so that it does not start on storage about to vanish.
    #[error("PersistentVolumeClaim {0} is being deleted; its pod waits")]
    ClaimTerminating(String),
    /// Some pod writes failed.
    #[error("{failed} pod operations for StatefulSet {key} failed, the first: {first}")]
    Pods {
        /// The set.
        key: Key,
        /// How many failed.
        failed: usize,
        /// The first failure.
        first: String,
    },
}

/// The controller: its handles on the shared cache, the queue, and the [`Syncer`].
pub struct StatefulSetController {
    client: Client,
    /// StatefulSets as dynamic objects: rollwright's `podUpdatePolicy` and `paused` are not in
    /// the typed API.
    stateful_sets: Informer<DynamicObject>,
    /// Each set read once per change, with what is derived from it.
    sets: Arc<Owners<Set>>,
    pods: Informer<Pod>,
    revisions: Informer<ControllerRevision>,
    claims: Informer<PersistentVolumeClaim>,
    syncer: Syncer,
    /// Budget-aware updates ([`crate::disruption_gate`]).
    gate: Arc<crate::disruption_gate::DisruptionGate>,
    queue: WorkQueue<Key>,
    autorollback: crate::autorollback::AutoRollback,
}

impl Controller for StatefulSetController {
    const NAME: &'static str = "statefulset";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let (s, p, r, c) = (
            Arc::clone(self),
            Arc::clone(self),
            Arc::clone(self),
            Arc::clone(self),
        );
        vec![
            self.stateful_sets
                .subscribe(move |ch| s.queue.add(s.sets.apply(ch))),
            self.pods.subscribe(move |ch| p.on_pod(ch)),
            self.revisions.subscribe(move |ch| r.on_child(ch)),
            self.claims.subscribe(move |ch| c.on_child(ch)),
            {
                let q = Arc::clone(self);
                self.gate.subscribe(move |key| q.queue.add(key))
            },
        ]
    }

    async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        let Some(set) = self.sets.get(&key) else {
            self.syncer.expectations().forget(&key);
            return Ok(Action::await_change());
        };
        // Before the pods are read: see `Syncer::satisfied`.
        let expectations_met = self.syncer.satisfied(&key);
        let name = set.name().to_string();
        let member = |meta: &ObjectMeta| {
            set.selector.matches_labels(meta.labels.as_ref())
                && meta
                    .name
                    .as_deref()
                    .and_then(pods::parent_and_ordinal)
                    .is_some_and(|(parent, _)| parent == name)
        };
        let pods = self
            .claim(&set, &self.pods, |p: &Pod| member(&p.metadata))
            .await?;
        let revisions = self
            .claim(&set, &self.revisions, |r: &ControllerRevision| {
                set.selector.matches_labels(r.metadata.labels.as_ref())
            })
            .await?;
        // Automatic rollback (rollwright, issue #22): a failed rollout's template reverted.
        let state = crate::autorollback::RolloutState {
            paused: set.paused,
            threshold: set.max_unavailable().unwrap_or(1),
            completed: set
                .sts
                .status
                .as_ref()
                .and_then(|s| s.current_revision.as_deref()),
        };
        let rollback = self.autorollback.with_revisions(
            crate::autorollback::WorkloadKind::StatefulSet,
            &set.sts,
            state,
            &revisions,
            &pods,
        );
        if rollback.await? == crate::autorollback::Outcome::Stop {
            return Ok(Action::await_change());
        }
        let ns = set.sts.namespace().unwrap_or_default();
        let claims = self
            .claims
            .store()
            .in_namespace(&ns)
            .into_iter()
            .map(|c| (c.name_any(), c))
            .collect();
        self.syncer
            .sync(
                &set,
                Children {
                    pods,
                    revisions,
                    claims,
                },
                expectations_met,
            )
            .await
    }
}

impl StatefulSetController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        let gate = Arc::new(crate::disruption_gate::DisruptionGate::new(informers));
        let sets: Arc<Owners<Set>> = Arc::default();
        Arc::new(Self {
            syncer: Syncer::new(client.clone(), &config)
                .with_gate(Arc::clone(&gate))
                .holding(Arc::clone(&sets)),
            gate,
            autorollback: crate::autorollback::AutoRollback::new(
                informers,
                client.clone(),
                "statefulset-controller",
            ),
            queue: config.run.queue(),
            client,
            stateful_sets: informers.dynamic(&ApiResource::erase::<StatefulSet>(&())),
            sets,
            pods: informers.get(),
            revisions: informers.get(),
            claims: informers.get(),
        })
    }

    /// Its disruption gate, whose default `--honor-disruption-budgets` sets.
    pub fn disruption_gate(&self) -> &crate::disruption_gate::DisruptionGate {
        &self.gate
    }

    fn on_pod(&self, change: &Change<Pod>) {
        self.syncer
            .expectations()
            .observe(change, |meta| self.sets.resolve(meta));
        for key in self.sets.affected(change) {
            self.queue.add(key);
        }
    }

    /// A revision or claim changed: its controller, or the sets that may adopt it.
    fn on_child<K: informer::Object>(&self, change: &Change<K>) {
        for key in self.sets.affected(change) {
            self.queue.add(key);
        }
    }

    async fn can_adopt(&self, set: &Set) -> Result<bool, kube::Error> {
        // Re-read from the server, not the cache: a set being deleted must not adopt.
        let api: Api<StatefulSet> = Api::namespaced(
            self.client.clone(),
            &set.sts.namespace().unwrap_or_default(),
        );
        let fresh = api.get(set.name()).await?;
        Ok(fresh.metadata.uid.as_deref() == Some(set.uid())
            && fresh.metadata.deletion_timestamp.is_none())
    }

    /// Adopts the orphans of `informer` that `matches` and releases children that no longer
    /// do; returns what the set controls.
    async fn claim<K>(
        &self,
        set: &Set,
        informer: &Informer<K>,
        matches: impl Fn(&K) -> bool,
    ) -> Result<Vec<Shared<K>>, Error>
    where
        K: informer::Object<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        let ns = set.sts.namespace().unwrap_or_default();
        let store = informer.store();
        let mut candidates = store.controlled_by(set.uid());
        candidates.extend(store.orphans(&ns).into_iter().filter(|k| matches(k)));
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        let controller = controller_ref("apps/v1", "StatefulSet", &set.sts.metadata);
        let deleting = set.sts.metadata.deletion_timestamp.is_some();
        Ok(
            ownership::claim(&api, &controller, deleting, candidates, matches, || {
                self.can_adopt(set)
            })
            .await?,
        )
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(spec: Value, annotations: Value) -> Set {
        let mut full = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "annotations": annotations},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "serviceName": "web",
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut full["spec"], spec) {
            base.extend(extra);
        }
        Set::from_json(full).unwrap()
    }

    #[test]
    fn reads_policy_strategy_and_the_rollwright_switches() {
        let plain = set(json!({}), json!({}));
        assert!(plain.ordered() && plain.rolling() && !plain.in_place && !plain.paused);
        assert_eq!(
            plain.ordinals(),
            Ordinals {
                start: 0,
                replicas: 1
            }
        );
        assert_eq!(plain.partition_ordinal(), 0);
        assert_eq!(plain.max_unavailable().unwrap(), 1);

        let s = set(
            json!({"replicas": 10, "podManagementPolicy": "Parallel", "ordinals": {"start": 5},
                   "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                       "partition": 3, "maxUnavailable": "25%", "podUpdatePolicy": "InPlaceIfPossible", "paused": true}}}),
            json!({}),
        );
        assert!(!s.ordered() && s.in_place && s.paused && !s.replaces_old_pods());
        assert_eq!(
            s.ordinals(),
            Ordinals {
                start: 5,
                replicas: 10
            }
        );
        assert_eq!(s.partition_ordinal(), 8);
        assert_eq!(s.max_unavailable().unwrap(), 2);

        let annotated = set(
            json!({"updateStrategy": {"type": "OnDelete"}}),
            json!({PAUSED: "true", POD_UPDATE_POLICY: "InPlaceIfPossible"}),
        );
        assert!(annotated.paused && annotated.in_place && !annotated.rolling());
        let defaulted = set(
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "Recreate"}}}),
            json!({POD_UPDATE_POLICY: "InPlaceIfPossible"}),
        );
        assert!(defaulted.in_place);
    }
}
