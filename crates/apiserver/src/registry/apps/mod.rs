//! The apps/v1 workloads and their revisions.

mod daemonset;
mod deployment;
mod replicaset;
mod statefulset;

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::{Value, json};

use super::{Generation, Kind, Rules};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, col, controller_name, i, name_cell, plain,
};

/// The apps/v1 kinds, in discovery order.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        deployment::kind(),
        replicaset::kind(),
        statefulset::kind(),
        daemonset::kind(),
        Kind::of::<ControllerRevision>()
            .strategy(
                Rules::new()
                    .validate(api::validation::apps::validate_controller_revision)
                    .immutable(api::validation::apps::validate_controller_revision_update),
            )
            .printer(Printer::Columns {
                columns: revision_columns,
                row: revision_row,
            }),
    ]
}

/// The rules every apps/v1 workload shares: its own defaults and validation, an immutable
/// selector (or more), and a generation that follows `spec`.
fn workload(
    defaults: fn(&mut Value),
    validate: fn(&Value) -> Vec<FieldError>,
    immutable: fn(&Value, &Value) -> Vec<FieldError>,
) -> Rules {
    Rules::new()
        .defaults(defaults)
        .validate(validate)
        .immutable(immutable)
        .generation(Generation::Spec)
}

/// `spec.replicas`, which defaulting sets to 1 when absent.
fn replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn revision_columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col("Controller", "string", 0, Text("Controller of the object")),
        col(
            "Revision",
            "string",
            0,
            Field("io.k8s.api.apps.v1.ControllerRevision", "revision"),
        ),
        AGE,
    ]
}

fn revision_row(obj: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(obj),
        json!(controller_name(obj)),
        json!(i(obj, &["revision"])),
        age_cell(obj, now),
    ])
}
