//! Scoring of feasible nodes: upstream's `NodeResourcesFit` least-allocated strategy plus spreading
//! of pods that share a controller, so a ReplicaSet does not pile onto one node.
//!
//! Upstream spreads with `PodTopologySpread`'s system defaults (weight 2); we count pods of the same
//! controlling owner per node and normalize like the older `SelectorSpread`: the node with the most
//! such pods scores 0, nodes with none score 100. Ties break on a hash of pod and node, so equal
//! nodes share the load instead of all pods landing on the first node listed.

use crate::node_info::{NodeInfo, Usage};

/// Upstream's `MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;
/// Weight of least-allocated, as upstream's `NodeResourcesFit` default.
pub const LEAST_ALLOCATED_WEIGHT: i64 = 1;
/// Weight of spreading, as upstream's `PodTopologySpread` default.
pub const SPREAD_WEIGHT: i64 = 2;
/// Weight of inter-pod affinity, as upstream's `InterPodAffinity` default.
pub const INTER_POD_AFFINITY_WEIGHT: i64 = 2;

/// How free a resource stays after placing the pod, 0..=100 (0 when it would overflow).
fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// Least-allocated: the average over CPU and memory of the share left free after placing a pod
/// that (with defaults for unset requests) uses `pod_non_zero`.
pub fn least_allocated(node: &NodeInfo, usage: &Usage, pod_non_zero: (i64, i64)) -> i64 {
    let cpu = least_requested(
        usage.non_zero_milli_cpu + pod_non_zero.0,
        node.allocatable.milli_cpu,
    );
    let memory = least_requested(
        usage.non_zero_memory + pod_non_zero.1,
        node.allocatable.memory,
    );
    (cpu + memory) / 2
}

/// Spread scores for nodes holding `counts` pods of the pod's owner: `100 * (max - count) / max`.
pub fn spread(counts: &[u32]) -> Vec<i64> {
    let max = counts.iter().copied().max().unwrap_or(0);
    counts
        .iter()
        .map(|&c| {
            if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * i64::from(max - c) / i64::from(max)
            }
        })
        .collect()
}

/// A stable pseudo-random tie breaker for (pod, node): FNV-1a over both names.
pub fn tie_break(pod_uid: &str, node: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pod_uid.bytes().chain([0]).chain(node.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Index of the best candidate by (score, tie breaker), or `None` when there are none.
pub fn best(candidates: &[(i64, u64)]) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;

    fn node(cpu: i64, mem: i64) -> NodeInfo {
        NodeInfo {
            allocatable: Resources {
                milli_cpu: cpu,
                memory: mem,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn used(cpu: i64, mem: i64) -> Usage {
        Usage {
            non_zero_milli_cpu: cpu,
            non_zero_memory: mem,
            ..Default::default()
        }
    }

    #[test]
    fn least_allocated_prefers_emptier_nodes() {
        let cases = [
            (
                "empty node, small pod",
                node(4000, 4000),
                used(0, 0),
                (1000, 1000),
                75,
            ),
            (
                "half used",
                node(4000, 4000),
                used(1000, 1000),
                (1000, 1000),
                50,
            ),
            (
                "cpu and memory averaged",
                node(4000, 4000),
                used(0, 2000),
                (0, 0),
                75,
            ),
            (
                "overflow scores zero for that resource",
                node(4000, 4000),
                used(4000, 0),
                (1000, 0),
                50,
            ),
            ("no capacity scores zero", node(0, 0), used(0, 0), (0, 0), 0),
        ];
        for (name, n, u, pod, want) in cases {
            assert_eq!(least_allocated(&n, &u, pod), want, "{name}");
        }
    }

    #[test]
    fn spread_prefers_nodes_with_fewer_siblings() {
        let cases: [(&[u32], &[i64]); 4] = [
            (&[0, 0, 0], &[100, 100, 100]),
            (&[2, 1, 0], &[0, 50, 100]),
            (&[3, 3], &[0, 0]),
            (&[], &[]),
        ];
        for (counts, want) in cases {
            assert_eq!(spread(counts), want.to_vec(), "{counts:?}");
        }
    }

    #[test]
    fn ties_break_per_pod() {
        let nodes = ["node-0", "node-1", "node-2", "node-3"];
        let picks: std::collections::BTreeSet<usize> = (0..40)
            .filter_map(|i| {
                let pod = format!("pod-{i}");
                best(
                    &nodes
                        .iter()
                        .map(|n| (10, tie_break(&pod, n)))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        assert!(
            picks.len() > 1,
            "equal nodes must not always win in list order: {picks:?}"
        );
        assert_eq!(
            best(&[(5, u64::MAX), (6, 0)]),
            Some(1),
            "the score decides before the tie breaker"
        );
        assert_eq!(best(&[]), None);
        assert_eq!(tie_break("a", "b"), tie_break("a", "b"));
    }
}
