//! rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings, stored and validated.
//! What they grant is decided in `crate::authorizer` (and `crate::rbac_guard` checks writes).

use jiff::Timestamp;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::{Value, json};

use super::{Kind, Rules};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, name_cell, plain, s,
};

/// The rbac.authorization.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    let bindings = Printer::Columns {
        columns: binding_columns,
        row: binding_row,
    };
    vec![
        Kind::of::<ClusterRoleBinding>()
            .strategy(
                Rules::new()
                    .validate(api::validation::rbac::validate_cluster_role_binding)
                    .immutable(api::validation::rbac::validate_binding_update),
            )
            .printer(bindings.clone()),
        Kind::of::<ClusterRole>()
            .strategy(Rules::new().validate(api::validation::rbac::validate_role)),
        Kind::of::<RoleBinding>()
            .strategy(
                Rules::new()
                    .validate(api::validation::rbac::validate_role_binding)
                    .immutable(api::validation::rbac::validate_binding_update),
            )
            .printer(bindings),
        Kind::of::<Role>().strategy(Rules::new().validate(api::validation::rbac::validate_role)),
    ]
}

fn binding_columns() -> Vec<Column> {
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Role",
            "string",
            0,
            Field("io.k8s.api.rbac.v1.RoleBinding", "roleRef"),
        ),
        AGE,
        col("Users", "string", 1, Text("Users in the roleBinding")),
        col("Groups", "string", 1, Text("Groups in the roleBinding")),
        col(
            "ServiceAccounts",
            "string",
            1,
            Text("ServiceAccounts in the roleBinding"),
        ),
    ]
}

/// Upstream's `printRoleBinding`: the role as `Kind/name`, subjects by kind.
fn binding_row(b: &Value, now: Timestamp) -> Row {
    let subjects = |kind: &str| {
        arr(b, &["subjects"])
            .iter()
            .filter(|x| s(x, &["kind"]) == kind)
            .map(|x| {
                if kind == "ServiceAccount" {
                    format!("{}/{}", s(x, &["namespace"]), s(x, &["name"]))
                } else {
                    s(x, &["name"]).to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    plain(vec![
        name_cell(b),
        json!(format!(
            "{}/{}",
            s(b, &["roleRef", "kind"]),
            s(b, &["roleRef", "name"])
        )),
        age_cell(b, now),
        json!(subjects("User")),
        json!(subjects("Group")),
        json!(subjects("ServiceAccount")),
    ])
}
