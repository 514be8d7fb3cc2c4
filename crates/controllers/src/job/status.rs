//! Pure pieces of a Job's status, as upstream's `job_controller.go` computes them: which pods are
//! finished for tracking, the conditions (`SuccessCriteriaMet`/`FailureTarget` first, `Complete`/
//! `Failed` once every pod is gone), and whether the Job has reached its end.

use jiff::Timestamp;
use k8s_openapi::{
    api::{
        batch::v1::{JobCondition, JobSpec, JobStatus},
        core::v1::Pod,
    },
    apimachinery::pkg::apis::meta::v1::Time,
};

/// The finalizer the controller puts on its pods so that none finishes uncounted.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// Upstream's condition reasons and messages.
pub mod reasons {
    /// The Job's pods failed more than `backoffLimit` times.
    pub const BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
    /// Its message.
    pub const BACKOFF_LIMIT_MESSAGE: &str = "Job has reached the specified backoff limit";
    /// The Job ran longer than `activeDeadlineSeconds`.
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    /// Its message.
    pub const DEADLINE_MESSAGE: &str = "Job was active longer than specified deadline";
    /// A pod failure policy rule with `FailJob` matched.
    pub const POD_FAILURE_POLICY: &str = "PodFailurePolicy";
    /// Enough pods succeeded.
    pub const COMPLETIONS_REACHED: &str = "CompletionsReached";
    /// Its message.
    pub const COMPLETIONS_MESSAGE: &str = "Reached expected number of succeeded pods";
}

/// How a pod ended, for the Job's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Phase `Succeeded`.
    Succeeded,
    /// Phase `Failed`, or deleted before succeeding (unless only failed pods are replaced).
    Failed,
}

/// How `pod` ended, if it did (upstream's `isPodFailed` and the succeeded check): a pod deleted
/// before it succeeded counts as failed, unless `podReplacementPolicy: Failed` asks to wait for
/// its phase.
pub fn ended(pod: &Pod, only_replace_failed: bool) -> Option<Ended> {
    match api::pod::phase(pod) {
        "Succeeded" => Some(Ended::Succeeded),
        "Failed" => Some(Ended::Failed),
        _ if !only_replace_failed && pod.metadata.deletion_timestamp.is_some() => {
            Some(Ended::Failed)
        }
        _ => None,
    }
}

/// Whether the pod carries the tracking finalizer.
pub fn tracked(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

/// The condition of `type_` if it is True.
pub fn true_condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job is finished (`Complete` or `Failed` True).
pub fn is_finished(status: &JobStatus) -> bool {
    true_condition(status, "Complete").is_some() || true_condition(status, "Failed").is_some()
}

/// Sets a condition as upstream's `ensureJobConditionStatus`: a change of status moves
/// `lastTransitionTime`; an identical condition is left alone. Returns whether anything changed.
pub fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let value = if value { "True" } else { "False" };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c)
            if c.status == value
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message) =>
        {
            false
        }
        Some(c) => {
            if c.status != value {
                c.last_transition_time = Some(Time(now));
            }
            c.status = value.into();
            c.reason = Some(reason.into());
            c.message = Some(message.into());
            c.last_probe_time = Some(Time(now));
            true
        }
        None if value == "False" => false,
        None => {
            conditions.push(JobCondition {
                type_: type_.into(),
                status: value.into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                last_probe_time: Some(Time(now)),
                last_transition_time: Some(Time(now)),
            });
            true
        }
    }
}

/// What a Job's pods add up to, for [`verdict`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Succeeded pods counted or about to be (Indexed: completed indexes).
    pub succeeded: i32,
    /// Failed pods counted or about to be.
    pub failed: i32,
    /// Active pods.
    pub active: i32,
    /// Container restarts of active `OnFailure` pods (they count against `backoffLimit`).
    pub restarts: i32,
}

/// How a Job ends, once it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Enough pods succeeded: `SuccessCriteriaMet`, then `Complete`.
    Succeed,
    /// `FailureTarget`, then `Failed`, with this reason and message.
    Fail(String, String),
}

/// Whether the Job has reached its end (upstream's order: a pod failure policy's `FailJob`
/// (passed as `failure_target`) first, then the back-off limit, the deadline, then success).
pub fn verdict(
    spec: &JobSpec,
    tally: Tally,
    failure_target: Option<(String, String)>,
    deadline_passed: bool,
) -> Option<Verdict> {
    if let Some((reason, message)) = failure_target {
        return Some(Verdict::Fail(reason, message));
    }
    let limit = spec.backoff_limit.unwrap_or(6);
    let on_failure = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        == Some("OnFailure");
    if tally.failed > limit || (on_failure && tally.restarts > 0 && tally.restarts >= limit) {
        return Some(Verdict::Fail(
            reasons::BACKOFF_LIMIT_EXCEEDED.into(),
            reasons::BACKOFF_LIMIT_MESSAGE.into(),
        ));
    }
    if deadline_passed {
        return Some(Verdict::Fail(
            reasons::DEADLINE_EXCEEDED.into(),
            reasons::DEADLINE_MESSAGE.into(),
        ));
    }
    let done = match spec.completions {
        Some(n) => tally.succeeded >= n,
        // A work queue: done once one pod succeeded and the rest have stopped.
        None => tally.succeeded > 0 && tally.active == 0,
    };
    done.then_some(Verdict::Succeed)
}

/// How many pods should be active (upstream's `wantActive`): at most `parallelism`, and no more
/// than the completions left.
pub fn want_active(spec: &JobSpec, succeeded: i32, active: i32) -> i32 {
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    match spec.completions {
        Some(n) => parallelism.min((n - succeeded).max(0)),
        // A work queue stops adding pods once one succeeded.
        None if succeeded > 0 => active.min(parallelism),
        None => parallelism,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> JobSpec {
        let mut v = v;
        v["template"] = json!({"spec": {"restartPolicy": v.get("restartPolicy").cloned().unwrap_or(json!("Never")), "containers": []}});
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn verdicts_follow_upstream_order() {
        let s = spec(json!({"completions": 5, "parallelism": 2, "backoffLimit": 2}));
        let t = |succeeded, failed, active| Tally {
            succeeded,
            failed,
            active,
            restarts: 0,
        };
        let backoff = Verdict::Fail(
            reasons::BACKOFF_LIMIT_EXCEEDED.into(),
            reasons::BACKOFF_LIMIT_MESSAGE.into(),
        );
        // (case, tally, failure target, deadline passed, want)
        let cases = [
            ("running", t(2, 2, 2), None, false, None),
            ("complete", t(5, 0, 0), None, false, Some(Verdict::Succeed)),
            ("backoff", t(1, 3, 1), None, false, Some(backoff.clone())),
            (
                "backoff beats success",
                t(5, 3, 0),
                None,
                false,
                Some(backoff),
            ),
            (
                "deadline",
                t(1, 0, 2),
                None,
                true,
                Some(Verdict::Fail(
                    reasons::DEADLINE_EXCEEDED.into(),
                    reasons::DEADLINE_MESSAGE.into(),
                )),
            ),
            (
                "policy first",
                t(0, 9, 0),
                Some(("PodFailurePolicy".to_string(), "m".to_string())),
                true,
                Some(Verdict::Fail("PodFailurePolicy".into(), "m".into())),
            ),
        ];
        for (name, tally, target, deadline, want) in cases {
            assert_eq!(verdict(&s, tally, target, deadline), want, "{name}");
        }
        let queue = spec(json!({"parallelism": 3}));
        assert_eq!(verdict(&queue, t(1, 0, 2), None, false), None);
        assert_eq!(
            verdict(&queue, t(1, 0, 0), None, false),
            Some(Verdict::Succeed)
        );
        let on_failure =
            spec(json!({"completions": 1, "backoffLimit": 2, "restartPolicy": "OnFailure"}));
        let restarted = Tally {
            restarts: 2,
            ..t(0, 0, 1)
        };
        assert!(matches!(
            verdict(&on_failure, restarted, None, false),
            Some(Verdict::Fail(..))
        ));
    }

    #[test]
    fn active_pods_wanted() {
        let s = spec(json!({"completions": 5, "parallelism": 2}));
        assert_eq!(want_active(&s, 0, 0), 2);
        assert_eq!(want_active(&s, 4, 1), 1);
        assert_eq!(want_active(&s, 5, 0), 0);
        let queue = spec(json!({"parallelism": 3}));
        assert_eq!(want_active(&queue, 0, 0), 3);
        assert_eq!(want_active(&queue, 1, 2), 2);
    }

    #[test]
    fn conditions_move_their_transition_time_only_on_change() {
        let mut st = JobStatus::default();
        let t0 = Timestamp::UNIX_EPOCH;
        let t1 = t0 + jiff::SignedDuration::from_secs(5);
        assert!(set_condition(
            &mut st,
            "Suspended",
            true,
            "JobSuspended",
            "Job suspended",
            t0
        ));
        assert!(!set_condition(
            &mut st,
            "Suspended",
            true,
            "JobSuspended",
            "Job suspended",
            t1
        ));
        assert!(set_condition(
            &mut st,
            "Suspended",
            false,
            "JobResumed",
            "Job resumed",
            t1
        ));
        let c = &st.conditions.as_ref().unwrap()[0];
        assert_eq!(c.last_transition_time, Some(Time(t1)));
        assert!(
            !set_condition(&mut st, "Complete", false, "x", "y", t1),
            "no False condition from nothing"
        );
    }
}
