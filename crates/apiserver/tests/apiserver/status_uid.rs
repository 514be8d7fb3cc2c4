//! A status patch that names another pod's UID, as the kubelet's status manager sends one for a
//! pod it ran: refused, so that a StatefulSet pod made again under its name never takes the last
//! status of the one before it (`metadata.uid` is immutable, upstream's `ValidateObjectMetaUpdate`).

use crate::common::{Server, patch};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const PODS: &str = "/api/v1/namespaces/default/pods";

async fn patch_status(s: &Server, body: Value) -> (StatusCode, Value) {
    let uri = format!("{PODS}/p/status");
    patch(
        &s.router,
        &uri,
        "application/strategic-merge-patch+json",
        body,
    )
    .await
}

#[tokio::test]
async fn a_status_patch_for_another_uid_is_refused_and_changes_nothing() {
    let s = Server::start().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}});
    let (code, created) = s.call(Method::POST, PODS, Some(pod)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();

    let (code, body) = patch_status(
        &s,
        json!({"metadata": {"uid": "the-pod-before"}, "status": {"phase": "Succeeded"}}),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        "Pod \"p\" is invalid: metadata.uid: Invalid value: \"the-pod-before\": field is immutable"
    );
    let (_, now) = s.call(Method::GET, &format!("{PODS}/p"), None).await;
    assert_eq!(now["status"]["phase"], "Pending", "{now}");

    let (code, body) = patch_status(
        &s,
        json!({"metadata": {"uid": uid}, "status": {"phase": "Running"}}),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["status"]["phase"], "Running");
}
