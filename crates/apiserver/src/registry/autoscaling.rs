//! autoscaling HorizontalPodAutoscalers: stored as v2, also served as v1 through upstream's
//! conversion (the CPU utilization target; v1 cannot express other metrics, and a v1 write
//! drops them, where upstream keeps them in an annotation). No autoscaler runs.

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::{Value, json};

use super::{Conversion, Kind, Rules, Subresource};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, get, name_cell, plain, s,
};

/// The autoscaling kinds: v2 (preferred) first.
pub(super) fn kinds() -> Vec<Kind> {
    let printer = Printer::Columns { columns, row };
    vec![
        Kind::of::<v2::HorizontalPodAutoscaler>()
            .short_names(&["hpa"])
            .categories(&["all"])
            .subresources(&[Subresource::Status])
            .strategy(
                Rules::new()
                    .defaults(api::defaults::horizontal_pod_autoscaler)
                    .validate(api::validation::meta::validate_namespaced),
            )
            .printer(printer.clone()),
        Kind::of::<v1::HorizontalPodAutoscaler>()
            .short_names(&["hpa"])
            .categories(&["all"])
            .subresources(&[Subresource::Status])
            .view_of("autoscaling", "horizontalpodautoscalers", V1)
            .printer(printer),
    ]
}

struct V1;

fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource" && m["resource"]["name"] == "cpu"
}

impl Conversion for V1 {
    fn stored_to_view(&self, mut obj: Value) -> Value {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            let target = spec
                .get("metrics")
                .and_then(Value::as_array)
                .and_then(|ms| ms.iter().find(|m| is_cpu_utilization(m)))
                .and_then(|m| m.pointer("/resource/target/averageUtilization"))
                .cloned();
            spec.remove("metrics");
            spec.remove("behavior");
            if let Some(t) = target {
                spec.insert("targetCPUUtilizationPercentage".into(), t);
            }
        }
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
            let current = status
                .get("currentMetrics")
                .and_then(Value::as_array)
                .and_then(|ms| ms.iter().find(|m| is_cpu_utilization(m)))
                .and_then(|m| m.pointer("/resource/current/averageUtilization"))
                .cloned();
            status.remove("currentMetrics");
            status.remove("conditions");
            if let Some(c) = current {
                status.insert("currentCPUUtilizationPercentage".into(), c);
            }
        }
        obj
    }

    fn view_to_stored(&self, mut obj: Value) -> Value {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
            && let Some(target) = spec.remove("targetCPUUtilizationPercentage")
        {
            spec.insert(
                "metrics".into(),
                json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": target}}}]),
            );
        }
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut)
            && let Some(current) = status.remove("currentCPUUtilizationPercentage")
        {
            status.insert(
                "currentMetrics".into(),
                json!([{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": current}}}]),
            );
        }
        obj
    }
}

fn columns() -> Vec<Column> {
    use Desc::{Field, Text};
    const SPEC: &str = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec";
    vec![
        NAME,
        col("Reference", "string", 0, Field(SPEC, "scaleTargetRef")),
        col("Targets", "string", 0, Field(SPEC, "metrics")),
        col("MinPods", "string", 0, Field(SPEC, "minReplicas")),
        col("MaxPods", "integer", 0, Field(SPEC, "maxReplicas")),
        col(
            "Replicas",
            "integer",
            0,
            Text(
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
            ),
        ),
        AGE,
    ]
}

/// Upstream's `formatHPAMetrics` for resource metrics: `cpu: <current>/<target>`.
fn targets(hpa: &Value) -> String {
    let specs = arr(hpa, &["spec", "metrics"]);
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = arr(hpa, &["status", "currentMetrics"]);
    let mut list = Vec::new();
    for (idx, m) in specs.iter().enumerate() {
        let status = statuses.get(idx);
        let text = match s(m, &["type"]) {
            "Resource" | "ContainerResource" => {
                let key = if s(m, &["type"]) == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let name = s(m, &[key, "name"]);
                let target = &m[key]["target"];
                if let Some(v) = target.get("averageValue").and_then(Value::as_str) {
                    let current = status
                        .and_then(|st| st.pointer(&format!("/{key}/current/averageValue")))
                        .and_then(Value::as_str)
                        .unwrap_or("<unknown>");
                    format!("{name}: {current}/{v}")
                } else {
                    let current = status
                        .and_then(|st| st.pointer(&format!("/{key}/current/averageUtilization")))
                        .and_then(Value::as_i64)
                        .map(|c| format!("{c}%"))
                        .unwrap_or_else(|| "<unknown>".into());
                    let want = target
                        .get("averageUtilization")
                        .and_then(Value::as_i64)
                        .map(|t| format!("{t}%"))
                        .unwrap_or_else(|| "<auto>".into());
                    format!("{name}: {current}/{want}")
                }
            }
            other => format!("<{}>", other.to_lowercase()),
        };
        list.push(text);
    }
    const MAX: usize = 2;
    if list.len() > MAX {
        let more = list.len() - MAX;
        list.truncate(MAX);
        format!("{} + {more} more...", list.join(", "))
    } else {
        list.join(", ")
    }
}

fn row(hpa: &Value, now: Timestamp) -> Row {
    let reference = format!(
        "{}/{}",
        s(hpa, &["spec", "scaleTargetRef", "kind"]),
        s(hpa, &["spec", "scaleTargetRef", "name"])
    );
    let min = get(hpa, &["spec", "minReplicas"])
        .and_then(Value::as_i64)
        .map(|m| m.to_string())
        .unwrap_or_else(|| "<unset>".into());
    plain(vec![
        name_cell(hpa),
        json!(reference),
        json!(targets(hpa)),
        json!(min),
        json!(
            get(hpa, &["spec", "maxReplicas"])
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
        json!(
            get(hpa, &["status", "currentReplicas"])
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
        age_cell(hpa, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_round_trips_the_cpu_target() {
        let v2 = json!({"spec": {"maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
        let v1 = V1.stored_to_view(v2.clone());
        assert_eq!(
            v1["spec"],
            json!({"maxReplicas": 3, "targetCPUUtilizationPercentage": 50})
        );
        assert_eq!(V1.view_to_stored(v1), v2);
        assert_eq!(targets(&v2), "cpu: <unknown>/50%");
    }
}
