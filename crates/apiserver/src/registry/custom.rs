//! Custom resources: the kinds a CustomResourceDefinition serves, and their strategy over the
//! version's structural `openAPIV3Schema` (upstream's `apiextensions-apiserver` `customresource`
//! strategy): unknown fields pruned unless preserved, `default`s filled, and the schema's rules
//! checked with upstream's messages.

use std::collections::HashMap;
use std::sync::Mutex;

use api::field::{ErrorType, FieldError};
use serde_json::{Map, Value, json};

use super::{
    Cluster, Generation, Kind, Reset, Schema, Strategy, Subresource, conversion::Identity,
};
use crate::table::{CustomColumn, Printer};

/// A custom resource's write rules.
pub(super) struct CustomStrategy {
    /// The version's `openAPIV3Schema`.
    schema: Value,
    /// Whether the schema declares a `default` anywhere.
    has_defaults: bool,
    /// Compiled `pattern`s, by pattern.
    patterns: Mutex<HashMap<String, Option<regex::Regex>>>,
}

impl CustomStrategy {
    pub(super) fn new(schema: Value) -> Self {
        Self {
            has_defaults: declares_default(&schema),
            schema,
            patterns: Mutex::new(HashMap::new()),
        }
    }
}

/// Whether a structural schema declares a `default` for some field.
fn declares_default(schema: &Value) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    m.contains_key("default")
        || m.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(declares_default))
        || ["items", "additionalProperties"]
            .iter()
            .any(|k| m.get(*k).is_some_and(declares_default))
}

impl Strategy for CustomStrategy {
    fn defaults(&self, obj: &mut Value) {
        prune(obj, &self.schema, true);
        default(obj, &self.schema);
    }

    fn defaults_on_read(&self) -> bool {
        self.has_defaults
    }

    fn default_on_read(&self, obj: &mut Value) {
        default(obj, &self.schema);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !name.is_empty() {
            for msg in dns_subdomain(name) {
                errs.push(FieldError::invalid("metadata.name", json!(name), msg));
            }
        }
        let mut root = obj.clone();
        if let Some(m) = root.as_object_mut() {
            // Object metadata is the server's to check, not the schema's.
            m.remove("metadata");
            m.remove("apiVersion");
            m.remove("kind");
        }
        let mut schema = self.schema.clone();
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| !matches!(r.as_str(), Some("metadata" | "apiVersion" | "kind")));
        }
        validate(&root, &schema, "", &mut errs, &self.patterns);
        errs
    }

    fn generation(&self) -> Generation {
        Generation::AllButMetadataAndStatus
    }

    fn status_resets(&self) -> &'static [Reset] {
        &[Reset::AllButStatus]
    }

    fn allocate(&self, _obj: &mut Value, _cluster: &dyn Cluster) -> Result<(), Vec<FieldError>> {
        Ok(())
    }
}

fn dns_subdomain(name: &str) -> Vec<String> {
    let ok = name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if ok {
        Vec::new()
    } else {
        vec!["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into()]
    }
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true))
}

/// Removes what the schema does not declare (upstream's pruning). At the root `apiVersion`,
/// `kind` and `metadata` are always kept.
fn prune(value: &mut Value, schema: &Value, root: bool) {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keep_unknown = preserves(schema)
                || schema.get("additionalProperties") == Some(&json!(true))
                || schema.get("x-kubernetes-embedded-resource") == Some(&json!(true));
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(&k)).or(additional);
                match (sub, map.get_mut(&k)) {
                    (Some(sub), Some(v)) => prune(v, sub, false),
                    (None, _) if !keep_unknown => {
                        map.remove(&k);
                    }
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items {
                    prune(v, sub, false);
                }
            }
        }
        _ => {}
    }
}

/// Fills `default`s of absent properties, depth first (upstream's structural defaulting).
fn default(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    if !map.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                    if let Some(v) = map.get_mut(k) {
                        default(v, sub);
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for v in map.values_mut() {
                    default(v, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items {
                    default(v, sub);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Checks `value` against `schema`, with upstream's messages
/// (`spec.replicas in body must be of type integer: "string"`).
fn validate(
    value: &Value,
    schema: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
    patterns: &Mutex<HashMap<String, Option<regex::Regex>>>,
) {
    let shown = if path.is_empty() { "<root>" } else { path };
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&json!(true));
    if value.is_null() {
        if schema.get("nullable") != Some(&json!(true)) && schema.get("type").is_some() {
            errs.push(FieldError::invalid(
                path,
                json!("null"),
                format!(
                    "{shown} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or_default()
                ),
            ));
        }
        return;
    }
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let have = type_name(value);
        let ok = have == want
            || (want == "number" && have == "integer")
            || (int_or_string && matches!(have, "integer" | "string"));
        if !ok {
            errs.push(FieldError::invalid(
                path,
                json!(have),
                format!("{shown} in body must be of type {want}: \"{have}\""),
            ));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let allowed: Vec<String> = options
            .iter()
            .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string))
            .collect();
        let refs: Vec<&str> = allowed.iter().map(String::as_str).collect();
        errs.push(FieldError::not_supported(path, value.clone(), &refs));
    }
    match value {
        Value::Object(map) => {
            for r in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !map.contains_key(r) {
                    errs.push(FieldError::required(child(path, r), ""));
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map {
                if let Some(sub) = props.and_then(|p| p.get(k)).or(additional) {
                    validate(v, sub, &child(path, k), errs, patterns);
                }
            }
            count_rule(
                schema,
                "minProperties",
                "maxProperties",
                map.len(),
                path,
                "properties",
                errs,
            );
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    validate(v, sub, &format!("{path}[{i}]"), errs, patterns);
                }
            }
            count_rule(
                schema,
                "minItems",
                "maxItems",
                items.len(),
                path,
                "items",
                errs,
            );
        }
        Value::String(s) => {
            let len = s.chars().count() as i64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_i64)
                && len < min
            {
                errs.push(FieldError::invalid(
                    path,
                    value.clone(),
                    format!("{shown} in body should be at least {min} chars long"),
                ));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_i64)
                && len > max
            {
                errs.push(FieldError {
                    kind: ErrorType::TooLong,
                    field: path.to_string(),
                    value: None,
                    detail: format!("may not be more than {max} bytes"),
                });
            }
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                let mut cache = patterns.lock().unwrap_or_else(|e| e.into_inner());
                let re = cache
                    .entry(pattern.to_string())
                    .or_insert_with(|| regex::Regex::new(pattern).ok());
                if re.as_ref().is_some_and(|re| !re.is_match(s)) {
                    errs.push(FieldError::invalid(
                        path,
                        value.clone(),
                        format!("{shown} in body should match '{pattern}'"),
                    ));
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            let exclusive = |k: &str| schema.get(k) == Some(&json!(true));
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                let bad = if exclusive("exclusiveMinimum") {
                    x <= min
                } else {
                    x < min
                };
                if bad {
                    let rel = if exclusive("exclusiveMinimum") {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    errs.push(FieldError::invalid(
                        path,
                        value.clone(),
                        format!(
                            "{shown} in body should be {rel} {}",
                            number(&schema["minimum"])
                        ),
                    ));
                }
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                let bad = if exclusive("exclusiveMaximum") {
                    x >= max
                } else {
                    x > max
                };
                if bad {
                    let rel = if exclusive("exclusiveMaximum") {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    errs.push(FieldError::invalid(
                        path,
                        value.clone(),
                        format!(
                            "{shown} in body should be {rel} {}",
                            number(&schema["maximum"])
                        ),
                    ));
                }
            }
        }
        _ => {}
    }
}

fn number(v: &Value) -> String {
    v.to_string()
}

fn count_rule(
    schema: &Value,
    min_key: &str,
    max_key: &str,
    len: usize,
    path: &str,
    what: &str,
    errs: &mut Vec<FieldError>,
) {
    let shown = if path.is_empty() { "<root>" } else { path };
    let len = len as i64;
    if let Some(min) = schema.get(min_key).and_then(Value::as_i64)
        && len < min
    {
        errs.push(FieldError::invalid(
            path,
            json!(len),
            format!("{shown} in body should have at least {min} {what}"),
        ));
    }
    if let Some(max) = schema.get(max_key).and_then(Value::as_i64)
        && len > max
    {
        errs.push(FieldError {
            kind: ErrorType::TooMany,
            field: path.to_string(),
            value: Some(json!(len)),
            detail: format!("must have at most {max} {what}"),
        });
    }
}

/// The kinds a CustomResourceDefinition serves: one per served version, the storage version
/// owning the objects and the others viewing them through the `None` conversion.
pub fn kinds_of(crd: &Value) -> Vec<Kind> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let kind_name = names["kind"].as_str().unwrap_or_default();
    let plural = names["plural"].as_str().unwrap_or_default();
    if group.is_empty() || kind_name.is_empty() || plural.is_empty() {
        return Vec::new();
    }
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let mut out = Vec::new();
    for version in spec["versions"].as_array().into_iter().flatten() {
        let served = version["served"].as_bool().unwrap_or(false);
        let storage = version["storage"].as_bool().unwrap_or(false);
        if !served && !storage {
            continue;
        }
        let name = version["name"].as_str().unwrap_or_default();
        let schema = version
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        let mut kind = Kind::new(group, name, kind_name, plural, namespaced);
        kind.singular = names["singular"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map_or_else(|| kind_name.to_lowercase(), str::to_string);
        kind.short_names = strs(&names["shortNames"]);
        kind.categories = strs(&names["categories"]);
        let mut subs = Vec::new();
        if version
            .pointer("/subresources/status")
            .is_some_and(Value::is_object)
        {
            subs.push(Subresource::Status);
        }
        if version
            .pointer("/subresources/scale")
            .is_some_and(Value::is_object)
        {
            subs.push(Subresource::Scale);
        }
        kind.subresources = subs;
        kind.strategy = std::sync::Arc::new(CustomStrategy::new(schema.clone()));
        let columns: Vec<CustomColumn> = version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(CustomColumn::from_crd)
            .collect();
        kind.printer = if columns.is_empty() {
            Printer::Custom(vec![CustomColumn {
                name: "Age".into(),
                ty: "date".into(),
                format: String::new(),
                description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
            }])
        } else {
            Printer::Custom(columns)
        };
        // Upstream names the component by the reversed group: `com.example.v1.Widget`.
        let reversed: Vec<&str> = group.split('.').rev().collect();
        let mut component = with_standard_fields(schema);
        if let Value::Object(m) = &mut component {
            m.entry("description").or_insert(json!(""));
        }
        kind.schema = Some(Schema::Custom {
            name: format!("{}.{name}.{kind_name}", reversed.join(".")),
            schema: component,
        });
        if !storage {
            kind = kind.view_of(group, plural, Identity);
        }
        out.push(kind);
    }
    out
}

/// A custom resource schema with the fields every object has (`apiVersion`, `kind`, `metadata`),
/// as upstream publishes it, so that `kubectl explain` and field validation know them.
fn with_standard_fields(mut schema: Value) -> Value {
    if let Value::Object(m) = &mut schema {
        let props = m
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(p) = props {
            p.entry("apiVersion").or_insert(json!({"type": "string",
                "description": "APIVersion defines the versioned schema of this representation of an object."}));
            p.entry("kind").or_insert(json!({"type": "string",
                "description": "Kind is a string value representing the REST resource this object represents."}));
            // As upstream: described, so that `kubectl explain <crd>.metadata` shows
            // "Standard object's metadata".
            p.insert(
                "metadata".into(),
                json!({"description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                    "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]}),
            );
        }
    }
    schema
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        }})
    }

    fn msgs(obj: &Value) -> Vec<String> {
        CustomStrategy::new(schema())
            .validate(obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn prunes_defaults_and_validates() {
        let s = CustomStrategy::new(schema());
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 3, "extra": 1, "free": {"anything": {"goes": true}}}, "other": 2});
        s.defaults(&mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"size": 3, "free": {"anything": {"goes": true}}, "color": "red"}})
        );
        assert!(msgs(&obj).is_empty());
        let cases = [
            (
                json!({"spec": {"size": "3"}}),
                "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
            ),
            (json!({"spec": {}}), "spec.size: Required value"),
            (
                json!({"spec": {"size": 0}}),
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ),
            (
                json!({"spec": {"size": 11}}),
                "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
            ),
            (
                json!({"spec": {"size": 1, "color": "green"}}),
                "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"",
            ),
            (
                json!({"spec": {"size": 1, "name": "toolong"}}),
                "spec.name: Too long: may not be more than 5 bytes",
            ),
            (
                json!({"spec": {"size": 1, "name": "A1"}}),
                "spec.name: Invalid value: \"A1\": spec.name in body should match '^[a-z]+$'",
            ),
            (
                json!({"spec": {"size": 1, "tags": ["a", "b", "c"]}}),
                "spec.tags: Too many: 3: must have at most 2 items",
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(msgs(&obj), vec![want.to_string()], "{obj}");
        }
    }

    #[test]
    fn a_crd_serves_one_kind_per_version() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"], "categories": ["all"]},
        "versions": [
            {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema()},
             "subresources": {"status": {}},
             "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
            {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": schema()}},
            {"name": "v1alpha1", "served": false, "storage": false},
        ]}});
        let kinds = kinds_of(&crd);
        assert_eq!(kinds.len(), 2);
        assert_eq!(kinds[0].version, "v1");
        assert!(kinds[0].has(Subresource::Status));
        assert!(matches!(kinds[0].storage, super::super::Storage::Own));
        assert_eq!(kinds[1].storage_resource(), ("example.com", "widgets"));
        assert!(kinds[1].conversion().is_some());
        assert_eq!(kinds[0].short_names, ["wd"]);
        match &kinds[0].schema {
            Some(Schema::Custom { name, .. }) => assert_eq!(name, "com.example.v1.Widget"),
            _ => panic!("no schema"),
        }
    }
}
