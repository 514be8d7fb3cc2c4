//! A ReplicaSet's status from its pods (upstream's `calculateStatus`).

use informer::Shared;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::{
        apps::v1::{ReplicaSetCondition, ReplicaSetStatus},
        core::v1::Pod,
    },
    apimachinery::pkg::apis::meta::v1::Time,
};
use std::collections::BTreeMap;

/// The condition a ReplicaSet carries while it cannot create or delete pods.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Counts of a ReplicaSet's active pods, and when the next ready pod becomes available.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodCounts {
    /// Active pods.
    pub replicas: i32,
    /// Pods carrying every label of the template.
    pub fully_labeled: i32,
    /// Ready pods.
    pub ready: i32,
    /// Pods ready for `minReadySeconds`.
    pub available: i32,
    /// How long until the next ready-but-not-yet-available pod becomes available.
    pub next_available: Option<SignedDuration>,
}

/// Counts `pods` against the template's labels and `min_ready_seconds` at `now`, from the
/// facts the cache derived once per pod event.
pub fn count(
    pods: &[Shared<Pod>],
    template_labels: Option<&BTreeMap<String, String>>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> PodCounts {
    let mut c = PodCounts::default();
    for pod in pods {
        c.replicas += 1;
        let labels = pod.metadata.labels.as_ref();
        let fully = template_labels.is_none_or(|want| {
            want.iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        });
        if fully {
            c.fully_labeled += 1;
        }
        let facts = pod.facts();
        if facts.is_ready() {
            c.ready += 1;
        }
        match facts.until_available(min_ready_seconds, now) {
            Some(d) if d.is_zero() => c.available += 1,
            Some(d) => c.next_available = Some(c.next_available.map_or(d, |n| n.min(d))),
            None => {}
        }
    }
    c
}

/// The status a ReplicaSet should have: `counts`, its generation observed, and the
/// `ReplicaFailure` condition set from `failure` (`(reason, message)` of the last create or
/// delete error) or removed when the last sync succeeded.
pub fn next_status(
    current: Option<&ReplicaSetStatus>,
    counts: &PodCounts,
    generation: Option<i64>,
    failure: Option<(&str, String)>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut conditions: Vec<ReplicaSetCondition> = current
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let existing = conditions.iter().any(|c| c.type_ == REPLICA_FAILURE);
    match failure {
        // Upstream keeps the first failure's condition until a sync succeeds.
        Some((reason, message)) if !existing => conditions.push(ReplicaSetCondition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: Some(Time(now)),
        }),
        None if existing => conditions.retain(|c| c.type_ != REPLICA_FAILURE),
        _ => {}
    }
    ReplicaSetStatus {
        replicas: counts.replicas,
        fully_labeled_replicas: Some(counts.fully_labeled),
        ready_replicas: Some(counts.ready),
        available_replicas: Some(counts.available),
        observed_generation: generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        // Newer fields we do not compute are kept as they are.
        terminating_replicas: current.and_then(|s| s.terminating_replicas),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    fn pod(labels: &[(&str, &str)], ready_at: Option<i64>) -> Shared<Pod> {
        let mut p = Pod::default();
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        p.status = Some(PodStatus {
            conditions: ready_at.map(|at| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(Timestamp::from_second(at).unwrap())),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        informer::Cached::shared(p)
    }

    #[test]
    fn counts_follow_labels_readiness_and_min_ready_seconds() {
        let template: BTreeMap<String, String> = [("app", "web"), ("tier", "fe")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let now = Timestamp::from_second(1_000).unwrap();
        let pods = vec![
            pod(&[("app", "web"), ("tier", "fe")], Some(900)),
            pod(&[("app", "web"), ("tier", "fe"), ("extra", "x")], Some(995)),
            pod(&[("app", "web")], Some(998)),
            pod(&[("app", "web"), ("tier", "fe")], None),
        ];
        // (minReadySeconds, ready, available, next available in seconds)
        let cases = [
            (0, 3, 3, None),
            (5, 3, 2, Some(3)),
            (10, 3, 1, Some(5)),
            (200, 3, 0, Some(100)),
        ];
        for (min_ready, ready, available, next) in cases {
            let c = count(&pods, Some(&template), min_ready, now);
            assert_eq!(c.replicas, 4, "minReady {min_ready}");
            assert_eq!(c.fully_labeled, 3, "minReady {min_ready}");
            assert_eq!(
                (c.ready, c.available),
                (ready, available),
                "minReady {min_ready}"
            );
            assert_eq!(
                c.next_available.map(|d| d.as_secs()),
                next,
                "minReady {min_ready}"
            );
        }
    }

    #[test]
    fn replica_failure_is_set_once_and_cleared_on_success() {
        let now = Timestamp::from_second(1_000).unwrap();
        let counts = PodCounts {
            replicas: 1,
            ..Default::default()
        };
        let failed = next_status(
            None,
            &counts,
            Some(2),
            Some(("FailedCreate", "quota".into())),
            now,
        );
        let conds = failed.conditions.clone().unwrap();
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].reason.as_deref(), Some("FailedCreate"));
        assert_eq!(failed.observed_generation, Some(2));
        // A second failure keeps the first condition.
        let again = next_status(
            Some(&failed),
            &counts,
            Some(2),
            Some(("FailedDelete", "x".into())),
            now,
        );
        assert_eq!(again.conditions, failed.conditions);
        let ok = next_status(Some(&again), &counts, Some(2), None, now);
        assert_eq!(ok.conditions, None);
    }
}
