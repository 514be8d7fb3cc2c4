//! Which nodes run a daemon pod, and what to do on each (upstream's `NodeShouldRunDaemonPod`,
//! `podsShouldBeOnNode` and the helpers of `pkg/controller/daemon/util`).
//!
//! Placement looks only at what the node says about itself: `nodeSelector`, required node
//! affinity, and taints against the pod's tolerations (including the ones every daemon pod gets).
//! Whether the pod *fits* (resources, ports) is the scheduler's call, as in current upstream: a
//! daemon pod that does not fit stays Pending and still counts as desired.

use api::pod::phase;
use informer::{Cached, Shared};
use k8s_openapi::{
    api::core::v1::{
        Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
        PodSpec, PodTemplateSpec, Toleration,
    },
    apimachinery::pkg::apis::meta::v1::Time,
};
use std::{
    cmp::Ordering,
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

pub use api::node_affinity::NODE_NAME_FIELD;
use api::{node_affinity, taint};

/// Taint keys of the tolerations every daemon pod gets, with their effects: daemon pods must
/// survive the node problems that evict ordinary pods (upstream's
/// `AddOrUpdateDaemonPodTolerations`).
const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];
/// Added only for host-network pods, which do not need the pod network.
const NETWORK_UNAVAILABLE: (&str, &str) = ("node.kubernetes.io/network-unavailable", "NoSchedule");

/// The labels of a node without any.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// Whether a node should run the daemon pod, and whether one already there may stay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The node matches the selector and affinity and has no untolerated NoSchedule/NoExecute
    /// taint: it must run a daemon pod (and counts in `desiredNumberScheduled`).
    pub should_run: bool,
    /// A daemon pod already on the node may keep running: only an untolerated `NoExecute`
    /// taint (or no longer matching) evicts it.
    pub should_continue_running: bool,
}

/// Adds a toleration unless an identical one (key, operator, value, effect) is there; one that
/// differs only in `tolerationSeconds` is replaced (upstream's `AddOrUpdateTolerationInPodSpec`).
fn add_or_update_toleration(tolerations: &mut Vec<Toleration>, t: Toleration) {
    let same = |o: &Toleration| {
        o.key == t.key && o.effect == t.effect && o.operator == t.operator && o.value == t.value
    };
    match tolerations.iter_mut().find(|o| same(o)) {
        Some(existing) => *existing = t,
        None => tolerations.push(t),
    }
}

/// Adds the tolerations every daemon pod carries to `spec`.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut tolerations = spec.tolerations.take().unwrap_or_default();
    let network = spec
        .host_network
        .unwrap_or(false)
        .then_some(NETWORK_UNAVAILABLE);
    for (key, effect) in DAEMON_TOLERATIONS.into_iter().chain(network) {
        add_or_update_toleration(
            &mut tolerations,
            Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Default::default()
            },
        );
    }
    spec.tolerations = Some(tolerations);
}

/// The placement rules of one DaemonSet, prepared once per sync and applied to every node.
#[derive(Clone, Debug)]
pub struct Eligibility {
    spec: PodSpec,
}

impl Eligibility {
    /// The rules of pods made from `template` (its tolerations plus the daemon ones).
    pub fn new(template: &PodTemplateSpec) -> Self {
        let mut spec = template.spec.clone().unwrap_or_default();
        add_daemon_tolerations(&mut spec);
        Self { spec }
    }

    /// Where a daemon pod belongs, as upstream's `NodeShouldRunDaemonPod`.
    pub fn check(&self, node: &Node) -> Placement {
        const NO: Placement = Placement {
            should_run: false,
            should_continue_running: false,
        };
        let name = node.metadata.name.as_deref().unwrap_or("");
        if self
            .spec
            .node_name
            .as_deref()
            .is_some_and(|n| !n.is_empty() && n != name)
        {
            return NO;
        }
        let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        if !node_affinity::pod_matches_node(&self.spec, name, labels) {
            return NO;
        }
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let tolerations = self.spec.tolerations.as_deref().unwrap_or_default();
        if taint::first_untolerated(taints, tolerations, taint::FILTERING_EFFECTS).is_none() {
            return Placement {
                should_run: true,
                should_continue_running: true,
            };
        }
        Placement {
            should_run: false,
            should_continue_running: taint::first_untolerated(
                taints,
                tolerations,
                &[taint::NO_EXECUTE],
            )
            .is_none(),
        }
    }
}

/// Pins a pod to `node` through required node affinity, replacing any required terms (the
/// controller already checked them against this node), as upstream's
/// `ReplaceDaemonSetPodNodeNameNodeAffinity`; preferred terms and pod (anti-)affinity stay.
pub fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: NODE_NAME_FIELD.into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
            match_expressions: None,
        }],
    };
    let mut affinity = affinity.unwrap_or_default();
    let mut node_affinity = affinity.node_affinity.take().unwrap_or_default();
    node_affinity.required_during_scheduling_ignored_during_execution = Some(selector);
    affinity.node_affinity = Some(NodeAffinity { ..node_affinity });
    affinity
}

/// The node a daemon pod is on or meant for: `spec.nodeName`, or for a pod not yet scheduled the
/// `metadata.name In [node]` field requirement (upstream's `GetTargetNodeName`).
pub fn target_node(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find_map(|r| {
            let values = r.values.as_deref().unwrap_or_default();
            (r.key == NODE_NAME_FIELD && r.operator == "In" && values.len() == 1)
                .then(|| values[0].as_str())
        })
}

fn is_scheduled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn created(pod: &Pod) -> Option<&Time> {
    pod.metadata.creation_timestamp.as_ref()
}

/// Oldest first: scheduled before unscheduled, then by creation time, then by name (upstream's
/// `podByCreationTimestampAndPhase`), so duplicates keep the pod that has run longest.
pub fn oldest_first(a: &Pod, b: &Pod) -> Ordering {
    is_scheduled(b)
        .cmp(&is_scheduled(a))
        .then_with(|| created(a).map(|t| t.0).cmp(&created(b).map(|t| t.0)))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// A DaemonSet's pods by the node they are on or meant for. Hashed: a sync looks up every node
/// of the cluster in it, several times, and in a `BTreeMap` the string comparisons of those
/// lookups were a tenth of a 20,000-node rollout's DaemonSet syncs.
pub type ByNode = HashMap<String, Vec<Shared<Pod>>>;

/// The DaemonSet's pods grouped by the node they are on or meant for. Pods both terminal and
/// being deleted are left out (nothing more to do with them); pods naming no node are grouped
/// under `""`.
pub fn group_by_node(pods: &[Shared<Pod>]) -> ByNode {
    let mut out = ByNode::new();
    for pod in pods {
        let terminal = matches!(phase(pod), "Succeeded" | "Failed");
        if terminal && pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        out.entry(target_node(pod).unwrap_or("").to_string())
            .or_default()
            .push(Arc::clone(pod));
    }
    out
}

/// What one node needs (upstream's `podsShouldBeOnNode`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeActions {
    /// A daemon pod must be created on this node.
    pub create: bool,
    /// Pods to delete (names).
    pub delete: Vec<String>,
    /// Failed pods to delete, subject to the per-node back-off (names).
    pub failed: Vec<String>,
}

/// Decides what to do on one node from its placement and its daemon pods. `surge` says whether
/// the DaemonSet allows two pods per node (`maxSurge > 0`); then a second pod is kept only while
/// it is the replacement of an old pod that is still ready, as upstream.
pub fn pods_should_be_on_node(
    placement: Placement,
    pods: Option<&Vec<Shared<Pod>>>,
    surge: bool,
    is_new: impl Fn(&Cached<Pod>) -> bool,
    is_available: impl Fn(&Cached<Pod>) -> bool,
) -> NodeActions {
    let mut out = NodeActions::default();
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    match pods {
        None if placement.should_run => out.create = true,
        None => {}
        Some(pods) if placement.should_continue_running => {
            let mut running: Vec<&Shared<Pod>> = Vec::new();
            for pod in pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
            {
                match phase(pod) {
                    "Failed" => out.failed.push(name(pod)),
                    // A daemon pod that exited successfully is deleted and recreated.
                    "Succeeded" => out.delete.push(name(pod)),
                    _ => running.push(pod),
                }
            }
            running.sort_by(|a, b| oldest_first(a, b));
            if !surge {
                out.delete.extend(running.iter().skip(1).map(|p| name(p)));
                return out;
            }
            if running.is_empty() {
                out.create = placement.should_run;
                return out;
            }
            // Surging: keep the oldest new pod and the oldest old pod, delete the rest; the old
            // one goes once it is not ready or the new one is available. An available pod is
            // kept over an older one that is not (beyond upstream, which keeps the oldest
            // alone): when a second quick update turns a node's surge pod into an old one, the
            // two old pods may have been created in the same second, and the tie on the name
            // would otherwise delete the node's only available pod under maxUnavailable 0.
            let (mut oldest_new, mut oldest_old) = (None, None);
            for pod in running {
                let slot = if is_new(pod) {
                    &mut oldest_new
                } else {
                    &mut oldest_old
                };
                match slot {
                    None => *slot = Some(pod),
                    Some(kept) if !is_available(kept) && is_available(pod) => {
                        out.delete.push(name(kept));
                        *slot = Some(pod);
                    }
                    Some(_) => out.delete.push(name(pod)),
                }
            }
            if let (Some(new), Some(old)) = (oldest_new, oldest_old)
                && (!api::pod::is_ready(old) || is_available(new))
            {
                out.delete.push(name(old));
            }
        }
        Some(pods) => {
            out.delete.extend(
                pods.iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| name(p)),
            );
        }
    }
    out
}

#[cfg(test)]
#[allow(
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use informer::Cached;
    use k8s_openapi::{
        api::core::v1::{NodeSpec, PodCondition, PodStatus, Taint},
        apimachinery::pkg::apis::meta::v1::ObjectMeta,
    };

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, v, e)| Taint {
                            key: k.to_string(),
                            value: Some(v.to_string()),
                            effect: e.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn template(spec: PodSpec) -> PodTemplateSpec {
        PodTemplateSpec {
            spec: Some(spec),
            ..Default::default()
        }
    }

    fn with_affinity(terms: Vec<NodeSelectorTerm>) -> PodSpec {
        PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The three placements the tables expect.
    const RUN: Placement = Placement {
        should_run: true,
        should_continue_running: true,
    };
    const STAY: Placement = Placement {
        should_run: false,
        should_continue_running: true,
    };
    const EVICT: Placement = Placement {
        should_run: false,
        should_continue_running: false,
    };

    fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        Toleration {
            key: Some(key.into()).filter(|k: &String| !k.is_empty()),
            operator: Some(op.into()),
            value: Some(value.into()).filter(|v: &String| !v.is_empty()),
            effect: Some(effect.into()).filter(|e: &String| !e.is_empty()),
            ..Default::default()
        }
    }

    #[test]
    fn node_should_run_matrix() {
        let (run, stay, no) = (RUN, STAY, EVICT);
        let selector = |k: &str, v: &str| PodSpec {
            node_selector: Some([(k.to_string(), v.to_string())].into()),
            ..Default::default()
        };
        let tolerating = |t: Toleration| PodSpec {
            tolerations: Some(vec![t]),
            ..Default::default()
        };
        let term = |exprs: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>| {
            NodeSelectorTerm {
                match_expressions: Some(exprs),
                match_fields: Some(fields),
            }
        };
        let cases: Vec<(&str, PodSpec, Node, Placement)> = vec![
            ("plain node", PodSpec::default(), node("n1", &[], &[]), run),
            (
                "selector matches",
                selector("disk", "ssd"),
                node("n1", &[("disk", "ssd")], &[]),
                run,
            ),
            (
                "selector does not match",
                selector("disk", "ssd"),
                node("n1", &[("disk", "hdd")], &[]),
                no,
            ),
            (
                "selector label missing",
                selector("disk", "ssd"),
                node("n1", &[], &[]),
                no,
            ),
            (
                "template nodeName elsewhere",
                PodSpec {
                    node_name: Some("n2".into()),
                    ..Default::default()
                },
                node("n1", &[], &[]),
                no,
            ),
            (
                "template nodeName here",
                PodSpec {
                    node_name: Some("n1".into()),
                    ..Default::default()
                },
                node("n1", &[], &[]),
                run,
            ),
            (
                "affinity In",
                with_affinity(vec![term(vec![req("zone", "In", &["a", "b"])], vec![])]),
                node("n1", &[("zone", "b")], &[]),
                run,
            ),
            (
                "affinity NotIn",
                with_affinity(vec![term(vec![req("zone", "NotIn", &["a"])], vec![])]),
                node("n1", &[("zone", "a")], &[]),
                no,
            ),
            (
                "affinity terms are ORed",
                with_affinity(vec![
                    term(vec![req("zone", "In", &["x"])], vec![]),
                    term(vec![req("gpu", "Exists", &[])], vec![]),
                ]),
                node("n1", &[("gpu", "1")], &[]),
                run,
            ),
            (
                "affinity Gt",
                with_affinity(vec![term(vec![req("cores", "Gt", &["4"])], vec![])]),
                node("n1", &[("cores", "8")], &[]),
                run,
            ),
            (
                "affinity Lt fails",
                with_affinity(vec![term(vec![req("cores", "Lt", &["4"])], vec![])]),
                node("n1", &[("cores", "8")], &[]),
                no,
            ),
            (
                "affinity DoesNotExist",
                with_affinity(vec![term(vec![req("spot", "DoesNotExist", &[])], vec![])]),
                node("n1", &[], &[]),
                run,
            ),
            (
                "matchFields name",
                with_affinity(vec![term(
                    vec![],
                    vec![req("metadata.name", "In", &["n1"])],
                )]),
                node("n1", &[], &[]),
                run,
            ),
            (
                "matchFields other name",
                with_affinity(vec![term(
                    vec![],
                    vec![req("metadata.name", "In", &["n2"])],
                )]),
                node("n1", &[], &[]),
                no,
            ),
            (
                "empty term matches nothing",
                with_affinity(vec![term(vec![], vec![])]),
                node("n1", &[], &[]),
                no,
            ),
            (
                "NoSchedule untolerated",
                PodSpec::default(),
                node("n1", &[], &[("dedicated", "x", "NoSchedule")]),
                stay,
            ),
            (
                "NoExecute untolerated",
                PodSpec::default(),
                node("n1", &[], &[("dedicated", "x", "NoExecute")]),
                no,
            ),
            (
                "PreferNoSchedule ignored",
                PodSpec::default(),
                node("n1", &[], &[("dedicated", "x", "PreferNoSchedule")]),
                run,
            ),
            (
                "NoSchedule tolerated by Equal",
                tolerating(toleration("dedicated", "Equal", "x", "NoSchedule")),
                node("n1", &[], &[("dedicated", "x", "NoSchedule")]),
                run,
            ),
            (
                "Equal with another value",
                tolerating(toleration("dedicated", "Equal", "y", "NoSchedule")),
                node("n1", &[], &[("dedicated", "x", "NoSchedule")]),
                stay,
            ),
            (
                "Exists with empty key tolerates all",
                tolerating(toleration("", "Exists", "", "")),
                node(
                    "n1",
                    &[],
                    &[("a", "1", "NoExecute"), ("b", "2", "NoSchedule")],
                ),
                run,
            ),
            (
                "NoExecute tolerated, NoSchedule not",
                tolerating(toleration("a", "Exists", "", "NoExecute")),
                node(
                    "n1",
                    &[],
                    &[("a", "1", "NoExecute"), ("b", "2", "NoSchedule")],
                ),
                stay,
            ),
            (
                "automatic: unreachable",
                PodSpec::default(),
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/unreachable", "", "NoExecute")],
                ),
                run,
            ),
            (
                "automatic: not-ready",
                PodSpec::default(),
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/not-ready", "", "NoExecute")],
                ),
                run,
            ),
            (
                "automatic: memory-pressure",
                PodSpec::default(),
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/memory-pressure", "", "NoSchedule")],
                ),
                run,
            ),
            (
                "automatic: unschedulable",
                PodSpec::default(),
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/unschedulable", "", "NoSchedule")],
                ),
                run,
            ),
            (
                "network-unavailable without host network",
                PodSpec::default(),
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/network-unavailable", "", "NoSchedule")],
                ),
                stay,
            ),
            (
                "network-unavailable with host network",
                PodSpec {
                    host_network: Some(true),
                    ..Default::default()
                },
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/network-unavailable", "", "NoSchedule")],
                ),
                run,
            ),
        ];
        for (name, spec, node, want) in cases {
            assert_eq!(
                Eligibility::new(&template(spec)).check(&node),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn daemon_tolerations_are_added_once() {
        let mut spec = PodSpec {
            tolerations: Some(vec![
                toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
                toleration("x", "Exists", "", ""),
            ]),
            ..Default::default()
        };
        add_daemon_tolerations(&mut spec);
        add_daemon_tolerations(&mut spec);
        let tolerations = spec.tolerations.unwrap();
        assert_eq!(tolerations.len(), 7);
        assert_eq!(
            tolerations
                .iter()
                .filter(|t| t.key.as_deref() == Some("node.kubernetes.io/not-ready"))
                .count(),
            1
        );
    }

    #[test]
    fn pinning_replaces_required_terms_and_keeps_the_rest() {
        let spec = with_affinity(vec![NodeSelectorTerm {
            match_expressions: Some(vec![req("zone", "In", &["a"])]),
            match_fields: None,
        }]);
        let mut affinity = spec.affinity.unwrap();
        affinity
            .node_affinity
            .as_mut()
            .unwrap()
            .preferred_during_scheduling_ignored_during_execution = Some(vec![]);
        let pinned = pin_to_node(Some(affinity), "n7");
        let na = pinned.node_affinity.unwrap();
        assert!(
            na.preferred_during_scheduling_ignored_during_execution
                .is_some()
        );
        let terms = na
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms;
        assert_eq!(terms.len(), 1);
        assert_eq!(
            terms[0].match_fields.as_ref().unwrap()[0],
            req("metadata.name", "In", &["n7"])
        );
        let pod = Pod {
            spec: Some(PodSpec {
                affinity: Some(pin_to_node(None, "n3")),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(target_node(&pod), Some("n3"));
        let bound = Pod {
            spec: Some(PodSpec {
                node_name: Some("n4".into()),
                ..pod.spec.clone().unwrap()
            }),
            ..Default::default()
        };
        assert_eq!(target_node(&bound), Some("n4"));
        assert_eq!(target_node(&Pod::default()), None);
    }

    fn pod(
        name: &str,
        secs: i64,
        phase: &str,
        ready: bool,
        deleting: bool,
        new: bool,
    ) -> Shared<Pod> {
        Cached::shared(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(jiff::Timestamp::from_second(secs).unwrap())),
                deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                labels: Some([("new".to_string(), new.to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn pods_should_be_on_node_table() {
        let (run, stay, evict) = (RUN, STAY, EVICT);
        let act = |create: bool, delete: &[&str], failed: &[&str]| NodeActions {
            create,
            delete: delete.iter().map(|s| s.to_string()).collect(),
            failed: failed.iter().map(|s| s.to_string()).collect(),
        };
        // (case, placement, pods, surge, want)
        let cases: Vec<(&str, Placement, Option<Vec<Shared<Pod>>>, bool, NodeActions)> = vec![
            (
                "missing pod is created",
                run,
                None,
                false,
                act(true, &[], &[]),
            ),
            (
                "NoSchedule node gets no new pod",
                stay,
                None,
                false,
                act(false, &[], &[]),
            ),
            (
                "NoSchedule node keeps its pod",
                stay,
                Some(vec![pod("a", 1, "Running", true, false, true)]),
                false,
                act(false, &[], &[]),
            ),
            (
                "NoExecute node loses its pods",
                evict,
                Some(vec![
                    pod("a", 1, "Running", true, false, true),
                    pod("b", 1, "Running", true, true, true),
                ]),
                false,
                act(false, &["a"], &[]),
            ),
            (
                "failed pod goes through back-off",
                run,
                Some(vec![pod("a", 1, "Failed", false, false, true)]),
                false,
                act(false, &[], &["a"]),
            ),
            (
                "succeeded pod is deleted",
                run,
                Some(vec![pod("a", 1, "Succeeded", false, false, true)]),
                false,
                act(false, &["a"], &[]),
            ),
            (
                "only a deleting pod: wait for it",
                run,
                Some(vec![pod("a", 1, "Running", true, true, true)]),
                false,
                act(false, &[], &[]),
            ),
            (
                "duplicates keep the oldest",
                run,
                Some(vec![
                    pod("c", 3, "Running", true, false, true),
                    pod("a", 1, "Running", true, false, true),
                    pod("b", 2, "Pending", false, false, true),
                ]),
                false,
                act(false, &["b", "c"], &[]),
            ),
            (
                "equal times: by name",
                run,
                Some(vec![
                    pod("y", 1, "Running", true, false, true),
                    pod("x", 1, "Running", true, false, true),
                ]),
                false,
                act(false, &["y"], &[]),
            ),
            (
                "surge: only a deleting pod, create",
                run,
                Some(vec![pod("a", 1, "Running", true, true, false)]),
                true,
                act(true, &[], &[]),
            ),
            (
                "surge: new not available, old ready: keep both",
                run,
                Some(vec![
                    pod("old", 1, "Running", true, false, false),
                    pod("new", 2, "Running", false, false, true),
                ]),
                true,
                act(false, &[], &[]),
            ),
            (
                "surge: new available: old goes",
                run,
                Some(vec![
                    pod("old", 1, "Running", true, false, false),
                    pod("new", 2, "Running", true, false, true),
                ]),
                true,
                act(false, &["old"], &[]),
            ),
            (
                "surge: old not ready: old goes",
                run,
                Some(vec![
                    pod("old", 1, "Running", false, false, false),
                    pod("new", 2, "Pending", false, false, true),
                ]),
                true,
                act(false, &["old"], &[]),
            ),
            (
                "surge: extra pods of each kind go",
                run,
                Some(vec![
                    pod("o1", 1, "Running", true, false, false),
                    pod("o2", 2, "Running", true, false, false),
                    pod("n1", 3, "Running", false, false, true),
                    pod("n2", 4, "Running", false, false, true),
                ]),
                true,
                act(false, &["o2", "n2"], &[]),
            ),
            (
                "surge: of two old pods the available one stays, older or not",
                run,
                Some(vec![
                    pod("a-unready", 1, "Running", false, false, false),
                    pod("b-ready", 1, "Running", true, false, false),
                ]),
                true,
                act(false, &["a-unready"], &[]),
            ),
        ];
        for (name, placement, pods, surge, want) in cases {
            let is_new = |p: &Cached<Pod>| p.metadata.labels.as_ref().unwrap()["new"] == "true";
            let got = pods_should_be_on_node(
                placement,
                pods.as_ref(),
                surge,
                is_new,
                |p: &Cached<Pod>| api::pod::is_ready(p),
            );
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn grouping_uses_the_target_node_and_drops_finished_deleted_pods() {
        let mut pending = Pod::clone(&pod("p", 1, "Pending", false, false, true));
        pending.spec = Some(PodSpec {
            affinity: Some(pin_to_node(None, "n2")),
            ..Default::default()
        });
        let pods = vec![
            pod("a", 1, "Running", true, false, true),
            Cached::shared(pending),
            pod("gone", 1, "Failed", false, true, true),
            pod("failed", 1, "Failed", false, false, true),
        ];
        let grouped = group_by_node(&pods);
        let names = |n: &str| {
            grouped[n]
                .iter()
                .map(|p| p.metadata.name.clone().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("n1"), ["a", "failed"]);
        assert_eq!(names("n2"), ["p"]);
        assert_eq!(grouped.len(), 2);
    }
}
