//! Deployments: the generation moves on spec and annotation changes; status writes reset only
//! `spec` and labels (upstream's deployment controller writes the revision annotation through
//! `deployments/status`).

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{Value, json};

use super::replicas;
use crate::{
    registry::{Generation, Kind, Reset, Strategy, Subresource},
    table::{
        AGE, CONTAINERS, Column, Desc, IMAGES, NAME, Printer, Row, age_cell, col, container_cells,
        i, name_cell, plain, selector_string,
    },
};

/// The deployments kind.
pub(super) fn kind() -> Kind {
    Kind::of::<Deployment>()
        .short_names(&["deploy"])
        .categories(&["all"])
        .subresources(&[Subresource::Status, Subresource::Scale])
        .strategy(DeploymentStrategy)
        .printer(Printer::Columns { columns, row })
}

/// Upstream's `pkg/registry/apps/deployment/strategy.go`.
struct DeploymentStrategy;

impl Strategy for DeploymentStrategy {
    fn defaults(&self, obj: &mut Value) {
        api::defaults::deployment(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::apps::validate_deployment(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = api::validation::apps::validate_deployment(new);
        errs.extend(api::validation::apps::validate_selector_update(new, old));
        errs
    }

    fn generation(&self) -> Generation {
        // Annotations are copied to the ReplicaSets, so their changes count as a new generation.
        Generation::SpecOrAnnotations
    }

    fn status_resets(&self) -> &'static [Reset] {
        &[Reset::Spec, Reset::Labels]
    }
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
        col(
            "Up-to-date",
            "string",
            0,
            Field("io.k8s.api.apps.v1.DeploymentStatus", "updatedReplicas"),
        ),
        col(
            "Available",
            "string",
            0,
            Field("io.k8s.api.apps.v1.DeploymentStatus", "availableReplicas"),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            "string",
            1,
            Field("io.k8s.api.apps.v1.DeploymentSpec", "selector"),
        ),
    ]
}

/// Upstream's `printDeployment`.
fn row(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(&obj["spec"]["template"]["spec"]);
    let selector = match obj["spec"].get("selector") {
        None | Some(Value::Null) => String::new(),
        Some(sel) => selector_string(sel).unwrap_or_else(|| "<invalid>".into()),
    };
    plain(vec![
        name_cell(obj),
        json!(format!(
            "{}/{}",
            i(obj, &["status", "readyReplicas"]),
            replicas(obj)
        )),
        json!(i(obj, &["status", "updatedReplicas"])),
        json!(i(obj, &["status", "availableReplicas"])),
        age_cell(obj, now),
        json!(names),
        json!(images),
        json!(selector),
    ])
}
