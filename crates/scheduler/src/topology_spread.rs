//! `topologySpreadConstraints`, as upstream's `PodTopologySpread` plugin: per constraint, the
//! pods its selector matches are counted per domain (value of `topologyKey`) over the eligible
//! nodes; a node passes a `DoNotSchedule` constraint when placing the pod there keeps
//! `count + self - min <= maxSkew` (with `min` 0 while fewer than `minDomains` domains exist), and
//! `ScheduleAnyway` constraints score nodes by how few matching pods their domains hold.

use crate::{
    cache::Cache, node_info::NodeInfo, pod_info::PodInfo, spread_constraint::SpreadConstraint,
};
use api::{node_affinity, taint};
use std::collections::{BTreeMap, HashMap};

/// The reason for a node whose domain would be too crowded.
pub const REASON_SKEW: &str = "node(s) didn't match pod topology spread constraints";
/// The reason for a node without a constraint's topology key.
pub const REASON_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// Whether constraint `c` of a pod in `namespace` counts `pod`: same namespace, not being
/// deleted, and matched by the selector (upstream's `countPodsMatchSelector`).
fn selects(c: &SpreadConstraint, pod: &PodInfo, namespace: &str) -> bool {
    pod.namespace == namespace
        && !pod.terminating
        && c.selector
            .as_ref()
            .is_some_and(|s| s.matches_labels(Some(&pod.labels)))
}

/// Counts of one constraint: matching pods per domain, and how many domains hold each count (so
/// the minimum stays cheap to read as counts move during preemption).
#[derive(Clone, Debug, Default)]
struct Counts {
    per_domain: HashMap<String, i64>,
    histogram: BTreeMap<i64, usize>,
    self_match: i64,
}

impl Counts {
    fn shift(&mut self, domain: &str, delta: i64) {
        let Some(n) = self.per_domain.get_mut(domain) else {
            return;
        };
        if let Some(h) = self.histogram.get_mut(n) {
            *h -= 1;
            if *h == 0 {
                self.histogram.remove(n);
            }
        }
        *n += delta;
        *self.histogram.entry(*n).or_insert(0) += 1;
    }

    fn min(&self, min_domains: i64) -> i64 {
        if (self.per_domain.len() as i64) < min_domains {
            return 0;
        }
        self.histogram.keys().next().copied().unwrap_or(0)
    }
}

/// Upstream's `preFilterState` (and `preScoreState`) of `PodTopologySpread` for one pod.
#[derive(Clone, Debug, Default)]
pub struct SpreadState {
    counts: Vec<Counts>,
}

/// Whether `node` is a domain for constraint `c` of `pod` (upstream's node inclusion policies;
/// every constraint's topology key must be present).
fn eligible(c: &SpreadConstraint, pod: &PodInfo, node: &NodeInfo) -> bool {
    if c.honor_node_affinity
        && !(node_affinity::node_selector_matches(&pod.node_selector, &node.labels)
            && pod
                .required_terms
                .as_deref()
                .is_none_or(|t| node_affinity::required_terms_match(t, &node.name, &node.labels)))
    {
        return false;
    }
    if c.honor_taints
        && taint::first_untolerated(&node.taints, &pod.tolerations, taint::FILTERING_EFFECTS)
            .is_some()
    {
        return false;
    }
    pod.spread
        .iter()
        .all(|c| node.labels.contains_key(&c.topology_key))
}

impl SpreadState {
    /// Counts, over every eligible node, the pods each constraint of `pod` selects.
    pub fn new(pod: &PodInfo, cache: &Cache) -> Self {
        let mut counts: Vec<Counts> = Vec::with_capacity(pod.spread.len());
        for c in &pod.spread {
            let mut per_domain: HashMap<String, i64> = HashMap::new();
            for entry in cache.nodes() {
                if eligible(c, pod, &entry.info)
                    && let Some(v) = entry.info.labels.get(&c.topology_key)
                {
                    per_domain.entry(v.clone()).or_insert(0);
                }
            }
            for (existing, _) in cache.candidates(c.selector.as_ref()) {
                if existing.uid == pod.uid || !selects(c, existing, &pod.namespace) {
                    continue;
                }
                let Some(entry) = cache.node_of(&existing.uid) else {
                    continue;
                };
                if !eligible(c, pod, &entry.info) {
                    continue;
                }
                if let Some(n) = entry
                    .info
                    .labels
                    .get(&c.topology_key)
                    .and_then(|v| per_domain.get_mut(v))
                {
                    *n += 1;
                }
            }
            let mut histogram = BTreeMap::new();
            for n in per_domain.values() {
                *histogram.entry(*n).or_insert(0) += 1;
            }
            let self_match = i64::from(selects(c, pod, &pod.namespace));
            counts.push(Counts {
                per_domain,
                histogram,
                self_match,
            });
        }
        Self { counts }
    }

    /// Takes `existing` on `node` out of the counts (`delta` -1) or puts it back (+1).
    pub fn update(&mut self, pod: &PodInfo, existing: &PodInfo, node: &NodeInfo, delta: i64) {
        if existing.uid == pod.uid {
            return;
        }
        for (c, counts) in pod.spread.iter().zip(&mut self.counts) {
            if selects(c, existing, &pod.namespace)
                && eligible(c, pod, node)
                && let Some(v) = node.labels.get(&c.topology_key)
            {
                counts.shift(v, delta);
            }
        }
    }

    /// Upstream's `Filter` over the `DoNotSchedule` constraints. `Err((reason, resolvable))`: a
    /// missing label is unresolvable, a crowded domain may clear up by preemption.
    pub fn filter(&self, pod: &PodInfo, node: &NodeInfo) -> Result<(), (&'static str, bool)> {
        for (c, counts) in pod.spread.iter().zip(&self.counts) {
            if !c.hard {
                continue;
            }
            let Some(value) = node.labels.get(&c.topology_key) else {
                return Err((REASON_MISSING_LABEL, false));
            };
            let matching = counts.per_domain.get(value).copied().unwrap_or(0);
            let skew = matching + counts.self_match - counts.min(c.min_domains);
            if skew > c.max_skew {
                return Err((REASON_SKEW, true));
            }
        }
        Ok(())
    }

    /// Raw `ScheduleAnyway` score of a node (lower is better), or `None` when the node lacks a
    /// soft constraint's key (upstream scores such nodes 0).
    pub fn raw_score(&self, pod: &PodInfo, node: &NodeInfo) -> Option<f64> {
        let mut score = 0.0;
        for (c, counts) in pod.spread.iter().zip(&self.counts) {
            if c.hard {
                continue;
            }
            let value = node.labels.get(&c.topology_key)?;
            let matching = counts.per_domain.get(value).copied().unwrap_or(0) as f64;
            // Upstream weighs each constraint by log(domains + 2), so a constraint over many
            // domains (hostname) and one over few (zone) pull with comparable strength.
            let weight = ((counts.per_domain.len() + 2) as f64).ln();
            score += matching * weight + (c.max_skew - 1) as f64;
        }
        Some(score)
    }

    /// Whether the pod has `ScheduleAnyway` constraints to score by.
    pub fn scores(pod: &PodInfo) -> bool {
        pod.spread.iter().any(|c| !c.hard)
    }
}

/// Upstream's `NormalizeScore` for spreading: the node with the fewest matching pods gets 100,
/// the others less in proportion; nodes without the keys get 0.
pub fn normalize(raw: &[Option<f64>]) -> Vec<i64> {
    let present = raw.iter().flatten();
    let min = present.clone().copied().fold(f64::INFINITY, f64::min);
    let max = present.copied().fold(0.0_f64, f64::max);
    raw.iter()
        .map(|s| match s {
            None => 0,
            Some(_) if max == 0.0 => crate::score::MAX_NODE_SCORE,
            Some(s) => (crate::score::MAX_NODE_SCORE as f64 * (max + min - s) / max).round() as i64,
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::testing::{cache, node, pod};
    use serde_json::{Value, json};

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn spread(extra: Value) -> Value {
        let mut c = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"topologySpreadConstraints": [c]})
    }

    fn verdicts(pod: &PodInfo, cache: &Cache) -> Vec<Option<&'static str>> {
        let state = SpreadState::new(pod, cache);
        cache
            .nodes()
            .iter()
            .map(|n| state.filter(pod, &n.info).err().map(|e| e.0))
            .collect()
    }

    fn web(i: usize) -> PodInfo {
        pod(&format!("web-{i}"), json!({"app": "web"}), 100, json!({}))
    }

    #[test]
    fn max_skew_sends_the_pod_to_the_emptiest_zones() {
        let (w0, w1) = (web(0), web(1));
        let nodes = || {
            vec![
                node("a", "z1"),
                node("b", "z2"),
                node("c", "z3"),
                node("d", "z3"),
            ]
        };
        let c = cache(nodes(), &[(&w0, "a"), (&w1, "b")]);
        let p = pod("new", json!({"app": "web"}), 100, spread(json!({})));
        assert_eq!(
            verdicts(&p, &c),
            [Some(REASON_SKEW), Some(REASON_SKEW), None, None]
        );
        let loose = pod(
            "new",
            json!({"app": "web"}),
            100,
            spread(json!({"maxSkew": 2})),
        );
        assert_eq!(verdicts(&loose, &c), [None; 4]);
        let other = pod("x", json!({"app": "x"}), 100, spread(json!({})));
        assert_eq!(
            verdicts(&other, &c),
            [None; 4],
            "a pod its own selector does not match adds nothing to any domain"
        );
    }

    #[test]
    fn min_domains_counts_missing_domains_as_empty() {
        let (w0, w1) = (web(0), web(1));
        let c = cache(
            vec![node("a", "z1"), node("b", "z2")],
            &[(&w0, "a"), (&w1, "b")],
        );
        let p = pod("new", json!({"app": "web"}), 100, spread(json!({})));
        assert_eq!(verdicts(&p, &c), [None, None]);
        let p = pod(
            "new",
            json!({"app": "web"}),
            100,
            spread(json!({"minDomains": 3})),
        );
        assert_eq!(
            verdicts(&p, &c),
            [Some(REASON_SKEW), Some(REASON_SKEW)],
            "with fewer than minDomains domains the global minimum is 0"
        );
    }

    #[test]
    fn nodes_without_the_key_are_unresolvable() {
        let mut bare = node("bare", "");
        bare.labels.remove(ZONE);
        let c = cache(vec![node("a", "z1"), bare], &[]);
        let p = pod("new", json!({"app": "web"}), 100, spread(json!({})));
        let state = SpreadState::new(&p, &c);
        assert_eq!(state.filter(&p, &c.nodes()[0].info), Ok(()));
        assert_eq!(
            state.filter(&p, &c.nodes()[1].info),
            Err((REASON_MISSING_LABEL, false))
        );
    }

    #[test]
    fn node_inclusion_policies() {
        let (w0, w1) = (web(0), web(1));
        let mut tainted = node("c", "z3");
        tainted.taints = vec![k8s_openapi::api::core::v1::Taint {
            key: "dedicated".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }];
        let c = cache(
            vec![node("a", "z1"), node("b", "z2"), tainted],
            &[(&w0, "a"), (&w1, "b")],
        );
        // z3 is empty, so z1 and z2 are too full unless z3 stops counting as a domain.
        let ignore = pod("new", json!({"app": "web"}), 100, spread(json!({})));
        assert_eq!(
            verdicts(&ignore, &c)[..2],
            [Some(REASON_SKEW), Some(REASON_SKEW)]
        );
        let honor = pod(
            "new",
            json!({"app": "web"}),
            100,
            spread(json!({"nodeTaintsPolicy": "Honor"})),
        );
        assert_eq!(verdicts(&honor, &c)[..2], [None, None]);
        let mut selective = spread(json!({}));
        selective["nodeSelector"] = json!({ZONE: "z1"});
        let p = pod("new", json!({"app": "web"}), 100, selective.clone());
        assert_eq!(
            verdicts(&p, &c)[0],
            None,
            "only z1 is a domain under nodeAffinityPolicy Honor"
        );
        selective["topologySpreadConstraints"][0]["nodeAffinityPolicy"] = json!("Ignore");
        let p = pod("new", json!({"app": "web"}), 100, selective);
        assert_eq!(verdicts(&p, &c)[0], Some(REASON_SKEW));
    }

    #[test]
    fn schedule_anyway_scores_emptier_domains_higher() {
        let (w0, w1) = (web(0), web(1));
        let c = cache(
            vec![node("a", "z1"), node("b", "z2"), node("c", "z3")],
            &[(&w0, "a"), (&w1, "a")],
        );
        let p = pod(
            "new",
            json!({"app": "web"}),
            100,
            spread(json!({"whenUnsatisfiable": "ScheduleAnyway"})),
        );
        let state = SpreadState::new(&p, &c);
        assert_eq!(verdicts(&p, &c), [None; 3], "soft constraints never filter");
        let raw: Vec<Option<f64>> = c
            .nodes()
            .iter()
            .map(|n| state.raw_score(&p, &n.info))
            .collect();
        let scores = normalize(&raw);
        assert!(
            scores[0] < scores[1] && scores[1] == scores[2],
            "{scores:?}"
        );
    }

    #[test]
    fn counts_follow_removals() {
        let (w0, w1) = (web(0), web(1));
        let c = cache(
            vec![node("a", "z1"), node("b", "z2")],
            &[(&w0, "a"), (&w1, "a")],
        );
        let p = pod("new", json!({"app": "web"}), 100, spread(json!({})));
        let mut state = SpreadState::new(&p, &c);
        assert_eq!(
            state.filter(&p, &c.nodes()[0].info),
            Err((REASON_SKEW, true))
        );
        state.update(&p, &w0, &c.nodes()[0].info, -1);
        state.update(&p, &w1, &c.nodes()[0].info, -1);
        assert_eq!(state.filter(&p, &c.nodes()[0].info), Ok(()));
    }
}
