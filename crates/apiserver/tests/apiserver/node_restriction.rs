//! NodeRestriction admission and the Node authorizer against a node's own credentials: each
//! case of issue 36 item 6, driven as `system:node:node-0`, is refused with upstream's message,
//! and the work a kubelet does for its own node goes through.

use crate::common::{Server, call};
use apiserver::ServerOptions;
use authz::UserInfo;
use axum::{
    Router,
    http::{Method, StatusCode},
};
use serde_json::{Value, json};
use std::sync::Arc;

const PODS: &str = "/api/v1/namespaces/default/pods";
const NODES: &str = "/api/v1/nodes";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

/// A PATCH of `body` as a JSON merge patch.
async fn merge_patch(router: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    crate::common::patch(router, uri, "application/merge-patch+json", body).await
}

fn node_user(name: &str) -> UserInfo {
    UserInfo::new(
        format!("system:node:{name}"),
        &["system:nodes", "system:authenticated"],
    )
}

/// A refusal: its code, and the message upstream gives.
#[track_caller]
fn refused(got: (StatusCode, Value), message: &str) {
    assert_eq!(got.0, StatusCode::FORBIDDEN, "{}", got.1);
    assert_eq!(got.1["message"], message, "{}", got.1);
}

#[track_caller]
fn ok(got: &(StatusCode, Value)) {
    assert!(got.0.is_success(), "{} {}", got.0, got.1);
}

/// A pod bound to `node` (as the scheduler leaves it) that names `extra` besides a container.
fn bound_pod(name: &str, node: &str, extra: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}});
    json_patch::merge(&mut pod, &extra);
    pod
}

/// A server with node-0 registered by its own kubelet, node-1 by the admin, and a pod on each
/// (`mine` uses Secret `mine`, ConfigMap `mine`, claim `mine` and ServiceAccount `robot`;
/// `theirs` on node-1 uses the `theirs` ones); returns node-0's router.
async fn cluster() -> (Server, Router) {
    let key = Arc::new(satoken::Key::generate().unwrap());
    let s = Server::start_with(ServerOptions {
        service_account_key: Some(key),
        ..Default::default()
    })
    .await;
    let node0 = s.server.in_process_router_as(node_user("node-0"));
    // A kubelet registers its own Node, with the labels it sets on itself.
    ok(&call(
        &node0,
        Method::POST,
        NODES,
        Some(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0",
            "labels": {"kubernetes.io/hostname": "node-0", "kubernetes.io/os": "linux",
                       "node.kubernetes.io/instance-type": "sim", "example.com/rack": "r1"}},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}}),
        ),
    )
    .await);
    ok(&s
        .call(
            Method::POST,
            NODES,
            Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})),
        )
        .await);
    for (kind, path) in [
        ("Secret", "secrets"),
        ("ConfigMap", "configmaps"),
        ("ServiceAccount", "serviceaccounts"),
    ] {
        for name in ["mine", "theirs", "robot"] {
            ok(&s
                .call(
                    Method::POST,
                    &format!("/api/v1/namespaces/default/{path}"),
                    Some(json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}})),
                )
                .await);
        }
    }
    for (pod, node) in [("mine", "node-0"), ("theirs", "node-1")] {
        let extra = json!({"spec": {
            "serviceAccountName": if pod == "mine" { "robot" } else { "theirs" },
            "volumes": [
                {"name": "s", "secret": {"secretName": pod}},
                {"name": "c", "configMap": {"name": pod}},
                {"name": "p", "persistentVolumeClaim": {"claimName": pod}}]}});
        ok(&s
            .call(Method::POST, PODS, Some(bound_pod(pod, node, extra)))
            .await);
    }
    (s, node0)
}

#[tokio::test]
async fn a_node_cannot_create_pods_that_reach_beyond_it() {
    let (s, node0) = cluster().await;
    // A plain pod bound to itself, mounting a Secret: not a mirror pod.
    let evil = bound_pod(
        "evil",
        "node-0",
        json!({"spec": {"volumes": [{"name": "s", "secret": {"secretName": "theirs"}}]}}),
    );
    refused(
        call(&node0, Method::POST, PODS, Some(evil)).await,
        "pods \"evil\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"node-0\" can only create mirror pods",
    );
    // ...so the Secret stays out of its reach.
    let (code, _) = call(
        &node0,
        Method::GET,
        "/api/v1/namespaces/default/secrets/theirs",
        None,
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN);

    // A mirror pod, owned by its Node, may refer to nothing.
    let (_, me) = s.call(Method::GET, &format!("{NODES}/node-0"), None).await;
    let mirror = |name: &str, extra: Value| {
        let mut pod = bound_pod(
            name,
            "node-0",
            json!({"metadata": {
                "annotations": {"kubernetes.io/config.mirror": "hash"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-0",
                                     "uid": me["metadata"]["uid"], "controller": true}]}}),
        );
        json_patch::merge(&mut pod, &extra);
        pod
    };
    for (extra, what) in [
        (
            json!({"spec": {"volumes": [{"name": "s", "secret": {"secretName": "theirs"}}]}}),
            "secrets",
        ),
        (
            json!({"spec": {"volumes": [{"name": "c", "configMap": {"name": "theirs"}}]}}),
            "configmaps",
        ),
        (
            json!({"spec": {"volumes": [{"name": "p", "persistentVolumeClaim": {"claimName": "theirs"}}]}}),
            "persistentvolumeclaims",
        ),
        (
            json!({"spec": {"serviceAccountName": "robot"}}),
            "a service account",
        ),
    ] {
        refused(
            call(&node0, Method::POST, PODS, Some(mirror("static", extra))).await,
            &format!(
                "pods \"static\" is forbidden: node \"node-0\" can not create pods that reference {what}"
            ),
        );
    }
    refused(
        call(
            &node0,
            Method::POST,
            PODS,
            Some(mirror("elsewhere", json!({"spec": {"nodeName": "node-1"}}))),
        )
        .await,
        "pods \"elsewhere\" is forbidden: node \"node-0\" can only create pods with spec.nodeName set to itself",
    );
    refused(
        call(
            &node0,
            Method::POST,
            PODS,
            Some(mirror(
                "orphan",
                json!({"metadata": {"ownerReferences": null}}),
            )),
        )
        .await,
        "pods \"orphan\" is forbidden: node \"node-0\" can only create pods with an owner reference set to itself",
    );
    // Its own static pod is mirrored, and the mirror is its to delete.
    ok(&call(
        &node0,
        Method::POST,
        PODS,
        Some(mirror("static", json!({}))),
    )
    .await);
    ok(&call(&node0, Method::DELETE, &format!("{PODS}/static"), None).await);
}

#[tokio::test]
async fn a_node_changes_only_its_own_node_and_pods() {
    let (s, node0) = cluster().await;
    // Another node: not its status, not its taints, not a new one.
    refused(
        merge_patch(
            &node0,
            &format!("{NODES}/node-1/status"),
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        )
        .await,
        "nodes \"node-1\" is forbidden: node \"node-0\" is not allowed to modify node \"node-1\"",
    );
    refused(
        merge_patch(
            &node0,
            &format!("{NODES}/node-1"),
            json!({"spec": {"taints": [{"key": "evict", "effect": "NoExecute"}]}}),
        )
        .await,
        "nodes \"node-1\" is forbidden: node \"node-0\" is not allowed to modify node \"node-1\"",
    );
    let (_, node1) = s.call(Method::GET, &format!("{NODES}/node-1"), None).await;
    assert!(node1["spec"]["taints"].is_null(), "{node1}");
    refused(
        call(
            &node0,
            Method::POST,
            NODES,
            Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-evil"}})),
        )
        .await,
        "nodes \"node-evil\" is forbidden: node \"node-0\" is not allowed to modify node \"node-evil\"",
    );
    // Its own Node: status yes; taints and restricted labels no.
    ok(&merge_patch(
        &node0,
        &format!("{NODES}/node-0/status"),
        json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await);
    refused(
        merge_patch(
            &node0,
            &format!("{NODES}/node-0"),
            json!({"spec": {"taints": null}}),
        )
        .await,
        "nodes \"node-0\" is forbidden: node \"node-0\" is not allowed to modify taints",
    );
    refused(
        merge_patch(
            &node0,
            &format!("{NODES}/node-0"),
            json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": "",
                                           "node-restriction.kubernetes.io/trusted": "yes"}}}),
        )
        .await,
        "nodes \"node-0\" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/trusted, node-role.kubernetes.io/control-plane",
    );
    ok(&merge_patch(
        &node0,
        &format!("{NODES}/node-0"),
        json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "z1", "example.com/rack": "r2"}}}),
    )
    .await);
    refused(
        call(
            &node0,
            Method::POST,
            NODES,
            Some(
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0",
                "labels": {"kubernetes.io/role": "master"}}}),
            ),
        )
        .await,
        "nodes \"node-0\" is forbidden: node \"node-0\" is not allowed to set the following labels: kubernetes.io/role",
    );

    // Pods: the status and deletion of its own only; no evicting another node's.
    refused(
        merge_patch(
            &node0,
            &format!("{PODS}/theirs/status"),
            json!({"status": {"phase": "Failed"}}),
        )
        .await,
        "pods \"theirs\" is forbidden: node \"node-0\" can only update pod status for pods with spec.nodeName set to itself",
    );
    refused(
        merge_patch(
            &node0,
            &format!("{PODS}/mine/status"),
            json!({"metadata": {"labels": {"app": "y"}}, "status": {"phase": "Running"}}),
        )
        .await,
        "pods \"mine\" is forbidden: node \"node-0\" cannot update labels through pod status",
    );
    ok(&merge_patch(
        &node0,
        &format!("{PODS}/mine/status"),
        json!({"status": {"phase": "Running"}}),
    )
    .await);
    refused(
        call(
            &node0,
            Method::POST,
            &format!("{PODS}/theirs/eviction"),
            Some(json!({"apiVersion": "policy/v1", "kind": "Eviction",
                        "metadata": {"name": "theirs", "namespace": "default"}})),
        )
        .await,
        "pods \"theirs\" is forbidden: node node-0 can only evict pods with spec.nodeName set to itself",
    );
    refused(
        call(&node0, Method::DELETE, &format!("{PODS}/theirs"), None).await,
        "pods \"theirs\" is forbidden: node \"node-0\" can only delete pods with spec.nodeName set to itself",
    );
    let (code, _) = s.call(Method::GET, &format!("{PODS}/theirs"), None).await;
    assert_eq!(code, StatusCode::OK);
    ok(&call(&node0, Method::DELETE, &format!("{PODS}/mine"), None).await);
}

#[tokio::test]
async fn a_node_keeps_only_its_own_lease() {
    let (_s, node0) = cluster().await;
    let lease = |name: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": name}, "spec": {"holderIdentity": name}})
    };
    ok(&call(&node0, Method::POST, LEASES, Some(lease("node-0"))).await);
    ok(&merge_patch(
        &node0,
        &format!("{LEASES}/node-0"),
        json!({"spec": {"leaseDurationSeconds": 40}}),
    )
    .await);
    refused(
        call(&node0, Method::POST, LEASES, Some(lease("node-1"))).await,
        "leases.coordination.k8s.io \"node-1\" is forbidden: can only access node lease with the same name as the requesting node",
    );
}

#[tokio::test]
async fn a_node_mints_tokens_only_for_its_own_pods() {
    let (s, node0) = cluster().await;
    let token = |account: &str, bound: Value| {
        let node0 = node0.clone();
        let uri = format!("/api/v1/namespaces/default/serviceaccounts/{account}/token");
        async move {
            call(
                &node0,
                Method::POST,
                &uri,
                Some(
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"audiences": ["api"], "boundObjectRef": bound}}),
                ),
            )
            .await
        }
    };
    let uid = |pod: &str| {
        let s = &s;
        let pod = pod.to_string();
        async move {
            let (_, p) = s.call(Method::GET, &format!("{PODS}/{pod}"), None).await;
            p["metadata"]["uid"].clone()
        }
    };
    let mine = json!({"apiVersion": "v1", "kind": "Pod", "name": "mine", "uid": uid("mine").await});
    // An account none of its pods uses: the Node authorizer has no path to it.
    let (code, body) = token("theirs", mine.clone()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("no relationship found between node 'node-0' and this object"),
        "{body}"
    );
    // Its pod's account, but not bound to that pod, or bound to another node's.
    refused(
        token("robot", Value::Null).await,
        "serviceaccounts \"robot\" is forbidden: node requested token not bound to a pod",
    );
    refused(
        token(
            "robot",
            json!({"apiVersion": "v1", "kind": "Pod", "name": "mine"}),
        )
        .await,
        "serviceaccounts \"robot\" is forbidden: node requested token with a pod binding without a uid",
    );
    refused(
        token(
            "robot",
            json!({"apiVersion": "v1", "kind": "Pod", "name": "theirs", "uid": uid("theirs").await}),
        )
        .await,
        "serviceaccounts \"robot\" is forbidden: node requested token bound to a pod scheduled on a different node",
    );
    let (code, body) = token("robot", mine).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert!(
        body["status"]["token"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
}

/// Reads are the Node authorizer's: a node reads the Secrets, ConfigMaps and claims its own pods
/// use, not another node's.
#[tokio::test]
async fn a_node_reads_only_what_its_pods_use() {
    let (_s, node0) = cluster().await;
    for kind in ["secrets", "configmaps", "persistentvolumeclaims"] {
        let get = |name: &str| {
            let uri = format!("/api/v1/namespaces/default/{kind}/{name}");
            let node0 = node0.clone();
            async move { call(&node0, Method::GET, &uri, None).await }
        };
        let (code, body) = get("theirs").await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{kind}: {body}");
        // The claim was never created: allowed, and so not found.
        let (code, body) = get("mine").await;
        let want = if kind == "persistentvolumeclaims" {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        assert_eq!(code, want, "{kind}: {body}");
    }
}

/// With the ServiceAccount plugin on, a mirror pod keeps its spec (no ServiceAccount, no token
/// volume is added) and may not refer to a Secret, as upstream's plugin checks.
#[tokio::test]
async fn mirror_pods_are_left_alone_by_the_service_account_plugin() {
    let s = Server::start_with(ServerOptions {
        service_accounts: true,
        ..Default::default()
    })
    .await;
    let mirror = |name: &str, extra: Value| {
        let mut pod = bound_pod(
            name,
            "node-0",
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "hash"}}}),
        );
        json_patch::merge(&mut pod, &extra);
        pod
    };
    let (code, pod) = s
        .call(Method::POST, PODS, Some(mirror("m", json!({}))))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{pod}");
    assert!(pod["spec"]["serviceAccountName"].is_null(), "{pod}");
    assert!(pod["spec"]["volumes"].is_null(), "{pod}");
    refused(
        s.call(
            Method::POST,
            PODS,
            Some(mirror(
                "s",
                json!({"spec": {"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}}),
            )),
        )
        .await,
        "pods \"s\" is forbidden: a mirror pod may not reference secrets",
    );
}
