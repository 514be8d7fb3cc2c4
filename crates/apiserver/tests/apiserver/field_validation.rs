//! `fieldValidation` reports unknown and duplicate fields in upstream's words: upstream's
//! conformance specs ("Server side field validation") match these messages.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{DEADLINE, Server};

use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use serde_json::{Value, json};
use tower::ServiceExt;

/// One request with a raw body and content type; status, warnings and the body as JSON.
async fn send(
    s: &Server,
    method: Method,
    uri: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, Vec<String>, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

const DEPLOYMENT: &str = r#"{
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "my-dep", "labels": {"app": "nginx"}},
    "spec": {
        "unknownField": "foo",
        "replicas": 2,
        "replicas": 3,
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {"metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}
    }
}"#;

#[tokio::test]
async fn a_typed_create_names_unknown_and_duplicate_fields() {
    let s = Server::start().await;
    let uri = "/apis/apps/v1/namespaces/default/deployments";
    let (code, _, status) = send(
        &s,
        Method::POST,
        &format!("{uri}?fieldValidation=Strict&fieldManager=m"),
        "application/json",
        DEPLOYMENT,
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        status["message"],
        r#"strict decoding error: unknown field "spec.unknownField", duplicate field "spec.replicas""#
    );

    // Warn accepts the object (the last value wins) and says why in warnings.
    let (code, warnings, created) =
        send(&s, Method::POST, uri, "application/json", DEPLOYMENT).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["replicas"], 3);
    // ... and, as decoding into upstream's Go types does, does not keep the unknown field.
    assert!(created["spec"].get("unknownField").is_none(), "{created}");
    let (_, stored) = s.call(Method::GET, &format!("{uri}/my-dep"), None).await;
    assert!(stored["spec"].get("unknownField").is_none(), "{stored}");
    let text = warnings.join("\n");
    assert!(
        text.contains(r#"unknown field \"spec.unknownField\""#)
            || text.contains(r#"unknown field "spec.unknownField""#),
        "{text}"
    );
    assert!(text.contains("spec.replicas"), "{text}");
}

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "noxus.example.com"},
        "spec": {
            "group": "example.com", "scope": "Cluster",
            "names": {"plural": "noxus", "singular": "noxu", "kind": "Noxu"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"foo": {"type": "string"}}}}
            }}}]
        }
    })
}

async fn serve_noxus(s: &Server) {
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(crd()),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while s.call(Method::GET, "/apis/example.com/v1", None).await.0 != StatusCode::OK {
        assert!(tokio::time::Instant::now() < deadline, "noxus never served");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_apply_names_unknown_fields_and_duplicate_keys_as_upstream() {
    let s = Server::start().await;
    serve_noxus(&s).await;
    let uri = "/apis/example.com/v1/noxus/mytest?fieldManager=m&fieldValidation=Strict";
    let unknown = "
apiVersion: example.com/v1
kind: Noxu
metadata:
  name: mytest
unknownField: unknown
spec:
  foo: foo1
";
    let (code, _, status) = send(
        &s,
        Method::PATCH,
        uri,
        "application/apply-patch+yaml",
        unknown,
    )
    .await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{status}");
    assert_eq!(
        status["message"],
        "failed to create typed patch object (/mytest; example.com/v1, Kind=Noxu): .unknownField: field not declared in schema"
    );

    let duplicate = "
apiVersion: example.com/v1
kind: Noxu
metadata:
  name: mytest
spec:
  unknown: uk1
  foo: foo1
  foo: foo2
";
    let (code, _, status) = send(
        &s,
        Method::PATCH,
        uri,
        "application/apply-patch+yaml",
        duplicate,
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains(r#"line 9: key "foo" already set in map"#),
        "{message}"
    );

    // Without Strict the last value wins, as yaml.v2 decodes it.
    let lenient = "/apis/example.com/v1/noxus/mytest?fieldManager=m&fieldValidation=Ignore";
    let (code, _, applied) = send(
        &s,
        Method::PATCH,
        lenient,
        "application/apply-patch+yaml",
        duplicate,
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{applied}");
    assert_eq!(applied["spec"]["foo"], "foo2");
}
