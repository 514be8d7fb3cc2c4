//! The objects this server wrote last, kept parsed for the next write of the same object.
//!
//! Every update reads the object it changes, and the cache holds objects as JSON: parsing them
//! again was 7.6% of `bench phases`' CPU (`Entry::value`), nearly all for objects this server
//! had just written. A pod is created, bound, has its status patched twice and is deleted twice,
//! and each of those writes read what the one before stored. So a writer leaves the object it
//! stored here, under its store key and revision, and the next writer takes it instead of
//! parsing, when the cache's entry is at that revision. A revision names one write, so the
//! object kept is the entry's, whatever came between (another server's writes, a relist).
//!
//! Bounded by count, the oldest going first. Events are not kept: each is written once and no
//! writer reads it again, and they are half of a rollout's writes. Nor are Leases: a kubelet
//! renews its Lease every 10 s, and in a cluster of more than a few hundred nodes thousands of
//! other writes come between two renewals, so a kept Lease is never read again and only pushes
//! out the pods (at 20,000 nodes, 1,700 renewals a second).

use crate::registry::Kind;
use serde_json::Value;
use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};
use store::Revision;

/// How many objects are kept. A Deployment's rolling update writes each pod of a 500-pod wave
/// several times with the wave's other pods (and their Events) in between; 4,096 pods are a few
/// tens of MiB.
const CAPACITY: usize = 4_096;

#[derive(Default)]
pub(super) struct Recent {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_key: HashMap<String, (Revision, Arc<Value>)>,
    /// Keys in the order they were written, oldest first; a key written again is in it again,
    /// and only the newest of its places removes it.
    order: VecDeque<(String, Revision)>,
}

impl Recent {
    /// Keeps `obj`, stored under `key` at `rev`, unless it is an Event or a Lease.
    pub(super) fn remember(&self, def: &Kind, key: &str, rev: Revision, obj: &Arc<Value>) {
        if matches!(def.kind.as_str(), "Event" | "Lease") {
            return;
        }
        let mut evicted = Vec::new();
        {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            inner.by_key.insert(key.to_owned(), (rev, obj.clone()));
            inner.order.push_back((key.to_owned(), rev));
            while inner.order.len() > CAPACITY {
                let Some((old_key, old_rev)) = inner.order.pop_front() else {
                    break;
                };
                if inner
                    .by_key
                    .get(&old_key)
                    .is_some_and(|(r, _)| *r == old_rev)
                    && let Some((_, obj)) = inner.by_key.remove(&old_key)
                {
                    evicted.push(obj);
                }
            }
        }
        // Freed outside the lock: dropping a pod's value is hundreds of deallocations.
        drop(evicted);
    }

    /// The object stored under `key` at `rev`, if this server wrote it and still keeps it.
    pub(super) fn get(&self, key: &str, rev: Revision) -> Option<Arc<Value>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match inner.by_key.get(key) {
            Some((r, obj)) if *r == rev => Some(obj.clone()),
            _ => None,
        }
    }

    /// Forgets the object under `key` (it was deleted).
    pub(super) fn forget(&self, key: &str) {
        let forgotten = self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_key
            .remove(key);
        // Freed outside the lock, as in `remember`.
        drop(forgotten);
    }

    /// How many objects are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_key
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn kind(group: &str, version: &str, plural: &str) -> Arc<Kind> {
        Registry::new()
            .find(group, version, plural)
            .unwrap_or_else(|| panic!("{group}/{version}/{plural}"))
    }

    #[test]
    fn hands_back_only_the_revision_it_keeps() {
        let pods = kind("", "v1", "pods");
        let recent = Recent::default();
        let obj = Arc::new(json!({"metadata": {"name": "a", "resourceVersion": "7"}}));
        recent.remember(&pods, "/registry/core/pods/default/a", 7, &obj);
        let kept = recent.get("/registry/core/pods/default/a", 7);
        assert!(kept.is_some_and(|k| Arc::ptr_eq(&k, &obj)));
        assert!(recent.get("/registry/core/pods/default/a", 8).is_none());
        assert!(recent.get("/registry/core/pods/default/b", 7).is_none());
        let newer = Arc::new(json!({"metadata": {"name": "a", "resourceVersion": "9"}}));
        recent.remember(&pods, "/registry/core/pods/default/a", 9, &newer);
        assert!(recent.get("/registry/core/pods/default/a", 7).is_none());
        assert!(recent.get("/registry/core/pods/default/a", 9).is_some());
        recent.forget("/registry/core/pods/default/a");
        assert!(recent.get("/registry/core/pods/default/a", 9).is_none());
    }

    #[test]
    fn keeps_no_events_nor_leases_and_at_most_its_capacity() {
        let recent = Recent::default();
        let events = kind("", "v1", "events");
        let obj = Arc::new(json!({}));
        recent.remember(&events, "/registry/core/events/default/e", 1, &obj);
        let leases = kind("coordination.k8s.io", "v1", "leases");
        recent.remember(&leases, "/registry/leases/kube-node-lease/n", 2, &obj);
        assert_eq!(recent.len(), 0);
        let pods = kind("", "v1", "pods");
        // The same key written again is kept once; its older place in the order does not
        // evict the newer value.
        recent.remember(&pods, "/registry/core/pods/default/p0", 1, &obj);
        for i in 0..CAPACITY {
            let key = format!("/registry/core/pods/default/p{}", i % (CAPACITY - 1));
            recent.remember(&pods, &key, 2 + i as u64, &obj);
        }
        assert_eq!(recent.len(), CAPACITY - 1);
        assert!(recent.get("/registry/core/pods/default/p0", 1).is_none());
        assert!(
            recent
                .get("/registry/core/pods/default/p0", 2 + (CAPACITY - 1) as u64)
                .is_some()
        );
        for i in 0..2 * CAPACITY {
            let key = format!("/registry/core/pods/other/q{i}");
            recent.remember(&pods, &key, 10_000 + i as u64, &obj);
        }
        assert_eq!(recent.len(), CAPACITY);
        assert!(recent.get("/registry/core/pods/other/q0", 10_000).is_none());
    }
}
