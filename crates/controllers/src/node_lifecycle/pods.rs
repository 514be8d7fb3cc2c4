//! The pods the node lifecycle controller needs, indexed by node: only what eviction and readiness
//! read (uid, version, node, tolerations, whether it is going, Ready or finished), so 100,000 pods
//! cost little memory and a tainted or silent node finds its pods without scanning the others.

use k8s_openapi::api::core::v1::{Pod, Toleration};
use std::{
    collections::{HashMap, HashSet},
    fmt,
};

/// A pod's `namespace/name`: the key of the eviction and readiness queues.
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

/// What eviction and readiness read of a bound pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    /// The uid, the precondition of its deletion.
    pub uid: Option<String>,
    /// The `resourceVersion` observed: marking the pod NotReady is conditional on it, so a pod
    /// that changed since is looked at again rather than marked on stale knowledge.
    pub resource_version: Option<String>,
    /// `spec.nodeName`.
    pub node: String,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// Whether it has a `deletionTimestamp` (then there is nothing left to evict).
    pub deleting: bool,
    /// Whether its `Ready` condition is `True` (only such a pod has readiness to lose).
    pub ready: bool,
    /// Whether it has finished (`Succeeded` or `Failed`): never marked NotReady.
    pub terminal: bool,
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
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let terminal = matches!(
            status.and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let info = PodInfo {
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            node,
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            ready,
            terminal,
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

    /// Records a pod and tells whether it just landed on its node (see
    /// [`super::readiness::landed`]), in one look-up.
    pub fn upsert_landed(&mut self, key: PodKey, info: PodInfo) -> bool {
        let landed = super::readiness::landed(self.pods.get(&key), &info);
        self.upsert(key, info);
        landed
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
            resource_version: None,
            node: node.into(),
            tolerations: vec![],
            deleting: false,
            ready: false,
            terminal: false,
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
        assert_eq!((i.ready, i.terminal), (false, false));
    }

    #[test]
    fn readiness_and_completion_are_read_from_the_status() {
        let table = [
            ("Running", "True", true, false),
            ("Running", "False", false, false),
            ("Pending", "Unknown", false, false),
            ("Succeeded", "False", false, true),
            ("Failed", "True", true, true),
        ];
        for (phase, ready, want_ready, want_terminal) in table {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"},
                "spec": {"nodeName": "n", "containers": []},
                "status": {"phase": phase, "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": ready},
                ]},
            }))
            .unwrap();
            let (_, i) = PodInfo::of(&pod).unwrap();
            assert_eq!(
                (i.ready, i.terminal, i.resource_version.as_deref()),
                (want_ready, want_terminal, Some("7")),
                "{phase} {ready}"
            );
        }
    }

    #[test]
    fn a_pod_lands_once_per_node() {
        let mut ix = PodIndex::default();
        assert!(ix.upsert_landed(key("a"), info("n1")));
        assert!(!ix.upsert_landed(key("a"), info("n1")));
        assert!(ix.upsert_landed(key("a"), info("n2")));
        ix.remove(&key("a"));
        assert!(ix.upsert_landed(key("a"), info("n2")));
    }
}
