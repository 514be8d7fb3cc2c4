//! StatefulSets: most of the spec is immutable; the generation follows `spec`; rollwright's
//! `rollingUpdate.paused` and `podUpdatePolicy` are defaulted and validated by the `api` crate.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use serde_json::{Value, json};

use super::{replicas, workload};
use crate::{
    registry::{Kind, Subresource},
    table::{
        AGE, CONTAINERS, Column, Desc, IMAGES, NAME, Printer, Row, age_cell, col, container_cells,
        i, name_cell, plain,
    },
};

/// Seed 003 says `maxUnavailable` may not exceed the replicas (or, with a partition, the staged
/// replicas); upstream accepts any value and the seed's own tests rely on larger ones, so
/// rollwright accepts them and says what they amount to.
fn max_unavailable_warnings(obj: &Value) -> Vec<String> {
    let rolling = obj.pointer("/spec/updateStrategy/rollingUpdate");
    let Some(max) = rolling
        .and_then(|r| r.get("maxUnavailable"))
        .and_then(Value::as_i64)
    else {
        return Vec::new();
    };
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let partition = rolling
        .and_then(|r| r.get("partition"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .clamp(0, replicas);
    let staged = replicas - partition;
    if max > staged {
        let what = if partition > 0 {
            format!(
                "the {staged} replicas at or above spec.updateStrategy.rollingUpdate.partition ({partition})"
            )
        } else {
            format!("spec.replicas ({replicas})")
        };
        vec![format!(
            "spec.updateStrategy.rollingUpdate.maxUnavailable: {max} is greater than {what}; at most {staged} pods will be unavailable at once"
        )]
    } else {
        Vec::new()
    }
}

/// The statefulsets kind.
pub(super) fn kind() -> Kind {
    Kind::of::<StatefulSet>()
        .short_names(&["sts"])
        .categories(&["all"])
        .subresources(&[Subresource::Status, Subresource::Scale])
        .strategy(
            workload(
                api::defaults::stateful_set,
                api::validation::apps::validate_stateful_set,
                api::validation::apps::validate_stateful_set_update,
            )
            .warnings(max_unavailable_warnings),
        )
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
