//! `/openapi/v2`: the whole API as one Swagger 2.0 document, as upstream still serves it beside
//! v3. Clients read it for custom resources' schemas (client-go's `OpenAPISchema`, kubectl's
//! client-side validation and explain on older kubectls, and upstream's conformance specs, which
//! wait for a CRD's definition to appear, change and disappear here).
//!
//! Derived from the v3 documents rather than built a second time: their paths merged and
//! converted (`requestBody` to a `body` parameter, `content` to `schema` plus `consumes` and
//! `produces`), their component schemas as `definitions` with v3-only keywords dropped.

mod protobuf;

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{PerRegistry, REF_PREFIX, digest, docs};
use crate::discovery;
use crate::registry::{Kind, Registry, Schema};

const DEFINITIONS: &str = "#/definitions/";

/// One built document: its bytes and their digest (the ETag).
pub struct Document {
    /// The JSON.
    pub bytes: Bytes,
    /// A content hash, sent as the `ETag` so pollers get `304 Not Modified`.
    pub etag: String,
    /// The protobuf form and its own ETag, encoded on first request (kubectl asks for it only
    /// when it validates on the client), as upstream's handler caches each form lazily.
    protobuf: OnceLock<(Bytes, String)>,
}

impl Document {
    /// gnostic's `openapi.v2.Document` of this document, and its ETag.
    pub fn protobuf(&self) -> &(Bytes, String) {
        self.protobuf.get_or_init(|| {
            let doc: Value = serde_json::from_slice(&self.bytes).unwrap_or_default();
            let bytes = Bytes::from(protobuf::document(&doc));
            let etag = digest(&bytes);
            (bytes, etag)
        })
    }
}

/// The document last built.
static BUILT: PerRegistry<Document> = PerRegistry::new();

/// The document for `registry` as it is now, built once per registry revision.
pub fn document(registry: &Registry) -> Arc<Document> {
    BUILT.get(registry, |registry| {
        let bytes = Bytes::from(serde_json::to_vec(&build(registry)).unwrap_or_default());
        Document {
            etag: digest(&bytes),
            bytes,
            protobuf: OnceLock::new(),
        }
    })
}

fn build(registry: &Registry) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for doc in docs(registry).values() {
        if let Some(Value::Object(p)) = doc.value.get("paths") {
            for (path, item) in p {
                paths.insert(path.clone(), path_item(item));
            }
        }
        if let Some(Value::Object(s)) = doc.value.pointer("/components/schemas") {
            for (name, schema) in s {
                if !definitions.contains_key(name) {
                    definitions.insert(name.clone(), schema_v2(schema));
                }
            }
        }
    }
    // Custom resources are published as upstream's CRD builder publishes them for v2, which
    // differs from their v3 schema (what kubectl's v2 validation cannot cope with is dropped).
    for def in registry.kinds().iter() {
        if let Some(Schema::Custom { name, schema }) = &def.schema {
            definitions.insert(name.clone(), custom_definition(def, schema));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": discovery::version()["gitVersion"]},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {
                "type": "apiKey",
                "description": "Bearer Token authentication",
                "name": "authorization",
                "in": "header",
            }
        },
        "security": [{"BearerToken": []}],
    })
}

/// A v3 schema as Swagger 2.0 has it: `$ref`s into `definitions`, and without the keywords v2
/// lacks (`nullable`, `oneOf`, `anyOf`, `not`), which upstream drops the same way.
fn schema_v2(schema: &Value) -> Value {
    match schema {
        // v3 wraps a described reference as `allOf: [{$ref}]`; v2 puts the `$ref` beside the
        // description, as upstream's v2 document does.
        Value::Object(m)
            if m.get("allOf")
                .and_then(Value::as_array)
                .is_some_and(|a| a.len() == 1 && a[0].get("$ref").is_some()) =>
        {
            let mut m = m.clone();
            if let Some(Value::Array(mut all)) = m.remove("allOf")
                && let Some(Value::Object(r)) = all.pop()
            {
                m.extend(r);
            }
            schema_v2(&Value::Object(m))
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "nullable" | "oneOf" | "anyOf" | "not"))
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => Value::String(
                            r.strip_prefix(REF_PREFIX)
                                .map_or_else(|| r.clone(), |n| format!("{DEFINITIONS}{n}")),
                        ),
                        // Maps from names to schemas.
                        ("properties" | "patternProperties" | "definitions", Value::Object(p)) => {
                            Value::Object(
                                p.iter().map(|(n, s)| (n.clone(), schema_v2(s))).collect(),
                            )
                        }
                        // A schema, or a list of them.
                        ("items" | "additionalProperties" | "additionalItems", v) => schema_v2(v),
                        ("allOf", Value::Array(a)) => {
                            Value::Array(a.iter().map(schema_v2).collect())
                        }
                        // Everything else is data (enum values, defaults, examples, extensions).
                        (_, v) => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(schema_v2).collect()),
        other => other.clone(),
    }
}

const OBJECT_META: &str = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// A custom resource's v2 definition, as upstream's `buildKubeNative` for v2: a schema that
/// preserves unknown fields at its root is published as a bare object; otherwise the structural
/// schema made v2-safe (`ToStructuralOpenAPIV2`) with `metadata`, `apiVersion` and `kind`.
fn custom_definition(def: &Kind, component: &Value) -> Value {
    let gvk = json!([{"group": def.group, "kind": def.kind, "version": def.version}]);
    if component.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) {
        return json!({"type": "object", "x-kubernetes-group-version-kind": gvk});
    }
    let mut out = schema_v2(&structural_v2(component));
    if let Value::Object(m) = &mut out {
        if m.get("description") == Some(&json!("")) {
            m.remove("description");
        }
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Value::Object(p) = props {
            p.insert(
                "metadata".into(),
                json!({"$ref": OBJECT_META, "description": METADATA_DESCRIPTION}),
            );
            p.insert(
                "apiVersion".into(),
                json!({"type": "string", "description": API_VERSION_DESCRIPTION}),
            );
            p.insert(
                "kind".into(),
                json!({"type": "string", "description": KIND_DESCRIPTION}),
            );
        }
        m.insert("x-kubernetes-group-version-kind".into(), gvk);
    }
    out
}

/// Upstream's `ToStructuralOpenAPIV2` over a schema: nullable and unknown-preserving nodes lose
/// their `items` and `properties` (and their type where kubectl would misread it), and a
/// nullable property is not required.
fn structural_v2(schema: &Value) -> Value {
    let Value::Object(m) = schema else {
        return schema.clone();
    };
    let mut m = m.clone();
    let preserve = m.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if m.remove("nullable") == Some(json!(true)) {
        m.remove("type");
        m.remove("items");
        m.remove("properties");
    }
    if preserve {
        m.remove("items");
        m.remove("properties");
    }
    if !m.contains_key("items") && m.get("type") == Some(&json!("array")) {
        m.remove("type");
    }
    if preserve && m.get("type") == Some(&json!("object")) {
        m.remove("type");
    }
    let nullable: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, p)| p.get("nullable") == Some(&json!(true)))
        .map(|(k, _)| k.clone())
        .collect();
    if let Some(Value::Array(required)) = m.get_mut("required") {
        required.retain(|r| !nullable.iter().any(|n| r == n));
    }
    if m.get("additionalProperties")
        .and_then(|a| a.get("nullable"))
        == Some(&json!(true))
    {
        m.remove("required");
    }
    if m.get("required")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        m.remove("required");
    }
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for v in props.values_mut() {
            *v = structural_v2(v);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(v) = m.get_mut(key).filter(|v| v.is_object()) {
            *v = structural_v2(v);
        }
    }
    Value::Object(m)
}

fn path_item(item: &Value) -> Value {
    let Value::Object(m) = item else {
        return item.clone();
    };
    let out = m
        .iter()
        .map(|(k, v)| {
            let v = match k.as_str() {
                "parameters" => parameters(v),
                _ if v.is_object() => operation(v),
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    Value::Object(out)
}

/// v3 parameters carry their type in `schema`; v2's carry it inline.
fn parameters(params: &Value) -> Value {
    let Value::Array(a) = params else {
        return params.clone();
    };
    Value::Array(
        a.iter()
            .map(|p| {
                let mut p = p.clone();
                if let Value::Object(m) = &mut p
                    && let Some(Value::Object(schema)) = m.remove("schema")
                {
                    for (k, v) in schema {
                        m.insert(k, v);
                    }
                }
                p
            })
            .collect(),
    )
}

fn operation(op: &Value) -> Value {
    let Value::Object(m) = op else {
        return op.clone();
    };
    let mut out = Map::new();
    let mut params = m.get("parameters").map_or_else(|| json!([]), parameters);
    let mut consumes = Vec::new();
    let mut produces = Vec::new();
    for (k, v) in m {
        match k.as_str() {
            "parameters" => {}
            "requestBody" => {
                let (schema, types) = content(v.get("content"));
                consumes = types;
                if let Value::Array(a) = &mut params {
                    a.insert(
                        0,
                        json!({"name": "body", "in": "body", "required": v.get("required").cloned().unwrap_or(json!(false)), "schema": schema}),
                    );
                }
            }
            "responses" => {
                let mut rs = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let mut resp = Map::new();
                    resp.insert(
                        "description".into(),
                        r.get("description").cloned().unwrap_or(json!("")),
                    );
                    if r.get("content").is_some() {
                        let (schema, types) = content(r.get("content"));
                        resp.insert("schema".into(), schema);
                        for t in types {
                            if !produces.contains(&t) {
                                produces.push(t);
                            }
                        }
                    }
                    rs.insert(code.clone(), Value::Object(resp));
                }
                out.insert("responses".into(), Value::Object(rs));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !consumes.is_empty() {
        out.insert("consumes".into(), json!(consumes));
    }
    if !produces.is_empty() {
        out.insert("produces".into(), json!(produces));
    }
    out.insert("schemes".into(), json!(["https"]));
    if params.as_array().is_some_and(|a| !a.is_empty()) {
        out.insert("parameters".into(), params);
    }
    Value::Object(out)
}

/// The schema of a v3 `content` map (the same for every media type here) and its media types.
fn content(content: Option<&Value>) -> (Value, Vec<String>) {
    let Some(Value::Object(m)) = content else {
        return (json!({}), Vec::new());
    };
    let schema = m
        .values()
        .find_map(|c| c.get("schema"))
        .map_or_else(|| json!({}), schema_v2);
    (schema, m.keys().cloned().collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;

    #[test]
    fn refs_point_into_definitions_and_v3_keywords_are_dropped() {
        let v3 = json!({"type": "object", "nullable": true, "properties": {
            "a": {"$ref": "#/components/schemas/x.Y"},
            "d": {"description": "D", "allOf": [{"$ref": "#/components/schemas/x.Y"}]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
            "c": {"type": "string", "enum": ["nullable"]},
        }});
        assert_eq!(
            schema_v2(&v3),
            json!({"type": "object", "properties": {
                "a": {"$ref": "#/definitions/x.Y"},
                "d": {"description": "D", "$ref": "#/definitions/x.Y"},
                "b": {"x-kubernetes-int-or-string": true},
                "c": {"type": "string", "enum": ["nullable"]},
            }})
        );
    }

    #[test]
    fn operations_take_their_body_as_a_parameter() {
        let v3 = json!({
            "operationId": "createNamespacedPod",
            "parameters": [{"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}],
            "requestBody": {"content": {"*/*": {"schema": {"$ref": "#/components/schemas/P"}}}, "required": true},
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/P"}}}},
                          "401": {"description": "Unauthorized"}},
        });
        let v2 = operation(&v3);
        assert_eq!(
            v2["parameters"],
            json!([
                {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/P"}},
                {"name": "dryRun", "in": "query", "type": "string", "uniqueItems": true},
            ])
        );
        assert_eq!(v2["consumes"], json!(["*/*"]));
        assert_eq!(v2["produces"], json!(["application/json"]));
        assert_eq!(
            v2["responses"]["200"],
            json!({"description": "OK", "schema": {"$ref": "#/definitions/P"}})
        );
        assert_eq!(
            v2["responses"]["401"],
            json!({"description": "Unauthorized"})
        );
    }
}
