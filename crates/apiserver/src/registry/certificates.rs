//! certificates.k8s.io/v1 CertificateSigningRequests: stored with their `status` and `approval`
//! subresources (writes to either keep the spec); nothing signs them.

use jiff::Timestamp;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use serde_json::{Value, json};

use super::{Kind, Subresource};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, get, name_cell, plain, s,
};

/// The certificates.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<CertificateSigningRequest>()
            .short_names(&["csr"])
            .subresources(&[Subresource::Approval, Subresource::Status])
            .selectable_fields(&["spec.signerName"])
            .printer(Printer::Columns { columns, row }),
    ]
}

fn columns() -> Vec<Column> {
    use Desc::{Field, Text};
    const SPEC: &str = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec";
    vec![
        NAME,
        AGE,
        col("SignerName", "string", 0, Field(SPEC, "signerName")),
        col("Requestor", "string", 0, Text("Name of the requestor")),
        col(
            "RequestedDuration",
            "string",
            0,
            Field(SPEC, "expirationSeconds"),
        ),
        col("Condition", "string", 0, Text("State of the request")),
    ]
}

/// Upstream's `printCertificateSigningRequest`: the conditions (`Approved,Issued`), `Pending`
/// when there are none.
fn row(csr: &Value, now: Timestamp) -> Row {
    let mut conditions: Vec<&str> = arr(csr, &["status", "conditions"])
        .iter()
        .map(|c| s(c, &["type"]))
        .collect();
    if get(csr, &["status", "certificate"]).is_some_and(|c| !c.is_null()) {
        conditions.push("Issued");
    }
    let condition = if conditions.is_empty() {
        "Pending".to_string()
    } else {
        conditions.join(",")
    };
    let duration = get(csr, &["spec", "expirationSeconds"])
        .and_then(Value::as_i64)
        .map(|secs| crate::table::human_duration(secs * 1_000_000_000))
        .unwrap_or_else(|| "<none>".into());
    plain(vec![
        name_cell(csr),
        age_cell(csr, now),
        json!(s(csr, &["spec", "signerName"])),
        json!(s(csr, &["spec", "username"])),
        json!(duration),
        json!(condition),
    ])
}
