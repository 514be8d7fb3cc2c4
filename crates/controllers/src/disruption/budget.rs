//! A PodDisruptionBudget's arithmetic, as upstream's `pkg/controller/disruption` computes it:
//! how many pods are expected and must stay healthy, how many are, which recent evictions
//! still count as disruptions, and the status (with its `DisruptionAllowed` condition) that
//! follows. Pure functions over the budget and its pods.

use api::intstr::{IntOrPercent, scaled_value};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::{
        core::v1::Pod,
        policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus},
    },
    apimachinery::pkg::{
        apis::meta::v1::{Condition, Time},
        util::intstr::IntOrString,
    },
};
use std::collections::BTreeMap;

/// How long an eviction counts as a disruption before the pod is expected to be gone
/// (upstream's `DeletionTimeout`, 2 minutes).
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);
/// The condition the status carries.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// Its reason when a disruption is allowed.
pub const SUFFICIENT_PODS: &str = "SufficientPods";
/// Its reason when none is.
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
/// Its reason when the controller could not compute the status.
pub const SYNC_FAILED: &str = "SyncFailed";

/// Why the expected pod count cannot be computed; the budget then allows no disruption.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CountError {
    /// A pod's controller could not be found (or has a kind without a known scale).
    #[error("found no controllers for pod {0:?}")]
    NoController(String),
    /// `minAvailable`/`maxUnavailable` is not a number or percentage.
    #[error("{0}")]
    Value(#[from] api::intstr::IntOrPercentError),
}

/// `expectedPods`, `desiredHealthy` and the pods without a controller (upstream's
/// `getExpectedPodCount`). `scale` sums the scale of the pods' controllers, listing pods
/// without one; it is only asked when a percentage or `maxUnavailable` needs it (an integer
/// `minAvailable` counts the pods themselves).
pub fn expected_and_desired(
    spec: &PodDisruptionBudgetSpec,
    pods: usize,
    scale: impl FnOnce() -> Result<(i32, Vec<String>), CountError>,
) -> Result<(i32, i32, Vec<String>), CountError> {
    if let Some(max_unavailable) = &spec.max_unavailable {
        let (expected, unmanaged) = scale()?;
        let max = scaled_value(&int_or_percent(max_unavailable)?, expected, true);
        return Ok((expected, (expected - max).max(0), unmanaged));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((i32::try_from(pods).unwrap_or(i32::MAX), *n, Vec::new())),
        Some(v) => {
            let (expected, unmanaged) = scale()?;
            let min = scaled_value(&int_or_percent(v)?, expected, true);
            Ok((expected, min, unmanaged))
        }
        None => Ok((0, 0, Vec::new())),
    }
}

fn int_or_percent(v: &IntOrString) -> Result<IntOrPercent, api::intstr::IntOrPercentError> {
    match v {
        IntOrString::Int(n) => Ok(IntOrPercent::Int(*n)),
        IntOrString::String(s) => IntOrPercent::parse(&serde_json::Value::String(s.clone())),
    }
}

/// The evictions still counting as disruptions (upstream's `buildDisruptedPodMap`): pods the
/// eviction subresource recorded that are not being deleted yet and were evicted less than
/// [`DELETION_TIMEOUT`] ago; and when the next of them expires, so that the budget is
/// recomputed then. Pods gone or deleting drop out.
pub fn disrupted(
    pods: &[&Pod],
    recorded: Option<&BTreeMap<String, Time>>,
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let mut out = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let Some(recorded) = recorded else {
        return (out, recheck);
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = recorded.get(&name) else {
            continue;
        };
        let expires = at.0 + DELETION_TIMEOUT;
        if expires < now {
            // Upstream records a NotDeleted event on the pod here and forgets it.
            continue;
        }
        if shown_since(pod, at.0) {
            continue;
        }
        recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
        out.insert(name, at.clone());
    }
    (out, recheck)
}

/// Beyond upstream: whether the disruption recorded at `at` is behind the pod of that name
/// already, so the record can go before the pod is deleted. Either the pod is a new one (created
/// in a later second than the record, as a StatefulSet recreates `web-1` once the evicted
/// `web-1` is gone, which upstream would count as disrupted for two minutes), or it has been not
/// ready since the record (restarting after an in-place update, `crate::disruption_gate`): not
/// ready, it counts as unhealthy without the record, and once ready again it is the updated pod.
/// Times are compared in the whole seconds the API server keeps. A pod created in the record's
/// own second may be the very pod the record is about (evicted the second it was made): the
/// record stays, as upstream keeps it, or that pod would count as healthy again and a second
/// disruption could go. A disruption is spent only on a ready pod, so a not-ready transition in
/// the same second as the record is the disruption's.
fn shown_since(pod: &Pod, at: Timestamp) -> bool {
    let at = at.as_second();
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .is_some_and(|t| t.0.as_second() > at);
    let restarting = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| {
            c.status != "True"
                && c.last_transition_time
                    .as_ref()
                    .is_some_and(|t| t.0.as_second() >= at)
        });
    created || restarting
}

/// `currentHealthy`: ready pods that are neither being deleted nor recently evicted.
pub fn current_healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now: Timestamp) -> i32 {
    let healthy = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or("");
            disrupted
                .get(name)
                .is_none_or(|at| at.0 + DELETION_TIMEOUT <= now)
        })
        .filter(|p| api::pod::is_ready(p))
        .count();
    i32::try_from(healthy).unwrap_or(i32::MAX)
}

/// The figures of a computed status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Figures {
    /// Ready pods not being disrupted.
    pub current_healthy: i32,
    /// Pods that must stay healthy.
    pub desired_healthy: i32,
    /// Pods the budget covers by its controllers' scale.
    pub expected_pods: i32,
    /// Recent evictions still counting.
    pub disrupted_pods: BTreeMap<String, Time>,
}

/// The status `pdb` should have for `figures`, or `None` when it has it already (upstream's
/// `updatePdbStatus`). A budget that expects no pods allows no disruption, so that a budget
/// whose pods have just appeared is safe before its first sync.
pub fn status(
    pdb: &PodDisruptionBudget,
    figures: Figures,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    let old = pdb.status.clone().unwrap_or_default();
    let generation = pdb.metadata.generation;
    let mut allowed = figures.current_healthy - figures.desired_healthy;
    if figures.expected_pods <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let disrupted_same = old.disrupted_pods.clone().unwrap_or_default() == figures.disrupted_pods;
    if old.current_healthy == figures.current_healthy
        && old.desired_healthy == figures.desired_healthy
        && old.expected_pods == figures.expected_pods
        && old.disruptions_allowed == allowed
        && disrupted_same
        && old.observed_generation == generation
        && conditions_up_to_date(&old, generation)
    {
        return None;
    }
    let mut next = PodDisruptionBudgetStatus {
        current_healthy: figures.current_healthy,
        desired_healthy: figures.desired_healthy,
        expected_pods: figures.expected_pods,
        disruptions_allowed: allowed,
        disrupted_pods: (!figures.disrupted_pods.is_empty()).then_some(figures.disrupted_pods),
        observed_generation: generation,
        conditions: old.conditions,
    };
    set_allowed_condition(&mut next, now);
    Some(next)
}

/// Sets `DisruptionAllowed` from `disruptionsAllowed` (upstream's
/// `UpdateDisruptionAllowedCondition`); the eviction subresource uses it too.
pub fn set_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Timestamp) {
    let (value, reason) = if status.disruptions_allowed > 0 {
        ("True", SUFFICIENT_PODS)
    } else {
        ("False", INSUFFICIENT_PODS)
    };
    let generation = status.observed_generation;
    set_condition(status, value, reason, "", generation, now);
}

/// The status of a budget whose figures could not be computed (upstream's `failSafe`): no
/// disruption allowed, `DisruptionAllowed` False with reason `SyncFailed` and the error.
pub fn fail_safe(
    pdb: &PodDisruptionBudget,
    message: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let generation = status.observed_generation;
    set_condition(&mut status, "False", SYNC_FAILED, message, generation, now);
    status
}

/// apimachinery's `SetStatusCondition` for `DisruptionAllowed`: the transition time moves
/// only when the status does.
fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    value: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let cond = Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(now),
    };
    match conditions
        .iter_mut()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    {
        Some(existing) => {
            let since = if existing.status == value {
                existing.last_transition_time.clone()
            } else {
                cond.last_transition_time.clone()
            };
            *existing = Condition {
                last_transition_time: since,
                ..cond
            };
        }
        None => conditions.push(cond),
    }
}

/// Upstream's `ConditionsAreUpToDate`.
fn conditions_up_to_date(status: &PodDisruptionBudgetStatus, generation: Option<i64>) -> bool {
    let Some(cond) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    else {
        return false;
    };
    if status.observed_generation != generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        cond.status == "True" && cond.reason == SUFFICIENT_PODS
    } else {
        cond.status == "False" && cond.reason == INSUFFICIENT_PODS
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodDisruptionBudgetSpec {
        serde_json::from_value(v).unwrap()
    }

    fn pod(name: &str, ready: bool, deleting: bool) -> Pod {
        let mut meta = json!({"name": name});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta, "status": {"conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .unwrap()
    }

    #[test]
    fn expected_and_desired_follow_upstream_for_numbers_and_percentages() {
        let scale = |n| move || Ok((n, Vec::new()));
        // Table: spec, pods matched, controllers' scale -> (expected, desired).
        let cases = [
            (json!({"minAvailable": 2}), 3, 5, (3, 2)),
            (json!({"minAvailable": "50%"}), 3, 5, (5, 3)),
            (json!({"minAvailable": "100%"}), 3, 3, (3, 3)),
            (json!({"maxUnavailable": 1}), 3, 4, (4, 3)),
            (json!({"maxUnavailable": "25%"}), 3, 3, (3, 2)),
            (json!({"maxUnavailable": "50%"}), 3, 3, (3, 1)),
            (json!({"maxUnavailable": 9}), 3, 3, (3, 0)),
        ];
        for (s, pods, n, want) in cases {
            let (e, d, _) = expected_and_desired(&spec(s.clone()), pods, scale(n)).unwrap();
            assert_eq!((e, d), want, "{s}");
        }
        let bad = expected_and_desired(&spec(json!({"minAvailable": "5"})), 1, scale(1));
        assert!(bad.is_err());
        let missing = expected_and_desired(&spec(json!({"maxUnavailable": 1})), 1, || {
            Err(CountError::NoController("p".into()))
        });
        assert_eq!(
            missing.unwrap_err().to_string(),
            "found no controllers for pod \"p\""
        );
    }

    #[test]
    fn recent_evictions_do_not_count_as_healthy_and_expire() {
        let now: Timestamp = "2024-01-01T00:10:00Z".parse().unwrap();
        let (a, b, c, d) = (
            pod("a", true, false),
            pod("b", true, false),
            pod("c", true, true),
            pod("d", false, false),
        );
        let pods = [&a, &b, &c, &d];
        let recorded = BTreeMap::from([
            ("a".to_string(), Time(now - SignedDuration::from_secs(30))),
            ("b".to_string(), Time(now - SignedDuration::from_secs(300))),
            ("c".to_string(), Time(now)),
            ("gone".to_string(), Time(now)),
        ]);
        let (kept, recheck) = disrupted(&pods, Some(&recorded), now);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(recheck, Some(now + SignedDuration::from_secs(90)));
        // b is ready and its eviction expired; a is being evicted; c deletes; d is not ready.
        assert_eq!(current_healthy(&pods, &kept, now), 1);
    }

    #[test]
    fn a_record_goes_once_the_pod_is_replaced_or_restarting() {
        let now: Timestamp = "2024-01-01T00:10:00Z".parse().unwrap();
        let at = now - SignedDuration::from_secs(10);
        let with = |name: &str, created: Timestamp, ready: bool, since: Timestamp| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "creationTimestamp": created.to_string()},
                "status": {"conditions": [{"type": "Ready",
                    "status": if ready { "True" } else { "False" },
                    "lastTransitionTime": since.to_string()}]},
            }))
            .unwrap()
        };
        let long_ago = now - SignedDuration::from_secs(600);
        let waiting = with("waiting", long_ago, true, long_ago);
        let recreated = with("recreated", at, false, at);
        let restarting = with(
            "restarting",
            long_ago,
            false,
            at + SignedDuration::from_secs(1),
        );
        let was_unready = with(
            "was-unready",
            long_ago,
            false,
            at - SignedDuration::from_secs(1),
        );
        let pods = [&waiting, &recreated, &restarting, &was_unready];
        let recorded = pods
            .iter()
            .map(|p| (p.metadata.name.clone().unwrap(), Time(at)))
            .collect();
        let (kept, _) = disrupted(&pods, Some(&recorded), now);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["waiting", "was-unready"]);
    }

    #[test]
    fn status_allows_what_is_spare_and_carries_the_condition() {
        let now: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let mut pdb: PodDisruptionBudget = serde_json::from_value(
            json!({"metadata": {"name": "b", "generation": 2}, "spec": {"minAvailable": 2}}),
        )
        .unwrap();
        let figures = |current, expected| Figures {
            current_healthy: current,
            desired_healthy: 2,
            expected_pods: expected,
            disrupted_pods: BTreeMap::new(),
        };
        let s = status(&pdb, figures(3, 3), now).unwrap();
        assert_eq!((s.disruptions_allowed, s.observed_generation), (1, Some(2)));
        let c = &s.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            (DISRUPTION_ALLOWED, "True", SUFFICIENT_PODS)
        );
        pdb.status = Some(s);
        assert!(status(&pdb, figures(3, 3), now).is_none());
        let later = now + SignedDuration::from_secs(5);
        let s = status(&pdb, figures(2, 3), later).unwrap();
        let c = &s.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (s.disruptions_allowed, c.reason.as_str()),
            (0, INSUFFICIENT_PODS)
        );
        assert_eq!(c.last_transition_time.0, later);
        // No expected pods: nothing allowed whatever is healthy.
        assert_eq!(
            status(&pdb, figures(5, 0), now)
                .unwrap()
                .disruptions_allowed,
            0
        );
        let failed = fail_safe(&pdb, "found no controllers for pod \"x\"", now);
        let c = &failed.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (failed.disruptions_allowed, c.reason.as_str()),
            (0, SYNC_FAILED)
        );
        assert_eq!(c.message, "found no controllers for pod \"x\"");
    }
}
