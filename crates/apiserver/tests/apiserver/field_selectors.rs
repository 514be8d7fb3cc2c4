//! Field selectors see a field the object leaves unset as upstream's `GetAttrs` formats it: an
//! unset `spec.unschedulable` is `false` (the e2e framework lists schedulable nodes exactly so),
//! an unset `spec.hostNetwork` is `false`, a ReplicaSet without status has `status.replicas=0`.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{self, Server};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect()
}

async fn list(s: &Server, uri: &str) -> Value {
    let (code, body) = s.call(Method::GET, uri, None).await;
    assert_eq!(code, StatusCode::OK, "{uri}: {body}");
    body
}

#[tokio::test]
async fn unset_boolean_and_count_fields_select_as_their_zero_value() {
    let s = Server::start().await;
    for (name, spec) in [
        ("plain", json!({})),
        ("cordoned", json!({"unschedulable": true})),
    ] {
        let node =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec});
        let (code, body) = s.call(Method::POST, "/api/v1/nodes", Some(node)).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let schedulable = list(&s, "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse").await;
    assert_eq!(names(&schedulable), ["plain"]);
    let cordoned = list(&s, "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue").await;
    assert_eq!(names(&cordoned), ["cordoned"]);
    let not_true = list(
        &s,
        "/api/v1/nodes?fieldSelector=spec.unschedulable%21%3Dtrue",
    )
    .await;
    assert_eq!(names(&not_true), ["plain"]);

    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(common::pod("p")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let pods = list(
        &s,
        "/api/v1/namespaces/default/pods?fieldSelector=spec.hostNetwork%3Dfalse",
    )
    .await;
    assert_eq!(names(&pods), ["p"]);

    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}
    });
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/apps/v1/namespaces/default/replicasets",
            Some(rs),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let sets = list(
        &s,
        "/apis/apps/v1/namespaces/default/replicasets?fieldSelector=status.replicas%3D0",
    )
    .await;
    assert_eq!(names(&sets), ["rs"]);

    // CSRs by signer (upstream's conformance spec lists them so), Jobs by successes.
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "c"}, "spec": {"request": "eA==", "signerName": "example.com/s",
            "usages": ["client auth"]}});
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            Some(csr),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let csrs = list(
        &s,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests?fieldSelector=spec.signerName%3Dexample.com%2Fs",
    )
    .await;
    assert_eq!(names(&csrs), ["c"]);
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/batch/v1/namespaces/default/jobs",
            Some(job),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let jobs = list(
        &s,
        "/apis/batch/v1/namespaces/default/jobs?fieldSelector=status.successful%3D0",
    )
    .await;
    assert_eq!(names(&jobs), ["j"]);
}
