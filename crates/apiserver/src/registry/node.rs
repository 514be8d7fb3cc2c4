//! node.k8s.io/v1 RuntimeClasses: which container runtime configuration a pod's
//! `runtimeClassName` selects (simulated nodes accept any).

use jiff::Timestamp;
use k8s_openapi::api::node::v1::RuntimeClass;
use serde_json::{Value, json};

use super::{Kind, Rules};
use crate::table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, col, name_cell, plain, s};

/// The node.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<RuntimeClass>()
            .strategy(
                Rules::new()
                    .validate(api::validation::node::validate_runtime_class)
                    .immutable(api::validation::node::validate_runtime_class_update),
            )
            .printer(Printer::Columns { columns, row }),
    ]
}

fn columns() -> Vec<Column> {
    vec![
        NAME,
        col(
            "Handler",
            "string",
            0,
            Desc::Field("io.k8s.api.node.v1.RuntimeClass", "handler"),
        ),
        AGE,
    ]
}

fn row(obj: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(obj),
        json!(s(obj, &["handler"])),
        age_cell(obj, now),
    ])
}
