//! The objects of one kind, indexed the ways the controllers ask: by namespace, by controller
//! uid ("the pods of this ReplicaSet"), orphans by namespace ("what this ReplicaSet could
//! adopt") and by node ("the pods on this node").
//!
//! Upstream's controllers list the namespace and filter on every sync; grouping by owner keeps a
//! sync proportional to the object's own children, which is what lets a 10,000-replica rollout be
//! bound by pod readiness rather than by its controller.

use crate::object::{Key, Object, Shared};
use api::pod::controller_of;
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

/// Keys are shared between the map and the indexes instead of copied into each.
type SharedKey = Arc<str>;
type Index = HashMap<Box<str>, HashSet<SharedKey>>;

struct Inner<K: Object> {
    objects: HashMap<SharedKey, Shared<K>>,
    by_namespace: Index,
    by_controller: Index,
    orphans: Index,
    by_node: Index,
}

impl<K: Object> Default for Inner<K> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            by_namespace: Index::new(),
            by_controller: Index::new(),
            orphans: Index::new(),
            by_node: Index::new(),
        }
    }
}

fn link(index: &mut Index, group: &str, key: &SharedKey) {
    match index.get_mut(group) {
        Some(set) => {
            set.insert(Arc::clone(key));
        }
        None => {
            index.insert(group.into(), HashSet::from([Arc::clone(key)]));
        }
    }
}

fn unlink(index: &mut Index, group: &str, key: &str) {
    if let Some(set) = index.get_mut(group) {
        set.remove(key);
        if set.is_empty() {
            index.remove(group);
        }
    }
}

impl<K: Object> Inner<K> {
    fn link(&mut self, key: &SharedKey, obj: &Shared<K>) {
        let meta = obj.meta();
        let ns = meta.namespace.as_deref().unwrap_or("");
        link(&mut self.by_namespace, ns, key);
        match controller_of(meta) {
            Some(r) => link(&mut self.by_controller, &r.uid, key),
            None => link(&mut self.orphans, ns, key),
        }
        if let Some(node) = K::node(obj.facts()) {
            link(&mut self.by_node, node, key);
        }
    }

    fn unlink(&mut self, key: &str, obj: &Shared<K>) {
        let meta = obj.meta();
        let ns = meta.namespace.as_deref().unwrap_or("");
        unlink(&mut self.by_namespace, ns, key);
        match controller_of(meta) {
            Some(r) => unlink(&mut self.by_controller, &r.uid, key),
            None => unlink(&mut self.orphans, ns, key),
        }
        if let Some(node) = K::node(obj.facts()) {
            unlink(&mut self.by_node, node, key);
        }
    }

    fn collect(&self, index: &Index, group: &str) -> Vec<Shared<K>> {
        index
            .get(group)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| self.objects.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The objects of one kind and their indexes; clones share them. Written only by the kind's
/// watch ([`crate::Informer`]); read by everyone.
pub struct Store<K: Object> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K: Object> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: Object> Default for Store<K> {
    fn default() -> Self {
        Self {
            inner: Arc::new(RwLock::new(Inner::default())),
        }
    }
}

impl<K: Object> Store<K> {
    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        // Every write completes before anything can panic: a poisoned store is consistent.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `obj` under its key, returning the version it replaces.
    pub(crate) fn apply(&self, obj: Shared<K>) -> Option<Shared<K>> {
        let key: SharedKey = obj.key().into();
        let mut inner = self.write();
        let old = inner.objects.remove(&key);
        if let Some(old) = &old {
            inner.unlink(&key, old);
        }
        inner.link(&key, &obj);
        inner.objects.insert(key, obj);
        old
    }

    /// Forgets the object under `key`, returning it.
    pub(crate) fn remove(&self, key: &str) -> Option<Shared<K>> {
        let mut inner = self.write();
        let old = inner.objects.remove(key)?;
        inner.unlink(key, &old);
        Some(old)
    }

    /// The object under `key` (`namespace/name`, or `name` for a cluster-scoped kind).
    pub fn get(&self, key: &str) -> Option<Shared<K>> {
        self.read().objects.get(key).cloned()
    }

    /// Every object.
    pub fn list(&self) -> Vec<Shared<K>> {
        self.read().objects.values().cloned().collect()
    }

    /// Every key.
    pub fn keys(&self) -> Vec<Key> {
        self.read().objects.keys().map(|k| k.to_string()).collect()
    }

    /// The objects in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Shared<K>> {
        let inner = self.read();
        inner.collect(&inner.by_namespace, namespace)
    }

    /// The objects whose controller reference names `uid`.
    pub fn controlled_by(&self, uid: &str) -> Vec<Shared<K>> {
        let inner = self.read();
        inner.collect(&inner.by_controller, uid)
    }

    /// The objects in `namespace` without a controller reference.
    pub fn orphans(&self, namespace: &str) -> Vec<Shared<K>> {
        let inner = self.read();
        inner.collect(&inner.orphans, namespace)
    }

    /// The objects on `node` (pods bound to it).
    pub fn on_node(&self, node: &str) -> Vec<Shared<K>> {
        let inner = self.read();
        inner.collect(&inner.by_node, node)
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::object::Cached;
    use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::OwnerReference};
    use kube::ResourceExt;

    fn pod(name: &str, owner: Option<&str>, node: Option<&str>) -> Shared<Pod> {
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
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: node.map(str::to_string),
            ..Default::default()
        });
        Cached::shared(p)
    }

    fn names(pods: Vec<Shared<Pod>>) -> Vec<String> {
        let mut v: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
        v.sort();
        v
    }

    #[test]
    fn indexes_follow_ownership_and_binding() {
        let s = Store::default();
        assert!(s.apply(pod("a", Some("rs1"), None)).is_none());
        s.apply(pod("b", None, Some("n1")));
        assert_eq!(names(s.controlled_by("rs1")), ["a"]);
        assert_eq!(names(s.orphans("ns")), ["b"]);
        assert_eq!(names(s.on_node("n1")), ["b"]);
        // Adoption moves b under rs1, a release moves a to the orphans, a binding moves a.
        assert!(s.apply(pod("b", Some("rs1"), Some("n1"))).is_some());
        s.apply(pod("a", None, Some("n2")));
        assert_eq!(names(s.controlled_by("rs1")), ["b"]);
        assert_eq!(names(s.orphans("ns")), ["a"]);
        assert_eq!(names(s.on_node("n2")), ["a"]);
        assert_eq!(names(s.in_namespace("ns")), ["a", "b"]);
        assert!(s.remove("ns/b").is_some());
        assert!(s.controlled_by("rs1").is_empty());
        assert!(s.on_node("n1").is_empty());
        assert_eq!(s.len(), 1);
        assert_eq!(s.keys(), ["ns/a"]);
    }
}
