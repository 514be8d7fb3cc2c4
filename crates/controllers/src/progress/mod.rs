//! The `Progressing` condition with the Deployment's semantics, for any workload (upstream's
//! `deployment/progress.go` and the progress helpers of `deployment/util`).
//!
//! A rollout has a deadline; every step forward (more pods updated, ready or available, fewer
//! old ones) restarts its clock, and a rollout whose clock runs past the deadline has
//! `Progressing=False/ProgressDeadlineExceeded`. The clock is a time stored in the condition
//! itself, so a restarted controller carries on where the old one stopped, and the controller
//! requeues itself for the moment the deadline passes instead of polling.
//!
//! The primitives here are what Deployments ([`crate::deployment`]) and the others share;
//! [`rollout`] is the whole condition for DaemonSets and StatefulSets, whose deadline comes
//! from an annotation ([`deadline`]), and [`report`] what their status writes do with it.

pub mod deadline;
pub mod report;
pub mod rollout;

use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// The condition type.
pub const PROGRESSING: &str = "Progressing";

/// The reason of a rollout that went its whole deadline without progress (upstream's
/// `TimedOutReason`); the automatic rollback reads it.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";

/// The pod counts progress is measured in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pods of any revision.
    pub replicas: i32,
    /// Of those, pods of the revision being rolled out.
    pub updated: i32,
    /// Ready pods.
    pub ready: i32,
    /// Available pods.
    pub available: i32,
}

/// A workload's stored conditions as JSON, the form [`rollout::Condition`] reads whatever the
/// kind's condition type (DaemonSetCondition, StatefulSetCondition).
pub fn stored_conditions<C: serde::Serialize>(
    conditions: Option<&Vec<C>>,
) -> Vec<serde_json::Value> {
    conditions
        .into_iter()
        .flatten()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect()
}

/// Sets `conditions` in the status `fields` a write sends; none left is no list, as upstream's
/// `omitempty` writes it.
pub fn set_conditions(fields: &mut serde_json::Value, conditions: &[serde_json::Value]) {
    if let serde_json::Value::Object(m) = fields {
        let list = if conditions.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::json!(conditions)
        };
        m.insert("conditions".into(), list);
    }
}

/// Whether `after` is a step forward from `before` (upstream's `DeploymentProgressing`): more
/// updated, ready or available pods, or fewer old ones. Losing pods is no progress.
pub fn advanced(before: Counts, after: Counts) -> bool {
    let old_before = before.replicas - before.updated;
    let old_after = after.replicas - after.updated;
    after.updated > before.updated
        || old_after < old_before
        || after.ready > before.ready
        || after.available > before.available
}

/// Whether more than `deadline` has passed between the last progress (`since`) and `now`
/// (the test of upstream's `DeploymentTimedOut`).
pub fn deadline_passed(since: Timestamp, deadline: Duration, now: Timestamp) -> bool {
    match SignedDuration::try_from(deadline) {
        Ok(d) => since.checked_add(d).is_ok_and(|at| at < now),
        Err(_) => false,
    }
}

/// How long until a rollout that last progressed at `since` passes its deadline, plus a second
/// so the look then finds it passed (upstream's `requeueStuckDeployment`); at least a second.
pub fn requeue_after(since: Timestamp, deadline: Duration, now: Timestamp) -> Duration {
    let second = Duration::from_secs(1);
    let Ok(d) = SignedDuration::try_from(deadline) else {
        return deadline;
    };
    let Ok(at) = since.checked_add(d) else {
        return deadline;
    };
    let left = now.duration_until(at);
    if left < SignedDuration::from_secs(1) {
        return second;
    }
    left.unsigned_abs() + second
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn progress_is_any_step_forward() {
        let c = |replicas, updated, ready, available| Counts {
            replicas,
            updated,
            ready,
            available,
        };
        let before = c(10, 3, 8, 8);
        let cases = [
            ("nothing moved", c(10, 3, 8, 8), false),
            ("more updated", c(11, 4, 8, 8), true),
            ("fewer old", c(9, 3, 8, 8), true),
            ("more ready", c(10, 3, 9, 8), true),
            ("more available", c(10, 3, 8, 9), true),
            ("fewer available only", c(10, 3, 7, 7), false),
        ];
        for (name, after, want) in cases {
            assert_eq!(advanced(before, after), want, "{name}");
        }
    }

    #[test]
    fn the_deadline_passes_only_after_it() {
        let ten = Duration::from_secs(10);
        assert!(!deadline_passed(at(100), ten, at(105)));
        assert!(!deadline_passed(at(100), ten, at(110)));
        assert!(deadline_passed(at(100), ten, at(111)));
    }

    #[test]
    fn the_requeue_lands_a_second_after_the_deadline() {
        let ten = Duration::from_secs(10);
        assert_eq!(requeue_after(at(100), ten, at(104)), Duration::from_secs(7));
        assert_eq!(requeue_after(at(100), ten, at(200)), Duration::from_secs(1));
    }
}
