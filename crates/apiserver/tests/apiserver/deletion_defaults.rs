//! What a delete does when it says little: a batch/v1 Job orphans its pods unless told otherwise
//! (upstream's `DefaultGarbageCollectionPolicy`), other kinds delete in the background; a DELETE
//! of a collection of CustomResourceDefinitions deletes each as a single DELETE would.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{DEADLINE, Server};

use axum::http::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn a_job_deleted_without_a_policy_orphans_and_a_pod_does_not() {
    let s = Server::start().await;
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let (code, body) = s.call(Method::POST, jobs, Some(job)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, deleted) = s.call(Method::DELETE, &format!("{jobs}/j"), None).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    assert_eq!(
        deleted["metadata"]["finalizers"],
        json!(["orphan"]),
        "{deleted}"
    );

    // An explicit policy wins.
    let job2 = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "k"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
    let (code, _) = s.call(Method::POST, jobs, Some(job2)).await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = s
        .call(
            Method::DELETE,
            &format!("{jobs}/k?propagationPolicy=Background"),
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.call(Method::GET, &format!("{jobs}/k"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let cms = "/api/v1/namespaces/default/configmaps";
    s.call(Method::POST, cms, Some(cm)).await;
    let (code, _) = s.call(Method::DELETE, &format!("{cms}/c"), None).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.call(Method::GET, &format!("{cms}/c"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

fn crd(plural: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com"), "labels": {"batch": "one"}},
        "spec": {
            "group": "example.com", "scope": "Cluster",
            "names": {"plural": plural, "kind": format!("K{plural}")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "a": {"type": "string"}, "b": {"type": "string"}}}}}]
        }
    })
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

#[tokio::test]
async fn deleting_a_collection_of_crds_stops_serving_them() {
    let s = Server::start().await;
    for plural in ["alphas", "betas"] {
        let (code, body) = s.call(Method::POST, CRDS, Some(crd(plural))).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let (code, body) = s
        .call(
            Method::DELETE,
            &format!("{CRDS}?labelSelector=batch%3Done"),
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (_, list) = s.call(Method::GET, CRDS, None).await;
        let (code, _) = s.call(Method::GET, "/apis/example.com/v1", None).await;
        if list["items"].as_array().unwrap().is_empty() && code == StatusCode::NOT_FOUND {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CRDs are still there: {list}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_default_added_to_a_crd_applies_to_objects_stored_before_it() {
    let s = Server::start().await;
    let (code, body) = s.call(Method::POST, CRDS, Some(crd("gammas"))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let items = "/apis/example.com/v1/gammas";
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while s.call(Method::GET, items, None).await.0 != StatusCode::OK {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let cr =
        json!({"apiVersion": "example.com/v1", "kind": "Kgammas", "metadata": {"name": "one"}});
    let (code, body) = s.call(Method::POST, items, Some(cr)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert!(body.get("a").is_none());

    let patch = json!([{"op": "add",
        "path": "/spec/versions/0/schema/openAPIV3Schema/properties/a/default", "value": "A"}]);
    let req = axum::http::Request::builder()
        .method(Method::PATCH)
        .uri(format!("{CRDS}/gammas.example.com"))
        .header("content-type", "application/json-patch+json")
        .body(axum::body::Body::from(patch.to_string()))
        .unwrap();
    use tower::ServiceExt;
    let resp = s.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);

    // Every read path shows the default: get, list and a watch's replay.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (_, got) = s.call(Method::GET, &format!("{items}/one"), None).await;
        if got["a"] == "A" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never defaulted: {got}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (_, list) = s.call(Method::GET, items, None).await;
    assert_eq!(list["items"][0]["a"], "A", "{list}");
    let mut watch = s
        .stream(&format!("{items}?watch=1&resourceVersion=0"))
        .await;
    let ev = watch.next_within(DEADLINE).await.unwrap();
    assert_eq!(ev["object"]["a"], "A", "{ev}");
}
