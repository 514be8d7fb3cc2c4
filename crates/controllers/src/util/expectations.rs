//! Controller expectations, as upstream's `UIDTrackingControllerExpectations`: a ReplicaSet sync
//! that creates or deletes pods records what its own watch must still show, and the next sync
//! does not act on the cache until the watch has caught up. Without this, a sync that runs
//! before the watch delivers its own creations would see too few pods and create them again
//! (a burst of 500 replicas would make 1,000 pods).
//!
//! Creations are counted (the pods' names are not known before the server generates them);
//! deletions are tracked by pod key so that a pod seen twice (first with a
//! `deletionTimestamp`, then deleted) lowers the count once. Expectations older than
//! [`EXPECTATIONS_TTL`] count as satisfied, so a lost watch event stalls a controller for at most
//! five minutes, as upstream.

use crate::history;
use api::pod::is_terminating;
use informer::Change;
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use std::{
    collections::{HashMap, HashSet},
    sync::{Mutex, MutexGuard},
    time::Duration,
};
use tokio::time::Instant;

/// How long unmet expectations hold a controller back (upstream's `ExpectationsTimeout`).
pub const EXPECTATIONS_TTL: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Record {
    adds: i64,
    deletes: HashSet<String>,
    at: Instant,
}

/// Expected creations and deletions per controller key; shared by the watch and the workers.
#[derive(Debug)]
pub struct Expectations {
    records: Mutex<HashMap<String, Record>>,
    ttl: Duration,
}

impl Default for Expectations {
    fn default() -> Self {
        Self::new(EXPECTATIONS_TTL)
    }
}

impl Expectations {
    /// Expectations that expire after `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            records: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Record>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the controller under `key` may act on its cache: it expects nothing more, its
    /// expectations expired, or it never recorded any (a fresh controller).
    pub fn satisfied(&self, key: &str) -> bool {
        match self.lock().get(key) {
            None => true,
            Some(r) => (r.adds <= 0 && r.deletes.is_empty()) || r.at.elapsed() > self.ttl,
        }
    }

    /// When the expectations of `key` expire, if it has unmet ones.
    pub fn expires_in(&self, key: &str) -> Option<Duration> {
        let records = self.lock();
        let r = records.get(key)?;
        if r.adds <= 0 && r.deletes.is_empty() {
            return None;
        }
        Some(self.ttl.saturating_sub(r.at.elapsed()))
    }

    /// Records that the controller is about to create `count` pods (replacing what it expected).
    pub fn expect_creations(&self, key: &str, count: usize) {
        let record = Record {
            adds: count as i64,
            deletes: HashSet::new(),
            at: Instant::now(),
        };
        self.lock().insert(key.to_string(), record);
    }

    /// Records that the controller is about to delete the pods with `pod_keys`.
    pub fn expect_deletions(&self, key: &str, pod_keys: impl IntoIterator<Item = String>) {
        let record = Record {
            adds: 0,
            deletes: pod_keys.into_iter().collect(),
            at: Instant::now(),
        };
        self.lock().insert(key.to_string(), record);
    }

    /// Adds `pod_keys` to the deletions `key` still expects, for a sync that deletes in several
    /// steps (a StatefulSet's scaling pass, then its rolling update): replacing the record would
    /// forget the first step's deletions before the watch has shown them. Expired expectations
    /// are dropped, not extended.
    pub fn add_deletions(&self, key: &str, pod_keys: impl IntoIterator<Item = String>) {
        let mut records = self.lock();
        match records.get_mut(key) {
            Some(r) if r.at.elapsed() <= self.ttl => {
                r.deletes.extend(pod_keys);
                r.at = Instant::now();
            }
            _ => {
                records.insert(
                    key.to_string(),
                    Record {
                        adds: 0,
                        deletes: pod_keys.into_iter().collect(),
                        at: Instant::now(),
                    },
                );
            }
        }
    }

    /// A creation was observed (or will never happen because the request failed).
    pub fn creation_observed(&self, key: &str) {
        if let Some(r) = self.lock().get_mut(key) {
            r.adds -= 1;
        }
    }

    /// `count` creations will never be observed (they were skipped or failed).
    pub fn lower_creations(&self, key: &str, count: usize) {
        if let Some(r) = self.lock().get_mut(key) {
            r.adds -= count as i64;
        }
    }

    /// The deletion of `pod_key` was observed (or failed); a key not expected changes nothing.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        if let Some(r) = self.lock().get_mut(key) {
            r.deletes.remove(pod_key);
        }
    }

    /// Forgets the controller under `key` (it was deleted).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// The expectations of a controller that creates, deletes and updates pods in place (DaemonSet,
/// StatefulSet): three records per owner, so that an in-place update (observed as the pod's
/// revision label changing) is not mistaken for a deletion (observed as a `deletionTimestamp` or
/// the pod going). An owner may act when all three are met.
#[derive(Debug)]
pub struct PodExpectations {
    records: Expectations,
}

fn delete_key(key: &str) -> String {
    format!("{key}#delete")
}

fn in_place_key(key: &str) -> String {
    format!("{key}#in-place")
}

impl PodExpectations {
    /// Expectations that expire after `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            records: Expectations::new(ttl),
        }
    }

    fn keys(key: &str) -> [String; 3] {
        [key.to_string(), delete_key(key), in_place_key(key)]
    }

    /// Whether the owner under `key` may act on its cache. Ask before reading the pods from the
    /// cache: asked after, a write observed in between would count as seen by a snapshot that
    /// lacks it.
    pub fn satisfied(&self, key: &str) -> bool {
        Self::keys(key).iter().all(|k| self.records.satisfied(k))
    }

    /// When the soonest of the owner's unmet expectations expires.
    pub fn expires_in(&self, key: &str) -> Option<Duration> {
        Self::keys(key)
            .iter()
            .filter_map(|k| self.records.expires_in(k))
            .min()
    }

    /// Forgets an owner that is gone.
    pub fn forget(&self, key: &str) {
        for k in Self::keys(key) {
            self.records.forget(&k);
        }
    }

    /// The owner is about to create `count` pods.
    pub fn expect_creations(&self, key: &str, count: usize) {
        self.records.expect_creations(key, count);
    }

    /// A creation was observed, or will never be (it failed, or found the pod there already).
    pub fn creation_observed(&self, key: &str) {
        self.records.creation_observed(key);
    }

    /// `count` creations will never be observed (they were skipped).
    pub fn lower_creations(&self, key: &str, count: usize) {
        self.records.lower_creations(key, count);
    }

    /// The owner is about to delete these pods (added to the deletions it still expects: one sync
    /// may delete in several steps).
    pub fn expect_deletions(&self, key: &str, pod_keys: impl IntoIterator<Item = String>) {
        self.records.add_deletions(&delete_key(key), pod_keys);
    }

    /// A deletion was observed, or will never be.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        self.records.deletion_observed(&delete_key(key), pod_key);
    }

    /// The owner is about to update these pods in place (added to what it still expects).
    pub fn expect_in_place(&self, key: &str, pod_keys: impl IntoIterator<Item = String>) {
        self.records.add_deletions(&in_place_key(key), pod_keys);
    }

    /// An in-place update was observed, or will never be.
    pub fn in_place_observed(&self, key: &str, pod_key: &str) {
        self.records.deletion_observed(&in_place_key(key), pod_key);
    }

    /// Lowers what a pod's change shows was done: a pod that appeared (created), one that is
    /// terminating or gone (deleted), one whose revision label moved (updated in place).
    /// `owner` names the key of a pod's controller if it is one of ours. A relist that finds a
    /// name reused (another uid) shows the old pod's deletion and the new one's creation, both
    /// missed as events.
    pub fn observe(&self, change: &Change<Pod>, owner: impl Fn(&ObjectMeta) -> Option<String>) {
        match change {
            Change::Added(pod) => {
                if let Some(key) = owner(&pod.metadata) {
                    if is_terminating(pod) {
                        self.deletion_observed(&key, &pod.key());
                    } else {
                        self.creation_observed(&key);
                    }
                }
            }
            Change::Updated { .. } if change.is_resync() => {}
            Change::Updated { old, new } => {
                let new_owner = owner(&new.metadata);
                if old.metadata.uid != new.metadata.uid {
                    if let Some(key) = owner(&old.metadata) {
                        self.deletion_observed(&key, &old.key());
                    }
                    if let Some(key) = &new_owner
                        && !is_terminating(new)
                    {
                        self.creation_observed(key);
                    }
                }
                if let Some(key) = &new_owner {
                    if is_terminating(new) {
                        self.deletion_observed(key, &new.key());
                    }
                    if history::hash_of(&old.metadata) != history::hash_of(&new.metadata) {
                        self.in_place_observed(key, &new.key());
                    }
                }
            }
            Change::Deleted(pod) => {
                if let Some(key) = owner(&pod.metadata) {
                    self.deletion_observed(&key, &pod.key());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    enum Op {
        ExpectCreate(usize),
        ExpectDelete(&'static [&'static str]),
        AddDelete(&'static [&'static str]),
        Created,
        Deleted(&'static str),
        Lower(usize),
        Forget,
        Wait(u64),
    }
    use Op::*;

    #[tokio::test(start_paused = true)]
    async fn expectations_hold_a_controller_until_its_watch_catches_up() {
        let cases: Vec<(&str, Vec<Op>, bool)> = vec![
            ("a fresh controller may act", vec![], true),
            (
                "creations pending",
                vec![ExpectCreate(3), Created, Created],
                false,
            ),
            (
                "all creations observed",
                vec![ExpectCreate(2), Created, Created],
                true,
            ),
            (
                "failed creations are lowered",
                vec![ExpectCreate(5), Created, Lower(4)],
                true,
            ),
            (
                "deletions pending",
                vec![ExpectDelete(&["a", "b"]), Deleted("a")],
                false,
            ),
            (
                "a deletion observed twice counts once",
                vec![ExpectDelete(&["a", "b"]), Deleted("a"), Deleted("a")],
                false,
            ),
            (
                "unexpected deletions change nothing",
                vec![ExpectDelete(&["a"]), Deleted("x")],
                false,
            ),
            (
                "all deletions observed",
                vec![ExpectDelete(&["a", "b"]), Deleted("b"), Deleted("a")],
                true,
            ),
            (
                "expired after five minutes",
                vec![ExpectCreate(3), Wait(301)],
                true,
            ),
            ("not yet expired", vec![ExpectCreate(3), Wait(299)], false),
            (
                "forgotten with its controller",
                vec![ExpectCreate(3), Forget],
                true,
            ),
            (
                "added deletions keep the pending ones",
                vec![ExpectDelete(&["a"]), AddDelete(&["b"]), Deleted("b")],
                false,
            ),
            (
                "added deletions all observed",
                vec![
                    AddDelete(&["a"]),
                    AddDelete(&["b"]),
                    Deleted("a"),
                    Deleted("b"),
                ],
                true,
            ),
            (
                "added deletions replace expired ones",
                vec![
                    ExpectDelete(&["a"]),
                    Wait(301),
                    AddDelete(&["b"]),
                    Deleted("b"),
                ],
                true,
            ),
            (
                "a new expectation replaces the old",
                vec![ExpectCreate(3), ExpectDelete(&["a"]), Deleted("a")],
                true,
            ),
        ];
        for (name, ops, want) in cases {
            let e = Expectations::default();
            for op in ops {
                match op {
                    ExpectCreate(n) => e.expect_creations("ns/rs", n),
                    ExpectDelete(keys) => {
                        e.expect_deletions("ns/rs", keys.iter().map(|k| k.to_string()))
                    }
                    AddDelete(keys) => e.add_deletions("ns/rs", keys.iter().map(|k| k.to_string())),
                    Created => e.creation_observed("ns/rs"),
                    Deleted(k) => e.deletion_observed("ns/rs", k),
                    Lower(n) => e.lower_creations("ns/rs", n),
                    Forget => e.forget("ns/rs"),
                    Wait(s) => tokio::time::advance(Duration::from_secs(s)).await,
                }
            }
            assert_eq!(e.satisfied("ns/rs"), want, "{name}");
        }
    }

    fn pod(uid: &str, hash: &str, terminating: bool, rv: &str) -> informer::Shared<Pod> {
        let mut meta = serde_json::json!({"name": "web-0", "namespace": "ns", "uid": uid,
            "resourceVersion": rv, "labels": {"controller-revision-hash": hash}});
        if terminating {
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        }
        informer::Cached::shared(
            serde_json::from_value(serde_json::json!({"metadata": meta})).unwrap(),
        )
    }

    /// A case: its name, what the owner expects, and the change that meets it.
    type Case = (&'static str, fn(&PodExpectations), Change<Pod>);

    #[test]
    fn pod_changes_meet_the_expectations_they_show() {
        let owner = |_: &ObjectMeta| Some("ns/web".to_string());
        let updated = |old, new| Change::Updated { old, new };
        let cases: Vec<Case> = vec![
            (
                "a pod appears",
                |e| e.expect_creations("ns/web", 1),
                Change::Added(pod("a", "h1", false, "1")),
            ),
            (
                "a pod turns terminating",
                |e| e.expect_deletions("ns/web", ["ns/web-0".to_string()]),
                updated(pod("a", "h1", false, "1"), pod("a", "h1", true, "2")),
            ),
            (
                "a pod is gone",
                |e| e.expect_deletions("ns/web", ["ns/web-0".to_string()]),
                Change::Deleted(pod("a", "h1", false, "1")),
            ),
            (
                "a pod's revision moves in place",
                |e| e.expect_in_place("ns/web", ["ns/web-0".to_string()]),
                updated(pod("a", "h1", false, "1"), pod("a", "h2", false, "2")),
            ),
            (
                "a relist finds the name reused: the deletion and the creation",
                |e| {
                    e.expect_deletions("ns/web", ["ns/web-0".to_string()]);
                    e.expect_creations("ns/web", 1);
                },
                updated(pod("a", "h1", false, "1"), pod("b", "h2", false, "5")),
            ),
        ];
        for (name, expect, change) in cases {
            let e = PodExpectations::new(EXPECTATIONS_TTL);
            expect(&e);
            assert!(!e.satisfied("ns/web"), "{name}: expected nothing");
            e.observe(&change, owner);
            assert!(e.satisfied("ns/web"), "{name}");
        }
        // A relist of the same version shows nothing; an in-place update is no deletion.
        let e = PodExpectations::new(EXPECTATIONS_TTL);
        e.expect_deletions("ns/web", ["ns/web-0".to_string()]);
        e.observe(
            &updated(pod("a", "h1", true, "1"), pod("a", "h1", true, "1")),
            owner,
        );
        e.observe(
            &updated(pod("a", "h1", false, "1"), pod("a", "h2", false, "2")),
            owner,
        );
        assert!(!e.satisfied("ns/web"));
        // Another owner's pods meet none of ours.
        e.observe(&Change::Deleted(pod("a", "h1", false, "1")), |_| None);
        assert!(!e.satisfied("ns/web"));
    }
}
