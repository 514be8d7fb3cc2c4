//! OpenAPI v3 documents (`/openapi/v3` and one document per group/version) and strict-decoding
//! unknown-field detection against the same schemas.
//!
//! kubectl reads these on nearly every command: `apply --validate=strict` looks for the
//! `fieldValidation` parameter on the kind's PATCH operation to hand validation to the server,
//! `apply` computes its strategic merge patch from the `x-kubernetes-patch-*` extensions, and
//! `explain` walks the schemas found by `x-kubernetes-group-version-kind`. The component schemas are
//! generated from k8s-openapi's types (its `schemars` impls already use upstream's names), then
//! decorated with what those impls lack. Everything is built once and cached.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;
use k8s_openapi::api::{autoscaling, core, policy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

pub mod v2;

use crate::discovery;
use crate::registry::{Kind, Registry, Schema, Subresource, builtin_kinds};

const REF_PREFIX: &str = "#/components/schemas/";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

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

/// The schema of a kind (its root; `$ref`s inside point at other components), for callers that
/// validate or merge objects themselves.
pub fn schema_of(def: &Kind) -> Option<&Value> {
    match def.schema.as_ref()? {
        Schema::Builtin(_) => {
            let name = COMPONENTS.by_gvk.get(&(
                def.group.clone(),
                def.version.clone(),
                def.kind.clone(),
            ))?;
            COMPONENTS.schemas.get(name)
        }
        Schema::Custom { schema, .. } => Some(schema),
    }
}

/// A built-in component schema by name (`io.k8s.api.core.v1.PodSpec`), to follow `$ref`s.
pub fn component(name: &str) -> Option<&'static Value> {
    COMPONENTS.schemas.get(name)
}

/// Every component schema (kinds' schemas `$ref` into these), for server-side apply's merge
/// rules.
pub fn components() -> &'static Map<String, Value> {
    &COMPONENTS.schemas
}

/// The description of one property of a component, e.g. (`io.k8s.api.core.v1.PodStatus`,
/// `podIP`); server-side tables reuse upstream's field docs as column descriptions.
pub fn property_description(schema: &str, property: &str) -> Option<&'static str> {
    COMPONENTS
        .schemas
        .get(schema)?
        .get("properties")?
        .get(property)?
        .get("description")?
        .as_str()
}

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

/// The component schemas of every built-in kind plus a GVK index.
struct Components {
    schemas: Map<String, Value>,
    by_gvk: HashMap<(String, String, String), String>,
}

/// One group/version document.
pub struct Doc {
    value: Value,
    bytes: Bytes,
    hash: String,
}

/// The documents of one registry revision, by path (`apis/apps/v1`).
pub type Docs = BTreeMap<String, Doc>;

static COMPONENTS: LazyLock<Components> = LazyLock::new(build_components);

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

/// (group, version, kind) of the kinds whose schemas are generated, and the generator call.
type Register = fn(&mut SchemaGenerator) -> String;

fn reg<T: schemars::JsonSchema>(g: &mut SchemaGenerator) -> String {
    g.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// The kinds subresources and errors use, which are not served kinds themselves.
const EXTRA_KINDS: &[(&str, &str, &str, Register)] = &[
    ("", "v1", "Binding", reg::<core::v1::Binding>),
    ("autoscaling", "v1", "Scale", reg::<autoscaling::v1::Scale>),
    ("policy", "v1", "Eviction", reg::<policy::v1::Eviction>),
    (
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
        reg::<k8s_openapi::api::authentication::v1::TokenRequest>,
    ),
    ("", "v1", "Status", reg::<meta::Status>),
];

/// Upstream's `patchStrategy`/`patchMergeKey` tags on the lists (and the one retainKeys struct)
/// reachable from the served kinds: (component, property, strategy, merge key).
const PATCH_META: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        "merge",
        None,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "merge",
        Some("uid"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "hostAliases",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        "merge",
        Some("topologyKey"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        "merge",
        Some("containerPort"),
    ),
    ("io.k8s.api.core.v1.Container", "env", "merge", Some("name")),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        "merge",
        Some("containerPort"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "podIPs",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "hostIPs",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "resourceClaimStatuses",
        "merge,retainKeys",
        Some("name"),
    ),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", "merge", None),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "addresses",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ports",
        "merge",
        Some("port"),
    ),
    (
        "io.k8s.api.core.v1.ServiceStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "secrets",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.ReplicationControllerStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.batch.v1.JobStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "strategy",
        "retainKeys",
        None,
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
];

/// rollwright's `podUpdatePolicy` and `paused` live in these rolling-update structs.
const POD_UPDATE_POLICY_IN: &[&str] = &[
    "io.k8s.api.apps.v1.RollingUpdateDaemonSet",
    "io.k8s.api.apps.v1.RollingUpdateStatefulSetStrategy",
];

fn build_components() -> Components {
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let mut gvk_names: Vec<(String, String, String, String)> = Vec::new();
    for kind in builtin_kinds() {
        if let Some(Schema::Builtin(register)) = &kind.schema {
            let name = register(&mut generator);
            gvk_names.push((
                kind.group.clone(),
                kind.version.clone(),
                kind.kind.clone(),
                name,
            ));
        }
    }
    for (g, v, k, register) in EXTRA_KINDS {
        let name = register(&mut generator);
        gvk_names.push((g.to_string(), v.to_string(), k.to_string(), name));
    }
    for extra in [
        reg::<meta::DeleteOptions>,
        reg::<meta::WatchEvent<core::v1::Pod>>,
        reg::<meta::Patch>,
        reg::<meta::APIResourceList>,
        reg::<meta::ListMeta>,
    ] {
        extra(&mut generator);
    }
    let mut schemas = generator.take_definitions(true);
    let mut by_gvk = HashMap::new();
    for (g, v, k, name) in &gvk_names {
        if let Some(Value::Object(s)) = schemas.get_mut(name) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": g, "kind": k, "version": v}]),
            );
        }
        by_gvk.insert((g.clone(), v.clone(), k.clone()), name.clone());
    }
    // The list kinds have no k8s-openapi schemars impl: derive them from their item kind.
    // (The review kinds have none: they are never listed.)
    for def in builtin_kinds().iter().filter(|k| k.is_stored()) {
        let Some(item) = by_gvk
            .get(&(def.group.clone(), def.version.clone(), def.kind.clone()))
            .cloned()
        else {
            continue;
        };
        let name = format!("{item}List");
        schemas.insert(name.clone(), list_schema(def, &item));
        by_gvk.insert(
            (def.group.clone(), def.version.clone(), def.list_kind()),
            name,
        );
    }
    // DeleteOptions and WatchEvent are shared by every group/version, like upstream.
    let mut shared_gvks: Vec<(String, String)> = vec![(String::new(), "v1".into())];
    for k in builtin_kinds() {
        let gv = (k.group.clone(), k.version.clone());
        if !k.group.is_empty() && !shared_gvks.contains(&gv) {
            shared_gvks.push(gv);
        }
    }
    for kind in ["DeleteOptions", "WatchEvent"] {
        let list: Vec<Value> = shared_gvks
            .iter()
            .map(|(g, v)| json!({"group": g, "kind": kind, "version": v}))
            .collect();
        if let Some(Value::Object(s)) = schemas.get_mut(&format!("{META}{kind}")) {
            s.insert("x-kubernetes-group-version-kind".into(), Value::Array(list));
        }
        by_gvk.insert(
            ("".into(), "v1".into(), kind.into()),
            format!("{META}{kind}"),
        );
    }
    apply_patch_meta(&mut schemas);
    apply_patch_meta(&mut schemas);
    api::apply::builtin::decorate(&mut schemas);
    add_rollwright_extensions(&mut schemas);
    Components { schemas, by_gvk }
}

fn list_schema(def: &Kind, item: &str) -> Value {
    let kind = &def.kind;
    json!({
        "description": format!("{kind}List is a list of {kind} objects."),
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string",
            },
            "items": {
                "description": format!("Items is the list of {kind} objects."),
                "type": "array",
                "items": {"$ref": format!("{REF_PREFIX}{item}")},
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string",
            },
            "metadata": {
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                "allOf": [{"$ref": format!("{REF_PREFIX}{META}ListMeta")}],
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [
            {"group": def.group, "kind": def.list_kind(), "version": def.version}
        ],
    })
}

/// Adds the strategic-merge extensions; returns how many were placed (all, unless k8s-openapi's
/// schemas changed shape).
fn apply_patch_meta(schemas: &mut Map<String, Value>) -> usize {
    let mut placed = 0;
    for (schema, prop, strategy, key) in PATCH_META {
        let Some(Value::Object(p)) = schemas
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(*prop))
        else {
            continue;
        };
        p.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        if let Some(key) = key {
            p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
        placed += 1;
    }
    placed
}

fn add_rollwright_extensions(schemas: &mut Map<String, Value>) {
    for schema in POD_UPDATE_POLICY_IN {
        if let Some(Value::Object(props)) = schemas
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
        {
            props.insert(
                "podUpdatePolicy".into(),
                json!({
                    "description": "rollwright extension: how pods move to a new revision. \"Recreate\" (default) deletes and recreates them; \"InPlaceIfPossible\" updates container images in place when only images changed.",
                    "type": "string",
                }),
            );
            props.insert(
                "paused".into(),
                json!({
                    "description": "rollwright extension: while true the controller replaces no pod of an old revision; pods for new nodes or missing ordinals are still created. Defaults to false.",
                    "type": "boolean",
                }),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Paths.

/// Names used in one group/version's operations.
struct Gv {
    group: String,
    version: String,
    /// `/api/v1` or `/apis/apps/v1`.
    prefix: String,
    /// `CoreV1`, `AppsV1`, `CoordinationV1`: the middle of upstream's operation ids.
    op: String,
    /// `core_v1`, `apps_v1`, `coordination_v1`.
    tag: String,
}

impl Gv {
    fn new(group: &str, version: &str) -> Gv {
        let short = group.strip_suffix(".k8s.io").unwrap_or(group);
        let mut camel = String::new();
        let mut lower_camel = String::new();
        for (i, part) in short.split('.').enumerate() {
            let cap = capitalize(part);
            camel.push_str(&cap);
            lower_camel.push_str(if i == 0 { part } else { &cap });
        }
        if group.is_empty() {
            camel = "Core".into();
            lower_camel = "core".into();
        }
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        Gv {
            group: group.to_string(),
            version: version.to_string(),
            prefix,
            op: format!("{camel}{}", capitalize(version)),
            tag: format!("{lower_camel}_{version}"),
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{name}")})
}

fn gvk_obj(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// Upstream's query parameters: (name, type, description).
const QUERY_PARAMS: &[(&str, &str, &str)] = &[
    (
        "allowWatchBookmarks",
        "boolean",
        "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion.",
    ),
    (
        "continue",
        "string",
        "The continue option should be set when retrieving more results from the server. Its value is the continue token of the previous list response.",
    ),
    (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
    ),
    (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    (
        "fieldSelector",
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
    ),
    (
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
    ),
    (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted. Zero means delete immediately.",
    ),
    (
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        "boolean",
        "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.",
    ),
    (
        "labelSelector",
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    (
        "limit",
        "integer",
        "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned.",
    ),
    (
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    ),
    (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed. Acceptable values are: 'Orphan', 'Background', 'Foreground'.",
    ),
    (
        "resourceVersion",
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    (
        "resourceVersionMatch",
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls.",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
    ),
    (
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
    ),
];

const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_PARAMS: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];
const DELETE_COLLECTION_PARAMS: &[&str] = &[
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
];

fn query_params(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .filter_map(|n| QUERY_PARAMS.iter().find(|(q, ..)| q == n))
        .map(|(name, ty, desc)| {
            json!({
                "name": name,
                "in": "query",
                "description": desc,
                "schema": {"type": ty, "uniqueItems": true},
            })
        })
        .collect()
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn content(schema: &str, types: &[&str]) -> Value {
    let m: Map<String, Value> = types
        .iter()
        .map(|t| (t.to_string(), json!({"schema": schema_ref(schema)})))
        .collect();
    Value::Object(m)
}

const OBJECT_TYPES: &[&str] = &["application/json", "application/yaml"];
const LIST_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];
const WATCH_TYPES: &[&str] = &["application/json", "application/json;stream=watch"];

fn responses(codes: &[(&str, &str)], schema: &str, types: &[&str]) -> Value {
    let mut m = Map::new();
    for (code, desc) in codes {
        m.insert(
            code.to_string(),
            json!({"description": desc, "content": content(schema, types)}),
        );
    }
    m.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(m)
}

/// One operation.
struct Op<'a> {
    method: &'static str,
    description: String,
    id: String,
    action: &'static str,
    gvk: Value,
    params: &'a [&'a str],
    body: Option<Value>,
    responses: Value,
}

fn op_value(gv: &Gv, op: Op) -> Value {
    let mut m = Map::new();
    m.insert("tags".into(), json!([gv.tag]));
    m.insert("description".into(), json!(op.description));
    m.insert("operationId".into(), json!(op.id));
    let params = query_params(op.params);
    if !params.is_empty() {
        m.insert("parameters".into(), Value::Array(params));
    }
    if let Some(body) = op.body {
        m.insert("requestBody".into(), body);
    }
    m.insert("responses".into(), op.responses);
    m.insert("x-kubernetes-action".into(), json!(op.action));
    m.insert("x-kubernetes-group-version-kind".into(), op.gvk);
    Value::Object(m)
}

fn body(schema: &str) -> Value {
    json!({"content": {"*/*": {"schema": schema_ref(schema)}}, "required": true})
}

fn patch_body() -> Value {
    let types = [
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ];
    json!({"content": content(&format!("{META}Patch"), &types), "required": true})
}

fn delete_body() -> Value {
    json!({"content": {"*/*": {"schema": schema_ref(&format!("{META}DeleteOptions"))}}})
}

fn path_item(ops: Vec<Op>, gv: &Gv, params: Vec<Value>) -> Value {
    let mut m = Map::new();
    for op in ops {
        let method = op.method;
        m.insert(method.into(), op_value(gv, op));
    }
    m.insert("parameters".into(), Value::Array(params));
    Value::Object(m)
}

/// The operations of one resource (and its subresources) into `paths`.
fn resource_paths(gv: &Gv, def: &Kind, kind_schema: &str, paths: &mut Map<String, Value>) {
    let kind = &def.kind;
    let gvk = gvk_obj(&def.group, &def.version, kind);
    let list_schema = format!("{kind_schema}List");
    let watch_event = format!("{META}WatchEvent");
    let status = format!("{META}Status");
    let ns = if def.namespaced { "Namespaced" } else { "" };
    let pretty = || query_params(&["pretty"]).remove(0);
    let namespace = || {
        path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        )
    };
    let name = || path_param("name", &format!("name of the {kind}"));
    let scope = |with_name: bool| {
        let mut v = Vec::new();
        if with_name {
            v.push(name());
        }
        if def.namespaced {
            v.push(namespace());
        }
        v.push(pretty());
        v
    };
    let (collection, watch_collection) = if def.namespaced {
        (
            format!("{}/namespaces/{{namespace}}/{}", gv.prefix, def.plural),
            format!(
                "{}/watch/namespaces/{{namespace}}/{}",
                gv.prefix, def.plural
            ),
        )
    } else {
        (
            format!("{}/{}", gv.prefix, def.plural),
            format!("{}/watch/{}", gv.prefix, def.plural),
        )
    };
    let o = &gv.op;
    let ok = [("200", "OK")];
    let created = [("200", "OK"), ("201", "Created"), ("202", "Accepted")];
    let replaced = [("200", "OK"), ("201", "Created")];

    if !def.is_stored() {
        // The review kinds: a create and nothing else, as upstream publishes them.
        let create = Op {
            method: "post",
            description: format!("create a {kind}"),
            id: format!("create{o}{ns}{kind}"),
            action: "post",
            gvk: gvk.clone(),
            params: WRITE_PARAMS,
            body: Some(body(kind_schema)),
            responses: responses(&created, kind_schema, OBJECT_TYPES),
        };
        paths.insert(collection, path_item(vec![create], gv, scope(false)));
        return;
    }

    // Collection.
    let mut ops = vec![
        Op {
            method: "get",
            description: format!("list or watch objects of kind {kind}"),
            id: format!("list{o}{ns}{kind}"),
            action: "list",
            gvk: gvk.clone(),
            params: LIST_PARAMS,
            body: None,
            responses: responses(&ok, &list_schema, LIST_TYPES),
        },
        Op {
            method: "post",
            description: format!("create a {kind}"),
            id: format!("create{o}{ns}{kind}"),
            action: "post",
            gvk: gvk.clone(),
            params: WRITE_PARAMS,
            body: Some(body(kind_schema)),
            responses: responses(&created, kind_schema, OBJECT_TYPES),
        },
    ];
    let collection_delete = discovery::verbs(def).contains(&"deletecollection");
    if collection_delete {
        ops.push(Op {
            method: "delete",
            description: format!("delete collection of {kind}"),
            id: format!("delete{o}Collection{ns}{kind}"),
            action: "deletecollection",
            gvk: gvk.clone(),
            params: DELETE_COLLECTION_PARAMS,
            body: Some(delete_body()),
            responses: responses(&ok, &status, OBJECT_TYPES),
        });
    }
    paths.insert(collection.clone(), path_item(ops, gv, scope(false)));

    // One object.
    let deleted = if def.graceful_delete() {
        kind_schema.to_string()
    } else {
        status.clone()
    };
    let ops = vec![
        Op {
            method: "get",
            description: format!("read the specified {kind}"),
            id: format!("read{o}{ns}{kind}"),
            action: "get",
            gvk: gvk.clone(),
            params: &[],
            body: None,
            responses: responses(&ok, kind_schema, OBJECT_TYPES),
        },
        Op {
            method: "put",
            description: format!("replace the specified {kind}"),
            id: format!("replace{o}{ns}{kind}"),
            action: "put",
            gvk: gvk.clone(),
            params: WRITE_PARAMS,
            body: Some(body(kind_schema)),
            responses: responses(&replaced, kind_schema, OBJECT_TYPES),
        },
        Op {
            method: "patch",
            description: format!("partially update the specified {kind}"),
            id: format!("patch{o}{ns}{kind}"),
            action: "patch",
            gvk: gvk.clone(),
            params: PATCH_PARAMS,
            body: Some(patch_body()),
            responses: responses(&replaced, kind_schema, OBJECT_TYPES),
        },
        Op {
            method: "delete",
            description: format!("delete a {kind}"),
            id: format!("delete{o}{ns}{kind}"),
            action: "delete",
            gvk: gvk.clone(),
            params: DELETE_PARAMS,
            body: Some(delete_body()),
            responses: responses(
                &[("200", "OK"), ("202", "Accepted")],
                &deleted,
                OBJECT_TYPES,
            ),
        },
    ];
    paths.insert(
        format!("{collection}/{{name}}"),
        path_item(ops, gv, scope(true)),
    );

    // Subresources.
    for &sub in &def.subresources {
        let suffix = capitalize(sub.name());
        let path = format!("{collection}/{{name}}/{}", sub.name());
        let ops = match sub {
            Subresource::Status | Subresource::Scale | Subresource::Approval => {
                let (schema, sgvk) = if sub == Subresource::Scale {
                    (
                        "io.k8s.api.autoscaling.v1.Scale".to_string(),
                        gvk_obj("autoscaling", "v1", "Scale"),
                    )
                } else {
                    (kind_schema.to_string(), gvk.clone())
                };
                let what = format!("{} of the specified {kind}", sub.name());
                vec![
                    Op {
                        method: "get",
                        description: format!("read {what}"),
                        id: format!("read{o}{ns}{kind}{suffix}"),
                        action: "get",
                        gvk: sgvk.clone(),
                        params: &[],
                        body: None,
                        responses: responses(&ok, &schema, OBJECT_TYPES),
                    },
                    Op {
                        method: "put",
                        description: format!("replace {what}"),
                        id: format!("replace{o}{ns}{kind}{suffix}"),
                        action: "put",
                        gvk: sgvk.clone(),
                        params: WRITE_PARAMS,
                        body: Some(body(&schema)),
                        responses: responses(&replaced, &schema, OBJECT_TYPES),
                    },
                    Op {
                        method: "patch",
                        description: format!("partially update {what}"),
                        id: format!("patch{o}{ns}{kind}{suffix}"),
                        action: "patch",
                        gvk: sgvk,
                        params: PATCH_PARAMS,
                        body: Some(patch_body()),
                        responses: responses(&replaced, &schema, OBJECT_TYPES),
                    },
                ]
            }
            Subresource::Binding | Subresource::Eviction | Subresource::Token => {
                let (schema, sgvk) = match sub {
                    Subresource::Binding => {
                        ("io.k8s.api.core.v1.Binding", gvk_obj("", "v1", "Binding"))
                    }
                    Subresource::Token => (
                        "io.k8s.api.authentication.v1.TokenRequest",
                        gvk_obj("authentication.k8s.io", "v1", "TokenRequest"),
                    ),
                    _ => (
                        "io.k8s.api.policy.v1.Eviction",
                        gvk_obj("policy", "v1", "Eviction"),
                    ),
                };
                vec![Op {
                    method: "post",
                    description: format!("create {} of a {kind}", sub.name()),
                    id: format!("create{o}{ns}{kind}{suffix}"),
                    action: "post",
                    gvk: sgvk,
                    params: WRITE_PARAMS,
                    body: Some(body(schema)),
                    responses: responses(&created, schema, OBJECT_TYPES),
                }]
            }
            // Upstream: `replaceNamespaceFinalize`, a PUT of the Namespace.
            Subresource::Finalize => vec![Op {
                method: "put",
                description: format!("replace finalize of the specified {kind}"),
                id: format!("replace{o}{ns}{kind}{suffix}"),
                action: "put",
                gvk: gvk.clone(),
                params: WRITE_PARAMS,
                body: Some(body(kind_schema)),
                responses: responses(&replaced, kind_schema, OBJECT_TYPES),
            }],
        };
        paths.insert(path, path_item(ops, gv, scope(true)));
    }

    // Watches and the all-namespaces list.
    let watch_params = |with_name: bool, namespaced: bool| {
        let mut v = query_params(LIST_PARAMS);
        if with_name {
            v.push(name());
        }
        if namespaced {
            v.push(namespace());
        }
        v.push(pretty());
        v
    };
    let watch_op = |id: String, action: &'static str, description: String| Op {
        method: "get",
        description,
        id,
        action,
        gvk: gvk.clone(),
        params: &[],
        body: None,
        responses: responses(&ok, &watch_event, WATCH_TYPES),
    };
    paths.insert(
        watch_collection.clone(),
        path_item(
            vec![watch_op(
                format!("watch{o}{ns}{kind}List"),
                "watchlist",
                format!("watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."),
            )],
            gv,
            watch_params(false, def.namespaced),
        ),
    );
    paths.insert(
        format!("{watch_collection}/{{name}}"),
        path_item(
            vec![watch_op(
                format!("watch{o}{ns}{kind}"),
                "watch",
                format!("watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."),
            )],
            gv,
            watch_params(true, def.namespaced),
        ),
    );
    if def.namespaced {
        paths.insert(
            format!("{}/{}", gv.prefix, def.plural),
            path_item(
                vec![Op {
                    method: "get",
                    description: format!("list or watch objects of kind {kind}"),
                    id: format!("list{o}{kind}ForAllNamespaces"),
                    action: "list",
                    gvk: gvk.clone(),
                    params: &[],
                    body: None,
                    responses: responses(&ok, &list_schema, LIST_TYPES),
                }],
                gv,
                watch_params(false, false),
            ),
        );
        paths.insert(
            format!("{}/watch/{}", gv.prefix, def.plural),
            path_item(
                vec![watch_op(
                    format!("watch{o}{kind}ListForAllNamespaces"),
                    "watchlist",
                    format!("watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."),
                )],
                gv,
                watch_params(false, false),
            ),
        );
    }
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

/// The schemas `schema` stands for once `$ref`s and `allOf`s are followed.
fn flatten<'a>(schema: &'a Value, out: &mut Vec<&'a Value>, depth: usize) {
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
fn walk_unknown(
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

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;

    static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);

    fn doc(path: &str) -> Value {
        group_version(&REGISTRY, path).unwrap_or_else(|| panic!("{path} missing"))
    }

    /// Every document's path.
    fn all_paths() -> Vec<String> {
        index(&REGISTRY)["paths"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn index_lists_every_group_version_with_hash() {
        let idx = index(&REGISTRY);
        let paths = idx["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        for want in [
            "api/v1",
            "apis/apps/v1",
            "apis/coordination.k8s.io/v1",
            "apis/storage.k8s.io/v1",
        ] {
            assert!(keys.contains(&want), "{want} in {keys:?}");
        }
        let url = paths["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
        let hash = group_version_hash(&REGISTRY, "apis/apps/v1").unwrap();
        assert_eq!(url, format!("/openapi/v3/apis/apps/v1?hash={hash}"));
        assert_eq!(hash.len(), 32);
        assert!(group_version(&REGISTRY, "apis/example.com/v1").is_none());
        assert_eq!(
            group_version_bytes(&REGISTRY, "apis/apps/v1").unwrap(),
            Bytes::from(serde_json::to_vec(&doc("apis/apps/v1")).unwrap())
        );
    }

    #[test]
    fn deployment_patch_declares_field_validation_and_smp() {
        let d = doc("apis/apps/v1");
        let op = &d["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["operationId"], "patchAppsV1NamespacedDeployment");
        assert_eq!(op["x-kubernetes-action"], "patch");
        assert_eq!(
            op["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        let names: Vec<&str> = op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["in"] == "query")
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        for want in ["fieldValidation", "dryRun", "fieldManager", "force"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        let content = op["requestBody"]["content"].as_object().unwrap();
        for t in [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ] {
            assert!(content.contains_key(t), "{t}");
        }
    }

    #[test]
    fn every_patch_op_of_a_kind_has_field_validation() {
        // kubectl stops at the first PATCH whose GVK matches (map order), so all must have it.
        for path in all_paths() {
            let d = doc(&path);
            for (p, item) in d["paths"].as_object().unwrap() {
                if let Some(op) = item.get("patch") {
                    let has = op["parameters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|q| q["name"] == "fieldValidation" && q["in"] == "query");
                    assert!(has, "{p}");
                    assert!(op["x-kubernetes-group-version-kind"].is_object(), "{p}");
                }
            }
        }
    }

    #[test]
    fn operation_ids_follow_upstream() {
        let cases = [
            (
                "api/v1",
                "/api/v1/namespaces/{namespace}/pods",
                "get",
                "listCoreV1NamespacedPod",
            ),
            (
                "api/v1",
                "/api/v1/namespaces/{namespace}/pods/{name}/binding",
                "post",
                "createCoreV1NamespacedPodBinding",
            ),
            (
                "api/v1",
                "/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                "post",
                "createCoreV1NamespacedPodEviction",
            ),
            (
                "api/v1",
                "/api/v1/namespaces/{namespace}/pods/{name}/status",
                "patch",
                "patchCoreV1NamespacedPodStatus",
            ),
            (
                "api/v1",
                "/api/v1/pods",
                "get",
                "listCoreV1PodForAllNamespaces",
            ),
            (
                "api/v1",
                "/api/v1/nodes",
                "delete",
                "deleteCoreV1CollectionNode",
            ),
            ("api/v1", "/api/v1/nodes/{name}", "get", "readCoreV1Node"),
            (
                "api/v1",
                "/api/v1/watch/nodes/{name}",
                "get",
                "watchCoreV1Node",
            ),
            (
                "api/v1",
                "/api/v1/watch/namespaces/{namespace}/pods",
                "get",
                "watchCoreV1NamespacedPodList",
            ),
            (
                "apis/apps/v1",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
                "put",
                "replaceAppsV1NamespacedDeploymentScale",
            ),
            (
                "apis/apps/v1",
                "/apis/apps/v1/watch/daemonsets",
                "get",
                "watchAppsV1DaemonSetListForAllNamespaces",
            ),
            (
                "apis/apps/v1",
                "/apis/apps/v1/namespaces/{namespace}/replicasets",
                "delete",
                "deleteAppsV1CollectionNamespacedReplicaSet",
            ),
            (
                "apis/coordination.k8s.io/v1",
                "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
                "put",
                "replaceCoordinationV1NamespacedLease",
            ),
        ];
        for (d, path, method, id) in cases {
            let d = doc(d);
            assert_eq!(
                d["paths"][path][method]["operationId"], id,
                "{path} {method}"
            );
        }
        let core = doc("api/v1");
        assert!(core["paths"]["/api/v1/namespaces"].get("delete").is_none());
        let scale = &doc("apis/apps/v1")["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
            ["get"];
        assert_eq!(
            scale["x-kubernetes-group-version-kind"],
            json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
        );
        let binding = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"];
        assert_eq!(
            binding["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "Binding", "version": "v1"})
        );
    }

    #[test]
    fn kind_schemas_carry_gvk() {
        let d = doc("apis/apps/v1");
        let s = &d["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            s["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            d["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentList"]["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "DeploymentList", "version": "v1"}])
        );
        for name in [
            "io.k8s.api.autoscaling.v1.Scale",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
            "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        ] {
            assert!(d["components"]["schemas"].get(name).is_some(), "{name}");
        }
        let core = doc("api/v1");
        for name in [
            "io.k8s.api.core.v1.Binding",
            "io.k8s.api.policy.v1.Eviction",
            "io.k8s.api.core.v1.PodList",
        ] {
            assert!(core["components"]["schemas"].get(name).is_some(), "{name}");
        }
        // Every served kind resolves.
        for def in REGISTRY.kinds().iter() {
            let s = schema_of(def).unwrap();
            assert_eq!(s["x-kubernetes-group-version-kind"][0]["kind"], def.kind);
            if !def.is_stored() {
                continue;
            }
            let list =
                COMPONENTS
                    .by_gvk
                    .get(&(def.group.clone(), def.version.clone(), def.list_kind()));
            assert!(list.is_some(), "{}", def.list_kind());
        }
    }

    #[test]
    fn all_refs_resolve_within_each_document() {
        for path in all_paths() {
            let d = doc(&path);
            let mut refs = Vec::new();
            collect_refs(&d, &mut refs);
            assert!(!refs.is_empty());
            let schemas = d["components"]["schemas"].as_object().unwrap();
            for r in refs {
                assert!(schemas.contains_key(&r), "{path}: {r} unresolved");
            }
            // And no ref escapes the components namespace (e.g. schemars' `#/$defs/`).
            let text = serde_json::to_string(&d).unwrap();
            assert!(
                !text.contains("#/$defs/") && !text.contains("#/definitions/"),
                "{path}"
            );
        }
    }

    #[test]
    fn patch_meta_is_placed_everywhere() {
        let mut schemas = COMPONENTS.schemas.clone();
        assert_eq!(apply_patch_meta(&mut schemas), PATCH_META.len());
        let d = doc("apis/apps/v1");
        let s = &d["components"]["schemas"];
        let containers = &s["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        let ports = &s["io.k8s.api.core.v1.Container"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        let mounts = &s["io.k8s.api.core.v1.Container"]["properties"]["volumeMounts"];
        assert_eq!(mounts["x-kubernetes-patch-merge-key"], "mountPath");
        let fin = &s["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["finalizers"];
        assert_eq!(fin["x-kubernetes-patch-strategy"], "merge");
        assert!(fin.get("x-kubernetes-patch-merge-key").is_none());
    }

    #[test]
    fn pod_update_policy_is_in_the_schemas() {
        let d = doc("apis/apps/v1");
        for schema in POD_UPDATE_POLICY_IN {
            assert_eq!(
                d["components"]["schemas"][*schema]["properties"]["podUpdatePolicy"]["type"],
                "string",
                "{schema}"
            );
        }
    }

    #[test]
    fn unknown_fields_cases() {
        let cases: Vec<(&str, &str, Value, Vec<&str>)> = vec![
            (
                "apps",
                "Deployment",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "labels": {"x": "y"}},
                       "spec": {"replicaz": 3, "selector": {"matchLabels": {"a": "b"}},
                                "template": {"spec": {"containers": [{"name": "c", "image": "i", "imagez": "j"}]}}}}),
                vec![
                    "unknown field \"spec.replicaz\"",
                    "unknown field \"spec.template.spec.containers[0].imagez\"",
                ],
            ),
            (
                "apps",
                "DaemonSet",
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "a"},
                       "spec": {"updateStrategy": {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": 1, "podUpdatePolicy": "InPlaceIfPossible"}}}}),
                vec![],
            ),
            (
                "apps",
                "StatefulSet",
                json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0, "podUpdatePolicy": "Recreate"}}}}),
                vec![],
            ),
            (
                "",
                "Pod",
                json!({"metadata": {"annotations": {"a": "b"}, "managedFields": [{"fieldsV1": {"f:spec": {}}}]},
                       "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]},
                       "status": {"bogus": 1}}),
                vec!["unknown field \"status.bogus\""],
            ),
            (
                "apps",
                "ControllerRevision",
                json!({"data": {"anything": {"goes": true}}, "revision": 1, "extra": 1}),
                vec!["unknown field \"extra\""],
            ),
            ("apps", "Nope", json!({"x": 1}), vec![]),
        ];
        for (group, kind, obj, want) in cases {
            let got = REGISTRY
                .find_kind(group, kind)
                .map(|def| unknown_fields(&def, &obj))
                .unwrap_or_default();
            assert_eq!(got, want, "{kind}");
        }
    }

    #[test]
    fn property_descriptions_come_from_k8s_openapi() {
        assert!(property_description("io.k8s.api.core.v1.PodStatus", "podIP").is_some());
        assert!(property_description("io.k8s.api.core.v1.PodStatus", "nope").is_none());
    }

    #[test]
    fn gv_names() {
        let cases = [
            ("", "v1", "/api/v1", "CoreV1", "core_v1"),
            ("apps", "v1", "/apis/apps/v1", "AppsV1", "apps_v1"),
            (
                "coordination.k8s.io",
                "v1",
                "/apis/coordination.k8s.io/v1",
                "CoordinationV1",
                "coordination_v1",
            ),
            (
                "rbac.authorization.k8s.io",
                "v1beta1",
                "/apis/rbac.authorization.k8s.io/v1beta1",
                "RbacAuthorizationV1beta1",
                "rbacAuthorization_v1beta1",
            ),
        ];
        for (g, v, prefix, op, tag) in cases {
            let gv = Gv::new(g, v);
            assert_eq!(
                (gv.prefix.as_str(), gv.op.as_str(), gv.tag.as_str()),
                (prefix, op, tag)
            );
        }
    }
}
