//! Ephemeral containers, as upstream's `validateEphemeralContainers` and
//! `ValidatePodEphemeralContainersUpdate` check them (v1.28): what `kubectl debug` adds through
//! `pods/ephemeralcontainers`. They are never set on create, their names are unique among all of
//! the pod's containers, they name an existing target, they hold no ports, probes, lifecycle or
//! resources, and once added they stay as they are.

use super::super::{field, items, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;
use std::collections::HashSet;

/// Fields an ephemeral container may not set (upstream's `allowedEphemeralContainerFields`,
/// those marked false), with their names as the error path has them.
const NOT_ALLOWED: [&str; 7] = [
    "ports",
    "resources",
    "resizePolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];

/// Errors of `spec.ephemeralContainers` (at `path`) beside the pod's other containers.
pub(super) fn validate(spec: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ephemeral = items(spec, "ephemeralContainers");
    if ephemeral.is_empty() {
        return errs;
    }
    let others: HashSet<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|key| items(spec, key))
        .filter_map(|c| str_field(c, "name"))
        .collect();
    let mut all = others.clone();
    for (i, c) in ephemeral.iter().enumerate() {
        let p = path.index(i);
        match str_field(c, "name").unwrap_or_default() {
            "" => errs.push(FieldError::required(p.child("name"), "")),
            name => {
                if !all.insert(name) {
                    errs.push(FieldError::duplicate(p.child("name"), Value::from(name)));
                }
            }
        }
        if str_field(c, "image").unwrap_or_default().is_empty() {
            errs.push(FieldError::required(p.child("image"), ""));
        }
        if let Some(target) = str_field(c, "targetContainerName")
            && !target.is_empty()
            && !others.contains(target)
        {
            errs.push(FieldError::not_found(
                p.child("targetContainerName"),
                Value::from(target),
            ));
        }
        for key in NOT_ALLOWED {
            let set = field(c, key).is_some_and(|v| match v {
                Value::Object(m) => !m.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => true,
            });
            if set {
                errs.push(FieldError::forbidden(
                    p.child(key),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        for (j, mount) in items(c, "volumeMounts").iter().enumerate() {
            for key in ["subPath", "subPathExpr"] {
                if !str_field(mount, key).unwrap_or_default().is_empty() {
                    errs.push(FieldError::forbidden(
                        p.child("volumeMounts").index(j).child(key),
                        "cannot be set for an Ephemeral Container",
                    ));
                }
            }
        }
    }
    errs
}

/// Upstream's second part of `ValidatePodEphemeralContainersUpdate`: a mirror pod takes none, and
/// the ephemeral containers `old` has stay, unchanged.
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mirror = old
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some();
    if mirror {
        return vec![FieldError::forbidden(
            "",
            "static pods do not support ephemeral containers",
        )];
    }
    let path = Path::new("spec").child("ephemeralContainers");
    let empty = Value::Null;
    let new_spec = field(new, "spec").unwrap_or(&empty);
    let added = items(new_spec, "ephemeralContainers");
    let mut errs = Vec::new();
    for before in items(field(old, "spec").unwrap_or(&empty), "ephemeralContainers") {
        let name = str_field(before, "name").unwrap_or_default();
        match added.iter().find(|c| str_field(c, "name") == Some(name)) {
            None => errs.push(FieldError::forbidden(
                path.clone(),
                format!("existing ephemeral containers \"{name}\" may not be removed\n"),
            )),
            Some(now) if now != before => errs.push(FieldError::forbidden(
                path.clone(),
                format!("existing ephemeral containers \"{name}\" may not be changed\n"),
            )),
            Some(_) => {}
        }
    }
    errs
}
