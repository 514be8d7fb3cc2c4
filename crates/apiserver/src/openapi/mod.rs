//! OpenAPI v3 documents (`/openapi/v3` and one document per group/version) and strict-decoding
//! unknown-field detection against the same schemas.
//!
//! kubectl reads these on nearly every command: `apply --validate=strict` looks for the
//! `fieldValidation` parameter on the kind's PATCH operation to hand validation to the server,
//! `apply` computes its strategic merge patch from the `x-kubernetes-patch-*` extensions, and
//! `explain` walks the schemas found by `x-kubernetes-group-version-kind`. The component schemas are
//! generated from k8s-openapi's types (its `schemars` impls already use upstream's names), then
//! decorated with what those impls lack. Everything is built once and cached.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Map, Value, json};

mod components;
mod params;
mod paths;
mod unknown;
pub mod v2;

use components::*;
pub use components::{component, components, property_description, schema_of};
use params::*;
use paths::*;
pub use unknown::{take_unknown, unknown_fields};

use crate::discovery;
use crate::registry::{Registry, Schema};

/// `/openapi/v3`: the index kubectl reads first, one entry per served group/version whose URL
/// carries a content hash so clients may cache the document for good.
pub fn index(registry: &Registry) -> Value {
    let paths: Map<String, Value> = docs(registry)
        .iter()
        .map(|(path, doc)| {
            let url = format!("/openapi/v3/{path}?hash={}", doc.hash);
            (path.clone(), json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `/openapi/v3/{path}` for `path` like `api/v1` or `apis/apps/v1`: an OpenAPI 3.0 document with
/// the group/version's operations and every schema they reach.
pub fn group_version(registry: &Registry, path: &str) -> Option<Value> {
    docs(registry)
        .get(path.trim_matches('/'))
        .map(|d| d.value.clone())
}

/// [`group_version`] already serialized, so the hot path (kubectl fetches it per command) does
/// no work.
pub fn group_version_bytes(registry: &Registry, path: &str) -> Option<Bytes> {
    docs(registry)
        .get(path.trim_matches('/'))
        .map(|d| d.bytes.clone())
}

/// The content hash of a group/version document, as put in the index URLs (to compare with a
/// request's `hash` query parameter).
pub fn group_version_hash(registry: &Registry, path: &str) -> Option<String> {
    docs(registry)
        .get(path.trim_matches('/'))
        .map(|d| d.hash.clone())
}

/// One group/version document.
pub struct Doc {
    value: Value,
    bytes: Bytes,
    hash: String,
}

/// The documents of one registry revision, by path (`apis/apps/v1`).
pub type Docs = BTreeMap<String, Doc>;

/// What is built from a registry, kept per (registry id, registry revision): kubectl fetches the
/// documents on nearly every command, and they change only when a kind is added or removed.
/// Registries of servers that stopped are forgotten soon enough (16 are kept).
struct PerRegistry<T>(Mutex<Vec<(u64, u64, Arc<T>)>>);

impl<T> PerRegistry<T> {
    const fn new() -> Self {
        Self(Mutex::new(Vec::new()))
    }

    /// The value for `registry` as it is now, built by `build` when it changed.
    fn get(&self, registry: &Registry, build: impl FnOnce(&Registry) -> T) -> Arc<T> {
        let (id, revision) = (registry.id(), registry.revision());
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, v)) = cache.iter().find(|(i, r, _)| *i == id && *r == revision) {
            return v.clone();
        }
        let built = Arc::new(build(registry));
        cache.retain(|(i, _, _)| *i != id);
        if cache.len() >= 16 {
            cache.remove(0);
        }
        cache.push((id, revision, built.clone()));
        built
    }
}

/// The v3 documents last built.
static DOCS: PerRegistry<Docs> = PerRegistry::new();

/// The documents of `registry` as it is now, built once per registry revision.
fn docs(registry: &Registry) -> Arc<Docs> {
    DOCS.get(registry, build_docs)
}

fn build_docs(registry: &Registry) -> Docs {
    let components = &*COMPONENTS;
    let kinds = registry.kinds();
    // Run-time kinds bring their own schemas (and list schemas).
    let mut custom = Map::new();
    for def in kinds.iter() {
        if let Some(Schema::Custom { name, schema }) = &def.schema {
            let mut schema = schema.clone();
            if let Value::Object(m) = &mut schema {
                m.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": def.group, "kind": def.kind, "version": def.version}]),
                );
            }
            custom.insert(name.clone(), schema);
            custom.insert(format!("{name}List"), list_schema(def, name));
        }
    }
    let mut out = BTreeMap::new();
    for (group, version) in registry.group_versions() {
        let gv = Gv::new(&group, &version);
        let mut paths = Map::new();
        let mut resources_op = Map::new();
        resources_op.insert(
            "get".into(),
            json!({
                "tags": [gv.tag],
                "description": "get available resources",
                "operationId": format!("get{}APIResources", gv.op),
                "responses": responses(&[("200", "OK")], &format!("{META}APIResourceList"), OBJECT_TYPES),
            }),
        );
        paths.insert(format!("{}/", gv.prefix), Value::Object(resources_op));
        for def in kinds
            .iter()
            .filter(|r| r.group == gv.group && r.version == gv.version)
        {
            let kind_schema = match &def.schema {
                Some(Schema::Builtin(_)) => components
                    .by_gvk
                    .get(&(def.group.clone(), def.version.clone(), def.kind.clone()))
                    .cloned(),
                Some(Schema::Custom { name, .. }) => Some(name.clone()),
                None => None,
            };
            let Some(kind_schema) = kind_schema else {
                continue;
            };
            resource_paths(&gv, def, &kind_schema, &mut paths);
        }
        let paths = Value::Object(paths);
        let schemas = reachable(&paths, &components.schemas, &custom);
        let value = json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": discovery::version()["gitVersion"]},
            "paths": paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "BearerToken": {
                        "type": "apiKey",
                        "description": "Bearer Token authentication",
                        "name": "authorization",
                        "in": "header",
                    }
                },
            },
        });
        let bytes = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        let hash = digest(&bytes);
        let key = gv.prefix.trim_start_matches('/').to_string();
        out.insert(key, Doc { value, bytes, hash });
    }
    out
}

/// The components `root` refers to, transitively, in name order, from the built-in `schemas`
/// and the run-time `custom` ones.
fn reachable(
    root: &Value,
    schemas: &Map<String, Value>,
    custom: &Map<String, Value>,
) -> Map<String, Value> {
    let get = |n: &str| custom.get(n).or_else(|| schemas.get(n));
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = Vec::new();
    collect_refs(root, &mut todo);
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(s) = get(&name) {
            collect_refs(s, &mut todo);
        }
    }
    seen.into_iter()
        .filter_map(|n| get(&n).map(|s| (n, s.clone())))
        .collect()
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix(REF_PREFIX)) {
                        out.push(name.to_string());
                    }
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// A stable content digest for cache-busting URLs: 128-bit FNV-1a, upper-case hex like upstream's.
fn digest(bytes: &[u8]) -> String {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in bytes {
        h ^= u128::from(*b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    format!("{h:032X}")
}

// ---------------------------------------------------------------------------------------------
// Unknown fields.

#[cfg(test)]
mod tests;
