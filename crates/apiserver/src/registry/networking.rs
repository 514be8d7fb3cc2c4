//! networking.k8s.io/v1: Ingresses, IngressClasses and NetworkPolicies, stored as given (no
//! ingress controller or network plugin acts on them).

use jiff::Timestamp;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass, NetworkPolicy};
use serde_json::{Value, json};

use super::{Generation, Kind, Rules, Subresource};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, format_label_selector, get,
    name_cell, plain, s,
};

/// The networking.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<Ingress>()
            .short_names(&["ing"])
            .subresources(&[Subresource::Status])
            .strategy(
                Rules::new()
                    .generation(Generation::Spec)
                    .validate(api::validation::meta::validate_namespaced),
            )
            .printer(Printer::Columns {
                columns: ingress_columns,
                row: ingress_row,
            }),
        Kind::of::<IngressClass>()
            .strategy(Rules::new().validate(api::validation::meta::validate_cluster_scoped))
            .printer(Printer::Columns {
                columns: ingress_class_columns,
                row: ingress_class_row,
            }),
        Kind::of::<NetworkPolicy>()
            .short_names(&["netpol"])
            .strategy(
                Rules::new()
                    .generation(Generation::Spec)
                    .validate(api::validation::meta::validate_namespaced),
            )
            .printer(Printer::Columns {
                columns: || {
                    vec![
                        NAME,
                        col(
                            "Pod-Selector",
                            "string",
                            0,
                            Desc::Field(
                                "io.k8s.api.networking.v1.NetworkPolicySpec",
                                "podSelector",
                            ),
                        ),
                        AGE,
                    ]
                },
                row: |np, now| {
                    plain(vec![
                        name_cell(np),
                        json!(format_label_selector(get(np, &["spec", "podSelector"]))),
                        age_cell(np, now),
                    ])
                },
            }),
    ]
}

fn ingress_columns() -> Vec<Column> {
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Class",
            "string",
            0,
            Field("io.k8s.api.networking.v1.IngressSpec", "ingressClassName"),
        ),
        col(
            "Hosts",
            "string",
            0,
            Text("Hosts that incoming requests are matched against before the ingress rule"),
        ),
        col(
            "Address",
            "string",
            0,
            Text("Address is a list containing ingress points for the load-balancer"),
        ),
        col(
            "Ports",
            "string",
            0,
            Text("Ports of TLS configurations that open"),
        ),
        AGE,
    ]
}

/// Upstream's `formatHosts`: up to three hosts, `*` when none.
fn hosts(ing: &Value) -> String {
    let rules = arr(ing, &["spec", "rules"]);
    const MAX: usize = 3;
    let list: Vec<&str> = rules
        .iter()
        .take(MAX)
        .map(|r| s(r, &["host"]))
        .filter(|h| !h.is_empty())
        .collect();
    if list.is_empty() {
        return "*".into();
    }
    if rules.len() > MAX {
        format!("{} + {} more...", list.join(","), rules.len() - MAX)
    } else {
        list.join(",")
    }
}

fn ingress_row(ing: &Value, now: Timestamp) -> Row {
    let class = Some(s(ing, &["spec", "ingressClassName"]))
        .filter(|c| !c.is_empty())
        .unwrap_or("<none>");
    let address: Vec<String> = arr(ing, &["status", "loadBalancer", "ingress"])
        .iter()
        .map(|i| {
            let ip = s(i, &["ip"]);
            if ip.is_empty() {
                s(i, &["hostname"])
            } else {
                ip
            }
            .to_string()
        })
        .filter(|a| !a.is_empty())
        .collect();
    let ports = if arr(ing, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    plain(vec![
        name_cell(ing),
        json!(class),
        json!(hosts(ing)),
        json!(address.join(",")),
        json!(ports),
        age_cell(ing, now),
    ])
}

fn ingress_class_columns() -> Vec<Column> {
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Controller",
            "string",
            0,
            Field("io.k8s.api.networking.v1.IngressClassSpec", "controller"),
        ),
        col(
            "Parameters",
            "string",
            0,
            Text("A reference to a resource with additional parameters."),
        ),
        AGE,
    ]
}

fn ingress_class_row(ic: &Value, now: Timestamp) -> Row {
    let parameters = match get(ic, &["spec", "parameters"]).filter(|p| p.is_object()) {
        None => "<none>".to_string(),
        Some(p) => {
            let mut kind = s(p, &["kind"]).to_string();
            if let Some(g) = p.get("apiGroup").and_then(Value::as_str) {
                kind = format!("{kind}.{g}");
            }
            format!("{kind}/{}", s(p, &["name"]))
        }
    };
    plain(vec![
        name_cell(ic),
        json!(s(ic, &["spec", "controller"])),
        json!(parameters),
        age_cell(ic, now),
    ])
}
