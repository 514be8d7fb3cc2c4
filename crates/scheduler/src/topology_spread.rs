//! `topologySpreadConstraints`, as upstream's `PodTopologySpread` plugin: per constraint, the
//! pods its selector matches are counted per domain (value of `topologyKey`) over the eligible
//! nodes; a node passes a `DoNotSchedule` constraint when placing the pod there keeps
//! `count + self - min <= maxSkew` (with `min` 0 while fewer than `minDomains` domains exist), and
//! `ScheduleAnyway` constraints score nodes by how few matching pods their domains hold.

use crate::{cache::Cache, node_info::NodeInfo, pod_info::PodInfo};
use api::{node_affinity, selector::LabelSelector, taint};
use k8s_openapi::{
    api::core::v1::TopologySpreadConstraint, apimachinery::pkg::apis::meta::v1 as meta,
};
use std::collections::{BTreeMap, HashMap};

/// The reason for a node whose domain would be too crowded.
pub const REASON_SKEW: &str = "node(s) didn't match pod topology spread constraints";
/// The reason for a node without a constraint's topology key.
pub const REASON_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// One constraint, its selector resolved once.
#[derive(Clone, Debug)]
pub struct SpreadConstraint {
    /// `topologyKey`.
    pub topology_key: String,
    /// `maxSkew`.
    pub max_skew: i64,
    /// `minDomains` (1 when unset).
    pub min_domains: i64,
    /// `whenUnsatisfiable: DoNotSchedule` (the default) filters; `ScheduleAnyway` only scores.
    pub hard: bool,
    /// `labelSelector` with `matchLabelKeys` merged; `None` matches no pod.
    pub selector: Option<LabelSelector>,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes matching the pod's node affinity
    /// and selector count as domains.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default `Ignore`): only nodes whose taints the pod tolerates.
    pub honor_taints: bool,
}

impl SpreadConstraint {
    /// Compiles a constraint of a pod with `labels`.
    pub fn new(c: &TopologySpreadConstraint, labels: &BTreeMap<String, String>) -> Self {
        let selector = c.label_selector.as_ref().and_then(|sel| {
            let mut sel = sel.clone();
            let exprs = sel.match_expressions.get_or_insert_with(Vec::new);
            for key in c.match_label_keys.iter().flatten() {
                if let Some(value) = labels.get(key) {
                    exprs.push(meta::LabelSelectorRequirement {
                        key: key.clone(),
                        operator: "In".into(),
                        values: Some(vec![value.clone()]),
                    });
                }
            }
            LabelSelector::from_label_selector(&sel).ok()
        });
        Self {
            topology_key: c.topology_key.clone(),
            max_skew: c.max_skew.into(),
            min_domains: c.min_domains.map_or(1, i64::from),
            hard: c.when_unsatisfiable != "ScheduleAnyway",
            selector,
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        }
    }

    fn selects(&self, pod: &PodInfo, namespace: &str) -> bool {
        pod.namespace == namespace
            && !pod.terminating
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches_labels(Some(&pod.labels)))
    }
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
                if existing.uid == pod.uid || !c.selects(existing, &pod.namespace) {
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
            let self_match = i64::from(c.selects(pod, &pod.namespace));
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
            if c.selects(existing, &pod.namespace)
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
