//! Serves v1 ComponentStatus (`kubectl get componentstatuses`): get and list of the components
//! upstream reports, each answer with upstream's deprecation warning. Upstream's REST storage
//! probes each component's `/healthz`; here the components are this server's own or run beside
//! it, and the list is made from [`componentstatus::COMPONENTS`] on each read.

use crate::{
    error::{ApiError, ApiResult},
    registry::componentstatus::{self, COMPONENTS, DEPRECATION},
    request::{Output, Params, Target},
    rest::{json_response, table_of, with_warnings},
    state::ApiServer,
};
use api::selector::{FieldSelector, LabelSelector};
use axum::{
    http::{Method, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};

impl ApiServer {
    /// GET of a computed kind, with the deprecation warning upstream adds to every request for
    /// it (errors included); any other verb is 405, as upstream registers only get and list.
    pub(crate) fn component_statuses(
        &self,
        method: &Method,
        t: &Target,
        p: &Params,
        out: Output,
    ) -> Response {
        let answer = serve(method, t, p, out).unwrap_or_else(|e| e.into_response());
        with_warnings(answer, &[DEPRECATION.to_string()])
    }
}

fn serve(method: &Method, t: &Target, p: &Params, out: Output) -> ApiResult<Response> {
    if *method != Method::GET || p.is_watch() {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    if let Some(name) = t.name.as_deref() {
        // Upstream's Get returns a plain error for an unknown name: a 500 with no reason.
        if !COMPONENTS.contains(&name) {
            return Err(ApiError {
                code: 500,
                reason: "",
                message: format!("Component not found: {name}"),
                details: None,
            });
        }
        let obj = componentstatus::healthy(name);
        return Ok(match out {
            Output::Json => json_response(StatusCode::OK, obj.to_string()),
            Output::Metadata => json_response(StatusCode::OK, metadata_of(&obj).to_string()),
            Output::Table(include) => json_response(
                StatusCode::OK,
                table_of(&t.def, &t.def, &[&obj], include, json!({})).to_string(),
            ),
        });
    }
    let label = match p.label_selector.as_deref().filter(|s| !s.trim().is_empty()) {
        None => None,
        Some(s) => Some(
            LabelSelector::parse(s)
                .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?,
        ),
    };
    let field = match p.field_selector.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(s) => Some(
            FieldSelector::parse(s)
                .map_err(|e| ApiError::bad_request(format!("invalid field selector {s:?}: {e}")))?,
        ),
    };
    let items: Vec<Value> = COMPONENTS
        .iter()
        .filter(|name| {
            // Upstream matches the object's metadata fields (name, and an empty namespace) and
            // its labels (none).
            let field_ok = field.as_ref().is_none_or(|f| {
                f.matches(|k| match k {
                    "metadata.name" => Some(name.to_string()),
                    "metadata.namespace" => Some(String::new()),
                    _ => None,
                })
            });
            let label_ok = label.as_ref().is_none_or(|l| l.matches(|_| None));
            field_ok && label_ok
        })
        .map(|name| componentstatus::healthy(name))
        .collect();
    Ok(match out {
        Output::Json => json_response(
            StatusCode::OK,
            json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items})
                .to_string(),
        ),
        Output::Metadata => json_response(
            StatusCode::OK,
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {}, "items": items.iter().map(metadata_of).collect::<Vec<_>>()})
            .to_string(),
        ),
        Output::Table(include) => {
            let objects: Vec<&Value> = items.iter().collect();
            json_response(
                StatusCode::OK,
                table_of(&t.def, &t.def, &objects, include, json!({})).to_string(),
            )
        }
    })
}

fn metadata_of(obj: &Value) -> Value {
    let meta = obj
        .get("metadata")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta})
}
