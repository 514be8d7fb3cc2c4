//! Reading and writing the standard metadata of an object held as JSON.

use serde_json::{Map, Value};

/// Now, formatted as Kubernetes timestamps are (`2006-01-02T15:04:05Z`, seconds precision).
pub fn now_rfc3339() -> String {
    format_time(clock::now())
}

/// A timestamp formatted as Kubernetes does.
pub fn format_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `metadata`, created if missing. `obj` must be a JSON object: the server checks every body is
/// one before it gets here.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.name`, or empty.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

/// `metadata.namespace`, if set and non-empty.
pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace").filter(|s| !s.is_empty())
}

/// `metadata.resourceVersion` parsed, if set.
pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

/// `metadata.labels` as a map (empty when absent).
pub fn labels(obj: &Value) -> Map<String, Value> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// Follows a dotted path (`spec.nodeName`) to a value.
pub fn path<'a>(obj: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(obj, |v, seg| v.get(seg))
}

/// Follows a dotted path and renders the value as a field selector compares it (strings as is,
/// booleans and numbers printed, absent as empty).
pub fn field_string(obj: &Value, dotted: &str) -> String {
    match path(obj, dotted) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}
