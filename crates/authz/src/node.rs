//! Upstream's Node authorizer (`plugin/pkg/auth/authorizer/node/node_authorizer.go`): a kubelet
//! (user `system:node:NAME` in group `system:nodes`) may read the secrets, configmaps,
//! persistent volume claims and volumes, resource claims and volume attachments, and request
//! tokens of the service accounts, that pods bound to its node use; its own Lease and CSINode;
//! and otherwise what upstream's `NodeRules()` grant.
//!
//! Upstream keeps a graph of pods and what they reference; the relationships it records
//! (`graph.go` `AddPod`, `AddPV`, `AddVolumeAttachment`) are computed here from the pods a
//! [`NodeGraph`] reports, so the server only needs to find pods by node.

use crate::{Attributes, Decision, UserInfo, bootstrap, rbac::rules_allow};
use serde_json::Value;

/// The group of every node's credentials.
pub const NODES_GROUP: &str = "system:nodes";
/// The user name prefix of node credentials.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The namespace of node Leases.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Pods a kubelet mirrors from static manifests carry this (upstream's `MirrorPodAnnotationKey`);
/// the graph records only their node, and the NodeRestriction admission plugin lets a node
/// create no other pods.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What the Node authorizer needs to know of the cluster: the server answers from its cache.
pub trait NodeGraph {
    /// Whether `found` holds for a pod bound to `node` (`spec.nodeName`), as JSON, in `namespace`
    /// (all namespaces when empty). It stops at the first that does: a kubelet asks for a token
    /// (or a Secret, a ConfigMap) for every pod it starts, and decoding every pod on the node for
    /// each request was a twentieth of the control plane's CPU in a rollout.
    fn any_pod_on_node(
        &self,
        node: &str,
        namespace: &str,
        found: &mut dyn FnMut(&Value) -> bool,
    ) -> bool;
    /// The PersistentVolume `name`, as JSON.
    fn persistent_volume(&self, name: &str) -> Option<Value>;
    /// Every PersistentVolume, as JSON (for the secrets PVs reference).
    fn persistent_volumes(&self) -> Vec<Value>;
    /// The node a VolumeAttachment is for (`spec.nodeName`).
    fn volume_attachment_node(&self, name: &str) -> Option<String>;
}

/// Upstream's `NodeIdentity`: the node name of a node's credentials (possibly empty), `None` for
/// anyone else.
pub fn node_identity(user: &UserInfo) -> Option<&str> {
    let name = user.username.strip_prefix(NODE_USER_PREFIX)?;
    user.in_group(NODES_GROUP).then_some(name)
}

/// What kind of object a node asks for, as the graph's vertex types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vertex {
    Secret,
    ConfigMap,
    Pvc,
    Pv,
    ResourceClaim,
    VolumeAttachment,
    ServiceAccount,
}

/// The Node authorizer's decision: no opinion for anyone not a node.
pub fn authorize(graph: &dyn NodeGraph, attrs: &Attributes) -> Decision {
    let Some(node) = node_identity(&attrs.user) else {
        return Decision::NoOpinion(String::new());
    };
    if node.is_empty() {
        return Decision::NoOpinion(format!(
            "unknown node for user {}",
            crate::quote(&attrs.user.username)
        ));
    }
    if attrs.resource_request {
        match (attrs.api_group.as_str(), attrs.resource.as_str()) {
            ("", "secrets") => return read_namespaced(graph, node, Vertex::Secret, attrs),
            ("", "configmaps") => return read_namespaced(graph, node, Vertex::ConfigMap, attrs),
            ("", "persistentvolumeclaims") => {
                if attrs.subresource == "status" {
                    return status_update(graph, node, Vertex::Pvc, attrs);
                }
                return get(graph, node, Vertex::Pvc, attrs);
            }
            ("", "persistentvolumes") => return get(graph, node, Vertex::Pv, attrs),
            ("resource.k8s.io", "resourceclaims") => {
                return get(graph, node, Vertex::ResourceClaim, attrs);
            }
            ("storage.k8s.io", "volumeattachments") => {
                return get(graph, node, Vertex::VolumeAttachment, attrs);
            }
            ("", "serviceaccounts") => return create_token(graph, node, attrs),
            ("coordination.k8s.io", "leases") => return lease(node, attrs),
            ("storage.k8s.io", "csinodes") => return csi_node(node, attrs),
            _ => {}
        }
    }
    if rules_allow(attrs, bootstrap::node_rules()) {
        Decision::Allow(String::new())
    } else {
        Decision::NoOpinion(String::new())
    }
}

fn no(reason: &str) -> Decision {
    Decision::NoOpinion(reason.to_string())
}

fn status_update(graph: &dyn NodeGraph, node: &str, v: Vertex, attrs: &Attributes) -> Decision {
    if !matches!(attrs.verb.as_str(), "update" | "patch") {
        return no("can only get/update/patch this type");
    }
    if attrs.subresource != "status" {
        return no("can only update status subresource");
    }
    related(graph, node, v, attrs)
}

fn get(graph: &dyn NodeGraph, node: &str, v: Vertex, attrs: &Attributes) -> Decision {
    if attrs.verb != "get" {
        return no("can only get individual resources of this type");
    }
    if !attrs.subresource.is_empty() {
        return no("cannot get subresource");
    }
    related(graph, node, v, attrs)
}

fn read_namespaced(graph: &dyn NodeGraph, node: &str, v: Vertex, attrs: &Attributes) -> Decision {
    if !matches!(attrs.verb.as_str(), "get" | "list" | "watch") {
        return no("can only read resources of this type");
    }
    if !attrs.subresource.is_empty() {
        return no("cannot read subresource");
    }
    if attrs.namespace.is_empty() {
        return no("can only read namespaced object of this type");
    }
    related(graph, node, v, attrs)
}

fn related(graph: &dyn NodeGraph, node: &str, v: Vertex, attrs: &Attributes) -> Decision {
    if attrs.name.is_empty() {
        return no("No Object name found");
    }
    path_decision(graph, node, v, attrs)
}

fn path_decision(graph: &dyn NodeGraph, node: &str, v: Vertex, attrs: &Attributes) -> Decision {
    if has_path(graph, node, v, &attrs.namespace, &attrs.name) {
        Decision::Allow(String::new())
    } else {
        Decision::NoOpinion(format!(
            "no relationship found between node '{node}' and this object"
        ))
    }
}

fn create_token(graph: &dyn NodeGraph, node: &str, attrs: &Attributes) -> Decision {
    if attrs.verb != "create" || attrs.name.is_empty() {
        return no("can only create tokens for individual service accounts");
    }
    if attrs.subresource != "token" {
        return no("can only create token subresource of serviceaccount");
    }
    path_decision(graph, node, Vertex::ServiceAccount, attrs)
}

fn lease(node: &str, attrs: &Attributes) -> Decision {
    if !matches!(
        attrs.verb.as_str(),
        "get" | "create" | "update" | "patch" | "delete"
    ) {
        return no("can only get, create, update, patch, or delete a node lease");
    }
    if attrs.namespace != NODE_LEASE_NAMESPACE {
        return Decision::NoOpinion(format!(
            "can only access leases in the {} system namespace",
            crate::quote(NODE_LEASE_NAMESPACE)
        ));
    }
    if attrs.verb != "create" && attrs.name != node {
        return no("can only access node lease with the same name as the requesting node");
    }
    Decision::Allow(String::new())
}

fn csi_node(node: &str, attrs: &Attributes) -> Decision {
    if !matches!(
        attrs.verb.as_str(),
        "get" | "create" | "update" | "patch" | "delete"
    ) {
        return no("can only get, create, update, patch, or delete a CSINode");
    }
    if !attrs.subresource.is_empty() {
        return no("cannot authorize CSINode subresources");
    }
    if attrs.verb != "create" && attrs.name != node {
        return no("can only access CSINode with the same name as the requesting node");
    }
    Decision::Allow(String::new())
}

/// Whether upstream's graph has a path from the object to the node.
fn has_path(graph: &dyn NodeGraph, node: &str, v: Vertex, namespace: &str, name: &str) -> bool {
    match v {
        Vertex::VolumeAttachment => graph.volume_attachment_node(name).as_deref() == Some(node),
        Vertex::Pv => graph
            .persistent_volume(name)
            .is_some_and(|pv| pv_reaches(graph, node, &pv)),
        Vertex::Secret => {
            graph.any_pod_on_node(node, namespace, &mut |p| pod_references(p, v, name))
                || graph.persistent_volumes().iter().any(|pv| {
                    pv_secrets(pv)
                        .iter()
                        .any(|(ns, n)| ns == namespace && n == name)
                        && pv_reaches(graph, node, pv)
                })
        }
        _ => graph.any_pod_on_node(node, namespace, &mut |p| pod_references(p, v, name)),
    }
}

/// A PV reaches a node through the claim it is bound to (`spec.claimRef`).
fn pv_reaches(graph: &dyn NodeGraph, node: &str, pv: &Value) -> bool {
    let Some(claim) = pv.pointer("/spec/claimRef") else {
        return false;
    };
    let ns = str_at(claim, "/namespace");
    let name = str_at(claim, "/name");
    graph.any_pod_on_node(node, ns, &mut |p| pod_references(p, Vertex::Pvc, name))
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn array<'v>(v: &'v Value, pointer: &str) -> &'v [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether a pod on the node references the object (upstream's `AddPod` edges).
fn pod_references(pod: &Value, v: Vertex, name: &str) -> bool {
    if pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD_ANNOTATION))
        .is_some()
    {
        return false;
    }
    let mut found = false;
    match v {
        Vertex::ServiceAccount => found = str_at(pod, "/spec/serviceAccountName") == name,
        Vertex::Secret => visit_secrets(pod, &mut |s| found |= s == name),
        Vertex::ConfigMap => visit_config_maps(pod, &mut |c| found |= c == name),
        Vertex::Pvc => {
            let pod_name = str_at(pod, "/metadata/name");
            found = array(pod, "/spec/volumes").iter().any(|vol| {
                let claim = if let Some(c) = vol.pointer("/persistentVolumeClaim/claimName") {
                    c.as_str().unwrap_or_default().to_string()
                } else if vol.get("ephemeral").is_some() {
                    // Upstream's ephemeral.VolumeClaimName.
                    format!("{pod_name}-{}", str_at(vol, "/name"))
                } else {
                    String::new()
                };
                !claim.is_empty() && claim == name
            });
        }
        Vertex::ResourceClaim => {
            found = array(pod, "/spec/resourceClaims")
                .iter()
                .filter_map(|c| resource_claim_name(pod, c))
                .any(|c| c == name);
        }
        Vertex::Pv | Vertex::VolumeAttachment => {}
    }
    found
}

/// Upstream's `resourceclaim.Name`: a claim named directly, or the one generated from a template
/// as the pod's status records it.
fn resource_claim_name<'p>(pod: &'p Value, claim: &'p Value) -> Option<&'p str> {
    if let Some(n) = claim.get("resourceClaimName").and_then(Value::as_str) {
        return Some(n);
    }
    // Before v1.31 the source was nested under `source`.
    if let Some(n) = claim
        .pointer("/source/resourceClaimName")
        .and_then(Value::as_str)
    {
        return Some(n);
    }
    let entry = str_at(claim, "/name");
    array(pod, "/status/resourceClaimStatuses")
        .iter()
        .find(|s| str_at(s, "/name") == entry)
        .and_then(|s| s.get("resourceClaimName"))
        .and_then(Value::as_str)
}

fn containers(pod: &Value) -> impl Iterator<Item = &Value> {
    [
        "/spec/initContainers",
        "/spec/containers",
        "/spec/ephemeralContainers",
    ]
    .into_iter()
    .flat_map(|p| array(pod, p))
}

/// Upstream's `VisitPodSecretNames` (`pkg/api/pod/util.go`, all containers): every Secret a pod
/// names, for the graph and for the admission plugins that refuse mirror pods naming any.
pub fn visit_secrets(pod: &Value, f: &mut dyn FnMut(&str)) {
    for s in array(pod, "/spec/imagePullSecrets") {
        f(str_at(s, "/name"));
    }
    for c in containers(pod) {
        for e in array(c, "/envFrom") {
            if let Some(n) = e.pointer("/secretRef/name").and_then(Value::as_str) {
                f(n);
            }
        }
        for e in array(c, "/env") {
            if let Some(n) = e
                .pointer("/valueFrom/secretKeyRef/name")
                .and_then(Value::as_str)
            {
                f(n);
            }
        }
    }
    for v in array(pod, "/spec/volumes") {
        for p in [
            "/azureFile/secretName",
            "/cephfs/secretRef/name",
            "/cinder/secretRef/name",
            "/flexVolume/secretRef/name",
            "/rbd/secretRef/name",
            "/secret/secretName",
            "/scaleIO/secretRef/name",
            "/iscsi/secretRef/name",
            "/storageos/secretRef/name",
            "/csi/nodePublishSecretRef/name",
        ] {
            if let Some(n) = v.pointer(p).and_then(Value::as_str) {
                f(n);
            }
        }
        for s in array(v, "/projected/sources") {
            if let Some(n) = s.pointer("/secret/name").and_then(Value::as_str) {
                f(n);
            }
        }
    }
}

/// Upstream's `VisitPodConfigmapNames` (all containers): every ConfigMap a pod names.
pub fn visit_config_maps(pod: &Value, f: &mut dyn FnMut(&str)) {
    for c in containers(pod) {
        for e in array(c, "/envFrom") {
            if let Some(n) = e.pointer("/configMapRef/name").and_then(Value::as_str) {
                f(n);
            }
        }
        for e in array(c, "/env") {
            if let Some(n) = e
                .pointer("/valueFrom/configMapKeyRef/name")
                .and_then(Value::as_str)
            {
                f(n);
            }
        }
    }
    for v in array(pod, "/spec/volumes") {
        if let Some(n) = v.pointer("/configMap/name").and_then(Value::as_str) {
            f(n);
        }
        for s in array(v, "/projected/sources") {
            if let Some(n) = s.pointer("/configMap/name").and_then(Value::as_str) {
                f(n);
            }
        }
    }
}

/// The secrets a PV references that the kubelet sees (upstream's `VisitPVSecretNames` with
/// `kubeletVisible`), as (namespace, name).
fn pv_secrets(pv: &Value) -> Vec<(String, String)> {
    let claim_ns = str_at(pv, "/spec/claimRef/namespace");
    let mut out = Vec::new();
    let mut push = |ns: &str, name: &str| {
        if !name.is_empty() {
            let ns = if ns.is_empty() { claim_ns } else { ns };
            out.push((ns.to_string(), name.to_string()));
        }
    };
    let spec = pv.get("spec").unwrap_or(&Value::Null);
    if let Some(a) = spec.get("azureFile") {
        push(str_at(a, "/secretNamespace"), str_at(a, "/secretName"));
    }
    for src in [
        "cephfs",
        "cinder",
        "flexVolume",
        "rbd",
        "scaleIO",
        "iscsi",
        "storageos",
    ] {
        if let Some(r) = spec.pointer(&format!("/{src}/secretRef")) {
            // FlexVolume and StorageOS without a namespace use the claim's; the rest too.
            push(str_at(r, "/namespace"), str_at(r, "/name"));
        }
    }
    if let Some(csi) = spec.get("csi") {
        for r in [
            "nodePublishSecretRef",
            "nodeStageSecretRef",
            "nodeExpandSecretRef",
        ] {
            if let Some(r) = csi.get(r) {
                push(str_at(r, "/namespace"), str_at(r, "/name"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A cluster of pods and PVs held as JSON.
    #[derive(Default)]
    struct Fake {
        pods: Vec<Value>,
        pvs: Vec<Value>,
        attachments: Vec<(String, String)>,
    }

    impl NodeGraph for Fake {
        fn any_pod_on_node(
            &self,
            node: &str,
            namespace: &str,
            found: &mut dyn FnMut(&Value) -> bool,
        ) -> bool {
            self.pods
                .iter()
                .filter(|p| str_at(p, "/spec/nodeName") == node)
                .filter(|p| namespace.is_empty() || str_at(p, "/metadata/namespace") == namespace)
                .any(found)
        }
        fn persistent_volume(&self, name: &str) -> Option<Value> {
            self.pvs
                .iter()
                .find(|p| str_at(p, "/metadata/name") == name)
                .cloned()
        }
        fn persistent_volumes(&self) -> Vec<Value> {
            self.pvs.clone()
        }
        fn volume_attachment_node(&self, name: &str) -> Option<String> {
            self.attachments
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, node)| node.clone())
        }
    }

    /// Pods as upstream's node authorizer test generates them (`generatePod`): each references
    /// a secret, configmap, PVC and service account of its own.
    fn cluster() -> Fake {
        let pod = |name: &str, node: &str| {
            json!({
                "metadata": {"name": name, "namespace": "ns0"},
                "spec": {
                    "nodeName": node,
                    "serviceAccountName": format!("svcacct0-{name}"),
                    "imagePullSecrets": [{"name": format!("pull-{name}")}],
                    "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": format!("envcm-{name}")}}],
                        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": format!("envsecret-{name}"), "key": "k"}}}]}],
                    "volumes": [
                        {"name": "s", "secret": {"secretName": format!("secret0-{name}")}},
                        {"name": "c", "configMap": {"name": format!("configmap0-{name}")}},
                        {"name": "p", "persistentVolumeClaim": {"claimName": format!("pvc0-{name}")}},
                        {"name": "e", "ephemeral": {}},
                        {"name": "pr", "projected": {"sources": [{"secret": {"name": format!("projsecret-{name}")}}]}}
                    ],
                    "resourceClaims": [
                        {"name": "direct", "resourceClaimName": format!("claim0-{name}")},
                        {"name": "templated", "resourceClaimTemplateName": "t"}
                    ]
                },
                "status": {"resourceClaimStatuses": [{"name": "templated", "resourceClaimName": format!("generated-{name}")}]}
            })
        };
        let mut mirror = pod("mirror", "node0");
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
        Fake {
            pods: vec![
                pod("pod0-node0", "node0"),
                pod("pod0-node1", "node1"),
                mirror,
            ],
            pvs: vec![json!({
                "metadata": {"name": "pv0-pod0-node0"},
                "spec": {"claimRef": {"namespace": "ns0", "name": "pvc0-pod0-node0"},
                         "csi": {"driver": "d", "volumeHandle": "h",
                                 "nodePublishSecretRef": {"name": "pvsecret", "namespace": "ns0"},
                                 "controllerPublishSecretRef": {"name": "ctlsecret", "namespace": "ns0"}}}
            })],
            attachments: vec![("attachment0-node0".into(), "node0".into())],
        }
    }

    fn node0() -> UserInfo {
        UserInfo::new("system:node:node0", &["system:nodes"])
    }

    fn req(
        user: &UserInfo,
        verb: &str,
        group: &str,
        resource: &str,
        ns: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            user: user.clone(),
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn allowed(graph: &Fake, a: &Attributes) -> bool {
        authorize(graph, a).allowed()
    }

    // The cases of upstream's TestAuthorizer (node_authorizer_test.go) that apply here.
    #[test]
    fn a_node_reads_what_its_pods_reference_and_nothing_else() {
        let g = cluster();
        let n = node0();
        for (res, name) in [
            ("secrets", "secret0-pod0-node0"),
            ("secrets", "envsecret-pod0-node0"),
            ("secrets", "pull-pod0-node0"),
            ("secrets", "projsecret-pod0-node0"),
            ("configmaps", "configmap0-pod0-node0"),
            ("configmaps", "envcm-pod0-node0"),
        ] {
            assert!(
                allowed(&g, &req(&n, "get", "", res, "ns0", name)),
                "{res}/{name}"
            );
            assert!(
                allowed(&g, &req(&n, "list", "", res, "ns0", name)),
                "{res}/{name}"
            );
        }
        assert!(allowed(
            &g,
            &req(
                &n,
                "get",
                "",
                "persistentvolumeclaims",
                "ns0",
                "pvc0-pod0-node0"
            )
        ));
        assert!(allowed(
            &g,
            &req(
                &n,
                "get",
                "",
                "persistentvolumeclaims",
                "ns0",
                "pod0-node0-e"
            )
        ));
        assert!(allowed(
            &g,
            &req(&n, "get", "", "persistentvolumes", "", "pv0-pod0-node0")
        ));
        assert!(allowed(
            &g,
            &req(
                &n,
                "get",
                "resource.k8s.io",
                "resourceclaims",
                "ns0",
                "claim0-pod0-node0"
            )
        ));
        assert!(allowed(
            &g,
            &req(
                &n,
                "get",
                "resource.k8s.io",
                "resourceclaims",
                "ns0",
                "generated-pod0-node0"
            )
        ));
        assert!(allowed(
            &g,
            &req(
                &n,
                "get",
                "storage.k8s.io",
                "volumeattachments",
                "",
                "attachment0-node0"
            )
        ));
        // The PV's kubelet-visible secret, not its controller one.
        assert!(allowed(
            &g,
            &req(&n, "get", "", "secrets", "ns0", "pvsecret")
        ));
        assert!(!allowed(
            &g,
            &req(&n, "get", "", "secrets", "ns0", "ctlsecret")
        ));

        // Another node's objects; a mirror pod's references; unknown objects.
        let denied = authorize(
            &g,
            &req(&n, "get", "", "secrets", "ns0", "secret0-pod0-node1"),
        );
        assert_eq!(
            denied,
            Decision::NoOpinion(
                "no relationship found between node 'node0' and this object".into()
            )
        );
        assert!(!allowed(
            &g,
            &req(&n, "get", "", "secrets", "ns0", "secret0-mirror")
        ));
        assert!(!allowed(
            &g,
            &req(&n, "get", "", "configmaps", "ns0", "configmap0-pod0-node1")
        ));
        assert!(!allowed(
            &g,
            &req(
                &n,
                "get",
                "",
                "persistentvolumeclaims",
                "ns0",
                "pvc0-pod0-node1"
            )
        ));
        assert!(!allowed(
            &g,
            &req(
                &n,
                "get",
                "storage.k8s.io",
                "volumeattachments",
                "",
                "other"
            )
        ));
    }

    #[test]
    fn verbs_and_shapes_are_refused_with_upstreams_reasons() {
        let g = cluster();
        let n = node0();
        let reason = |a: Attributes| authorize(&g, &a).reason().to_string();
        assert_eq!(
            reason(req(
                &n,
                "update",
                "",
                "secrets",
                "ns0",
                "secret0-pod0-node0"
            )),
            "can only read resources of this type"
        );
        assert_eq!(
            reason(req(&n, "list", "", "secrets", "", "")),
            "can only read namespaced object of this type"
        );
        assert_eq!(
            reason(req(&n, "list", "", "secrets", "ns0", "")),
            "No Object name found"
        );
        assert_eq!(
            reason(req(&n, "list", "", "persistentvolumes", "", "")),
            "can only get individual resources of this type"
        );
        let mut status = req(
            &n,
            "get",
            "",
            "persistentvolumeclaims",
            "ns0",
            "pvc0-pod0-node0",
        );
        status.subresource = "status".into();
        assert_eq!(
            reason(status.clone()),
            "can only get/update/patch this type"
        );
        status.verb = "patch".into();
        assert!(authorize(&g, &status).allowed());
        let mut token = req(
            &n,
            "create",
            "",
            "serviceaccounts",
            "ns0",
            "svcacct0-pod0-node0",
        );
        assert_eq!(
            reason(token.clone()),
            "can only create token subresource of serviceaccount"
        );
        token.subresource = "token".into();
        assert!(authorize(&g, &token).allowed());
        token.name = "svcacct0-pod0-node1".into();
        assert!(!authorize(&g, &token).allowed());
    }

    #[test]
    fn leases_and_csinodes_are_the_nodes_own() {
        let g = cluster();
        let n = node0();
        assert!(allowed(
            &g,
            &req(
                &n,
                "get",
                "coordination.k8s.io",
                "leases",
                "kube-node-lease",
                "node0"
            )
        ));
        assert!(allowed(
            &g,
            &req(
                &n,
                "create",
                "coordination.k8s.io",
                "leases",
                "kube-node-lease",
                ""
            )
        ));
        assert_eq!(
            authorize(
                &g,
                &req(
                    &n,
                    "get",
                    "coordination.k8s.io",
                    "leases",
                    "kube-node-lease",
                    "node1"
                )
            )
            .reason(),
            "can only access node lease with the same name as the requesting node"
        );
        assert_eq!(
            authorize(
                &g,
                &req(
                    &n,
                    "get",
                    "coordination.k8s.io",
                    "leases",
                    "default",
                    "node0"
                )
            )
            .reason(),
            r#"can only access leases in the "kube-node-lease" system namespace"#
        );
        assert!(allowed(
            &g,
            &req(&n, "update", "storage.k8s.io", "csinodes", "", "node0")
        ));
        assert!(!allowed(
            &g,
            &req(&n, "update", "storage.k8s.io", "csinodes", "", "node1")
        ));
    }

    #[test]
    fn other_requests_follow_node_rules_and_non_nodes_get_no_opinion() {
        let g = cluster();
        let n = node0();
        assert!(allowed(&g, &req(&n, "get", "", "pods", "ns0", "anything")));
        let mut status = req(&n, "patch", "", "nodes", "", "node0");
        status.subresource = "status".into();
        assert!(allowed(&g, &status));
        assert!(!allowed(&g, &req(&n, "delete", "", "nodes", "", "node0")));
        assert!(!allowed(
            &g,
            &req(&n, "create", "apps", "deployments", "ns0", "")
        ));
        let not_a_node = UserInfo::new("system:node:node0", &[]);
        assert_eq!(
            authorize(&g, &req(&not_a_node, "get", "", "pods", "ns0", "x")),
            Decision::NoOpinion(String::new())
        );
        let nameless = UserInfo::new("system:node:", &["system:nodes"]);
        assert_eq!(
            authorize(&g, &req(&nameless, "get", "", "pods", "ns0", "x")).reason(),
            r#"unknown node for user "system:node:""#
        );
    }
}
