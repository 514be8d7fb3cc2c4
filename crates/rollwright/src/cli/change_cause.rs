//! Change causes without `--record` (upstream #40422): every rollwright command that changes a
//! pod template says what it changed in `kubernetes.io/change-cause`, in the same write, so
//! `rollout history` explains each revision. The controllers copy the annotation onto the
//! revision they make (ReplicaSet, ControllerRevision).
//!
//! `scale`, `pause` and `resume` do not write it: they make no revision, and the controllers
//! would copy their cause onto the current revision, hiding what made it.

use super::rollout::model::CHANGE_CAUSE;
use serde_json::{Value, json};

/// The cause of a change described as `what`: `set image web=nginx:1.28 by rollwright`.
pub fn cause(what: &str) -> String {
    format!("{what} by rollwright")
}

/// `patch` (a merge or strategic merge patch) also setting the change cause.
pub fn with_cause(mut patch: Value, cause: &str) -> Value {
    if !patch.is_object() {
        patch = json!({});
    }
    let meta = patch
        .as_object_mut()
        .map(|p| p.entry("metadata").or_insert_with(|| json!({})));
    if let Some(Value::Object(meta)) = meta {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Value::Object(a) = annotations {
            a.insert(CHANGE_CAUSE.into(), Value::String(cause.to_string()));
        }
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_rides_along_with_the_patch() {
        let patch = with_cause(
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"paused": true}}),
            &cause("set image web=nginx:1.28"),
        );
        assert_eq!(
            patch,
            json!({"metadata": {"labels": {"a": "b"}, "annotations": {
                "kubernetes.io/change-cause": "set image web=nginx:1.28 by rollwright"}},
                "spec": {"paused": true}})
        );
        assert_eq!(
            with_cause(json!({}), "x"),
            json!({"metadata": {"annotations": {"kubernetes.io/change-cause": "x"}}})
        );
    }
}
