//! The promises a rollout keeps whatever crashes around it (`../shared/SEMANTICS.md`), checked on
//! what any client sees: pure functions over a snapshot of pods, ReplicaSets, Deployments and
//! DaemonSets, so that tables can test them.
//!
//! - Deployment, RollingUpdate: active pods, and the ReplicaSets' `spec.replicas`, never exceed
//!   `replicas + maxSurge`; once `replicas - maxUnavailable` pods have been available, available
//!   pods never drop below that again.
//! - Deployment, Recreate: pods of two templates never exist at once, terminating ones included.
//! - DaemonSet: never two active pods of one revision on a node, nor two at all without
//!   `maxSurge` (a *duplicate daemon pod*); RollingUpdate: once every node had an available pod,
//!   at most `maxUnavailable` nodes lack one.
//! - StatefulSet, RollingUpdate: once every ordinal had a ready pod, at most `maxUnavailable`
//!   (rounded down, at least 1) ordinals lack one; OrderedReady: a pod is created only when every
//!   lower ordinal has a Running and Ready pod (judged on pods seen created, not on pods that
//!   appear in a relist after the watcher lost its watch: their predecessors may have changed in
//!   the gap).
//!
//! A state that stays broken over many events is one breach: [`Checker`] counts a breach when a
//! rule goes from kept to broken.

use api::pod::{is_active, is_ready};
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet},
    core::v1::Pod,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What the watcher sees of the chaos namespace.
#[derive(Default)]
pub(crate) struct Snapshot {
    pub pods: BTreeMap<String, Pod>,
    pub replica_sets: BTreeMap<String, ReplicaSet>,
    pub deployments: BTreeMap<String, Deployment>,
    pub daemon_sets: BTreeMap<String, DaemonSet>,
    pub stateful_sets: BTreeMap<String, StatefulSet>,
    /// Objects (uids) that arrived through a relist since the last look: whatever happened to
    /// them in the gap is not known, so they are not judged as just created.
    pub relisted: BTreeSet<String>,
}

/// One broken promise.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Breach {
    /// `Deployment/<name>` or `DaemonSet/<name>`.
    pub workload: String,
    /// Which rule (`max-surge`, `max-unavailable`, `recreate-overlap`, `duplicate-daemon-pod`).
    pub rule: String,
    /// The numbers that broke it.
    pub detail: String,
}

impl Breach {
    fn new(workload: String, rule: &str, detail: String) -> Self {
        Self {
            workload,
            rule: rule.into(),
            detail,
        }
    }

    /// Whether this is a duplicate daemon pod (reported on its own line).
    pub fn is_duplicate_daemon_pod(&self) -> bool {
        self.rule == DUPLICATE
    }
}

const DUPLICATE: &str = "duplicate-daemon-pod";

/// The rules checked over time: which availability floors have been reached, and which rules are
/// broken right now.
#[derive(Default)]
pub(crate) struct Checker {
    /// Nodes in the cluster: a DaemonSet is fully available with an available pod on each.
    nodes: usize,
    /// Workloads whose availability floor has been reached (availability is checked from then).
    armed: BTreeSet<String>,
    /// Rules broken at the last look, by workload and rule.
    open: BTreeSet<(String, String)>,
    /// The pods seen so far (by uid): a pod not among them was just created.
    seen: BTreeSet<String>,
    /// Every breach, once per time a rule went from kept to broken.
    pub breaches: Vec<Breach>,
}

impl Checker {
    /// A checker for a cluster of `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            ..Default::default()
        }
    }

    /// Checks every workload in `snap`; records rules that just broke.
    pub fn observe(&mut self, snap: &Snapshot) {
        let mut now = Vec::new();
        for d in snap.deployments.values() {
            now.extend(deployment(d, snap, &mut self.armed));
        }
        for ds in snap.daemon_sets.values() {
            now.extend(daemon_set(ds, snap, self.nodes, &mut self.armed));
        }
        self.seen.extend(snap.relisted.iter().cloned());
        for sts in snap.stateful_sets.values() {
            now.extend(stateful_set(sts, snap, &self.seen, &mut self.armed));
        }
        self.seen = snap
            .pods
            .values()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let mut open = BTreeSet::new();
        for b in now {
            let key = (b.workload.clone(), b.rule.clone());
            if !self.open.contains(&key) {
                self.breaches.push(b);
            }
            open.insert(key);
        }
        self.open = open;
    }
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// The name of `meta`'s controller of kind `kind`, if any.
fn controller<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kind: &str,
) -> Option<&'a str> {
    api::pod::controller_of(meta)
        .filter(|o| o.kind == kind)
        .map(|o| o.name.as_str())
}

fn int_or_percent(
    v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
) -> Option<serde_json::Value> {
    v.and_then(|v| serde_json::to_value(v).ok())
}

/// The rules of one Deployment that are broken in `snap`.
fn deployment(d: &Deployment, snap: &Snapshot, armed: &mut BTreeSet<String>) -> Vec<Breach> {
    let id = format!("Deployment/{}", name(&d.metadata));
    let Some(spec) = &d.spec else {
        return Vec::new();
    };
    let replicas = spec.replicas.unwrap_or(1);
    let sets: BTreeSet<&str> = snap
        .replica_sets
        .values()
        .filter(|rs| controller(&rs.metadata, "Deployment") == Some(name(&d.metadata)))
        .map(|rs| name(&rs.metadata))
        .collect();
    // Pods are the Deployment's by its selector, not through the ReplicaSets: the two watches
    // are separate streams, and a pod may arrive before the ReplicaSet that owns it.
    let selector = spec.selector.match_labels.clone().unwrap_or_default();
    let pods: Vec<&Pod> = snap
        .pods
        .values()
        .filter(|p| controller(&p.metadata, "ReplicaSet").is_some())
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            !selector.is_empty()
                && selector
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .collect();
    let strategy = spec.strategy.as_ref();
    let mut broken = Vec::new();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        let templates: BTreeSet<&str> = pods
            .iter()
            .filter(|p| api::pod::phase(p) != "Succeeded" && api::pod::phase(p) != "Failed")
            .filter_map(|p| p.metadata.labels.as_ref()?.get("pod-template-hash"))
            .map(String::as_str)
            .collect();
        if templates.len() > 1 {
            broken.push(Breach::new(
                id,
                "recreate-overlap",
                format!("pods of templates {templates:?} at once"),
            ));
        }
        return broken;
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let (surge, unavailable) = api::intstr::resolve_fenceposts(
        int_or_percent(rolling.and_then(|r| r.max_surge.as_ref()))
            .or(Some(serde_json::json!("25%")))
            .as_ref(),
        int_or_percent(rolling.and_then(|r| r.max_unavailable.as_ref()))
            .or(Some(serde_json::json!("25%")))
            .as_ref(),
        replicas,
    )
    .unwrap_or((0, 1));
    let max_pods = replicas + surge;
    let active = pods.iter().filter(|p| is_active(p)).count() as i32;
    if active > max_pods {
        broken.push(Breach::new(
            id.clone(),
            "max-surge",
            format!("{active} active pods > {replicas} replicas + {surge} surge"),
        ));
    }
    let scaled: i32 = snap
        .replica_sets
        .values()
        .filter(|rs| sets.contains(name(&rs.metadata)))
        .map(|rs| rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0))
        .sum();
    if scaled > max_pods {
        broken.push(Breach::new(
            id.clone(),
            "max-surge",
            format!("ReplicaSets scaled to {scaled} > {replicas} replicas + {surge} surge"),
        ));
    }
    let floor = replicas - unavailable;
    let available = pods.iter().filter(|p| is_active(p) && is_ready(p)).count() as i32;
    if available >= floor {
        armed.insert(id.clone());
    } else if armed.contains(&id) {
        broken.push(Breach::new(
            id,
            "max-unavailable",
            format!("{available} available pods < {replicas} replicas - {unavailable} unavailable"),
        ));
    }
    broken
}

/// The rules of one DaemonSet that are broken in `snap`.
fn daemon_set(
    ds: &DaemonSet,
    snap: &Snapshot,
    nodes: usize,
    armed: &mut BTreeSet<String>,
) -> Vec<Breach> {
    let id = format!("DaemonSet/{}", name(&ds.metadata));
    let strategy = ds.spec.as_ref().and_then(|s| s.update_strategy.as_ref());
    let on_delete = strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete");
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let pods: Vec<&Pod> = snap
        .pods
        .values()
        .filter(|p| controller(&p.metadata, "DaemonSet") == Some(name(&ds.metadata)))
        .collect();
    let desired = i32::try_from(nodes).unwrap_or(i32::MAX);
    let surge = if on_delete {
        0
    } else {
        api::intstr::scaled_value_or(
            int_or_percent(rolling.and_then(|r| r.max_surge.as_ref())).as_ref(),
            api::intstr::IntOrPercent::Int(0),
            desired,
            true,
        )
        .unwrap_or(0)
    };
    let mut broken = Vec::new();
    let mut on_node: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for p in pods.iter().filter(|p| is_active(p)) {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            on_node.entry(node).or_default().push(p);
        }
    }
    for (node, here) in &on_node {
        let mut revisions: BTreeMap<&str, usize> = BTreeMap::new();
        for p in here {
            let hash = p.labels_or_empty("controller-revision-hash");
            *revisions.entry(hash).or_default() += 1;
        }
        let same_revision = revisions.values().any(|n| *n > 1);
        if same_revision || (surge == 0 && here.len() > 1) {
            let names: Vec<&str> = here.iter().map(|p| name(&p.metadata)).collect();
            broken.push(Breach::new(
                format!("{id}@{node}"),
                DUPLICATE,
                format!("{} active pods on {node}: {names:?}", here.len()),
            ));
        }
    }
    if on_delete {
        // Pods are replaced when someone deletes them: availability is theirs to keep.
        return broken;
    }
    let unavailable_limit = api::intstr::scaled_value_or(
        int_or_percent(rolling.and_then(|r| r.max_unavailable.as_ref())).as_ref(),
        api::intstr::IntOrPercent::Int(if surge == 0 { 1 } else { 0 }),
        desired,
        true,
    )
    .unwrap_or(1);
    let with = on_node
        .values()
        .filter(|ps| ps.iter().any(|p| is_ready(p)))
        .count() as i32;
    let without = desired - with;
    if without == 0 {
        armed.insert(id.clone());
    } else if armed.contains(&id) && without > unavailable_limit {
        let mut seen: Vec<String> = pods
            .iter()
            .map(|p| {
                format!(
                    "{}@{}:{}{}{}",
                    name(&p.metadata),
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .unwrap_or("-"),
                    p.labels_or_empty("controller-revision-hash"),
                    if is_ready(p) { "+ready" } else { "" },
                    if is_active(p) { "" } else { "+gone" },
                )
            })
            .collect();
        seen.sort();
        broken.push(Breach::new(
            id,
            "max-unavailable",
            format!(
                "{without} nodes without an available pod > maxUnavailable {unavailable_limit}: {}",
                seen.join(" ")
            ),
        ));
    }
    broken
}

/// The rules of one StatefulSet that are broken in `snap`; `seen` are the pods (uids) seen
/// before it, so that a pod not among them was just created.
fn stateful_set(
    sts: &StatefulSet,
    snap: &Snapshot,
    seen: &BTreeSet<String>,
    armed: &mut BTreeSet<String>,
) -> Vec<Breach> {
    let set = name(&sts.metadata);
    let id = format!("StatefulSet/{set}");
    let Some(spec) = &sts.spec else {
        return Vec::new();
    };
    let replicas = spec.replicas.unwrap_or(1);
    // Active pods of this set by ordinal (`<set>-<ordinal>`).
    let by_ordinal: BTreeMap<i32, &Pod> = snap
        .pods
        .values()
        .filter(|p| controller(&p.metadata, "StatefulSet") == Some(set) && is_active(p))
        .filter_map(|p| {
            let ordinal = name(&p.metadata).strip_prefix(set)?.strip_prefix('-')?;
            Some((ordinal.parse().ok()?, p))
        })
        .collect();
    let ready = |o: i32| by_ordinal.get(&o).is_some_and(|p| is_ready(p));
    let mut broken = Vec::new();
    if spec.pod_management_policy.as_deref() != Some("Parallel") {
        for (ordinal, p) in &by_ordinal {
            let new = p
                .metadata
                .uid
                .as_ref()
                .is_some_and(|uid| !seen.contains(uid));
            let waiting: Vec<i32> = (0..*ordinal).filter(|o| !ready(*o)).collect();
            if new && !waiting.is_empty() {
                broken.push(Breach::new(
                    id.clone(),
                    "ordered-ready",
                    format!(
                        "{} created while ordinals {waiting:?} were not Running and Ready",
                        name(&p.metadata)
                    ),
                ));
            }
        }
    }
    let rolling = spec
        .update_strategy
        .as_ref()
        .filter(|s| s.type_.as_deref() != Some("OnDelete"))
        .map(|s| s.rolling_update.as_ref());
    let Some(rolling) = rolling else {
        return broken;
    };
    let limit = api::intstr::scaled_value_or(
        int_or_percent(rolling.and_then(|r| r.max_unavailable.as_ref())).as_ref(),
        api::intstr::IntOrPercent::Int(1),
        replicas,
        false,
    )
    .unwrap_or(1)
    .max(1);
    let without: Vec<i32> = (0..replicas).filter(|o| !ready(*o)).collect();
    if without.is_empty() {
        armed.insert(id.clone());
    } else if armed.contains(&id) && without.len() as i32 > limit {
        broken.push(Breach::new(
            id,
            "max-unavailable",
            format!("ordinals {without:?} without a ready pod > maxUnavailable {limit}"),
        ));
    }
    broken
}

/// A label's value, or "" (for breach details).
trait LabelOf {
    fn labels_or_empty(&self, key: &str) -> &str;
}

impl LabelOf for Pod {
    fn labels_or_empty(&self, key: &str) -> &str {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map_or("", String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(
        name: &str,
        owner: (&str, &str),
        labels: serde_json::Value,
        node: &str,
        ready: bool,
        terminating: bool,
    ) -> Pod {
        let mut p = json!({
            "metadata": {"name": name, "labels": labels,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner.0, "name": owner.1,
                    "uid": format!("uid-{}", owner.1), "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app:v1"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready",
                "status": if ready { "True" } else { "False" }}]}
        });
        if terminating {
            p["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        }
        serde_json::from_value(p).unwrap_or_default()
    }

    fn rs(name: &str, deployment: &str, replicas: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "Deployment", "name": deployment, "uid": "u", "controller": true}]},
            "spec": {"replicas": replicas, "selector": {}}
        }))
        .unwrap_or_default()
    }

    fn deployment(strategy: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "strategy": strategy,
                "template": {"spec": {"containers": []}}}
        }))
        .unwrap_or_default()
    }

    fn daemon_set(strategy: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "agent"},
            "spec": {"selector": {}, "updateStrategy": strategy,
                "template": {"spec": {"containers": []}}}
        }))
        .unwrap_or_default()
    }

    fn rules(snap: &Snapshot) -> Vec<String> {
        let mut checker = Checker::new(3);
        // Arm availability first with a fully available state, then look at the snapshot.
        checker
            .armed
            .extend(["Deployment/web".to_string(), "DaemonSet/agent".to_string()]);
        checker.observe(snap);
        checker.breaches.iter().map(|b| b.rule.clone()).collect()
    }

    fn web_pods(specs: &[(&str, &str, bool, bool)]) -> BTreeMap<String, Pod> {
        specs
            .iter()
            .map(|(n, rs_name, ready, terminating)| {
                let hash = rs_name.trim_start_matches("web-");
                (
                    n.to_string(),
                    pod(
                        n,
                        ("ReplicaSet", rs_name),
                        json!({"app": "web", "pod-template-hash": hash}),
                        "node-0",
                        *ready,
                        *terminating,
                    ),
                )
            })
            .collect()
    }

    #[test]
    fn deployment_rules() {
        let rolling =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        let recreate = json!({"type": "Recreate"});
        // (what, strategy, pods as (name, ReplicaSet, ready, terminating), ReplicaSets as
        // (name, replicas), the rules broken)
        type Case<'a> = (
            &'a str,
            serde_json::Value,
            Vec<(&'a str, &'a str, bool, bool)>,
            Vec<(&'a str, i32)>,
            Vec<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "within surge",
                rolling.clone(),
                vec![
                    ("a", "web-1", true, false),
                    ("b", "web-1", true, false),
                    ("c", "web-1", true, false),
                    ("d", "web-2", false, false),
                ],
                vec![("web-1", 3), ("web-2", 1)],
                vec![],
            ),
            (
                "one pod too many",
                rolling.clone(),
                vec![
                    ("a", "web-1", true, false),
                    ("b", "web-1", true, false),
                    ("c", "web-1", true, false),
                    ("d", "web-2", false, false),
                    ("e", "web-2", false, false),
                ],
                vec![("web-1", 3), ("web-2", 1)],
                vec!["max-surge"],
            ),
            (
                "terminating pods do not count",
                rolling.clone(),
                vec![
                    ("a", "web-1", true, true),
                    ("b", "web-1", true, false),
                    ("c", "web-1", true, false),
                    ("d", "web-2", true, false),
                    ("e", "web-2", false, false),
                ],
                vec![("web-1", 2), ("web-2", 2)],
                vec![],
            ),
            (
                "replica sets scaled past surge",
                rolling.clone(),
                vec![
                    ("a", "web-1", true, false),
                    ("b", "web-1", true, false),
                    ("c", "web-1", true, false),
                ],
                vec![("web-1", 3), ("web-2", 2)],
                vec!["max-surge"],
            ),
            (
                "below the availability floor",
                rolling.clone(),
                vec![
                    ("a", "web-1", true, false),
                    ("b", "web-1", true, false),
                    ("c", "web-2", false, false),
                ],
                vec![("web-1", 2), ("web-2", 1)],
                vec!["max-unavailable"],
            ),
            (
                "recreate with one template",
                recreate.clone(),
                vec![("a", "web-2", false, false)],
                vec![("web-1", 0), ("web-2", 3)],
                vec![],
            ),
            (
                "recreate with two templates",
                recreate.clone(),
                vec![("a", "web-1", true, true), ("b", "web-2", false, false)],
                vec![("web-1", 0), ("web-2", 3)],
                vec!["recreate-overlap"],
            ),
        ];
        for (what, strategy, pods, sets, want) in cases {
            let snap = Snapshot {
                pods: web_pods(&pods),
                replica_sets: sets
                    .iter()
                    .map(|(n, r)| (n.to_string(), rs(n, "web", *r)))
                    .collect(),
                deployments: [("web".to_string(), deployment(strategy))].into(),
                ..Default::default()
            };
            assert_eq!(rules(&snap), want, "{what}");
        }
    }

    #[test]
    fn daemon_set_rules() {
        let unavail = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}});
        let surge =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        let on_delete = json!({"type": "OnDelete"});
        // (node, revision, ready)
        type Pods<'a> = Vec<(&'a str, &'a str, bool)>;
        let cases: Vec<(&str, serde_json::Value, Pods, Vec<&str>)> = vec![
            (
                "one per node",
                unavail.clone(),
                vec![("n0", "r1", true), ("n1", "r2", false), ("n2", "r1", true)],
                vec![],
            ),
            (
                "two nodes down past maxUnavailable 1",
                unavail.clone(),
                vec![("n0", "r1", true), ("n1", "r2", false), ("n2", "r2", false)],
                vec!["max-unavailable"],
            ),
            (
                "two on a node without surge",
                unavail.clone(),
                vec![("n0", "r1", true), ("n0", "r2", false), ("n1", "r1", true)],
                vec!["duplicate-daemon-pod"],
            ),
            (
                "old and new on a node with surge",
                surge.clone(),
                vec![
                    ("n0", "r1", true),
                    ("n0", "r2", false),
                    ("n1", "r1", true),
                    ("n2", "r1", true),
                ],
                vec![],
            ),
            (
                "two of one revision on a node with surge",
                surge.clone(),
                vec![
                    ("n0", "r2", true),
                    ("n0", "r2", false),
                    ("n1", "r1", true),
                    ("n2", "r1", true),
                ],
                vec!["duplicate-daemon-pod"],
            ),
            (
                "surge keeps every node available",
                surge.clone(),
                vec![("n0", "r2", false), ("n1", "r1", true), ("n2", "r1", true)],
                vec!["max-unavailable"],
            ),
            (
                "a node without its pod yet counts as unavailable",
                surge.clone(),
                vec![("n1", "r1", true), ("n2", "r1", true)],
                vec!["max-unavailable"],
            ),
            (
                "on delete: the operator's deletions are not a breach",
                on_delete.clone(),
                vec![("n0", "r2", false), ("n1", "r2", false)],
                vec![],
            ),
        ];
        for (what, strategy, pods, want) in cases {
            let pods = pods
                .iter()
                .enumerate()
                .map(|(i, (node, rev, ready))| {
                    let n = format!("agent-{i}");
                    let p = pod(
                        &n,
                        ("DaemonSet", "agent"),
                        json!({"controller-revision-hash": rev}),
                        node,
                        *ready,
                        false,
                    );
                    (n, p)
                })
                .collect();
            let snap = Snapshot {
                pods,
                daemon_sets: [("agent".to_string(), daemon_set(strategy))].into(),
                ..Default::default()
            };
            assert_eq!(rules(&snap), want, "{what}");
        }
    }

    #[test]
    fn a_lasting_breach_counts_once() {
        let snap = Snapshot {
            pods: web_pods(&[("a", "web-1", true, false), ("b", "web-2", true, false)]),
            replica_sets: [("web-1", 0), ("web-2", 1)]
                .iter()
                .map(|(n, r)| (n.to_string(), rs(n, "web", *r)))
                .collect(),
            deployments: [("web".to_string(), deployment(json!({"type": "Recreate"})))].into(),
            ..Default::default()
        };
        let mut checker = Checker::new(3);
        checker.observe(&snap);
        checker.observe(&snap);
        assert_eq!(checker.breaches.len(), 1);
        checker.observe(&Snapshot::default());
        checker.observe(&snap);
        assert_eq!(checker.breaches.len(), 2, "broken again after being kept");
    }

    /// A StatefulSet `db` of 4 with `policy` and maxUnavailable `max`, and its pods by ordinal:
    /// (ordinal, ready, uid).
    fn stateful_snapshot(policy: &str, max: i64, pods: &[(i32, bool, &str)]) -> Snapshot {
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"replicas": 4, "serviceName": "db", "selector": {}, "podManagementPolicy": policy,
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max}},
                "template": {"spec": {"containers": []}}}
        }))
        .unwrap_or_default();
        let pods = pods
            .iter()
            .map(|(o, ready, uid)| {
                let name = format!("db-{o}");
                let mut p = pod(
                    &name,
                    ("StatefulSet", "db"),
                    json!({"app": "db"}),
                    "node-0",
                    *ready,
                    false,
                );
                p.metadata.uid = Some(uid.to_string());
                (name, p)
            })
            .collect();
        Snapshot {
            pods,
            stateful_sets: [("db".to_string(), sts)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn stateful_set_rules() {
        let all_ready = [
            (0, true, "a"),
            (1, true, "b"),
            (2, true, "c"),
            (3, true, "d"),
        ];
        // (what happens after all four were ready, the rules it breaks)
        type Case<'a> = (
            &'a str,
            &'a str,
            i64,
            Vec<(i32, bool, &'a str)>,
            Vec<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "one replaced",
                "OrderedReady",
                1,
                vec![(0, true, "a"), (1, true, "b"), (2, true, "c")],
                vec![],
            ),
            (
                "two down of maxUnavailable 1",
                "OrderedReady",
                1,
                vec![(0, true, "a"), (1, true, "b")],
                vec!["max-unavailable"],
            ),
            (
                "two down of maxUnavailable 2",
                "Parallel",
                2,
                vec![(0, true, "a"), (1, true, "b"), (2, false, "e")],
                vec![],
            ),
            (
                "three down of maxUnavailable 2",
                "Parallel",
                2,
                vec![(0, true, "a"), (3, false, "e")],
                vec!["max-unavailable"],
            ),
            (
                "recreated above a ready predecessor",
                "OrderedReady",
                1,
                vec![
                    (0, true, "a"),
                    (1, true, "b"),
                    (2, true, "c"),
                    (3, false, "e"),
                ],
                vec![],
            ),
            (
                "created above an unready ordinal",
                "OrderedReady",
                2,
                vec![
                    (0, true, "a"),
                    (1, false, "e"),
                    (2, true, "c"),
                    (3, false, "f"),
                ],
                vec!["ordered-ready"],
            ),
            (
                "Parallel creates at once",
                "Parallel",
                2,
                vec![
                    (0, true, "a"),
                    (1, false, "e"),
                    (2, true, "c"),
                    (3, false, "f"),
                ],
                vec![],
            ),
        ];
        // A pod that arrives in a relist is not judged as created: its predecessors may have
        // changed while the watcher was away.
        let mut checker = Checker::new(3);
        checker.observe(&stateful_snapshot("OrderedReady", 2, &all_ready));
        let mut relisted = stateful_snapshot(
            "OrderedReady",
            2,
            &[
                (0, true, "a"),
                (1, false, "e"),
                (2, true, "c"),
                (3, false, "f"),
            ],
        );
        relisted.relisted = ["e".to_string(), "f".to_string()].into();
        checker.observe(&relisted);
        assert!(checker.breaches.is_empty(), "{:?}", checker.breaches);
        for (what, policy, max, pods, want) in cases {
            let mut checker = Checker::new(3);
            checker.observe(&stateful_snapshot(policy, max, &all_ready));
            assert!(
                checker.breaches.is_empty(),
                "{what}: {:?}",
                checker.breaches
            );
            checker.observe(&stateful_snapshot(policy, max, &pods));
            let got: Vec<String> = checker.breaches.iter().map(|b| b.rule.clone()).collect();
            assert_eq!(got, want, "{what}");
        }
    }
}
