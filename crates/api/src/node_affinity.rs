//! `nodeSelector` and required node affinity, as upstream's `NodeAffinity` filter and
//! `GetRequiredNodeAffinity(pod).Match(node)` read them. The one implementation: the scheduler
//! filters with it and the DaemonSet controller decides which nodes run a daemon pod with it.
//!
//! Terms of `nodeSelectorTerms` are ORed, the expressions and fields inside a term are ANDed, and a
//! term with neither matches nothing. `matchFields` knows only `metadata.name`, which is how the
//! DaemonSet controller pins each of its pods to one node.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use std::collections::{BTreeMap, BTreeSet};

/// The one field `matchFields` may name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// Whether every `nodeSelector` pair is a label of the node.
pub fn node_selector_matches(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The terms of the pod's `requiredDuringSchedulingIgnoredDuringExecution` node affinity.
pub fn required_terms(spec: &PodSpec) -> Option<&[NodeSelectorTerm]> {
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .map(|s| s.node_selector_terms.as_slice())
}

/// Whether a node named `node_name` with `labels` satisfies the pod's `nodeSelector` and its
/// required node affinity (upstream's `GetRequiredNodeAffinity(pod).Match(node)`).
pub fn pod_matches_node(
    spec: &PodSpec,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    spec.node_selector
        .as_ref()
        .is_none_or(|s| node_selector_matches(s, labels))
        && required_terms(spec).is_none_or(|t| required_terms_match(t, node_name, labels))
}

/// Whether some term matches the node.
pub fn required_terms_match(
    terms: &[NodeSelectorTerm],
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    terms.iter().any(|t| term_matches(t, node_name, labels))
}

fn term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == NODE_NAME_FIELD && requirement_matches(r, Some(node_name)))
}

/// One requirement against the value the node has for its key (`None`: the node lacks it).
pub fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(want) = want.parse::<i64>() else {
                return false;
            };
            if r.operator == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}

/// Upstream's `NodeAffinity` PreFilter: when every term pins `metadata.name In [...]`, only those
/// nodes are worth filtering (the union over terms of each term's intersection). `None` means any
/// node may match. An empty set means the terms contradict each other.
pub fn pinned_node_names(terms: Option<&[NodeSelectorTerm]>) -> Option<BTreeSet<String>> {
    let terms = terms?;
    let mut union: Option<BTreeSet<String>> = None;
    for term in terms {
        let mut names: Option<BTreeSet<String>> = None;
        for r in term.match_fields.iter().flatten() {
            if r.key == NODE_NAME_FIELD && r.operator == "In" {
                let set: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
                names = Some(match names {
                    None => set,
                    Some(prev) => prev.intersection(&set).cloned().collect(),
                });
            }
        }
        // A term without a name pin lets every node through, since terms are ORed.
        let names = names?;
        union.get_or_insert_with(BTreeSet::new).extend(names);
    }
    union
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn term(
        exprs: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: (!exprs.is_empty()).then_some(exprs),
            match_fields: (!fields.is_empty()).then_some(fields),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn operators() {
        let cases: [(NodeSelectorRequirement, Option<&str>, bool); 17] = [
            (req("zone", "In", &["a", "b"]), Some("a"), true),
            (req("zone", "In", &["a", "b"]), Some("c"), false),
            (req("zone", "In", &["a"]), None, false),
            (req("zone", "NotIn", &["a"]), Some("b"), true),
            (req("zone", "NotIn", &["a"]), Some("a"), false),
            (req("zone", "NotIn", &["a"]), None, true),
            (req("zone", "Exists", &[]), Some(""), true),
            (req("zone", "Exists", &[]), None, false),
            (req("zone", "DoesNotExist", &[]), None, true),
            (req("zone", "DoesNotExist", &[]), Some("a"), false),
            (req("cores", "Gt", &["4"]), Some("8"), true),
            (req("cores", "Gt", &["8"]), Some("8"), false),
            (req("cores", "Lt", &["8"]), Some("4"), true),
            (req("cores", "Lt", &["8"]), Some("many"), false),
            (req("cores", "Gt", &["4"]), None, false),
            (req("cores", "Gt", &["4", "5"]), Some("8"), false),
            (req("zone", "Bogus", &["a"]), Some("a"), false),
        ];
        for (r, value, want) in cases {
            assert_eq!(
                requirement_matches(&r, value),
                want,
                "{} {} {:?} vs {value:?}",
                r.key,
                r.operator,
                r.values
            );
        }
    }

    #[test]
    fn terms_are_ored_and_expressions_anded() {
        let l = labels(&[("zone", "a"), ("disk", "ssd")]);
        let cases: Vec<(&str, Vec<NodeSelectorTerm>, bool)> = vec![
            (
                "one matching term",
                vec![term(vec![req("zone", "In", &["a"])], vec![])],
                true,
            ),
            (
                "expressions are ANDed",
                vec![term(
                    vec![req("zone", "In", &["a"]), req("disk", "In", &["hdd"])],
                    vec![],
                )],
                false,
            ),
            (
                "terms are ORed",
                vec![
                    term(vec![req("zone", "In", &["b"])], vec![]),
                    term(vec![req("disk", "Exists", &[])], vec![]),
                ],
                true,
            ),
            (
                "an empty term matches nothing",
                vec![term(vec![], vec![])],
                false,
            ),
            ("no terms match nothing", vec![], false),
            (
                "matchFields on the name",
                vec![term(vec![], vec![req("metadata.name", "In", &["node-1"])])],
                true,
            ),
            (
                "matchFields on another name",
                vec![term(vec![], vec![req("metadata.name", "In", &["node-2"])])],
                false,
            ),
            (
                "matchFields NotIn",
                vec![term(
                    vec![],
                    vec![req("metadata.name", "NotIn", &["node-2"])],
                )],
                true,
            ),
            (
                "matchFields on an unknown field",
                vec![term(vec![], vec![req("spec.x", "In", &["node-1"])])],
                false,
            ),
            (
                "fields and expressions together",
                vec![term(
                    vec![req("zone", "In", &["a"])],
                    vec![req("metadata.name", "In", &["node-1"])],
                )],
                true,
            ),
        ];
        for (name, terms, want) in cases {
            assert_eq!(required_terms_match(&terms, "node-1", &l), want, "{name}");
        }
    }

    #[test]
    fn node_selector() {
        let l = labels(&[("zone", "a"), ("disk", "ssd")]);
        assert!(node_selector_matches(&labels(&[]), &l));
        assert!(node_selector_matches(&labels(&[("zone", "a")]), &l));
        assert!(!node_selector_matches(
            &labels(&[("zone", "a"), ("disk", "hdd")]),
            &l
        ));
        assert!(!node_selector_matches(&labels(&[("gpu", "")]), &l));
    }

    #[test]
    fn pinned_names() {
        let name_in = |v: &[&str]| req("metadata.name", "In", v);
        let set = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>());
        type Case = (
            &'static str,
            Option<Vec<NodeSelectorTerm>>,
            Option<BTreeSet<String>>,
        );
        let cases: Vec<Case> = vec![
            ("no affinity", None, None),
            (
                "daemonset pin",
                Some(vec![term(vec![], vec![name_in(&["node-3"])])]),
                set(&["node-3"]),
            ),
            (
                "union over terms",
                Some(vec![
                    term(vec![], vec![name_in(&["a"])]),
                    term(vec![], vec![name_in(&["b"])]),
                ]),
                set(&["a", "b"]),
            ),
            (
                "intersection within a term",
                Some(vec![term(
                    vec![],
                    vec![name_in(&["a", "b"]), name_in(&["b", "c"])],
                )]),
                set(&["b"]),
            ),
            (
                "a term without a pin frees everything",
                Some(vec![
                    term(vec![], vec![name_in(&["a"])]),
                    term(vec![req("zone", "Exists", &[])], vec![]),
                ]),
                None,
            ),
            (
                "contradiction",
                Some(vec![term(vec![], vec![name_in(&["a"]), name_in(&["b"])])]),
                set(&[]),
            ),
        ];
        for (name, terms, want) in cases {
            assert_eq!(pinned_node_names(terms.as_deref()), want, "{name}");
        }
    }
}
