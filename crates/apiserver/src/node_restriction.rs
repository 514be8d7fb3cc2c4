//! Upstream's NodeRestriction admission plugin (`plugin/pkg/admission/noderestriction/admission.go`,
//! v1.28): a kubelet's credentials (`system:node:NAME` in `system:nodes`) may write only what
//! its node needs. The Node authorizer (`authz::node`) already decides which objects a node may
//! read and which verbs it may use; it cannot see the object written, so without this plugin a
//! node could create a pod bound to itself that names any Secret or ServiceAccount (and then
//! read them through the authorizer's graph), change another node, taint or relabel itself, or
//! delete another node's pods. Each refusal carries upstream's message, so a kubelet's logs read
//! the same against rollwright as against a real cluster.
//!
//! What a node may do, as upstream decides it:
//! - pods: create only mirror pods bound to itself, owned by its Node and naming no Secret,
//!   ConfigMap, PersistentVolumeClaim or ServiceAccount; delete only pods bound to itself;
//!   update only the status of pods bound to itself (not their labels nor their resource claim
//!   statuses); evict only pods bound to itself;
//! - nodes: create, update and delete only its own Node; never set a `configSource`, change its
//!   taints after registering, or set labels outside the kubelet's set (`isKubernetesLabel` and
//!   `IsKubeletLabel`);
//! - PersistentVolumeClaims: change only `status.capacity` and `status.conditions`;
//! - ServiceAccount tokens: only bound to a pod (by name and uid) that runs on itself;
//! - Leases in `kube-node-lease` and CSINodes: only its own.

use crate::{
    error::{ApiError, ApiResult},
    object,
    plugins::{Operation, Plugin, Review},
    state::ApiServer,
};
use authz::node::{MIRROR_POD_ANNOTATION, node_identity, visit_config_maps, visit_secrets};
use serde_json::{Map, Value};
use std::{collections::BTreeSet, sync::Arc};

/// The namespace of node Leases (upstream's `api.NamespaceNodeLease`).
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Labels under this namespace are for administrators to steer workloads to nodes they trust
/// (upstream's `LabelNamespaceNodeRestriction`): a node may never set them on itself.
const NODE_RESTRICTION_LABEL_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// The `kubernetes.io` and `k8s.io` labels a kubelet may set on its own Node (upstream's
/// `kubeletLabels` in `k8s.io/kubelet/pkg/apis/well_known_labels.go`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// The label namespaces (and their subdomains) a kubelet may use freely (upstream's
/// `kubeletLabelNamespaces`).
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Why the plugin refuses a write.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum Refusal {
    /// Upstream's `admission.NewForbidden`: `pods "x" is forbidden: <why>`.
    #[error("{0}")]
    Forbidden(String),
    /// An object the decision needs is missing: upstream returns its lister's NotFound, which
    /// names the resource in the singular (`pod "x" not found`).
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// `pod` or `node`.
        resource: &'static str,
        /// The missing object's name.
        name: String,
    },
}

fn forbid(why: impl Into<String>) -> Result<(), Refusal> {
    Err(Refusal::Forbidden(why.into()))
}

/// What the decisions look up in the cluster (upstream's pod and node listers); the server
/// answers from its watch cache, which its callers have brought up to date.
trait Cluster {
    /// The pod `namespace/name`, as JSON (shared: the server's own writes are kept parsed, and a
    /// kubelet's token request reads the pod it just wrote).
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Value>>;
    /// The uid of Node `name`.
    fn node_uid(&self, name: &str) -> Option<String>;
}

impl Cluster for ApiServer {
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let def = self.registry().find("", "v1", "pods")?;
        let entry = self.cache.get(&def, Some(namespace), name)?;
        Some(self.cache.parsed(&def.key(Some(namespace), name), &entry))
    }

    fn node_uid(&self, name: &str) -> Option<String> {
        let def = self.registry().find("", "v1", "nodes")?;
        let node = self.cache.get(&def, None, name)?.value();
        Some(
            object::meta_str(&node, "uid")
                .unwrap_or_default()
                .to_string(),
        )
    }
}

/// The NodeRestriction plugin. Upstream implements only `Admit`, so it refuses in the mutating
/// phase, after ServiceAccount (which leaves mirror pods alone) and before the rest.
pub(crate) struct NodeRestriction;

#[async_trait::async_trait]
impl Plugin for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    /// Upstream's handler takes CREATE, UPDATE and DELETE of anything; only nodes are restricted.
    fn handles(&self, review: &Review<'_>) -> bool {
        node_identity(review.user).is_some()
    }

    async fn admit(
        &self,
        server: &ApiServer,
        review: &Review<'_>,
        obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        let Some(node) = node_identity(review.user) else {
            return Ok(Vec::new());
        };
        decide(node, review, obj, server).map_err(|refusal| match refusal {
            Refusal::Forbidden(why) => {
                ApiError::forbidden_by_admission(review.kind, object_name(review, obj), &why)
            }
            Refusal::NotFound { resource, name } => ApiError::from_status(
                404,
                "NotFound",
                Refusal::NotFound {
                    resource,
                    name: name.clone(),
                }
                .to_string(),
                Some(serde_json::json!({"name": name, "kind": resource})),
            ),
        })?;
        Ok(Vec::new())
    }
}

/// The name upstream's admission attributes carry: on a create of the main resource, the
/// object's own (empty with `generateName`, where the review has the prefix), else the URL's.
fn object_name<'a>(review: &'a Review<'_>, obj: &'a Value) -> &'a str {
    if review.operation == Operation::Create && review.subresource.is_none() {
        object::name(obj)
    } else {
        review.name
    }
}

/// Upstream's `Admit` for a request of node `node`.
fn decide(
    node: &str,
    review: &Review<'_>,
    obj: &Value,
    cluster: &dyn Cluster,
) -> Result<(), Refusal> {
    if node.is_empty() {
        return forbid(format!(
            "could not determine node from user {}",
            quoted(&review.user.username)
        ));
    }
    let sub = review.subresource.unwrap_or_default();
    match (review.kind.group.as_str(), review.kind.plural.as_str()) {
        ("", "pods") => match sub {
            "" => admit_pod(node, review, obj, cluster),
            "status" => admit_pod_status(node, review, obj),
            "eviction" => admit_pod_eviction(node, review, obj, cluster),
            other => forbid(format!(
                "unexpected pod subresource {}, only 'status' and 'eviction' are allowed",
                quoted(other)
            )),
        },
        ("", "nodes") => admit_node(node, review, obj),
        ("", "persistentvolumeclaims") => match sub {
            "status" => admit_pvc_status(node, review, obj),
            _ => forbid("may only update PVC status"),
        },
        ("", "serviceaccounts") => admit_service_account(review, obj, node, cluster),
        ("coordination.k8s.io", "leases") => admit_lease(node, review, obj),
        ("storage.k8s.io", "csinodes") => admit_csi_node(node, review, obj),
        _ => Ok(()),
    }
}

/// Go's `%q` of a string.
fn quoted(s: &str) -> String {
    authz::quote(s)
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn node_name(pod: &Value) -> &str {
    str_at(pod, "/spec/nodeName")
}

/// Creating a mirror pod, or deleting a pod, bound to the node.
fn admit_pod(
    node: &str,
    review: &Review<'_>,
    obj: &Value,
    cluster: &dyn Cluster,
) -> Result<(), Refusal> {
    match review.operation {
        Operation::Create => admit_pod_create(node, obj, cluster),
        Operation::Delete => {
            // The write path admits a delete with the stored pod; a missing one is its 404.
            let existing = review.old.unwrap_or(obj);
            if node_name(existing) != node {
                return forbid(format!(
                    "node {} can only delete pods with spec.nodeName set to itself",
                    quoted(node)
                ));
            }
            Ok(())
        }
        Operation::Update => forbid(format!(
            "unexpected operation {}, node {} can only create and delete mirror pods",
            quoted(review.operation.as_str()),
            quoted(node)
        )),
    }
}

/// Upstream's `admitPodCreate`: a mirror pod of the node's own, owned by its Node, referring to
/// no other API object (the Node authorizer would otherwise open those to the node).
fn admit_pod_create(node: &str, pod: &Value, cluster: &dyn Cluster) -> Result<(), Refusal> {
    let q = quoted(node);
    let mirror = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD_ANNOTATION))
        .is_some();
    if !mirror {
        return forbid(format!(
            "pod does not have {} annotation, node {q} can only create mirror pods",
            quoted(MIRROR_POD_ANNOTATION)
        ));
    }
    if node_name(pod) != node {
        return forbid(format!(
            "node {q} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let owner = match owners {
        [] => {
            return forbid(format!(
                "node {q} can only create pods with an owner reference set to itself"
            ));
        }
        [owner] => owner,
        _ => {
            return forbid(format!(
                "node {q} can only create pods with a single owner reference set to itself"
            ));
        }
    };
    if str_at(owner, "/apiVersion") != "v1"
        || str_at(owner, "/kind") != "Node"
        || str_at(owner, "/name") != node
    {
        return forbid(format!(
            "node {q} can only create pods with an owner reference set to itself"
        ));
    }
    if owner.get("controller").and_then(Value::as_bool) != Some(true) {
        return forbid(format!(
            "node {q} can only create pods with a controller owner reference set to itself"
        ));
    }
    if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
        return forbid(format!(
            "node {q} must not set blockOwnerDeletion on an owner reference"
        ));
    }
    let Some(uid) = cluster.node_uid(node) else {
        return Err(Refusal::NotFound {
            resource: "node",
            name: node.to_string(),
        });
    };
    let owner_uid = str_at(owner, "/uid");
    if owner_uid != uid {
        // Upstream's words, expected and got as it has them.
        return forbid(format!(
            "node {node} UID mismatch: expected {owner_uid} got {uid}"
        ));
    }
    if !str_at(pod, "/spec/serviceAccountName").is_empty() {
        return forbid(format!(
            "node {q} can not create pods that reference a service account"
        ));
    }
    let mut secrets = false;
    visit_secrets(pod, &mut |_| secrets = true);
    if secrets {
        return forbid(format!(
            "node {q} can not create pods that reference secrets"
        ));
    }
    let mut config_maps = false;
    visit_config_maps(pod, &mut |_| config_maps = true);
    if config_maps {
        return forbid(format!(
            "node {q} can not create pods that reference configmaps"
        ));
    }
    let volumes = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if volumes
        .iter()
        .any(|v| v.get("persistentVolumeClaim").is_some_and(|c| !c.is_null()))
    {
        return forbid(format!(
            "node {q} can not create pods that reference persistentvolumeclaims"
        ));
    }
    Ok(())
}

/// Upstream's `admitPodStatus`: the status of a pod bound to the node, and nothing the status
/// subresource could carry beside it (labels; the resource claims the scheduler recorded, which
/// open claims to the node through the authorizer's graph).
fn admit_pod_status(node: &str, review: &Review<'_>, pod: &Value) -> Result<(), Refusal> {
    let (Operation::Update, Some(old)) = (review.operation, review.old) else {
        return forbid(format!(
            "unexpected operation {}",
            quoted(review.operation.as_str())
        ));
    };
    let q = quoted(node);
    if node_name(old) != node {
        return forbid(format!(
            "node {q} can only update pod status for pods with spec.nodeName set to itself"
        ));
    }
    if labels(old) != labels(pod) {
        return forbid(format!("node {q} cannot update labels through pod status"));
    }
    if resource_claim_statuses(old) != resource_claim_statuses(pod) {
        // Upstream's spelling.
        return forbid(format!("node {q} cannot update resource claim statues"));
    }
    Ok(())
}

/// An object's labels; none and empty alike (upstream's `labels.Equals`).
fn labels(obj: &Value) -> Map<String, Value> {
    object::labels(obj)
}

/// The claim each entry of `status.resourceClaimStatuses` names (upstream's
/// `resourceClaimStatusesEqual` compares these, in order).
fn resource_claim_statuses(pod: &Value) -> Vec<(&str, Option<&str>)> {
    pod.pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            (
                str_at(s, "/name"),
                s.get("resourceClaimName").and_then(Value::as_str),
            )
        })
        .collect()
}

/// Upstream's `admitPodEviction`: only of a pod bound to the node.
fn admit_pod_eviction(
    node: &str,
    review: &Review<'_>,
    eviction: &Value,
    cluster: &dyn Cluster,
) -> Result<(), Refusal> {
    if review.operation != Operation::Create {
        return forbid(format!(
            "unexpected operation {}",
            review.operation.as_str()
        ));
    }
    // The name in the URL wins over the one in the Eviction.
    let pod_name = match (review.name, object::name(eviction)) {
        ("", "") => return forbid("could not determine pod from request data"),
        ("", name) | (name, _) => name,
    };
    let namespace = review.namespace.unwrap_or_default();
    let Some(pod) = cluster.pod(namespace, pod_name) else {
        return Err(Refusal::NotFound {
            resource: "pod",
            name: pod_name.to_string(),
        });
    };
    if node_name(&pod) != node {
        return forbid(format!(
            "node {node} can only evict pods with spec.nodeName set to itself"
        ));
    }
    Ok(())
}

/// Upstream's `admitPVCStatus` (with `RecoverVolumeExpansionFailure` off, as 1.28 has it): a
/// node reports a claim's capacity and conditions, and changes nothing else.
fn admit_pvc_status(node: &str, review: &Review<'_>, pvc: &Value) -> Result<(), Refusal> {
    let (Operation::Update, Some(old)) = (review.operation, review.old) else {
        return forbid(format!(
            "unexpected operation {}",
            quoted(review.operation.as_str())
        ));
    };
    let comparable = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
            status.remove("capacity");
            status.remove("conditions");
        }
        v
    };
    let (old, new) = (comparable(old), comparable(pvc));
    if old != new {
        let mut changed = Vec::new();
        differences(&old, &new, String::new(), &mut changed);
        return forbid(format!(
            "node {} is not allowed to update fields other than status.capacity and status.conditions: {}",
            quoted(node),
            changed.join(", ")
        ));
    }
    Ok(())
}

/// The paths where `a` and `b` differ (upstream prints a diff of the two objects).
fn differences(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                differences(
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    path,
                    out,
                );
            }
        }
        _ if a != b => out.push(at),
        _ => {}
    }
}

/// Upstream's `admitNode`: the node's own Node only, registered without a config source or
/// labels outside the kubelet's set, and later changed without touching its taints or those
/// labels.
fn admit_node(node: &str, review: &Review<'_>, obj: &Value) -> Result<(), Refusal> {
    let requested = object_name(review, obj);
    let q = quoted(node);
    if requested != node {
        return forbid(format!(
            "node {q} is not allowed to modify node {}",
            quoted(requested)
        ));
    }
    match (review.operation, review.old) {
        (Operation::Create, _) => {
            if config_source(obj).is_some() {
                // Upstream's words.
                return forbid(format!(
                    "node {q} is not allowed to create pods with a non-nil configSource"
                ));
            }
            let forbidden = forbidden_changes(&labels(obj), &Map::new());
            if !forbidden.is_empty() {
                return forbid(format!(
                    "node {q} is not allowed to set the following labels: {forbidden}"
                ));
            }
        }
        (Operation::Update, Some(old)) => {
            if let Some(source) = config_source(obj)
                && config_source(old) != Some(source)
            {
                return forbid(format!(
                    "node {q} is not allowed to update configSource to a new non-nil configSource"
                ));
            }
            if taints(obj) != taints(old) {
                return forbid(format!("node {q} is not allowed to modify taints"));
            }
            let forbidden = forbidden_changes(&labels(obj), &labels(old));
            if !forbidden.is_empty() {
                // Upstream's message starts so, without the node.
                return forbid(format!("is not allowed to modify labels: {forbidden}"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// A Node's `spec.configSource`, when set.
fn config_source(node: &Value) -> Option<&Value> {
    node.pointer("/spec/configSource").filter(|c| !c.is_null())
}

/// The label keys changed from `old` to `new` that a node may not change, sorted and joined
/// as upstream prints them.
fn forbidden_changes(new: &Map<String, Value>, old: &Map<String, Value>) -> String {
    forbidden_labels(&modified_labels(new, old))
        .into_iter()
        .collect::<Vec<_>>()
        .join(", ")
}

/// A Node's taints; none and an empty list alike (upstream's semantic equality).
fn taints(node: &Value) -> &[Value] {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Upstream's `getModifiedLabels`: the keys added, removed or changed between `a` and `b`.
fn modified_labels<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> BTreeSet<&'a str> {
    let one_way = |x: &'a Map<String, Value>, y: &'a Map<String, Value>| {
        x.iter()
            .filter(move |(k, v)| y.get(*k) != Some(*v))
            .map(|(k, _)| k.as_str())
    };
    one_way(a, b).chain(one_way(b, a)).collect()
}

/// The namespace of a label key: what comes before its `/` (upstream's `getLabelNamespace`).
fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or_default()
}

/// Whether `namespace` is `domain` or one of its subdomains.
fn in_domain(namespace: &str, domain: &str) -> bool {
    namespace == domain
        || namespace
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// Upstream's `isKubernetesLabel`: a key under `kubernetes.io` or `k8s.io`.
fn is_kubernetes_label(key: &str) -> bool {
    let ns = label_namespace(key);
    in_domain(ns, "kubernetes.io") || in_domain(ns, "k8s.io")
}

/// Upstream's `kubeletapis.IsKubeletLabel`: one of the kubelet's labels or namespaces.
fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|d| in_domain(label_namespace(key), d))
}

/// Upstream's `getForbiddenLabels`: of the modified keys, those a node may not set, sorted.
fn forbidden_labels<'a>(modified: &BTreeSet<&'a str>) -> BTreeSet<&'a str> {
    modified
        .iter()
        .copied()
        .filter(|key| {
            in_domain(label_namespace(key), NODE_RESTRICTION_LABEL_NAMESPACE)
                || (is_kubernetes_label(key) && !is_kubelet_label(key))
        })
        .collect()
}

/// Upstream's `admitServiceAccount`: a node's TokenRequest must be bound to a pod, by name and
/// uid, that runs on the node; so a node can mint tokens only for the pods it runs.
fn admit_service_account(
    review: &Review<'_>,
    request: &Value,
    node: &str,
    cluster: &dyn Cluster,
) -> Result<(), Refusal> {
    if review.operation != Operation::Create || review.subresource != Some("token") {
        return Ok(());
    }
    let bound = request
        .pointer("/spec/boundObjectRef")
        .filter(|r| !r.is_null());
    let Some(bound) = bound.filter(|r| {
        str_at(r, "/apiVersion") == "v1"
            && str_at(r, "/kind") == "Pod"
            && !str_at(r, "/name").is_empty()
    }) else {
        return forbid("node requested token not bound to a pod");
    };
    let uid = str_at(bound, "/uid");
    if uid.is_empty() {
        return forbid("node requested token with a pod binding without a uid");
    }
    let name = str_at(bound, "/name");
    let Some(pod) = cluster.pod(review.namespace.unwrap_or_default(), name) else {
        return Err(Refusal::NotFound {
            resource: "pod",
            name: name.to_string(),
        });
    };
    if object::meta_str(&pod, "uid").unwrap_or_default() != uid {
        return forbid(format!(
            "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
        ));
    }
    if node_name(&pod) != node {
        return forbid("node requested token bound to a pod scheduled on a different node");
    }
    Ok(())
}

/// Upstream's `admitLease`: only the node's own Lease, in `kube-node-lease`.
fn admit_lease(node: &str, review: &Review<'_>, obj: &Value) -> Result<(), Refusal> {
    if review.namespace != Some(NODE_LEASE_NAMESPACE) {
        return forbid(format!(
            "can only access leases in the {} system namespace",
            quoted(NODE_LEASE_NAMESPACE)
        ));
    }
    if object_name(review, obj) != node {
        return forbid("can only access node lease with the same name as the requesting node");
    }
    Ok(())
}

/// Upstream's `admitCSINode`: only the node's own CSINode.
fn admit_csi_node(node: &str, review: &Review<'_>, obj: &Value) -> Result<(), Refusal> {
    if object_name(review, obj) != node {
        return forbid("can only access CSINode with the same name as the requesting node");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fake;

    impl Cluster for Fake {
        fn pod(&self, _: &str, name: &str) -> Option<Arc<Value>> {
            match name {
                "mine" => Some(json!({"metadata": {"uid": "u1"}, "spec": {"nodeName": "n1"}})),
                "theirs" => Some(json!({"metadata": {"uid": "u2"}, "spec": {"nodeName": "n2"}})),
                _ => None,
            }
            .map(Arc::new)
        }

        fn node_uid(&self, name: &str) -> Option<String> {
            (name == "n1").then(|| "node-uid".to_string())
        }
    }

    fn mirror(extra: Value) -> Value {
        let mut pod = json!({
            "metadata": {
                "name": "static",
                "annotations": {"kubernetes.io/config.mirror": "hash"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                                     "uid": "node-uid", "controller": true}],
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        });
        json_patch::merge(&mut pod, &extra);
        pod
    }

    fn refusal(r: Result<(), Refusal>) -> String {
        match r {
            Err(Refusal::Forbidden(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_node_creates_only_its_own_mirror_pods_referring_to_nothing() {
        assert_eq!(admit_pod_create("n1", &mirror(json!({})), &Fake), Ok(()));
        let cases = [
            (
                json!({"metadata": {"annotations": null}}),
                "pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods",
            ),
            (
                json!({"spec": {"nodeName": "n2"}}),
                "node \"n1\" can only create pods with spec.nodeName set to itself",
            ),
            (
                json!({"metadata": {"ownerReferences": null}}),
                "node \"n1\" can only create pods with an owner reference set to itself",
            ),
            (
                json!({"metadata": {"ownerReferences": [{}, {}]}}),
                "node \"n1\" can only create pods with a single owner reference set to itself",
            ),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n2", "uid": "x", "controller": true}]}}),
                "node \"n1\" can only create pods with an owner reference set to itself",
            ),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid"}]}}),
                "node \"n1\" can only create pods with a controller owner reference set to itself",
            ),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid", "controller": true, "blockOwnerDeletion": true}]}}),
                "node \"n1\" must not set blockOwnerDeletion on an owner reference",
            ),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "old", "controller": true}]}}),
                "node n1 UID mismatch: expected old got node-uid",
            ),
            (
                json!({"spec": {"serviceAccountName": "admin"}}),
                "node \"n1\" can not create pods that reference a service account",
            ),
            (
                json!({"spec": {"volumes": [{"name": "s", "secret": {"secretName": "s"}}]}}),
                "node \"n1\" can not create pods that reference secrets",
            ),
            (
                json!({"spec": {"imagePullSecrets": [{"name": "pull"}]}}),
                "node \"n1\" can not create pods that reference secrets",
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "c"}}]}]}}),
                "node \"n1\" can not create pods that reference configmaps",
            ),
            (
                json!({"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}}),
                "node \"n1\" can not create pods that reference persistentvolumeclaims",
            ),
        ];
        for (change, want) in cases {
            let pod = mirror(change.clone());
            assert_eq!(
                refusal(admit_pod_create("n1", &pod, &Fake)),
                want,
                "{change}"
            );
        }
        assert_eq!(
            admit_pod_create(
                "n9",
                &mirror(
                    json!({"spec": {"nodeName": "n9"}, "metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n9", "uid": "u", "controller": true}]}})
                ),
                &Fake
            ),
            Err(Refusal::NotFound {
                resource: "node",
                name: "n9".into()
            })
        );
    }

    #[test]
    fn node_labels_follow_upstreams_kubelet_set() {
        for allowed in [
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "beta.kubernetes.io/arch",
            "kubelet.kubernetes.io/anything",
            "sub.node.kubernetes.io/anything",
            "example.com/role",
            "plain",
            "notkubernetes.io/x",
        ] {
            let set = BTreeSet::from([allowed]);
            assert!(forbidden_labels(&set).is_empty(), "{allowed}");
        }
        for refused in [
            "node-restriction.kubernetes.io/trusted",
            "a.node-restriction.kubernetes.io/trusted",
            "node-role.kubernetes.io/control-plane",
            "kubernetes.io/role",
            "k8s.io/x",
            "sub.k8s.io/x",
        ] {
            let set = BTreeSet::from([refused]);
            assert_eq!(forbidden_labels(&set), set, "{refused}");
        }
    }

    #[test]
    fn modified_labels_are_added_removed_and_changed_keys() {
        let a = json!({"same": "1", "changed": "1", "removed": "1"});
        let b = json!({"same": "1", "changed": "2", "added": "1"});
        let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
        assert_eq!(
            modified_labels(a, b),
            BTreeSet::from(["added", "changed", "removed"])
        );
    }

    #[test]
    fn pvc_status_differences_name_their_paths() {
        let mut out = Vec::new();
        differences(
            &json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}),
            &json!({"metadata": {"labels": {"a": "2"}}, "spec": {"x": 1}}),
            String::new(),
            &mut out,
        );
        assert_eq!(out, ["metadata.labels.a"]);
    }
}
