//! The pod failure policy (`spec.podFailurePolicy`), as upstream's `pod_failure_policy.go`: the
//! first rule whose exit codes or pod conditions match a failed pod decides whether it fails the
//! Job, is ignored (not counted against `backoffLimit`) or is counted.

use k8s_openapi::api::{
    batch::v1::{PodFailurePolicy, PodFailurePolicyRule},
    core::v1::{ContainerStatus, Pod},
};

/// What a rule decides for a failed pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The Job fails at once, with this message (reason `PodFailurePolicy`).
    FailJob(String),
    /// The failure is not counted.
    Ignore,
    /// The failure counts against `backoffLimit` (also the default without a matching rule).
    Count,
}

/// The verdict for a failed `pod` under `policy`; `Count` when no rule matches.
pub fn judge(policy: Option<&PodFailurePolicy>, pod: &Pod) -> Verdict {
    let Some(policy) = policy else {
        return Verdict::Count;
    };
    for (i, rule) in policy.rules.iter().enumerate() {
        let Some(why) = matches(rule, pod) else {
            continue;
        };
        return match rule.action.as_str() {
            "FailJob" => Verdict::FailJob(format!("{why} matching FailJob rule at index {i}")),
            "Ignore" => Verdict::Ignore,
            // `Count`, and `FailIndex` (only meaningful with backoffLimitPerIndex).
            _ => Verdict::Count,
        };
    }
    Verdict::Count
}

/// Why `rule` matches the pod (the start of upstream's message), if it does.
fn matches(rule: &PodFailurePolicyRule, pod: &Pod) -> Option<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref()?;
    if let Some(req) = &rule.on_exit_codes {
        let statuses: Vec<&ContainerStatus> = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .collect();
        for c in statuses {
            if req.container_name.as_ref().is_some_and(|n| *n != c.name) {
                continue;
            }
            let Some(code) = c
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code)
                .filter(|code| *code != 0)
            else {
                continue;
            };
            let listed = req.values.contains(&code);
            let hit = match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            if hit {
                return Some(format!(
                    "Container {} for pod {ns}/{name} failed with exit code {code}",
                    c.name
                ));
            }
        }
    }
    for pattern in rule.on_pod_conditions.iter().flatten() {
        let want = pattern.status.as_str();
        let hit = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == pattern.type_ && c.status == want);
        if hit {
            return Some(format!("Pod {ns}/{name} has condition {}", pattern.type_));
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed(code: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": conditions, "containerStatuses": [
                {"name": "main", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                 "state": {"terminated": {"exitCode": code}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let policy: PodFailurePolicy = serde_json::from_value(json!({"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}},
        ]}))
        .unwrap();
        let disrupted = failed(3, json!([{"type": "DisruptionTarget", "status": "True"}]));
        assert_eq!(judge(Some(&policy), &disrupted), Verdict::Ignore);
        assert_eq!(
            judge(Some(&policy), &failed(42, json!([]))),
            Verdict::FailJob(
                "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
                    .into()
            )
        );
        assert_eq!(judge(Some(&policy), &failed(7, json!([]))), Verdict::Count);
        assert!(matches!(
            judge(Some(&policy), &failed(1, json!([]))),
            Verdict::FailJob(_)
        ));
        assert_eq!(judge(None, &failed(1, json!([]))), Verdict::Count);
    }
}
