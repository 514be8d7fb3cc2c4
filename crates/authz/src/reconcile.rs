//! Reconciling a stored RBAC object with its bootstrap version, as upstream's
//! `component-helpers/auth/rbac/reconciliation` does at API server start (`RemoveExtra*` off):
//! missing objects are created; existing ones gain missing labels, annotations, rules,
//! aggregation selectors and subjects; a binding whose `roleRef` changed is recreated; an
//! object annotated `rbac.authorization.kubernetes.io/autoupdate: "false"` is left alone.
//!
//! Works on the objects' JSON, as the server stores them, so that fields this crate's types do
//! not know survive.

use crate::{bootstrap::AUTOUPDATE_ANNOTATION, escalation::covers};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Map, Value};

/// What to do with one bootstrap object.
#[derive(Clone, Debug, PartialEq)]
pub enum Reconciliation {
    /// Nothing: it is as it should be, or protected by its annotation.
    None,
    /// Create it (it is missing).
    Create(Value),
    /// Write this updated object.
    Update(Value),
    /// Delete the existing binding and create this one (its `roleRef` changed, which is
    /// immutable).
    Recreate(Value),
}

fn protected(existing: &Value) -> bool {
    existing
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(AUTOUPDATE_ANNOTATION))
        .and_then(Value::as_str)
        == Some("false")
}

/// Upstream's `merge(expected, existing)` of labels or annotations: the existing values win.
fn merge_map(target: &mut Value, expected: &Value, field: &str) {
    let Some(exp) = expected
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
    else {
        return;
    };
    let Some(meta) = target.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let slot = meta
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    if let Some(map) = slot.as_object_mut() {
        for (k, v) in exp {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

fn rules_of(v: &Value) -> Vec<PolicyRule> {
    v.get("rules")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default()
}

fn list_of<'v>(v: &'v Value, pointer: &str) -> &'v [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The reconciliation of a (Cluster)Role: `existing` as stored (if any), `expected` the
/// bootstrap object as JSON.
pub fn reconcile_role(existing: Option<&Value>, expected: &Value) -> Reconciliation {
    let Some(existing) = existing else {
        return Reconciliation::Create(expected.clone());
    };
    if protected(existing) {
        return Reconciliation::None;
    }
    let mut result = existing.clone();
    merge_map(&mut result, expected, "annotations");
    merge_map(&mut result, expected, "labels");
    let (_, missing) = covers(&rules_of(existing), &rules_of(expected));
    if !missing.is_empty()
        && let Some(obj) = result.as_object_mut()
    {
        let rules = obj
            .entry("rules")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !rules.is_array() {
            *rules = Value::Array(Vec::new());
        }
        if let Some(list) = rules.as_array_mut() {
            list.extend(missing.iter().filter_map(|r| serde_json::to_value(r).ok()));
        }
    }
    let expected_agg = expected.get("aggregationRule").filter(|v| !v.is_null());
    let existing_agg = existing.get("aggregationRule").filter(|v| !v.is_null());
    match (expected_agg, existing_agg) {
        (None, Some(_)) => {
            if let Some(obj) = result.as_object_mut() {
                obj.remove("aggregationRule");
            }
        }
        (Some(_), _) => {
            let have = list_of(existing, "/aggregationRule/clusterRoleSelectors");
            let missing: Vec<Value> = list_of(expected, "/aggregationRule/clusterRoleSelectors")
                .iter()
                .filter(|s| !have.contains(s))
                .cloned()
                .collect();
            if !missing.is_empty()
                && let Some(obj) = result.as_object_mut()
            {
                let mut all = have.to_vec();
                all.extend(missing);
                obj.insert(
                    "aggregationRule".into(),
                    serde_json::json!({"clusterRoleSelectors": all}),
                );
            }
        }
        (None, None) => {}
    }
    if &result == existing {
        Reconciliation::None
    } else {
        Reconciliation::Update(result)
    }
}

/// The `roleRef` compared as upstream's struct equality does (absent fields as empty).
fn role_ref(v: &Value) -> (String, String, String) {
    let f = |k: &str| {
        v.pointer(&format!("/roleRef/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (f("apiGroup"), f("kind"), f("name"))
}

/// A subject compared as upstream's struct equality does.
fn subject_key(v: &Value) -> [String; 4] {
    ["kind", "apiGroup", "name", "namespace"].map(|k| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    })
}

/// The reconciliation of a (Cluster)RoleBinding.
pub fn reconcile_binding(existing: Option<&Value>, expected: &Value) -> Reconciliation {
    let Some(existing) = existing else {
        return Reconciliation::Create(expected.clone());
    };
    if protected(existing) {
        return Reconciliation::None;
    }
    if role_ref(existing) != role_ref(expected) {
        return Reconciliation::Recreate(expected.clone());
    }
    let mut result = existing.clone();
    merge_map(&mut result, expected, "annotations");
    merge_map(&mut result, expected, "labels");
    let have: Vec<[String; 4]> = list_of(existing, "/subjects")
        .iter()
        .map(subject_key)
        .collect();
    let mut missing: Vec<Value> = Vec::new();
    for s in list_of(expected, "/subjects") {
        let key = subject_key(s);
        if !have.contains(&key) && !missing.iter().any(|m| subject_key(m) == key) {
            missing.push(s.clone());
        }
    }
    if !missing.is_empty()
        && let Some(obj) = result.as_object_mut()
    {
        let mut all = list_of(existing, "/subjects").to_vec();
        all.extend(missing);
        obj.insert("subjects".into(), Value::Array(all));
    }
    if &result == existing {
        Reconciliation::None
    } else {
        Reconciliation::Update(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expected_role() -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
        })
    }

    #[test]
    fn missing_objects_are_created() {
        assert_eq!(
            reconcile_role(None, &expected_role()),
            Reconciliation::Create(expected_role())
        );
    }

    #[test]
    fn missing_rules_and_metadata_are_added_and_extras_kept() {
        let existing = json!({
            "metadata": {"name": "r", "labels": {"mine": "x"}},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
            ]
        });
        let Reconciliation::Update(got) = reconcile_role(Some(&existing), &expected_role()) else {
            panic!("expected an update");
        };
        assert_eq!(
            got["rules"],
            json!([
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
            ])
        );
        assert_eq!(
            got["metadata"]["labels"],
            json!({"mine": "x", "kubernetes.io/bootstrapping": "rbac-defaults"})
        );
        assert_eq!(
            got["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
        // Once reconciled, nothing more to do.
        assert_eq!(
            reconcile_role(Some(&got), &expected_role()),
            Reconciliation::None
        );
    }

    #[test]
    fn autoupdate_false_protects_the_object() {
        let existing = json!({
            "metadata": {"name": "r", "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}},
            "rules": []
        });
        assert_eq!(
            reconcile_role(Some(&existing), &expected_role()),
            Reconciliation::None
        );
    }

    #[test]
    fn aggregation_selectors_are_added() {
        let expected = json!({"metadata": {"name": "admin"}, "rules": [],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "true"}}]}});
        let existing = json!({"metadata": {"name": "admin"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"mine": "true"}}]}});
        let Reconciliation::Update(got) = reconcile_role(Some(&existing), &expected) else {
            panic!("expected an update");
        };
        assert_eq!(
            got["aggregationRule"]["clusterRoleSelectors"],
            json!([{"matchLabels": {"mine": "true"}}, {"matchLabels": {"a": "true"}}])
        );
        assert_eq!(got["rules"], existing["rules"]);
    }

    #[test]
    fn bindings_gain_subjects_or_are_recreated_for_a_new_role_ref() {
        let expected = json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "g"}]});
        let existing = json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "u"}]});
        let Reconciliation::Update(got) = reconcile_binding(Some(&existing), &expected) else {
            panic!("expected an update");
        };
        assert_eq!(got["subjects"].as_array().unwrap().len(), 2);
        let mut moved = existing.clone();
        moved["roleRef"]["name"] = json!("other");
        assert_eq!(
            reconcile_binding(Some(&moved), &expected),
            Reconciliation::Recreate(expected.clone())
        );
    }
}
