//! The component schemas every document `$ref`s into: generated from k8s-openapi's types (its
//! `schemars` impls already use upstream's names), then decorated with what those impls lack
//! (patch strategies, list kinds, rollwright's own fields). Built once.

use std::collections::HashMap;
use std::sync::LazyLock;

use k8s_openapi::api::{autoscaling, core, policy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::registry::{Kind, Schema, builtin_kinds};

pub(super) const REF_PREFIX: &str = "#/components/schemas/";

pub(super) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

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

/// The component schemas of every built-in kind plus a GVK index.
pub(super) struct Components {
    pub(super) schemas: Map<String, Value>,
    pub(super) by_gvk: HashMap<(String, String, String), String>,
}

pub(super) static COMPONENTS: LazyLock<Components> = LazyLock::new(build_components);

/// (group, version, kind) of the kinds whose schemas are generated, and the generator call.
pub(super) type Register = fn(&mut SchemaGenerator) -> String;

pub(super) fn reg<T: schemars::JsonSchema>(g: &mut SchemaGenerator) -> String {
    g.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// The kinds subresources and errors use, which are not served kinds themselves.
pub(super) const EXTRA_KINDS: &[(&str, &str, &str, Register)] = &[
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

/// rollwright's `podUpdatePolicy` and `paused` live in these rolling-update structs.
pub(super) const POD_UPDATE_POLICY_IN: &[&str] = &[
    "io.k8s.api.apps.v1.RollingUpdateDaemonSet",
    "io.k8s.api.apps.v1.RollingUpdateStatefulSetStrategy",
];

pub(super) fn build_components() -> Components {
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
            // A schema several versions share (the flowcontrol betas are k8s-openapi's v1 type)
            // names each of them.
            let gvk = json!({"group": g, "kind": k, "version": v});
            match s.get_mut("x-kubernetes-group-version-kind") {
                Some(Value::Array(list)) if list.iter().any(|x| x["group"] == *g) => list.push(gvk),
                _ => {
                    s.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
                }
            }
        }
        by_gvk.insert((g.clone(), v.clone(), k.clone()), name.clone());
    }
    // The list kinds have no k8s-openapi schemars impl: derive them from their item kind.
    // (The review kinds have none: they are never listed.)
    for def in builtin_kinds()
        .iter()
        .filter(|k| k.is_stored() || k.computed)
    {
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
    api::apply::builtin::place_patch_strategies(&mut schemas);
    api::apply::builtin::decorate(&mut schemas);
    add_rollwright_extensions(&mut schemas);
    Components { schemas, by_gvk }
}

pub(super) fn list_schema(def: &Kind, item: &str) -> Value {
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

pub(super) fn add_rollwright_extensions(schemas: &mut Map<String, Value>) {
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

pub(super) fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{name}")})
}
