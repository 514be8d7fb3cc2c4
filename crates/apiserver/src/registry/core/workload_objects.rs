//! The core/v1 objects around workloads: ServiceAccounts, PodTemplates, ReplicationControllers
//! (kept by the `replicationcontroller` controller), ResourceQuotas (enforced: `crate::quota`
//! admits creates against them and the `resourcequota` controller counts their usage) and
//! LimitRanges (stored, not enforced: no defaults from limit ranges).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    LimitRange, PodTemplate, ReplicationController, ResourceQuota, ServiceAccount,
};
use serde_json::{Value, json};

use crate::{
    registry::{Generation, Kind, Rules, Strategy, Subresource},
    table::{
        AGE, CONTAINERS, Column, Desc, IMAGES, NAME, Printer, Row, age_cell, arr, col,
        container_cells, format_labels, get, i, name_cell, plain,
    },
};

/// The serviceaccounts kind.
pub(super) fn service_account() -> Kind {
    Kind::of::<ServiceAccount>()
        .short_names(&["sa"])
        .subresources(&[Subresource::Token])
        .strategy(Rules::new().validate(api::validation::meta::validate_namespaced))
        .printer(Printer::Columns {
            columns: || {
                vec![
                    NAME,
                    col(
                        "Secrets",
                        "string",
                        0,
                        Desc::Field("io.k8s.api.core.v1.ServiceAccount", "secrets"),
                    ),
                    AGE,
                ]
            },
            row: |obj, now| {
                plain(vec![
                    name_cell(obj),
                    json!(arr(obj, &["secrets"]).len()),
                    age_cell(obj, now),
                ])
            },
        })
}

/// The podtemplates kind.
pub(super) fn pod_template() -> Kind {
    Kind::of::<PodTemplate>()
        .strategy(Rules::new().validate(api::validation::meta::validate_namespaced))
        .printer(Printer::Columns {
            columns: || {
                vec![
                    NAME,
                    col(
                        "Containers",
                        "string",
                        0,
                        Desc::Text("Names of each container in the template."),
                    ),
                    col(
                        "Images",
                        "string",
                        0,
                        Desc::Text("Images referenced by each container in the template."),
                    ),
                    col(
                        "Pod Labels",
                        "string",
                        0,
                        Desc::Text("The labels for the pod template."),
                    ),
                ]
            },
            row: |obj, _| {
                let (names, images) = container_cells(&obj["template"]["spec"]);
                plain(vec![
                    name_cell(obj),
                    json!(names),
                    json!(images),
                    json!(format_labels(get(obj, &["template", "metadata", "labels"]))),
                ])
            },
        })
}

/// The replicationcontrollers kind.
pub(super) fn replication_controller() -> Kind {
    Kind::of::<ReplicationController>()
        .short_names(&["rc"])
        .categories(&["all"])
        .subresources(&[Subresource::Status, Subresource::Scale])
        .strategy(RcStrategy(
            Rules::new()
                .defaults(api::defaults::replication_controller)
                .validate(api::validation::core_kinds::validate_replication_controller)
                .generation(Generation::Spec),
        ))
        // Upstream's `ControllerToSelectableFields`.
        .selectable_fields(&["status.replicas"])
        .field_defaults(&[("status.replicas", "0")])
        .printer(Printer::Columns {
            columns: rc_columns,
            row: rc_row,
        })
}

/// A ReplicationController's rules, and upstream's `rcStrategy.DefaultGarbageCollectionPolicy`:
/// core/v1 RCs orphan their pods unless a delete says otherwise, for clients older than garbage
/// collection (kubectl sends Background explicitly).
struct RcStrategy(Rules);

impl Strategy for RcStrategy {
    fn default_propagation(&self) -> &'static str {
        "Orphan"
    }

    fn defaults(&self, obj: &mut Value) {
        Strategy::defaults(&self.0, obj)
    }

    fn validate(&self, obj: &Value) -> Vec<api::field::FieldError> {
        Strategy::validate(&self.0, obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<api::field::FieldError> {
        Strategy::validate_update(&self.0, new, old)
    }

    fn generation(&self) -> Generation {
        Strategy::generation(&self.0)
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        Strategy::warnings(&self.0, obj)
    }
}

fn rc_columns() -> Vec<Column> {
    use Desc::Field;
    vec![
        NAME,
        col(
            "Desired",
            "integer",
            0,
            Field("io.k8s.api.core.v1.ReplicationControllerSpec", "replicas"),
        ),
        col(
            "Current",
            "integer",
            0,
            Field("io.k8s.api.core.v1.ReplicationControllerStatus", "replicas"),
        ),
        col(
            "Ready",
            "integer",
            0,
            Field(
                "io.k8s.api.core.v1.ReplicationControllerStatus",
                "readyReplicas",
            ),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            "string",
            1,
            Field("io.k8s.api.core.v1.ReplicationControllerSpec", "selector"),
        ),
    ]
}

fn rc_row(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(&obj["spec"]["template"]["spec"]);
    plain(vec![
        name_cell(obj),
        json!(
            get(obj, &["spec", "replicas"])
                .and_then(Value::as_i64)
                .unwrap_or(1)
        ),
        json!(i(obj, &["status", "replicas"])),
        json!(i(obj, &["status", "readyReplicas"])),
        age_cell(obj, now),
        json!(names),
        json!(images),
        json!(format_labels(get(obj, &["spec", "selector"]))),
    ])
}

/// The resourcequotas kind (its strategy and admission are in `crate::quota`).
pub(super) fn resource_quota() -> Kind {
    Kind::of::<ResourceQuota>()
        .short_names(&["quota"])
        .subresources(&[Subresource::Status])
        .strategy(crate::quota::strategy::QuotaStrategy)
        .printer(Printer::Columns {
            columns: quota_columns,
            row: quota_row,
        })
}

fn quota_columns() -> Vec<Column> {
    vec![
        NAME,
        AGE,
        col(
            "Request",
            "string",
            0,
            Desc::Text(
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
        ),
        col(
            "Limit",
            "string",
            0,
            Desc::Text(
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
        ),
    ]
}

/// Upstream's `printResourceQuota`: `used/hard` per resource of `status.hard`, limits apart.
fn quota_row(obj: &Value, now: Timestamp) -> Row {
    let mut requests = Vec::new();
    let mut limits = Vec::new();
    if let Some(hard) = get(obj, &["status", "hard"]).and_then(Value::as_object) {
        let mut names: Vec<&String> = hard.keys().collect();
        names.sort();
        for name in names {
            let used = get(obj, &["status", "used", name])
                .and_then(Value::as_str)
                .unwrap_or("0");
            let entry = format!(
                "{name}: {used}/{}",
                hard[name.as_str()].as_str().unwrap_or_default()
            );
            if name.starts_with("limits.") {
                limits.push(entry);
            } else {
                requests.push(entry);
            }
        }
    }
    plain(vec![
        name_cell(obj),
        age_cell(obj, now),
        json!(requests.join(", ")),
        json!(limits.join(", ")),
    ])
}

/// The limitranges kind: defaulted as upstream's, enforced on new pods by
/// [`crate::limit_ranger`].
pub(super) fn limit_range() -> Kind {
    Kind::of::<LimitRange>().short_names(&["limits"]).strategy(
        Rules::new()
            .defaults(api::defaults::limit_range)
            .validate(api::validation::meta::validate_namespaced),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_controllers_orphan_by_default_and_keep_their_rules() {
        let kind = replication_controller();
        let s = &kind.strategy;
        assert_eq!(s.default_propagation(), "Orphan");
        assert!(matches!(s.generation(), Generation::Spec));
        let mut rc = json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": {"template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        s.defaults(&mut rc);
        assert_eq!(rc["spec"]["replicas"], json!(1));
        assert_eq!(rc["spec"]["selector"], json!({"app": "web"}));
        assert!(s.validate(&rc).is_empty(), "{:?}", s.validate(&rc));
        let mut bad = rc.clone();
        bad["spec"]["selector"] = json!({"app": "other"});
        assert!(!s.validate_update(&bad, &rc).is_empty());
    }
}
