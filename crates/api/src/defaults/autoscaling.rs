//! autoscaling/v2 defaults (upstream's `SetDefaults_HorizontalPodAutoscaler`).

use serde_json::{Value, json};

use super::{child, default_ptr, existing, on_root};

/// A HorizontalPodAutoscaler: at least one replica, CPU at 80% when no metric is given, and the
/// scaling behavior's rules when a behavior is given.
pub fn horizontal_pod_autoscaler(obj: &mut Value) {
    on_root(obj, |root| {
        let Some(spec) = child(root, "spec") else {
            return;
        };
        default_ptr(spec, "minReplicas", json!(1));
        let no_metrics = spec
            .get("metrics")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if no_metrics {
            spec.insert(
                "metrics".into(),
                json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]),
            );
        }
        if let Some(behavior) = existing(spec, "behavior") {
            if let Some(up) = child(behavior, "scaleUp") {
                default_ptr(up, "stabilizationWindowSeconds", json!(0));
                default_ptr(up, "selectPolicy", json!("Max"));
                default_ptr(
                    up,
                    "policies",
                    json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                           {"type": "Percent", "value": 100, "periodSeconds": 15}]),
                );
            }
            if let Some(down) = child(behavior, "scaleDown") {
                default_ptr(down, "selectPolicy", json!("Max"));
                default_ptr(
                    down,
                    "policies",
                    json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
                );
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_at_80_percent_by_default() {
        let mut h = json!({"spec": {"maxReplicas": 5, "scaleTargetRef": {"kind": "Deployment", "name": "x"}}});
        horizontal_pod_autoscaler(&mut h);
        assert_eq!(h["spec"]["minReplicas"], 1);
        assert_eq!(
            h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert!(h["spec"].get("behavior").is_none());
    }
}
