//! The RollingUpdate strategy (upstream's `rollingUpdate` in `pkg/controller/daemon/update.go`),
//! as a pure plan over the DaemonSet's pods grouped by node, plus the in-place update check.
//!
//! Without surge, old pods are deleted (the per-node sync then creates their replacements) while
//! fewer than `maxUnavailable` nodes that should run the pod lack an available one; old pods that
//! are not available anyway are replaced first and at once, since deleting them costs nothing.
//! With surge, a new pod is started beside an old available one on at most `maxSurge` nodes at a
//! time, and the old pod goes once the new one is available.

use informer::{Cached, Shared};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// Labels upstream puts on daemon pods: the revision hash and (for compatibility) the template
/// generation.
pub const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";

/// Whether a pod runs the current template: its `controller-revision-hash` is `hash`, or its
/// legacy `pod-template-generation` equals the DaemonSet's template generation (upstream's
/// `IsPodUpdated`). `generation` is that generation as the label writes it: a sync asks this of
/// every pod several times, and formatting it on each call was most of the cost.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<&str>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    (!hash.is_empty() && label(crate::history::CONTROLLER_REVISION_HASH) == Some(hash))
        || generation.is_some_and(|g| label(POD_TEMPLATE_GENERATION) == Some(g))
}

/// What the rolling update decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Old pods to replace (names): deleted, or updated in place when allowed.
    pub replace: Vec<String>,
    /// Pods to delete outright (surge: old pods whose new pod is available, or old pods on
    /// nodes that should no longer run them).
    pub delete: Vec<String>,
    /// Nodes on which to start a new pod beside the old one (surge only).
    pub create_on: Vec<String>,
}

/// The per-node facts a rolling update decides on.
pub struct Inputs<'a> {
    /// The DaemonSet's pods by node, in node name order, with every node that should run a pod
    /// present (possibly with no pods).
    pub nodes_to_pods: &'a [(&'a str, &'a [Shared<Pod>])],
    /// `maxSurge`, resolved against the desired count.
    pub max_surge: i32,
    /// `maxUnavailable`, resolved against the desired count.
    pub max_unavailable: i32,
    /// How many nodes should run the pod.
    pub desired: i32,
}

/// A node's pod of the new revision and its pod of an old one, each if there is one.
type NewAndOld<'p> = (Option<&'p Cached<Pod>>, Option<&'p Cached<Pod>>);

/// The newest and the old pod on a node, or `None` if the node has more than one of either
/// (the per-node sync cleans those up first). Pods being deleted are ignored.
pub fn updated_and_old<'p>(
    pods: &'p [Shared<Pod>],
    is_new: &impl Fn(&Cached<Pod>) -> bool,
) -> Option<NewAndOld<'p>> {
    let (mut new, mut old) = (None, None);
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let slot = if is_new(pod) { &mut new } else { &mut old };
        if slot.is_some() {
            return None;
        }
        *slot = Some(&**pod);
    }
    Some((new, old))
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// Plans one step of a rolling update. `should_run(node)` is the node's placement, `skip(node)`
/// says a node is to be left alone for now (a dead node, when the DaemonSet opted in to not
/// stalling on those): it neither uses up `maxUnavailable` nor gets its pod replaced.
pub fn plan(
    inputs: &Inputs<'_>,
    is_new: impl Fn(&Cached<Pod>) -> bool,
    is_available: impl Fn(&Cached<Pod>) -> bool,
    should_run: impl Fn(&str) -> bool,
    skip: impl Fn(&str) -> bool,
) -> Plan {
    let mut plan = Plan::default();
    if inputs.max_surge == 0 {
        let mut unavailable = 0;
        let mut candidates = Vec::new();
        for &(_, pods) in inputs.nodes_to_pods.iter().filter(|(n, _)| !skip(n)) {
            let Some((new, old)) = updated_and_old(pods, &is_new) else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                // Nothing yet, or a replacement racing its predecessor: the per-node sync acts.
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !is_available(new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    // An unavailable old pod is replaced at once (it costs no availability) but
                    // still counts: the node lacks an available pod (seed 000 compares
                    // maxUnavailable with numberUnavailable).
                    if is_available(old) {
                        candidates.push(name(old));
                    } else {
                        plan.replace.push(name(old));
                        unavailable += 1;
                    }
                }
            }
        }
        let room = usize::try_from((inputs.max_unavailable - unavailable).max(0)).unwrap_or(0);
        plan.replace.extend(candidates.into_iter().take(room));
        return plan;
    }

    let mut surging = 0;
    let mut available = 0;
    let mut allowed = Vec::new();
    let mut candidates = Vec::new();
    let mut leaving = Vec::new();
    for &(node, pods) in inputs.nodes_to_pods.iter().filter(|(n, _)| !skip(n)) {
        let Some((new, old)) = updated_and_old(pods, &is_new) else {
            surging += 1;
            continue;
        };
        if let Some(p) = old.or(new)
            && is_available(p)
        {
            available += 1;
        }
        match (new, old) {
            // The old pod is still terminating beside its replacement: the node keeps its
            // surge slot until it is gone, so at most maxSurge nodes ever hold two pods.
            (Some(_), None) if pods.len() > 1 => surging += 1,
            (_, None) => {}
            (None, Some(old)) if !is_available(old) => {
                if should_run(node) {
                    allowed.push(node.to_string());
                } else {
                    plan.delete.push(name(old));
                }
            }
            (None, Some(old)) => {
                if !should_run(node) {
                    leaving.push(name(old));
                } else if surging < inputs.max_surge {
                    candidates.push(node.to_string());
                }
            }
            (Some(new), Some(old)) => {
                if is_available(new) {
                    plan.delete.push(name(old));
                } else {
                    surging += 1;
                }
            }
        }
    }
    // Pods on nodes that should no longer run them go only while enough others are available:
    // with surge the owner expects no loss of availability.
    let deletable = usize::try_from((available - inputs.desired).max(0)).unwrap_or(0);
    plan.delete.extend(leaving.into_iter().take(deletable));
    let room = usize::try_from((inputs.max_surge - surging).max(0)).unwrap_or(0);
    plan.create_on = allowed;
    plan.create_on.extend(candidates.into_iter().take(room));
    plan
}

/// The images to set for an in-place update from `old` (the template of the pod's revision) to
/// `new` (the current template): `Some` only if the two differ in `spec.containers[*].image`
/// and nothing else (seed 004), listing `(container, image)` for every container.
pub fn in_place_images(old: &Value, new: &Value) -> Option<Vec<(String, String)>> {
    fn without_images(t: &Value) -> Value {
        let mut t = t.clone();
        if let Some(Value::Array(cs)) = t.pointer_mut("/spec/containers") {
            for c in cs {
                if let Value::Object(m) = c {
                    m.remove("image");
                }
            }
        }
        t
    }
    if old == new || without_images(old) != without_images(new) {
        return None;
    }
    let containers = new.pointer("/spec/containers")?.as_array()?;
    containers
        .iter()
        .map(|c| {
            Some((
                c.get("name")?.as_str()?.to_string(),
                c.get("image")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

pub use api::pod::restarting_in_place;

#[cfg(test)]
#[allow(
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use informer::Cached;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use serde_json::json;
    use std::collections::BTreeMap;

    /// `o`/`n` old/new, `+` available, `-` not, `x` being deleted.
    fn pods(spec: &str) -> Vec<Shared<Pod>> {
        spec.split(',')
            .filter(|s| !s.is_empty())
            .enumerate()
            .map(|(i, s)| {
                let mut chars = s.chars();
                let kind = chars.next().unwrap();
                let state = chars.next().unwrap();
                Cached::shared(Pod {
                    metadata: ObjectMeta {
                        name: Some(format!("{kind}{i}")),
                        labels: Some(
                            [
                                ("v".to_string(), kind.to_string()),
                                ("ok".to_string(), (state == '+').to_string()),
                            ]
                            .into(),
                        ),
                        deletion_timestamp: (state == 'x')
                            .then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                        ..Default::default()
                    },
                    ..Default::default()
                })
            })
            .collect()
    }

    fn layout(nodes: &[(&str, &str)]) -> BTreeMap<String, Vec<Shared<Pod>>> {
        nodes
            .iter()
            .map(|(n, p)| {
                (
                    n.to_string(),
                    pods(p)
                        .into_iter()
                        .map(|pod| {
                            let mut pod = Pod::clone(&pod);
                            pod.metadata.name =
                                Some(format!("{n}-{}", pod.metadata.name.clone().unwrap()));
                            Cached::shared(pod)
                        })
                        .collect(),
                )
            })
            .collect()
    }

    fn run(
        nodes: &[(&str, &str)],
        surge: i32,
        unavailable: i32,
        gone: &[&str],
        dead: &[&str],
    ) -> Plan {
        let map = layout(nodes);
        let rows: Vec<(&str, &[Shared<Pod>])> = map
            .iter()
            .map(|(n, pods)| (n.as_str(), pods.as_slice()))
            .collect();
        let inputs = Inputs {
            nodes_to_pods: &rows,
            max_surge: surge,
            max_unavailable: unavailable,
            desired: (nodes.len() - gone.len()) as i32,
        };
        let label = |p: &Pod, k: &str| p.metadata.labels.as_ref().unwrap()[k].clone();
        plan(
            &inputs,
            |p| label(p, "v") == "n",
            |p| label(p, "ok") == "true",
            |n| !gone.contains(&n),
            |n| dead.contains(&n),
        )
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn without_surge_unavailable_stays_within_max_unavailable() {
        // (case, nodes, maxUnavailable, dead nodes, want replace)
        let cases: Vec<(&str, Vec<(&str, &str)>, i32, Vec<&str>, Vec<&str>)> = vec![
            (
                "all old available, max 1",
                vec![("a", "o+"), ("b", "o+"), ("c", "o+")],
                1,
                vec![],
                vec!["a-o0"],
            ),
            (
                "all old available, max 2",
                vec![("a", "o+"), ("b", "o+"), ("c", "o+")],
                2,
                vec![],
                vec!["a-o0", "b-o0"],
            ),
            (
                "a new pod not yet available uses the budget",
                vec![("a", "n-"), ("b", "o+"), ("c", "o+")],
                1,
                vec![],
                vec![],
            ),
            (
                "a new available pod frees it",
                vec![("a", "n+"), ("b", "o+"), ("c", "o+")],
                1,
                vec![],
                vec!["b-o0"],
            ),
            (
                "unhealthy old pods are replaced first, beyond the budget",
                vec![("a", "o-"), ("b", "o-"), ("c", "o+")],
                1,
                vec![],
                vec!["a-o0", "b-o0"],
            ),
            (
                "unhealthy old pods use the budget",
                vec![("a", "o-"), ("b", "o+"), ("c", "o+")],
                1,
                vec![],
                vec!["a-o0"],
            ),
            (
                "and leave the rest of it",
                vec![("a", "o-"), ("b", "o+"), ("c", "o+")],
                2,
                vec![],
                vec!["a-o0", "b-o0"],
            ),
            (
                "a node without a pod is unavailable",
                vec![("a", ""), ("b", "o+")],
                1,
                vec![],
                vec![],
            ),
            (
                "a deleting pod leaves its node unavailable",
                vec![("a", "ox"), ("b", "o+")],
                1,
                vec![],
                vec![],
            ),
            (
                "two pods on a node: unavailable until cleaned",
                vec![("a", "o+,o+"), ("b", "o+")],
                1,
                vec![],
                vec![],
            ),
            (
                "old and new on a node: unavailable",
                vec![("a", "o+,n-"), ("b", "o+")],
                2,
                vec![],
                vec!["b-o0"],
            ),
            (
                "everything updated",
                vec![("a", "n+"), ("b", "n+")],
                1,
                vec![],
                vec![],
            ),
            (
                "a dead node does not stall the rollout",
                vec![("a", "n+"), ("b", "o-"), ("c", "o+")],
                1,
                vec!["b"],
                vec!["c-o0"],
            ),
            (
                "without the opt-in it does",
                vec![("a", "n+"), ("b", ""), ("c", "o+")],
                1,
                vec![],
                vec![],
            ),
        ];
        for (name, nodes, max, dead, want) in cases {
            let got = run(&nodes, 0, max, &[], &dead);
            assert_eq!(
                got,
                Plan {
                    replace: s(&want),
                    ..Default::default()
                },
                "{name}"
            );
        }
    }

    #[test]
    fn with_surge_new_pods_start_beside_old_ones() {
        // (case, nodes, maxSurge, nodes that should no longer run, want (delete, create_on))
        let cases: Vec<(
            &str,
            Vec<(&str, &str)>,
            i32,
            Vec<&str>,
            (Vec<&str>, Vec<&str>),
        )> = vec![
            (
                "surge onto the first nodes",
                vec![("a", "o+"), ("b", "o+"), ("c", "o+")],
                2,
                vec![],
                (vec![], vec!["a", "b"]),
            ),
            (
                "a surging node uses the budget",
                vec![("a", "o+,n-"), ("b", "o+"), ("c", "o+")],
                1,
                vec![],
                (vec![], vec![]),
            ),
            (
                "an available new pod retires the old",
                vec![("a", "o+,n+"), ("b", "o+"), ("c", "o+")],
                1,
                vec![],
                (vec!["a-o0"], vec!["b"]),
            ),
            (
                "unavailable old pods get a new pod at once",
                vec![("a", "o-"), ("b", "o-"), ("c", "o+")],
                1,
                vec![],
                (vec![], vec!["a", "b", "c"]),
            ),
            (
                "an unavailable old pod on a node leaving goes",
                vec![("a", "o-"), ("b", "o+")],
                1,
                vec!["a"],
                (vec!["a-o0"], vec!["b"]),
            ),
            (
                "an available old pod on a node leaving waits for spare availability",
                vec![("a", "o+"), ("b", "n-")],
                1,
                vec!["a"],
                (vec![], vec![]),
            ),
            (
                "and goes once others are available",
                vec![("a", "o+"), ("b", "n+")],
                1,
                vec!["a"],
                (vec!["a-o0"], vec![]),
            ),
            (
                "updated nodes need nothing",
                vec![("a", "n+"), ("b", "n-")],
                1,
                vec![],
                (vec![], vec![]),
            ),
        ];
        for (name, nodes, surge, gone, (delete, create)) in cases {
            let got = run(&nodes, surge, 0, &gone, &[]);
            assert_eq!(
                got,
                Plan {
                    delete: s(&delete),
                    create_on: s(&create),
                    ..Default::default()
                },
                "{name}"
            );
        }
    }

    #[test]
    fn updated_pods_match_by_hash_or_generation() {
        let pod = |labels: &[(&str, &str)]| Pod {
            metadata: ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        let cases = [
            (pod(&[("controller-revision-hash", "h2")]), "h2", None, true),
            (
                pod(&[("controller-revision-hash", "h1")]),
                "h2",
                None,
                false,
            ),
            (
                pod(&[
                    ("controller-revision-hash", "h1"),
                    ("pod-template-generation", "3"),
                ]),
                "h2",
                Some(3),
                true,
            ),
            (pod(&[("pod-template-generation", "3")]), "h2", None, false),
            (pod(&[]), "", None, false),
        ];
        for (p, hash, generation, want) in cases {
            assert_eq!(
                is_pod_updated(&p, hash, generation.map(|g: i64| g.to_string()).as_deref()),
                want,
                "{:?} {hash} {generation:?}",
                p.metadata.labels
            );
        }
    }

    #[test]
    fn in_place_only_when_images_alone_differ() {
        let t = |image: &str, env: &str| {
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
            {"name": "app", "image": image, "env": [{"name": "X", "value": env}]},
            {"name": "side", "image": "side:1"}]}})
        };
        let cases = [
            (
                "image change",
                t("app:1", "x"),
                t("app:2", "x"),
                Some(vec![("app", "app:2"), ("side", "side:1")]),
            ),
            ("no change", t("app:1", "x"), t("app:1", "x"), None),
            ("env change too", t("app:1", "x"), t("app:2", "y"), None),
            ("env change alone", t("app:1", "x"), t("app:1", "y"), None),
        ];
        for (name, old, new, want) in cases {
            let want = want.map(|v| {
                v.into_iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect::<Vec<_>>()
            });
            assert_eq!(in_place_images(&old, &new), want, "{name}");
        }
    }
}
