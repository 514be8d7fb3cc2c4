//! The kubelet owns its pods' status: when someone else changes a pod's `Ready` condition (the
//! node lifecycle controller marks the pods of a silent node NotReady), the kubelet's status
//! manager writes its own status back on its next sync. This module tells, from a pod event,
//! whether the stored `Ready` is someone else's write or only a late echo of one of ours, and
//! when to write back, at most once per interval per pod so two writers that disagree cannot
//! spin. Pure; the engine does the writes.

use crate::distribution::stable_hash;
use jiff::Timestamp;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;

/// A `Ready` condition as compared, compactly (100,000 pods remember a few each): whether it is
/// `True`, its `lastTransitionTime` in seconds, and a hash of its reason and message. Someone
/// else's write differs from all of ours in at least one of them (the node lifecycle controller
/// keeps the reason of the `True` condition, which no `False` of ours has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadyMark {
    /// `status` is `True`.
    pub ready: bool,
    /// `lastTransitionTime`, in seconds.
    pub since: Option<i64>,
    /// A hash of `reason` and `message`.
    pub words: u64,
}

/// How many of our own `Ready` conditions are remembered: watch events lag behind writes, so an
/// event may show one of the last few we wrote; one older than that is taken for a foreign write
/// (and costs one extra, harmless write).
const REMEMBERED: usize = 4;

/// The `Ready` condition of a pod status (as stored, or as we write it).
pub fn ready_of(status: &Value) -> Option<ReadyMark> {
    let ready = status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    let text = |k: &str| ready.get(k).and_then(Value::as_str).unwrap_or("");
    Some(ReadyMark {
        ready: text("status") == "True",
        since: text("lastTransitionTime")
            .parse::<Timestamp>()
            .ok()
            .map(|t| t.as_second()),
        words: stable_hash(&[text("reason").as_bytes(), text("message").as_bytes()]),
    })
}

/// What to do about a pod's status after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resync {
    /// The stored `Ready` is ours (or agrees with ours): nothing.
    InSync,
    /// Someone else changed it: write ours now.
    Now,
    /// Someone else changed it, but we wrote it back less than an interval ago: write then.
    At(Instant),
}

/// Per pod: the `Ready` conditions we wrote, the last one seen on the server, and when we last
/// wrote ours back.
#[derive(Clone, Debug, Default)]
pub struct Reported {
    written: [Option<ReadyMark>; REMEMBERED],
    next: u8,
    seen: Option<ReadyMark>,
    last_resync: Option<Instant>,
    /// When a deferred write-back is due (one at a time).
    pub due: Option<Instant>,
}

impl Reported {
    /// Remembers a `Ready` condition we are writing (repeats of the newest are not kept twice).
    pub fn wrote(&mut self, mark: Option<ReadyMark>) {
        let Some(mark) = mark else { return };
        let newest = (self.next as usize + REMEMBERED - 1) % REMEMBERED;
        if self.written[newest] == Some(mark) {
            return;
        }
        self.written[self.next as usize] = Some(mark);
        self.next = ((self.next as usize + 1) % REMEMBERED) as u8;
    }

    /// Whether we wrote this `Ready` condition (recently).
    pub fn is_own(&self, mark: ReadyMark) -> bool {
        self.written.contains(&Some(mark))
    }

    /// Records what the server holds now.
    pub fn saw(&mut self, mark: Option<ReadyMark>) {
        self.seen = mark;
    }

    /// Records that we wrote our status back at `now`.
    pub fn resynced(&mut self, now: Instant) {
        self.last_resync = Some(now);
        self.due = None;
    }

    /// Whether the last seen server `Ready` needs ours written back, given that ours is now
    /// `ready`: only a different status that we never wrote counts, and write-backs of one pod
    /// are at least `interval` apart.
    pub fn decide(&self, ready: bool, now: Instant, interval: Duration) -> Resync {
        let Some(seen) = self.seen else {
            return Resync::InSync;
        };
        if seen.ready == ready || self.is_own(seen) {
            return Resync::InSync;
        }
        match self.last_resync.map(|at| at + interval) {
            Some(next) if next > now => Resync::At(next),
            _ => Resync::Now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: i64 = 1_700_000_000;

    fn ready(status: &str, reason: Option<&str>, since: Option<&str>) -> Value {
        let mut c = json!({"type": "Ready", "status": status});
        if let Some(r) = reason {
            c["reason"] = json!(r);
            c["message"] = json!("containers with unready status: [app]");
        }
        if let Some(s) = since {
            c["lastTransitionTime"] = json!(s);
        }
        json!({"conditions": [{"type": "PodScheduled", "status": "True"}, c]})
    }

    fn mark(ready: bool, since: i64, reason: Option<&str>) -> ReadyMark {
        let words = match reason {
            Some(r) => stable_hash(&[
                r.as_bytes(),
                b"containers with unready status: [app]".as_slice(),
            ]),
            None => stable_hash(&[b"".as_slice(), b"".as_slice()]),
        };
        ReadyMark {
            ready,
            since: Some(since),
            words,
        }
    }

    #[test]
    fn the_ready_condition_is_read_from_a_status() {
        let at = Some("2023-11-14T22:13:20Z");
        let table = [
            (ready("True", None, at), Some(mark(true, T0, None))),
            (
                ready("False", Some("ContainersNotReady"), at),
                Some(mark(false, T0, Some("ContainersNotReady"))),
            ),
            (
                ready("Unknown", None, None),
                Some(ReadyMark {
                    since: None,
                    ..mark(false, 0, None)
                }),
            ),
            (json!({"conditions": []}), None),
            (json!({}), None),
        ];
        for (s, want) in table {
            assert_eq!(ready_of(&s), want, "{s}");
        }
    }

    #[test]
    fn only_a_foreign_different_ready_is_written_back_and_not_too_often() {
        let now = Instant::now();
        let every = Duration::from_secs(10);
        let ours_false = mark(false, T0, Some("ContainersNotReady"));
        let ours_true = mark(true, T0, None);
        // As the node lifecycle controller writes it: False, now, the True's (empty) reason.
        let theirs = mark(false, T0 + 60, None);
        let mut r = Reported::default();
        r.wrote(Some(ours_false));
        r.wrote(Some(ours_true));
        r.wrote(Some(ours_true));

        type Case = (Option<ReadyMark>, Option<Instant>, Resync);
        let table: Vec<Case> = vec![
            // Nothing stored yet: our first write is on its way.
            (None, None, Resync::InSync),
            // Our latest write.
            (Some(ours_true), None, Resync::InSync),
            // A late echo of an older write of ours.
            (Some(ours_false), None, Resync::InSync),
            // Someone else's, but it agrees with us.
            (Some(mark(true, T0 + 60, None)), None, Resync::InSync),
            // Someone else's, and it does not: write back now...
            (Some(theirs), None, Resync::Now),
            // ...even in the very second of one of ours: the words differ.
            (Some(mark(false, T0, None)), None, Resync::Now),
            // ...unless we did a moment ago: then an interval after that.
            (Some(theirs), Some(now), Resync::At(now + every)),
            (Some(theirs), Some(now - every), Resync::Now),
        ];
        for (seen, last, want) in table {
            let mut r = r.clone();
            r.saw(seen);
            if let Some(at) = last {
                r.resynced(at);
            }
            assert_eq!(r.decide(true, now, every), want, "{seen:?} {last:?}");
        }
    }

    #[test]
    fn only_the_last_few_writes_are_remembered() {
        let mut r = Reported::default();
        let nth = |i: i64| mark(i % 2 == 0, T0 + i, None);
        for i in 0..=REMEMBERED as i64 {
            r.wrote(Some(nth(i)));
        }
        assert!(!r.is_own(nth(0)), "the oldest was forgotten");
        for i in 1..=REMEMBERED as i64 {
            assert!(r.is_own(nth(i)), "{i}");
        }
        r.wrote(None);
        assert!(r.is_own(nth(REMEMBERED as i64)));
    }
}
