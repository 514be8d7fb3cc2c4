//! coordination.k8s.io/v1 Leases (node heartbeats, leader election).

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};

use super::{Kind, Rules};
use crate::table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, col, name_cell, plain, s};

/// The coordination.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<Lease>()
            .strategy(Rules::new().validate(api::validation::core_kinds::validate_lease))
            .printer(Printer::Columns { columns, row }),
    ]
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Holder",
            "string",
            0,
            Field("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity"),
        ),
        AGE,
    ]
}

fn row(obj: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(obj),
        json!(s(obj, &["spec", "holderIdentity"])),
        age_cell(obj, now),
    ])
}
