//! StatefulSets: most of the spec is immutable; the generation follows `spec`; rollwright's
//! `rollingUpdate.paused` and `podUpdatePolicy` are defaulted and validated by the `api` crate.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use serde_json::{Value, json};

use super::{Workload, replicas};
use crate::{
    registry::{Kind, Subresource},
    table::{
        AGE, CONTAINERS, Column, Desc, IMAGES, NAME, Printer, Row, age_cell, col, container_cells,
        i, name_cell, plain,
    },
};

/// The statefulsets kind.
pub(super) fn kind() -> Kind {
    Kind::of::<StatefulSet>()
        .short_names(&["sts"])
        .categories(&["all"])
        .subresources(&[Subresource::Status, Subresource::Scale])
        .strategy(Workload {
            defaults: api::defaults::stateful_set,
            validate: api::validation::apps::validate_stateful_set,
            immutable: api::validation::apps::validate_stateful_set_update,
        })
        .printer(Printer::Columns { columns, row })
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Ready",
            "string",
            0,
            Text("Number of the pod with ready state"),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
    ]
}

/// Upstream's `printStatefulSet`.
fn row(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(&obj["spec"]["template"]["spec"]);
    plain(vec![
        name_cell(obj),
        json!(format!(
            "{}/{}",
            i(obj, &["status", "readyReplicas"]),
            replicas(obj)
        )),
        age_cell(obj, now),
        json!(names),
        json!(images),
    ])
}
