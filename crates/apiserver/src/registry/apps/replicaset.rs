//! ReplicaSets: the generation follows `spec`; the selector is immutable.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Value, json};

use super::{replicas, workload};
use crate::{
    registry::{Kind, Subresource},
    table::{
        AGE, CONTAINERS, Column, Desc, IMAGES, NAME, Printer, Row, age_cell, col, container_cells,
        format_label_selector, i, name_cell, plain,
    },
};

/// The replicasets kind.
pub(super) fn kind() -> Kind {
    Kind::of::<ReplicaSet>()
        .short_names(&["rs"])
        .categories(&["all"])
        .subresources(&[Subresource::Status, Subresource::Scale])
        .strategy(workload(
            api::defaults::replica_set,
            api::validation::apps::validate_replica_set,
            api::validation::apps::validate_selector_update,
        ))
        .selectable_fields(&["status.replicas"])
        .field_defaults(&[("status.replicas", "0")])
        .printer(Printer::Columns { columns, row })
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Desired",
            "integer",
            0,
            Field("io.k8s.api.apps.v1.ReplicaSetSpec", "replicas"),
        ),
        col(
            "Current",
            "integer",
            0,
            Field("io.k8s.api.apps.v1.ReplicaSetStatus", "replicas"),
        ),
        col(
            "Ready",
            "integer",
            0,
            Field("io.k8s.api.apps.v1.ReplicaSetStatus", "readyReplicas"),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            "string",
            1,
            Field("io.k8s.api.apps.v1.ReplicaSetSpec", "selector"),
        ),
    ]
}

/// Upstream's `printReplicaSet`.
fn row(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(&obj["spec"]["template"]["spec"]);
    plain(vec![
        name_cell(obj),
        json!(replicas(obj)),
        json!(i(obj, &["status", "replicas"])),
        json!(i(obj, &["status", "readyReplicas"])),
        age_cell(obj, now),
        json!(names),
        json!(images),
        json!(format_label_selector(obj["spec"].get("selector"))),
    ])
}
