//! The `PodScheduled=False` condition an unschedulable pod carries, written like upstream's
//! `updatePod`: only when status, reason or message change, keeping `lastTransitionTime` while the
//! status stays `False`.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// Upstream's `PodReasonUnschedulable`.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";

/// Upstream's `DisruptionTarget` reason for a pod evicted to make room.
pub const REASON_PREEMPTION: &str = "PreemptionByScheduler";

/// The status patch marking a preemption victim, as upstream's `PreemptPod` writes it.
pub fn preempted_patch(scheduler: &str, now: jiff::Timestamp) -> Value {
    json!({"status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": REASON_PREEMPTION,
        "message": format!("{scheduler}: preempting to accommodate a higher priority pod"),
        "lastTransitionTime": now.to_string(),
    }]}})
}

/// The strategic merge patch for the pod's status (conditions merge by `type`), with
/// `nominatedNodeName` set to `nominated` (cleared when `None`), or `None` when the pod already
/// says exactly this.
pub fn unschedulable_patch(
    pod: &Pod,
    message: &str,
    nominated: Option<&str>,
    now: jiff::Timestamp,
) -> Option<Value> {
    let status = pod.status.as_ref();
    let current = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let nominated_now = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    let since = match current {
        Some(c) if c.status == "False" => {
            if c.reason.as_deref() == Some(REASON_UNSCHEDULABLE)
                && c.message.as_deref() == Some(message)
                && nominated_now == nominated
            {
                return None;
            }
            c.last_transition_time.as_ref().map_or(now, |t| t.0)
        }
        _ => now,
    };
    let mut patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": REASON_UNSCHEDULABLE,
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": since.to_string(),
    }]}});
    if nominated_now != nominated {
        patch["status"]["nominatedNodeName"] = json!(nominated);
    }
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::core::v1::{PodCondition, PodStatus},
        apimachinery::pkg::apis::meta::v1::Time,
    };

    fn pod_with(status: &str, reason: &str, message: &str, since: jiff::Timestamp) -> Pod {
        Pod {
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: status.into(),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    last_transition_time: Some(Time(since)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn writes_only_changes() {
        let earlier: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let now: jiff::Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        let ltt = |p: Option<Value>| {
            p.map(|v| {
                v["status"]["conditions"][0]["lastTransitionTime"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
        };
        let cases = [
            ("no condition yet", Pod::default(), "m", Some(now)),
            (
                "same message",
                pod_with("False", "Unschedulable", "m", earlier),
                "m",
                None,
            ),
            (
                "new message keeps the transition time",
                pod_with("False", "Unschedulable", "old", earlier),
                "m",
                Some(earlier),
            ),
            (
                "status flips",
                pod_with("True", "", "", earlier),
                "m",
                Some(now),
            ),
        ];
        for (name, pod, msg, want) in cases {
            assert_eq!(
                ltt(unschedulable_patch(&pod, msg, None, now)),
                want.map(|t| t.to_string()),
                "{name}"
            );
        }
        let patch = unschedulable_patch(&Pod::default(), "why", Some("n1"), now).unwrap();
        assert_eq!(patch["status"]["nominatedNodeName"], "n1");
        assert_eq!(patch["status"]["conditions"][0]["reason"], "Unschedulable");
        assert_eq!(patch["status"]["conditions"][0]["message"], "why");
    }
}
