//! The review kinds are created and answered, never stored, as upstream serves them: discovery
//! lists them with the one verb `create`, the access reviews answer with the authorizer's
//! decision (`system:masters` may do anything), and malformed reviews get upstream's errors.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const AUTHZ: &str = "/apis/authorization.k8s.io/v1";

async fn create(s: &Server, path: &str, kind: &str, body: Value) -> (StatusCode, Value) {
    let mut obj = json!({"apiVersion": "authorization.k8s.io/v1", "kind": kind,
        "metadata": {"creationTimestamp": null}});
    if path.contains("authentication.k8s.io") {
        obj["apiVersion"] = json!("authentication.k8s.io/v1");
    }
    if let Value::Object(m) = body {
        for (k, v) in m {
            obj[k] = v;
        }
    }
    s.call(Method::POST, path, Some(obj)).await
}

#[tokio::test]
async fn self_subject_review_says_who_the_caller_is() {
    let s = Server::start().await;
    let (code, body) = create(
        &s,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        "SelfSubjectReview",
        json!({}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "SelfSubjectReview");
    assert_eq!(body["apiVersion"], "authentication.k8s.io/v1");
    assert!(body["metadata"]["creationTimestamp"].is_string());
    // In process, outside the authenticating layer, the caller is the server itself.
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "system:apiserver",
               "groups": ["system:masters", "system:authenticated"]})
    );
}

#[tokio::test]
async fn access_reviews_answer_with_the_authorizers_decision() {
    let s = Server::start().await;
    let attrs = json!({"verb": "list", "resource": "pods", "namespace": "default"});
    let (code, body) = create(
        &s,
        &format!("{AUTHZ}/subjectaccessreviews"),
        "SubjectAccessReview",
        json!({"spec": {"resourceAttributes": attrs, "user": "root", "groups": ["system:masters"]}}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "SubjectAccessReview");
    assert_eq!(body["spec"]["user"], "root");
    assert_eq!(body["status"]["allowed"], true);
    assert!(body["status"].get("denied").is_none());

    let (code, body) = create(
        &s,
        &format!("{AUTHZ}/namespaces/default/localsubjectaccessreviews"),
        "LocalSubjectAccessReview",
        json!({"spec": {"resourceAttributes": attrs, "groups": ["system:masters"]}}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["metadata"]["namespace"], "default");
    assert_eq!(body["status"]["allowed"], true);

    // The caller (here the server's own identity, in system:masters) asks for itself.
    let (code, body) = create(
        &s,
        &format!("{AUTHZ}/selfsubjectaccessreviews"),
        "SelfSubjectAccessReview",
        json!({"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"]["allowed"], true);

    let (code, body) = create(
        &s,
        &format!("{AUTHZ}/selfsubjectrulesreviews"),
        "SelfSubjectRulesReview",
        json!({"spec": {"namespace": "default"}}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "SelfSubjectRulesReview");
    assert!(body["status"]["resourceRules"].is_array(), "{body}");
    assert!(body["status"]["nonResourceRules"].is_array(), "{body}");
    assert!(body["status"]["incomplete"].is_boolean(), "{body}");

    // Nothing was kept, and nothing can be read back.
    let (code, body) = s
        .call(Method::GET, &format!("{AUTHZ}/subjectaccessreviews"), None)
        .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED, "{body}");
}

#[tokio::test]
async fn malformed_access_reviews_get_upstreams_errors() {
    let s = Server::start().await;
    let sar = format!("{AUTHZ}/subjectaccessreviews");
    let cases = [
        (
            sar.clone(),
            "SubjectAccessReview",
            json!({"spec": {}}),
            422,
            r#".authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: "": at least one of user or group must be specified]"#,
        ),
        (
            sar.clone(),
            "SubjectAccessReview",
            json!({"spec": {"resourceAttributes": {"verb": "get"},
                "nonResourceAttributes": {"path": "/x", "verb": "get"}, "user": "u"}}),
            422,
            r#".authorization.k8s.io "" is invalid: spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/x", Verb:"get"}: cannot be specified in combination with resourceAttributes"#,
        ),
        (
            format!("{AUTHZ}/namespaces/default/localsubjectaccessreviews"),
            "LocalSubjectAccessReview",
            json!({"spec": {"resourceAttributes": {"verb": "get", "namespace": "other"}, "user": "u"}}),
            422,
            r#".authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid value: "other": must match metadata.namespace"#,
        ),
        (
            format!("{AUTHZ}/namespaces/default/localsubjectaccessreviews"),
            "LocalSubjectAccessReview",
            json!({"metadata": {"namespace": "other"},
                "spec": {"resourceAttributes": {"verb": "get", "namespace": "other"}, "user": "u"}}),
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
        (
            format!("{AUTHZ}/selfsubjectaccessreviews"),
            "SelfSubjectAccessReview",
            json!({"spec": {}}),
            422,
            r#".authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified"#,
        ),
        (
            format!("{AUTHZ}/selfsubjectrulesreviews"),
            "SelfSubjectRulesReview",
            json!({"spec": {}}),
            400,
            "no namespace on request",
        ),
    ];
    for (path, kind, body, code, message) in cases {
        let (got, resp) = create(&s, &path, kind, body.clone()).await;
        assert_eq!(got.as_u16(), code, "{kind} {body}: {resp}");
        assert_eq!(resp["message"], message, "{kind} {body}");
    }
    let (code, resp) = create(
        &s,
        &sar,
        "SubjectAccessReview",
        json!({"metadata": {"name": "named"},
            "spec": {"resourceAttributes": {"verb": "get"}, "user": "u"}}),
    )
    .await;
    assert_eq!(code.as_u16(), 422);
    let message = resp["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#".authorization.k8s.io "" is invalid: metadata: Invalid value: v1.ObjectMeta{Name:"named", "#)
            && message.ends_with("}: must be empty"),
        "{message}"
    );
}

#[tokio::test]
async fn discovery_lists_the_reviews_and_token_requests() {
    let s = Server::start().await;
    let (_, core) = s.call(Method::GET, "/api/v1", None).await;
    let token = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "serviceaccounts/token")
        .unwrap();
    assert_eq!(
        *token,
        json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true,
               "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
               "verbs": ["create"]})
    );
    let (_, authn) = s
        .call(Method::GET, "/apis/authentication.k8s.io/v1", None)
        .await;
    let names: Vec<&str> = authn["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["selfsubjectreviews", "tokenreviews"]);
    let (_, groups) = s.call(Method::GET, "/apis", None).await;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"authentication.k8s.io"), "{names:?}");
    assert!(names.contains(&"authorization.k8s.io"), "{names:?}");
    // OpenAPI offers the create and nothing else.
    let (_, doc) = s
        .call(
            Method::GET,
            "/openapi/v3/apis/authorization.k8s.io/v1",
            None,
        )
        .await;
    let path = &doc["paths"]["/apis/authorization.k8s.io/v1/subjectaccessreviews"];
    assert_eq!(
        path["post"]["operationId"],
        "createAuthorizationV1SubjectAccessReview"
    );
    assert!(path.get("get").is_none());
    assert!(
        doc["paths"]
            .get("/apis/authorization.k8s.io/v1/watch/subjectaccessreviews")
            .is_none()
    );
    let (_, core_doc) = s.call(Method::GET, "/openapi/v3/api/v1", None).await;
    assert_eq!(
        core_doc["paths"]["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]["post"]["operationId"],
        "createCoreV1NamespacedServiceAccountToken"
    );
}

/// Conformance: "Servers with support for Table transformation should return a 406 for a backend
/// which does not implement metadata" posts a SelfSubjectAccessReview asking for a Table only.
#[tokio::test]
async fn a_review_asked_for_as_a_table_is_not_acceptable() {
    use axum::{body::Body, http::Request};
    use tower::ServiceExt;
    let s = Server::start().await;
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("{AUTHZ}/selfsubjectaccessreviews"))
        .header("content-type", "application/json")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Body::from(review.to_string()))
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_ACCEPTABLE);
    let body: Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(body["reason"], "NotAcceptable");
}
