//! The query parameters, bodies and responses of the operations, as upstream's documents
//! describe them.

use serde_json::{Map, Value, json};

use super::components::schema_ref;

/// Upstream's query parameters: (name, type, description).
pub(super) const QUERY_PARAMS: &[(&str, &str, &str)] = &[
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

pub(super) const LIST_PARAMS: &[&str] = &[
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

pub(super) const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];

pub(super) const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];

pub(super) const DELETE_PARAMS: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];

pub(super) const DELETE_COLLECTION_PARAMS: &[&str] = &[
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

pub(super) fn query_params(names: &[&str]) -> Vec<Value> {
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

pub(super) fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

pub(super) fn content(schema: &str, types: &[&str]) -> Value {
    let m: Map<String, Value> = types
        .iter()
        .map(|t| (t.to_string(), json!({"schema": schema_ref(schema)})))
        .collect();
    Value::Object(m)
}

pub(super) const OBJECT_TYPES: &[&str] = &["application/json", "application/yaml"];

pub(super) const LIST_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];

pub(super) const WATCH_TYPES: &[&str] = &["application/json", "application/json;stream=watch"];

pub(super) fn responses(codes: &[(&str, &str)], schema: &str, types: &[&str]) -> Value {
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
