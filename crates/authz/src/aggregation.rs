//! ClusterRole aggregation: the rules of a ClusterRole with an `aggregationRule` are those of the
//! ClusterRoles its selectors match, as upstream's `pkg/controller/clusterroleaggregation`
//! computes them (selectors in order, matching roles by name, each distinct rule once, the role
//! itself skipped).

use api::selector::{LabelSelector, SelectorError};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};

/// The rules `role` aggregates from `all` (the cluster's ClusterRoles); `None` when it has no
/// aggregation rule, an error when one of its selectors is invalid.
pub fn aggregated_rules(
    role: &ClusterRole,
    all: &[ClusterRole],
) -> Option<Result<Vec<PolicyRule>, SelectorError>> {
    let rule = role.aggregation_rule.as_ref()?;
    let name = role.metadata.name.as_deref().unwrap_or_default();
    let mut sorted: Vec<&ClusterRole> = all.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in rule.cluster_role_selectors.iter().flatten() {
        let selector = match LabelSelector::from_label_selector(selector) {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        for other in &sorted {
            if other.metadata.name.as_deref().unwrap_or_default() == name
                || !selector.matches_labels(other.metadata.labels.as_ref())
            {
                continue;
            }
            for r in other.rules.iter().flatten() {
                if !rules.iter().any(|have| same_rule(have, r)) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Some(Ok(rules))
}

/// Upstream's semantic equality of rules: an empty list is the same as none.
pub fn same_rule(a: &PolicyRule, b: &PolicyRule) -> bool {
    fn l(v: &Option<Vec<String>>) -> &[String] {
        v.as_deref().unwrap_or_default()
    }
    a.verbs == b.verbs
        && l(&a.api_groups) == l(&b.api_groups)
        && l(&a.resources) == l(&b.resources)
        && l(&a.resource_names) == l(&b.resource_names)
        && l(&a.non_resource_urls) == l(&b.non_resource_urls)
}

/// Whether two rule lists are semantically equal (the controller writes only when they differ).
pub fn same_rules(a: &[PolicyRule], b: &[PolicyRule]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_rule(x, y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::rbac::v1::AggregationRule,
        apimachinery::pkg::apis::meta::v1::{
            LabelSelector as Selector, LabelSelectorRequirement, ObjectMeta,
        },
    };
    use std::collections::BTreeMap;

    fn rule(verb: &str, res: &str) -> PolicyRule {
        PolicyRule {
            verbs: vec![verb.into()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![res.into()]),
            ..Default::default()
        }
    }

    fn role(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        }
    }

    fn selecting(mut r: ClusterRole, selectors: Vec<Selector>) -> ClusterRole {
        r.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(selectors),
        });
        r
    }

    fn match_labels(k: &str, v: &str) -> Selector {
        Selector {
            match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
            ..Default::default()
        }
    }

    // As upstream's TestSyncClusterRole: selectors in order, roles by name, duplicates once, the
    // aggregating role itself never a source.
    #[test]
    fn unions_matching_roles_rules_in_upstreams_order() {
        let agg = selecting(
            role("aggregate", &[("foo", "bar")], vec![rule("stale", "x")]),
            vec![
                match_labels("foo", "bar"),
                Selector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: "tier".into(),
                        operator: "In".into(),
                        values: Some(vec!["b".into()]),
                    }]),
                    ..Default::default()
                },
            ],
        );
        let all = vec![
            agg.clone(),
            role(
                "z-one",
                &[("foo", "bar")],
                vec![rule("get", "pods"), rule("list", "pods")],
            ),
            role(
                "a-two",
                &[("foo", "bar")],
                vec![rule("list", "pods"), rule("get", "nodes")],
            ),
            role(
                "b-three",
                &[("tier", "b")],
                vec![rule("get", "pods"), rule("watch", "pods")],
            ),
            role("unmatched", &[("foo", "baz")], vec![rule("delete", "pods")]),
        ];
        assert_eq!(
            aggregated_rules(&agg, &all).unwrap().unwrap(),
            vec![
                rule("list", "pods"),
                rule("get", "nodes"),
                rule("get", "pods"),
                rule("watch", "pods"),
            ]
        );
        assert!(aggregated_rules(&all[1], &all).is_none());
    }

    #[test]
    fn empty_and_missing_lists_are_the_same_rule() {
        let a = PolicyRule {
            verbs: vec!["get".into()],
            resource_names: Some(vec![]),
            ..Default::default()
        };
        let b = PolicyRule {
            verbs: vec!["get".into()],
            ..Default::default()
        };
        assert!(same_rule(&a, &b));
        assert!(!same_rules(&[a], &[]));
    }
}
