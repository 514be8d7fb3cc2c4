//! The pods the taint manager needs, indexed by node: only what eviction reads (uid, node,
//! tolerations, whether it is already going), so 100,000 pods cost little memory and a tainted
//! node finds its pods without scanning the others.

use k8s_openapi::api::core::v1::{Pod, Toleration};
use std::{
    collections::{HashMap, HashSet},
    fmt,
};

/// A pod's `namespace/name`: the key of the eviction queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What eviction reads of a bound pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    /// The uid, the precondition of its deletion.
    pub uid: Option<String>,
    /// `spec.nodeName`.
    pub node: String,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// Whether it has a `deletionTimestamp` (then there is nothing left to evict).
    pub deleting: bool,
}

impl PodInfo {
    /// The key and info of a pod bound to a node; `None` for an unbound pod.
    pub fn of(pod: &Pod) -> Option<(PodKey, PodInfo)> {
        let spec = pod.spec.as_ref()?;
        let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
        let key = PodKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone()?,
        };
        let info = PodInfo {
            uid: pod.metadata.uid.clone(),
            node,
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        };
        Some((key, info))
    }
}

/// Bound pods by key and by node.
#[derive(Default, Debug)]
pub struct PodIndex {
    pods: HashMap<PodKey, PodInfo>,
    by_node: HashMap<String, HashSet<PodKey>>,
}

impl PodIndex {
    /// Records a pod (replacing what was known of it).
    pub fn upsert(&mut self, key: PodKey, info: PodInfo) {
        self.remove(&key);
        self.by_node
            .entry(info.node.clone())
            .or_default()
            .insert(key.clone());
        self.pods.insert(key, info);
    }

    /// Forgets a pod.
    pub fn remove(&mut self, key: &PodKey) {
        if let Some(old) = self.pods.remove(key)
            && let Some(set) = self.by_node.get_mut(&old.node)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_node.remove(&old.node);
            }
        }
    }

    /// After a relist: forgets every pod the list did not contain.
    pub fn retain(&mut self, listed: &HashSet<PodKey>) {
        let stale: Vec<PodKey> = self
            .pods
            .keys()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for key in stale {
            self.remove(&key);
        }
    }

    /// The pod at `key`.
    pub fn get(&self, key: &PodKey) -> Option<&PodInfo> {
        self.pods.get(key)
    }

    /// The pods bound to `node`.
    pub fn on_node(&self, node: &str) -> Vec<PodKey> {
        self.by_node
            .get(node)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many pods are indexed.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// Whether no pod is indexed.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> PodKey {
        PodKey {
            namespace: "default".into(),
            name: n.into(),
        }
    }

    fn info(node: &str) -> PodInfo {
        PodInfo {
            uid: None,
            node: node.into(),
            tolerations: vec![],
            deleting: false,
        }
    }

    #[test]
    fn pods_are_found_by_node_and_move_with_their_binding() {
        let mut ix = PodIndex::default();
        ix.upsert(key("a"), info("n1"));
        ix.upsert(key("b"), info("n1"));
        ix.upsert(key("c"), info("n2"));
        let mut on1 = ix.on_node("n1");
        on1.sort();
        assert_eq!(on1, [key("a"), key("b")]);
        ix.upsert(key("a"), info("n2"));
        assert_eq!(ix.on_node("n1"), [key("b")]);
        assert_eq!(ix.on_node("n2").len(), 2);
        ix.remove(&key("b"));
        assert!(ix.on_node("n1").is_empty());
        ix.retain(&[key("c")].into());
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.on_node("n2"), [key("c")]);
    }

    #[test]
    fn only_bound_pods_are_indexed() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": [], "tolerations": [{"key": "k", "operator": "Exists"}]}
        }))
        .unwrap();
        assert_eq!(PodInfo::of(&pod), None);
        pod.spec.as_mut().unwrap().node_name = Some("n".into());
        let (k, i) = PodInfo::of(&pod).unwrap();
        assert_eq!(k.to_string(), "ns/p");
        assert_eq!(
            (i.node.as_str(), i.tolerations.len(), i.deleting),
            ("n", 1, false)
        );
    }
}
