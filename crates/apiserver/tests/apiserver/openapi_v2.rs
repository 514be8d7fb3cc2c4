//! `/openapi/v2` publishes a CustomResourceDefinition's schema as upstream does (the definition
//! named by the reversed group, version and kind, the schema as written plus `apiVersion`,
//! `kind`, `metadata` and the GVK extension), and drops it when the version stops being served.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{DEADLINE, Server};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const NAME: &str = "com.example.v1.Widget";

fn crd(served: bool) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": served, "storage": false, "schema": {"openAPIV3Schema": schema()}},
                {"name": "v2", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema()}},
            ]
        }
    })
}

fn schema() -> Value {
    json!({"type": "object", "description": "Widget for testing", "properties": {
        "spec": {"type": "object", "description": "Specification of Widget", "properties": {
            "size": {"type": "integer", "format": "int32"},
            "parts": {"type": "array", "items": {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}}}},
        }},
    }})
}

/// Polls the document until `pred` holds (the registry changes shortly after the CRD's write).
async fn wait_for(s: &Server, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (code, doc) = s.call(Method::GET, "/openapi/v2", None).await;
        assert_eq!(code, StatusCode::OK);
        if pred(&doc) {
            return doc;
        }
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_crd_schema_is_published_changed_and_removed() {
    let s = Server::start().await;
    let (_, doc) = s.call(Method::GET, "/openapi/v2", None).await;
    assert_eq!(doc["swagger"], "2.0");
    let pod = &doc["definitions"]["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.PodSpec"
    );
    assert!(
        !doc.to_string().contains("#/components/"),
        "a v3 reference left in v2"
    );

    let (code, body) = s
        .call(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(crd(true)),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let doc = wait_for(&s, "v1 published", |d| d["definitions"].get(NAME).is_some()).await;
    let mut def = doc["definitions"][NAME].clone();
    assert_eq!(
        def["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
    );
    assert_eq!(
        def["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    // What upstream's conformance spec compares: the schema as written, once the fields the
    // server adds are dropped.
    let m = def.as_object_mut().unwrap();
    m.remove("x-kubernetes-group-version-kind");
    let props = m.get_mut("properties").unwrap().as_object_mut().unwrap();
    for added in ["metadata", "apiVersion", "kind"] {
        props.remove(added);
    }
    assert_eq!(def, schema());
    assert!(
        doc["paths"]
            .get("/apis/example.com/v1/namespaces/{namespace}/widgets")
            .is_some()
    );

    // Stop serving v1: its definition goes, v2's stays.
    let (_, current) = s
        .call(
            Method::GET,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
            None,
        )
        .await;
    let mut next = crd(false);
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, body) = s
        .call(
            Method::PUT,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
            Some(next),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let doc = wait_for(&s, "v1 removed", |d| d["definitions"].get(NAME).is_none()).await;
    assert!(doc["definitions"].get("com.example.v2.Widget").is_some());
}

/// kube-openapi's handler: JSON and gnostic's protobuf, each with its own ETag a poller
/// revalidates against, and a 406 for anything else. client-go's `OpenAPISchema` (kubectl's
/// client-side validation) asks for the protobuf form only and has no fallback.
#[tokio::test]
async fn a_poller_revalidates_with_the_etag_and_protobuf_clients_get_protobuf() {
    let s = Server::start().await;
    let req = |headers: &[(&str, &str)]| {
        let mut b = axum::http::Request::builder().uri("/openapi/v2");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(axum::body::Body::empty()).unwrap()
    };
    use tower::ServiceExt;
    let resp = s.router.clone().oneshot(req(&[])).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let etag = resp.headers()["etag"].to_str().unwrap().to_string();
    let again = s
        .router
        .clone()
        .oneshot(req(&[("if-none-match", &etag)]))
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let pb = s
        .router
        .clone()
        .oneshot(req(&[("accept", PROTOBUF)]))
        .await
        .unwrap();
    assert_eq!(pb.status(), StatusCode::OK);
    let pb_etag = pb.headers()["etag"].to_str().unwrap().to_string();
    assert_ne!(pb_etag, etag);
    let body = axum::body::to_bytes(pb.into_body(), usize::MAX)
        .await
        .unwrap();
    // openapi.v2.Document: field 1 (swagger) "2.0", then field 2 (info).
    assert_eq!(&body[..6], b"\x0a\x032.0\x12");
    let pb_again = s
        .router
        .clone()
        .oneshot(req(&[("accept", PROTOBUF), ("if-none-match", &pb_etag)]))
        .await
        .unwrap();
    assert_eq!(pb_again.status(), StatusCode::NOT_MODIFIED);
    // JSON preferred by quality over protobuf, and the reverse.
    for (accept, json) in [
        (format!("{PROTOBUF};q=0.5, application/json"), true),
        (format!("application/json;q=0.5, {PROTOBUF}"), false),
        ("*/*".to_string(), true),
    ] {
        let r = s
            .router
            .clone()
            .oneshot(req(&[("accept", &accept)]))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{accept}");
        let body = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(body.first() == Some(&b'{'), json, "{accept}");
    }
    let xml = s
        .router
        .clone()
        .oneshot(req(&[("accept", "application/xml")]))
        .await
        .unwrap();
    assert_eq!(xml.status(), StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn unknown_preserving_schemas_are_published_as_upstream_publishes_them_for_v2() {
    let s = Server::start().await;
    let mut def = crd(true);
    def["spec"]["versions"] = json!([
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
            {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
        {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema":
            {"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"a": {"type": "string"}}},
                "maybe": {"type": "string", "nullable": true}},
             "required": ["maybe"]}}},
    ]);
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(def),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let doc = wait_for(&s, "both published", |d| {
        d["definitions"].get(NAME).is_some()
            && d["definitions"].get("com.example.v2.Widget").is_some()
    })
    .await;
    // A schema preserving unknown fields at its root: a bare object (kubectl would otherwise
    // refuse every field it does not list).
    assert_eq!(
        doc["definitions"][NAME],
        json!({"type": "object", "x-kubernetes-group-version-kind":
            [{"group": "example.com", "kind": "Widget", "version": "v1"}]})
    );
    let v2 = &doc["definitions"]["com.example.v2.Widget"];
    assert_eq!(
        v2["properties"]["spec"],
        json!({"x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(v2["properties"]["maybe"], json!({}));
    assert!(v2.get("required").is_none(), "{v2}");
}
