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
//! Beyond upstream: in-place updates, pausing a rollout ([`PAUSED`]), and replacing a pod stuck
//! not ready on an old revision once the template moves on (upstream #67250).

pub mod pod_control;
pub mod pods;
pub mod status;
pub mod sync;
pub mod update;
pub mod volumes;

use crate::{
    history,
    owner_index::{Change, Ingest, Key, OwnerIndex, key as make_key, key_of},
    ownership,
    runtime::{Action, Backoff, WorkQueue, run_workers},
};
use api::{
    pod::{controller_of, controller_ref},
    selector::LabelSelector,
};
use futures::StreamExt;
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
    runtime::{WatchStreamExt, watcher},
};
use pods::Ordinals;
use serde_json::Value;
use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};
use sync::{Children, Syncer, delete_key, in_place_key, revision_of};
use tokio::sync::watch;

/// `"true"` pauses the set's rolling update on a real cluster, whose API lacks rollwright's
/// `spec.updateStrategy.rollingUpdate.paused`: no pod of an old revision is replaced while
/// paused; missing ordinals are still created.
pub const PAUSED: &str = "rollwright.io/paused";
/// `InPlaceIfPossible` here (or in `spec.updateStrategy.rollingUpdate.podUpdatePolicy`) lets a
/// rolling update that changes only images patch pods instead of recreating them.
pub use crate::daemonset::POD_UPDATE_POLICY;

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
}

impl Set {
    /// Reads a StatefulSet from its JSON, keeping the rollwright fields the typed API lacks.
    pub fn from_json(value: Value) -> Result<Self, String> {
        let rolling = value.pointer("/spec/updateStrategy/rollingUpdate");
        let annotation = |name: &str| {
            value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
        };
        let policy = rolling
            .and_then(|r| r.get("podUpdatePolicy"))
            .and_then(Value::as_str);
        // The API server defaults the field to `Recreate`, so either saying InPlaceIfPossible
        // opts in.
        let in_place = [policy, annotation(POD_UPDATE_POLICY)].contains(&Some("InPlaceIfPossible"));
        let paused = rolling
            .and_then(|r| r.get("paused"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
            || annotation(PAUSED) == Some("true");
        let sts: StatefulSet = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let selector = LabelSelector::from_label_selector(
            &sts.spec
                .as_ref()
                .map(|s| s.selector.clone())
                .unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Self {
            sts,
            selector,
            in_place,
            paused,
        })
    }

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
    /// Concurrent syncs of different sets (upstream: 5).
    pub workers: usize,
    /// Retry delays of failed syncs.
    pub backoff: Backoff,
    /// How long unobserved creations, deletions and in-place updates hold a set back at most.
    pub expectations_ttl: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: 5,
            backoff: Backoff::default(),
            expectations_ttl: crate::expectations::EXPECTATIONS_TTL,
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

/// The controller: indexes fed by the watches, the queue, and the [`Syncer`].
pub struct Controller {
    client: Client,
    config: Config,
    sets: RwLock<HashMap<Key, Arc<Set>>>,
    pods: OwnerIndex<Pod>,
    revisions: OwnerIndex<ControllerRevision>,
    claims: OwnerIndex<PersistentVolumeClaim>,
    syncer: Syncer,
    queue: WorkQueue<Key>,
    /// Set once every watch has listed: before that, events only fill the indexes.
    ready: AtomicBool,
}

impl Controller {
    /// A controller on `client`; [`run`] runs it.
    pub fn new(client: Client, config: Config) -> Self {
        Self {
            syncer: Syncer::new(client.clone(), &config),
            queue: WorkQueue::new(config.backoff),
            client,
            config,
            sets: RwLock::default(),
            pods: OwnerIndex::default(),
            revisions: OwnerIndex::default(),
            claims: OwnerIndex::default(),
            ready: AtomicBool::new(false),
        }
    }

    fn set(&self, key: &Key) -> Option<Arc<Set>> {
        self.sets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    fn all_sets(&self) -> Vec<Arc<Set>> {
        self.sets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The set a controller reference names, if we hold it (same uid).
    fn resolve(&self, namespace: &str, meta: &ObjectMeta) -> Option<Key> {
        let r = controller_of(meta)?;
        if r.kind != "StatefulSet" {
            return None;
        }
        let key = make_key(namespace, &r.name);
        self.set(&key).filter(|s| s.uid() == r.uid).map(|_| key)
    }

    /// Sets in `namespace` whose selector matches `labels` (for orphans and claims).
    fn matching(&self, namespace: &str, meta: &ObjectMeta) -> Vec<Key> {
        self.all_sets()
            .iter()
            .filter(|s| s.sts.metadata.namespace.as_deref() == Some(namespace))
            .filter(|s| !s.selector.is_empty() && s.selector.matches_labels(meta.labels.as_ref()))
            .map(|s| s.key())
            .collect()
    }

    fn on_set(
        &self,
        event: watcher::Event<DynamicObject>,
        listing: &mut Option<HashSet<Key>>,
    ) -> bool {
        let put = |obj: DynamicObject| -> Option<Key> {
            let value = serde_json::to_value(&obj).ok()?;
            match Set::from_json(value) {
                Ok(s) => {
                    let key = s.key();
                    self.sets
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key.clone(), Arc::new(s));
                    Some(key)
                }
                Err(e) => {
                    tracing::warn!(name = obj.name_any(), error = %e, "ignoring an unreadable StatefulSet");
                    None
                }
            }
        };
        match event {
            watcher::Event::Init => *listing = Some(HashSet::new()),
            watcher::Event::InitApply(obj) => {
                if let Some(key) = put(obj) {
                    listing.get_or_insert_default().insert(key.clone());
                    self.queue.add(key);
                }
            }
            watcher::Event::InitDone => {
                let seen = listing.take().unwrap_or_default();
                let mut sets = self.sets.write().unwrap_or_else(|e| e.into_inner());
                let gone: Vec<Key> = sets
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    sets.remove(&k);
                    self.queue.add(k);
                }
                return true;
            }
            watcher::Event::Apply(obj) => {
                if let Some(key) = put(obj) {
                    self.queue.add(key);
                }
            }
            watcher::Event::Delete(obj) => {
                let key = key_of(&obj);
                self.sets
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
                self.queue.add(key);
            }
        }
        false
    }

    fn on_pod(&self, change: Change<Pod>) {
        if !self.is_ready() {
            return;
        }
        let expectations = self.syncer.expectations();
        match change {
            Change::Added(pod) => {
                let ns = pod.namespace().unwrap_or_default();
                match self.resolve(&ns, &pod.metadata) {
                    Some(key) => {
                        if pod.metadata.deletion_timestamp.is_some() {
                            expectations
                                .deletion_observed(&delete_key(&key), &key_of(pod.as_ref()));
                        } else {
                            expectations.creation_observed(&key);
                        }
                        self.queue.add(key);
                    }
                    None if controller_of(&pod.metadata).is_none() => {
                        for key in self.matching(&ns, &pod.metadata) {
                            self.queue.add(key);
                        }
                    }
                    None => {}
                }
            }
            Change::Updated { old, new } => {
                let ns = new.namespace().unwrap_or_default();
                let owner = self.resolve(&ns, &new.metadata);
                if let Some(key) = &owner {
                    if new.metadata.deletion_timestamp.is_some() {
                        expectations.deletion_observed(&delete_key(key), &key_of(new.as_ref()));
                    }
                    if revision_of(&old) != revision_of(&new) {
                        expectations.deletion_observed(&in_place_key(key), &key_of(new.as_ref()));
                    }
                    self.queue.add(key.clone());
                }
                if let Some(key) = self
                    .resolve(&ns, &old.metadata)
                    .filter(|k| Some(k) != owner.as_ref())
                {
                    self.queue.add(key);
                }
                if controller_of(&new.metadata).is_none() {
                    for key in self.matching(&ns, &new.metadata) {
                        self.queue.add(key);
                    }
                }
            }
            Change::Deleted(pod) => {
                let ns = pod.namespace().unwrap_or_default();
                if let Some(key) = self.resolve(&ns, &pod.metadata) {
                    expectations.deletion_observed(&delete_key(&key), &key_of(pod.as_ref()));
                    self.queue.add(key);
                }
            }
        }
    }

    /// A revision or claim changed: its controller, or the sets whose selector matches it.
    fn on_child(&self, meta: &ObjectMeta) {
        if !self.is_ready() {
            return;
        }
        let ns = meta.namespace.clone().unwrap_or_default();
        match self.resolve(&ns, meta) {
            Some(key) => self.queue.add(key),
            None => {
                for key in self.matching(&ns, meta) {
                    self.queue.add(key);
                }
            }
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

    /// Adopts the orphans of `index` that `matches` and releases children that no longer do;
    /// returns what the set controls.
    async fn claim<K>(
        &self,
        set: &Set,
        index: &OwnerIndex<K>,
        matches: impl Fn(&K) -> bool,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let ns = set.sts.namespace().unwrap_or_default();
        let mut candidates = index.controlled_by(set.uid());
        candidates.extend(index.orphans(&ns).into_iter().filter(|k| matches(k)));
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

    /// Reads the set under `key` and its children, then syncs it ([`Syncer::sync`]).
    pub async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        let Some(set) = self.set(&key) else {
            self.syncer.forget(&key);
            return Ok(Action::await_change());
        };
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
        let ns = set.sts.namespace().unwrap_or_default();
        let claims = self
            .claims
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
            )
            .await
    }
}

/// Follows one watch (kube's default back-off retries it for ever): `handle` takes each event
/// and says whether the initial list is complete; `on_synced` runs the first time it is.
async fn follow<K>(
    api: Api<K>,
    what: &'static str,
    mut handle: impl FnMut(watcher::Event<K>) -> bool,
    on_synced: impl Fn(),
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut synced = false;
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(e) => {
                if handle(e) && !synced {
                    synced = true;
                    on_synced();
                }
            }
            Err(e) => tracing::debug!(error = %e, watch = what, "watch failed; retrying"),
        }
    }
}

/// Feeds `index` from a watch of `K`, calling `changed` for each change once listed.
async fn follow_index<K>(
    client: Client,
    index: OwnerIndex<K>,
    what: &'static str,
    changed: impl Fn(Change<K>),
    on_synced: impl Fn(),
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let mut ingest = Ingest::new(index);
    follow(
        Api::all(client),
        what,
        move |e| {
            for change in ingest.handle(e) {
                changed(change);
            }
            ingest.synced()
        },
        on_synced,
    )
    .await
}

/// Runs the StatefulSet controller on `client` until dropped: four watches (StatefulSets, Pods,
/// ControllerRevisions, PersistentVolumeClaims) feed the indexes, and `config.workers` workers
/// sync sets once every watch has listed. A sync cut short is safe: the next controller finds
/// the state on the server and finishes the job.
pub async fn run(client: Client, config: Config) {
    let ctl = Arc::new(Controller::new(client.clone(), config));
    let (synced_tx, mut synced_rx) = watch::channel(0usize);
    let mark_synced = || synced_tx.send_modify(|n| *n += 1);
    let sets = {
        let ctl = Arc::clone(&ctl);
        let api: Api<DynamicObject> =
            Api::all_with(client.clone(), &ApiResource::erase::<StatefulSet>(&()));
        let mut listing = None;
        follow(
            api,
            "statefulset",
            move |e| ctl.on_set(e, &mut listing),
            &mark_synced,
        )
    };
    let pods = {
        let c = Arc::clone(&ctl);
        follow_index(
            client.clone(),
            ctl.pods.clone(),
            "pod",
            move |ch| c.on_pod(ch),
            &mark_synced,
        )
    };
    let revisions = {
        let c = Arc::clone(&ctl);
        follow_index(
            client.clone(),
            ctl.revisions.clone(),
            "controllerrevision",
            move |ch| c.on_child(&changed_object(&ch).metadata),
            &mark_synced,
        )
    };
    let claims = {
        let c = Arc::clone(&ctl);
        follow_index(
            client.clone(),
            ctl.claims.clone(),
            "persistentvolumeclaim",
            move |ch| c.on_child(&changed_object(&ch).metadata),
            &mark_synced,
        )
    };
    let workers = {
        let ctl = Arc::clone(&ctl);
        async move {
            if synced_rx.wait_for(|n| *n >= 4).await.is_err() {
                return;
            }
            ctl.ready.store(true, Ordering::Release);
            for s in ctl.all_sets() {
                ctl.queue.add(s.key());
            }
            let workers = ctl.config.workers;
            run_workers(
                "statefulset-controller",
                ctl.queue.clone(),
                workers,
                |key| {
                    let ctl = Arc::clone(&ctl);
                    async move { ctl.reconcile(key).await }
                },
            )
            .await
        }
    };
    tokio::join!(sets, pods, revisions, claims, workers);
}

fn changed_object<K>(change: &Change<K>) -> &Arc<K> {
    match change {
        Change::Added(o) | Change::Deleted(o) | Change::Updated { new: o, .. } => o,
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
