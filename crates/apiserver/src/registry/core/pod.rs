//! Pods: graceful deletion, QoS class and phase at creation, status writes that keep the
//! request's labels and annotations but never its spec, owner references or deletion timestamp.

use std::collections::BTreeSet;

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::{
    registry::{Kind, Reset, Strategy, Subresource},
    table::{
        AGE, Column, Desc, NAME, Printer, Row, arr, col, get, human_duration_since, i, s, since,
        timestamp,
    },
};

/// The pods kind.
pub(super) fn kind() -> Kind {
    Kind::of::<Pod>()
        .short_names(&["po"])
        .categories(&["all"])
        .subresources(&[
            Subresource::Status,
            Subresource::Binding,
            Subresource::Eviction,
            Subresource::Log,
            Subresource::Exec,
            Subresource::EphemeralContainers,
        ])
        .strategy(PodStrategy)
        .selectable_fields(&[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ])
        .field_defaults(&[("spec.hostNetwork", "false")])
        .printer(Printer::Columns { columns, row })
}

/// Upstream's `pkg/registry/core/pod/strategy.go`.
struct PodStrategy;

impl Strategy for PodStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        let qos = qos_class(obj);
        obj["status"] = json!({"phase": "Pending", "qosClass": qos});
    }

    fn defaults(&self, obj: &mut Value) {
        api::defaults::pod(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = api::validation::pod::validate_pod(obj);
        // Upstream's `ValidatePodCreate`: they are added through `pods/ephemeralcontainers` only.
        let ephemeral = obj.pointer("/spec/ephemeralContainers");
        if ephemeral
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            errors.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                "cannot be set on create",
            ));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = api::validation::pod::validate_pod(new);
        errs.extend(api::validation::pod::validate_pod_update(new, old));
        errs
    }

    fn status_resets(&self) -> &'static [Reset] {
        // Old kubelets corrupted owner references through pods/status, so upstream ignores them.
        &[
            Reset::Spec,
            Reset::DeletionTimestamp,
            Reset::OwnerReferences,
        ]
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        // The QoS class is set at creation; a kubelet that drops it does not clear it.
        let qos_empty = new
            .pointer("/status/qosClass")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if qos_empty
            && let Some(qos) = old.pointer("/status/qosClass").cloned()
            && new.get("status").is_some_and(Value::is_object)
        {
            new["status"]["qosClass"] = qos;
        }
    }

    fn graceful_delete(&self) -> bool {
        true
    }
}

/// The pod's QoS class from its containers' requests and limits (upstream `GetPodQOS`, for CPU
/// and memory).
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| pod.get("spec")?.get(*k)?.as_array())
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let res = c.get("resources");
        let requests = res
            .and_then(|r| r.get("requests"))
            .and_then(Value::as_object);
        let limits = res.and_then(|r| r.get("limits")).and_then(Value::as_object);
        for r in ["cpu", "memory"] {
            let req = requests.and_then(|m| m.get(r));
            let lim = limits.and_then(|m| m.get(r));
            if req.is_some() || lim.is_some() {
                any = true;
            }
            match (req, lim) {
                (_, None) => guaranteed = false,
                (Some(a), Some(b)) if a != b => guaranteed = false,
                _ => {}
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

fn columns() -> Vec<Column> {
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Ready",
            "string",
            0,
            Text("The aggregate readiness state of this pod for accepting traffic."),
        ),
        col(
            "Status",
            "string",
            0,
            Text("The aggregate status of the containers in this pod."),
        ),
        col(
            "Restarts",
            "string",
            0,
            Text(
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
        ),
        AGE,
        col(
            "IP",
            "string",
            1,
            Field("io.k8s.api.core.v1.PodStatus", "podIP"),
        ),
        col(
            "Node",
            "string",
            1,
            Field("io.k8s.api.core.v1.PodSpec", "nodeName"),
        ),
        col(
            "Nominated Node",
            "string",
            1,
            Field("io.k8s.api.core.v1.PodStatus", "nominatedNodeName"),
        ),
        col(
            "Readiness Gates",
            "string",
            1,
            Field("io.k8s.api.core.v1.PodSpec", "readinessGates"),
        ),
    ]
}

/// Upstream's `printPod`.
fn row(pod: &Value, now: Timestamp) -> Row {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let mut restarts: i64 = 0;
    let mut restartable_restarts: i64 = 0;
    let mut total = arr(spec, &["containers"]).len();
    let mut ready = 0usize;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_restart: Option<Timestamp> = None;

    let phase = s(status, &["phase"]);
    let mut reason = phase.to_string();
    if !s(status, &["reason"]).is_empty() {
        reason = s(status, &["reason"]).to_string();
    }
    let conditions = arr(status, &["conditions"]);
    if conditions
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let row_conditions = match phase {
        "Succeeded" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully."}]),
        ),
        "Failed" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Failed",
            "message": "The pod failed."}]),
        ),
        _ => None,
    };

    let init_specs = arr(spec, &["initContainers"]);
    let restartable: BTreeSet<&str> = init_specs
        .iter()
        .filter(|c| s(c, &["restartPolicy"]) == "Always")
        .map(|c| s(c, &["name"]))
        .collect();
    total += restartable.len();

    let later = |cur: Option<Timestamp>, t: Option<Timestamp>| match (cur, t) {
        (Some(c), Some(t)) if t > c => Some(t),
        (None, t) => t,
        (c, _) => c,
    };

    let mut initializing = false;
    for (idx, c) in arr(status, &["initContainerStatuses"]).iter().enumerate() {
        let count = i(c, &["restartCount"]);
        restarts += count;
        let finished = timestamp(get(c, &["lastState", "terminated", "finishedAt"]));
        last_restart = later(last_restart, finished);
        let is_restartable = restartable.contains(s(c, &["name"]));
        if is_restartable {
            restartable_restarts += count;
            last_restartable_restart = later(last_restartable_restart, finished);
        }
        let terminated = get(c, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting = get(c, &["state", "waiting"]).filter(|t| t.is_object());
        if terminated.is_some_and(|t| i(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_restartable && c["started"] == json!(true) {
            if c["ready"] == json!(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = if s(t, &["reason"]).is_empty() {
                if i(t, &["signal"]) != 0 {
                    format!("Init:Signal:{}", i(t, &["signal"]))
                } else {
                    format!("Init:ExitCode:{}", i(t, &["exitCode"]))
                }
            } else {
                format!("Init:{}", s(t, &["reason"]))
            };
        } else if let Some(w) = waiting
            .filter(|w| !s(w, &["reason"]).is_empty() && s(w, &["reason"]) != "PodInitializing")
        {
            reason = format!("Init:{}", s(w, &["reason"]));
        } else {
            reason = format!("Init:{idx}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }

    let initialized = conditions
        .iter()
        .find(|c| c["type"] == "Initialized")
        .is_some_and(|c| c["status"] == "True");
    if !initializing || initialized {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for c in arr(status, &["containerStatuses"]).iter().rev() {
            restarts += i(c, &["restartCount"]);
            last_restart = later(
                last_restart,
                timestamp(get(c, &["lastState", "terminated", "finishedAt"])),
            );
            let waiting = get(c, &["state", "waiting"]).filter(|t| t.is_object());
            let terminated = get(c, &["state", "terminated"]).filter(|t| t.is_object());
            let running = get(c, &["state", "running"]).filter(|t| t.is_object());
            if let Some(w) = waiting.filter(|w| !s(w, &["reason"]).is_empty()) {
                reason = s(w, &["reason"]).to_string();
            } else if let Some(t) = terminated {
                reason = if !s(t, &["reason"]).is_empty() {
                    s(t, &["reason"]).to_string()
                } else if i(t, &["signal"]) != 0 {
                    format!("Signal:{}", i(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", i(t, &["exitCode"]))
                };
            } else if c["ready"] == json!(true) && running.is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if pod_ready {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }

    let deleting = get(pod, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null());
    if deleting && s(status, &["reason"]) == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".into();
    }

    let restarts_str = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration_since(t, now)),
        _ => restarts.to_string(),
    };

    let none_if_empty = |v: &str| {
        if v.is_empty() {
            "<none>".to_string()
        } else {
            v.to_string()
        }
    };
    let ip = arr(status, &["podIPs"])
        .first()
        .map(|p| s(p, &["ip"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| s(status, &["podIP"]));
    let gates = arr(spec, &["readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_count = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .find(|c| c["type"] == g["conditionType"])
                    .is_some_and(|c| c["status"] == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };

    let cells = vec![
        json!(s(pod, &["metadata", "name"])),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_str),
        json!(since(pod.pointer("/metadata/creationTimestamp"), now)),
        json!(none_if_empty(ip)),
        json!(none_if_empty(s(spec, &["nodeName"]))),
        json!(none_if_empty(s(status, &["nominatedNodeName"]))),
        json!(readiness_gates),
    ];
    (cells, row_conditions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes() {
        let be = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(qos_class(&be), "BestEffort");
        let g = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(qos_class(&b), "Burstable");
    }
}
