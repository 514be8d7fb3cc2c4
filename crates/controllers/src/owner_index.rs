//! An in-memory index of one kind, fed by a `kube::runtime` watcher and grouped the way the
//! workload controllers ask: by controller uid ("the pods of this ReplicaSet"), orphans by
//! namespace ("pods this ReplicaSet could adopt") and everything by namespace ("ReplicaSets
//! whose selector might match this orphan").
//!
//! Upstream's controllers list the whole namespace and filter on every sync; grouping by owner
//! keeps a sync proportional to the object's own children, which is what lets a
//! 10,000-replica rollout be bound by pod readiness rather than by the controller.
//!
//! [`Ingest`] turns watcher events into [`Change`]s (added / updated with the previous version /
//! deleted), which is what upstream's event handlers decide on (expectations are lowered on an
//! add or a delete, not on an update).

use api::pod::controller_of;
use kube::{Resource, ResourceExt, runtime::watcher};
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

/// `namespace/name`, the key of work queues and expectations (upstream's `MetaNamespaceKeyFunc`).
pub type Key = String;

/// The key of an object.
pub fn key_of<K: Resource>(obj: &K) -> Key {
    key(
        obj.meta().namespace.as_deref().unwrap_or(""),
        obj.meta().name.as_deref().unwrap_or(""),
    )
}

/// The key of `namespace`/`name`.
pub fn key(namespace: &str, name: &str) -> Key {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Splits a key into namespace and name.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// What a watch event changed.
#[derive(Clone, Debug)]
pub enum Change<K> {
    /// An object the index did not hold.
    Added(Arc<K>),
    /// A new version of an object the index held.
    Updated {
        /// The version held before.
        old: Arc<K>,
        /// The version held now.
        new: Arc<K>,
    },
    /// An object that is gone.
    Deleted(Arc<K>),
}

#[derive(Debug)]
struct Inner<K> {
    objects: HashMap<Key, Arc<K>>,
    by_controller: HashMap<String, HashSet<Key>>,
    orphans: HashMap<String, HashSet<Key>>,
    by_namespace: HashMap<String, HashSet<Key>>,
}

impl<K> Default for Inner<K> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            by_controller: HashMap::new(),
            orphans: HashMap::new(),
            by_namespace: HashMap::new(),
        }
    }
}

/// Objects of one kind, grouped by controller and namespace; clones share the index.
#[derive(Debug)]
pub struct OwnerIndex<K> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K> Clone for OwnerIndex<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> Default for OwnerIndex<K> {
    fn default() -> Self {
        Self {
            inner: Arc::new(RwLock::new(Inner::default())),
        }
    }
}

fn remove_from(map: &mut HashMap<String, HashSet<Key>>, group: &str, key: &str) {
    if let Some(set) = map.get_mut(group) {
        set.remove(key);
        if set.is_empty() {
            map.remove(group);
        }
    }
}

impl<K: Resource> OwnerIndex<K> {
    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        // Every write completes before it can panic; a poisoned index is consistent.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `obj`, returning the version it replaces.
    pub fn apply(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let k = key_of(obj.as_ref());
        let ns = obj.meta().namespace.clone().unwrap_or_default();
        let mut inner = self.write();
        let old = inner.objects.remove(&k);
        if let Some(old) = &old {
            Self::unlink(&mut inner, old.as_ref(), &k);
        }
        match controller_of(obj.meta()).map(|r| r.uid.clone()) {
            Some(uid) => inner
                .by_controller
                .entry(uid)
                .or_default()
                .insert(k.clone()),
            None => inner
                .orphans
                .entry(ns.clone())
                .or_default()
                .insert(k.clone()),
        };
        inner.by_namespace.entry(ns).or_default().insert(k.clone());
        inner.objects.insert(k, obj);
        old
    }

    /// Forgets the object under `key`, returning it.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.write();
        let old = inner.objects.remove(key)?;
        Self::unlink(&mut inner, old.as_ref(), key);
        Some(old)
    }

    fn unlink(inner: &mut Inner<K>, old: &K, key: &str) {
        let ns = old.meta().namespace.as_deref().unwrap_or("");
        match controller_of(old.meta()) {
            Some(r) => remove_from(&mut inner.by_controller, &r.uid, key),
            None => remove_from(&mut inner.orphans, ns, key),
        }
        remove_from(&mut inner.by_namespace, ns, key);
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().objects.get(key).cloned()
    }

    /// The objects whose controller reference names `uid`.
    pub fn controlled_by(&self, uid: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        Self::collect(&inner, inner.by_controller.get(uid))
    }

    /// The objects in `namespace` without a controller reference.
    pub fn orphans(&self, namespace: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        Self::collect(&inner, inner.orphans.get(namespace))
    }

    /// Every object in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        Self::collect(&inner, inner.by_namespace.get(namespace))
    }

    /// Every key held.
    pub fn keys(&self) -> Vec<Key> {
        self.read().objects.keys().cloned().collect()
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn collect(inner: &Inner<K>, keys: Option<&HashSet<Key>>) -> Vec<Arc<K>> {
        keys.map(|ks| {
            ks.iter()
                .filter_map(|k| inner.objects.get(k).cloned())
                .collect()
        })
        .unwrap_or_default()
    }
}

/// Applies one watch's events to an [`OwnerIndex`], relists included: objects missing from a
/// relist come out as [`Change::Deleted`], as an informer's replace does.
#[derive(Debug)]
pub struct Ingest<K> {
    index: OwnerIndex<K>,
    listing: Option<HashSet<Key>>,
    synced: bool,
}

impl<K: Resource + Clone> Ingest<K> {
    /// Feeds `index`.
    pub fn new(index: OwnerIndex<K>) -> Self {
        Self {
            index,
            listing: None,
            synced: false,
        }
    }

    /// Whether the first list has completed (upstream's `HasSynced`).
    pub fn synced(&self) -> bool {
        self.synced
    }

    fn upsert(&mut self, obj: K) -> Change<K> {
        let new = Arc::new(obj);
        match self.index.apply(Arc::clone(&new)) {
            Some(old) => Change::Updated { old, new },
            None => Change::Added(new),
        }
    }

    /// Applies `event`, returning what changed.
    pub fn handle(&mut self, event: watcher::Event<K>) -> Vec<Change<K>> {
        match event {
            watcher::Event::Init => {
                self.listing = Some(HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                if let Some(seen) = self.listing.as_mut() {
                    seen.insert(key_of(&obj));
                }
                vec![self.upsert(obj)]
            }
            watcher::Event::InitDone => {
                self.synced = true;
                let Some(seen) = self.listing.take() else {
                    return Vec::new();
                };
                self.index
                    .keys()
                    .into_iter()
                    .filter(|k| !seen.contains(k))
                    .filter_map(|k| self.index.remove(&k))
                    .map(Change::Deleted)
                    .collect()
            }
            watcher::Event::Apply(obj) => vec![self.upsert(obj)],
            watcher::Event::Delete(obj) => {
                let k = key_of(&obj);
                match self.index.remove(&k) {
                    Some(old) => vec![Change::Deleted(old)],
                    None => vec![Change::Deleted(Arc::new(obj))],
                }
            }
        }
    }
}

/// The namespace of an object (empty for cluster-scoped ones).
pub fn namespace_of<K: Resource>(obj: &K) -> String {
    obj.namespace().unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::OwnerReference};

    fn pod(name: &str, owner: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.owner_references = owner.map(|uid| {
            vec![OwnerReference {
                uid: uid.into(),
                controller: Some(true),
                ..Default::default()
            }]
        });
        p
    }

    fn names(pods: Vec<Arc<Pod>>) -> Vec<String> {
        let mut v: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
        v.sort();
        v
    }

    #[test]
    fn groups_follow_ownership_changes() {
        let idx = OwnerIndex::default();
        let mut ingest = Ingest::new(idx.clone());
        let changes = ingest.handle(watcher::Event::Apply(pod("a", Some("rs1"))));
        assert!(matches!(changes.as_slice(), [Change::Added(_)]));
        ingest.handle(watcher::Event::Apply(pod("b", None)));
        assert_eq!(names(idx.controlled_by("rs1")), ["a"]);
        assert_eq!(names(idx.orphans("ns")), ["b"]);
        // Adoption moves b under rs1; release moves a to the orphans.
        let changes = ingest.handle(watcher::Event::Apply(pod("b", Some("rs1"))));
        assert!(matches!(changes.as_slice(), [Change::Updated { .. }]));
        ingest.handle(watcher::Event::Apply(pod("a", None)));
        assert_eq!(names(idx.controlled_by("rs1")), ["b"]);
        assert_eq!(names(idx.orphans("ns")), ["a"]);
        assert_eq!(names(idx.in_namespace("ns")), ["a", "b"]);
        ingest.handle(watcher::Event::Delete(pod("b", Some("rs1"))));
        assert!(idx.controlled_by("rs1").is_empty());
        assert_eq!(idx.len(), 1);
    }

    #[test]
    fn a_relist_deletes_what_it_no_longer_lists() {
        let idx = OwnerIndex::default();
        let mut ingest = Ingest::new(idx.clone());
        for e in [
            watcher::Event::Init,
            watcher::Event::InitApply(pod("a", None)),
            watcher::Event::InitApply(pod("b", None)),
            watcher::Event::InitDone,
        ] {
            ingest.handle(e);
        }
        assert!(ingest.synced());
        ingest.handle(watcher::Event::Init);
        ingest.handle(watcher::Event::InitApply(pod("b", None)));
        let gone = ingest.handle(watcher::Event::InitDone);
        assert!(matches!(gone.as_slice(), [Change::Deleted(p)] if p.name_any() == "a"));
        assert_eq!(names(idx.in_namespace("ns")), ["b"]);
    }
}
