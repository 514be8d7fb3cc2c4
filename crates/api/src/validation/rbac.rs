//! rbac.authorization.k8s.io/v1 (upstream's `pkg/apis/rbac/validation/validation.go`): the
//! rules of Roles and ClusterRoles (`ValidatePolicyRule`), role references and subjects
//! (`ValidateRoleBinding`, `ValidateClusterRoleBinding` and their updates).

use super::{field, items, meta, names, pod, repr, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

fn binding(obj: &Value, namespaced: bool, kinds: &[&str]) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, namespaced, names::path_segment_name);
    let role_ref = field(obj, "roleRef").unwrap_or(&Value::Null);
    let path = Path::new("roleRef");
    if str_field(role_ref, "apiGroup").unwrap_or_default() != "rbac.authorization.k8s.io" {
        errs.push(FieldError::not_supported(
            path.child("apiGroup"),
            Value::from(str_field(role_ref, "apiGroup").unwrap_or_default()),
            &["rbac.authorization.k8s.io"],
        ));
    }
    errs.extend(pod::one_of(
        path.child("kind"),
        str_field(role_ref, "kind").unwrap_or_default(),
        kinds,
    ));
    if str_field(role_ref, "name").is_none_or(str::is_empty) {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    for (i, subject) in items(obj, "subjects").iter().enumerate() {
        let p = Path::new("subjects").index(i);
        errs.extend(pod::one_of(
            p.child("kind"),
            str_field(subject, "kind").unwrap_or_default(),
            &["ServiceAccount", "User", "Group"],
        ));
        if str_field(subject, "name").is_none_or(str::is_empty) {
            errs.push(FieldError::required(p.child("name"), ""));
        }
    }
    errs
}

/// A RoleBinding: refers to a Role or a ClusterRole.
pub fn validate_role_binding(obj: &Value) -> Vec<FieldError> {
    binding(obj, true, &["Role", "ClusterRole"])
}

/// A ClusterRoleBinding: refers to a ClusterRole.
pub fn validate_cluster_role_binding(obj: &Value) -> Vec<FieldError> {
    binding(obj, false, &["ClusterRole"])
}

/// A binding's role reference never changes.
pub fn validate_binding_update(new: &Value, old: &Value) -> Vec<FieldError> {
    if field(new, "roleRef") == field(old, "roleRef") {
        return Vec::new();
    }
    vec![FieldError::invalid(
        "roleRef",
        field(new, "roleRef").cloned().unwrap_or(Value::Null),
        "cannot change roleRef",
    )]
}

/// A Role or ClusterRole: names may be any path segment, and each rule must say what it grants
/// (upstream refuses a rule without verbs, which would otherwise be stored and grant nothing).
pub fn validate_role(obj: &Value) -> Vec<FieldError> {
    let namespaced = field(obj, "metadata")
        .and_then(|m| str_field(m, "namespace"))
        .is_some_and(|n| !n.is_empty());
    let mut errs = meta::validate_object_meta(obj, namespaced, names::path_segment_name);
    for (i, rule) in items(obj, "rules").iter().enumerate() {
        errs.extend(validate_policy_rule(
            rule,
            namespaced,
            &Path::new("rules").index(i),
        ));
    }
    errs
}

/// Upstream's `ValidatePolicyRule`: verbs always; a non-resource rule only in a ClusterRole and
/// without resources; a resource rule with at least one API group and resource.
fn validate_policy_rule(rule: &Value, namespaced: bool, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let has = |key: &str| !items(rule, key).is_empty();
    if !has("verbs") {
        errs.push(FieldError::required(
            path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    if has("nonResourceURLs") {
        let urls = repr::string_slice(field(rule, "nonResourceURLs"));
        if namespaced {
            errs.push(repr::invalid_repr(
                &path.child("nonResourceURLs"),
                urls.clone(),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if has("apiGroups") || has("resources") || has("resourceNames") {
            errs.push(repr::invalid_repr(
                &path.child("nonResourceURLs"),
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if !has("apiGroups") {
        errs.push(FieldError::required(
            path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if !has("resources") {
        errs.push(FieldError::required(
            path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(obj: &Value) -> Vec<String> {
        validate_role(obj).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rules_say_what_they_grant_as_upstream_requires() {
        let role = |namespace: &str, rule: Value| json!({"metadata": {"name": "r", "namespace": namespace}, "rules": [rule]});
        let cases = [
            (
                role(
                    "a",
                    json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}),
                ),
                vec![],
            ),
            (
                role("a", json!({"apiGroups": [""], "resources": ["pods"]})),
                vec!["rules[0].verbs: Required value: verbs must contain at least one value"],
            ),
            (
                role("a", json!({"verbs": []})),
                vec![
                    "rules[0].verbs: Required value: verbs must contain at least one value",
                    "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                    "rules[0].resources: Required value: resource rules must supply at least one resource",
                ],
            ),
            (
                role(
                    "",
                    json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]}),
                ),
                vec![],
            ),
            (
                role(
                    "a",
                    json!({"nonResourceURLs": ["/healthz"], "resources": ["pods"], "verbs": ["get"]}),
                ),
                vec![
                    "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
                    "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: rules cannot apply to both regular resources and non-resource URLs",
                ],
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(messages(&obj), want, "{obj}");
        }
    }
}
