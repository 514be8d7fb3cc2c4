//! Status, conditions and the progress deadline (upstream's `deployment/progress.go` and the
//! condition helpers of `deployment/util`), as pure functions of the Deployment, its
//! ReplicaSets' views and the time.
//!
//! `Progressing` says where a rollout stands (`NewReplicaSetCreated`, `FoundNewReplicaSet`,
//! `ReplicaSetUpdated`, `NewReplicaSetAvailable`, `ProgressDeadlineExceeded`, `DeploymentPaused`,
//! `DeploymentResumed`); its `lastUpdateTime` moves whenever the rollout makes progress, and a
//! rollout without progress for `progressDeadlineSeconds` times out. The controller requeues
//! itself for that moment ([`requeue_after`]) instead of polling.

use super::util::{Rollout, RsView};
use jiff::Timestamp;
use k8s_openapi::{
    api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus},
    apimachinery::pkg::apis::meta::v1::Time,
};
use std::time::Duration;

/// Condition types.
pub use crate::progress::PROGRESSING;
/// The Deployment has at least `replicas - maxUnavailable` available pods.
pub const AVAILABLE: &str = "Available";
/// A ReplicaSet of the Deployment cannot create or delete pods.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Reasons, exactly upstream's.
pub mod reason {
    /// A new ReplicaSet was created.
    pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
    /// The ReplicaSet of the current template already existed.
    pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
    /// The rollout made progress.
    pub const RS_UPDATED: &str = "ReplicaSetUpdated";
    /// The rollout finished.
    pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
    /// No progress for `progressDeadlineSeconds`.
    pub use crate::progress::TIMED_OUT;
    /// `spec.paused` was set.
    pub const PAUSED: &str = "DeploymentPaused";
    /// `spec.paused` was cleared.
    pub const RESUMED: &str = "DeploymentResumed";
    /// Creating the new ReplicaSet failed.
    pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
    /// Enough pods are available.
    pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
    /// Too few pods are available.
    pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
}

/// A condition that changed at `now`.
pub fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The condition of `type_`.
pub fn get<'a>(
    status: Option<&'a DeploymentStatus>,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Sets `cond` as upstream's `SetDeploymentCondition`: nothing changes if status and reason are
/// the same; the transition time is kept if only the reason changes.
pub fn set(status: &mut DeploymentStatus, mut cond: DeploymentCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(current) = conditions.iter().find(|c| c.type_ == cond.type_) {
        if current.status == cond.status && current.reason == cond.reason {
            return;
        }
        if current.status == cond.status {
            cond.last_transition_time = current.last_transition_time.clone();
        }
    }
    conditions.retain(|c| c.type_ != cond.type_);
    conditions.push(cond);
}

/// Removes the condition of `type_`.
pub fn remove(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

fn n(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

/// Zero is omitted from the status, as upstream's `omitempty`.
fn nonzero(v: i32) -> Option<i32> {
    (v != 0).then_some(v)
}

/// `progressDeadlineSeconds`, unless unset or "never" (`i32::MAX`, upstream's convention).
pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()?
        .progress_deadline_seconds
        .filter(|s| *s != i32::MAX)
}

/// Whether the rollout is done (upstream's `DeploymentComplete`): every replica updated and
/// available, no old ones, and the latest spec observed.
pub fn complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    n(status.updated_replicas) == replicas
        && n(status.replicas) == replicas
        && n(status.available_replicas) == replicas
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// Whether `new` shows progress over `old` (upstream's `DeploymentProgressing`): more updated,
/// ready or available replicas, or fewer old ones.
pub fn progressing(old: Option<&DeploymentStatus>, new: &DeploymentStatus) -> bool {
    let counts = |s: &DeploymentStatus| crate::progress::Counts {
        replicas: n(s.replicas),
        updated: n(s.updated_replicas),
        ready: n(s.ready_replicas),
        available: n(s.available_replicas),
    };
    let before = old.map(counts).unwrap_or_default();
    crate::progress::advanced(before, counts(new))
}

/// Whether the rollout has gone `progressDeadlineSeconds` without progress (upstream's
/// `DeploymentTimedOut`).
pub fn timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = progress_deadline(d) else {
        return false;
    };
    let Some(cond) = get(Some(status), PROGRESSING) else {
        return false;
    };
    match cond.reason.as_deref() {
        Some(reason::NEW_RS_AVAILABLE) => false,
        Some(reason::TIMED_OUT) => true,
        _ => cond
            .last_update_time
            .as_ref()
            .is_some_and(|t| crate::progress::deadline_passed(t.0, seconds(deadline), now)),
    }
}

/// The status the ReplicaSets add up to (upstream's `calculateStatus`), with the `Available`
/// condition.
pub fn calculate(
    d: &Deployment,
    r: &Rollout,
    all: &[RsView],
    new: Option<&RsView>,
    now: Timestamp,
) -> DeploymentStatus {
    let available: i32 = all.iter().map(|rs| rs.available).sum();
    let total: i32 = all.iter().map(|rs| rs.replicas).sum();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(all.iter().map(|rs| rs.status_replicas).sum()),
        updated_replicas: nonzero(new.map_or(0, |rs| rs.status_replicas)),
        ready_replicas: nonzero(all.iter().map(|rs| rs.ready).sum()),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: d.status.as_ref().and_then(|s| s.collision_count),
        conditions: d.status.as_ref().and_then(|s| s.conditions.clone()),
        terminating_replicas: d.status.as_ref().and_then(|s| s.terminating_replicas),
    };
    let cond = if available >= r.replicas - r.max_unavailable {
        condition(
            AVAILABLE,
            true,
            reason::MIN_AVAILABLE,
            "Deployment has minimum availability.".into(),
            now,
        )
    } else {
        condition(
            AVAILABLE,
            false,
            reason::MIN_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
            now,
        )
    };
    set(&mut status, cond);
    status
}

/// The status after a rollout step (upstream's `syncRolloutStatus`): [`calculate`], then the
/// `Progressing` condition from how the rollout moved since the stored status, then the
/// ReplicaSets' `failure` (or none).
pub fn rollout_status(
    d: &Deployment,
    r: &Rollout,
    all: &[RsView],
    new: Option<&RsView>,
    failure: Option<DeploymentCondition>,
    now: Timestamp,
) -> DeploymentStatus {
    let mut status = calculate(d, r, all, new, now);
    let deadline = progress_deadline(d);
    if deadline.is_none() {
        remove(&mut status, PROGRESSING);
    }
    let current = get(d.status.as_ref(), PROGRESSING);
    let done_before = n(status.replicas) == n(status.updated_replicas)
        && current.is_some_and(|c| c.reason.as_deref() == Some(reason::NEW_RS_AVAILABLE));
    if deadline.is_some() && !done_before {
        let subject = |what: &str| match new {
            Some(rs) => format!("ReplicaSet {:?} {what}", rs.name),
            None => format!(
                "Deployment {:?} {what}",
                d.metadata.name.as_deref().unwrap_or("")
            ),
        };
        if complete(d, &status) {
            let msg = subject("has successfully progressed.");
            set(
                &mut status,
                condition(PROGRESSING, true, reason::NEW_RS_AVAILABLE, msg, now),
            );
        } else if progressing(d.status.as_ref(), &status) {
            // Progress moves lastUpdateTime even with an unchanged reason, which `set` would
            // not do; a True condition keeps its transition time.
            let mut cond = condition(
                PROGRESSING,
                true,
                reason::RS_UPDATED,
                subject("is progressing."),
                now,
            );
            if let Some(c) = current.filter(|c| c.status == "True") {
                cond.last_transition_time = c.last_transition_time.clone();
            }
            remove(&mut status, PROGRESSING);
            set(&mut status, cond);
        } else if timed_out(d, &status, now) {
            let msg = subject("has timed out progressing.");
            set(
                &mut status,
                condition(PROGRESSING, false, reason::TIMED_OUT, msg, now),
            );
        }
    }
    match failure {
        Some(cond) => set(&mut status, cond),
        None => remove(&mut status, REPLICA_FAILURE),
    }
    status
}

/// When to look at a stuck rollout again (upstream's `requeueStuckDeployment`): the moment its
/// progress deadline passes, plus a second for clock skew; `None` if nothing is pending.
pub fn requeue_after(d: &Deployment, new: &DeploymentStatus, now: Timestamp) -> Option<Duration> {
    let deadline = progress_deadline(d)?;
    let current = get(d.status.as_ref(), PROGRESSING)?;
    if complete(d, new) || current.reason.as_deref() == Some(reason::TIMED_OUT) {
        return None;
    }
    let updated = current.last_update_time.as_ref()?.0;
    Some(crate::progress::requeue_after(
        updated,
        seconds(deadline),
        now,
    ))
}

fn seconds(deadline: i32) -> Duration {
    Duration::from_secs(u64::try_from(deadline).unwrap_or(0))
}

/// The `Progressing` condition pausing or resuming sets, if it changes (upstream's
/// `checkPausedConditions`); a timed-out rollout keeps its condition.
pub fn paused_condition(d: &Deployment, now: Timestamp) -> Option<DeploymentCondition> {
    progress_deadline(d)?;
    let cond = get(d.status.as_ref(), PROGRESSING);
    if cond.is_some_and(|c| c.reason.as_deref() == Some(reason::TIMED_OUT)) {
        return None;
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let paused_cond = cond.is_some_and(|c| c.reason.as_deref() == Some(reason::PAUSED));
    let unknown = |reason: &str, message: &str| DeploymentCondition {
        status: "Unknown".into(),
        ..condition(PROGRESSING, false, reason, message.into(), now)
    };
    if paused && !paused_cond {
        Some(unknown(reason::PAUSED, "Deployment is paused"))
    } else if !paused && paused_cond {
        Some(unknown(reason::RESUMED, "Deployment is resumed"))
    } else {
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn deployment(replicas: i32, generation: i64, status: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": replicas, "selector": {}, "template": {}, "progressDeadlineSeconds": 600,
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}},
            "status": status,
        }))
        .unwrap()
    }

    fn progressing_cond(reason: &str, status: &str, updated: i64) -> serde_json::Value {
        json!({"type": "Progressing", "status": status, "reason": reason, "message": "m",
               "lastUpdateTime": at(updated).to_string(), "lastTransitionTime": at(updated).to_string()})
    }

    fn view(name: &str, replicas: i32, available: i32) -> RsView {
        RsView {
            name: name.into(),
            replicas,
            status_replicas: replicas,
            ready: available,
            available,
            ..Default::default()
        }
    }

    fn reason_of(s: &DeploymentStatus, t: &str) -> Option<String> {
        get(Some(s), t).and_then(|c| c.reason.clone())
    }

    #[test]
    fn completion_needs_every_count_and_the_generation() {
        let s = |updated, replicas, available, observed| DeploymentStatus {
            updated_replicas: Some(updated),
            replicas: Some(replicas),
            available_replicas: Some(available),
            observed_generation: Some(observed),
            ..Default::default()
        };
        let d = deployment(3, 2, json!({}));
        let cases = [
            ("done", s(3, 3, 3, 2), true),
            ("an old pod left", s(3, 4, 3, 2), false),
            ("one not available", s(3, 3, 2, 2), false),
            ("one not updated", s(2, 3, 3, 2), false),
            ("spec not yet observed", s(3, 3, 3, 1), false),
        ];
        for (name, status, want) in cases {
            assert_eq!(complete(&d, &status), want, "{name}");
        }
    }

    #[test]
    fn the_progressing_condition_follows_the_rollout() {
        let now = at(10_000);
        let r = Rollout {
            replicas: 2,
            rolling: true,
            max_surge: 1,
            max_unavailable: 1,
            status_replicas: 2,
        };
        // (case, stored status, old RS (replicas, available), new RS, want reason, want status)
        let cases = [
            (
                "complete",
                json!({"replicas": 3, "updatedReplicas": 1, "availableReplicas": 2, "conditions": [progressing_cond("ReplicaSetUpdated", "True", 9_990)]}),
                (0, 0),
                (2, 2),
                reason::NEW_RS_AVAILABLE,
                "True",
            ),
            (
                "progress refreshes the update time",
                json!({"replicas": 2, "updatedReplicas": 0, "availableReplicas": 2, "conditions": [progressing_cond("NewReplicaSetCreated", "True", 9_000)]}),
                (2, 2),
                (1, 0),
                reason::RS_UPDATED,
                "True",
            ),
            (
                "no progress within the deadline: unchanged",
                json!({"replicas": 3, "updatedReplicas": 1, "readyReplicas": 2, "availableReplicas": 2, "conditions": [progressing_cond("ReplicaSetUpdated", "True", 9_500)]}),
                (2, 2),
                (1, 0),
                reason::RS_UPDATED,
                "True",
            ),
            (
                "no progress past the deadline: timed out",
                json!({"replicas": 3, "updatedReplicas": 1, "readyReplicas": 2, "availableReplicas": 2, "conditions": [progressing_cond("ReplicaSetUpdated", "True", 9_000)]}),
                (2, 2),
                (1, 0),
                reason::TIMED_OUT,
                "False",
            ),
        ];
        for (name, stored, (old_r, old_a), (new_r, new_a), want_reason, want_status) in cases {
            let d = deployment(2, 1, stored);
            let old = view("old", old_r, old_a);
            let new = view("new", new_r, new_a);
            let s = rollout_status(&d, &r, &[old, new.clone()], Some(&new), None, now);
            let cond = get(Some(&s), PROGRESSING).unwrap();
            assert_eq!(cond.reason.as_deref(), Some(want_reason), "{name}");
            assert_eq!(cond.status, want_status, "{name}");
            if want_reason == reason::RS_UPDATED && name.starts_with("progress") {
                assert_eq!(cond.last_update_time, Some(Time(now)), "{name}");
                assert_eq!(cond.last_transition_time, Some(Time(at(9_000))), "{name}");
            }
        }
    }

    #[test]
    fn availability_compares_with_replicas_minus_max_unavailable() {
        let now = at(1);
        let r = Rollout {
            replicas: 4,
            rolling: true,
            max_surge: 1,
            max_unavailable: 1,
            status_replicas: 4,
        };
        let d = deployment(4, 1, json!({}));
        let cases = [
            (3, reason::MIN_AVAILABLE),
            (4, reason::MIN_AVAILABLE),
            (2, reason::MIN_UNAVAILABLE),
        ];
        for (available, want) in cases {
            let s = calculate(&d, &r, &[view("a", 4, available)], None, now);
            assert_eq!(
                reason_of(&s, AVAILABLE).as_deref(),
                Some(want),
                "{available} available"
            );
            assert_eq!(s.unavailable_replicas, nonzero(4 - available));
        }
    }

    #[test]
    fn a_stuck_rollout_is_requeued_for_its_deadline() {
        let now = at(10_000);
        let unfinished = DeploymentStatus {
            replicas: Some(3),
            ..Default::default()
        };
        let cases = [
            (
                "deadline in 100s",
                json!({"conditions": [progressing_cond("ReplicaSetUpdated", "True", 9_500)]}),
                Some(101),
            ),
            (
                "deadline passed",
                json!({"conditions": [progressing_cond("ReplicaSetUpdated", "True", 9_000)]}),
                Some(1),
            ),
            (
                "already timed out",
                json!({"conditions": [progressing_cond("ProgressDeadlineExceeded", "False", 9_000)]}),
                None,
            ),
            ("no condition yet", json!({}), None),
        ];
        for (name, stored, want) in cases {
            let d = deployment(2, 1, stored);
            assert_eq!(
                requeue_after(&d, &unfinished, now).map(|d| d.as_secs()),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn pausing_and_resuming_set_unknown_progress() {
        let now = at(1);
        let mut d = deployment(2, 1, json!({}));
        d.spec.as_mut().unwrap().paused = Some(true);
        let c = paused_condition(&d, now).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("Unknown", Some(reason::PAUSED))
        );
        d.status = Some(DeploymentStatus {
            conditions: Some(vec![c]),
            ..Default::default()
        });
        assert!(paused_condition(&d, now).is_none());
        d.spec.as_mut().unwrap().paused = Some(false);
        let c = paused_condition(&d, now).unwrap();
        assert_eq!(c.reason.as_deref(), Some(reason::RESUMED));
        // A timed-out rollout keeps its condition when paused.
        let mut timed_out = deployment(
            2,
            1,
            json!({"conditions": [progressing_cond("ProgressDeadlineExceeded", "False", 0)]}),
        );
        timed_out.spec.as_mut().unwrap().paused = Some(true);
        assert!(paused_condition(&timed_out, now).is_none());
    }

    #[test]
    fn set_keeps_transition_time_when_only_the_reason_changes() {
        let mut s = DeploymentStatus::default();
        set(
            &mut s,
            condition(PROGRESSING, true, reason::NEW_RS_CREATED, "a".into(), at(1)),
        );
        set(
            &mut s,
            condition(PROGRESSING, true, reason::NEW_RS_CREATED, "b".into(), at(2)),
        );
        assert_eq!(
            get(Some(&s), PROGRESSING).unwrap().message.as_deref(),
            Some("a")
        );
        set(
            &mut s,
            condition(
                PROGRESSING,
                true,
                reason::NEW_RS_AVAILABLE,
                "c".into(),
                at(3),
            ),
        );
        let c = get(Some(&s), PROGRESSING).unwrap();
        assert_eq!(
            (c.last_transition_time.clone(), c.last_update_time.clone()),
            (Some(Time(at(1))), Some(Time(at(3))))
        );
        set(
            &mut s,
            condition(PROGRESSING, false, reason::TIMED_OUT, "d".into(), at(4)),
        );
        assert_eq!(
            get(Some(&s), PROGRESSING).unwrap().last_transition_time,
            Some(Time(at(4)))
        );
    }
}
