//! The paths of one group/version document: every operation on every resource it serves, with
//! the `x-kubernetes-action` and `x-kubernetes-group-version-kind` kubectl reads.

use serde_json::{Map, Value, json};

use super::{
    components::{META, schema_ref},
    params::{
        DELETE_COLLECTION_PARAMS, DELETE_PARAMS, LIST_PARAMS, LIST_TYPES, OBJECT_TYPES,
        PATCH_PARAMS, WATCH_TYPES, WRITE_PARAMS, content, path_param, query_params, responses,
    },
};
use crate::discovery;
use crate::registry::{Kind, Subresource};

/// Names used in one group/version's operations.
pub(super) struct Gv {
    pub(super) group: String,
    pub(super) version: String,
    /// `/api/v1` or `/apis/apps/v1`.
    pub(super) prefix: String,
    /// `CoreV1`, `AppsV1`, `CoordinationV1`: the middle of upstream's operation ids.
    pub(super) op: String,
    /// `core_v1`, `apps_v1`, `coordination_v1`.
    pub(super) tag: String,
}

impl Gv {
    pub(super) fn new(group: &str, version: &str) -> Gv {
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

pub(super) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

pub(super) fn gvk_obj(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// One operation.
pub(super) struct Op<'a> {
    pub(super) method: &'static str,
    pub(super) description: String,
    pub(super) id: String,
    pub(super) action: &'static str,
    pub(super) gvk: Value,
    pub(super) params: &'a [&'a str],
    pub(super) body: Option<Value>,
    pub(super) responses: Value,
}

pub(super) fn op_value(gv: &Gv, op: Op) -> Value {
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

pub(super) fn body(schema: &str) -> Value {
    json!({"content": {"*/*": {"schema": schema_ref(schema)}}, "required": true})
}

pub(super) fn patch_body() -> Value {
    let types = [
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ];
    json!({"content": content(&format!("{META}Patch"), &types), "required": true})
}

pub(super) fn delete_body() -> Value {
    json!({"content": {"*/*": {"schema": schema_ref(&format!("{META}DeleteOptions"))}}})
}

pub(super) fn path_item(ops: Vec<Op>, gv: &Gv, params: Vec<Value>) -> Value {
    let mut m = Map::new();
    for op in ops {
        let method = op.method;
        m.insert(method.into(), op_value(gv, op));
    }
    m.insert("parameters".into(), Value::Array(params));
    Value::Object(m)
}

/// The operations of one resource (and its subresources) into `paths`.
pub(super) fn resource_paths(
    gv: &Gv,
    def: &Kind,
    kind_schema: &str,
    paths: &mut Map<String, Value>,
) {
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

    if def.computed {
        // componentstatuses: a list and a read, as upstream publishes them.
        let list = Op {
            method: "get",
            description: format!("list objects of kind {kind}"),
            id: format!("list{o}{ns}{kind}"),
            action: "list",
            gvk: gvk.clone(),
            params: LIST_PARAMS,
            body: None,
            responses: responses(&ok, &list_schema, LIST_TYPES),
        };
        let read = Op {
            method: "get",
            description: format!("read the specified {kind}"),
            id: format!("read{o}{ns}{kind}"),
            action: "get",
            gvk: gvk.clone(),
            params: &[],
            body: None,
            responses: responses(&ok, kind_schema, OBJECT_TYPES),
        };
        paths.insert(collection.clone(), path_item(vec![list], gv, scope(false)));
        paths.insert(
            format!("{collection}/{{name}}"),
            path_item(vec![read], gv, scope(true)),
        );
        return;
    }
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
            Subresource::Status
            | Subresource::Scale
            | Subresource::Approval
            | Subresource::EphemeralContainers => {
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
            // Streams, not objects: left out of the published paths for now.
            Subresource::Log | Subresource::Exec => continue,
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
