//! scheduling.k8s.io/v1 defaults.

use serde_json::{Value, json};

use super::{default_ptr, on_root};

/// A PriorityClass: pods of it preempt lower priorities.
pub fn priority_class(obj: &mut Value) {
    on_root(obj, |root| {
        default_ptr(root, "preemptionPolicy", json!("PreemptLowerPriority"));
    })
}
