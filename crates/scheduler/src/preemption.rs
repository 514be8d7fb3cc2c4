//! Preemption, as upstream's `DefaultPreemption` plugin: when a pod fits nowhere, find the nodes
//! where evicting pods of lower priority would make it fit, choose the fewest and least important
//! victims on each, and pick one node.
//!
//! On a node, every lower-priority pod is taken away; if the pod then fits, the victims are put
//! back one at a time from the most important (highest priority, then oldest), those whose
//! eviction would violate a PodDisruptionBudget first, and each that still leaves room stays.
//! Among the candidate nodes the winner has the fewest budget violations, then the lowest
//! highest victim priority, the lowest sum of priorities, the fewest victims, and the latest
//! start of its most important victims.

use crate::{
    cache::{Cache, NodeEntry},
    diagnosis::{self, Diagnosis},
    filter::{CycleState, Rejection, filter_all},
    pod_info::PodInfo,
};
use api::selector::LabelSelector;
use std::{cmp::Reverse, collections::BTreeSet, sync::Arc};

/// What preemption needs of a PodDisruptionBudget.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Its namespace.
    pub namespace: String,
    /// `spec.selector`; an empty one selects nothing here, as upstream.
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`.
    pub allowed: i64,
    /// `status.disruptedPods` names, already counted by the API server.
    pub disrupted: BTreeSet<String>,
}

/// A node where preemption makes room, and what it costs.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The node.
    pub node: String,
    /// The pods to evict.
    pub victims: Vec<Arc<PodInfo>>,
    /// How many of them a PodDisruptionBudget protects.
    pub pdb_violations: usize,
}

/// Whether `pod` may preempt at all; the message says why not (upstream's
/// `PodEligibleToPreemptOthers`).
pub fn eligible(pod: &PodInfo, cache: &Cache) -> Result<(), &'static str> {
    if pod.preempt_never {
        return Err(diagnosis::NEVER);
    }
    if let Some(node) = pod.nominated_node.as_deref().and_then(|n| cache.node(n))
        && node
            .pods
            .iter()
            .any(|p| p.terminating && p.priority < pod.priority)
    {
        return Err(diagnosis::TERMINATING_ON_NOMINATED);
    }
    Ok(())
}

/// Finds the best node to preempt on among `resolvable` (positions in [`Cache::nodes`] whose
/// rejection eviction might cure), or explains, in upstream's words, why there is none.
pub fn preempt(
    pod: &PodInfo,
    state: &CycleState,
    cache: &Cache,
    resolvable: &[usize],
    budgets: &[Budget],
) -> Result<Candidate, String> {
    let all = cache.nodes().len();
    let mut diagnosis = Diagnosis::default();
    diagnosis.add_count(diagnosis::NOT_HELPFUL, all.saturating_sub(resolvable.len()));
    let mut candidates = Vec::new();
    for &i in resolvable {
        let entry = &cache.nodes()[i];
        match select_victims(pod, state, entry, cache, budgets) {
            Ok(c) => candidates.push(c),
            Err(r) => diagnosis.add(r),
        }
    }
    pick(candidates).ok_or_else(|| diagnosis.summary(all))
}

/// Upstream's `SelectVictimsOnNode`.
fn select_victims(
    pod: &PodInfo,
    state: &CycleState,
    entry: &NodeEntry,
    cache: &Cache,
    budgets: &[Budget],
) -> Result<Candidate, Rejection> {
    let mut lower: Vec<Arc<PodInfo>> = entry
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if lower.is_empty() {
        return Err(Rejection::unresolvable(diagnosis::NO_VICTIMS));
    }
    let mut usage = entry.usage.clone();
    let mut state = state.clone();
    for v in &lower {
        usage.remove(v);
        state.update(pod, v, &entry.info, cache, -1);
    }
    filter_all(pod, &state, &entry.info, &usage, cache)?;
    // Most important first: they are the first offered a reprieve.
    lower.sort_by_key(|p| (Reverse(p.priority), p.created));
    let (violating, safe) = split_by_budget(lower, budgets);
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    for (group, protected) in [(violating, true), (safe, false)] {
        for v in group {
            usage.add(&v);
            state.update(pod, &v, &entry.info, cache, 1);
            if filter_all(pod, &state, &entry.info, &usage, cache).is_ok() {
                continue;
            }
            usage.remove(&v);
            state.update(pod, &v, &entry.info, cache, -1);
            pdb_violations += usize::from(protected);
            victims.push(v);
        }
    }
    Ok(Candidate {
        node: entry.info.name.clone(),
        victims,
        pdb_violations,
    })
}

/// Upstream's `filterPodsWithPDBViolation`: walking the pods in order, each budget that selects
/// a pod (and has not counted it as disrupted already) loses one allowed disruption; a pod that
/// takes a budget below zero would violate it.
fn split_by_budget(
    pods: Vec<Arc<PodInfo>>,
    budgets: &[Budget],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i64> = budgets.iter().map(|b| b.allowed).collect();
    let (mut violating, mut safe) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violated = false;
        if !pod.labels.is_empty() {
            for (b, left) in budgets.iter().zip(allowed.iter_mut()) {
                if b.namespace != pod.namespace
                    || b.selector.is_empty()
                    || !b.selector.matches_labels(Some(&pod.labels))
                    || b.disrupted.contains(&pod.name)
                {
                    continue;
                }
                *left -= 1;
                violated |= *left < 0;
            }
        }
        if violated {
            violating.push(pod);
        } else {
            safe.push(pod);
        }
    }
    (violating, safe)
}

/// Upstream's `pickOneNodeForPreemption`; the first node wins remaining ties.
fn pick(candidates: Vec<Candidate>) -> Option<Candidate> {
    candidates.into_iter().min_by_key(|c| {
        let highest = c
            .victims
            .iter()
            .map(|v| v.priority)
            .max()
            .unwrap_or(i32::MIN);
        // Priorities shifted to be positive, as upstream sums them.
        let sum: i64 = c
            .victims
            .iter()
            .map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1)
            .sum();
        let earliest_of_highest = c
            .victims
            .iter()
            .filter(|v| v.priority == highest)
            .filter_map(|v| v.created)
            .min();
        (
            c.pdb_violations,
            highest,
            sum,
            c.victims.len(),
            Reverse(earliest_of_highest),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::{
        algorithm::{Decision, schedule},
        testing::{cache, node, pod},
    };
    use serde_json::json;

    fn prio(name: &str, labels: serde_json::Value, cpu: i64, priority: i32) -> PodInfo {
        pod(name, labels, cpu, json!({"priority": priority}))
    }

    fn victims(d: &Decision) -> (String, Vec<String>) {
        match d {
            Decision::Preempt { node, victims, .. } => (
                node.clone(),
                victims.iter().map(|v| v.name.clone()).collect(),
            ),
            other => panic!("no preemption: {other:?}"),
        }
    }

    #[test]
    fn evicts_the_fewest_least_important_pods() {
        // Node a: two small low pods; node b: one big pod of middling priority.
        let (l1, l2, mid) = (
            prio("l1", json!({}), 2000, 1),
            prio("l2", json!({}), 2000, 2),
            prio("mid", json!({}), 4000, 5),
        );
        let c = cache(
            vec![node("a", "z"), node("b", "z")],
            &[(&l1, "a"), (&l2, "a"), (&mid, "b")],
        );
        let high = prio("high", json!({}), 2000, 10);
        let d = schedule(&high, &c, &mut 0, None, Vec::new);
        assert_eq!(
            victims(&d),
            ("a".into(), vec!["l1".into()]),
            "one victim suffices, and the lowest priority goes"
        );
        let Decision::Preempt { message, .. } = d else {
            unreachable!()
        };
        assert_eq!(message, "0/2 nodes are available: 2 Insufficient cpu.");
    }

    #[test]
    fn equal_priorities_are_never_victims() {
        let full = prio("full", json!({}), 4000, 0);
        let c = cache(vec![node("a", "z")], &[(&full, "a")]);
        assert_eq!(
            schedule(&prio("p", json!({}), 1000, 0), &c, &mut 0, None, Vec::new),
            Decision::Unschedulable("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..".into())
        );
        let never = pod(
            "n",
            json!({}),
            1000,
            json!({"priority": 9, "preemptionPolicy": "Never"}),
        );
        assert_eq!(
            schedule(&never, &c, &mut 0, None, Vec::new),
            Decision::Unschedulable("0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never..".into())
        );
        let huge = prio("huge", json!({}), 8000, 9);
        assert_eq!(
            schedule(&huge, &c, &mut 0, None, Vec::new),
            Decision::Unschedulable("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Insufficient cpu..".into()),
            "evicting everything would still not make room"
        );
    }

    #[test]
    fn disruption_budgets_steer_the_choice() {
        let (guarded, free) = (
            prio("guarded", json!({"app": "zk"}), 4000, 1),
            prio("free", json!({"app": "web"}), 4000, 1),
        );
        let c = cache(
            vec![node("a", "z"), node("b", "z")],
            &[(&guarded, "a"), (&free, "b")],
        );
        let budget = Budget {
            namespace: "default".into(),
            selector: LabelSelector::parse("app=zk").unwrap(),
            allowed: 0,
            disrupted: BTreeSet::new(),
        };
        let high = prio("high", json!({}), 1000, 10);
        let d = schedule(&high, &c, &mut 0, None, || vec![budget.clone()]);
        assert_eq!(victims(&d), ("b".into(), vec!["free".into()]));
        let c = cache(vec![node("a", "z")], &[(&guarded, "a")]);
        let d = schedule(&high, &c, &mut 0, None, || vec![budget.clone()]);
        assert_eq!(
            victims(&d),
            ("a".into(), vec!["guarded".into()]),
            "a budget is avoided, not absolute"
        );
    }

    #[test]
    fn anti_affinity_victims_and_terminating_nominations() {
        let spec = |p: i32| {
            json!({"priority": p, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "zk"}}, "topologyKey": "kubernetes.io/hostname"}]}}})
        };
        let low = pod("low", json!({"app": "zk"}), 100, spec(1));
        let c = cache(vec![node("a", "z")], &[(&low, "a")]);
        let high = pod("high", json!({"app": "zk"}), 100, spec(10));
        assert_eq!(
            victims(&schedule(&high, &c, &mut 0, None, Vec::new)),
            ("a".into(), vec!["low".into()])
        );
        let mut gone = low.clone();
        gone.terminating = true;
        let c = cache(vec![node("a", "z")], &[(&gone, "a")]);
        let mut waiting = high.clone();
        waiting.nominated_node = Some("a".into());
        assert_eq!(
            schedule(&waiting, &c, &mut 0, None, Vec::new),
            Decision::Unschedulable("0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules. preemption: not eligible due to a terminating pod on the nominated node..".into())
        );
    }

    #[test]
    fn nominated_pods_keep_their_room() {
        let c0 = cache(vec![node("a", "z")], &[]);
        let mut c = c0;
        let big = prio("big", json!({}), 3000, 10);
        c.nominate(&big, "a");
        let small = prio("small", json!({}), 2000, 1);
        assert!(matches!(
            schedule(&small, &c, &mut 0, None, Vec::new),
            Decision::Unschedulable(_)
        ));
        let higher = prio("higher", json!({}), 2000, 20);
        assert_eq!(
            schedule(&higher, &c, &mut 0, None, Vec::new),
            Decision::Bind("a".into())
        );
    }
}
