//! A Table response: objects rendered with their kind's printer, column descriptions taken from
//! upstream's field docs (the OpenAPI components), as upstream's `TableConvertor` answers.

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::{Column, CustomColumn, Desc, IncludeObject, Printer};
use crate::openapi::property_description;

/// Renders `objects` with `printer` as a Table at time `now` (ages are relative to it);
/// `list_meta` becomes the table's metadata (resourceVersion, continue).
pub fn table(
    printer: &Printer,
    objects: &[&Value],
    now: Timestamp,
    include_object: IncludeObject,
    list_meta: Value,
) -> Value {
    let column_definitions = definitions(printer);
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| row(printer, obj, now, include_object))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

/// One row of a table: its cells, its conditions, and the object as `include_object` asks. A
/// streamed list renders its rows one at a time with this; [`table`] is their whole.
pub fn row(printer: &Printer, obj: &Value, now: Timestamp, include_object: IncludeObject) -> Value {
    let (cells, conditions) = printer.row(obj, now);
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells));
    if let Some(c) = conditions {
        row.insert("conditions".into(), c);
    }
    match include_object {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row.insert(
                "object".into(),
                json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                }),
            );
        }
        IncludeObject::Object => {
            row.insert("object".into(), obj.clone());
        }
    }
    Value::Object(row)
}

/// The `columnDefinitions` of a table.
pub fn definitions(printer: &Printer) -> Vec<Value> {
    let mut defs: Vec<Value> = printer
        .columns()
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.ty,
                "format": c.format,
                "description": description(c),
                "priority": c.priority,
            })
        })
        .collect();
    if let Printer::Custom(columns) = printer {
        defs.extend(columns.iter().map(CustomColumn::definition));
    }
    defs
}

fn description(c: &Column) -> &'static str {
    match c.desc {
        Desc::Text(t) => t,
        Desc::Field(s, p) => property_description(s, p).unwrap_or(""),
    }
}
