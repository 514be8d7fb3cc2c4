//! scheduling.k8s.io/v1 PriorityClasses; the two system classes exist from the start (see
//! `bootstrap_objects`).

use jiff::Timestamp;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{Value, json};

use super::{Kind, Rules};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, col, get, name_cell, plain, s,
};

/// The scheduling.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<PriorityClass>()
            .short_names(&["pc"])
            .strategy(
                Rules::new()
                    .defaults(api::defaults::priority_class)
                    .validate(api::validation::scheduling::validate_priority_class)
                    .immutable(api::validation::scheduling::validate_priority_class_update),
            )
            .printer(Printer::Columns { columns, row }),
    ]
}

/// The system PriorityClasses every cluster has, as upstream's API server creates them.
pub(super) fn system_classes() -> Vec<Value> {
    let descriptions = [
        "Used for system critical pods that must not be moved from their current node.",
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ];
    api::validation::scheduling::SYSTEM_PRIORITY_CLASSES
        .iter()
        .zip(descriptions)
        .map(|((name, value), description)| {
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "description": description})
        })
        .collect()
}

fn columns() -> Vec<Column> {
    use Desc::Field;
    const PC: &str = "io.k8s.api.scheduling.v1.PriorityClass";
    vec![
        NAME,
        col("Value", "integer", 0, Field(PC, "value")),
        col("Global-Default", "boolean", 0, Field(PC, "globalDefault")),
        AGE,
        col(
            "PreemptionPolicy",
            "string",
            0,
            Field(PC, "preemptionPolicy"),
        ),
    ]
}

fn row(pc: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(pc),
        json!(get(pc, &["value"]).and_then(Value::as_i64).unwrap_or(0)),
        json!(
            get(pc, &["globalDefault"])
                .and_then(Value::as_bool)
                .unwrap_or(false)
        ),
        age_cell(pc, now),
        json!(s(pc, &["preemptionPolicy"])),
    ])
}
