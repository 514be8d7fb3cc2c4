//! discovery.k8s.io/v1 EndpointSlices, stored and validated (the endpointslice controller
//! fills those of Services with a selector).

use jiff::Timestamp;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{Value, json};

use super::{Kind, Rules};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, get, name_cell, plain, s,
};

/// The discovery.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<EndpointSlice>()
            .strategy(
                Rules::new()
                    .validate(api::validation::service::validate_endpoint_slice)
                    .immutable(api::validation::service::validate_endpoint_slice_update),
            )
            .printer(Printer::Columns { columns, row }),
    ]
}

fn columns() -> Vec<Column> {
    use Desc::Field;
    const SLICE: &str = "io.k8s.api.discovery.v1.EndpointSlice";
    vec![
        NAME,
        col("AddressType", "string", 0, Field(SLICE, "addressType")),
        col("Ports", "string", 0, Field(SLICE, "ports")),
        col("Endpoints", "string", 0, Field(SLICE, "endpoints")),
        AGE,
    ]
}

/// Upstream's `listWithMoreString`: up to three, `+ N more...`, `<unset>` when none.
fn list_with_more(list: Vec<String>) -> String {
    const MAX: usize = 3;
    let count = list.len();
    let shown = list.into_iter().take(MAX).collect::<Vec<_>>().join(",");
    if count > MAX {
        format!("{shown} + {} more...", count - MAX)
    } else if shown.is_empty() {
        "<unset>".into()
    } else {
        shown
    }
}

fn row(slice: &Value, now: Timestamp) -> Row {
    let ports = arr(slice, &["ports"])
        .iter()
        .map(|p| match get(p, &["port"]).and_then(Value::as_i64) {
            Some(n) => n.to_string(),
            None => Some(s(p, &["name"]))
                .filter(|n| !n.is_empty())
                .unwrap_or("*")
                .to_string(),
        })
        .collect();
    let endpoints = arr(slice, &["endpoints"])
        .iter()
        .flat_map(|e| arr(e, &["addresses"]).iter())
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    plain(vec![
        name_cell(slice),
        json!(s(slice, &["addressType"])),
        json!(list_with_more(ports)),
        json!(list_with_more(endpoints)),
        age_cell(slice, now),
    ])
}
