//! rbac.authorization.k8s.io/v1: role references and subjects (upstream's
//! `ValidateRoleBinding`, `ValidateClusterRoleBinding` and their updates). Roles are stored as
//! given; nothing is authorized by them (every bearer of the cluster token is an administrator).

use super::{field, items, meta, names, pod, str_field};
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

/// A Role or ClusterRole: names may be any path segment.
pub fn validate_role(obj: &Value) -> Vec<FieldError> {
    let namespaced = field(obj, "metadata")
        .and_then(|m| str_field(m, "namespace"))
        .is_some_and(|n| !n.is_empty());
    meta::validate_object_meta(obj, namespaced, names::path_segment_name)
}
