//! What the cache holds: each object decoded once, shared as [`Shared<K>`], with the facts the
//! controllers decide on derived once per event ([`Object::Facts`]) rather than once per sync.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet},
    batch::v1::{CronJob, Job},
    coordination::v1::Lease,
    core::v1::{
        Endpoints, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
        ReplicationController, Service, ServiceAccount,
    },
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
    storage::v1::StorageClass,
};
use kube::{
    Resource,
    api::{DynamicObject, PartialObjectMeta},
};
use serde::de::DeserializeOwned;
use std::{fmt::Debug, ops::Deref, sync::Arc};

/// `namespace/name` (or `name` for a cluster-scoped object): the key of the cache, of work queues
/// and of expectations (upstream's `MetaNamespaceKeyFunc`).
pub type Key = String;

/// The key of `namespace`/`name`.
pub fn key(namespace: &str, name: &str) -> Key {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// The key of an object.
pub fn key_of<K: Resource>(obj: &K) -> Key {
    key(
        obj.meta().namespace.as_deref().unwrap_or(""),
        obj.meta().name.as_deref().unwrap_or(""),
    )
}

/// Splits a key into namespace and name.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// A kind the cache can hold.
pub trait Object: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static {
    /// What is derived from an object once per watch event.
    type Facts: Debug + Send + Sync + 'static;

    /// Derives the facts of this version of the object.
    fn facts(&self) -> Self::Facts;

    /// The node the object is on, for the by-node index (pods).
    fn node(_facts: &Self::Facts) -> Option<&str> {
        None
    }
}

/// One version of an object as the cache holds it; dereferences to the object.
#[derive(Debug)]
pub struct Cached<K: Object> {
    object: K,
    facts: K::Facts,
}

/// How every reader of the cache receives an object: shared, never copied.
pub type Shared<K> = Arc<Cached<K>>;

impl<K: Object> Cached<K> {
    /// Wraps `object`, deriving its facts.
    pub fn new(object: K) -> Self {
        let facts = object.facts();
        Self { object, facts }
    }

    /// A shared version of `object` (e.g. the response of a write, before the watch shows it).
    pub fn shared(object: K) -> Shared<K> {
        Arc::new(Self::new(object))
    }

    /// The object.
    pub fn object(&self) -> &K {
        &self.object
    }

    /// What was derived from it.
    pub fn facts(&self) -> &K::Facts {
        &self.facts
    }

    /// The key of the object.
    pub fn key(&self) -> Key {
        key_of(&self.object)
    }
}

impl<K: Object> Deref for Cached<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.object
    }
}

/// What every workload controller asks of a pod, derived once per event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// `spec.nodeName`, if bound.
    pub node: Option<String>,
    /// When `Ready` last became True, if it is True.
    pub ready_since: Option<Timestamp>,
    /// Not terminal and not being deleted (upstream's `IsPodActive`).
    pub active: bool,
    /// `Succeeded` or `Failed`.
    pub terminal: bool,
    /// `Running`.
    pub running: bool,
    /// A container still runs another image than its spec asks for (an in-place update the
    /// kubelet has not carried out yet: [`api::pod::restarting_in_place`]).
    pub restarting_in_place: bool,
    /// Being deleted.
    pub deleting: bool,
    /// The `pod-template-hash` label (Deployments' revisions).
    pub template_hash: Option<String>,
    /// The `controller-revision-hash` label (DaemonSets' and StatefulSets' revisions).
    pub revision_hash: Option<String>,
}

impl PodFacts {
    /// Whether `Ready` is True.
    pub fn is_ready(&self) -> bool {
        self.ready_since.is_some()
    }

    /// How long until the pod is available (ready for `min_ready_seconds`): zero if it is now,
    /// `None` if it is not ready (as [`api::pod::until_available`]).
    pub fn until_available(
        &self,
        min_ready_seconds: i32,
        now: Timestamp,
    ) -> Option<SignedDuration> {
        let since = self.ready_since?;
        if min_ready_seconds <= 0 {
            return Some(SignedDuration::ZERO);
        }
        let at = since + SignedDuration::from_secs(i64::from(min_ready_seconds));
        Some(if at <= now {
            SignedDuration::ZERO
        } else {
            now.duration_until(at)
        })
    }

    /// Whether the pod is available at `now`.
    pub fn is_available(&self, min_ready_seconds: i32, now: Timestamp) -> bool {
        self.until_available(min_ready_seconds, now)
            .is_some_and(|d| d.is_zero())
    }
}

impl Object for Pod {
    type Facts = PodFacts;

    fn facts(&self) -> PodFacts {
        let label = |name: &str| {
            self.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(name))
                .cloned()
        };
        let phase = api::pod::phase(self);
        let terminal = matches!(phase, "Succeeded" | "Failed");
        let deleting = self.metadata.deletion_timestamp.is_some();
        PodFacts {
            node: self
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            ready_since: api::pod::ready_since(self),
            active: !terminal && !deleting,
            terminal,
            running: phase == "Running",
            restarting_in_place: api::pod::restarting_in_place(self),
            deleting,
            template_hash: label("pod-template-hash"),
            revision_hash: label("controller-revision-hash"),
        }
    }

    fn node(facts: &PodFacts) -> Option<&str> {
        facts.node.as_deref()
    }
}

/// Kinds with nothing to derive.
macro_rules! plain_objects {
    ($($kind:ty),* $(,)?) => {
        $(impl Object for $kind {
            type Facts = ();
            fn facts(&self) {}
        })*
    };
}

plain_objects!(
    Node,
    Namespace,
    Lease,
    ReplicaSet,
    Deployment,
    DaemonSet,
    StatefulSet,
    ControllerRevision,
    PersistentVolumeClaim,
    PersistentVolume,
    ServiceAccount,
    StorageClass,
    Job,
    CronJob,
    Service,
    Endpoints,
    EndpointSlice,
    PodDisruptionBudget,
    ReplicationController,
    DynamicObject,
    // Metadata-only watches ([`crate::Informers::metadata`]).
    PartialObjectMeta<DynamicObject>,
);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_facts_follow_the_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns",
                         "labels": {"pod-template-hash": "abc"}},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        let f = pod.facts();
        assert_eq!(f.node.as_deref(), Some("n1"));
        assert!(f.active && !f.terminal && !f.deleting);
        assert_eq!(f.template_hash.as_deref(), Some("abc"));
        assert_eq!(f.revision_hash, None);
        let since: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(f.ready_since, Some(since));
        let now = since + SignedDuration::from_secs(5);
        assert!(f.is_available(5, now));
        assert!(!f.is_available(6, now));
        assert_eq!(
            f.until_available(6, now),
            Some(SignedDuration::from_secs(1))
        );
    }

    #[test]
    fn keys_split_back() {
        assert_eq!(key("ns", "a"), "ns/a");
        assert_eq!(key("", "node"), "node");
        assert_eq!(split_key("ns/a"), ("ns", "a"));
        assert_eq!(split_key("node"), ("", "node"));
    }
}
