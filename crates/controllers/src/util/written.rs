//! Read-your-writes for a controller's cache: the objects a controller wrote that its watch has
//! not delivered yet.
//!
//! A Deployment sync scales ReplicaSets and returns; the next sync (say, for a new template)
//! reads the ReplicaSets from the shared cache, which may not have seen those writes yet. Acting
//! on the older sizes would break the rollout's bounds: a cache that still shows the new
//! ReplicaSet at 3 when it was scaled to 5 lets the next ReplicaSet grow by two pods too many.
//! Upstream's Deployment controller accepts that race; rollwright keeps `maxSurge` strict, so
//! the controller remembers each write and reads it in place of an older cached copy.
//!
//! Resource versions are compared as numbers. Kubernetes calls them opaque, but every store
//! rollwright runs on (its own, etcd, and so every kube-apiserver) hands out increasing integers.
//! A version that is not a number leaves the cache's copy in charge, as upstream.
//!
//! The DaemonSet and StatefulSet controllers keep their own objects parsed
//! ([`super::owners::Owners::hold_newer`]) and hold their status writes there by [`later`].

use informer::{Change, Key, Object, key_of};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
};

/// The latest write per object key whose watch event the cache may still be waiting for.
#[derive(Debug)]
pub struct Written<K> {
    objects: Mutex<HashMap<Key, K>>,
}

impl<K> Default for Written<K> {
    fn default() -> Self {
        Self {
            objects: Mutex::new(HashMap::new()),
        }
    }
}

fn version<K: Resource>(object: &K) -> Option<u64> {
    number(object.meta())
}

fn number(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

/// Whether `a` is a later version of the object `b` is: the same uid, a higher version. A
/// version that is not a number is never later.
pub fn later(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.uid.is_some()
        && a.uid == b.uid
        && matches!((number(a), number(b)), (Some(x), Some(y)) if x > y)
}

impl<K: Object + Clone> Written<K> {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, K>> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `object` as the server returned it from a write.
    pub fn record(&self, object: &K) {
        if version(object).is_none() {
            return;
        }
        let mut objects = self.lock();
        let key = key_of(object);
        // Two workers may write one object; the later version wins.
        if objects
            .get(&key)
            .is_none_or(|known| version(known) < version(object))
        {
            objects.insert(key, object.clone());
        }
    }

    /// Forgets what the cache has caught up with; a subscription calls this for every change.
    pub fn observe(&self, change: &Change<K>) {
        let current = change.object();
        let key = key_of(current.object());
        let mut objects = self.lock();
        let Some(known) = objects.get(&key) else {
            return;
        };
        if matches!(change, Change::Deleted(_)) || version(current.object()) >= version(known) {
            objects.remove(&key);
        }
    }

    /// `cached` with every object replaced by this controller's later write of it, if any, and
    /// with the objects it created that the cache has yet to show and that `belongs` claims (a
    /// Deployment's second quick template change must count the ReplicaSet its first one created
    /// an instant before).
    pub fn fresher(&self, cached: Vec<K>, belongs: impl Fn(&K) -> bool) -> Vec<K> {
        let mut objects = self.lock();
        if objects.is_empty() {
            return cached;
        }
        let listed: std::collections::HashSet<Key> = cached.iter().map(key_of).collect();
        let unlisted: Vec<K> = objects
            .iter()
            .filter(|(key, object)| !listed.contains(*key) && belongs(object))
            .map(|(_, object)| object.clone())
            .collect();
        cached
            .into_iter()
            .map(|object| {
                let key = key_of(&object);
                match objects.get(&key) {
                    Some(known) if version(known) > version(&object) => known.clone(),
                    Some(_) => {
                        objects.remove(&key);
                        object
                    }
                    None => object,
                }
            })
            .chain(unlisted)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use informer::Cached;
    use k8s_openapi::{
        api::apps::v1::{ReplicaSet, ReplicaSetSpec},
        apimachinery::pkg::apis::meta::v1::ObjectMeta,
    };

    fn rs(name: &str, version: &str, replicas: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn sizes(list: &[ReplicaSet]) -> Vec<i32> {
        list.iter()
            .map(|r| r.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0))
            .collect()
    }

    #[test]
    fn a_write_the_cache_has_not_shown_replaces_the_cached_copy() {
        let written = Written::default();
        written.record(&rs("v2", "12", 5));
        let list = written.fresher(vec![rs("v1", "9", 8), rs("v2", "10", 3)], |_| true);
        assert_eq!(sizes(&list), vec![8, 5]);
    }

    #[test]
    fn a_cache_that_caught_up_wins_and_the_write_is_forgotten() {
        let written = Written::default();
        written.record(&rs("v2", "12", 5));
        // The ReplicaSet controller wrote status after our scale: the cache's copy is newer.
        let list = written.fresher(vec![rs("v2", "14", 5)], |_| true);
        assert_eq!(list[0].metadata.resource_version.as_deref(), Some("14"));
        let list = written.fresher(vec![rs("v2", "10", 3)], |_| true);
        assert_eq!(sizes(&list), vec![3], "the write was forgotten once seen");
    }

    #[test]
    fn the_watch_delivering_the_write_or_a_deletion_forgets_it() {
        let written = Written::default();
        written.record(&rs("v2", "12", 5));
        written.observe(&Change::Updated {
            old: Cached::shared(rs("v2", "10", 3)),
            new: Cached::shared(rs("v2", "11", 3)),
        });
        assert_eq!(
            sizes(&written.fresher(vec![rs("v2", "11", 3)], |_| true)),
            vec![5]
        );
        written.observe(&Change::Deleted(Cached::shared(rs("v2", "11", 3))));
        assert_eq!(
            sizes(&written.fresher(vec![rs("v2", "11", 3)], |_| true)),
            vec![3]
        );
    }

    #[test]
    fn a_created_object_the_cache_has_not_listed_is_added_when_it_belongs() {
        let written = Written::default();
        written.record(&rs("v3", "12", 2));
        let list = written.fresher(vec![rs("v1", "9", 6)], |_| true);
        assert_eq!(sizes(&list), vec![6, 2]);
        let list = written.fresher(vec![rs("v1", "9", 6)], |_| false);
        assert_eq!(sizes(&list), vec![6], "another owner's object is not added");
        written.observe(&Change::Added(Cached::shared(rs("v3", "12", 2))));
        let list = written.fresher(vec![rs("v1", "9", 6)], |_| true);
        assert_eq!(sizes(&list), vec![6], "once listed, the cache is in charge");
    }

    #[test]
    fn an_older_write_does_not_replace_a_later_one() {
        let written = Written::default();
        written.record(&rs("v2", "12", 5));
        written.record(&rs("v2", "11", 4));
        assert_eq!(
            sizes(&written.fresher(vec![rs("v2", "10", 3)], |_| true)),
            vec![5]
        );
    }

    #[test]
    fn versions_that_are_not_numbers_leave_the_cache_in_charge() {
        let written = Written::default();
        written.record(&rs("v2", "abc", 5));
        assert_eq!(
            sizes(&written.fresher(vec![rs("v2", "10", 3)], |_| true)),
            vec![3]
        );
    }
}
