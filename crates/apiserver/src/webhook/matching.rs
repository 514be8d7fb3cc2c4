//! Which webhooks a write calls: upstream's `predicates/rules` (operations, groups, versions,
//! resources and subresources, scope), the `matchPolicy: Equivalent` search over the other
//! resources that serve the same objects (`generic/webhook.go` `ShouldCallHook`), and the
//! namespace and object selectors (`predicates/namespace`, `predicates/object`).
//!
//! Everything here is a plain function over plain data; the dispatcher fetches the namespace's
//! labels and the equivalent resources.

use api::selector::LabelSelector;
use serde_json::{Map, Value};

use super::config::Rule;

/// A group, version and resource, as rules name them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

/// What the rules look at in a write.
pub(crate) struct Attributes<'a> {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'a str,
    /// The subresource written, empty for the main resource.
    pub subresource: &'a str,
    /// The object's namespace, empty for cluster-scoped objects.
    pub namespace: &'a str,
}

fn exact_or_wildcard(items: &[String], requested: &str) -> bool {
    items.iter().any(|i| i == "*" || i == requested)
}

fn is_namespaces(r: &Resource) -> bool {
    r.group.is_empty() && r.version == "v1" && r.resource == "namespaces"
}

/// Whether `rule` matches the write `a` made on `resource` (upstream's `rules.Matcher`).
pub(crate) fn rule_matches(rule: &Rule, a: &Attributes<'_>, resource: &Resource) -> bool {
    let scope = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespaces(resource) && !a.namespace.is_empty(),
        Some("Cluster") => is_namespaces(resource) || a.namespace.is_empty(),
        Some(_) => false,
    };
    let resources = rule.resources.iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == resource.resource) && (sub == "*" || sub == a.subresource)
    });
    scope
        && exact_or_wildcard(&rule.operations, a.operation)
        && exact_or_wildcard(&rule.api_groups, &resource.group)
        && exact_or_wildcard(&rule.api_versions, &resource.version)
        && resources
}

/// Which of `resources` the hook is called for: the first (the resource the client wrote) when a
/// rule matches it; otherwise, under `matchPolicy: Equivalent`, the first equivalent one a rule
/// matches, trying rules in order and, for each, the equivalents in order (as upstream).
pub(crate) fn matched_resource(
    rules: &[Rule],
    equivalent: bool,
    a: &Attributes<'_>,
    resources: &[Resource],
) -> Option<usize> {
    let requested = resources.first()?;
    if rules.iter().any(|r| rule_matches(r, a, requested)) {
        return Some(0);
    }
    if !equivalent {
        return None;
    }
    rules.iter().find_map(|rule| {
        resources
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, r)| *r != requested)
            .find(|(_, r)| rule_matches(rule, a, r))
            .map(|(i, _)| i)
    })
}

/// The `metadata.labels` of an object (none when it has none).
pub(crate) fn labels(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Whether the object selector selects the write: the new object's labels or the old one's
/// match (upstream's `MatchObjectSelector`; an absent object matches nothing).
pub(super) fn object_selected(
    selector: &LabelSelector,
    object: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    selector.is_empty()
        || [object, old]
            .into_iter()
            .flatten()
            .any(|o| selector.matches_map(&labels(o)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::config::hooks_of;
    use serde_json::json;

    fn res(group: &str, version: &str, resource: &str) -> Resource {
        Resource {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    fn rule(v: Value) -> Rule {
        serde_json::from_value(v).unwrap()
    }

    fn attrs<'a>(op: &'a str, sub: &'a str, ns: &'a str) -> Attributes<'a> {
        Attributes {
            operation: op,
            subresource: sub,
            namespace: ns,
        }
    }

    #[test]
    fn rules_match_as_upstreams_matcher() {
        let pods = res("", "v1", "pods");
        let all = |resources: Value| {
            rule(
                json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": resources}),
            )
        };
        // (rule, operation, subresource, namespace, resource, matches)
        let cases: Vec<(Rule, &str, &str, &str, &Resource, bool)> = vec![
            (all(json!(["pods"])), "CREATE", "", "default", &pods, true),
            (all(json!(["*"])), "UPDATE", "", "default", &pods, true),
            // `*` is every resource, not their subresources; `*/*` is both.
            (
                all(json!(["*"])),
                "UPDATE",
                "status",
                "default",
                &pods,
                false,
            ),
            (
                all(json!(["*/*"])),
                "UPDATE",
                "status",
                "default",
                &pods,
                true,
            ),
            (
                all(json!(["pods/status"])),
                "UPDATE",
                "status",
                "default",
                &pods,
                true,
            ),
            (
                all(json!(["pods/status"])),
                "UPDATE",
                "",
                "default",
                &pods,
                false,
            ),
            // Upstream's matcher lets a `*` subresource match the main resource too.
            (all(json!(["pods/*"])), "UPDATE", "", "default", &pods, true),
            (
                all(json!(["deployments"])),
                "CREATE",
                "",
                "default",
                &pods,
                false,
            ),
            (
                rule(
                    json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["pods"]}),
                ),
                "DELETE",
                "",
                "default",
                &pods,
                false,
            ),
            (
                rule(json!({"operations": ["CREATE"], "apiGroups": ["apps"],
                    "apiVersions": ["v1"], "resources": ["pods"]})),
                "CREATE",
                "",
                "default",
                &pods,
                false,
            ),
            (
                rule(
                    json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v2"],
                    "resources": ["*"]}),
                ),
                "CREATE",
                "",
                "default",
                &pods,
                false,
            ),
        ];
        for (i, (r, op, sub, ns, resource, want)) in cases.iter().enumerate() {
            assert_eq!(
                rule_matches(r, &attrs(op, sub, ns), resource),
                *want,
                "case {i}"
            );
        }
    }

    #[test]
    fn scope_counts_namespaces_as_cluster_scoped() {
        let namespaced = rule(json!({"operations": ["*"], "apiGroups": ["*"],
            "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}));
        let cluster = rule(json!({"operations": ["*"], "apiGroups": ["*"],
            "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}));
        let pods = res("", "v1", "pods");
        let namespaces = res("", "v1", "namespaces");
        let nodes = res("", "v1", "nodes");
        let a = attrs("CREATE", "", "default");
        assert!(rule_matches(&namespaced, &a, &pods));
        assert!(!rule_matches(&cluster, &a, &pods));
        // A Namespace's attributes carry its own name as namespace; it is still cluster-scoped.
        let a = attrs("CREATE", "", "team-a");
        assert!(!rule_matches(&namespaced, &a, &namespaces));
        assert!(rule_matches(&cluster, &a, &namespaces));
        let a = attrs("CREATE", "", "");
        assert!(rule_matches(&cluster, &a, &nodes));
        assert!(!rule_matches(&namespaced, &a, &nodes));
    }

    #[test]
    fn equivalent_policy_matches_the_same_objects_under_another_resource() {
        let config = |policy: &str| {
            json!({"metadata": {"name": "c"}, "webhooks": [{"name": "h",
                "clientConfig": {"url": "https://127.0.0.1/"}, "matchPolicy": policy,
                "rules": [{"operations": ["CREATE"], "apiGroups": ["autoscaling"],
                    "apiVersions": ["v2"], "resources": ["horizontalpodautoscalers"]}]}]})
        };
        let resources = [
            res("autoscaling", "v1", "horizontalpodautoscalers"),
            res("autoscaling", "v2", "horizontalpodautoscalers"),
        ];
        let a = attrs("CREATE", "", "default");
        let exact = &hooks_of(&config("Exact"))[0];
        let equivalent = &hooks_of(&config("Equivalent"))[0];
        assert_eq!(
            matched_resource(&exact.rules, exact.equivalent, &a, &resources),
            None
        );
        assert_eq!(
            matched_resource(&equivalent.rules, equivalent.equivalent, &a, &resources),
            Some(1)
        );
        // The written resource itself is preferred.
        let reversed = [resources[1].clone(), resources[0].clone()];
        assert_eq!(
            matched_resource(&exact.rules, exact.equivalent, &a, &reversed),
            Some(0)
        );
        assert_eq!(
            matched_resource(&equivalent.rules, equivalent.equivalent, &a, &reversed),
            Some(0)
        );
    }

    #[test]
    fn object_selector_looks_at_the_new_and_the_old_object() {
        let selector = LabelSelector::parse("team=a").unwrap();
        let a = json!({"metadata": {"labels": {"team": "a"}}});
        let b = json!({"metadata": {"labels": {"team": "b"}}});
        let bare = json!({"metadata": {}});
        assert!(object_selected(&selector, Some(&a), None));
        assert!(!object_selected(&selector, Some(&b), None));
        assert!(object_selected(&selector, Some(&b), Some(&a)));
        assert!(object_selected(&selector, None, Some(&a)));
        assert!(!object_selected(&selector, Some(&bare), None));
        assert!(!object_selected(&selector, None, None));
        assert!(object_selected(&LabelSelector::default(), None, None));
    }
}
