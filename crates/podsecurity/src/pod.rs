//! Reading a pod's JSON as upstream's typed `PodSpec` reads: an absent or `null` field is Go's
//! zero value or nil pointer.

use serde_json::Value;

/// Every container of the spec, in upstream's `visitContainers` order: init containers,
/// containers, then ephemeral containers.
pub(crate) fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |key| spec[key].as_array().into_iter().flatten())
}

/// A container's (or volume's) name.
pub(crate) fn name(v: &Value) -> &str {
    v["name"].as_str().unwrap_or_default()
}

/// A pod's or container's `securityContext`, when set.
pub(crate) fn security_context(v: &Value) -> Option<&Value> {
    Some(&v["securityContext"]).filter(|sc| sc.is_object())
}

/// A set field (`Some` for a non-null value), as a Go pointer that is not nil.
pub(crate) fn set(v: &Value) -> Option<&Value> {
    Some(v).filter(|v| !v.is_null())
}

/// A string field, empty when unset.
pub(crate) fn string(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Whether `spec.os.name` is `windows`: the checks that Windows pods cannot satisfy skip them
/// from v1.25.
pub(crate) fn is_windows(spec: &Value) -> bool {
    spec["os"]["name"] == "windows"
}
