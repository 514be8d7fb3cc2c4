//! Strict field validation (`fieldValidation=Strict`): the fields of an object that its kind's
//! schema does not know, worded as upstream's strict decoding words them.

use serde_json::{Map, Value};

use super::components::{COMPONENTS, REF_PREFIX, schema_of};
use crate::registry::{Kind, Schema};

/// Strict field validation (`fieldValidation=Strict`): the fields of `obj` that its kind's schema
/// does not know, as upstream's strict-decoding messages (`unknown field "spec.foo"`), in document
/// order. Objects whose schema preserves unknown fields, or is free-form (no properties), accept
/// anything. A kind without a schema yields nothing.
pub fn unknown_fields(def: &Kind, obj: &Value) -> Vec<String> {
    take_unknown(def, &mut obj.clone())
        .into_iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect()
}

/// The paths of the fields of `obj` its kind's schema does not know (`spec.foo`), in document
/// order, removed from `obj` when the kind is built in, as decoding into upstream's Go types
/// drops them (so under `fieldValidation` Warn or Ignore they are reported, or not, and never
/// stored). Custom resources keep them here: their strategy prunes, honouring
/// `x-kubernetes-preserve-unknown-fields`. One walk does both, since every write needs both.
pub fn take_unknown(def: &Kind, obj: &mut Value) -> Vec<String> {
    let Some(schema) = schema_of(def) else {
        return Vec::new();
    };
    let remove = matches!(def.schema, Some(Schema::Builtin(_)));
    let mut out = Vec::new();
    walk_unknown(schema, obj, &mut String::new(), remove, &mut out);
    out
}

/// The schemas `schema` stands for once `$ref`s and `allOf`s are followed.
pub(super) fn flatten<'a>(schema: &'a Value, out: &mut Vec<&'a Value>, depth: usize) {
    if depth > 32 {
        return;
    }
    if let Some(s) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
        .and_then(|name| COMPONENTS.schemas.get(name))
    {
        flatten(s, out, depth + 1);
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for s in all {
            flatten(s, out, depth + 1);
        }
    }
    out.push(schema);
}

/// Walks `value` against `schema`, collecting (and with `remove`, dropping) unknown fields.
/// `path` is the value's path, extended in place for each child and cut back after it: every
/// write walks its whole object, so the walk allocates only for what it reports.
pub(super) fn walk_unknown(
    schema: &Value,
    value: &mut Value,
    path: &mut String,
    remove: bool,
    out: &mut Vec<String>,
) {
    if !(value.is_object() || value.is_array()) {
        // A scalar has no fields to know; most of an object is scalars.
        return;
    }
    let mut parts = Vec::new();
    flatten(schema, &mut parts, 0);
    match value {
        Value::Object(obj) => {
            if parts
                .iter()
                .any(|s| s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)))
            {
                return;
            }
            let props: Vec<&Map<String, Value>> = parts
                .iter()
                .filter_map(|s| s.get("properties").and_then(Value::as_object))
                .collect();
            let additional = parts
                .iter()
                .find_map(|s| s.get("additionalProperties"))
                .filter(|a| a.is_object());
            obj.retain(|k, v| {
                let len = path.len();
                if len > 0 {
                    path.push('.');
                }
                path.push_str(k);
                let keep = if let Some(s) = props.iter().find_map(|p| p.get(k)).or(additional) {
                    walk_unknown(s, v, path, remove, out);
                    true
                } else if props.is_empty() {
                    // No properties and no additionalProperties schema: free-form, anything goes.
                    true
                } else {
                    out.push(path.clone());
                    !remove
                };
                path.truncate(len);
                keep
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = parts.iter().find_map(|s| s.get("items")) {
                for (i, v) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push('[');
                    path.push_str(&i.to_string());
                    path.push(']');
                    walk_unknown(item_schema, v, path, remove, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}
