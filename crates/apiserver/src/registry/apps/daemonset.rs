//! DaemonSets: the generation follows `spec`; the selector is immutable; rollwright's
//! `rollingUpdate.paused` and `podUpdatePolicy` are defaulted and validated by the `api` crate.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::{Value, json};

use super::workload;
use crate::{
    registry::{Kind, Subresource},
    table::{
        AGE, CONTAINERS, Column, Desc, IMAGES, NAME, Printer, Row, age_cell, col, container_cells,
        format_label_selector, format_labels, i, name_cell, plain,
    },
};

/// The daemonsets kind.
pub(super) fn kind() -> Kind {
    Kind::of::<DaemonSet>()
        .short_names(&["ds"])
        .categories(&["all"])
        .subresources(&[Subresource::Status])
        .strategy(workload(
            api::defaults::daemon_set,
            api::validation::apps::validate_daemon_set,
            api::validation::apps::validate_selector_update,
        ))
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
            Field(
                "io.k8s.api.apps.v1.DaemonSetStatus",
                "desiredNumberScheduled",
            ),
        ),
        col(
            "Current",
            "integer",
            0,
            Field(
                "io.k8s.api.apps.v1.DaemonSetStatus",
                "currentNumberScheduled",
            ),
        ),
        col(
            "Ready",
            "integer",
            0,
            Field("io.k8s.api.apps.v1.DaemonSetStatus", "numberReady"),
        ),
        col(
            "Up-to-date",
            "integer",
            0,
            Field(
                "io.k8s.api.apps.v1.DaemonSetStatus",
                "updatedNumberScheduled",
            ),
        ),
        col(
            "Available",
            "integer",
            0,
            Field("io.k8s.api.apps.v1.DaemonSetStatus", "numberAvailable"),
        ),
        col(
            "Node Selector",
            "string",
            0,
            Field("io.k8s.api.core.v1.PodSpec", "nodeSelector"),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            "string",
            1,
            Field("io.k8s.api.apps.v1.DaemonSetSpec", "selector"),
        ),
    ]
}

/// Upstream's `printDaemonSet`.
fn row(obj: &Value, now: Timestamp) -> Row {
    let template_spec = &obj["spec"]["template"]["spec"];
    let (names, images) = container_cells(template_spec);
    let st = |f: &str| json!(i(obj, &["status", f]));
    plain(vec![
        name_cell(obj),
        st("desiredNumberScheduled"),
        st("currentNumberScheduled"),
        st("numberReady"),
        st("updatedNumberScheduled"),
        st("numberAvailable"),
        json!(format_labels(template_spec.get("nodeSelector"))),
        age_cell(obj, now),
        json!(names),
        json!(images),
        json!(format_label_selector(obj["spec"].get("selector"))),
    ])
}
