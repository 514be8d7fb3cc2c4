//! Validation: the 422 `Invalid` checks upstream's `pkg/apis/*/validation` makes, over stored JSON.
//!
//! Objects are validated after defaulting (see [`crate::defaults`]), as upstream does, so fields
//! that defaulting always fills are only checked when present. Messages, reasons and field paths
//! are upstream's (`spec.template.spec.containers[0].image: Required value`), because kubectl,
//! Helm and users match on them. Kinds this module does not know pass without errors.
//!
//! Submodules: `names` (name and label syntax), `meta` (object metadata), `label_selector`
//! (selector syntax and matching), `pod` (pod specs and pod updates), `apps` (workloads),
//! `core_kinds` (Namespace, Node, Event, PersistentVolumeClaim, Lease) and `repr` (Go-style rendering
//! of bad values in messages).

pub mod admissionregistration;
pub mod apiregistration;
pub mod apps;
pub mod batch;
pub mod config;
pub mod core_kinds;
mod label_selector;
pub mod meta;
mod names;
pub mod node;
pub mod pod;
pub mod policy;
pub mod quota;
pub mod rbac;
mod repr;
pub mod scheduling;
pub mod service;
pub mod storage;

/// Upstream's `IsDNS1123Subdomain`, for other crates' validation (the audit policy's groups).
pub use names::dns1123_subdomain;

use crate::field::{FieldError, Path};
use serde_json::{Map, Value};

/// Checks an object about to be created as the registry entry of `group`/`kind` would (tests
/// only: the API server calls each kind's functions through its registry entry).
#[cfg(test)]
pub(crate) fn validate_create(group: &str, kind: &str, obj: &Value) -> Vec<FieldError> {
    match (group, kind) {
        ("", "Pod") => pod::validate_pod(obj),
        ("", "Node") => core_kinds::validate_node(obj),
        ("", "Namespace") => core_kinds::validate_namespace(obj),
        ("", "Event") => core_kinds::validate_event(obj),
        ("", "PersistentVolumeClaim") => core_kinds::validate_persistent_volume_claim(obj),
        ("apps", "Deployment") => apps::validate_deployment(obj),
        ("apps", "ReplicaSet") => apps::validate_replica_set(obj),
        ("apps", "DaemonSet") => apps::validate_daemon_set(obj),
        ("apps", "StatefulSet") => apps::validate_stateful_set(obj),
        ("apps", "ControllerRevision") => apps::validate_controller_revision(obj),
        ("coordination.k8s.io", "Lease") => core_kinds::validate_lease(obj),
        ("", "PersistentVolume") => storage::validate_persistent_volume(obj),
        ("storage.k8s.io", "StorageClass") => storage::validate_storage_class(obj),
        _ => Vec::new(),
    }
}

/// Checks an update as the registry entry of `group`/`kind` would (tests only).
#[cfg(test)]
pub(crate) fn validate_update(
    group: &str,
    kind: &str,
    new: &Value,
    old: &Value,
) -> Vec<FieldError> {
    let mut errs = validate_create(group, kind, new);
    match (group, kind) {
        ("", "Pod") => errs.extend(pod::validate_pod_update(new, old)),
        ("", "PersistentVolumeClaim") => errs.extend(
            core_kinds::validate_persistent_volume_claim_update(new, old),
        ),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => {
            errs.extend(apps::validate_selector_update(new, old))
        }
        ("apps", "StatefulSet") => errs.extend(apps::validate_stateful_set_update(new, old)),
        ("apps", "ControllerRevision") => {
            errs.extend(apps::validate_controller_revision_update(new, old))
        }
        ("", "PersistentVolume") => {
            errs.extend(storage::validate_persistent_volume_update(new, old))
        }
        ("storage.k8s.io", "StorageClass") => {
            errs.extend(storage::validate_storage_class_update(new, old))
        }
        _ => {}
    }
    errs
}

/// The errors as upstream prints them, for the submodules' tests.
#[cfg(test)]
fn messages(errs: Vec<FieldError>) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

// ---- JSON accessors shared by the submodules ----

/// A present, non-null field.
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// A string field.
fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    field(v, key).and_then(Value::as_str)
}

/// The elements of an array field, empty when absent.
fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    field(v, key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// An integer field; a value of another type is reported (upstream would fail to decode it).
fn int_field(errs: &mut Vec<FieldError>, v: &Value, key: &str, path: &Path) -> Option<i64> {
    let x = field(v, key)?;
    let n = x.as_i64();
    if n.is_none() {
        errs.push(FieldError::invalid(
            path.child(key),
            x.clone(),
            "must be an integer",
        ));
    }
    n
}

/// An integer field that may not be negative (upstream's `ValidateNonnegativeField`).
fn nonnegative(errs: &mut Vec<FieldError>, v: &Value, key: &str, path: &Path) -> Option<i64> {
    let n = int_field(errs, v, key, path)?;
    if n < 0 {
        errs.push(FieldError::invalid(
            path.child(key),
            Value::from(n),
            "must be greater than or equal to 0",
        ));
    }
    Some(n)
}

/// A value with Go's zero values removed (nulls, empty strings, `false`, empty lists), so that
/// "unchanged" means what upstream's semantic equality on typed objects means.
fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, x) in map {
                let x = normalize(x);
                let zero = match &x {
                    Value::Null | Value::Bool(false) => true,
                    Value::String(s) => s.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                if !zero {
                    out.insert(k.clone(), x);
                }
            }
            Value::Object(out)
        }
        Value::Array(list) => Value::Array(list.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_kinds_pass() {
        assert!(validate_create("", "ConfigMap", &json!({})).is_empty());
        assert!(validate_update("batch", "Job", &json!({}), &json!({"x": 1})).is_empty());
    }

    #[test]
    fn normalize_drops_go_zero_values() {
        assert_eq!(
            normalize(
                &json!({"a": null, "b": "", "c": false, "d": [], "e": {}, "f": 0, "g": [{"h": ""}]})
            ),
            json!({"e": {}, "f": 0, "g": [{}]})
        );
    }

    #[test]
    fn nonnegative_reports_negatives_and_wrong_types() {
        let mut errs = Vec::new();
        assert_eq!(
            nonnegative(&mut errs, &json!({"r": -1}), "r", &Path::new("spec")),
            Some(-1)
        );
        assert_eq!(
            nonnegative(&mut errs, &json!({"r": "x"}), "r", &Path::new("spec")),
            None
        );
        let got: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            vec![
                "spec.r: Invalid value: -1: must be greater than or equal to 0",
                "spec.r: Invalid value: \"x\": must be an integer",
            ]
        );
    }
}
