//! The `Progressing` condition of a DaemonSet's or StatefulSet's rolling update, as a pure
//! function of the stored condition, the pod counts before and after a sync, and the time.
//!
//! The reasons are the Deployment's with "ReplicaSet" read as "ControllerRevision", the object
//! that records a DaemonSet's or StatefulSet's template:
//!
//! | status  | reason                           | when                                          |
//! |---------|----------------------------------|-----------------------------------------------|
//! | True    | `FoundNewControllerRevision`     | the deadline is first seen                    |
//! | True    | `NewControllerRevisionCreated`   | a rollout of another revision starts          |
//! | True    | `ControllerRevisionUpdated`      | the rollout made progress                     |
//! | True    | `NewControllerRevisionAvailable` | the rollout is complete                       |
//! | False   | `ProgressDeadlineExceeded`       | no progress for the deadline                  |
//! | Unknown | `DaemonSetPaused`, `StatefulSetPaused`   | the rollout is paused (never times out) |
//! | Unknown | `DaemonSetResumed`, `StatefulSetResumed` | it was resumed (the clock starts over)  |
//!
//! Their conditions have no `lastUpdateTime`, so the clock is `lastTransitionTime`: it moves on
//! every change of reason and on every progress, not only on a change of status. The message
//! names the revision (`ControllerRevision "web-5d8f4b" is progressing.`), which is how a later
//! sync, maybe of a restarted controller, tells a new template's rollout from the old one's.

use super::{Counts, PROGRESSING, TIMED_OUT, advanced, deadline_passed, requeue_after};
use jiff::Timestamp;
use serde_json::{Value, json};
use std::time::Duration;

/// Reasons beyond [`TIMED_OUT`].
pub mod reason {
    /// The condition starts, on a rollout already under way.
    pub const FOUND_NEW_REVISION: &str = "FoundNewControllerRevision";
    /// A rollout of another revision than the condition's starts.
    pub const NEW_REVISION_CREATED: &str = "NewControllerRevisionCreated";
    /// The rollout made progress.
    pub const REVISION_UPDATED: &str = "ControllerRevisionUpdated";
    /// The rollout is complete.
    pub const NEW_REVISION_AVAILABLE: &str = "NewControllerRevisionAvailable";
}

/// A stored or computed `Progressing` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why.
    pub reason: String,
    /// For people; names the revision.
    pub message: String,
    /// The clock: when the condition last changed or the rollout last progressed.
    pub since: Timestamp,
}

impl Condition {
    fn new(status: &str, reason: &str, message: String, now: Timestamp) -> Self {
        Condition {
            status: status.into(),
            reason: reason.into(),
            message,
            since: now,
        }
    }

    /// The `Progressing` condition among `conditions` (a status's `conditions` as JSON).
    pub fn find(conditions: &[Value]) -> Option<Self> {
        let c = conditions.iter().find(|c| c["type"] == PROGRESSING)?;
        let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        Some(Condition {
            status: text("status"),
            reason: text("reason"),
            message: text("message"),
            since: c["lastTransitionTime"].as_str()?.parse().ok()?,
        })
    }

    /// Whether the rollout went its whole deadline without progress.
    pub fn timed_out(&self) -> bool {
        self.reason == TIMED_OUT
    }

    fn to_json(&self) -> Value {
        json!({
            "type": PROGRESSING,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.since.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        })
    }
}

/// `conditions` with the `Progressing` one replaced by `cond`, or removed.
pub fn replace(conditions: &[Value], cond: Option<&Condition>) -> Vec<Value> {
    let mut out: Vec<Value> = conditions
        .iter()
        .filter(|c| c["type"] != PROGRESSING)
        .cloned()
        .collect();
    out.extend(cond.map(Condition::to_json));
    out
}

/// One sync's facts about a rolling update.
#[derive(Clone, Debug)]
pub struct Rollout<'a> {
    /// `DaemonSet` or `StatefulSet`, for the pause reasons and messages.
    pub kind: &'a str,
    /// The name of the ControllerRevision being rolled out.
    pub revision: &'a str,
    /// No condition without a deadline.
    pub deadline: Option<Duration>,
    /// A paused rollout never times out.
    pub paused: bool,
    /// The counts the stored status holds.
    pub before: Counts,
    /// The counts this sync writes.
    pub after: Counts,
    /// Every pod that should exist is updated and available.
    pub complete: bool,
    /// No pod of an older revision is left (a completed rollout that loses a pod stays
    /// complete, as a Deployment's does).
    pub all_updated: bool,
}

/// What a sync does with the condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The condition to store; `None` removes it.
    pub condition: Option<Condition>,
    /// The rollout timed out in this sync (worth one event).
    pub timed_out: bool,
    /// When time alone will change the condition.
    pub requeue: Option<Duration>,
}

impl Rollout<'_> {
    /// The condition after this sync, given the stored one (upstream's `syncRolloutStatus` and
    /// `checkPausedConditions`).
    pub fn step(&self, stored: Option<&Condition>, now: Timestamp) -> Outcome {
        let Some(deadline) = self.deadline else {
            return Outcome {
                condition: None,
                timed_out: false,
                requeue: None,
            };
        };
        let kind = self.kind;
        let paused_reason = format!("{kind}Paused");
        let resumed_reason = format!("{kind}Resumed");
        let cond = stored.cloned();
        let was_timed_out = stored.is_some_and(Condition::timed_out);
        if self.paused {
            // A timed-out rollout stays so while paused, as a Deployment's does.
            let condition = if !was_timed_out && stored.is_none_or(|c| c.reason != paused_reason) {
                let message = format!("{kind} is paused");
                Some(Condition::new("Unknown", &paused_reason, message, now))
            } else {
                cond
            };
            return Outcome {
                condition,
                timed_out: false,
                requeue: None,
            };
        }
        let subject = format!("ControllerRevision {:?}", self.revision);
        let quoted = format!("{:?}", self.revision);
        let mut cond = match cond {
            Some(c) if c.reason == paused_reason => Condition::new(
                "Unknown",
                &resumed_reason,
                format!("{kind} is resumed"),
                now,
            ),
            None => Condition::new(
                "True",
                reason::FOUND_NEW_REVISION,
                format!("Found new controller revision {quoted}"),
                now,
            ),
            Some(c) if c.reason != resumed_reason && !c.message.contains(&quoted) => {
                Condition::new(
                    "True",
                    reason::NEW_REVISION_CREATED,
                    format!("Rolling out new controller revision {quoted}"),
                    now,
                )
            }
            Some(c) => c,
        };
        let done_before = self.all_updated && cond.reason == reason::NEW_REVISION_AVAILABLE;
        let mut timed_out = false;
        if done_before {
            // A finished rollout that later loses a pod is still finished, as a Deployment's.
        } else if self.complete {
            cond = Condition::new(
                "True",
                reason::NEW_REVISION_AVAILABLE,
                format!("{subject} has successfully progressed."),
                now,
            );
        } else if advanced(self.before, self.after) {
            cond = Condition::new(
                "True",
                reason::REVISION_UPDATED,
                format!("{subject} is progressing."),
                now,
            );
        } else if !cond.timed_out() && deadline_passed(cond.since, deadline, now) {
            cond = Condition::new(
                "False",
                TIMED_OUT,
                format!("{subject} has timed out progressing."),
                now,
            );
            timed_out = true;
        }
        let waiting = !cond.timed_out() && cond.reason != reason::NEW_REVISION_AVAILABLE;
        let requeue = waiting.then(|| requeue_after(cond.since, deadline, now));
        Outcome {
            condition: Some(cond),
            timed_out,
            requeue,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TEN: Duration = Duration::from_secs(10);

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn counts(replicas: i32, updated: i32, ready: i32) -> Counts {
        Counts {
            replicas,
            updated,
            ready,
            available: ready,
        }
    }

    /// Three pods, one updated and never ready: a stuck rollout of `web-2`.
    fn stuck() -> Rollout<'static> {
        Rollout {
            kind: "DaemonSet",
            revision: "web-2",
            deadline: Some(TEN),
            paused: false,
            before: counts(3, 1, 2),
            after: counts(3, 1, 2),
            complete: false,
            all_updated: false,
        }
    }

    fn cond(status: &str, reason: &str, message: &str, since: i64) -> Condition {
        Condition::new(status, reason, message.into(), at(since))
    }

    fn progressing(since: i64) -> Condition {
        cond(
            "True",
            reason::REVISION_UPDATED,
            "ControllerRevision \"web-2\" is progressing.",
            since,
        )
    }

    /// Steps the rollout at each of `times`, storing the condition between steps as the status
    /// would; returns the last outcome.
    fn run(r: &Rollout<'_>, mut stored: Option<Condition>, times: &[i64]) -> Outcome {
        let mut last = None;
        for t in times {
            let o = r.step(stored.as_ref(), at(*t));
            stored = o.condition.clone();
            last = Some(o);
        }
        last.unwrap()
    }

    #[test]
    fn times_out_after_the_deadline_and_not_before() {
        let r = stuck();
        let o = r.step(Some(&progressing(100)), at(110));
        assert_eq!(o.condition, Some(progressing(100)));
        assert_eq!(o.requeue, Some(Duration::from_secs(1)));
        let o = r.step(Some(&progressing(100)), at(111));
        let c = o.condition.unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", TIMED_OUT));
        assert_eq!(
            c.message,
            "ControllerRevision \"web-2\" has timed out progressing."
        );
        assert_eq!(c.since, at(111));
        assert!(o.timed_out, "the flip is reported once");
        assert_eq!(o.requeue, None);
        // Later syncs keep it, without another flip.
        let o = r.step(Some(&c), at(200));
        assert_eq!(o.condition, Some(c));
        assert!(!o.timed_out);
    }

    #[test]
    fn progress_restarts_the_clock() {
        let r = Rollout {
            before: counts(3, 1, 2),
            after: counts(3, 2, 2),
            ..stuck()
        };
        let o = r.step(Some(&progressing(100)), at(109));
        assert_eq!(o.condition, Some(progressing(109)));
        assert_eq!(o.requeue, Some(Duration::from_secs(11)));
        // Then nothing moves: the deadline counts from the progress.
        let o = run(&stuck(), o.condition, &[115, 119]);
        assert_eq!(o.condition, Some(progressing(109)));
        let o = stuck().step(Some(&progressing(109)), at(120));
        assert!(o.timed_out);
        // Progress after the timeout makes it progressing again.
        let o = r.step(o.condition.as_ref(), at(130));
        assert_eq!(o.condition, Some(progressing(130)));
    }

    #[test]
    fn a_paused_rollout_never_times_out() {
        let r = Rollout {
            paused: true,
            ..stuck()
        };
        let paused = cond("Unknown", "DaemonSetPaused", "DaemonSet is paused", 100);
        let o = run(&r, Some(progressing(95)), &[100, 200, 10_000]);
        assert_eq!(o.condition, Some(paused.clone()));
        assert_eq!(o.requeue, None);
        // Resuming starts the clock over.
        let o = stuck().step(Some(&paused), at(10_001));
        assert_eq!(
            o.condition,
            Some(cond(
                "Unknown",
                "DaemonSetResumed",
                "DaemonSet is resumed",
                10_001
            ))
        );
        assert_eq!(o.requeue, Some(Duration::from_secs(11)));
        let o = run(&stuck(), o.condition, &[10_011, 10_012]);
        assert!(o.timed_out);
        // Pausing a timed-out rollout leaves it timed out.
        let o = r.step(o.condition.as_ref(), at(10_020));
        assert_eq!(o.condition.unwrap().reason, TIMED_OUT);
    }

    #[test]
    fn a_restart_carries_on_from_the_stored_condition() {
        // The stored status is all a new controller has: the counts it holds and the condition,
        // round-tripped through JSON.
        let stored = replace(
            &[json!({"type": "Other", "status": "True"})],
            Some(&progressing(100)),
        );
        let again = Condition::find(&stored).unwrap();
        assert_eq!(again, progressing(100));
        let o = stuck().step(Some(&again), at(105));
        assert_eq!(
            o.condition,
            Some(progressing(100)),
            "the clock is not reset"
        );
        assert_eq!(o.requeue, Some(Duration::from_secs(6)));
        let o = stuck().step(Some(&again), at(111));
        assert!(o.timed_out);
        let written = replace(&stored, o.condition.as_ref());
        assert_eq!(written.len(), 2);
        assert_eq!(written[0]["type"], "Other");
        assert_eq!(written[1]["reason"], TIMED_OUT);
        assert_eq!(written[1]["lastTransitionTime"], "1970-01-01T00:01:51Z");
    }

    #[test]
    fn starts_completes_and_stays_complete() {
        // First sight of the deadline mid-rollout.
        let o = stuck().step(None, at(100));
        let c = o.condition.unwrap();
        assert_eq!(c.reason, reason::FOUND_NEW_REVISION);
        assert_eq!(o.requeue, Some(Duration::from_secs(11)));
        // Done.
        let done = Rollout {
            complete: true,
            all_updated: true,
            after: counts(3, 3, 3),
            ..stuck()
        };
        let o = done.step(Some(&c), at(105));
        let available = o.condition.unwrap();
        assert_eq!(available.status, "True");
        assert_eq!(available.reason, reason::NEW_REVISION_AVAILABLE);
        assert_eq!(
            available.message,
            "ControllerRevision \"web-2\" has successfully progressed."
        );
        assert_eq!(o.requeue, None);
        // A pod lost later is no new rollout.
        let lost = Rollout {
            complete: false,
            before: counts(3, 3, 3),
            after: counts(3, 3, 2),
            ..done.clone()
        };
        let o = run(&lost, Some(available.clone()), &[200, 1_000]);
        assert_eq!(o.condition, Some(available.clone()));
        // A new template starts a new rollout, and its clock.
        let next = Rollout {
            revision: "web-3",
            ..stuck()
        };
        let o = next.step(Some(&available), at(2_000));
        let c = o.condition.unwrap();
        assert_eq!(c.reason, reason::NEW_REVISION_CREATED);
        assert_eq!(c.message, "Rolling out new controller revision \"web-3\"");
        assert_eq!(c.since, at(2_000));
        // The same for a new template after a timeout.
        let timed_out = cond(
            "False",
            TIMED_OUT,
            "ControllerRevision \"web-2\" has timed out progressing.",
            500,
        );
        let o = next.step(Some(&timed_out), at(2_000));
        assert_eq!(o.condition.unwrap().reason, reason::NEW_REVISION_CREATED);
    }

    #[test]
    fn no_deadline_no_condition() {
        let r = Rollout {
            deadline: None,
            ..stuck()
        };
        let o = r.step(Some(&progressing(1)), at(1_000));
        assert_eq!(o.condition, None);
        assert_eq!(o.requeue, None);
        assert!(replace(&[json!({"type": PROGRESSING})], None).is_empty());
    }
}
