//! client-go's part: every informer upstream's kube-controller-manager and kube-scheduler (v1.28)
//! start must sync against rollwright, which means a LIST with `resourceVersion=0&limit=500`,
//! then a WATCH with `allowWatchBookmarks=true` from the list's resourceVersion, answered as
//! upstream answers them, in JSON and when asked for protobuf first.

use crate::common;

use bytes::Bytes;
use common::Cluster;
use serde_json::Value;

/// (group/version path, resource, where an upstream component starts an informer on it).
const WATCHED: &[(&str, &str, &str)] = &[
    // kube-scheduler: the informers its framework and plugins register whatever the profile
    // (pkg/scheduler/scheduler.go, eventhandlers.go; plugins volumebinding, podtopologyspread,
    // defaultpreemption, interpodaffinity, nodevolumelimits).
    ("api/v1", "pods", "scheduler: eventhandlers.go"),
    ("api/v1", "nodes", "scheduler: eventhandlers.go"),
    ("api/v1", "namespaces", "scheduler: interpodaffinity"),
    ("api/v1", "persistentvolumes", "scheduler: volumebinding"),
    (
        "api/v1",
        "persistentvolumeclaims",
        "scheduler: volumebinding",
    ),
    (
        "apis/storage.k8s.io/v1",
        "storageclasses",
        "scheduler: volumebinding",
    ),
    (
        "apis/storage.k8s.io/v1",
        "csinodes",
        "scheduler: nodevolumelimits, volumebinding",
    ),
    (
        "apis/storage.k8s.io/v1",
        "csidrivers",
        "scheduler: volumebinding",
    ),
    (
        "apis/storage.k8s.io/v1",
        "csistoragecapacities",
        "scheduler: volumebinding",
    ),
    (
        "api/v1",
        "services",
        "scheduler: podtopologyspread (DefaultConstraints)",
    ),
    (
        "api/v1",
        "replicationcontrollers",
        "scheduler: podtopologyspread",
    ),
    (
        "apis/apps/v1",
        "replicasets",
        "scheduler: podtopologyspread",
    ),
    (
        "apis/apps/v1",
        "statefulsets",
        "scheduler: podtopologyspread",
    ),
    (
        "apis/policy/v1",
        "poddisruptionbudgets",
        "scheduler: defaultpreemption",
    ),
    // kube-controller-manager: the shared informers its controllers start
    // (cmd/kube-controller-manager/app/*.go).
    ("api/v1", "serviceaccounts", "kcm: serviceaccount, tokens"),
    ("api/v1", "secrets", "kcm: serviceaccount-token"),
    ("api/v1", "configmaps", "kcm: root-ca-cert-publisher"),
    ("api/v1", "endpoints", "kcm: endpoint"),
    ("api/v1", "resourcequotas", "kcm: resourcequota"),
    (
        "api/v1",
        "podtemplates",
        "kcm: garbagecollector (metadata informers)",
    ),
    (
        "api/v1",
        "limitranges",
        "kcm: garbagecollector (metadata informers)",
    ),
    ("apis/apps/v1", "deployments", "kcm: deployment"),
    ("apis/apps/v1", "daemonsets", "kcm: daemonset"),
    (
        "apis/apps/v1",
        "controllerrevisions",
        "kcm: daemonset, statefulset",
    ),
    ("apis/batch/v1", "jobs", "kcm: job, cronjob"),
    ("apis/batch/v1", "cronjobs", "kcm: cronjob"),
    (
        "apis/autoscaling/v2",
        "horizontalpodautoscalers",
        "kcm: horizontalpodautoscaling",
    ),
    (
        "apis/storage.k8s.io/v1",
        "volumeattachments",
        "kcm: attachdetach",
    ),
    (
        "apis/discovery.k8s.io/v1",
        "endpointslices",
        "kcm: endpointslice, endpointslicemirroring",
    ),
    (
        "apis/certificates.k8s.io/v1",
        "certificatesigningrequests",
        "kcm: csrapproving, csrsigning, csrcleaner",
    ),
    (
        "apis/coordination.k8s.io/v1",
        "leases",
        "kcm: leader election, storage-version-gc",
    ),
    (
        "apis/rbac.authorization.k8s.io/v1",
        "clusterroles",
        "kcm: clusterrole-aggregation",
    ),
    (
        "apis/scheduling.k8s.io/v1",
        "priorityclasses",
        "kcm: resourcequota (evaluators)",
    ),
    (
        "apis/events.k8s.io/v1",
        "events",
        "scheduler: event broadcaster (writes)",
    ),
];

/// What client-go's typed informers send, and plain JSON.
const ACCEPTS: &[&str] = &[
    "application/vnd.kubernetes.protobuf, application/json",
    "application/json",
];

async fn get(client: &kube::Client, path: &str, accept: &str) -> (u16, String, Bytes) {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::from(Vec::new()))
        .expect("request");
    let resp = client.send(req).await.expect("response");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = resp.into_body().collect_bytes().await.expect("body");
    (status, content_type, body)
}

/// One informer's start: LIST then WATCH from the list's resourceVersion, as `accept` asks.
async fn list_then_watch(client: &kube::Client, gv: &str, resource: &str, why: &str, accept: &str) {
    let list_path = format!("/{gv}/{resource}?resourceVersion=0&limit=500");
    let (status, content_type, body) = get(client, &list_path, accept).await;
    assert_eq!(
        status,
        200,
        "LIST {list_path} ({why}): {}",
        String::from_utf8_lossy(&body)
    );
    // No kind is served as protobuf: upstream answers JSON to a client that accepts it (as it
    // does for custom resources), and client-go decodes by the response's content type.
    assert_eq!(
        content_type, "application/json",
        "LIST {list_path} as {accept}"
    );
    let list: Value = serde_json::from_slice(&body).expect("a JSON list");
    let kind = list["kind"].as_str().unwrap_or_default();
    assert!(kind.ends_with("List"), "LIST {list_path}: kind {kind}");
    assert!(list["items"].is_array(), "LIST {list_path}: items");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
        .unwrap_or_else(|| panic!("LIST {list_path}: no resourceVersion"));
    // The watch ends by itself after a second (timeoutSeconds), as client-go's do after their
    // timeout; what it sent is read whole.
    let watch_path = format!(
        "/{gv}/{resource}?allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=1&watch=true"
    );
    let (status, content_type, body) = get(client, &watch_path, accept).await;
    assert_eq!(status, 200, "WATCH {watch_path} ({why})");
    assert!(
        content_type.starts_with("application/json"),
        "WATCH {watch_path}: {content_type}"
    );
    for line in String::from_utf8_lossy(&body).lines() {
        let ev: Value = serde_json::from_str(line).expect("a JSON watch event");
        let ty = ev["type"].as_str().unwrap_or_default();
        assert!(
            matches!(ty, "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK"),
            "WATCH {watch_path}: {line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_informer_of_upstream_components_lists_and_watches() {
    let c = Cluster::start().await;
    let client = c.client().await;
    // All informers start at once, as a component's shared informer factory starts them.
    let starts = WATCHED.iter().flat_map(|(gv, resource, why)| {
        let client = &client;
        ACCEPTS
            .iter()
            .map(move |accept| list_then_watch(client, gv, resource, why, accept))
    });
    futures::future::join_all(starts).await;
    c.stop().await;
}
