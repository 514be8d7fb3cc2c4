//! The DaemonSet controller, as upstream's `pkg/controller/daemon`: one daemon pod on every node
//! that should run it, rolling updates within `maxUnavailable`/`maxSurge`, OnDelete, and the
//! template history in ControllerRevisions ([`crate::history`]).
//!
//! Structure:
//! - event handlers on the shared cache's DaemonSets, Nodes, Pods and ControllerRevisions queue
//!   the DaemonSets an event concerns (the cache groups pods and revisions by controller uid, so
//!   a sync costs O(nodes + this DaemonSet's pods), never O(DaemonSets x nodes x pods));
//! - [`DaemonSetController`]'s reconcile turns one key into API calls and an [`Action`]: it builds the
//!   history, then — only once its previous creations and deletions have been observed
//!   ([`Expectations`]) — fixes each node ([`nodes`]), and only if that needed nothing, takes one
//!   rolling update step ([`update`]); it always writes the status ([`status`]);
//! - it requeues itself for what only time changes (a pod becoming available after
//!   `minReadySeconds`, a failed pod's back-off, stale expectations) and never polls.
//!
//! Beyond upstream: in-place updates (`podUpdatePolicy: InPlaceIfPossible`, or the
//! [`POD_UPDATE_POLICY`] annotation), rollouts that do not stall on dead nodes
//! ([`SKIP_UNREACHABLE_NODES`]), and paced rollouts ([`crate::pacing`]: at most
//! `rollwright.io/max-updating` new pods in flight, `rollwright.io/min-update-interval` between
//! two updates, upstream #111073).

pub mod nodes;
pub mod status;
pub mod update;

use crate::{
    disruption_gate::{self, DisruptionGate, Refusal},
    history::{self, CONTROLLER_REVISION_HASH},
    pacing::{self, Budget, Hold, Pacing, Rounding},
    runtime::{Action, Backoff, Controller, WorkQueue},
    switches::Switches,
    util::api_error::is_status,
    util::expectations::PodExpectations,
    util::owners::{Owner, Owners, parse_selector},
    util::ownership,
    util::pod_control::{PodChange, PodControl, Target},
};
use api::{
    intstr::{IntOrPercent, scaled_value_or},
    pod::controller_ref,
    selector::LabelSelector,
};
use events::{EventType, Recorder};
use informer::{Cached, Change, Informer, Informers, Key, Shared, Store, Subscription, key_of};
use k8s_openapi::{
    api::{
        apps::v1::{ControllerRevision, DaemonSet},
        core::v1::{Node, Pod},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use nodes::{Eligibility, Placement};
use serde_json::{Value, json};
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::time::Instant;

/// Opt-in annotation (`"true"`): pods on nodes that are NotReady or unreachable neither use up
/// `maxUnavailable` nor block the rollout; they are updated when their node returns
/// (upstream #117204).
pub const SKIP_UNREACHABLE_NODES: &str = "rollwright.io/skip-unreachable-nodes";
pub use crate::switches::{PAUSED, POD_UPDATE_POLICY};
/// The annotation upstream's API server keeps the legacy template generation in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How it runs: concurrent syncs of different DaemonSets (upstream: 2); retry delays of failed
    /// syncs.
    pub run: crate::runtime::Config<2>,
    /// Most pods created or deleted per sync (upstream's `burstReplicas`, 250).
    pub burst_replicas: usize,
    /// Back-off between deleting failed daemon pods on one node, so a pod the kubelet keeps
    /// rejecting is not recreated in a hot loop (upstream: 1s doubling to 15min).
    pub failed_pod_backoff: Backoff,
    /// How long unobserved creations/deletions hold a DaemonSet back at most.
    pub expectations_ttl: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            run: Default::default(),
            burst_replicas: 250,
            failed_pod_backoff: Backoff {
                base: Duration::from_secs(1),
                max: Duration::from_secs(15 * 60),
            },
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
    /// The DaemonSet cannot be acted on as it stands.
    #[error("DaemonSet {0}: {1}")]
    Invalid(Key, String),
    /// Some pod creations, deletions or updates failed.
    #[error("{failed} pod operations for DaemonSet {key} failed, the first: {first}")]
    Pods {
        /// The DaemonSet.
        key: Key,
        /// How many failed.
        failed: usize,
        /// The first failure.
        first: String,
    },
}

/// A DaemonSet as the controller keeps it: the typed object plus what is derived from it once
/// per change rather than once per node or pod.
#[derive(Clone, Debug)]
pub struct Daemon {
    /// The object.
    pub ds: DaemonSet,
    /// Its selector, parsed.
    pub selector: LabelSelector,
    /// Its placement rules.
    pub eligibility: Eligibility,
    /// Whether image-only updates patch pods in place.
    pub in_place: bool,
    /// Whether the rolling update is paused ([`PAUSED`]).
    pub paused: bool,
    /// Its pacing annotations ([`crate::pacing`]).
    pub pacing: Pacing,
}

impl Owner for Daemon {
    const KIND: &'static str = "DaemonSet";

    /// Reads a DaemonSet from its JSON, keeping the rollwright fields the typed API lacks.
    fn from_json(value: Value) -> Result<Self, String> {
        let Switches { in_place, paused } = Switches::read(&value);
        let ds: DaemonSet = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let selector = parse_selector(ds.spec.as_ref().map(|s| &s.selector))?;
        let eligibility = Eligibility::new(
            &ds.spec
                .as_ref()
                .map(|s| s.template.clone())
                .unwrap_or_default(),
        );
        let pacing = Pacing::read(ds.metadata.annotations.as_ref());
        Ok(Self {
            ds,
            selector,
            eligibility,
            in_place,
            paused,
            pacing,
        })
    }

    fn meta(&self) -> &ObjectMeta {
        &self.ds.metadata
    }

    fn selector(&self) -> &LabelSelector {
        &self.selector
    }
}

impl Daemon {
    fn key(&self) -> Key {
        key_of(&self.ds)
    }

    fn uid(&self) -> &str {
        self.ds.metadata.uid.as_deref().unwrap_or("")
    }

    fn min_ready_seconds(&self) -> i32 {
        self.ds
            .spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn is_rolling_update(&self) -> bool {
        let t = self
            .ds
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.type_.as_deref());
        t.is_none_or(|t| t == "RollingUpdate")
    }

    /// `(maxSurge, maxUnavailable)` against `desired` nodes, rounded up; both 0 means 1
    /// unavailable, as upstream's `updatedDesiredNodeCounts`.
    fn fenceposts(&self, desired: i32) -> Result<(i32, i32), Error> {
        if !self.is_rolling_update() {
            return Ok((0, 0));
        }
        let rolling = self
            .ds
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref());
        let as_value = |v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>| {
            v.and_then(|v| serde_json::to_value(v).ok())
        };
        let invalid = |e: api::intstr::IntOrPercentError| Error::Invalid(self.key(), e.to_string());
        let surge = scaled_value_or(
            as_value(rolling.and_then(|r| r.max_surge.as_ref())).as_ref(),
            IntOrPercent::Int(0),
            desired,
            true,
        )
        .map_err(invalid)?;
        let mut unavailable = scaled_value_or(
            as_value(rolling.and_then(|r| r.max_unavailable.as_ref())).as_ref(),
            IntOrPercent::Int(1),
            desired,
            true,
        )
        .map_err(invalid)?;
        if desired > 0 && surge == 0 && unavailable == 0 {
            unavailable = 1;
        }
        Ok((surge, unavailable))
    }

    fn allows_surge(&self) -> bool {
        self.fenceposts(1).is_ok_and(|(surge, _)| surge > 0)
    }

    fn template_generation(&self) -> Option<i64> {
        self.ds
            .metadata
            .annotations
            .as_ref()?
            .get(TEMPLATE_GENERATION)?
            .parse()
            .ok()
    }

    fn skips_dead_nodes(&self) -> bool {
        self.ds
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SKIP_UNREACHABLE_NODES))
            .is_some_and(|v| v == "true")
    }
}

/// Whether a node looks dead: its `Ready` condition is not True, or it is tainted unreachable.
fn node_is_dead(node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let unreachable = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable"));
    !ready || unreachable
}

/// Per-node back-off for deleting failed pods (upstream's `failedPodsBackoff`).
struct FailedPodBackoff {
    policy: Backoff,
    entries: Mutex<HashMap<String, (Duration, Instant)>>,
}

impl FailedPodBackoff {
    /// The time left if `key` is backing off.
    fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (delay, at) = entries.get(key)?;
        let elapsed = now.saturating_duration_since(*at);
        (elapsed < *delay).then(|| *delay - elapsed)
    }

    /// Records one more failure: the delay doubles up to the max, and starts over after a
    /// quiet period of twice the max.
    fn next(&self, key: &str, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries
            .entry(key.to_string())
            .or_insert((Duration::ZERO, now));
        let expired = now.saturating_duration_since(entry.1) > self.policy.max * 2;
        entry.0 = if entry.0.is_zero() || expired {
            self.policy.base
        } else {
            (entry.0 * 2).min(self.policy.max)
        };
        entry.1 = now;
    }
}

/// The controller: its handles on the shared cache, the queue, and what syncs share.
pub struct DaemonSetController {
    client: Client,
    config: Config,
    /// DaemonSets as dynamic objects: rollwright's `podUpdatePolicy` is not in the typed API.
    daemon_sets: Informer<DynamicObject>,
    /// Each DaemonSet read once per change, with what is derived from it.
    daemons: Owners<Daemon>,
    nodes: Informer<Node>,
    pods: Informer<Pod>,
    revisions: Informer<ControllerRevision>,
    expectations: PodExpectations,
    failed_backoff: FailedPodBackoff,
    queue: WorkQueue<Key>,
    recorder: Recorder,
    autorollback: crate::autorollback::AutoRollback,
    /// Budget-aware updates ([`crate::disruption_gate`]).
    gate: DisruptionGate,
}

/// What one sync works on, computed once.
struct Sync<'a> {
    daemon: &'a Daemon,
    key: Key,
    placements: Vec<(Shared<Node>, Placement)>,
    pods: Vec<Shared<Pod>>,
    by_node: nodes::ByNode,
    /// The nodes pods are on or meant for that are not in `placements` (deleted nodes, and `""`
    /// for pods naming none), in name order.
    unplaced: Vec<String>,
    hash: String,
    /// The template generation as the `pod-template-generation` label writes it.
    generation: Option<String>,
    now: jiff::Timestamp,
}

impl Sync<'_> {
    fn is_new(&self, pod: &Pod) -> bool {
        update::is_pod_updated(pod, &self.hash, self.generation.as_deref())
    }

    fn is_available(&self, pod: &Cached<Pod>) -> bool {
        self.until_available(pod).is_some_and(|d| d.is_zero())
    }

    /// From the cache's per-pod facts, derived once per watch event.
    fn until_available(&self, pod: &Cached<Pod>) -> Option<Duration> {
        let facts = pod.facts();
        if facts.restarting_in_place {
            return None;
        }
        let d = facts.until_available(self.daemon.min_ready_seconds(), self.now)?;
        Some(Duration::try_from(d).unwrap_or(Duration::ZERO))
    }

    fn pod(&self, name: &str) -> Option<&Shared<Pod>> {
        self.pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }
}

impl Controller for DaemonSetController {
    const NAME: &'static str = "daemonset";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let (d, n, p, r) = (
            Arc::clone(self),
            Arc::clone(self),
            Arc::clone(self),
            Arc::clone(self),
        );
        vec![
            self.daemon_sets
                .subscribe(move |c| d.queue.add(d.daemons.apply(c))),
            self.nodes.subscribe(move |c| match c {
                Change::Added(new) => n.node_changed(None, Some(new.object())),
                Change::Updated { old, new } => {
                    n.node_changed(Some(old.object()), Some(new.object()))
                }
                Change::Deleted(old) => n.node_changed(Some(old.object()), None),
            }),
            self.pods.subscribe(move |c| p.on_pod(c)),
            self.revisions.subscribe(move |c| r.on_revision(c)),
            {
                let q = Arc::clone(self);
                self.gate.subscribe(move |key| q.queue.add(key))
            },
        ]
    }

    async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        self.sync(key).await
    }
}

impl DaemonSetController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), "daemonset-controller", None),
            autorollback: crate::autorollback::AutoRollback::new(
                informers,
                client.clone(),
                "daemonset-controller",
            ),
            client,
            queue: config.run.queue(),
            expectations: PodExpectations::new(config.expectations_ttl),
            failed_backoff: FailedPodBackoff {
                policy: config.failed_pod_backoff,
                entries: Mutex::new(HashMap::new()),
            },
            config,
            daemon_sets: informers.dynamic(&ApiResource::erase::<DaemonSet>(&())),
            daemons: Owners::default(),
            nodes: informers.get(),
            pods: informers.get(),
            revisions: informers.get(),
            gate: DisruptionGate::new(informers),
        })
    }

    /// Its disruption gate, whose default `--honor-disruption-budgets` sets.
    pub fn disruption_gate(&self) -> &DisruptionGate {
        &self.gate
    }

    // ---- watch events ----

    fn node_changed(&self, old: Option<&Node>, new: Option<&Node>) {
        if let (Some(o), Some(n)) = (old, new) {
            // Heartbeats change only condition times: nothing a DaemonSet decides on.
            let taints = |x: &Node| x.spec.as_ref().and_then(|s| s.taints.clone());
            if o.metadata.labels == n.metadata.labels
                && taints(o) == taints(n)
                && node_is_dead(o) == node_is_dead(n)
            {
                return;
            }
        }
        for d in self.daemons.all() {
            let before = old.map(|n| d.eligibility.check(n));
            let after = new.map(|n| d.eligibility.check(n));
            let dead_changed =
                d.skips_dead_nodes() && old.map(node_is_dead) != new.map(node_is_dead);
            let relevant =
                |p: Option<Placement>| p.is_some_and(|p| p.should_run || p.should_continue_running);
            if before != after && (relevant(before) || relevant(after)) || dead_changed {
                self.queue.add(d.key());
            }
        }
    }

    fn on_pod(&self, change: &Change<Pod>) {
        self.expectations
            .observe(change, |meta| self.daemons.resolve(meta));
        for key in self.daemons.affected(change) {
            self.queue.add(key);
        }
    }

    fn on_revision(&self, change: &Change<ControllerRevision>) {
        for key in self.daemons.affected(change) {
            self.queue.add(key);
        }
    }

    // ---- the sync ----

    /// Brings the DaemonSet under `key` one step closer to its spec. The contract:
    /// - never acts on a cache that has not yet shown its own previous creations and deletions
    ///   (then it only refreshes the status, without raising `observedGeneration`);
    /// - fixes nodes first (missing, failed, duplicate, evicted pods) and takes a rolling update
    ///   step only when no node needed fixing, so the two never overshoot together;
    /// - returns a requeue for the next moment time alone changes something, else waits for a
    ///   watch event.
    async fn sync(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        let Some(daemon) = self.daemons.get(&key) else {
            self.expectations.forget(&key);
            return Ok(Action::await_change());
        };
        let ds = &daemon.ds;
        if daemon.selector.is_empty() {
            self.recorder.record(
                &events::reference(ds),
                EventType::Warning,
                "SelectingAll",
                "This daemon set is selecting all pods. A non-empty selector is required.",
            );
            return Ok(Action::await_change());
        }
        // The history of a DaemonSet being deleted may already be gone or orphaned; upstream
        // does not compute its status either.
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let ns = ds.namespace().unwrap_or_default();
        // Read before the pods are: a creation observed while this sync awaits (adoption, the
        // history) would otherwise satisfy the expectations of a snapshot taken before that pod
        // was in it, and `manage` would create a second daemon pod on its node (seen under load;
        // upstream checks its expectations before listing too).
        let satisfied = self.expectations.satisfied(&key);
        let pods = self.claim(&daemon, self.pods.store()).await?;
        let revisions = self.claim(&daemon, self.revisions.store()).await?;
        // Automatic rollback (rollwright, issue #22): a failed rollout's template reverted.
        let desired = ds.status.as_ref().map_or(0, |s| s.desired_number_scheduled);
        let unavailable = daemon.fenceposts(desired).map_or(1, |(_, u)| u);
        let state = crate::autorollback::RolloutState {
            paused: daemon.paused,
            threshold: unavailable,
            completed: None,
        };
        let rollback = self.autorollback.with_revisions(
            crate::autorollback::WorkloadKind::DaemonSet,
            ds,
            state,
            &revisions,
            &pods,
        );
        if rollback.await? == crate::autorollback::Outcome::Stop {
            return Ok(Action::await_change());
        }
        let template = ds
            .spec
            .as_ref()
            .map(|s| serde_json::to_value(&s.template))
            .transpose()
            .map_err(|e| Error::Invalid(key.clone(), e.to_string()))?
            .unwrap_or(Value::Null);
        let collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
        let owner = history::Owner {
            meta: &ds.metadata,
            api_version: "apps/v1",
            kind: "DaemonSet",
            template: &template,
            collision_count,
        };
        let revisions_api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &ns);
        let constructed = match history::construct(&revisions_api, &owner, revisions).await {
            Err(history::Error::Collision(name)) => {
                let daemonsets: Api<DaemonSet> = Api::namespaced(self.client.clone(), &ns);
                history::bump_collision_count(&daemonsets, &ds.name_any(), collision_count).await?;
                return Err(history::Error::Collision(name).into());
            }
            other => other?,
        };
        if !constructed.duplicates.is_empty() {
            self.merge_duplicates(&pods, &constructed).await?;
            history::delete_duplicates(&revisions_api, &constructed).await?;
        }

        let mut nodes = self.nodes.store().list();
        // In name order, as the nodes' creation and update order should not depend on hashing.
        nodes.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let placements: Vec<(Shared<Node>, Placement)> = nodes
            .into_iter()
            .map(|n| {
                let p = daemon.eligibility.check(&n);
                (n, p)
            })
            .collect();
        let by_node = nodes::group_by_node(&pods);
        let unplaced = {
            let known: HashSet<&str> = placements
                .iter()
                .filter_map(|(n, _)| n.metadata.name.as_deref())
                .collect();
            let mut unplaced: Vec<String> = by_node
                .keys()
                .filter(|n| !known.contains(n.as_str()))
                .cloned()
                .collect();
            unplaced.sort_unstable();
            unplaced
        };
        let sync = Sync {
            daemon: &daemon,
            key: key.clone(),
            placements,
            pods,
            by_node,
            unplaced,
            hash: constructed.hash().to_string(),
            generation: daemon.template_generation().map(|g| g.to_string()),
            now: clock::now(),
        };
        let mut requeue = Action::await_change();
        // A ready pod becoming available (`minReadySeconds` after it turned ready) can move the
        // rollout on, a surge pod beside an old one included, yet no event says when: come back
        // then. (The status counts only each node's oldest pod, so its wait misses surge pods;
        // upstream requeues `minReadySeconds` after any pod turns ready.)
        if let Some(wait) = sync
            .pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| sync.until_available(p))
            .filter(|d| !d.is_zero())
            .min()
        {
            requeue.requeue_by(wait);
        }
        if !satisfied {
            if let Some(d) = self.expectations.expires_in(&key) {
                requeue.requeue_by(d);
            }
            self.update_status(&sync, false, None, None, &mut requeue)
                .await?;
            return Ok(requeue);
        }
        // The rolling update step plans on the same snapshot as `manage`: only when `manage`
        // changed nothing is that snapshot still the cluster's (otherwise the step could delete
        // a pod `manage` just deleted, once the deletion's event has satisfied the expectations
        // mid-sync). The events of whatever `manage` did queue the next sync.
        let mut result = self.manage(&sync, &mut requeue).await;
        // What holds the rollout back, when this sync judged it (`None`: it did not, and the
        // stored condition stands).
        let mut pace: Option<Option<Hold>> = None;
        // What a disruption budget holds back, when the rolling step asked the budgets.
        let mut held: Option<Option<Refusal>> = None;
        if result.as_ref().is_ok_and(|acted| !acted) && self.expectations.satisfied(&key) {
            if daemon.is_rolling_update() && !daemon.paused {
                let step = self
                    .rolling_update(&sync, &constructed, &mut requeue, &mut held)
                    .await;
                result = match step {
                    Ok((acted, hold)) => {
                        pace = Some(hold);
                        Ok(acted)
                    }
                    Err(e) => Err(e),
                };
            } else {
                pace = Some(None);
            }
        }
        let mut result = result.map(|_| ());
        if result.is_ok() {
            result = self
                .cleanup_history(&sync, &revisions_api, &constructed)
                .await;
        }
        let status = self
            .update_status(
                &sync,
                true,
                pace.as_ref().map(Option::as_ref),
                held.as_ref().map(Option::as_ref),
                &mut requeue,
            )
            .await;
        result?;
        status?;
        Ok(requeue)
    }

    async fn can_adopt(&self, daemon: &Daemon) -> Result<bool, kube::Error> {
        // Re-read from the server, not the cache: an owner being deleted must not adopt.
        let api: Api<DaemonSet> = Api::namespaced(
            self.client.clone(),
            &daemon.ds.namespace().unwrap_or_default(),
        );
        let fresh = api.get(&daemon.ds.name_any()).await?;
        Ok(fresh.metadata.uid.as_deref() == Some(daemon.uid())
            && fresh.metadata.deletion_timestamp.is_none())
    }

    /// Adopts the orphans of `index` the DaemonSet's selector matches and releases its children
    /// it no longer matches (pods and ControllerRevisions alike); returns what it controls.
    async fn claim<K>(&self, daemon: &Daemon, index: &Store<K>) -> Result<Vec<Shared<K>>, Error>
    where
        K: informer::Object<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        let ns = daemon.ds.namespace().unwrap_or_default();
        let matches = |k: &K| daemon.selector.matches_labels(k.meta().labels.as_ref());
        let mut candidates = index.controlled_by(daemon.uid());
        candidates.extend(index.orphans(&ns).into_iter().filter(|k| matches(k)));

        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        let controller = controller_ref("apps/v1", "DaemonSet", &daemon.ds.metadata);
        let claimed = ownership::claim(&api, &controller, false, candidates, matches, || {
            self.can_adopt(daemon)
        })
        .await?;
        Ok(claimed)
    }

    /// Moves pods labelled with a duplicate revision's hash onto the kept revision's hash, so
    /// deleting the duplicate does not make them look old. (Upstream relabels every pod not on
    /// the kept hash, old ones included, which would hide them from the rolling update.)
    async fn merge_duplicates(
        &self,
        pods: &[Shared<Pod>],
        constructed: &history::Constructed,
    ) -> Result<(), Error> {
        let keep = constructed.hash();
        let dup_hashes: HashSet<&str> = constructed
            .duplicates
            .iter()
            .filter_map(|r| history::hash_of(&r.metadata))
            .collect();
        for pod in pods.iter().filter(|p| {
            history::hash_of(&p.metadata).is_some_and(|h| dup_hashes.contains(h) && h != keep)
        }) {
            let api: Api<Pod> =
                Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
            let patch = json!({"metadata": {"labels": {CONTROLLER_REVISION_HASH: keep}}});
            match api
                .patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Per node: create, delete failed/duplicate/evicted pods (upstream's `manage`).
    /// Fixes every node (missing, failed, duplicate, evicted pods); says whether it issued any
    /// change.
    async fn manage(&self, sync: &Sync<'_>, requeue: &mut Action) -> Result<bool, Error> {
        let daemon = sync.daemon;
        let surge = daemon.allows_surge();
        let mut create = Vec::new();
        let mut delete = Vec::new();
        let now = Instant::now();
        for (node, placement) in &sync.placements {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let actions = nodes::pods_should_be_on_node(
                *placement,
                sync.by_node.get(name),
                surge,
                |p| sync.is_new(p),
                |p| sync.is_available(p),
            );
            if actions.create {
                create.push(name.to_string());
            }
            delete.extend(actions.delete);
            if actions.failed.is_empty() {
                continue;
            }
            let backoff_key = format!("{}/{name}", daemon.uid());
            for failed in actions.failed {
                if let Some(left) = self.failed_backoff.remaining(&backoff_key, now) {
                    requeue.requeue_by(left);
                    continue;
                }
                self.failed_backoff.next(&backoff_key, now);
                let msg = format!(
                    "Found failed daemon pod {}/{failed} on node {name}, will try to kill it",
                    daemon.ds.namespace().unwrap_or_default()
                );
                self.recorder.record(
                    &events::reference(&daemon.ds),
                    EventType::Warning,
                    "FailedDaemonPod",
                    msg,
                );
                delete.push(failed);
            }
        }
        // Pods meant for a node that no longer exists are never scheduled, and only bound pods
        // are garbage collected by the pod GC: delete them here, as upstream.
        for pod in sync
            .unplaced
            .iter()
            .filter_map(|n| sync.by_node.get(n))
            .flatten()
        {
            let unscheduled = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty);
            if unscheduled && pod.metadata.deletion_timestamp.is_none() {
                delete.push(pod.name_any());
            }
        }
        self.sync_nodes(sync, delete, create, Vec::new()).await
    }

    /// One step of the RollingUpdate strategy, paced ([`Self::budget`]); says whether it
    /// issued anything and what pacing held back.
    async fn rolling_update(
        &self,
        sync: &Sync<'_>,
        constructed: &history::Constructed,
        requeue: &mut Action,
        held: &mut Option<Option<Refusal>>,
    ) -> Result<(bool, Option<Hold>), Error> {
        let daemon = sync.daemon;
        // Every node with pods or that should run one, in name order: the placements are, and
        // so are the few unplaced nodes, which a stable sort merges in one pass.
        let mut nodes_to_pods: Vec<(&str, &[Shared<Pod>])> =
            Vec::with_capacity(sync.placements.len() + sync.unplaced.len());
        let mut should_run = HashSet::new();
        let mut dead = HashSet::new();
        for (node, placement) in &sync.placements {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let pods = sync.by_node.get(name);
            if placement.should_run || pods.is_some() {
                nodes_to_pods.push((name, pods.map_or(&[], Vec::as_slice)));
            }
            if placement.should_run {
                should_run.insert(name);
            }
            if daemon.skips_dead_nodes() && node_is_dead(node) {
                dead.insert(name);
            }
        }
        if !sync.unplaced.is_empty() {
            nodes_to_pods.extend(
                sync.unplaced
                    .iter()
                    .filter_map(|n| Some((n.as_str(), sync.by_node.get(n)?.as_slice()))),
            );
            nodes_to_pods.sort_by(|a, b| a.0.cmp(b.0));
        }
        let desired = i32::try_from(should_run.len()).unwrap_or(i32::MAX);
        let (max_surge, max_unavailable) = daemon.fenceposts(desired)?;
        let inputs = update::Inputs {
            nodes_to_pods: &nodes_to_pods,
            max_surge,
            max_unavailable,
            desired,
        };
        let plan = update::plan(
            &inputs,
            |p| sync.is_new(p),
            |p| sync.is_available(p),
            |n| should_run.contains(n),
            |n| dead.contains(n),
        );
        // Pacing narrows the updates the plan starts (replacements, surge pods) and never the
        // rest (retiring old pods whose new pod is available, pods on nodes that should no
        // longer run them).
        let mut budget = self.budget(sync, &nodes_to_pods, &should_run, &dead, desired);
        let replace = budget.take(plan.replace);
        let create_on = budget.take(plan.create_on);
        if let Some(wait) = budget.requeue() {
            requeue.requeue_by(wait);
        }
        // The replacements take pods down for the update, so the budgets are asked first (a
        // surge's retirement of an old pod follows its new pod's availability, and is not).
        let replace = self
            .ask_budgets(sync, &nodes_to_pods, replace, held)
            .await?;
        let mut delete = plan.delete;
        let mut in_place = Vec::new();
        for name in replace {
            match (daemon.in_place && max_surge == 0)
                .then(|| self.in_place_patch(sync, constructed, &name))
                .flatten()
            {
                Some(patch) => in_place.push((name, patch)),
                None => delete.push(name),
            }
        }
        let acted = self.sync_nodes(sync, delete, create_on, in_place).await?;
        Ok((acted, budget.hold()))
    }

    /// The pods of `wanted` (by name, in order) that the disruption budgets let go now, and in
    /// `held` what holds the rest; all of them when the DaemonSet does not ask.
    async fn ask_budgets(
        &self,
        sync: &Sync<'_>,
        nodes_to_pods: &[(&str, &[Shared<Pod>])],
        wanted: Vec<String>,
        held: &mut Option<Option<Refusal>>,
    ) -> Result<Vec<String>, Error> {
        let ds = &sync.daemon.ds;
        if !self.gate.honors(ds.metadata.annotations.as_ref()) {
            return Ok(wanted);
        }
        let by_name: HashMap<&str, &Shared<Pod>> = nodes_to_pods
            .iter()
            .flat_map(|(_, pods)| pods.iter())
            .map(|p| (p.metadata.name.as_deref().unwrap_or_default(), p))
            .collect();
        let admitted = self
            .gate
            .ask(
                &self.recorder,
                &events::reference(ds),
                &sync.key,
                wanted,
                |n| by_name.get(n.as_str()).map(|p| Arc::clone(p)),
            )
            .await?;
        *held = Some(admitted.refused);
        Ok(admitted.allowed)
    }

    /// What pacing lets start now ([`crate::pacing`]), counted per node from the pods alone:
    /// a node is in flight when its new pod is not yet available, or when it should run a pod
    /// and has no live one (an old pod deleted for an update, or none yet: its next pod is of
    /// the new revision). The last update started at the newest creation or in-place update of
    /// a new pod, or the deletion of an old pod not yet replaced. Nodes left alone as dead
    /// ([`SKIP_UNREACHABLE_NODES`]) count for nothing, as for `maxUnavailable`.
    fn budget(
        &self,
        sync: &Sync<'_>,
        nodes_to_pods: &[(&str, &[Shared<Pod>])],
        should_run: &HashSet<&str>,
        dead: &HashSet<&str>,
        desired: i32,
    ) -> Budget {
        let pacing = &sync.daemon.pacing;
        if !pacing.is_set() {
            return Budget::unlimited(sync.now);
        }
        let mut updating = 0;
        let mut last = None;
        for &(node, pods) in nodes_to_pods.iter().filter(|(n, _)| !dead.contains(n)) {
            let live = |p: &&Shared<Pod>| p.metadata.deletion_timestamp.is_none();
            let mut new = pods
                .iter()
                .filter(live)
                .filter(|p| sync.is_new(p))
                .peekable();
            if new.peek().is_some() {
                let mut in_flight = false;
                for p in new {
                    last = last.max(pacing::update_started(p));
                    in_flight |= !sync.is_available(p);
                }
                updating += i32::from(in_flight);
                continue;
            }
            if !should_run.contains(node) {
                continue;
            }
            for p in pods.iter().filter(|p| !live(p)) {
                last = last.max(pacing::deleted_at(p));
            }
            if !pods.iter().any(|p| live(&p)) {
                updating += 1;
            }
        }
        pacing.budget(desired, Rounding::Up, updating, last, sync.now)
    }

    /// The patch that updates pod `name` in place, if only images changed since its revision.
    fn in_place_patch(
        &self,
        sync: &Sync<'_>,
        constructed: &history::Constructed,
        name: &str,
    ) -> Option<Value> {
        let pod = sync.pod(name)?;
        let hash = history::hash_of(&pod.metadata)?;
        let revision = constructed
            .old
            .iter()
            .find(|r| history::hash_of(&r.metadata) == Some(hash))?;
        // In the recorded form both, should one have been written in another.
        let old = history::canonical_template(&history::revision_template(revision)?);
        let new = history::canonical_template(&history::revision_template(&constructed.current)?);
        let images = update::in_place_images(&old, &new)?;
        let containers: Vec<Value> = images
            .into_iter()
            .map(|(n, i)| json!({"name": n, "image": i}))
            .collect();
        let mut labels = serde_json::Map::new();
        labels.insert(CONTROLLER_REVISION_HASH.into(), json!(sync.hash));
        labels.insert(
            update::POD_TEMPLATE_GENERATION.into(),
            json!(self.generation_label(sync.daemon)),
        );
        let mut patch = json!({"metadata": {"labels": labels}, "spec": {"containers": containers}});
        // The interval's clock must outlive this process: the pod records when it was updated.
        if sync.daemon.pacing.has_interval() {
            patch["metadata"]["annotations"] = pacing::in_place_stamp(clock::now());
        }
        Some(patch)
    }

    fn generation_label(&self, daemon: &Daemon) -> String {
        daemon
            .template_generation()
            .or(daemon.ds.metadata.generation)
            .unwrap_or(1)
            .to_string()
    }

    /// The pod every creation starts from: the template with the daemon tolerations, the hash
    /// and generation labels, `generateName: <ds>-` and the controller reference.
    fn pod_template(&self, sync: &Sync<'_>) -> Pod {
        let ds = &sync.daemon.ds;
        let template = ds
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let meta = template.metadata.unwrap_or_default();
        let mut spec = template.spec.unwrap_or_default();
        nodes::add_daemon_tolerations(&mut spec);
        let mut labels = meta.labels.unwrap_or_default();
        labels.insert(
            update::POD_TEMPLATE_GENERATION.into(),
            self.generation_label(sync.daemon),
        );
        labels.insert(CONTROLLER_REVISION_HASH.into(), sync.hash.clone());
        Pod {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", ds.name_any())),
                namespace: ds.namespace(),
                labels: Some(labels),
                annotations: meta.annotations,
                finalizers: meta.finalizers,
                owner_references: Some(vec![controller_ref("apps/v1", "DaemonSet", &ds.metadata)]),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        }
    }

    /// Creates pods on `create` nodes (slow start: batches of 1, 2, 4, ... stopping at the
    /// first failing batch), deletes `delete` pods and patches `in_place` ones, at most
    /// `burst_replicas` of each, with expectations set first so the next sync waits for them.
    /// Says whether it issued anything.
    async fn sync_nodes(
        &self,
        sync: &Sync<'_>,
        delete: Vec<String>,
        create: Vec<String>,
        in_place: Vec<(String, Value)>,
    ) -> Result<bool, Error> {
        let ds = &sync.daemon.ds;
        let key = &sync.key;
        let burst = self.config.burst_replicas.max(1);
        let create: Vec<String> = create.into_iter().take(burst).collect();
        let delete: Vec<String> = delete.into_iter().take(burst).collect();
        let in_place: Vec<(String, Value)> = in_place.into_iter().take(burst).collect();
        if create.is_empty() && delete.is_empty() && in_place.is_empty() {
            return Ok(false);
        }
        let control = PodControl::new(&self.client, &self.recorder, ds, key, &self.expectations);
        let template = self.pod_template(sync);
        let pods = create
            .iter()
            .map(|node| {
                let mut pod = template.clone();
                if let Some(spec) = pod.spec.as_mut() {
                    spec.affinity = Some(nodes::pin_to_node(spec.affinity.take(), node));
                }
                pod
            })
            .collect();
        let mut errors = control.create_pods(pods, 1).await.errors;
        let changes = delete
            .into_iter()
            .map(|name| PodChange::Delete(Target::named(name)))
            .chain(
                in_place
                    .into_iter()
                    .map(|(name, patch)| PodChange::InPlace(Target::named(name), patch)),
            )
            .collect();
        errors.extend(control.change(changes, false).await.errors);
        match errors.first() {
            None => Ok(true),
            Some(first) => Err(Error::Pods {
                key: key.clone(),
                failed: errors.len(),
                first: first.to_string(),
            }),
        }
    }

    /// Deletes old revisions beyond `revisionHistoryLimit` that no live pod uses.
    async fn cleanup_history(
        &self,
        sync: &Sync<'_>,
        api: &Api<ControllerRevision>,
        constructed: &history::Constructed,
    ) -> Result<(), Error> {
        let limit = sync
            .daemon
            .ds
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let live: HashSet<String> = sync
            .pods
            .iter()
            .filter_map(|p| history::hash_of(&p.metadata).map(str::to_string))
            .collect();
        let doomed = history::to_truncate(&constructed.old, limit, &live);
        history::delete_revisions(api, &doomed).await?;
        Ok(())
    }

    /// Writes the status if it changed; `observedGeneration` only when the sync acted on this
    /// generation; the pacing condition only when the sync judged the pacing (`pace`).
    async fn update_status(
        &self,
        sync: &Sync<'_>,
        observed: bool,
        pace: Option<Option<&Hold>>,
        held: Option<Option<&Refusal>>,
        requeue: &mut Action,
    ) -> Result<(), Error> {
        let ds = &sync.daemon.ds;
        let (counts, next) = status::count(
            sync.placements
                .iter()
                .map(|(n, p)| (n.metadata.name.as_deref().unwrap_or(""), *p)),
            &sync.by_node,
            |p| sync.is_new(p),
            |p| sync.until_available(p),
        );
        if let Some(wait) = next {
            requeue.requeue_by(wait);
        }
        let stored = ds.status.as_ref();
        let stored_generation = stored.and_then(|s| s.observed_generation);
        let generation = if observed {
            ds.metadata.generation
        } else {
            stored_generation
        };
        let progress = status::progress(sync.daemon, &sync.hash, counts, sync.now);
        progress.before_write(&self.recorder, &events::reference(ds), requeue);
        let mut fields = counts.to_json();
        progress.add_to(&mut fields);
        let paced = pace.is_some_and(|hold| {
            pacing::add_to(
                &mut fields,
                &crate::progress::stored_conditions(stored.and_then(|s| s.conditions.as_ref())),
                &sync.daemon.pacing,
                hold,
                sync.now,
                |warning| {
                    self.recorder.record(
                        &events::reference(ds),
                        EventType::Warning,
                        pacing::INVALID_EVENT,
                        warning,
                    )
                },
            )
        });
        let budgeted = held.is_some_and(|held| {
            disruption_gate::add_to(
                &mut fields,
                &crate::progress::stored_conditions(stored.and_then(|s| s.conditions.as_ref())),
                held,
                sync.now,
            )
        });
        if status::Counts::of_status(stored) == counts
            && stored_generation >= generation
            && !progress.changed()
            && !paced
            && !budgeted
        {
            return Ok(());
        }
        if observed && let (Some(g), Value::Object(m)) = (generation, &mut fields) {
            m.insert("observedGeneration".into(), json!(g));
        }
        let api: Api<DaemonSet> =
            Api::namespaced(self.client.clone(), &ds.namespace().unwrap_or_default());
        // UpdateStatus of the cached object with the counts, re-read on a conflict (upstream's
        // storeDaemonSetStatus); the role grants `update` on `daemonsets/status`, not `patch`.
        let set = |v: &mut Value| crate::util::update::set_status_fields(v, &fields);
        match crate::util::update::status(&api, ds, set).await {
            Ok(written) => {
                progress.after_write(&self.recorder, &events::reference(ds));
                if let Some(written) = written
                    .filter(|w| crate::util::owners::same_but_status(&w.metadata, &ds.metadata))
                {
                    let mut newer = sync.daemon.clone();
                    newer.ds.metadata.resource_version = written.metadata.resource_version;
                    newer.ds.status = written.status;
                    self.daemons.hold_newer(newer);
                }
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemon(strategy: Value) -> Daemon {
        Daemon::from_json(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "ds", "namespace": "default", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}},
                     "updateStrategy": strategy}
        }))
        .unwrap()
    }

    #[test]
    fn paused_by_the_field_or_the_annotation() {
        let paused = json!({"type": "RollingUpdate", "rollingUpdate": {"paused": true}});
        assert!(daemon(paused).paused);
        assert!(!daemon(json!({"type": "RollingUpdate"})).paused);
        let mut value = serde_json::to_value(&daemon(json!({"type": "RollingUpdate"})).ds).unwrap();
        value["metadata"]["annotations"] = json!({PAUSED: "true"});
        assert!(Daemon::from_json(value).unwrap().paused);
    }

    #[test]
    fn fenceposts_round_up_and_never_both_zero() {
        // (strategy, desired, want (surge, unavailable))
        let cases = [
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2, "maxSurge": 0}}),
                10,
                (0, 2),
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}}),
                15,
                (0, 2),
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "34%"}}),
                6,
                (0, 3),
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "10%"}}),
                5000,
                (500, 0),
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "1%"}}),
                3,
                (1, 0),
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}),
                3,
                (0, 1),
            ),
            (json!({"type": "RollingUpdate"}), 3, (0, 1)),
            (json!({"type": "OnDelete"}), 3, (0, 0)),
        ];
        for (strategy, desired, want) in cases {
            assert_eq!(
                daemon(strategy.clone()).fenceposts(desired).unwrap(),
                want,
                "{strategy} over {desired}"
            );
        }
    }

    #[test]
    fn the_in_place_policy_is_read_from_the_spec_or_the_annotation() {
        let spec = daemon(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "podUpdatePolicy": "InPlaceIfPossible"}}),
        );
        assert!(spec.in_place);
        assert!(!daemon(json!({"type": "RollingUpdate"})).in_place);
        let annotated = Daemon::from_json(json!({
            "metadata": {"name": "ds", "annotations": {POD_UPDATE_POLICY: "InPlaceIfPossible"}},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {}}
        }))
        .unwrap();
        assert!(annotated.in_place);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_pod_back_off_doubles_and_resets_after_quiet() {
        let b = FailedPodBackoff {
            policy: Backoff {
                base: Duration::from_secs(1),
                max: Duration::from_secs(8),
            },
            entries: Mutex::new(HashMap::new()),
        };
        let t0 = Instant::now();
        assert_eq!(b.remaining("k", t0), None);
        b.next("k", t0);
        assert_eq!(b.remaining("k", t0), Some(Duration::from_secs(1)));
        assert_eq!(b.remaining("k", t0 + Duration::from_secs(1)), None);
        let mut at = t0 + Duration::from_secs(1);
        let mut delays = Vec::new();
        for _ in 0..5 {
            b.next("k", at);
            let d = b.remaining("k", at).unwrap();
            delays.push(d.as_secs());
            at += d;
        }
        assert_eq!(delays, [2, 4, 8, 8, 8]);
        // Quiet for more than twice the max: back to the base.
        at += Duration::from_secs(17);
        b.next("k", at);
        assert_eq!(b.remaining("k", at), Some(Duration::from_secs(1)));
    }
}
