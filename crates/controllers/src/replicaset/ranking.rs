//! Which surplus pods a ReplicaSet deletes first (upstream's `ActivePodsWithRanks`): the pods
//! whose loss hurts least. SEMANTICS.md's order: unscheduled before scheduled, Pending before
//! Unknown before Running, not-ready before ready, lower `controller.kubernetes.io/pod-deletion-cost`
//! first, more pods of the set on the same node first, ready for less time first, more restarts
//! first, newer first.

use api::pod::{phase, ready_since};
use informer::Shared;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use std::{cmp::Ordering, collections::HashMap, sync::Arc};

/// The annotation users set to steer scale-down (upstream `PodDeletionCost`).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The facts about one pod the ranking looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// Whether the pod has a node.
    pub assigned: bool,
    /// Pending 0, Unknown 1, Running 2 (upstream's `podPhaseToOrdinal`).
    pub phase: u8,
    /// Whether the Ready condition is True.
    pub ready: bool,
    /// The pod-deletion-cost annotation (0 when absent or invalid).
    pub deletion_cost: i32,
    /// How many related pods (of this ReplicaSet and its siblings) share the pod's node.
    pub colocated: usize,
    /// When the pod became ready.
    pub ready_since: Option<Timestamp>,
    /// The highest restart count among its containers.
    pub restarts: i32,
    /// When the pod was created.
    pub created: Option<Timestamp>,
    /// Its name, a last tie-break so the order is deterministic.
    pub name: String,
}

/// Later first; an unknown time sorts before any known one (upstream's `afterOrZero`).
fn later_or_unknown_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// `Less` when `a` should be deleted before `b`.
pub fn deletion_order(a: &PodFacts, b: &PodFacts) -> Ordering {
    a.assigned
        .cmp(&b.assigned)
        .then(a.phase.cmp(&b.phase))
        .then(a.ready.cmp(&b.ready))
        .then(a.deletion_cost.cmp(&b.deletion_cost))
        .then(b.colocated.cmp(&a.colocated))
        .then_with(|| {
            if a.ready && b.ready {
                later_or_unknown_first(a.ready_since, b.ready_since)
            } else {
                Ordering::Equal
            }
        })
        .then(b.restarts.cmp(&a.restarts))
        .then_with(|| later_or_unknown_first(a.created, b.created))
        .then_with(|| a.name.cmp(&b.name))
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// The ranking facts of `pod`, given how many related pods run on each node.
pub fn facts(pod: &Pod, pods_per_node: &HashMap<&str, usize>) -> PodFacts {
    let node = node_of(pod);
    let ready_at = ready_since(pod);
    PodFacts {
        assigned: !node.is_empty(),
        phase: match phase(pod) {
            "Unknown" => 1,
            "Running" => 2,
            _ => 0,
        },
        ready: ready_at.is_some(),
        deletion_cost: pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(POD_DELETION_COST))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        colocated: pods_per_node.get(node).copied().unwrap_or(0),
        ready_since: ready_at,
        restarts: pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().map(|c| c.restart_count).max())
            .unwrap_or(0),
        created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        name: pod.metadata.name.clone().unwrap_or_default(),
    }
}

/// The `count` pods of `pods` to delete first; `related` are the active pods of this ReplicaSet
/// and of every ReplicaSet with the same controller (they decide which nodes are doubled up).
pub fn pods_to_delete(
    pods: &[Shared<Pod>],
    related: &[Shared<Pod>],
    count: usize,
) -> Vec<Shared<Pod>> {
    if count >= pods.len() {
        return pods.to_vec();
    }
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for p in related {
        *per_node.entry(node_of(p)).or_default() += 1;
    }
    let mut ranked: Vec<(PodFacts, &Shared<Pod>)> =
        pods.iter().map(|p| (facts(p, &per_node), p)).collect();
    ranked.sort_by(|a, b| deletion_order(&a.0, &b.0));
    ranked
        .into_iter()
        .take(count)
        .map(|(_, p)| Arc::clone(p))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ts(s: i64) -> Option<Timestamp> {
        Some(Timestamp::from_second(s).unwrap())
    }

    /// A ready, running, scheduled pod, created at 100 and ready since 200.
    fn healthy(name: &str) -> PodFacts {
        PodFacts {
            assigned: true,
            phase: 2,
            ready: true,
            deletion_cost: 0,
            colocated: 1,
            ready_since: ts(200),
            restarts: 0,
            created: ts(100),
            name: name.into(),
        }
    }

    #[test]
    fn surplus_pods_are_deleted_in_upstream_order() {
        // Each case: a pod that must go before a healthy one, differing in one fact.
        let first = |f: fn(&mut PodFacts)| {
            let mut p = healthy("z-first");
            f(&mut p);
            p
        };
        let cases: Vec<(&str, PodFacts)> = vec![
            (
                "unscheduled before scheduled",
                first(|p| p.assigned = false),
            ),
            ("Pending before Running", first(|p| p.phase = 0)),
            ("Unknown before Running", first(|p| p.phase = 1)),
            (
                "not ready before ready",
                first(|p| {
                    p.ready = false;
                    p.ready_since = None;
                }),
            ),
            ("lower deletion cost first", first(|p| p.deletion_cost = -5)),
            (
                "more pods on the same node first",
                first(|p| p.colocated = 3),
            ),
            (
                "ready for less time first",
                first(|p| p.ready_since = ts(300)),
            ),
            ("more restarts first", first(|p| p.restarts = 4)),
            ("newer first", first(|p| p.created = ts(150))),
            ("unknown creation time first", first(|p| p.created = None)),
        ];
        for (name, candidate) in cases {
            assert_eq!(
                deletion_order(&candidate, &healthy("a")),
                Ordering::Less,
                "{name}"
            );
            assert_eq!(
                deletion_order(&healthy("a"), &candidate),
                Ordering::Greater,
                "{name}"
            );
        }
    }

    #[test]
    fn earlier_criteria_win_over_later_ones() {
        let cases: Vec<(&str, PodFacts, PodFacts)> = vec![
            (
                "Pending beats a high cost",
                PodFacts {
                    phase: 0,
                    deletion_cost: 100,
                    ..healthy("a")
                },
                PodFacts {
                    deletion_cost: -100,
                    ..healthy("b")
                },
            ),
            (
                "not ready beats many restarts",
                PodFacts {
                    ready: false,
                    ready_since: None,
                    ..healthy("a")
                },
                PodFacts {
                    restarts: 50,
                    ..healthy("b")
                },
            ),
            (
                "cost beats doubling up",
                PodFacts {
                    deletion_cost: -1,
                    ..healthy("a")
                },
                PodFacts {
                    colocated: 9,
                    ..healthy("b")
                },
            ),
            (
                "ready time is ignored unless both are ready",
                PodFacts {
                    phase: 0,
                    ready: false,
                    ready_since: None,
                    restarts: 3,
                    ..healthy("a")
                },
                PodFacts {
                    phase: 0,
                    ready: false,
                    ready_since: None,
                    ..healthy("b")
                },
            ),
            (
                "equal facts fall back to the name",
                healthy("a"),
                healthy("b"),
            ),
        ];
        for (name, first, second) in cases {
            assert_eq!(deletion_order(&first, &second), Ordering::Less, "{name}");
        }
    }
}
