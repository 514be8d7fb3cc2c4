//! One `topologySpreadConstraints` entry of a pod, its selector compiled once from the spec
//! (upstream's `topologySpreadConstraint` built in the framework's `PodInfo`), so `PodInfo` and the
//! `PodTopologySpread` plugin share it without the plugin's counting depending on it the other way.

use api::selector::LabelSelector;
use k8s_openapi::{
    api::core::v1::TopologySpreadConstraint, apimachinery::pkg::apis::meta::v1 as meta,
};
use std::collections::BTreeMap;

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
}
