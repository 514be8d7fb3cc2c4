//! Following a rehearsed rollout: each changed workload's available and updated pods over time,
//! when it is done, and, if it stops moving, why.
//!
//! A workload is done as `kubectl rollout status` says it is: its controller observed the
//! change and every pod runs the new template and is available. The rollout as a whole ends when
//! every changed workload is done, or is stalled: nothing moved for the stall window (a broken
//! image, an unschedulable pod and a blocked eviction all look like that), or a Deployment's
//! progress deadline fired. Stall reasons come from the pods as a user would read them:
//! the scheduler's `Unschedulable` message, a waiting container's reason, an unready pod's
//! readiness message, and evictions a PodDisruptionBudget refused.

use api::intstr::{IntOrPercent, scaled_value_or};
use informer::{Informer, Informers, Subscription};
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet},
    core::v1::{Node, Pod},
    policy::v1::PodDisruptionBudget,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use serde::Serialize;
use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::{sync::Notify, time::Instant};

/// A workload, as `kind/namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkloadId {
    /// `deployment`, `daemonset` or `statefulset`.
    pub kind: &'static str,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// Where a workload stands.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    /// Pods it wants.
    pub desired: i32,
    /// Pods available.
    pub available: i32,
    /// Pods of the current template.
    pub updated: i32,
    /// Whether its controller has seen its current spec.
    pub observed: bool,
    /// Whether the rollout is complete.
    pub done: bool,
    /// The most pods its strategy lets be unavailable (rolling updates).
    pub max_unavailable: Option<i32>,
    /// A Deployment's `ProgressDeadlineExceeded` message.
    pub deadline: Option<String>,
    /// The fewest pods a PodDisruptionBudget keeps available (filled in by [`Watch`]).
    pub budget: Option<i32>,
    /// What its controller says holds its rollout back now: a `RolloutHeld` condition (a
    /// budget-aware update waiting on a PodDisruptionBudget) or a `RolloutPaced` one
    /// (`max-updating`, `min-update-interval`), as `(reason, message)`.
    pub waiting: Option<(String, String)>,
    /// How long the rollout may go without progress (a Deployment's `progressDeadlineSeconds`,
    /// a DaemonSet's or StatefulSet's `rollwright.io/progress-deadline-seconds`).
    pub progress_deadline: Option<Duration>,
    /// `metadata.generation`.
    pub generation: i64,
    /// `matchLabels` of its selector, to find its pods.
    pub selector: BTreeMap<String, String>,
}

/// The most pods a rolling strategy lets be unavailable (`None` when the workload does not roll
/// by itself: Recreate, OnDelete), `default` when the strategy does not say.
fn strategy_unavailable(
    rolling: bool,
    value: Option<&IntOrString>,
    desired: i32,
    default: IntOrPercent,
) -> Option<i32> {
    if !rolling {
        return None;
    }
    let value = value.and_then(|v| serde_json::to_value(v).ok());
    scaled_value_or(value.as_ref(), default, desired, false).ok()
}

/// The hold a workload's conditions report, if any: rollwright's controllers set `RolloutHeld`
/// (a budget) or `RolloutPaced` (pacing) to `True` while they keep an update back.
fn waiting<'a>(
    conditions: impl IntoIterator<Item = (&'a str, &'a str, Option<&'a str>, Option<&'a str>)>,
) -> Option<(String, String)> {
    conditions
        .into_iter()
        .find_map(|(type_, status, reason, message)| {
            (matches!(
                type_,
                controllers::disruption_gate::CONDITION | controllers::pacing::CONDITION
            ) && status == "True")
                .then(|| {
                    (
                        reason.unwrap_or(type_).to_string(),
                        message.unwrap_or_default().to_string(),
                    )
                })
        })
}

/// A Deployment's standing.
pub fn deployment(d: &Deployment) -> Standing {
    // Read in place: the follow loop asks on every watch event; a copy would clone the template.
    let (no_spec, no_status) = (Default::default(), Default::default());
    let spec = d.spec.as_ref().unwrap_or(&no_spec);
    let status = d.status.as_ref().unwrap_or(&no_status);
    let desired = spec.replicas.unwrap_or(1);
    let generation = d.metadata.generation.unwrap_or(0);
    let observed = status.observed_generation.unwrap_or(0) >= generation;
    let (updated, available) = (
        status.updated_replicas.unwrap_or(0),
        status.available_replicas.unwrap_or(0),
    );
    let strategy = spec.strategy.as_ref();
    let max_unavailable = strategy_unavailable(
        strategy.is_none_or(|s| s.type_.as_deref() != Some("Recreate")),
        strategy
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.max_unavailable.as_ref()),
        desired,
        IntOrPercent::Percent(25),
    );
    let deadline = status.conditions.iter().flatten().find_map(|c| {
        (c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
            .then(|| c.message.clone().unwrap_or_default())
    });
    Standing {
        desired,
        available,
        updated,
        observed,
        // kubectl's `rollout status`: every replica updated, no old one left, every updated
        // one available.
        done: observed
            && updated >= desired
            && status.replicas.unwrap_or(0) <= updated
            && available >= updated,
        max_unavailable,
        deadline,
        budget: None,
        waiting: waiting(status.conditions.iter().flatten().map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_deref(),
                c.message.as_deref(),
            )
        })),
        progress_deadline: spec
            .progress_deadline_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs),
        generation,
        selector: spec.selector.match_labels.clone().unwrap_or_default(),
    }
}

/// A DaemonSet's or StatefulSet's progress deadline, from rollwright's annotation.
fn annotated_deadline(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<Duration> {
    controllers::progress::deadline::of(meta).ok().flatten()
}

/// Stalled workloads' progress deadlines, when they would fire: `quiet_since` seconds after the
/// change nothing moved any more, so each deadline runs out that long after.
pub fn deadlines_ahead(workloads: &BTreeMap<WorkloadId, Standing>, quiet_since: f64) -> Vec<Stall> {
    workloads
        .iter()
        .filter(|(_, s)| !s.done && s.deadline.is_none())
        .filter_map(|(id, s)| {
            let d = s.progress_deadline?;
            Some(Stall {
                workload: id.to_string(),
                reason: "ProgressDeadlineExceeded".into(),
                message: format!(
                    "would fire about {:.0} s after the change ({} s without progress)",
                    quiet_since + d.as_secs_f64(),
                    d.as_secs()
                ),
                pods: 0,
            })
        })
        .collect()
}

/// A DaemonSet's standing.
pub fn daemonset(ds: &DaemonSet) -> Standing {
    // Read in place: the follow loop asks on every watch event; a copy would clone the template.
    let (no_spec, no_status) = (Default::default(), Default::default());
    let spec = ds.spec.as_ref().unwrap_or(&no_spec);
    let status = ds.status.as_ref().unwrap_or(&no_status);
    let generation = ds.metadata.generation.unwrap_or(0);
    let desired = status.desired_number_scheduled;
    let updated = status.updated_number_scheduled.unwrap_or(0);
    let available = status.number_available.unwrap_or(0);
    let strategy = spec.update_strategy.as_ref();
    let max_unavailable = strategy_unavailable(
        strategy.is_none_or(|s| s.type_.as_deref() != Some("OnDelete")),
        strategy
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.max_unavailable.as_ref()),
        desired,
        IntOrPercent::Int(1),
    );
    Standing {
        desired,
        available,
        updated,
        observed: status.observed_generation.unwrap_or(0) >= generation,
        // kubectl's `rollout status`: every scheduled pod updated and available.
        done: status.observed_generation.unwrap_or(0) >= generation
            && updated >= desired
            && available >= desired,
        max_unavailable,
        deadline: None,
        budget: None,
        waiting: waiting(status.conditions.iter().flatten().map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_deref(),
                c.message.as_deref(),
            )
        })),
        progress_deadline: annotated_deadline(&ds.metadata),
        generation,
        selector: spec.selector.match_labels.clone().unwrap_or_default(),
    }
}

/// A StatefulSet's standing.
pub fn statefulset(sts: &StatefulSet) -> Standing {
    // Read in place: the follow loop asks on every watch event; a copy would clone the template.
    let (no_spec, no_status) = (Default::default(), Default::default());
    let spec = sts.spec.as_ref().unwrap_or(&no_spec);
    let status = sts.status.as_ref().unwrap_or(&no_status);
    let generation = sts.metadata.generation.unwrap_or(0);
    let desired = spec.replicas.unwrap_or(1);
    let available = status.available_replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let strategy = spec.update_strategy.as_ref();
    let max_unavailable = strategy_unavailable(
        strategy.is_none_or(|s| s.type_.as_deref() != Some("OnDelete")),
        strategy
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.max_unavailable.as_ref()),
        desired,
        IntOrPercent::Int(1),
    );
    Standing {
        desired,
        available,
        updated,
        observed: status.observed_generation.unwrap_or(0) >= generation,
        done: status.observed_generation.unwrap_or(0) >= generation
            && statefulset_rolled_out(spec, status),
        max_unavailable,
        deadline: None,
        budget: None,
        waiting: waiting(status.conditions.iter().flatten().map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_deref(),
                c.message.as_deref(),
            )
        })),
        progress_deadline: annotated_deadline(&sts.metadata),
        generation,
        selector: spec.selector.match_labels.clone().unwrap_or_default(),
    }
}

/// kubectl's `rollout status` for a StatefulSet: every replica Ready, and the pods above the
/// partition updated (a rolling update with one, as the API server defaults it), or the current
/// revision the update revision (without).
fn statefulset_rolled_out(
    spec: &k8s_openapi::api::apps::v1::StatefulSetSpec,
    status: &k8s_openapi::api::apps::v1::StatefulSetStatus,
) -> bool {
    let desired = spec.replicas.unwrap_or(1);
    if status.ready_replicas.unwrap_or(0) < desired {
        return false;
    }
    let partition = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition);
    match partition {
        Some(partition) => status.updated_replicas.unwrap_or(0) >= desired - partition,
        None => {
            status.update_revision.is_some() && status.current_revision == status.update_revision
        }
    }
}

/// Why a workload is not moving, as its pods say.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Stall {
    /// The workload.
    pub workload: String,
    /// A short reason (`Unschedulable`, `ImagePullBackOff`, `Unready`, `EvictionBlocked`,
    /// `ProgressDeadlineExceeded`).
    pub reason: String,
    /// A message (one pod's, as an example).
    pub message: String,
    /// How many pods say so.
    pub pods: usize,
}

/// The reason and message a pod that is not Ready gives, if any.
pub fn pod_blocker(pod: &Pod) -> Option<(String, String)> {
    if api::pod::is_ready(pod) || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    let condition = |t: &str| status.conditions.iter().flatten().find(|c| c.type_ == t);
    if let Some(c) = condition("PodScheduled")
        && c.status == "False"
    {
        return Some((
            c.reason.clone().unwrap_or_else(|| "Unschedulable".into()),
            c.message.clone().unwrap_or_default(),
        ));
    }
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for c in containers {
        if let Some(w) = c.state.as_ref().and_then(|s| s.waiting.as_ref())
            && let Some(reason) = &w.reason
            && !matches!(reason.as_str(), "ContainerCreating" | "PodInitializing")
        {
            return Some((reason.clone(), w.message.clone().unwrap_or_default()));
        }
    }
    let running = status.phase.as_deref() == Some("Running");
    let ready = condition("Ready");
    running.then(|| {
        (
            "Unready".to_string(),
            ready.and_then(|c| c.message.clone()).unwrap_or_default(),
        )
    })
}

/// The cluster as the rehearsal follows it.
pub struct Watch {
    deployments: Informer<Deployment>,
    daemonsets: Informer<DaemonSet>,
    statefulsets: Informer<StatefulSet>,
    pods: Informer<Pod>,
    nodes: Informer<Node>,
    budgets: Informer<PodDisruptionBudget>,
    replica_sets: Informer<ReplicaSet>,
    revisions: Informer<ControllerRevision>,
    changed: Arc<Notify>,
    _subscriptions: Vec<Subscription>,
    _informers: Informers,
}

impl Watch {
    /// Watches through `client`, once every watch has listed.
    pub async fn start(client: kube::Client) -> Self {
        let informers = Informers::new(client);
        let changed = Arc::new(Notify::new());
        let deployments: Informer<Deployment> = informers.get();
        let daemonsets: Informer<DaemonSet> = informers.get();
        let statefulsets: Informer<StatefulSet> = informers.get();
        let pods: Informer<Pod> = informers.get();
        let budgets: Informer<PodDisruptionBudget> = informers.get();
        let nodes: Informer<Node> = informers.get();
        let replica_sets: Informer<ReplicaSet> = informers.get();
        let revisions: Informer<ControllerRevision> = informers.get();
        let subscriptions = vec![
            deployments.subscribe(poke(&changed)),
            daemonsets.subscribe(poke(&changed)),
            statefulsets.subscribe(poke(&changed)),
            pods.subscribe(poke(&changed)),
            budgets.subscribe(poke(&changed)),
            nodes.subscribe(poke(&changed)),
        ];
        informers.wait_synced().await;
        Self {
            deployments,
            daemonsets,
            statefulsets,
            pods,
            nodes,
            budgets,
            replica_sets,
            revisions,
            changed,
            _subscriptions: subscriptions,
            _informers: informers,
        }
    }

    /// Every workload and where it stands.
    pub fn workloads(&self) -> BTreeMap<WorkloadId, Standing> {
        let id = |kind, o: &dyn Fn() -> (String, String)| {
            let (namespace, name) = o();
            WorkloadId {
                kind,
                namespace,
                name,
            }
        };
        let mut out = BTreeMap::new();
        for d in self.deployments.store().list() {
            let d = d.object();
            out.insert(
                id("deployment", &|| {
                    (d.namespace().unwrap_or_default(), d.name_any())
                }),
                deployment(d),
            );
        }
        for ds in self.daemonsets.store().list() {
            let ds = ds.object();
            out.insert(
                id("daemonset", &|| {
                    (ds.namespace().unwrap_or_default(), ds.name_any())
                }),
                daemonset(ds),
            );
        }
        for sts in self.statefulsets.store().list() {
            let sts = sts.object();
            out.insert(
                id("statefulset", &|| {
                    (sts.namespace().unwrap_or_default(), sts.name_any())
                }),
                statefulset(sts),
            );
        }
        for (id, s) in out.iter_mut() {
            s.budget = self.budget(&id.namespace, s);
        }
        out
    }

    /// The fewest pods of the workload a PodDisruptionBudget keeps available, if one selects
    /// its pods (percentages round up, as the disruption controller's do).
    fn budget(&self, namespace: &str, s: &Standing) -> Option<i32> {
        self.budgets
            .store()
            .in_namespace(namespace)
            .iter()
            .filter_map(|pdb| {
                let spec = pdb.spec.as_ref()?;
                let selector =
                    api::selector::LabelSelector::from_label_selector(spec.selector.as_ref()?)
                        .ok()?;
                if selector.is_empty() || !selector.matches_labels(Some(&s.selector)) {
                    return None;
                }
                let value =
                    |v: &Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>| {
                        v.as_ref().and_then(|v| serde_json::to_value(v).ok())
                    };
                if let Some(min) = value(&spec.min_available) {
                    return scaled_value_or(Some(&min), IntOrPercent::Int(0), s.desired, true).ok();
                }
                let max = value(&spec.max_unavailable)?;
                scaled_value_or(Some(&max), IntOrPercent::Int(0), s.desired, true)
                    .ok()
                    .map(|m| s.desired - m)
            })
            .max()
    }

    /// How many nodes report `Ready=True`.
    pub fn ready_nodes(&self) -> usize {
        self.nodes
            .store()
            .list()
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count()
    }

    /// The PodDisruptionBudgets whose status is not yet what the cluster's was: not computed for
    /// their spec (`observedGeneration`), or fewer healthy pods than `healthy` records of them
    /// (`namespace/name` to `currentHealthy`). A drain made before then meets budgets still
    /// being processed, which the real cluster computed long ago.
    pub fn budgets_behind(&self, healthy: &BTreeMap<String, i32>) -> Vec<String> {
        self.budgets
            .store()
            .list()
            .iter()
            .filter_map(|b| {
                let key = format!(
                    "{}/{}",
                    b.metadata.namespace.as_deref().unwrap_or_default(),
                    b.metadata.name.as_deref().unwrap_or_default()
                );
                let (observed, healthy_now) = b
                    .status
                    .as_ref()
                    .map_or((None, 0), |s| (s.observed_generation, s.current_healthy));
                let behind = observed < b.metadata.generation
                    || healthy_now < healthy.get(&key).copied().unwrap_or(0);
                behind.then_some(key)
            })
            .collect()
    }

    /// Every node's name, sorted.
    pub fn node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .nodes
            .store()
            .list()
            .iter()
            .map(|n| n.name_any())
            .collect();
        names.sort();
        names
    }

    /// Every pod's uid.
    pub fn pod_uids(&self) -> HashSet<String> {
        self.pods
            .store()
            .list()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect()
    }

    /// The creation times (Unix seconds, as the server stamped them: on the rehearsal's own
    /// clock) of the pods not in `old`: what the rollout created, measured as the snapshot
    /// measures a real cluster's.
    pub fn created_seconds(&self, old: &HashSet<String>) -> Vec<i64> {
        self.pods
            .store()
            .list()
            .iter()
            .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| !old.contains(u)))
            .filter_map(|p| Some(p.metadata.creation_timestamp.as_ref()?.0.as_second()))
            .collect()
    }

    /// `(node, uid)` of the bound pods of `workloads`.
    fn placed(&self, workloads: &BTreeMap<WorkloadId, Standing>) -> Vec<(String, String)> {
        self.pods
            .store()
            .list()
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                let node = p.spec.as_ref()?.node_name.clone()?;
                workloads
                    .iter()
                    .any(|(id, s)| owns(id, s, p.object()))
                    .then(|| (node, p.metadata.uid.clone().unwrap_or_default()))
            })
            .collect()
    }

    /// The workload's pods (not being deleted) per revision: `(pods, Ready pods)` under the
    /// revision's number as its controller recorded it (a ReplicaSet's
    /// `deployment.kubernetes.io/revision`, a ControllerRevision's `revision`), or under the
    /// pod's hash while the revision is not in the cache yet.
    fn per_revision(&self, id: &WorkloadId, s: &Standing) -> BTreeMap<String, (i32, i32)> {
        let (label, numbers) = self.revision_numbers(id);
        let mut out: BTreeMap<String, (i32, i32)> = BTreeMap::new();
        for pod in self.pods.store().in_namespace(&id.namespace) {
            let pod = pod.object();
            if pod.metadata.deletion_timestamp.is_some() || !owns(id, s, pod) {
                continue;
            }
            let revision = match pod.labels().get(label) {
                Some(hash) => numbers.get(hash).unwrap_or(hash).clone(),
                None => "?".into(),
            };
            let e = out.entry(revision).or_default();
            e.0 += 1;
            e.1 += i32::from(api::pod::is_ready(pod));
        }
        out
    }

    /// The pod label that names the workload's revision, and each value of it that the cache
    /// knows the number of: a ReplicaSet's `pod-template-hash` and its
    /// `deployment.kubernetes.io/revision`; a ControllerRevision's name (what a StatefulSet's
    /// pods carry) or its hash (a DaemonSet's, whose revisions are named `<daemonset>-<hash>`)
    /// and its `revision`. Read once per count, not once per pod.
    fn revision_numbers(&self, id: &WorkloadId) -> (&'static str, HashMap<String, String>) {
        if id.kind == "deployment" {
            let numbers = self
                .replica_sets
                .store()
                .in_namespace(&id.namespace)
                .iter()
                .filter_map(|rs| {
                    let hash = rs.labels().get("pod-template-hash")?;
                    let n = rs.annotations().get("deployment.kubernetes.io/revision")?;
                    Some((hash.clone(), n.clone()))
                })
                .collect();
            return ("pod-template-hash", numbers);
        }
        let mut numbers = HashMap::new();
        for r in self.revisions.store().in_namespace(&id.namespace) {
            let name = r.name_any();
            if let Some(hash) = r.labels().get("controller-revision-hash")
                && name == format!("{}-{hash}", id.name)
            {
                numbers.insert(hash.clone(), r.revision.to_string());
            }
            numbers.insert(name, r.revision.to_string());
        }
        ("controller-revision-hash", numbers)
    }

    /// How many pods are Ready.
    pub fn ready_pods(&self) -> usize {
        self.pods
            .store()
            .list()
            .iter()
            .filter(|p| api::pod::is_ready(p.object()))
            .count()
    }

    /// The workloads that have pods on `node` (what a drain moves), DaemonSets aside.
    pub fn on_node(&self, node: &str) -> BTreeSet<WorkloadId> {
        let pods = self.pods.store().on_node(node);
        self.workloads()
            .into_iter()
            .filter(|(id, s)| {
                id.kind != "daemonset" && pods.iter().any(|p| owns(id, s, p.object()))
            })
            .map(|(id, _)| id)
            .collect()
    }

    /// Waits until something changes, or `at_most`.
    pub async fn changed(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.changed.notified()).await;
    }

    /// Why `workloads` are not done, per workload and reason.
    pub fn stalls(
        &self,
        workloads: &BTreeMap<WorkloadId, Standing>,
        evictions: &[(WorkloadId, String)],
    ) -> Vec<Stall> {
        let mut grouped: BTreeMap<(String, String), (String, usize)> = BTreeMap::new();
        let pods = self.pods.store().list();
        for (id, s) in workloads.iter().filter(|(_, s)| !s.done) {
            if let Some(message) = &s.deadline {
                grouped.insert(
                    (id.to_string(), "ProgressDeadlineExceeded".into()),
                    (message.clone(), 0),
                );
            }
            for pod in pods.iter().filter(|p| owns(id, s, p.object())) {
                if let Some((reason, message)) = pod_blocker(pod.object()) {
                    let e = grouped
                        .entry((id.to_string(), reason))
                        .or_insert((message, 0));
                    e.1 += 1;
                }
            }
        }
        for (id, message) in evictions {
            let e = grouped
                .entry((id.to_string(), "EvictionBlocked".into()))
                .or_insert((message.clone(), 0));
            e.1 += 1;
        }
        grouped
            .into_iter()
            .map(|((workload, reason), (message, pods))| Stall {
                workload,
                reason,
                message,
                pods,
            })
            .collect()
    }
}

/// A handler that wakes the rehearsal's loop.
fn poke<K: informer::Object>(
    n: &Arc<Notify>,
) -> impl Fn(&informer::Change<K>) + Send + Sync + 'static {
    let n = Arc::clone(n);
    move |_| n.notify_one()
}

/// Whether `pod` is one of the workload's: in its namespace, picked by its `matchLabels`.
pub(super) fn owns(id: &WorkloadId, s: &Standing, pod: &Pod) -> bool {
    pod.metadata.namespace.as_deref() == Some(id.namespace.as_str())
        && !s.selector.is_empty()
        && s.selector
            .iter()
            .all(|(k, v)| pod.labels().get(k).is_some_and(|l| l == v))
}

/// One changed workload over the rollout.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Followed {
    /// The workload.
    pub workload: String,
    /// Pods it wants at the end.
    pub desired: i32,
    /// The fewest available pods seen.
    pub lowest_available: i32,
    /// The most its strategy lets be unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<i32>,
    /// The fewest available pods its PodDisruptionBudget allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_min_available: Option<i32>,
    /// Seconds from the change to done, if it got there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done_after_seconds: Option<f64>,
    /// `[seconds, available, updated]` at each change.
    pub timeline: Vec<(f64, i32, i32)>,
    /// Its pods per revision at each change.
    pub revisions: Vec<RevisionCounts>,
    /// Spells its controller held the rollout back (a budget, pacing), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<Wait>,
}

/// A spell a workload's rollout was held back, as its controller's condition said.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    /// The condition's reason (`DisruptionBudget`, `MaxUpdating`, `MinUpdateInterval`).
    pub reason: String,
    /// Its last message ("waiting on pdb/web (0 disruptions allowed)").
    pub message: String,
    /// Seconds since the change it began and was last seen.
    pub from: f64,
    /// See `from`.
    pub to: f64,
}

/// Records `waiting` seen at `at` in `waits`: a spell of the same reason goes on, another begins
/// one.
fn note_wait(waits: &mut Vec<Wait>, waiting: Option<&(String, String)>, at: f64, open: &mut bool) {
    match waiting {
        Some((reason, message)) => match waits.last_mut() {
            Some(w) if *open && w.reason == *reason => {
                w.to = at;
                w.message.clone_from(message);
            }
            _ => {
                waits.push(Wait {
                    reason: reason.clone(),
                    message: message.clone(),
                    from: at,
                    to: at,
                });
                *open = true;
            }
        },
        None => {
            if *open && let Some(w) = waits.last_mut() {
                w.to = at;
            }
            *open = false;
        }
    }
}

/// A workload's pods per revision at a moment of the rollout.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RevisionCounts {
    /// Seconds since the change.
    pub at: f64,
    /// `[pods, Ready pods]` per revision (its number, as its controller recorded it).
    pub pods: BTreeMap<String, (i32, i32)>,
}

/// How a rehearsed rollout went.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Seconds from the change to the end (done, stalled, or out of time).
    pub seconds: f64,
    /// Whether every changed workload finished.
    pub finished: bool,
    /// The changed workloads.
    pub workloads: Vec<Followed>,
    /// Why it stopped, if it did not finish.
    pub stalls: Vec<Stall>,
    /// The nodes as the rollout moved over them.
    pub nodes: super::frames::Frames,
}

/// What a rehearsal follows after its changes.
pub struct Following<'a> {
    /// Each workload's generation before the changes: one with another (or a new workload) was
    /// changed.
    pub before: &'a BTreeMap<WorkloadId, i64>,
    /// Workloads changed otherwise (pods on a drained node).
    pub also: &'a BTreeSet<WorkloadId>,
    /// Whether a change is still at work (a drain evicting).
    pub busy: &'a (dyn Fn() -> bool + Sync),
    /// Refused evictions so far.
    pub evictions: &'a Mutex<Vec<(WorkloadId, String)>>,
    /// The uids of the pods there before the changes.
    pub old_pods: &'a HashSet<String>,
}

/// How long the changes may take to show in the watch before they count as changing nothing.
const NO_CHANGE: Duration = Duration::from_secs(5);

/// Follows the changed workloads from `start` until each is done (and no change is at work),
/// nothing moves for `stall_after` while the pods say why (or for three times that), a progress
/// deadline fires, or `timeout` passes. `None` when no workload changed.
pub async fn follow(
    watch: &Watch,
    what: Following<'_>,
    start: Instant,
    stall_after: Duration,
    timeout: Duration,
) -> Option<Outcome> {
    let mut followed: BTreeMap<WorkloadId, Followed> = BTreeMap::new();
    let mut waiting_open: BTreeMap<WorkloadId, bool> = BTreeMap::new();
    let mut frames = super::frames::Frames::new(watch.node_names());
    let mut last_move = Instant::now();
    let mut last_seen: Option<Vec<(i32, i32, i32, bool)>> = None;
    loop {
        let now = Instant::now();
        let at = now.duration_since(start).as_secs_f64();
        let current: BTreeMap<WorkloadId, Standing> = watch
            .workloads()
            .into_iter()
            .filter(|(id, s)| what.also.contains(id) || what.before.get(id) != Some(&s.generation))
            .collect();
        if current.is_empty() {
            if now.duration_since(start) >= NO_CHANGE {
                return None;
            }
            watch.changed(Duration::from_millis(250)).await;
            continue;
        }
        for (id, s) in &current {
            let f = followed.entry(id.clone()).or_insert_with(|| Followed {
                workload: id.to_string(),
                desired: s.desired,
                lowest_available: s.available,
                max_unavailable: s.max_unavailable,
                budget_min_available: s.budget,
                done_after_seconds: None,
                timeline: Vec::new(),
                revisions: Vec::new(),
                waits: Vec::new(),
            });
            let open = waiting_open.entry(id.clone()).or_default();
            note_wait(&mut f.waits, s.waiting.as_ref(), at, open);
            f.desired = s.desired;
            f.lowest_available = f.lowest_available.min(s.available);
            if f.timeline
                .last()
                .is_none_or(|&(_, a, u)| (a, u) != (s.available, s.updated))
            {
                f.timeline.push((at, s.available, s.updated));
            }
            let pods = watch.per_revision(id, s);
            if f.revisions.last().is_none_or(|r| r.pods != pods) {
                f.revisions.push(RevisionCounts { at, pods });
            }
            if s.done && f.done_after_seconds.is_none() {
                f.done_after_seconds = Some(at);
            } else if !s.done {
                f.done_after_seconds = None;
            }
        }
        if frames.due(at) {
            let placed = watch.placed(&current);
            frames.record(
                at,
                placed.iter().map(|(n, u)| (n.as_str(), u.as_str())),
                what.old_pods,
            );
        }
        let seen: Vec<(i32, i32, i32, bool)> = current
            .values()
            .map(|s| (s.desired, s.available, s.updated, s.done))
            .collect();
        if last_seen.as_ref() != Some(&seen) {
            last_seen = Some(seen);
            last_move = now;
        }
        let finished = current.values().all(|s| s.done) && !(what.busy)();
        let deadline = current.values().any(|s| s.deadline.is_some());
        // Stalled: nothing moved for the window and the pods say why (a pod still being created
        // says nothing yet), or nothing moved for three windows whatever they say.
        let quiet_for = now.duration_since(last_move);
        let stalled = quiet_for >= stall_after
            && (quiet_for >= 3 * stall_after || {
                let refused = what.evictions.lock().map(|e| e.clone()).unwrap_or_default();
                !watch.stalls(&current, &refused).is_empty()
            });
        if finished || deadline || stalled || now.duration_since(start) >= timeout {
            let evictions = what.evictions.lock().map(|e| e.clone()).unwrap_or_default();
            // Done: when the last workload got there. Stalled: since when nothing moved.
            let seconds = if finished {
                followed
                    .values()
                    .filter_map(|f| f.done_after_seconds)
                    .fold(0.0, f64::max)
            } else if stalled {
                last_move.duration_since(start).as_secs_f64()
            } else {
                at
            };
            return Some(Outcome {
                seconds,
                finished,
                stalls: if finished {
                    Vec::new()
                } else {
                    let mut stalls = watch.stalls(&current, &evictions);
                    if stalled {
                        let quiet_since = last_move.duration_since(start).as_secs_f64();
                        stalls.extend(deadlines_ahead(&current, quiet_since));
                    }
                    stalls
                },
                workloads: followed.into_values().collect(),
                nodes: {
                    // The end, as it is.
                    let placed = watch.placed(&current);
                    frames.record(
                        at,
                        placed.iter().map(|(n, u)| (n.as_str(), u.as_str())),
                        what.old_pods,
                    );
                    frames
                },
            });
        }
        watch.changed(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).expect("pod")
    }

    #[test]
    fn a_pod_says_why_it_is_not_ready() {
        let unschedulable = pod(
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu."}]}),
        );
        assert_eq!(
            pod_blocker(&unschedulable),
            Some((
                "Unschedulable".into(),
                "0/3 nodes are available: 3 Insufficient cpu.".into()
            ))
        );
        let pulling = pod(
            json!({"phase": "Pending", "containerStatuses": [{"name": "c",
            "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff",
                "message": "Back-off pulling image \"x\""}}}]}),
        );
        assert_eq!(
            pod_blocker(&pulling).map(|b| b.0),
            Some("ImagePullBackOff".into())
        );
        // Still being created: not a blocker yet.
        let creating = pod(
            json!({"phase": "Pending", "containerStatuses": [{"name": "c",
            "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        );
        assert_eq!(pod_blocker(&creating), None);
        let unready = pod(json!({"phase": "Running", "conditions": [{"type": "Ready",
            "status": "False", "message": "Readiness probe failed: 503"}]}));
        assert_eq!(
            pod_blocker(&unready),
            Some(("Unready".into(), "Readiness probe failed: 503".into()))
        );
    }

    #[test]
    fn a_stalled_rollout_says_when_its_deadline_would_fire() {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "generation": 2},
            "spec": {"replicas": 3, "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": {"app": "web"}}, "template": {}},
            "status": {"observedGeneration": 2, "replicas": 4, "updatedReplicas": 1,
                "availableReplicas": 3}}))
        .expect("deployment");
        let id = WorkloadId {
            kind: "deployment",
            namespace: "shop".into(),
            name: "web".into(),
        };
        let stalls = deadlines_ahead(&BTreeMap::from([(id, deployment(&d))]), 2.4);
        assert_eq!(
            stalls,
            vec![Stall {
                workload: "deployment/shop/web".into(),
                reason: "ProgressDeadlineExceeded".into(),
                message: "would fire about 602 s after the change (600 s without progress)".into(),
                pods: 0,
            }]
        );
    }

    #[test]
    fn a_statefulset_is_done_as_kubectl_says_partition_and_all() {
        let sts = |partition: Value, current: &str, ready: i32, updated: i32| -> StatefulSet {
            serde_json::from_value(json!({
                "metadata": {"name": "db", "generation": 2},
                "spec": {"replicas": 3, "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}}, "template": {},
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": partition}},
                "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": ready,
                    "updatedReplicas": updated, "currentRevision": current,
                    "updateRevision": "db-2"}}))
            .expect("statefulset")
        };
        // Partition 0 (the API server's default): all updated and Ready, whatever
        // currentRevision says yet.
        assert!(statefulset(&sts(json!({"partition": 0}), "db-1", 3, 3)).done);
        assert!(!statefulset(&sts(json!({"partition": 0}), "db-1", 3, 2)).done);
        // Partition 2: only the pod above it is updated.
        assert!(statefulset(&sts(json!({"partition": 2}), "db-1", 3, 1)).done);
        assert!(!statefulset(&sts(json!({"partition": 2}), "db-1", 2, 1)).done);
        // No rollingUpdate at all: the revisions decide.
        assert!(!statefulset(&sts(Value::Null, "db-1", 3, 3)).done);
        assert!(statefulset(&sts(Value::Null, "db-2", 3, 3)).done);
    }

    #[test]
    fn a_deployment_is_done_when_kubectl_would_say_so() {
        let mut d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
                "template": {}},
            "status": {"observedGeneration": 2, "replicas": 10, "updatedReplicas": 10,
                "availableReplicas": 10}}))
        .expect("deployment");
        let s = deployment(&d);
        assert!(s.done);
        assert_eq!(s.max_unavailable, Some(2), "25% of 10, rounded down");
        // Old pods still counted: not done.
        if let Some(st) = d.status.as_mut() {
            st.replicas = Some(12);
        }
        assert!(!deployment(&d).done);
    }
}
