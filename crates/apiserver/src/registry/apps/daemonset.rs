//! DaemonSets: the generation follows `spec`; the selector is immutable; rollwright's
//! `rollingUpdate.paused` and `podUpdatePolicy` are defaulted and validated by the `api` crate;
//! the legacy template generation (`deprecated.daemonset.template.generation`) is the server's,
//! as upstream's strategy keeps it: 1 or more on create, one up on every template change, never
//! what an update sends. Clients and controllers that match pods by their
//! `pod-template-generation` label (upstream's DaemonSet controller, and rollwright's) read it.

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::{Value, json};

use super::workload;
use crate::{
    registry::{Generation, Kind, Rules, Strategy, Subresource},
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
        .strategy(DaemonSetStrategy(workload(
            api::defaults::daemon_set,
            api::validation::apps::validate_daemon_set,
            api::validation::apps::validate_selector_update,
        )))
        .printer(Printer::Columns { columns, row })
}

/// The annotation upstream's v1 API keeps the internal `spec.templateGeneration` in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// The workload rules, and the template generation kept as upstream's `PrepareForCreate` and
/// `PrepareForUpdate` keep it (pkg/registry/apps/daemonset/strategy.go).
struct DaemonSetStrategy(Rules);

/// The template generation `obj` carries, if it carries a number.
fn template_generation(obj: &Value) -> Option<i64> {
    obj.pointer("/metadata/annotations")?
        .get(TEMPLATE_GENERATION)?
        .as_str()?
        .parse()
        .ok()
}

fn set_template_generation(obj: &mut Value, generation: i64) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    if let Some(a) = annotations.as_object_mut() {
        a.insert(TEMPLATE_GENERATION.into(), json!(generation.to_string()));
    }
}

impl Strategy for DaemonSetStrategy {
    fn defaults(&self, obj: &mut Value) {
        Strategy::defaults(&self.0, obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        Strategy::validate(&self.0, obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        Strategy::validate_update(&self.0, new, old)
    }

    fn generation(&self) -> Generation {
        Strategy::generation(&self.0)
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        Strategy::warnings(&self.0, obj)
    }

    /// A new DaemonSet's template generation is what it brings (a restored or copied one keeps
    /// its own), but at least 1.
    fn prepare_for_create(&self, obj: &mut Value) {
        let generation = template_generation(obj).unwrap_or(0).max(1);
        set_template_generation(obj, generation);
    }

    /// An update keeps the stored template generation, one up when the template changed.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Stored before the server kept it: the generation, which is what the DaemonSet
        // controller labelled its pods with then.
        let kept = template_generation(old)
            .or_else(|| old.pointer("/metadata/generation").and_then(Value::as_i64))
            .unwrap_or(1);
        let changed = new.pointer("/spec/template") != old.pointer("/spec/template");
        set_template_generation(new, if changed { kept + 1 } else { kept });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(image: &str, annotations: Value) -> Value {
        json!({"metadata": {"name": "agent", "annotations": annotations},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "image": image}]}}}})
    }

    #[test]
    fn the_template_generation_is_the_servers_as_upstreams_strategy_keeps_it() {
        let s = DaemonSetStrategy(Rules::new());
        // Created without one: 1. With one (a restored DaemonSet): its own.
        let mut created = ds("a:1", json!({}));
        s.prepare_for_create(&mut created);
        assert_eq!(template_generation(&created), Some(1));
        let mut restored = ds("a:1", json!({TEMPLATE_GENERATION: "7"}));
        s.prepare_for_create(&mut restored);
        assert_eq!(template_generation(&restored), Some(7));
        let mut zero = ds("a:1", json!({TEMPLATE_GENERATION: "0"}));
        s.prepare_for_create(&mut zero);
        assert_eq!(template_generation(&zero), Some(1));

        // A new template: one up, whatever the update says (a copy of an old object included).
        let mut updated = ds("a:2", json!({TEMPLATE_GENERATION: "7"}));
        s.prepare_for_update(&mut updated, &restored);
        assert_eq!(template_generation(&updated), Some(8));
        // The same template, the annotation dropped or forged: kept.
        let mut forged = ds("a:2", json!({TEMPLATE_GENERATION: "99"}));
        s.prepare_for_update(&mut forged, &updated);
        assert_eq!(template_generation(&forged), Some(8));
        let mut dropped = ds("a:2", Value::Null);
        s.prepare_for_update(&mut dropped, &updated);
        assert_eq!(template_generation(&dropped), Some(8));
        // Stored without one (before the server kept it), at generation 3: its pods were
        // labelled 3, so a new template is 4, never a number an old pod carries.
        let mut stored = ds("a:2", json!({}));
        stored["metadata"]["generation"] = json!(3);
        let mut next = ds("a:3", json!({}));
        s.prepare_for_update(&mut next, &stored);
        assert_eq!(template_generation(&next), Some(4));
    }
}
