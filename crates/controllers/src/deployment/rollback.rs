//! Rollbacks. In `apps/v1` there is no rollback call: `kubectl rollout undo` (since 1.x,
//! client-side) patches the Deployment's template back to an old ReplicaSet's. The controller then
//! finds that ReplicaSet by template ([`super::util::find_new`]) and makes it the new one again:
//! it gets revision `max + 1` and remembers its earlier numbers in `revision-history`, so
//! `kubectl rollout history` shows the rollback as the newest revision. No pod is recreated: the
//! old ReplicaSet is scaled up, the others down, as in any rollout.
//!
//! This module holds that revision bookkeeping (upstream's `SetNewReplicaSetAnnotations`), and
//! the annotations the undo itself gives the Deployment ([`undo_annotations`], used by
//! `rollwright rollout undo` and by [`crate::autorollback`]).

use super::util::{
    MAX_REVISION_HISTORY_CHARS, REVISION, REVISION_HISTORY, copy_deployment_annotations,
    set_replicas_annotations,
};
use std::collections::BTreeMap;

/// Annotations a Deployment keeps through an undo and does not take from the ReplicaSet
/// (kubectl's `annotationsToSkip`).
pub const UNDO_KEEPS: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    super::util::DESIRED_REPLICAS,
    super::util::MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// The annotations a Deployment gets when undone to a ReplicaSet, as `kubectl rollout undo`
/// sets them: its own [`UNDO_KEEPS`] ones, and every other one from the ReplicaSet.
pub fn undo_annotations<V: Clone>(
    deployment: impl IntoIterator<Item = (String, V)>,
    replica_set: impl IntoIterator<Item = (String, V)>,
) -> BTreeMap<String, V> {
    let keeps = |k: &str| UNDO_KEEPS.contains(&k);
    let mut out: BTreeMap<String, V> = deployment.into_iter().filter(|(k, _)| keeps(k)).collect();
    out.extend(replica_set.into_iter().filter(|(k, _)| !keeps(k)));
    out
}

/// Brings the new ReplicaSet's annotations up to date: the Deployment's annotations copied,
/// the revision raised to `new_revision` if lower (keeping the old number in
/// `revision-history`, at most [`MAX_REVISION_HISTORY_CHARS`] long, oldest dropped first), and,
/// for a ReplicaSet about to be created (`!exists`), `desired-replicas`/`max-replicas`.
/// Returns whether anything changed.
pub fn set_new_rs_annotations(
    deployment: Option<&BTreeMap<String, String>>,
    rs: &mut BTreeMap<String, String>,
    new_revision: i64,
    exists: bool,
    desired: i32,
    max: i32,
) -> bool {
    let mut changed = copy_deployment_annotations(deployment, rs);
    let old = rs.get(REVISION).cloned();
    let old_number = match old.as_deref() {
        None | Some("") => 0,
        Some(s) => match s.parse::<i64>() {
            Ok(n) => n,
            // Upstream leaves a ReplicaSet with an unreadable revision alone.
            Err(_) => return changed,
        },
    };
    if old_number < new_revision {
        rs.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old.filter(|o| !o.is_empty()) {
            let history = rs.get(REVISION_HISTORY).cloned().unwrap_or_default();
            let next = append_history(&history, &old);
            if let Some(next) = next {
                rs.insert(REVISION_HISTORY.into(), next);
            }
        }
    }
    if !exists && set_replicas_annotations(rs, desired, max) {
        changed = true;
    }
    changed
}

/// `history` with `old` appended, dropping the oldest entries to stay within the limit; `None`
/// if even that cannot fit it.
fn append_history(history: &str, old: &str) -> Option<String> {
    if history.is_empty() {
        return Some(old.to_string());
    }
    let entries: Vec<&str> = history.split(',').collect();
    let mut total = history.len() + old.len() + 1;
    let mut start = 0;
    while total > MAX_REVISION_HISTORY_CHARS && start < entries.len() {
        total -= entries[start].len() + 1;
        start += 1;
    }
    if total > MAX_REVISION_HISTORY_CHARS {
        return None;
    }
    let mut kept: Vec<&str> = entries[start..].to_vec();
    kept.push(old);
    Some(kept.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::util::{CHANGE_CAUSE, DESIRED_REPLICAS, MAX_REPLICAS};

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn revisions_move_forward_and_keep_their_history() {
        // (case, RS annotations before, new revision, exists, want revision, want history)
        type Case = (
            &'static str,
            Vec<(&'static str, &'static str)>,
            i64,
            bool,
            &'static str,
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            ("a brand-new RS", vec![], 1, false, "1", None),
            (
                "already at the revision",
                vec![(REVISION, "3")],
                3,
                true,
                "3",
                None,
            ),
            (
                "newer than asked (an old RS was deleted)",
                vec![(REVISION, "5")],
                3,
                true,
                "5",
                None,
            ),
            (
                "rolled back to: history starts",
                vec![(REVISION, "2")],
                4,
                true,
                "4",
                Some("2"),
            ),
            (
                "rolled back again: history grows",
                vec![(REVISION, "4"), (REVISION_HISTORY, "2")],
                6,
                true,
                "6",
                Some("2,4"),
            ),
            (
                "an unreadable revision is left alone",
                vec![(REVISION, "x")],
                4,
                true,
                "x",
                None,
            ),
        ];
        for (name, before, new_revision, exists, want_rev, want_history) in cases {
            let mut rs = map(&before);
            set_new_rs_annotations(None, &mut rs, new_revision, exists, 3, 4);
            assert_eq!(
                rs.get(REVISION).map(String::as_str),
                Some(want_rev),
                "{name}"
            );
            assert_eq!(
                rs.get(REVISION_HISTORY).map(String::as_str),
                want_history,
                "{name}"
            );
            // Replica annotations only on creation.
            assert_eq!(rs.contains_key(DESIRED_REPLICAS), !exists, "{name}");
            assert_eq!(rs.contains_key(MAX_REPLICAS), !exists, "{name}");
        }
    }

    #[test]
    fn change_cause_follows_the_deployment() {
        let d = map(&[(CHANGE_CAUSE, "rollback to v1"), (REVISION, "9")]);
        let mut rs = map(&[(REVISION, "1"), (CHANGE_CAUSE, "v1")]);
        assert!(set_new_rs_annotations(Some(&d), &mut rs, 3, true, 1, 2));
        assert_eq!(
            rs.get(CHANGE_CAUSE).map(String::as_str),
            Some("rollback to v1")
        );
        assert_eq!(rs.get(REVISION).map(String::as_str), Some("3"));
        assert!(!set_new_rs_annotations(Some(&d), &mut rs, 3, true, 1, 2));
    }

    #[test]
    fn history_drops_the_oldest_entries_beyond_the_limit() {
        let long = vec!["1234567890"; 181].join(","); // 1,990 characters
        // Appending ten more characters (and a comma) would make 2,001: the oldest entry goes.
        let got = append_history(&long, "9999999999").unwrap();
        assert_eq!(got.len(), 1_990);
        assert!(got.ends_with(",9999999999"));
        assert_eq!(got.split(',').count(), 181);
        // Nine characters fit exactly.
        assert_eq!(
            append_history(&long, "999999999")
                .unwrap()
                .split(',')
                .count(),
            182
        );
        assert_eq!(append_history("", "7").as_deref(), Some("7"));
        assert_eq!(append_history("1,2", "7").as_deref(), Some("1,2,7"));
    }
}
