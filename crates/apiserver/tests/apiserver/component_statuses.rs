//! v1 ComponentStatus, deprecated and still served as upstream serves it: get and list of the
//! scheduler, the controller manager and etcd-0, healthy, with the deprecation warning on each
//! answer; upstream's columns for `kubectl get componentstatuses`.

use crate::common::Server;
use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn get(s: &Server, uri: &str, accept: &str) -> (StatusCode, Option<String>, Value) {
    let req = Request::builder()
        .uri(uri)
        .header("accept", accept)
        .body(Body::empty())
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    let code = resp.status();
    let warning = resp
        .headers()
        .get("warning")
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        code,
        warning,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

const WARNING: &str = "299 - \"v1 ComponentStatus is deprecated in v1.19+\"";

#[tokio::test]
async fn componentstatuses_are_listed_and_read_with_the_deprecation_warning() {
    let s = Server::start().await;
    let (code, warning, list) = get(&s, "/api/v1/componentstatuses", "application/json").await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(warning.as_deref(), Some(WARNING));
    assert_eq!(list["kind"], "ComponentStatusList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["scheduler", "controller-manager", "etcd-0"]);
    let (code, warning, one) =
        get(&s, "/api/v1/componentstatuses/etcd-0", "application/json").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(warning.as_deref(), Some(WARNING));
    assert_eq!(
        one,
        json!({"kind": "ComponentStatus", "apiVersion": "v1",
               "metadata": {"name": "etcd-0", "creationTimestamp": null},
               "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]})
    );
    // Upstream's Get answers an unknown name with a plain error: a 500 with no reason (as
    // kube-apiserver v1.28.4 answers, warning included).
    let (code, warning, status) =
        get(&s, "/api/v1/componentstatuses/nope", "application/json").await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(warning.as_deref(), Some(WARNING));
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Component not found: nope", "code": 500})
    );
    let (_, _, some) = get(
        &s,
        "/api/v1/componentstatuses?fieldSelector=metadata.name%3Dscheduler",
        "application/json",
    )
    .await;
    assert_eq!(some["items"].as_array().unwrap().len(), 1);
    // kubectl's table: upstream's columns.
    let (code, _, table) = get(
        &s,
        "/api/v1/componentstatuses",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Status", "Message", "Error"]);
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["scheduler", "Healthy", "ok", ""])
    );
    // Read only: no watch, no create.
    let (code, _, _) = get(
        &s,
        "/api/v1/componentstatuses?watch=true",
        "application/json",
    )
    .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    let (code, _) = s
        .call(
            Method::POST,
            "/api/v1/componentstatuses",
            Some(json!({"metadata": {"name": "x"}})),
        )
        .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    // Discovery lists it with get and list, short name cs.
    let (_, _, core) = get(&s, "/api/v1", "application/json").await;
    let cs = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "componentstatuses")
        .cloned()
        .unwrap();
    assert_eq!(cs["verbs"], json!(["get", "list"]));
    assert_eq!(cs["shortNames"], json!(["cs"]));
    assert_eq!(cs["namespaced"], false);
    // pods/log and pods/exec as kube-apiserver v1.28.4 lists them.
    let find = |name: &str| {
        core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        find("pods/log"),
        json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod",
               "verbs": ["get"]})
    );
    assert_eq!(
        find("pods/exec"),
        json!({"name": "pods/exec", "singularName": "", "namespaced": true,
               "kind": "PodExecOptions", "verbs": ["create", "get"]})
    );
}
