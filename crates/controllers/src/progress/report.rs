//! What a DaemonSet's or StatefulSet's status write does about progress: the condition to
//! store, the requeue for the deadline, and the events (a Warning `ProgressDeadlineExceeded`
//! once when the rollout times out, a Warning `InvalidProgressDeadline` for an annotation that
//! is not a deadline). Upstream records no event when a Deployment times out; these workloads
//! have no `kubectl describe` line for the condition, so the event is how people see it.

use super::{
    deadline::{self, Invalid},
    rollout::{Condition, Outcome, Rollout, replace},
};
use crate::runtime::Action;
use events::{EventType, Recorder};
use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use serde_json::Value;

/// The event of a rollout that timed out.
pub const TIMED_OUT_EVENT: &str = super::TIMED_OUT;
/// The event of an annotation that is not a deadline.
pub const INVALID_EVENT: &str = "InvalidProgressDeadline";

/// One sync's decision about the `Progressing` condition.
#[derive(Clone, Debug)]
pub struct Report {
    /// The status's new `conditions`, if they change.
    conditions: Option<Vec<Value>>,
    outcome: Outcome,
    invalid: Option<Invalid>,
}

impl Report {
    /// Decides for `rollout` (whose deadline is read here from `meta`'s annotation, and only
    /// for a rolling update) given the stored status's `conditions`.
    pub fn new(
        meta: &ObjectMeta,
        rolling: bool,
        stored: &[Value],
        mut rollout: Rollout<'_>,
        now: jiff::Timestamp,
    ) -> Self {
        let (deadline, invalid) = match deadline::of(meta) {
            Ok(d) => (d, None),
            Err(e) => (None, Some(e)),
        };
        rollout.deadline = deadline.filter(|_| rolling);
        let current = Condition::find(stored);
        let outcome = rollout.step(current.as_ref(), now);
        let conditions =
            (outcome.condition != current).then(|| replace(stored, outcome.condition.as_ref()));
        Report {
            conditions,
            outcome,
            invalid,
        }
    }

    /// Whether the status needs a write for the condition.
    pub fn changed(&self) -> bool {
        self.conditions.is_some()
    }

    /// Asks for a requeue at the deadline, and warns of an invalid annotation.
    pub fn before_write(
        &self,
        recorder: &Recorder,
        object: &ObjectReference,
        requeue: &mut Action,
    ) {
        if let Some(after) = self.outcome.requeue {
            requeue.requeue_by(after);
        }
        if let Some(invalid) = &self.invalid {
            recorder.record(
                object,
                EventType::Warning,
                INVALID_EVENT,
                invalid.to_string(),
            );
        }
    }

    /// Adds the conditions to the status fields a write sets.
    pub fn add_to(&self, fields: &mut Value) {
        if let Some(conditions) = &self.conditions {
            super::set_conditions(fields, conditions);
        }
    }

    /// After the status write: the one event of a timeout.
    pub fn after_write(&self, recorder: &Recorder, object: &ObjectReference) {
        if let (true, Some(c)) = (self.outcome.timed_out, &self.outcome.condition) {
            recorder.record(
                object,
                EventType::Warning,
                TIMED_OUT_EVENT,
                c.message.clone(),
            );
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::progress::{Counts, TIMED_OUT};
    use std::time::Duration;

    fn rollout() -> Rollout<'static> {
        let c = Counts {
            replicas: 2,
            updated: 1,
            ready: 1,
            available: 1,
        };
        Rollout {
            kind: "StatefulSet",
            revision: "db-2",
            deadline: None,
            paused: false,
            before: c,
            after: c,
            complete: false,
            all_updated: false,
        }
    }

    fn meta(value: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some([(deadline::ANNOTATION.to_string(), value.to_string())].into()),
            ..Default::default()
        }
    }

    fn at(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn the_annotation_sets_the_deadline_of_rolling_updates_only() {
        let stored = replace(
            &[],
            Some(&Condition {
                status: "True".into(),
                reason: "ControllerRevisionUpdated".into(),
                message: "ControllerRevision \"db-2\" is progressing.".into(),
                since: at(100),
            }),
        );
        let r = Report::new(&meta("10"), true, &stored, rollout(), at(111));
        assert!(r.changed());
        assert!(r.outcome.timed_out);
        let mut fields = serde_json::json!({"replicas": 2});
        r.add_to(&mut fields);
        assert_eq!(fields["conditions"][0]["reason"], TIMED_OUT);
        assert_eq!(fields["replicas"], 2);
        // Not yet: nothing to write, a requeue for the deadline.
        let r = Report::new(&meta("10"), true, &stored, rollout(), at(105));
        assert!(!r.changed());
        assert_eq!(r.outcome.requeue, Some(Duration::from_secs(6)));
        // OnDelete, or an invalid annotation: no deadline, so no condition.
        for (m, rolling) in [(meta("10"), false), (meta("soon"), true)] {
            let r = Report::new(&m, rolling, &stored, rollout(), at(111));
            assert_eq!(r.conditions, Some(vec![]));
            assert!(!r.outcome.timed_out);
        }
        let r = Report::new(&meta("soon"), true, &[], rollout(), at(111));
        assert!(!r.changed());
        assert_eq!(r.invalid.unwrap().value, "soon");
    }
}
