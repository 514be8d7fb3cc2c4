//! One scheduling decision: filter nodes (a sample of them in large clusters), score the feasible
//! ones, pick the best, or explain why none fits. Pure over the [`Cache`].

use crate::{
    cache::{Cache, NodeEntry},
    diagnosis::{self, Diagnosis, NO_NODES_AVAILABLE},
    filter::{CycleState, VolumeState, filter_all},
    inter_pod_affinity,
    node_info::Usage,
    pod_info::PodInfo,
    preemption::{self, Budget},
    score,
    topology_spread::{self, SpreadState},
};
use std::{borrow::Cow, collections::HashSet};

/// Upstream's `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES: usize = 100;
/// Upstream's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_PERCENTAGE: usize = 5;
/// Upstream's `DefaultPercentageOfNodesToScore` base for the adaptive percentage.
const ADAPTIVE_BASE_PERCENTAGE: usize = 50;

/// A pod to evict so that a pod of higher priority fits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Victim {
    /// Its UID (the delete's precondition).
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// What to do with a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Bind it to this node.
    Bind(String),
    /// It fits nowhere; the message says why.
    Unschedulable(String),
    /// It fits nowhere now, but will on `node` once `victims` are gone: nominate it there and
    /// evict them. The message is the failure without them, as upstream reports it.
    Preempt {
        /// The nominated node.
        node: String,
        /// The pods to evict.
        victims: Vec<Victim>,
        /// The `FailedScheduling` message.
        message: String,
    },
}

/// How many feasible nodes to find before scoring, as upstream's `numFeasibleNodesToFind`: all
/// of a small cluster; in a large one `50 - nodes/125` percent (at least 5%, at least 100 nodes),
/// or the configured percentage.
pub fn feasible_nodes_to_find(all: usize, percentage: Option<u32>) -> usize {
    if all < MIN_FEASIBLE_NODES {
        return all;
    }
    let pct = match percentage.filter(|p| *p > 0) {
        Some(p) => p as usize,
        None => ADAPTIVE_BASE_PERCENTAGE
            .saturating_sub(all / 125)
            .max(MIN_FEASIBLE_PERCENTAGE),
    };
    if pct >= 100 {
        return all;
    }
    (all * pct / 100).max(MIN_FEASIBLE_NODES)
}

/// What the node's pods use, plus the requests of pods nominated to it that `pod` must leave
/// room for.
fn usage_with_nominated<'a>(pod: &PodInfo, entry: &'a NodeEntry, cache: &Cache) -> Cow<'a, Usage> {
    if !cache.has_nominations() {
        return Cow::Borrowed(&entry.usage);
    }
    let nominated = cache.nominated_on(&entry.info.name, pod.priority, &pod.uid);
    if nominated.is_empty() {
        return Cow::Borrowed(&entry.usage);
    }
    let mut usage = entry.usage.clone();
    for p in nominated {
        usage.add(p);
    }
    Cow::Owned(usage)
}

/// Decides where `pod`, which mounts no volume, goes; see [`schedule_with`].
pub fn schedule(
    pod: &PodInfo,
    cache: &Cache,
    next_start: &mut usize,
    percentage: Option<u32>,
    budgets: impl FnOnce() -> Vec<Budget>,
) -> Decision {
    schedule_with(
        pod,
        VolumeState::default(),
        cache,
        next_start,
        percentage,
        budgets,
    )
}

/// Decides where `pod` goes, given what the volume PreFilters found. `next_start` rotates where
/// the search begins, as upstream's `nextStartNodeIndex`, so sampling visits every node over
/// time. `budgets` is asked for only when the pod fits nowhere and may preempt.
pub fn schedule_with(
    pod: &PodInfo,
    volumes: VolumeState,
    cache: &Cache,
    next_start: &mut usize,
    percentage: Option<u32>,
    budgets: impl FnOnce() -> Vec<Budget>,
) -> Decision {
    let nodes = cache.nodes();
    let all = nodes.len();
    if all == 0 {
        return Decision::Unschedulable(NO_NODES_AVAILABLE.to_string());
    }
    let state = CycleState::new(pod, cache, volumes);
    let mut diagnosis = Diagnosis::default();
    let mut feasible = Vec::new();
    let mut resolvable = Vec::new();
    let mut check = |i: usize, feasible: &mut Vec<usize>, diagnosis: &mut Diagnosis| {
        let entry = &nodes[i];
        let usage = usage_with_nominated(pod, entry, cache);
        match filter_all(pod, &state, &entry.info, &usage, cache) {
            Ok(()) => feasible.push(i),
            Err(r) => {
                if r.resolvable {
                    resolvable.push(i);
                }
                diagnosis.add(r);
            }
        }
    };
    let mut pinned = None;
    match api::node_affinity::pinned_node_names(pod.required_terms.as_deref()) {
        Some(names) if names.is_empty() => {
            diagnosis.prefilter_rejected("pod affinity terms conflict");
        }
        Some(names) => {
            let named: HashSet<usize> = names.iter().filter_map(|n| cache.position(n)).collect();
            for &i in &named {
                check(i, &mut feasible, &mut diagnosis);
            }
            pinned = Some(named);
        }
        None => {
            let want = feasible_nodes_to_find(all, percentage);
            let start = *next_start % all;
            let mut processed = 0;
            for k in 0..all {
                processed += 1;
                check((start + k) % all, &mut feasible, &mut diagnosis);
                if feasible.len() >= want {
                    break;
                }
            }
            *next_start = (start + processed) % all;
        }
    }
    if feasible.is_empty() {
        // Upstream v1.28 filters only the nodes NodeAffinity's PreFilter named and records
        // nothing for the others, so they are not in the message; but preemption, which gives
        // up only on nodes with an unresolvable status, still tries them. Listed only here: a
        // daemon pod is pinned to one node of thousands and nearly always fits it.
        if let Some(named) = &pinned {
            resolvable.extend((0..all).filter(|i| !named.contains(i)));
        }
        return unschedulable(pod, &state, cache, &diagnosis, &resolvable, budgets);
    }
    let best = pick_best(pod, &state, cache, &feasible);
    Decision::Bind(nodes[best].info.name.clone())
}

/// A PreFilter (a volume's, here) found the pod unschedulable on every node before any was
/// filtered: upstream gives every node that status, so preemption cannot help anywhere.
pub fn rejected_before_filtering(pod: &PodInfo, cache: &Cache, reason: &str) -> String {
    let all = cache.nodes().len();
    if all == 0 {
        return NO_NODES_AVAILABLE.to_string();
    }
    let mut diagnosis = Diagnosis::default();
    diagnosis.prefilter_rejected(reason);
    let preemption = match preemption::eligible(pod, cache) {
        Err(why) => why.to_string(),
        Ok(()) => {
            let mut none = Diagnosis::default();
            none.add_count(diagnosis::NOT_HELPFUL, all);
            none.summary(all)
        }
    };
    diagnosis.message(all, Some(&preemption))
}

/// Scores the feasible nodes (upstream's default weights: least-allocated 1, spreading 2,
/// inter-pod affinity 2) and returns the best one's position.
fn pick_best(pod: &PodInfo, state: &CycleState, cache: &Cache, feasible: &[usize]) -> usize {
    let nodes = cache.nodes();
    let spread: Vec<i64> = if pod.spread.is_empty() {
        // No constraints of its own: spread the pods of one owner, as upstream's system
        // default constraints do.
        let counts: Vec<u32> = feasible
            .iter()
            .map(|&i| {
                pod.owner
                    .as_deref()
                    .map_or(0, |o| nodes[i].usage.owned_by(o))
            })
            .collect();
        score::spread(&counts)
    } else if SpreadState::scores(pod) {
        let raw: Vec<Option<f64>> = feasible
            .iter()
            .map(|&i| state.spread.raw_score(pod, &nodes[i].info))
            .collect();
        topology_spread::normalize(&raw)
    } else {
        vec![0; feasible.len()]
    };
    let affinity: Vec<i64> = match inter_pod_affinity::topology_scores(pod, cache) {
        Some(scores) => inter_pod_affinity::normalize(
            &feasible
                .iter()
                .map(|&i| inter_pod_affinity::node_score(&scores, &nodes[i].info.labels))
                .collect::<Vec<_>>(),
        ),
        None => vec![0; feasible.len()],
    };
    let candidates: Vec<(i64, u64)> = feasible
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let n = &nodes[i];
            let total = score::LEAST_ALLOCATED_WEIGHT
                * score::least_allocated(&n.info, &n.usage, pod.non_zero)
                + score::SPREAD_WEIGHT * spread[k]
                + score::INTER_POD_AFFINITY_WEIGHT * affinity[k];
            (total, score::tie_break(&pod.uid, &n.info.name))
        })
        .collect();
    feasible[score::best(&candidates).unwrap_or(0)]
}

/// The pod fits nowhere: try preemption (upstream's PostFilter) and say why.
fn unschedulable(
    pod: &PodInfo,
    state: &CycleState,
    cache: &Cache,
    diagnosis: &Diagnosis,
    resolvable: &[usize],
    budgets: impl FnOnce() -> Vec<Budget>,
) -> Decision {
    let all = cache.nodes().len();
    if let Err(why) = preemption::eligible(pod, cache) {
        return Decision::Unschedulable(diagnosis.message(all, Some(why)));
    }
    match preemption::preempt(pod, state, cache, resolvable, &budgets()) {
        Ok(c) => Decision::Preempt {
            node: c.node,
            victims: c
                .victims
                .iter()
                .map(|v| Victim {
                    uid: v.uid.clone(),
                    namespace: v.namespace.clone(),
                    name: v.name.clone(),
                })
                .collect(),
            message: diagnosis.message(all, None),
        },
        Err(why) => Decision::Unschedulable(diagnosis.message(all, Some(&why))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{cache::Placement, node_info::NodeInfo, resources::Resources};
    use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Taint};

    fn node(name: &str, cpu: i64) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            allocatable: Resources {
                milli_cpu: cpu,
                memory: 1 << 34,
                ..Default::default()
            },
            allowed_pods: 110,
            ..Default::default()
        }
    }

    fn pod(uid: &str, cpu: i64) -> PodInfo {
        PodInfo {
            uid: uid.into(),
            requests: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            non_zero: (cpu.max(100), 200 << 20),
            ..Default::default()
        }
    }

    #[test]
    fn sample_sizes_follow_upstream() {
        let cases = [
            (0, None, 0),
            (50, None, 50),
            (99, None, 99),
            (100, None, 100),
            (1000, None, 420),
            (5000, None, 500),
            (6000, None, 300),
            (100_000, None, 5000),
            (5000, Some(100), 5000),
            (5000, Some(1), 100),
            (5000, Some(20), 1000),
        ];
        for (all, pct, want) in cases {
            assert_eq!(
                feasible_nodes_to_find(all, pct),
                want,
                "{all} nodes at {pct:?}"
            );
        }
    }

    #[test]
    fn picks_the_least_allocated_node() {
        let mut cache = Cache::default();
        for (name, cpu) in [("small", 2000), ("big", 8000), ("medium", 4000)] {
            cache.upsert_node(node(name, cpu));
        }
        assert_eq!(
            schedule(&pod("p", 1000), &cache, &mut 0, None, Vec::new),
            Decision::Bind("big".into())
        );
    }

    #[test]
    fn spreads_siblings() {
        let mut cache = Cache::default();
        for name in ["a", "b", "c"] {
            cache.upsert_node(node(name, 8000));
        }
        let mut placed = std::collections::BTreeMap::<String, u32>::new();
        let mut start = 0;
        for i in 0..9 {
            let mut p = pod(&format!("p{i}"), 100);
            p.owner = Some("rs".into());
            let Decision::Bind(n) = schedule(&p, &cache, &mut start, None, Vec::new) else {
                panic!("unschedulable")
            };
            cache.assume(&p.uid, Placement::new(&p, &n));
            *placed.entry(n).or_default() += 1;
        }
        assert_eq!(
            placed.values().copied().collect::<Vec<_>>(),
            [3, 3, 3],
            "{placed:?}"
        );
    }

    #[test]
    fn explains_failure() {
        let mut cache = Cache::default();
        cache.upsert_node(node("a", 1000));
        let mut tainted = node("b", 8000);
        tainted.taints = vec![Taint {
            key: "node.kubernetes.io/unreachable".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        }];
        cache.upsert_node(tainted);
        let mut cordoned = node("c", 8000);
        cordoned.unschedulable = true;
        cache.upsert_node(cordoned);
        assert_eq!(
            schedule(&pod("p", 2000), &cache, &mut 0, None, Vec::new),
            Decision::Unschedulable(
                "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling..".into()
            )
        );
        assert_eq!(
            schedule(&pod("p", 1), &Cache::default(), &mut 0, None, Vec::new),
            Decision::Unschedulable(NO_NODES_AVAILABLE.into())
        );
    }

    #[test]
    fn a_read_write_once_pod_claim_in_use_fits_nowhere_until_its_holder_goes() {
        use crate::volume_restrictions::ReadWriteOncePod;
        use k8s_openapi::api::core::v1::PersistentVolumeClaim;
        let claim: std::sync::Arc<PersistentVolumeClaim> = std::sync::Arc::new(
            serde_json::from_value(
                serde_json::json!({"spec": {"accessModes": ["ReadWriteOncePod"]}}),
            )
            .unwrap(),
        );
        let mut cache = Cache::default();
        cache.upsert_node(node("a", 4000));
        cache.upsert_node(node("b", 4000));
        let mounting = |uid: &str, priority: i32| PodInfo {
            namespace: "default".into(),
            name: uid.into(),
            claims: vec!["once".into()],
            priority,
            ..pod(uid, 100)
        };
        let holder = mounting("holder", 0);
        cache.set_bound("holder", Placement::new(&holder, "a"));
        let decide = |p: &PodInfo| {
            let state = VolumeState {
                read_write_once_pod: ReadWriteOncePod::new(p, &cache, |_, _| Some(claim.clone()))
                    .unwrap(),
                ..Default::default()
            };
            schedule_with(p, state, &cache, &mut 0, None, Vec::new)
        };
        // The message kube-scheduler v1.28.4 gives (checked against it, on three nodes).
        assert_eq!(
            decide(&mounting("second", 0)),
            Decision::Unschedulable(
                "0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod..".into()
            )
        );
        let Decision::Preempt { node, victims, .. } = decide(&mounting("urgent", 100)) else {
            panic!("a pod of higher priority preempts the claim's holder")
        };
        assert_eq!((node.as_str(), victims[0].uid.as_str()), ("a", "holder"));
    }

    #[test]
    fn volume_prefilter_rejections_read_as_upstream() {
        let mut cache = Cache::default();
        let p = pod("p", 100);
        let missing = "persistentvolumeclaim \"missing\" not found";
        assert_eq!(
            rejected_before_filtering(&p, &cache, missing),
            NO_NODES_AVAILABLE
        );
        for name in ["a", "b", "c"] {
            cache.upsert_node(node(name, 1000));
        }
        // As kube-scheduler v1.28.4 answers (checked against it).
        assert_eq!(
            rejected_before_filtering(&p, &cache, missing),
            "0/3 nodes are available: persistentvolumeclaim \"missing\" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
        );
    }

    #[test]
    fn daemonset_pods_only_look_at_their_node() {
        let mut cache = Cache::default();
        for name in ["a", "b", "c", "d"] {
            cache.upsert_node(node(name, 1000));
        }
        let mut p = pod("ds", 100);
        p.required_terms = Some(vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec!["c".into()]),
            }]),
            ..Default::default()
        }]);
        assert_eq!(
            schedule(&p, &cache, &mut 0, None, Vec::new),
            Decision::Bind("c".into())
        );
        // Upstream v1.28.4 reports only the node NodeAffinity's PreFilter named; its preemption
        // still tries every node, as kube-scheduler v1.28.4 answers for a pinned pod too big for
        // its node (checked against it).
        p.requests.milli_cpu = 2000;
        assert_eq!(
            schedule(&p, &cache, &mut 0, None, Vec::new),
            Decision::Unschedulable(
                "0/4 nodes are available: 1 Insufficient cpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod..".into()
            )
        );
        let low = pod("low", 100);
        for n in ["a", "b", "c", "d"] {
            let mut here = low.clone();
            here.uid = format!("low-{n}");
            cache.set_bound(&here.uid, Placement::new(&here, n));
        }
        p.priority = 1000;
        assert_eq!(
            schedule(&p, &cache, &mut 0, None, Vec::new),
            Decision::Unschedulable(
                "0/4 nodes are available: 1 Insufficient cpu. preemption: 0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector..".into()
            )
        );
    }

    #[test]
    fn sampling_rotates_and_stops_early() {
        let mut cache = Cache::default();
        for i in 0..1000 {
            cache.upsert_node(node(&format!("n{i}"), 8000));
        }
        let mut start = 0;
        assert!(matches!(
            schedule(&pod("p", 100), &cache, &mut start, None, Vec::new),
            Decision::Bind(_)
        ));
        assert_eq!(start, 420, "stopped after finding 420 feasible nodes");
        assert!(matches!(
            schedule(&pod("q", 100), &cache, &mut start, None, Vec::new),
            Decision::Bind(_)
        ));
        assert_eq!(start, 840);
    }
}
