//! Privilege-escalation prevention on writes of Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings, as upstream's RBAC `policybased` storages do it: a user may only grant
//! what the user holds, unless the user may `escalate` the role or `bind` the referenced role;
//! members of `system:masters` may write anything. The decisions are `authz::escalation`'s;
//! this turns a write into its question and a refusal into upstream's error.

use crate::{
    error::{ApiError, ApiResult},
    plugins::{Operation, Review},
    state::ApiServer,
};
use authz::{
    escalation::{self, Refusal, RoleWrite},
    rbac::RoleRefError,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::{Value, json};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Refuses a create or update of an RBAC object that would grant its writer more than the
/// writer holds.
pub(crate) fn check(server: &ApiServer, review: &Review<'_>, obj: &Value) -> ApiResult<()> {
    let kind = review.kind;
    if kind.group != RBAC_GROUP
        || review.operation == Operation::Delete
        || review.subresource.is_some()
        || escalation::escalation_allowed(review.user)
    {
        return Ok(());
    }
    if let Some(old) = review.old
        && only_gc_fields_changed(obj, old)
    {
        return Ok(());
    }
    let namespace = review.namespace.unwrap_or_default();
    let name = crate::object::name(obj);
    let policy = server.current_rbac_policy();
    let authorize = |a: &authz::Attributes| server.authorize(a);
    let outcome = match kind.kind.as_str() {
        "Role" | "ClusterRole" => {
            let rules: Vec<PolicyRule> = obj
                .get("rules")
                .and_then(|r| serde_json::from_value(r.clone()).ok())
                .unwrap_or_default();
            let aggregation = kind.kind == "ClusterRole"
                && (has_aggregation_rule(obj) || review.old.is_some_and(has_aggregation_rule));
            // Upstream asks for `escalate` with the name in the request's URL: none on create.
            let request_name = match review.operation {
                Operation::Create => "",
                _ => review.name,
            };
            escalation::check_role_write(
                &authorize,
                &policy,
                review.user,
                &RoleWrite {
                    resource: &kind.plural,
                    namespace,
                    request_name,
                    rules: &rules,
                    aggregation,
                },
            )
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role_ref: RoleRef = obj
                .get("roleRef")
                .and_then(|r| serde_json::from_value(r.clone()).ok())
                .unwrap_or_default();
            escalation::check_binding_write(&authorize, &policy, review.user, &role_ref, namespace)
        }
        _ => Ok(()),
    };
    outcome.map_err(|refusal| match refusal {
        // Upstream's `NewForbidden(groupResource, name, err)`.
        Refusal::Forbidden(msg) => ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "{} {} is forbidden: {msg}",
                kind.group_resource(),
                authz::quote(name)
            ),
            details: Some(json!({"name": name, "group": kind.group, "kind": kind.plural})),
        },
        Refusal::RoleNotFound(e) => {
            let (role_kind, role_name) = match &e {
                RoleRefError::RoleNotFound(n) => ("Role", n),
                RoleRefError::ClusterRoleNotFound(n) | RoleRefError::UnsupportedKind(n) => {
                    ("ClusterRole", n)
                }
            };
            match server.registry().find_kind(RBAC_GROUP, role_kind) {
                Some(def) => ApiError::not_found(&def, role_name),
                None => ApiError::internal(e.registry_message()),
            }
        }
        Refusal::Unsupported(e) => ApiError::internal(e.to_string()),
    })
}

fn has_aggregation_rule(obj: &Value) -> bool {
    obj.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty())
}

/// Upstream's `IsOnlyMutatingGCFields`: an update that only changes owner references or
/// finalizers (what the garbage collector writes) is not checked.
fn only_gc_fields_changed(new: &Value, old: &Value) -> bool {
    let mut copied = new.clone();
    let Some(meta) = copied.get_mut("metadata").and_then(Value::as_object_mut) else {
        return false;
    };
    for field in ["ownerReferences", "finalizers", "selfLink", "managedFields"] {
        match old.pointer(&format!("/metadata/{field}")) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    crate::admission::same_object(&copied, old)
}

/// RBAC's escalation check, which upstream makes in its RBAC storage, as a validating plugin.
pub(crate) struct RbacEscalation;

#[async_trait::async_trait]
impl crate::plugins::Plugin for RbacEscalation {
    fn name(&self) -> &'static str {
        "RBACEscalation"
    }

    fn handles(&self, _review: &crate::plugins::Review<'_>) -> bool {
        // RBAC kinds only; `check` looks at the kind itself.
        true
    }

    async fn validate(
        &self,
        server: &ApiServer,
        review: &crate::plugins::Review<'_>,
        obj: &Value,
    ) -> ApiResult<Vec<String>> {
        check(server, review, obj).map(|()| Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owner_references_and_finalizers_changing_skips_the_check() {
        let old = json!({
            "metadata": {"name": "r", "resourceVersion": "5"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
        });
        let mut gc = old.clone();
        gc["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}]);
        gc["metadata"]["finalizers"] = json!(["example.com/f"]);
        assert!(only_gc_fields_changed(&gc, &old));
        let mut more = gc.clone();
        more["rules"][0]["verbs"] = json!(["get", "delete"]);
        assert!(!only_gc_fields_changed(&more, &old));
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(!only_gc_fields_changed(&labelled, &old));
    }
}
