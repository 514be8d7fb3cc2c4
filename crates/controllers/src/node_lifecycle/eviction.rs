//! Taint-based eviction, as upstream's taint eviction controller (the "taint manager"): which
//! pods a node's NoExecute taints evict, and when. Pure; the controller does the deletes.

use super::health::NO_EXECUTE;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Taint, Toleration};
use std::collections::HashMap;

pub use api::taint::tolerates;

/// A NoExecute taint and the time its tolerations count from.
#[derive(Clone, Debug, PartialEq)]
pub struct Active {
    /// The taint.
    pub taint: Taint,
    /// Its `timeAdded`, or when the controller first saw it (a taint without one).
    pub since: Timestamp,
}

/// What happens to a pod on a node with NoExecute taints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It tolerates every taint for good.
    Keep,
    /// It tolerates them until then.
    EvictAt(Timestamp),
    /// It must go now.
    Evict,
}

/// The verdict for a pod with `tolerations` on a node with `taints` (all NoExecute). Each taint
/// is matched by the first toleration that tolerates it (upstream's `GetMatchingTolerations`);
/// an untolerated taint evicts at once; otherwise the pod goes when the first `tolerationSeconds`
/// (negative counts as zero) runs out, counted from the taint's `since`; tolerations without
/// seconds tolerate forever.
pub fn verdict(tolerations: &[Toleration], taints: &[Active], now: Timestamp) -> Verdict {
    let mut deadline: Option<Timestamp> = None;
    for active in taints {
        let Some(toleration) = tolerations.iter().find(|t| tolerates(t, &active.taint)) else {
            return Verdict::Evict;
        };
        if let Some(seconds) = toleration.toleration_seconds {
            let at = active
                .since
                .saturating_add(SignedDuration::from_secs(seconds.max(0)))
                .unwrap_or(active.since);
            deadline = Some(deadline.map_or(at, |d| d.min(at)));
        }
    }
    match deadline {
        None => Verdict::Keep,
        Some(at) if at <= now => Verdict::Evict,
        Some(at) => Verdict::EvictAt(at),
    }
}

/// The NoExecute taints of every node, with the time each counts from. A node event tells
/// whether that set changed, so only then are the node's pods re-examined.
#[derive(Default, Debug)]
pub struct NoExecuteTaints {
    nodes: HashMap<String, Vec<Active>>,
}

impl NoExecuteTaints {
    /// Records the taints of `node`; returns whether its NoExecute set changed.
    pub fn observe(&mut self, node: &str, taints: &[Taint], now: Timestamp) -> bool {
        let old = self.nodes.remove(node).unwrap_or_default();
        let same =
            |a: &Taint, b: &Taint| a.key == b.key && a.value == b.value && a.effect == b.effect;
        let new: Vec<Active> = taints
            .iter()
            .filter(|t| t.effect == NO_EXECUTE)
            .map(|t| {
                let seen = old.iter().find(|a| same(&a.taint, t)).map(|a| a.since);
                let since = t.time_added.as_ref().map(|x| x.0).or(seen).unwrap_or(now);
                Active {
                    taint: t.clone(),
                    since,
                }
            })
            .collect();
        let changed = old.len() != new.len() || new.iter().any(|n| !old.iter().any(|o| o == n));
        if !new.is_empty() {
            self.nodes.insert(node.to_string(), new);
        }
        changed
    }

    /// Forgets a deleted node.
    pub fn forget(&mut self, node: &str) {
        self.nodes.remove(node);
    }

    /// The NoExecute taints of `node`.
    pub fn of(&self, node: &str) -> &[Active] {
        self.nodes.get(node).map(Vec::as_slice).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn tol(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
        secs: Option<i64>,
    ) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: secs,
        }
    }

    #[test]
    fn tolerates_matches_upstream() {
        let t = taint("k", Some("v"), NO_EXECUTE);
        let table = [
            (
                tol(Some("k"), Some("Equal"), Some("v"), Some(NO_EXECUTE), None),
                true,
            ),
            (tol(Some("k"), None, Some("v"), None, None), true),
            (tol(Some("k"), Some("Equal"), Some("w"), None, None), false),
            (tol(Some("k"), Some("Exists"), None, None, None), true),
            (
                tol(Some("k"), Some("Exists"), None, Some("NoSchedule"), None),
                false,
            ),
            (tol(Some("other"), Some("Exists"), None, None, None), false),
            (tol(None, Some("Exists"), None, None, None), true),
            (
                tol(None, Some("Exists"), None, Some(NO_EXECUTE), None),
                true,
            ),
            (tol(Some("k"), Some("Lt"), Some("v"), None, None), false),
        ];
        for (toleration, want) in table {
            assert_eq!(tolerates(&toleration, &t), want, "{toleration:?}");
        }
        // Equal with no value tolerates a taint with no value.
        assert!(tolerates(
            &tol(Some("k"), Some("Equal"), None, None, None),
            &taint("k", None, NO_EXECUTE)
        ));
    }

    #[test]
    fn verdicts_and_deadlines() {
        let unreachable = Active {
            taint: taint("u", None, NO_EXECUTE),
            since: ts(1000),
        };
        let notready = Active {
            taint: taint("n", None, NO_EXECUTE),
            since: ts(1100),
        };
        let u = |secs| tol(Some("u"), Some("Exists"), None, Some(NO_EXECUTE), secs);
        let n = |secs| tol(Some("n"), Some("Exists"), None, Some(NO_EXECUTE), secs);
        let now = ts(1200);
        let table: Vec<(&str, Vec<Toleration>, Vec<Active>, Verdict)> = vec![
            ("no taints", vec![], vec![], Verdict::Keep),
            (
                "untolerated",
                vec![n(None)],
                vec![unreachable.clone()],
                Verdict::Evict,
            ),
            (
                "tolerated forever",
                vec![u(None)],
                vec![unreachable.clone()],
                Verdict::Keep,
            ),
            (
                "300s from timeAdded",
                vec![u(Some(300))],
                vec![unreachable.clone()],
                Verdict::EvictAt(ts(1300)),
            ),
            (
                "already expired",
                vec![u(Some(100))],
                vec![unreachable.clone()],
                Verdict::Evict,
            ),
            (
                "negative is zero",
                vec![u(Some(-5))],
                vec![unreachable.clone()],
                Verdict::Evict,
            ),
            (
                "earliest of two taints",
                vec![u(Some(500)), n(Some(300))],
                vec![unreachable.clone(), notready.clone()],
                Verdict::EvictAt(ts(1400)),
            ),
            (
                "one forever, one timed",
                vec![u(None), n(Some(300))],
                vec![unreachable.clone(), notready.clone()],
                Verdict::EvictAt(ts(1400)),
            ),
            (
                "one of two untolerated",
                vec![u(None)],
                vec![unreachable.clone(), notready.clone()],
                Verdict::Evict,
            ),
            (
                "first matching toleration wins",
                vec![u(Some(300)), u(None)],
                vec![unreachable.clone()],
                Verdict::EvictAt(ts(1300)),
            ),
            (
                "wildcard toleration",
                vec![tol(None, Some("Exists"), None, None, None)],
                vec![unreachable, notready],
                Verdict::Keep,
            ),
        ];
        for (what, tolerations, taints, want) in table {
            assert_eq!(verdict(&tolerations, &taints, now), want, "{what}");
        }
    }

    #[test]
    fn the_tracker_reports_changes_and_keeps_first_seen_times() {
        let mut tr = NoExecuteTaints::default();
        let mut stamped = taint("u", None, NO_EXECUTE);
        stamped.time_added = Some(Time(ts(50)));
        let bare = taint("custom", None, NO_EXECUTE);
        let sched = taint("s", None, "NoSchedule");
        assert!(
            !tr.observe("n", std::slice::from_ref(&sched), ts(100)),
            "NoSchedule taints do not count"
        );
        assert!(tr.observe(
            "n",
            &[stamped.clone(), bare.clone(), sched.clone()],
            ts(100)
        ));
        assert_eq!(
            tr.of("n").iter().map(|a| a.since).collect::<Vec<_>>(),
            [ts(50), ts(100)]
        );
        // Seen again later: unchanged, and the bare taint keeps its first-seen time.
        assert!(!tr.observe("n", &[stamped.clone(), bare.clone()], ts(200)));
        assert_eq!(tr.of("n")[1].since, ts(100));
        assert!(tr.observe("n", &[], ts(300)));
        assert!(tr.of("n").is_empty());
        tr.observe("m", &[bare], ts(1));
        tr.forget("m");
        assert!(tr.of("m").is_empty());
    }
}
