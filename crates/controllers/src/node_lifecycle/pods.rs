//! What eviction and readiness read of a bound pod (uid, version, node, tolerations, whether it
//! is going, Ready or finished), taken from the shared cache, which also finds a node's pods.

use k8s_openapi::api::core::v1::{Pod, Toleration};
use std::fmt;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bound_pods_have_info() {
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
}
