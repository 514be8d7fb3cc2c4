//! The pod garbage collector, as upstream's `pkg/controller/podgc`: nothing else removes a pod
//! whose kubelet is gone for good, so every [`Config::period`] it force-deletes
//!
//! - terminated pods (`Succeeded`/`Failed`) beyond [`Config::terminated_pod_threshold`], evicted
//!   ones first, then oldest first;
//! - terminating pods on a node that is not Ready and carries the
//!   `node.kubernetes.io/out-of-service` taint (the admin's word that its kubelet will not finish
//!   them);
//! - orphaned pods, bound to a node that does not exist: a missing node is first quarantined for
//!   [`Config::quarantine`] (the node watch may simply lag) and then confirmed with a live GET;
//! - unscheduled terminating pods (a `deletionTimestamp` and no `nodeName`).
//!
//! Before deleting a pod that is not terminal it sets the phase `Failed` (an orphaned pod also
//! gets the `DisruptionTarget` condition, reason `DeletionByPodGC`), as upstream, so whatever
//! holds a finalizer on it sees how it ended. Deletions use grace period 0.
//!
//! Each pass takes a compact [`Index`] of the shared cache's pods and nodes; the decisions are
//! pure functions over it, and only the pass talks to the API server. The controller's one key
//! is requeued every period: the pass is periodic by nature (upstream's `gcCheckPeriod`).

use crate::runtime::{Action, Controller, WorkQueue};
use futures::StreamExt;
use informer::{Informer, Informers, Subscription};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
};
use serde_json::{Value, json};
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};
use tokio::time::Instant;

/// The taint an admin puts on a node whose pods may be force-deleted (upstream's
/// `v1.TaintNodeOutOfService`).
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";
/// The reason of the `DisruptionTarget` condition an orphaned pod gets.
pub const REASON: &str = "DeletionByPodGC";
/// The message of that condition, upstream's.
pub const MESSAGE: &str = "PodGC: node no longer exists";

/// Why one pod could not be collected (logged; the next pass tries again).
pub type Error = crate::runtime::ApiError;

/// How the pod garbage collector runs; upstream's constants, configurable so tests run fast.
#[derive(Clone, Debug)]
pub struct Config {
    /// Time between passes (upstream's `gcCheckPeriod`, 20s).
    pub period: Duration,
    /// How long a node must stay missing from the node watch before a live GET decides that its
    /// pods are orphans (upstream's `quarantineTime`, 40s).
    pub quarantine: Duration,
    /// Terminated pods kept before the oldest are deleted (`--terminated-pod-gc-threshold`,
    /// 12500); 0 keeps them all, as upstream.
    pub terminated_pod_threshold: usize,
    /// Deletions in flight at once (upstream starts one goroutine per pod; this bounds it).
    pub concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            period: Duration::from_secs(20),
            quarantine: Duration::from_secs(40),
            terminated_pod_threshold: 12500,
            concurrency: 32,
        }
    }
}

/// A pod's identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the decisions need of a pod; kept small so 100,000 pods cost little memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInfo {
    /// Its uid, the precondition of every write (a recreated pod is left alone).
    pub uid: String,
    /// `spec.nodeName`, empty when unscheduled.
    pub node: String,
    /// `status.phase`.
    pub phase: String,
    /// `status.reason` is `Evicted` on a `Failed` pod (upstream's `eviction.PodIsEvicted`).
    pub evicted: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
}

impl PodInfo {
    /// The parts of `pod` the collector uses, if it has a namespace and a name.
    pub fn of(pod: &Pod) -> Option<(PodKey, Self)> {
        let meta = &pod.metadata;
        let key = PodKey {
            namespace: meta.namespace.clone()?,
            name: meta.name.clone()?,
        };
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
        let evicted =
            phase == "Failed" && status.and_then(|s| s.reason.as_deref()) == Some("Evicted");
        let info = Self {
            uid: meta.uid.clone().unwrap_or_default(),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            phase,
            evicted,
            terminating: meta.deletion_timestamp.is_some(),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
        };
        Some((key, info))
    }

    /// `Succeeded` or `Failed`. Upstream counts every phase but Pending, Running and Unknown; an
    /// empty phase (which the API server never leaves) is not counted here, so a pod that has
    /// not been defaulted yet is never taken for a finished one.
    pub fn is_terminated(&self) -> bool {
        !matches!(self.phase.as_str(), "" | "Pending" | "Running" | "Unknown")
    }

    /// Whether the phase must be set to `Failed` before the pod is deleted.
    fn needs_failing(&self) -> bool {
        !matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }
}

/// What the decisions need of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// It carries the [`OUT_OF_SERVICE_TAINT`] (any effect).
    pub out_of_service: bool,
}

impl NodeInfo {
    /// The parts of `node` the collector uses, if it has a name.
    pub fn of(node: &Node) -> Option<(String, Self)> {
        let name = node.metadata.name.clone()?;
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let out_of_service = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT));
        Some((
            name,
            Self {
                ready,
                out_of_service,
            },
        ))
    }
}

/// The pods and nodes as the watches last saw them.
#[derive(Debug, Default)]
pub struct Index {
    /// Every pod.
    pub pods: HashMap<PodKey, PodInfo>,
    /// Every node, by name.
    pub nodes: HashMap<String, NodeInfo>,
}

/// Upstream's deletion order (`byEvictionAndCreationTimestamp`): evicted pods first, so pods of
/// controllers that finished on their own are kept longest, then oldest first, then by name.
fn deletion_order(a: &(&PodKey, &PodInfo), b: &(&PodKey, &PodInfo)) -> std::cmp::Ordering {
    b.1.evicted
        .cmp(&a.1.evicted)
        .then_with(|| a.1.created.cmp(&b.1.created))
        .then_with(|| a.0.name.cmp(&b.0.name))
        .then_with(|| a.0.namespace.cmp(&b.0.namespace))
}

fn ordered<'a>(mut pods: Vec<(&'a PodKey, &'a PodInfo)>) -> Vec<(PodKey, PodInfo)> {
    pods.sort_by(deletion_order);
    pods.into_iter()
        .map(|(k, i)| (k.clone(), i.clone()))
        .collect()
}

/// The terminated pods beyond `threshold`, the first to go first (upstream's `gcTerminated`);
/// none when `threshold` is 0.
pub fn terminated_excess(index: &Index, threshold: usize) -> Vec<(PodKey, PodInfo)> {
    if threshold == 0 {
        return Vec::new();
    }
    let terminated: Vec<_> = index
        .pods
        .iter()
        .filter(|(_, p)| p.is_terminated())
        .collect();
    let excess = terminated.len().saturating_sub(threshold);
    if excess == 0 {
        return Vec::new();
    }
    let mut victims = ordered(terminated);
    victims.truncate(excess);
    victims
}

/// Terminating pods on a node that is not Ready and is tainted out-of-service (upstream's
/// `gcTerminating`): its kubelet will not finish them.
pub fn terminating_out_of_service(index: &Index) -> Vec<(PodKey, PodInfo)> {
    ordered(
        index
            .pods
            .iter()
            .filter(|(_, p)| p.terminating)
            .filter(|(_, p)| {
                index
                    .nodes
                    .get(&p.node)
                    .is_some_and(|n| !n.ready && n.out_of_service)
            })
            .collect(),
    )
}

/// Terminating pods that were never scheduled (upstream's `gcUnscheduledTerminating`): no kubelet
/// will ever finish them.
pub fn unscheduled_terminating(index: &Index) -> Vec<(PodKey, PodInfo)> {
    let mut pods: Vec<_> = index
        .pods
        .iter()
        .filter(|(_, p)| p.terminating && p.node.is_empty())
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect();
    pods.sort_by(|a, b| a.0.cmp(&b.0));
    pods
}

/// Names of nodes that pods are bound to but the node watch does not know.
pub fn missing_nodes(index: &Index) -> HashSet<String> {
    index
        .pods
        .values()
        .filter(|p| !p.node.is_empty() && !index.nodes.contains_key(&p.node))
        .map(|p| p.node.clone())
        .collect()
}

/// The pods bound to one of `gone`.
pub fn orphans(index: &Index, gone: &HashSet<String>) -> Vec<(PodKey, PodInfo)> {
    let mut pods: Vec<_> = index
        .pods
        .iter()
        .filter(|(_, p)| gone.contains(&p.node))
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect();
    pods.sort_by(|a, b| a.0.cmp(&b.0));
    pods
}

/// Missing nodes waiting out their quarantine, as upstream's delaying `nodeQueue`: a name is due
/// once `quarantine` has passed since it was first found missing; adding it again while it waits
/// does not postpone it.
#[derive(Debug, Default)]
pub struct Quarantine {
    due: HashMap<String, Instant>,
}

impl Quarantine {
    /// Starts the wait of every name in `missing` that is not waiting already.
    pub fn add(
        &mut self,
        missing: impl IntoIterator<Item = String>,
        now: Instant,
        quarantine: Duration,
    ) {
        for name in missing {
            self.due.entry(name).or_insert(now + quarantine);
        }
    }

    /// Takes the names whose quarantine is over. Each leaves the queue: if its node is still
    /// missing at a later pass it starts a new quarantine, as upstream.
    pub fn take_due(&mut self, now: Instant) -> Vec<String> {
        let mut due: Vec<String> = self
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in &due {
            self.due.remove(name);
        }
        due.sort();
        due
    }

    /// How many names wait.
    pub fn len(&self) -> usize {
        self.due.len()
    }

    /// Whether no name waits.
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

/// The status patch that marks a pod `Failed` (upstream's `markFailedAndDeletePodWithCondition`),
/// with the orphan's `DisruptionTarget` condition when `orphaned`. The uid makes it apply only to
/// the pod that was judged.
pub fn failed_status_patch(uid: &str, orphaned: bool, now: Timestamp) -> Value {
    let mut status = json!({"phase": "Failed"});
    if orphaned {
        status["conditions"] = json!([{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": REASON,
            "message": MESSAGE,
            "lastTransitionTime": now.to_string(),
        }]);
    }
    json!({"metadata": {"uid": uid}, "status": status})
}

/// Why a pod is collected; it decides the status written before the deletion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Terminated,
    TerminatingOutOfService,
    Orphaned,
    UnscheduledTerminating,
}

/// The pod garbage collector: the shared cache's pods and nodes, the nodes in quarantine, and
/// the one key that runs its periodic pass.
pub struct PodGarbageCollector {
    client: Client,
    config: Config,
    pods: Informer<Pod>,
    nodes: Informer<Node>,
    quarantine: Mutex<Quarantine>,
    queue: WorkQueue<()>,
}

impl Controller for PodGarbageCollector {
    const NAME: &'static str = "podgc";
    type Key = ();
    type Error = Error;

    fn queue(&self) -> &WorkQueue<()> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        // No handler: the pass reads the cache; the first one runs once it has listed.
        self.queue.add(());
        Vec::new()
    }

    async fn reconcile(self: &Arc<Self>, (): ()) -> Result<Action, Error> {
        self.pass().await;
        Ok(Action::requeue(self.config.period))
    }
}

impl PodGarbageCollector {
    /// The collector on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            pods: informers.get(),
            nodes: informers.get(),
            quarantine: Mutex::new(Quarantine::default()),
            queue: WorkQueue::default(),
            config,
        })
    }

    /// The pods and nodes of the cache as the decisions read them.
    fn index(&self) -> Index {
        Index {
            pods: self
                .pods
                .store()
                .list()
                .iter()
                .filter_map(|p| PodInfo::of(p))
                .collect(),
            nodes: self
                .nodes
                .store()
                .list()
                .iter()
                .filter_map(|n| NodeInfo::of(n))
                .collect(),
        }
    }

    fn quarantine(&self) -> MutexGuard<'_, Quarantine> {
        // Quarantine updates complete before anything can panic.
        self.quarantine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One pass, in upstream's order: terminated, terminating out-of-service, orphaned,
    /// unscheduled terminating.
    async fn pass(&self) {
        let index = self.index();
        let (terminated, out_of_service, missing, known) = (
            terminated_excess(&index, self.config.terminated_pod_threshold),
            terminating_out_of_service(&index),
            missing_nodes(&index),
            index.nodes.keys().cloned().collect::<HashSet<_>>(),
        );
        if !terminated.is_empty() {
            tracing::info!(
                pods = terminated.len(),
                "garbage collecting terminated pods"
            );
        }
        self.collect(terminated, Cause::Terminated).await;
        self.collect(out_of_service, Cause::TerminatingOutOfService)
            .await;

        let due = {
            let mut quarantine = self.quarantine();
            quarantine.add(missing, Instant::now(), self.config.quarantine);
            quarantine.take_due(Instant::now())
        };
        let gone = self.discover_deleted(due, &known).await;
        if !gone.is_empty() {
            let orphaned = orphans(&self.index(), &gone);
            self.collect(orphaned, Cause::Orphaned).await;
        }

        let unscheduled = unscheduled_terminating(&self.index());
        self.collect(unscheduled, Cause::UnscheduledTerminating)
            .await;
    }

    /// The names among `due` whose node a live GET does not find. A node the watch knew when the
    /// pass began is not gone; a failed GET leaves the name for a later quarantine.
    async fn discover_deleted(&self, due: Vec<String>, known: &HashSet<String>) -> HashSet<String> {
        let api: Api<Node> = Api::all(self.client.clone());
        let mut gone = HashSet::new();
        for name in due.into_iter().filter(|n| !known.contains(n)) {
            match api.get_opt(&name).await {
                Ok(None) => {
                    gone.insert(name);
                }
                Ok(Some(_)) => {}
                Err(error) => tracing::warn!(node = %name, %error, "pod GC: could not get node"),
            }
        }
        gone
    }

    async fn collect(&self, pods: Vec<(PodKey, PodInfo)>, cause: Cause) {
        futures::stream::iter(pods)
            .for_each_concurrent(self.config.concurrency.max(1), |(key, info)| async move {
                match self.mark_failed_and_delete(&key, &info, cause).await {
                    Ok(()) => {
                        if cause != Cause::Terminated {
                            tracing::info!(pod = %key, node = %info.node, ?cause, "forced deletion of pod succeeded");
                        }
                    }
                    Err(error) => {
                        tracing::warn!(pod = %key, ?cause, %error, "pod GC could not delete pod")
                    }
                }
            })
            .await
    }

    /// Sets the phase `Failed` if the pod is not terminal (no kubelet will), then deletes it with
    /// grace period 0. A pod already gone counts as collected.
    async fn mark_failed_and_delete(
        &self,
        key: &PodKey,
        info: &PodInfo,
        cause: Cause,
    ) -> Result<(), Error> {
        tracing::debug!(pod = %key, "PodGC is force deleting Pod");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        if info.needs_failing() {
            let patch = failed_status_patch(&info.uid, cause == Cause::Orphaned, clock::now());
            match api
                .patch_status(
                    &key.name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: (!info.uid.is_empty()).then(|| Preconditions {
                uid: Some(info.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&key.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Option<Timestamp> {
        Some(Timestamp::from_second(1_700_000_000 + secs).unwrap())
    }

    fn pod(name: &str, node: &str, phase: &str, created: i64) -> (PodKey, PodInfo) {
        (
            PodKey {
                namespace: "default".into(),
                name: name.into(),
            },
            PodInfo {
                uid: format!("uid-{name}"),
                node: node.into(),
                phase: phase.into(),
                evicted: false,
                terminating: false,
                created: t(created),
            },
        )
    }

    fn evicted(mut p: (PodKey, PodInfo)) -> (PodKey, PodInfo) {
        p.1.evicted = true;
        p
    }

    fn terminating(mut p: (PodKey, PodInfo)) -> (PodKey, PodInfo) {
        p.1.terminating = true;
        p
    }

    fn index(pods: Vec<(PodKey, PodInfo)>, nodes: &[(&str, bool, bool)]) -> Index {
        Index {
            pods: pods.into_iter().collect(),
            nodes: nodes
                .iter()
                .map(|(n, ready, oos)| {
                    (
                        n.to_string(),
                        NodeInfo {
                            ready: *ready,
                            out_of_service: *oos,
                        },
                    )
                })
                .collect(),
        }
    }

    type Entry = (PodKey, PodInfo);

    fn names(pods: &[(PodKey, PodInfo)]) -> Vec<&str> {
        pods.iter().map(|(k, _)| k.name.as_str()).collect()
    }

    #[test]
    fn terminated_phases() {
        for (phase, terminated) in [
            ("", false),
            ("Pending", false),
            ("Running", false),
            ("Unknown", false),
            ("Succeeded", true),
            ("Failed", true),
        ] {
            let p = PodInfo {
                phase: phase.into(),
                ..Default::default()
            };
            assert_eq!(p.is_terminated(), terminated, "{phase:?}");
        }
    }

    #[test]
    fn terminated_excess_table() {
        let cases: Vec<(&str, Vec<Entry>, usize, Vec<&str>)> = vec![
            (
                "under the threshold",
                vec![pod("a", "n", "Succeeded", 1)],
                2,
                vec![],
            ),
            (
                "exactly the threshold",
                vec![pod("a", "n", "Succeeded", 1), pod("b", "n", "Failed", 2)],
                2,
                vec![],
            ),
            (
                "oldest first",
                vec![
                    pod("c", "n", "Succeeded", 3),
                    pod("a", "n", "Failed", 1),
                    pod("d", "n", "Succeeded", 4),
                    pod("b", "n", "Succeeded", 2),
                ],
                2,
                vec!["a", "b"],
            ),
            (
                "running pods do not count",
                vec![
                    pod("a", "n", "Running", 1),
                    pod("b", "n", "Pending", 2),
                    pod("c", "n", "Succeeded", 3),
                    pod("d", "n", "Failed", 4),
                ],
                1,
                vec!["c"],
            ),
            (
                "evicted before older",
                vec![
                    pod("a", "n", "Succeeded", 1),
                    evicted(pod("z", "n", "Failed", 9)),
                    pod("b", "n", "Succeeded", 2),
                ],
                1,
                vec!["z", "a"],
            ),
            (
                "name breaks ties",
                vec![pod("b", "n", "Failed", 1), pod("a", "n", "Failed", 1)],
                1,
                vec!["a"],
            ),
            (
                "threshold 0 disables",
                vec![pod("a", "n", "Failed", 1)],
                0,
                vec![],
            ),
        ];
        for (what, pods, threshold, want) in cases {
            let got = terminated_excess(&index(pods, &[]), threshold);
            assert_eq!(names(&got), want, "{what}");
        }
    }

    #[test]
    fn terminating_out_of_service_table() {
        let nodes = [
            ("oos-down", false, true),
            ("oos-ready", true, true),
            ("down", false, false),
        ];
        let cases = vec![
            (
                "terminating on a down out-of-service node",
                terminating(pod("a", "oos-down", "Running", 1)),
                true,
            ),
            ("not terminating", pod("b", "oos-down", "Running", 1), false),
            (
                "node ready",
                terminating(pod("c", "oos-ready", "Running", 1)),
                false,
            ),
            (
                "no taint",
                terminating(pod("d", "down", "Running", 1)),
                false,
            ),
            (
                "unknown node",
                terminating(pod("e", "gone", "Running", 1)),
                false,
            ),
            (
                "unscheduled",
                terminating(pod("f", "", "Pending", 1)),
                false,
            ),
        ];
        for (what, p, want) in cases {
            let got = terminating_out_of_service(&index(vec![p], &nodes));
            assert_eq!(!got.is_empty(), want, "{what}");
        }
    }

    #[test]
    fn unscheduled_terminating_table() {
        let cases = vec![
            (
                "terminating, no node",
                terminating(pod("a", "", "Pending", 1)),
                true,
            ),
            (
                "terminating, bound",
                terminating(pod("b", "n", "Running", 1)),
                false,
            ),
            (
                "unscheduled, not terminating",
                pod("c", "", "Pending", 1),
                false,
            ),
        ];
        for (what, p, want) in cases {
            let got = unscheduled_terminating(&index(vec![p], &[("n", true, false)]));
            assert_eq!(!got.is_empty(), want, "{what}");
        }
    }

    #[test]
    fn missing_nodes_and_orphans() {
        let idx = index(
            vec![
                pod("a", "n1", "Running", 1),
                pod("b", "gone", "Running", 1),
                pod("c", "gone", "Succeeded", 1),
                pod("d", "", "Pending", 1),
                pod("e", "lagging", "Running", 1),
            ],
            &[("n1", true, false)],
        );
        let mut missing: Vec<_> = missing_nodes(&idx).into_iter().collect();
        missing.sort();
        assert_eq!(missing, vec!["gone", "lagging"]);
        let gone = HashSet::from(["gone".to_string()]);
        assert_eq!(names(&orphans(&idx, &gone)), vec!["b", "c"]);
    }

    #[test]
    fn quarantine_waits_from_first_sighting() {
        let start = Instant::now();
        let q = Duration::from_secs(40);
        let mut quarantine = Quarantine::default();
        quarantine.add(["x".to_string()], start, q);
        // Seen again later: the wait is not restarted.
        quarantine.add(
            ["x".to_string(), "y".to_string()],
            start + Duration::from_secs(20),
            q,
        );
        assert!(
            quarantine
                .take_due(start + Duration::from_secs(39))
                .is_empty()
        );
        assert_eq!(quarantine.take_due(start + q), vec!["x"]);
        assert_eq!(quarantine.len(), 1);
        assert!(
            quarantine
                .take_due(start + Duration::from_secs(59))
                .is_empty()
        );
        assert_eq!(
            quarantine.take_due(start + Duration::from_secs(60)),
            vec!["y"]
        );
        assert!(quarantine.is_empty());
        // Taken names start over.
        quarantine.add(["x".to_string()], start + Duration::from_secs(60), q);
        assert!(
            quarantine
                .take_due(start + Duration::from_secs(99))
                .is_empty()
        );
        assert_eq!(
            quarantine.take_due(start + Duration::from_secs(100)),
            vec!["x"]
        );
    }

    #[test]
    fn failing_before_deletion() {
        for (phase, needs) in [
            ("Pending", true),
            ("Running", true),
            ("Unknown", true),
            ("", true),
            ("Succeeded", false),
            ("Failed", false),
        ] {
            let p = PodInfo {
                phase: phase.into(),
                ..Default::default()
            };
            assert_eq!(p.needs_failing(), needs, "{phase:?}");
        }
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let orphan = failed_status_patch("u1", true, now);
        assert_eq!(orphan["metadata"]["uid"], "u1");
        assert_eq!(orphan["status"]["phase"], "Failed");
        let condition = &orphan["status"]["conditions"][0];
        assert_eq!(condition["type"], "DisruptionTarget");
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], "DeletionByPodGC");
        assert_eq!(condition["message"], "PodGC: node no longer exists");
        assert_eq!(condition["lastTransitionTime"], "2023-11-14T22:13:20Z");
        let plain = failed_status_patch("u2", false, now);
        assert_eq!(plain["status"], json!({"phase": "Failed"}));
    }

    #[test]
    fn pod_and_node_info() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "p", "uid": "u",
                "creationTimestamp": "2023-11-14T22:13:20Z", "deletionTimestamp": "2023-11-14T22:14:20Z"},
            "spec": {"nodeName": "n", "containers": []},
            "status": {"phase": "Failed", "reason": "Evicted"},
        }))
        .unwrap();
        let (key, info) = PodInfo::of(&pod).unwrap();
        assert_eq!(key.to_string(), "ns/p");
        assert_eq!(
            info,
            PodInfo {
                uid: "u".into(),
                node: "n".into(),
                phase: "Failed".into(),
                evicted: true,
                terminating: true,
                created: t(0),
            }
        );
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"taints": [{"key": OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        }))
        .unwrap();
        assert_eq!(
            NodeInfo::of(&node).unwrap(),
            (
                "n".to_string(),
                NodeInfo {
                    ready: false,
                    out_of_service: true
                }
            )
        );
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "m"}})).unwrap();
        assert_eq!(NodeInfo::of(&bare).unwrap().1, NodeInfo::default());
    }
}
