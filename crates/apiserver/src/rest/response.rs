//! Answers: an object or a list in the format the client negotiated (JSON, protobuf, a
//! Table, metadata only), with the warnings admission gave.

use super::list_body::{Items, ListBody};
use crate::{
    cache::Entry,
    change::Outcome,
    object,
    registry::{Kind, Storage},
    request::Output,
    state::ApiServer,
    table,
    view::present,
};
use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::{Value, json};
use std::sync::Arc;

/// A JSON response with the given code.
pub(crate) fn json_response(code: StatusCode, body: impl Into<axum::body::Body>) -> Response {
    let mut r = (code, body.into()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Adds `Warning` headers (unknown fields under `fieldValidation=Warn`).
pub(crate) fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

/// `PartialObjectMetadata` of an object.
pub(super) fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
           "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// The serialized object of a cache entry as `view` serves it (the stored bytes themselves
/// unless the view converts).
pub(crate) fn entry_json(view: &Kind, e: &Entry) -> Bytes {
    match view.storage {
        Storage::Own if !view.strategy.defaults_on_read() => e.json.clone(),
        Storage::Own | Storage::View { .. } | Storage::Nowhere => {
            Bytes::from(serde_json::to_vec(&present(view, e.value())).unwrap_or_default())
        }
    }
}

/// Renders one stored object in the negotiated representation of `view`; tables are printed
/// by `storage`'s printer (a view prints as the kind it views, as upstream's printers work on
/// the stored type).
pub(crate) fn object_response(
    view: &Kind,
    storage: &Kind,
    code: StatusCode,
    obj: &Value,
    out: Output,
) -> Response {
    match out {
        // Served as stored, the object is printed as it is: every write answers with its object,
        // and a copy made only to be printed was a few percent of the server's CPU.
        Output::Json if view.conversion().is_none() && !view.strategy.defaults_on_read() => {
            json_response(code, serde_json::to_vec(obj).unwrap_or_default())
        }
        Output::Json => json_response(
            code,
            serde_json::to_vec(&present(view, obj.clone())).unwrap_or_default(),
        ),
        Output::Metadata => json_response(code, partial_metadata(obj).to_string()),
        Output::Table(include) => {
            let t = table_of(
                view,
                storage,
                &[obj],
                include,
                json!({
                    "resourceVersion": object::resource_version(obj).unwrap_or_default()
                }),
            );
            json_response(code, t.to_string())
        }
    }
}

/// A successful deletion's `Status`, as upstream returns for resources that do not return the
/// deleted object.
pub(crate) fn success_status(def: &Kind, name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
           "details": {"name": name, "group": def.group, "kind": def.plural}})
}

impl ApiServer {
    pub(super) fn write_response(
        &self,
        view: &Kind,
        def: &Kind,
        outcome: Outcome,
        out: Output,
    ) -> Response {
        match outcome {
            Outcome::Deleted(v) | Outcome::Written(v) | Outcome::Unchanged(v) => {
                object_response(view, def, StatusCode::OK, &v, out)
            }
        }
    }
}

/// The response to a LIST of `entries` (one page) in the negotiated form, its body streamed
/// (see [`super::list_body`]): `list_meta` is the list's `metadata`, `view` the kind served at
/// the path and `storage` the kind that stores the objects (whose printer prints the Table).
pub(crate) fn list_response(
    view: &Arc<Kind>,
    storage: &Arc<Kind>,
    entries: Vec<Arc<Entry>>,
    list_meta: &Value,
    out: Output,
    buffered: Gauge,
) -> Response {
    let (head, items) = match out {
        Output::Json => {
            let head = format!(
                "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{list_meta},\"items\":[",
                view.list_kind(),
                view.api_version(),
            );
            let items = match view.storage {
                Storage::Own if !view.strategy.defaults_on_read() => Items::Stored,
                Storage::Own | Storage::View { .. } | Storage::Nowhere => {
                    let view = view.clone();
                    Items::Rendered(Box::new(move |e: &Entry, out: &mut Vec<u8>| {
                        write_json(out, &present(&view, e.value()));
                    }))
                }
            };
            (head, items)
        }
        Output::Metadata => (
            format!(
                "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{list_meta},\"items\":["
            ),
            Items::Rendered(Box::new(|e: &Entry, out: &mut Vec<u8>| {
                write_json(out, &partial_metadata(&e.value()));
            })),
        ),
        Output::Table(include) => {
            let head = format!(
                "{{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{list_meta},\"columnDefinitions\":{},\"rows\":[",
                Value::Array(table::render::definitions(&storage.printer)),
            );
            let (view, storage) = (view.clone(), storage.clone());
            // Every row's age is as of the moment the list was asked for, as in a whole table.
            let now = clock::now();
            let as_stored = view.conversion().is_none() && !view.strategy.defaults_on_read();
            let items = Items::Rendered(Box::new(move |e: &Entry, out: &mut Vec<u8>| {
                let obj = e.value();
                let mut row = table::render::row(&storage.printer, &obj, now, include);
                if include == table::IncludeObject::Object && !as_stored {
                    row["object"] = present(&view, obj);
                }
                write_json(out, &row);
            }));
            (head, items)
        }
    };
    json_response(
        StatusCode::OK,
        ListBody::new(head, entries, items, b"]}", buffered).into_body(),
    )
}

/// Appends `v` as JSON (writing into a `Vec` cannot fail).
fn write_json(out: &mut Vec<u8>, v: &Value) {
    let _ = serde_json::to_writer(out, v);
}

/// A Table of stored `objects`, printed by `storage`'s printer. For `includeObject=Object` each
/// row embeds the object as `view` serves it: upstream's asTable converts a row's object to the
/// request's version (`scope.Convertor.ConvertToVersion`), so `kubectl get --sort-by` and
/// `-o custom-columns` read the fields of the version they asked for.
pub(crate) fn table_of(
    view: &Kind,
    storage: &Kind,
    objects: &[&Value],
    include: table::IncludeObject,
    list_meta: Value,
) -> Value {
    let mut t = table::render::table(&storage.printer, objects, clock::now(), include, list_meta);
    let as_stored = view.conversion().is_none() && !view.strategy.defaults_on_read();
    if include == table::IncludeObject::Object
        && !as_stored
        && let Some(rows) = t.get_mut("rows").and_then(Value::as_array_mut)
    {
        for (row, obj) in rows.iter_mut().zip(objects) {
            row["object"] = crate::view::present(view, (*obj).clone());
        }
    }
    t
}
