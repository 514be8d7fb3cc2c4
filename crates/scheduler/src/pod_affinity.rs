//! A pod's inter-pod affinity and anti-affinity terms, parsed once from its spec (upstream keeps
//! them in the framework's `PodInfo` as `AffinityTerm`s, `pkg/scheduler/framework/types.go`), so
//! the `InterPodAffinity` plugin, the cache's term index and `PodInfo` all read one type that
//! depends on no plugin.

use api::selector::LabelSelector;
use k8s_openapi::{
    api::core::v1::{Affinity, PodAffinityTerm, WeightedPodAffinityTerm},
    apimachinery::pkg::apis::meta::v1 as meta,
};
use std::collections::{BTreeMap, BTreeSet};

/// One pod affinity term, with its label selector and namespaces resolved once.
#[derive(Clone, Debug)]
pub struct AffinityTerm {
    /// `labelSelector` with `matchLabelKeys`/`mismatchLabelKeys` merged in; `None` (a nil
    /// selector) matches no pod.
    pub selector: Option<LabelSelector>,
    /// `namespaces`, or the owning pod's namespace when neither it nor a selector is given.
    pub namespaces: BTreeSet<String>,
    /// `namespaceSelector`; `{}` matches every namespace.
    pub namespace_selector: Option<LabelSelector>,
    /// `topologyKey`.
    pub topology_key: String,
    /// The weight of a preferred term (1 for required ones).
    pub weight: i64,
}

impl AffinityTerm {
    /// Compiles a term of a pod in `namespace` with `labels` (which `matchLabelKeys` and
    /// `mismatchLabelKeys` read, as upstream's API server merges them at creation).
    pub fn new(
        term: &PodAffinityTerm,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        weight: i64,
    ) -> Self {
        let selector = term.label_selector.as_ref().and_then(|sel| {
            let mut sel = sel.clone();
            let exprs = sel.match_expressions.get_or_insert_with(Vec::new);
            for (keys, operator) in [
                (&term.match_label_keys, "In"),
                (&term.mismatch_label_keys, "NotIn"),
            ] {
                for key in keys.iter().flatten() {
                    if let Some(value) = labels.get(key) {
                        exprs.push(meta::LabelSelectorRequirement {
                            key: key.clone(),
                            operator: operator.into(),
                            values: Some(vec![value.clone()]),
                        });
                    }
                }
            }
            LabelSelector::from_label_selector(&sel).ok()
        });
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        let namespace_selector = term
            .namespace_selector
            .as_ref()
            .and_then(|s| LabelSelector::from_label_selector(s).ok());
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.insert(namespace.to_string());
        }
        Self {
            selector,
            namespaces,
            namespace_selector,
            topology_key: term.topology_key.clone(),
            weight,
        }
    }

    /// Whether a pod in `namespace` with `labels` is one of the pods this term selects.
    /// `namespace_labels` is asked only when the namespace is not named and a
    /// `namespaceSelector` has to decide, so the common case costs no namespace lookup.
    pub fn matches<'a>(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        namespace_labels: impl FnOnce() -> Option<&'a BTreeMap<String, String>>,
    ) -> bool {
        let Some(selector) = &self.selector else {
            return false;
        };
        let in_namespace = self.namespaces.contains(namespace)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.matches_labels(namespace_labels()));
        in_namespace && selector.matches_labels(Some(labels))
    }

    /// A `key=value` every selected pod carries, by which an index can find candidates.
    pub fn index_key(&self) -> Option<(&str, &str)> {
        self.selector.as_ref()?.exact_values().next()
    }
}

/// A pod's inter-pod (anti-)affinity terms.
#[derive(Clone, Debug, Default)]
pub struct PodAffinity {
    /// `podAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: Vec<AffinityTerm>,
    /// `podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required_anti: Vec<AffinityTerm>,
    /// `podAffinity.preferredDuringSchedulingIgnoredDuringExecution`.
    pub preferred: Vec<AffinityTerm>,
    /// `podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution`.
    pub preferred_anti: Vec<AffinityTerm>,
}

impl PodAffinity {
    /// Reads the terms of a pod in `namespace` with `labels`.
    pub fn new(
        affinity: Option<&Affinity>,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Self {
        let Some(a) = affinity else {
            return Self::default();
        };
        let required = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(t, namespace, labels, 1))
                .collect()
        };
        let preferred = |terms: Option<&Vec<WeightedPodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .into_iter()
                .flatten()
                .map(|w| {
                    AffinityTerm::new(&w.pod_affinity_term, namespace, labels, w.weight.into())
                })
                .collect()
        };
        let pa = a.pod_affinity.as_ref();
        let anti = a.pod_anti_affinity.as_ref();
        Self {
            required: required(pa.and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            required_anti: required(anti.and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred: preferred(pa.and_then(|p| {
                p.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_anti: preferred(anti.and_then(|p| {
                p.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
        }
    }

    /// Whether the pod has no terms at all.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.required_anti.is_empty()
            && self.preferred.is_empty()
            && self.preferred_anti.is_empty()
    }

    /// Every term, for indexing.
    pub fn all_terms(&self) -> impl Iterator<Item = &AffinityTerm> {
        self.required
            .iter()
            .chain(&self.required_anti)
            .chain(&self.preferred)
            .chain(&self.preferred_anti)
    }
}
