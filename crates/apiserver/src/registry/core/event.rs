//! core/v1 Events (also served as events.k8s.io/v1, see `registry::events`).

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use serde_json::{Value, json};

use crate::{
    registry::{Kind, Rules},
    table::{
        Column, Desc, META, Printer, Row, col, human_duration_since, i, name_cell, plain, s, since,
        timestamp,
    },
};

/// The events kind.
pub(super) fn kind() -> Kind {
    Kind::of::<Event>()
        .short_names(&["ev"])
        .strategy(Rules::new().validate(validate))
        .selectable_fields(&[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ])
        .printer(Printer::Columns { columns, row })
}

fn validate(obj: &Value) -> Vec<FieldError> {
    api::validation::core_kinds::validate_event(obj)
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        col(
            "Last Seen",
            "string",
            0,
            Field("io.k8s.api.core.v1.Event", "lastTimestamp"),
        ),
        col(
            "Type",
            "string",
            0,
            Field("io.k8s.api.core.v1.Event", "type"),
        ),
        col(
            "Reason",
            "string",
            0,
            Field("io.k8s.api.core.v1.Event", "reason"),
        ),
        col(
            "Object",
            "string",
            0,
            Field("io.k8s.api.core.v1.Event", "involvedObject"),
        ),
        col(
            "Subobject",
            "string",
            1,
            Field("io.k8s.api.core.v1.ObjectReference", "fieldPath"),
        ),
        col(
            "Source",
            "string",
            1,
            Field("io.k8s.api.core.v1.Event", "source"),
        ),
        col(
            "Message",
            "string",
            0,
            Field("io.k8s.api.core.v1.Event", "message"),
        ),
        col(
            "First Seen",
            "string",
            1,
            Field("io.k8s.api.core.v1.Event", "firstTimestamp"),
        ),
        col(
            "Count",
            "string",
            1,
            Field("io.k8s.api.core.v1.Event", "count"),
        ),
        Column {
            name: "Name",
            ty: "string",
            format: "name",
            priority: 1,
            desc: Field(META, "name"),
        },
    ]
}

/// Upstream's `printEvent`.
fn row(ev: &Value, now: Timestamp) -> Row {
    plain(cells(ev, name_cell(ev), now))
}

fn cells(ev: &Value, name: Value, now: Timestamp) -> Vec<Value> {
    let first = match timestamp(ev.get("firstTimestamp")) {
        Some(t) => human_duration_since(t, now),
        None => since(ev.get("eventTime"), now),
    };
    let mut last = match timestamp(ev.get("lastTimestamp")) {
        Some(t) => human_duration_since(t, now),
        None => first.clone(),
    };
    let mut count = i(ev, &["count"]);
    if let Some(series) = ev.get("series").filter(|s| s.is_object()) {
        last = since(series.get("lastObservedTime"), now);
        count = i(series, &["count"]);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(ev, &["involvedObject", "kind"]).to_lowercase();
    let obj_name = s(ev, &["involvedObject", "name"]);
    let target = if obj_name.is_empty() {
        kind
    } else {
        format!("{kind}/{obj_name}")
    };
    let component = Some(s(ev, &["source", "component"]))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| s(ev, &["reportingComponent"]));
    let host = Some(s(ev, &["source", "host"]))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| s(ev, &["reportingInstance"]));
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(s(ev, &["type"])),
        json!(s(ev, &["reason"])),
        json!(target),
        json!(s(ev, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(s(ev, &["message"]).trim()),
        json!(first),
        json!(count),
        name,
    ]
}
