//! Pods and pod templates: spec checks (upstream's `ValidatePodSpec` subset) and the rule that a
//! running pod's spec may only change in a few places (`ValidatePodUpdate`).

use super::{field, int_field, items, meta, names, nonnegative, normalize, repr, str_field};
use crate::{
    field::{FieldError, Path},
    quantity::Quantity,
};
use serde_json::Value;
use std::collections::HashSet;

pub mod ephemeral;
mod security_context;

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

const MAX_INT32: i64 = i32::MAX as i64;

/// A Pod object.
pub fn validate_pod(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    errs.extend(validate_pod_spec(spec, &Path::new("spec"), &[]));
    errs
}

/// A workload's pod template at `path` (`spec.template`). `claim_names` are extra volume names
/// that mounts may refer to (a StatefulSet's `volumeClaimTemplates`).
pub fn validate_template(
    template: Option<&Value>,
    path: &Path,
    claim_names: &[String],
) -> Vec<FieldError> {
    let Some(template) = template else {
        return vec![FieldError::required(path, "")];
    };
    let meta_path = path.child("metadata");
    let template_meta = field(template, "metadata").unwrap_or(&Value::Null);
    let mut errs =
        meta::validate_labels(field(template_meta, "labels"), &meta_path.child("labels"));
    errs.extend(meta::validate_annotations(
        field(template_meta, "annotations"),
        &meta_path.child("annotations"),
    ));
    let spec = field(template, "spec").unwrap_or(&Value::Null);
    errs.extend(validate_pod_spec(spec, &path.child("spec"), claim_names));
    errs
}

/// The checks upstream's `ValidatePodSpec` makes that matter to rollouts and scheduling.
pub fn validate_pod_spec(spec: &Value, path: &Path, claim_names: &[String]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut volumes: HashSet<&str> = claim_names.iter().map(String::as_str).collect();
    errs.extend(validate_volumes(spec, &path.child("volumes"), &mut volumes));

    let mut container_names = HashSet::new();
    for (key, is_init) in [("initContainers", true), ("containers", false)] {
        for (i, container) in items(spec, key).iter().enumerate() {
            let p = path.child(key).index(i);
            errs.extend(validate_container(
                container,
                &p,
                &volumes,
                &mut container_names,
                is_init,
            ));
        }
    }
    if items(spec, "containers").is_empty() {
        errs.push(FieldError::required(path.child("containers"), ""));
    }
    errs.extend(ephemeral::validate(
        spec,
        &path.child("ephemeralContainers"),
    ));

    if let Some(policy) = str_field(spec, "restartPolicy") {
        errs.extend(one_of(
            path.child("restartPolicy"),
            policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
    if let Some(policy) = str_field(spec, "dnsPolicy") {
        errs.extend(one_of(
            path.child("dnsPolicy"),
            policy,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        ));
    }
    nonnegative(&mut errs, spec, "terminationGracePeriodSeconds", path);
    if let Some(ads) = int_field(&mut errs, spec, "activeDeadlineSeconds", path)
        && !(1..=MAX_INT32).contains(&ads)
    {
        errs.push(FieldError::invalid(
            path.child("activeDeadlineSeconds"),
            Value::from(ads),
            names::inclusive_range_error(1, MAX_INT32),
        ));
    }
    errs.extend(validate_sysctls(
        field(spec, "securityContext").map_or(&[][..], |sc| items(sc, "sysctls")),
        &path.child("securityContext").child("sysctls"),
    ));
    // Upstream's internal pod always has a security context (it holds hostPID and the like).
    errs.extend(security_context::validate_pod(
        field(spec, "securityContext").unwrap_or(&Value::Null),
        spec,
        &path.child("securityContext"),
    ));
    errs.extend(meta::validate_labels(
        field(spec, "nodeSelector"),
        &path.child("nodeSelector"),
    ));
    errs.extend(validate_tolerations(
        items(spec, "tolerations"),
        &path.child("tolerations"),
    ));
    for (key, check) in [
        (
            "nodeName",
            names::dns1123_subdomain as fn(&str) -> Vec<String>,
        ),
        ("serviceAccountName", names::dns1123_subdomain),
        ("hostname", names::dns1123_label),
        ("subdomain", names::dns1123_label),
    ] {
        if let Some(value) = str_field(spec, key).filter(|v| !v.is_empty()) {
            for msg in check(value) {
                errs.push(FieldError::invalid(
                    path.child(key),
                    Value::from(value),
                    msg,
                ));
            }
        }
    }
    errs
}

pub(super) fn one_of(path: Path, value: &str, allowed: &[&str]) -> Vec<FieldError> {
    match value {
        "" => vec![FieldError::required(path, "")],
        v if allowed.contains(&v) => vec![],
        v => vec![FieldError::not_supported(path, Value::from(v), allowed)],
    }
}

fn validate_volumes<'a>(
    spec: &'a Value,
    path: &Path,
    names_seen: &mut HashSet<&'a str>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, volume) in items(spec, "volumes").iter().enumerate() {
        let p = path.index(i);
        match str_field(volume, "name").unwrap_or_default() {
            "" => errs.push(FieldError::required(p.child("name"), "")),
            name => {
                for msg in names::dns1123_label(name) {
                    errs.push(FieldError::invalid(p.child("name"), Value::from(name), msg));
                }
                if !names_seen.insert(name) {
                    errs.push(FieldError::duplicate(p.child("name"), Value::from(name)));
                }
            }
        }
        let sources: Vec<&String> = volume
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| *k != "name" && !v.is_null())
            .map(|(k, _)| k)
            .collect();
        match sources.as_slice() {
            [] => errs.push(FieldError::required(&p, "must specify a volume type")),
            [_] => {}
            [_, second, ..] => errs.push(FieldError::forbidden(
                p.child(second),
                "may not specify more than 1 volume type",
            )),
        }
        for source in ["configMap", "secret", "downwardAPI", "projected"] {
            let Some(mode) = field(volume, source).and_then(|s| field(s, "defaultMode")) else {
                continue;
            };
            if !mode.as_i64().is_some_and(|m| (0..=0o777).contains(&m)) {
                errs.push(FieldError::invalid(
                    p.child(source).child("defaultMode"),
                    mode.clone(),
                    "must be a number between 0 and 0777 (octal), both inclusive",
                ));
            }
        }
    }
    errs
}

fn validate_container(
    c: &Value,
    path: &Path,
    volumes: &HashSet<&str>,
    container_names: &mut HashSet<String>,
    is_init: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match str_field(c, "name").unwrap_or_default() {
        "" => errs.push(FieldError::required(path.child("name"), "")),
        name => {
            for msg in names::dns1123_label(name) {
                errs.push(FieldError::invalid(
                    path.child("name"),
                    Value::from(name),
                    msg,
                ));
            }
            if !container_names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(path.child("name"), Value::from(name)));
            }
        }
    }
    match str_field(c, "image").unwrap_or_default() {
        "" => errs.push(FieldError::required(path.child("image"), "")),
        image if image.trim() != image => errs.push(FieldError::invalid(
            path.child("image"),
            Value::from(image),
            "must not have leading or trailing whitespace",
        )),
        _ => {}
    }
    if let Some(policy) = str_field(c, "imagePullPolicy") {
        errs.extend(one_of(
            path.child("imagePullPolicy"),
            policy,
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    if let Some(policy) = str_field(c, "terminationMessagePolicy") {
        errs.extend(one_of(
            path.child("terminationMessagePolicy"),
            policy,
            &["File", "FallbackToLogsOnError"],
        ));
    }
    let sidecar = is_init && str_field(c, "restartPolicy") == Some("Always");
    match (is_init, str_field(c, "restartPolicy")) {
        (_, None) => {}
        (true, Some(policy)) => {
            errs.extend(one_of(path.child("restartPolicy"), policy, &["Always"]))
        }
        (false, Some(_)) => errs.push(FieldError::forbidden(
            path.child("restartPolicy"),
            "may not be set for non-init containers",
        )),
    }

    errs.extend(validate_ports(c, &path.child("ports")));
    for (i, env) in items(c, "env").iter().enumerate() {
        if str_field(env, "name").unwrap_or_default().is_empty() {
            errs.push(FieldError::required(
                path.child("env").index(i).child("name"),
                "",
            ));
        }
    }
    let mut mount_paths = HashSet::new();
    for (i, mount) in items(c, "volumeMounts").iter().enumerate() {
        let p = path.child("volumeMounts").index(i);
        match str_field(mount, "name").unwrap_or_default() {
            "" => errs.push(FieldError::required(p.child("name"), "")),
            name if !volumes.contains(name) => {
                errs.push(FieldError::not_found(p.child("name"), Value::from(name)))
            }
            _ => {}
        }
        match str_field(mount, "mountPath").unwrap_or_default() {
            "" => errs.push(FieldError::required(p.child("mountPath"), "")),
            mount_path => {
                if !mount_paths.insert(mount_path) {
                    errs.push(FieldError::invalid(
                        p.child("mountPath"),
                        Value::from(mount_path),
                        "must be unique",
                    ));
                }
            }
        }
    }
    if let Some(resources) = field(c, "resources") {
        errs.extend(validate_resources(resources, &path.child("resources")));
    }
    if let Some(sc) = field(c, "securityContext") {
        errs.extend(security_context::validate(
            sc,
            &path.child("securityContext"),
        ));
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(probe) = field(c, key) else { continue };
        if is_init && !sidecar {
            errs.push(FieldError::forbidden(
                path.child(key),
                "may not be set for init containers without restartPolicy=Always",
            ));
            continue;
        }
        errs.extend(validate_probe(
            probe,
            &path.child(key),
            key != "readinessProbe",
        ));
    }
    errs
}

fn validate_ports(c: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut port_names = HashSet::new();
    for (i, port) in items(c, "ports").iter().enumerate() {
        let p = path.index(i);
        if let Some(name) = str_field(port, "name").filter(|n| !n.is_empty()) {
            let msgs = names::port_name(name);
            if msgs.is_empty() && !port_names.insert(name) {
                errs.push(FieldError::duplicate(p.child("name"), Value::from(name)));
            }
            for msg in msgs {
                errs.push(FieldError::invalid(p.child("name"), Value::from(name), msg));
            }
        }
        match field(port, "containerPort") {
            None => errs.push(FieldError::required(p.child("containerPort"), "")),
            Some(v) => errs.extend(port_number(v, &p.child("containerPort"))),
        }
        if let Some(v) = field(port, "hostPort").filter(|v| v.as_i64() != Some(0)) {
            errs.extend(port_number(v, &p.child("hostPort")));
        }
        if let Some(protocol) = str_field(port, "protocol") {
            errs.extend(one_of(
                p.child("protocol"),
                protocol,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
    errs
}

fn port_number(v: &Value, path: &Path) -> Vec<FieldError> {
    if v.as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
        vec![]
    } else {
        vec![FieldError::invalid(
            path,
            v.clone(),
            names::inclusive_range_error(1, 65535),
        )]
    }
}

/// A resource name a container may request: the standard ones or a qualified extended name.
fn resource_name_errors(name: &str) -> Vec<String> {
    if name.contains('/') {
        return names::qualified_name(name);
    }
    if matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-") {
        vec![]
    } else {
        vec!["must be a standard resource for containers".to_string()]
    }
}

/// Parses a quantity given as a JSON string or number.
fn quantity_of(v: &Value) -> Result<Quantity, String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(format!("must be a quantity, not {other}")),
    };
    Quantity::parse(&text).map_err(|e| e.to_string())
}

fn validate_resources(resources: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut limits = Vec::new();
    for section in ["limits", "requests"] {
        let Some(list) = field(resources, section).and_then(Value::as_object) else {
            continue;
        };
        for (name, value) in list {
            let p = path.child(section).key(name);
            for msg in resource_name_errors(name) {
                errs.push(FieldError::invalid(&p, Value::from(name.as_str()), msg));
            }
            match quantity_of(value) {
                Err(msg) => errs.push(FieldError::invalid(&p, value.clone(), msg)),
                Ok(q) if q.is_negative() => errs.push(FieldError::invalid(
                    &p,
                    value.clone(),
                    "must be greater than or equal to 0",
                )),
                Ok(q) if section == "limits" => limits.push((name.as_str(), q, value)),
                Ok(q) => {
                    if let Some((_, limit, limit_text)) = limits.iter().find(|(n, _, _)| n == name)
                        && q > *limit
                    {
                        let shown = limit_text
                            .as_str()
                            .map_or_else(|| limit_text.to_string(), str::to_string);
                        errs.push(FieldError::invalid(
                            path.child("requests"),
                            Value::from(
                                value
                                    .as_str()
                                    .map_or_else(|| value.to_string(), str::to_string),
                            ),
                            format!("must be less than or equal to {name} limit of {shown}"),
                        ));
                    }
                }
            }
        }
    }
    errs
}

fn validate_probe(probe: &Value, path: &Path, success_must_be_one: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "grpc"]
        .into_iter()
        .filter(|h| field(probe, h).is_some())
        .collect();
    match handlers.as_slice() {
        [] => errs.push(FieldError::required(path, "must specify a handler type")),
        [_] => {}
        [_, second, ..] => errs.push(FieldError::forbidden(
            path.child(second),
            "may not specify more than 1 handler type",
        )),
    }
    for key in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        nonnegative(&mut errs, probe, key, path);
    }
    if success_must_be_one
        && let Some(threshold) = field(probe, "successThreshold").and_then(Value::as_i64)
        && threshold != 1
    {
        errs.push(FieldError::invalid(
            path.child("successThreshold"),
            Value::from(threshold),
            "must be 1",
        ));
    }
    errs
}

/// Upstream's `ValidateTolerations`.
pub fn validate_tolerations(tolerations: &[Value], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let p = path.index(i);
        let key = str_field(t, "key").unwrap_or_default();
        let operator = str_field(t, "operator").unwrap_or_default();
        let value = str_field(t, "value").unwrap_or_default();
        let effect = str_field(t, "effect").unwrap_or_default();
        if !key.is_empty() {
            errs.extend(meta::validate_label_name(key, &p.child("key")));
        }
        if key.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                p.child("operator"),
                Value::from(operator),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if field(t, "tolerationSeconds").is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                p.child("effect"),
                Value::from(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        p.child("operator"),
                        Value::from(value),
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(repr::invalid_repr(
                        &p.child("operator"),
                        toleration_repr(t),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                p.child("operator"),
                Value::from(other),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() {
            errs.extend(one_of(
                p.child("effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
    errs
}

fn toleration_repr(t: &Value) -> String {
    let s = |k: &str| Value::from(str_field(t, k).unwrap_or_default()).to_string();
    let seconds = match field(t, "tolerationSeconds") {
        None => "(*int64)(nil)".to_string(),
        Some(v) => format!("&{v}"),
    };
    format!(
        "core.Toleration{{Key:{}, Operator:{}, Value:{}, Effect:{}, TolerationSeconds:{seconds}}}",
        s("key"),
        s("operator"),
        s("value"),
        s("effect")
    )
}

/// What may change in a running pod's spec (upstream's `ValidatePodUpdate`).
pub fn validate_pod_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let spec_path = Path::new("spec");
    let new_spec = field(new, "spec").cloned().unwrap_or(Value::Null);
    let old_spec = field(old, "spec").cloned().unwrap_or(Value::Null);
    let mut errs = Vec::new();

    for key in ["containers", "initContainers"] {
        if items(&new_spec, key).len() != items(&old_spec, key).len() {
            errs.push(FieldError::forbidden(
                spec_path.child(key),
                "pod updates may not add or remove containers",
            ));
            return errs;
        }
    }

    // activeDeadlineSeconds may be set or shortened, never lengthened or removed.
    let new_ads = field(&new_spec, "activeDeadlineSeconds").and_then(Value::as_i64);
    let old_ads = field(&old_spec, "activeDeadlineSeconds").and_then(Value::as_i64);
    match (new_ads, old_ads) {
        (Some(n), Some(o)) if n > o => errs.push(FieldError::invalid(
            spec_path.child("activeDeadlineSeconds"),
            Value::from(n),
            "must be less than or equal to previous value",
        )),
        (None, Some(_)) => errs.push(FieldError::invalid(
            spec_path.child("activeDeadlineSeconds"),
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    // Existing tolerations stay; only their tolerationSeconds may change.
    let new_tolerations = items(&new_spec, "tolerations");
    let same_toleration = |a: &Value, b: &Value| {
        ["key", "operator", "value", "effect"]
            .iter()
            .all(|k| str_field(a, k).unwrap_or_default() == str_field(b, k).unwrap_or_default())
    };
    if items(&old_spec, "tolerations")
        .iter()
        .any(|o| !new_tolerations.iter().any(|n| same_toleration(o, n)))
    {
        errs.push(FieldError::forbidden(
            spec_path.child("tolerations"),
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }

    // Take the mutable fields from the old spec; anything still different is forbidden.
    let mut munged = new_spec.clone();
    if let Some(m) = munged.as_object_mut() {
        for key in ["containers", "initContainers"] {
            let old_images: Vec<Option<Value>> = items(&old_spec, key)
                .iter()
                .map(|c| field(c, "image").cloned())
                .collect();
            if let Some(list) = m.get_mut(key).and_then(Value::as_array_mut) {
                for (container, old_image) in list.iter_mut().zip(old_images) {
                    if let Some(c) = container.as_object_mut() {
                        match old_image {
                            Some(image) => c.insert("image".into(), image),
                            None => c.remove("image"),
                        };
                    }
                }
            }
        }
        let mut take_old = |key: &str| match field(&old_spec, key) {
            Some(v) => m.insert(key.to_string(), v.clone()),
            None => m.remove(key),
        };
        take_old("activeDeadlineSeconds");
        take_old("tolerations");
        let old_grace = field(&old_spec, "terminationGracePeriodSeconds").and_then(Value::as_i64);
        let new_grace = field(&new_spec, "terminationGracePeriodSeconds").and_then(Value::as_i64);
        if old_grace.is_some_and(|g| g < 0) && new_grace == Some(1) {
            take_old("terminationGracePeriodSeconds");
        }
        // Rollwright lets an unbound pod be bound by an update; once bound it stays put.
        if str_field(&old_spec, "nodeName")
            .unwrap_or_default()
            .is_empty()
        {
            take_old("nodeName");
        }
    }
    if normalize(&munged) != normalize(&old_spec) {
        errs.push(FieldError::forbidden(spec_path, POD_UPDATE_FORBIDDEN));
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

/// The sysctl name expression upstream prints in its message.
const SYSCTL_FMT: &str = "([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?";

/// Upstream's `IsValidSysctlName`: at most 253 characters of segments (`[a-z0-9]`, inner `-` and
/// `_`) joined by single dots or slashes.
fn is_valid_sysctl_name(name: &str) -> bool {
    let segment_ok = |seg: &str| {
        let b = seg.as_bytes();
        let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && edge(b[0])
            && edge(b[b.len() - 1])
            && b.iter().all(|&c| edge(c) || c == b'-' || c == b'_')
    };
    name.len() <= 253 && name.split(['.', '/']).all(segment_ok)
}

/// Upstream's `validateSysctls`: each name required, valid and not repeated.
fn validate_sysctls(sysctls: &[Value], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (i, s) in sysctls.iter().enumerate() {
        let p = path.index(i).child("name");
        match str_field(s, "name").unwrap_or_default() {
            "" => errs.push(FieldError::required(p, "")),
            name if !is_valid_sysctl_name(name) => errs.push(FieldError::invalid(
                p,
                Value::from(name),
                format!("must have at most 253 characters and match regex ^{SYSCTL_FMT}$"),
            )),
            name if !seen.insert(name.to_string()) => {
                errs.push(FieldError::duplicate(p, Value::from(name)))
            }
            _ => {}
        }
    }
    errs
}
