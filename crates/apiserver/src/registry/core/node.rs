//! Nodes: created with their status (kubelets register that way); status writes reset only
//! `spec`.

use std::collections::BTreeSet;

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use crate::{
    registry::{Kind, Strategy, Subresource},
    table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, get, name_cell, plain, s},
};

/// The nodes kind.
pub(super) fn kind() -> Kind {
    Kind::of::<Node>()
        .short_names(&["no"])
        .subresources(&[Subresource::Status])
        .strategy(NodeStrategy)
        .selectable_fields(&["spec.unschedulable"])
        .field_defaults(&[("spec.unschedulable", "false")])
        .printer(Printer::Columns { columns, row })
}

/// Upstream's `pkg/registry/core/node/strategy.go`.
struct NodeStrategy;

impl Strategy for NodeStrategy {
    fn keeps_status_on_create(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        api::defaults::node(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::core_kinds::validate_node(obj)
    }
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col("Status", "string", 0, Text("The status of the node")),
        col("Roles", "string", 0, Text("The roles of the node")),
        AGE,
        col(
            "Version",
            "string",
            0,
            Field("io.k8s.api.core.v1.NodeSystemInfo", "kubeletVersion"),
        ),
        col(
            "Internal-IP",
            "string",
            1,
            Field("io.k8s.api.core.v1.NodeStatus", "addresses"),
        ),
        col(
            "External-IP",
            "string",
            1,
            Field("io.k8s.api.core.v1.NodeStatus", "addresses"),
        ),
        col(
            "OS-Image",
            "string",
            1,
            Field("io.k8s.api.core.v1.NodeSystemInfo", "osImage"),
        ),
        col(
            "Kernel-Version",
            "string",
            1,
            Field("io.k8s.api.core.v1.NodeSystemInfo", "kernelVersion"),
        ),
        col(
            "Container-Runtime",
            "string",
            1,
            Field(
                "io.k8s.api.core.v1.NodeSystemInfo",
                "containerRuntimeVersion",
            ),
        ),
    ]
}

/// Upstream's `printNode`.
fn row(node: &Value, now: Timestamp) -> Row {
    plain(cells(node, name_cell(node), age_cell(node, now)))
}

fn cells(node: &Value, name: Value, age: Value) -> Vec<Value> {
    // The last condition of each type wins, like upstream's map.
    let ready = arr(node, &["status", "conditions"])
        .iter()
        .rfind(|c| c["type"] == "Ready");
    let mut status: Vec<&str> = match ready {
        Some(c) if c["status"] == "True" => vec!["Ready"],
        Some(_) => vec!["NotReady"],
        None => vec!["Unknown"],
    };
    if get(node, &["spec", "unschedulable"]) == Some(&json!(true)) {
        status.push("SchedulingDisabled");
    }
    let mut roles: BTreeSet<&str> = BTreeSet::new();
    if let Some(labels) = get(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role);
                }
            } else if k == "kubernetes.io/role"
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v);
            }
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };
    let address = |ty: &str| {
        arr(node, &["status", "addresses"])
            .iter()
            .find(|a| a["type"] == ty)
            .map(|a| s(a, &["address"]).to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let info = |f: &str| {
        let v = s(node, &["status", "nodeInfo", f]);
        if v.is_empty() {
            "<unknown>".to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        name,
        json!(status.join(",")),
        json!(roles),
        age,
        json!(s(node, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}
