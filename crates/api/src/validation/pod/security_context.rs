//! A container's `securityContext`, as upstream's `ValidateSecurityContext` checks it (v1.28,
//! `pkg/apis/core/validation`): ids in range, a known `procMount`, a well-formed seccomp profile,
//! and no privilege escalation denied beside what grants it. Privileged containers are allowed
//! (`--allow-privileged=true`, as kubeadm and kind run kube-apiserver). A pod's own
//! `securityContext` as `validatePodSpecSecurityContext` checks it (its sysctls are checked
//! beside, in the pod's module).

use super::super::{field, int_field, items, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

const MAX_ID: i64 = i32::MAX as i64;

/// Errors of a pod's `securityContext` (at `path`) in `spec`.
pub(super) fn validate_pod(sc: &Value, spec: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in ["fsGroup", "runAsUser", "runAsGroup"] {
        id(&mut errs, sc, key, path);
    }
    for (i, group) in items(sc, "supplementalGroups").iter().enumerate() {
        if let Some(g) = group.as_i64()
            && !(0..=MAX_ID).contains(&g)
        {
            errs.push(out_of_range(path.child("supplementalGroups").index(i), g));
        }
    }
    // In v1 both are the spec's fields; upstream checks them in its internal security context,
    // whose path the error names.
    if field(spec, "shareProcessNamespace") == Some(&Value::Bool(true))
        && field(spec, "hostPID") == Some(&Value::Bool(true))
    {
        errs.push(FieldError::invalid(
            path.child("shareProcessNamespace"),
            Value::Bool(true),
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    if let Some(policy) = str_field(sc, "fsGroupChangePolicy")
        && !["OnRootMismatch", "Always"].contains(&policy)
    {
        errs.push(FieldError::not_supported(
            path.child("fsGroupChangePolicy"),
            Value::from(policy),
            &["OnRootMismatch", "Always"],
        ));
    }
    if let Some(profile) = field(sc, "seccompProfile") {
        errs.extend(seccomp_profile(profile, &path.child("seccompProfile")));
    }
    errs
}

/// Upstream's `IsValidUserID` / `IsValidGroupID` on the integer field `key`.
fn id(errs: &mut Vec<FieldError>, sc: &Value, key: &str, path: &Path) {
    if let Some(id) = int_field(errs, sc, key, path)
        && !(0..=MAX_ID).contains(&id)
    {
        errs.push(out_of_range(path.child(key), id));
    }
}

fn out_of_range(path: Path, id: i64) -> FieldError {
    FieldError::invalid(
        path,
        Value::from(id),
        format!("must be between 0 and {MAX_ID}, inclusive"),
    )
}

/// Errors of a container's `securityContext` at `path`.
pub(super) fn validate(sc: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in ["runAsUser", "runAsGroup"] {
        id(&mut errs, sc, key, path);
    }
    if let Some(mount) = str_field(sc, "procMount")
        && !["Default", "Unmasked"].contains(&mount)
    {
        errs.push(FieldError::not_supported(
            path.child("procMount"),
            Value::from(mount),
            &["Default", "Unmasked"],
        ));
    }
    if let Some(profile) = field(sc, "seccompProfile") {
        errs.extend(seccomp_profile(profile, &path.child("seccompProfile")));
    }
    let denies_escalation = field(sc, "allowPrivilegeEscalation") == Some(&Value::Bool(false));
    if denies_escalation {
        if field(sc, "privileged") == Some(&Value::Bool(true)) {
            errs.push(FieldError::invalid(
                path.clone(),
                sc.clone(),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds = field(sc, "capabilities")
            .and_then(|c| c.get("add"))
            .and_then(Value::as_array);
        if adds.is_some_and(|adds| adds.iter().any(|c| c.as_str() == Some("CAP_SYS_ADMIN"))) {
            errs.push(FieldError::invalid(
                path.clone(),
                sc.clone(),
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
    errs
}

/// Upstream's `validateSeccompProfileField`: a known type, and a local profile exactly when the
/// type is `Localhost`.
pub(super) fn seccomp_profile(profile: &Value, path: &Path) -> Vec<FieldError> {
    const TYPES: [&str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];
    let mut errs = Vec::new();
    let kind = str_field(profile, "type").unwrap_or_default();
    match kind {
        "" => errs.push(FieldError::required(
            path.child("type"),
            "type is required when seccompProfile is set",
        )),
        k if !TYPES.contains(&k) => errs.push(FieldError::not_supported(
            path.child("type"),
            Value::from(k),
            &TYPES,
        )),
        _ => {}
    }
    let local = field(profile, "localhostProfile");
    match (kind, local) {
        ("Localhost", None) => errs.push(FieldError::required(
            path.child("localhostProfile"),
            "must be set when seccomp type is Localhost",
        )),
        ("Localhost", Some(_)) | (_, None) => {}
        (_, Some(_)) => errs.push(FieldError::invalid(
            path.child("localhostProfile"),
            profile.clone(),
            "can only be set when seccomp type is Localhost",
        )),
    }
    errs
}
