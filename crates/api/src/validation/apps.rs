//! apps/v1 workloads: Deployment, ReplicaSet, DaemonSet, StatefulSet and ControllerRevision
//! (upstream's `pkg/apis/apps/validation` plus the selector immutability its strategies add).

use super::{
    field, int_field,
    label_selector::{self, Selector},
    meta, names, nonnegative, normalize, pod, repr, str_field,
};
use crate::{
    field::{ErrorType, FieldError, Path},
    intstr::IntOrPercent,
};
use serde_json::Value;

const STATEFULSET_UPDATE_FORBIDDEN: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

/// The StatefulSet spec fields an update may change.
const STATEFULSET_MUTABLE: [&str; 7] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// Rollwright's in-place update extension on DaemonSet and StatefulSet rolling updates.
const POD_UPDATE_POLICIES: [&str; 2] = ["Recreate", "InPlaceIfPossible"];

fn spec_of(obj: &Value) -> &Value {
    field(obj, "spec").unwrap_or(&Value::Null)
}

/// An `Unsupported value` error whose value is a rendered Go struct.
fn not_supported_repr(path: &Path, repr: String, allowed: &[&str]) -> FieldError {
    let quoted: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
    FieldError {
        kind: ErrorType::NotSupported,
        field: path.into(),
        value: None,
        detail: format!("{repr}: supported values: {}", quoted.join(", ")),
    }
}

/// `spec.selector` presence, syntax and non-emptiness, for kinds that require a selector.
fn required_selector(spec: &Value, path: &Path, kind: &str) -> Vec<FieldError> {
    let selector_path = path.child("selector");
    let Some(selector) = field(spec, "selector") else {
        return vec![FieldError::required(selector_path, "")];
    };
    let mut errs = label_selector::validate(Some(selector), &selector_path);
    if is_empty_selector(selector) {
        errs.push(repr::invalid_repr(
            &selector_path,
            repr::label_selector(selector),
            &format!("empty selector is invalid for {kind}"),
        ));
    }
    errs
}

fn is_empty_selector(selector: &Value) -> bool {
    let len = |key: &str| {
        field(selector, key).map_or(0, |v| {
            v.as_object().map_or(0, |m| m.len()) + v.as_array().map_or(0, Vec::len)
        })
    };
    len("matchLabels") + len("matchExpressions") == 0
}

fn template_labels(template: Option<&Value>) -> Option<&Value> {
    template
        .and_then(|t| field(t, "metadata"))
        .and_then(|m| field(m, "labels"))
}

fn mismatch(template: Option<&Value>, template_path: &Path) -> FieldError {
    repr::invalid_repr(
        &template_path.child("metadata").child("labels"),
        repr::string_map(template_labels(template)),
        "`selector` does not match template `labels`",
    )
}

/// Upstream's template rules for controllers: pods restart Always and have no deadline.
fn controller_template_rules(
    template: Option<&Value>,
    template_path: &Path,
    kind: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = template
        .and_then(|t| field(t, "spec"))
        .unwrap_or(&Value::Null);
    if let Some(policy) = str_field(spec, "restartPolicy").filter(|p| *p != "Always") {
        errs.push(FieldError::not_supported(
            template_path.child("spec").child("restartPolicy"),
            Value::from(policy),
            &["Always"],
        ));
    }
    if field(spec, "activeDeadlineSeconds").is_some() {
        errs.push(FieldError::forbidden(
            template_path.child("spec").child("activeDeadlineSeconds"),
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
    errs
}

/// The selector/template pairing of Deployments and ReplicaSets
/// (upstream's `ValidatePodTemplateSpecForReplicaSet`).
fn replica_set_template(spec: &Value, path: &Path) -> Vec<FieldError> {
    let template_path = path.child("template");
    let template = field(spec, "template");
    let mut errs = Vec::new();
    match Selector::parse(field(spec, "selector")) {
        Err(()) => {
            let shown =
                field(spec, "selector").map_or_else(|| "null".to_string(), repr::label_selector);
            errs.push(repr::invalid_repr(
                &path.child("selector"),
                shown,
                "invalid label selector",
            ));
            return errs;
        }
        Ok(selector) => {
            if template.is_some()
                && !selector.is_empty()
                && !selector.matches(template_labels(template))
            {
                errs.push(mismatch(template, &template_path));
            }
        }
    }
    errs.extend(pod::validate_template(template, &template_path, &[]));
    errs.extend(controller_template_rules(
        template,
        &template_path,
        "ReplicaSet",
    ));
    errs
}

/// What an int-or-percent field holds after checking it (upstream's `ValidatePositiveIntOrPercent`).
struct Checked {
    /// Upstream's `getIntOrPercentValue`: the number, counted or percent.
    raw: i64,
    /// Set for a valid percentage.
    percent: Option<i64>,
}

fn int_or_percent(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &Path) -> Checked {
    let Some(v) = v else {
        return Checked {
            raw: 0,
            percent: None,
        };
    };
    match v {
        Value::String(s) => {
            let msgs = names::percent(s);
            let valid = msgs.is_empty();
            for msg in msgs {
                errs.push(repr::invalid_repr(path, repr::int_or_string(v), &msg));
            }
            let number = s.trim_end_matches('%').parse::<i64>().ok();
            if valid {
                Checked {
                    raw: number.unwrap_or(0),
                    percent: number,
                }
            } else {
                // Upstream falls back to Atoi of the whole string, which is 0 for anything with a '%'.
                Checked {
                    raw: s.parse::<i64>().unwrap_or(0),
                    percent: None,
                }
            }
        }
        Value::Number(_) => match IntOrPercent::parse(v) {
            Ok(parsed) => {
                let n = i64::from(parsed.raw());
                if n < 0 {
                    errs.push(FieldError::invalid(
                        path,
                        v.clone(),
                        "must be greater than or equal to 0",
                    ));
                }
                Checked {
                    raw: n,
                    percent: None,
                }
            }
            Err(e) => {
                errs.push(FieldError::invalid(path, v.clone(), e.to_string()));
                Checked {
                    raw: 1,
                    percent: None,
                }
            }
        },
        _ => {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                "must be an integer or percentage (e.g '5%')",
            ));
            Checked {
                raw: 1,
                percent: None,
            }
        }
    }
}

fn not_more_than_100_percent(
    errs: &mut Vec<FieldError>,
    checked: &Checked,
    v: Option<&Value>,
    path: &Path,
) {
    if checked.percent.is_some_and(|p| p > 100) {
        let shown = v.map_or_else(|| "0".to_string(), repr::int_or_string);
        errs.push(repr::invalid_repr(
            path,
            shown,
            "must not be greater than 100%",
        ));
    }
}

/// rollwright's extension fields of a DaemonSet's or StatefulSet's `rollingUpdate`:
/// `podUpdatePolicy` (`Recreate` | `InPlaceIfPossible`) and `paused` (a boolean).
fn rollwright_extensions(errs: &mut Vec<FieldError>, rolling: &Value, path: &Path) {
    if let Some(policy) = field(rolling, "podUpdatePolicy") {
        let ok = policy
            .as_str()
            .is_some_and(|p| POD_UPDATE_POLICIES.contains(&p));
        if !ok {
            errs.push(FieldError::not_supported(
                path.child("podUpdatePolicy"),
                policy.clone(),
                &POD_UPDATE_POLICIES,
            ));
        }
    }
    if let Some(paused) = field(rolling, "paused")
        && !paused.is_boolean()
    {
        errs.push(FieldError::invalid(
            path.child("paused"),
            paused.clone(),
            "must be a boolean",
        ));
    }
}

// ---- Deployment ----

/// A Deployment.
pub(super) fn validate_deployment(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = spec_of(obj);
    let path = Path::new("spec");
    nonnegative(&mut errs, spec, "replicas", &path);
    errs.extend(required_selector(spec, &path, "deployment"));
    errs.extend(replica_set_template(spec, &path));
    errs.extend(deployment_strategy(spec, &path.child("strategy")));
    let min_ready = nonnegative(&mut errs, spec, "minReadySeconds", &path).unwrap_or(0);
    nonnegative(&mut errs, spec, "revisionHistoryLimit", &path);
    if let Some(deadline) = nonnegative(&mut errs, spec, "progressDeadlineSeconds", &path)
        && deadline <= min_ready
    {
        errs.push(FieldError::invalid(
            path.child("progressDeadlineSeconds"),
            Value::from(deadline),
            "must be greater than minReadySeconds",
        ));
    }
    errs
}

fn deployment_strategy(spec: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let strategy = field(spec, "strategy").unwrap_or(&Value::Null);
    let rolling = field(strategy, "rollingUpdate");
    match str_field(strategy, "type").unwrap_or_default() {
        "Recreate" => {
            if rolling.is_some() {
                errs.push(FieldError::forbidden(
                    path.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match rolling {
            None => errs.push(FieldError::required(
                path.child("rollingUpdate"),
                "this should be defaulted and never be nil",
            )),
            Some(rolling) => {
                let rpath = path.child("rollingUpdate");
                let (unavailable_path, surge_path) =
                    (rpath.child("maxUnavailable"), rpath.child("maxSurge"));
                let unavailable_value = field(rolling, "maxUnavailable");
                let unavailable = int_or_percent(&mut errs, unavailable_value, &unavailable_path);
                let surge = int_or_percent(&mut errs, field(rolling, "maxSurge"), &surge_path);
                if unavailable.raw == 0 && surge.raw == 0 {
                    let shown =
                        unavailable_value.map_or_else(|| "0".to_string(), repr::int_or_string);
                    errs.push(repr::invalid_repr(
                        &unavailable_path,
                        shown,
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                not_more_than_100_percent(
                    &mut errs,
                    &unavailable,
                    unavailable_value,
                    &unavailable_path,
                );
            }
        },
        _ => errs.push(not_supported_repr(
            path,
            repr::strategy("DeploymentStrategy", "RollingUpdateDeployment", strategy),
            &["Recreate", "RollingUpdate"],
        )),
    }
    errs
}

// ---- ReplicaSet ----

/// A ReplicaSet.
pub(super) fn validate_replica_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = spec_of(obj);
    let path = Path::new("spec");
    nonnegative(&mut errs, spec, "replicas", &path);
    nonnegative(&mut errs, spec, "minReadySeconds", &path);
    // Upstream's ReplicaSet message says "deployment" too.
    errs.extend(required_selector(spec, &path, "deployment"));
    errs.extend(replica_set_template(spec, &path));
    errs
}

// ---- DaemonSet ----

/// A DaemonSet.
pub(super) fn validate_daemon_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = spec_of(obj);
    let path = Path::new("spec");
    let template_path = path.child("template");
    let template = field(spec, "template");
    let selector = field(spec, "selector");
    errs.extend(label_selector::validate(selector, &path.child("selector")));
    // An absent selector selects nothing, so upstream reports it as a mismatch.
    if let Ok(parsed) = Selector::parse(selector)
        && !parsed.matches(template_labels(template))
    {
        errs.push(mismatch(template, &template_path));
    }
    if let Some(selector) = selector.filter(|s| is_empty_selector(s)) {
        errs.push(repr::invalid_repr(
            &path.child("selector"),
            repr::label_selector(selector),
            "empty selector is invalid for daemonset",
        ));
    }
    errs.extend(pod::validate_template(template, &template_path, &[]));
    errs.extend(controller_template_rules(
        template,
        &template_path,
        "DaemonSet",
    ));
    nonnegative(&mut errs, spec, "minReadySeconds", &path);
    nonnegative(&mut errs, spec, "templateGeneration", &path);
    errs.extend(daemon_set_strategy(spec, &path.child("updateStrategy")));
    nonnegative(&mut errs, spec, "revisionHistoryLimit", &path);
    errs
}

fn daemon_set_strategy(spec: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let strategy = field(spec, "updateStrategy").unwrap_or(&Value::Null);
    match str_field(strategy, "type").unwrap_or_default() {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(rolling) = field(strategy, "rollingUpdate") else {
                errs.push(FieldError::required(path.child("rollingUpdate"), ""));
                return errs;
            };
            let rpath = path.child("rollingUpdate");
            let (unavailable_path, surge_path) =
                (rpath.child("maxUnavailable"), rpath.child("maxSurge"));
            let (unavailable_value, surge_value) =
                (field(rolling, "maxUnavailable"), field(rolling, "maxSurge"));
            let unavailable = int_or_percent(&mut errs, unavailable_value, &unavailable_path);
            let surge = int_or_percent(&mut errs, surge_value, &surge_path);
            not_more_than_100_percent(
                &mut errs,
                &unavailable,
                unavailable_value,
                &unavailable_path,
            );
            not_more_than_100_percent(&mut errs, &surge, surge_value, &surge_path);
            match (unavailable.raw != 0, surge.raw != 0) {
                (true, true) => errs.push(repr::invalid_repr(
                    &surge_path,
                    surge_value.map_or_else(|| "0".to_string(), repr::int_or_string),
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => errs.push(FieldError::required(
                    unavailable_path,
                    "cannot be 0 when maxSurge is 0",
                )),
                _ => {}
            }
            rollwright_extensions(&mut errs, rolling, &rpath);
        }
        _ => errs.push(not_supported_repr(
            path,
            repr::strategy(
                "DaemonSetUpdateStrategy",
                "RollingUpdateDaemonSet",
                strategy,
            ),
            &["RollingUpdate", "OnDelete"],
        )),
    }
    errs
}

// ---- StatefulSet ----

/// A StatefulSet. Unlike upstream (which checks only template labels and annotations), the
/// template's pod spec is validated too, with the claim templates counting as volumes, so a
/// broken template is refused instead of failing at pod creation.
pub(super) fn validate_stateful_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_label);
    let spec = spec_of(obj);
    let path = Path::new("spec");

    match str_field(spec, "podManagementPolicy").unwrap_or_default() {
        "" => errs.push(FieldError::required(path.child("podManagementPolicy"), "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            path.child("podManagementPolicy"),
            Value::from(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    errs.extend(stateful_set_strategy(spec, &path.child("updateStrategy")));
    if let Some(policy) = field(spec, "persistentVolumeClaimRetentionPolicy") {
        let ppath = path.child("persistentVolumeClaimRetentionPolicy");
        for key in ["whenDeleted", "whenScaled"] {
            let value = str_field(policy, key).unwrap_or_default();
            if value != "Retain" && value != "Delete" {
                errs.push(FieldError::not_supported(
                    ppath.child(key),
                    Value::from(value),
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    nonnegative(&mut errs, spec, "replicas", &path);
    nonnegative(&mut errs, spec, "minReadySeconds", &path);
    if let Some(ordinals) = field(spec, "ordinals")
        && let Some(start) = int_field(&mut errs, ordinals, "start", &path.child("ordinals"))
        && start < 0
    {
        errs.push(FieldError::invalid(
            path.child("ordinals.start"),
            Value::from(start),
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(required_selector(spec, &path, "statefulset"));

    let template_path = path.child("template");
    let template = field(spec, "template");
    match Selector::parse(field(spec, "selector")) {
        Err(()) => {
            let shown =
                field(spec, "selector").map_or_else(|| "null".to_string(), repr::label_selector);
            errs.push(repr::invalid_repr(&path.child("selector"), shown, ""));
        }
        Ok(selector) => {
            if template.is_some()
                && !selector.is_empty()
                && !selector.matches(template_labels(template))
            {
                errs.push(mismatch(template, &template_path));
            }
            let claims: Vec<String> = super::items(spec, "volumeClaimTemplates")
                .iter()
                .filter_map(|c| {
                    field(c, "metadata")
                        .and_then(|m| str_field(m, "name"))
                        .map(str::to_string)
                })
                .collect();
            errs.extend(pod::validate_template(template, &template_path, &claims));
        }
    }
    errs.extend(controller_template_rules(
        template,
        &template_path,
        "StatefulSet",
    ));
    nonnegative(&mut errs, spec, "revisionHistoryLimit", &path);
    errs
}

fn stateful_set_strategy(spec: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let strategy = field(spec, "updateStrategy").unwrap_or(&Value::Null);
    let rolling = field(strategy, "rollingUpdate");
    match str_field(strategy, "type").unwrap_or_default() {
        "" => errs.push(FieldError::required(path, "")),
        "OnDelete" => {
            if let Some(rolling) = rolling {
                errs.push(repr::invalid_repr(
                    &path.child("rollingUpdate"),
                    stateful_rolling_repr(rolling),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(rolling) = rolling {
                let rpath = path.child("rollingUpdate");
                nonnegative(&mut errs, rolling, "partition", &rpath);
                if let Some(value) = field(rolling, "maxUnavailable") {
                    let upath = rpath.child("maxUnavailable");
                    let checked = int_or_percent(&mut errs, Some(value), &upath);
                    if checked.raw == 0 {
                        errs.push(repr::invalid_repr(
                            &upath,
                            repr::int_or_string(value),
                            "cannot be 0",
                        ));
                    }
                    not_more_than_100_percent(&mut errs, &checked, Some(value), &upath);
                }
                rollwright_extensions(&mut errs, rolling, &rpath);
            }
        }
        _ => errs.push(repr::invalid_repr(
            path,
            repr::strategy(
                "StatefulSetUpdateStrategy",
                "RollingUpdateStatefulSetStrategy",
                strategy,
            ),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    errs
}

fn stateful_rolling_repr(rolling: &Value) -> String {
    let partition = field(rolling, "partition").map_or_else(|| "0".to_string(), Value::to_string);
    let max_unavailable = field(rolling, "maxUnavailable").map_or_else(
        || "(*intstr.IntOrString)(nil)".to_string(),
        |v| format!("&{}", repr::int_or_string(v)),
    );
    format!(
        "apps.RollingUpdateStatefulSetStrategy{{Partition:{partition}, MaxUnavailable:{max_unavailable}}}"
    )
}

// ---- ControllerRevision ----

/// A ControllerRevision.
pub(super) fn validate_controller_revision(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    if field(obj, "data").is_none() {
        errs.push(FieldError::required(Path::new("data"), "data is mandatory"));
    }
    nonnegative(&mut errs, obj, "revision", &Path::default());
    errs
}

// ---- updates ----

/// apps/v1 selectors never change after creation (the strategies' `ValidateImmutableField`).
pub(super) fn validate_selector_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (new_sel, old_sel) = (
        field(spec_of(new), "selector"),
        field(spec_of(old), "selector"),
    );
    if normalize_opt(new_sel) == normalize_opt(old_sel) {
        return vec![];
    }
    let shown = new_sel.map_or_else(|| "null".to_string(), repr::label_selector);
    vec![repr::invalid_repr(
        &Path::new("spec").child("selector"),
        shown,
        "field is immutable",
    )]
}

fn normalize_opt(v: Option<&Value>) -> Value {
    v.map_or(Value::Null, normalize)
}

/// Only some StatefulSet spec fields may change.
pub(super) fn validate_stateful_set_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let strip = |obj: &Value| {
        let mut spec = normalize(spec_of(obj));
        if let Some(map) = spec.as_object_mut() {
            for key in STATEFULSET_MUTABLE {
                map.remove(key);
            }
        }
        spec
    };
    if strip(new) == strip(old) {
        vec![]
    } else {
        vec![FieldError::forbidden(
            Path::new("spec"),
            STATEFULSET_UPDATE_FORBIDDEN,
        )]
    }
}

/// A revision's data is its identity.
pub(super) fn validate_controller_revision_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (new_data, old_data) = (field(new, "data"), field(old, "data"));
    if normalize_opt(new_data) == normalize_opt(old_data) {
        return vec![];
    }
    vec![FieldError::invalid(
        Path::new("data"),
        new_data.cloned().unwrap_or(Value::Null),
        "field is immutable",
    )]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
