//! v1 ComponentStatus (`componentstatuses`, deprecated in v1.19 and still served upstream): read
//! only, made on each read from the health of the components, as upstream's
//! `pkg/registry/core/componentstatus` probes them. Served by `crate::component_status`.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ComponentStatus;
use serde_json::{Value, json};

use super::Kind;
use crate::table::{Column, Desc, NAME, Printer, Row, col, name_cell, plain};

/// The components upstream reports (`storage_core.go`'s `serversToValidate`): the scheduler,
/// the controller manager and one entry per storage backend.
pub(crate) const COMPONENTS: &[&str] = &["scheduler", "controller-manager", "etcd-0"];

/// The warning upstream adds to every request for the kind (its prerelease lifecycle says
/// deprecated in 1.19; `endpoints/deprecation`).
pub(crate) const DEPRECATION: &str = "v1 ComponentStatus is deprecated in v1.19+";

/// The ComponentStatus kind.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<ComponentStatus>()
            .computed()
            .short_names(&["cs"])
            .printer(Printer::Columns { columns, row }),
    ]
}

/// A healthy component as upstream reports one: its probe answered `ok`. (A component of this
/// server that answers requests at all is up: the scheduler and controllers run beside it or
/// against it, and the store answered the read that built this.)
pub(crate) fn healthy(name: &str) -> Value {
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": null},
        "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}],
    })
}

fn columns() -> Vec<Column> {
    use Desc::Text;
    vec![
        NAME,
        col(
            "Status",
            "string",
            0,
            Text("Status of the component conditions"),
        ),
        col(
            "Message",
            "string",
            0,
            Text("Message of the component conditions"),
        ),
        col(
            "Error",
            "string",
            0,
            Text("Error of the component conditions"),
        ),
    ]
}

/// Upstream's `printComponentStatus`: the Healthy condition's status, message and error.
fn row(obj: &Value, _now: Timestamp) -> Row {
    let conditions = obj.get("conditions").and_then(Value::as_array);
    let healthy = conditions.and_then(|cs| {
        cs.iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Healthy"))
    });
    let text = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (status, message, error) = match healthy {
        Some(c) => (
            if text(c, "status") == "True" {
                "Healthy"
            } else {
                "Unhealthy"
            },
            text(c, "message"),
            text(c, "error"),
        ),
        None => ("Unknown", String::new(), String::new()),
    };
    plain(vec![
        name_cell(obj),
        json!(status),
        json!(message),
        json!(error),
    ])
}
