//! scheduling.k8s.io/v1 PriorityClasses (upstream's `ValidatePriorityClass`).

use super::{field, meta, names, pod, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// The largest priority a user-defined class may have.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// The classes every cluster has: (name, value).
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// A PriorityClass: `system-` names are reserved for the system classes; user classes stay at
/// or below 1,000,000,000.
pub fn validate_priority_class(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::name_is_dns_subdomain);
    let name = field(obj, "metadata")
        .and_then(|m| str_field(m, "name"))
        .unwrap_or_default();
    let value = field(obj, "value").and_then(Value::as_i64).unwrap_or(0);
    if name.starts_with("system-") {
        let known = SYSTEM_PRIORITY_CLASSES
            .iter()
            .any(|(n, v)| *n == name && *v == value);
        if !known {
            errs.push(FieldError::forbidden(
                Path::new("metadata").child("name"),
                format!(
                    "priority class names with 'system-' prefix are reserved for system use only. error: {name:?} is not a known system priority class"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(FieldError::forbidden(
            "value",
            format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    if let Some(policy) = str_field(obj, "preemptionPolicy") {
        errs.extend(pod::one_of(
            Path::new("preemptionPolicy"),
            policy,
            &["Never", "PreemptLowerPriority"],
        ));
    }
    errs
}

/// A PriorityClass's value and preemption policy are fixed.
pub fn validate_priority_class_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if field(new, "value") != field(old, "value") {
        errs.push(FieldError::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    if field(new, "preemptionPolicy") != field(old, "preemptionPolicy") {
        errs.push(FieldError::invalid(
            "preemptionPolicy",
            field(new, "preemptionPolicy")
                .cloned()
                .unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}
