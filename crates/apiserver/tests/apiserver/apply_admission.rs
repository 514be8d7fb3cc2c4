//! Server-side apply goes through the whole admission chain, as upstream's patch handler sends
//! an apply: a CREATE when the object is new, an UPDATE when it exists. Each case is refused the
//! same way a create or update of the same object is.

use crate::common::{DEADLINE, Server};

use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use serde_json::{Value, json};
use tower::ServiceExt;

const APPLY: &str = "application/apply-patch+yaml";

/// One request with `content_type`; the status and the body.
async fn send(
    s: &Server,
    method: Method,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = tokio::time::timeout(DEADLINE, s.router.clone().oneshot(req))
        .await
        .expect("the request finishes within the deadline")
        .unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn apply(s: &Server, uri: &str, body: &Value) -> (StatusCode, Value) {
    send(
        s,
        Method::PATCH,
        &format!("{uri}?fieldManager=test"),
        APPLY,
        body,
    )
    .await
}

async fn created(s: &Server, uri: &str, body: Value) {
    let (code, body) = send(s, Method::POST, uri, "application/json", &body).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

fn privileged_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
            "securityContext": {"privileged": true}}]}})
}

#[tokio::test]
async fn pod_security_refuses_an_applied_privileged_pod_as_it_refuses_a_created_one() {
    let s = Server::start().await;
    created(
        &s,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "locked",
            "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}),
    )
    .await;
    let pods = "/api/v1/namespaces/locked/pods";
    let (code, by_create) = send(
        &s,
        Method::POST,
        pods,
        "application/json",
        &privileged_pod("p"),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{by_create}");
    let (code, by_apply) = apply(&s, &format!("{pods}/p"), &privileged_pod("p")).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{by_apply}");
    assert_eq!(by_apply["message"], by_create["message"]);
    let (code, _) = s.call(Method::GET, &format!("{pods}/p"), None).await;
    assert_eq!(
        code,
        StatusCode::NOT_FOUND,
        "the refused apply stored nothing"
    );
}

#[tokio::test]
async fn a_denying_policy_refuses_an_apply_that_creates_and_one_that_updates() {
    let s = Server::start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    // An object that exists before the policy, for the update.
    let cm = |name: &str, v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"k": v}})
    };
    let (code, body) = apply(&s, &format!("{cms}/old"), &cm("old", "1")).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");

    created(
        &s,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "never"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "object.data.k == 'allowed'"}]}}),
    )
    .await;
    created(
        &s,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "never"},
        "spec": {"policyName": "never", "validationActions": ["Deny"]}}),
    )
    .await;

    let denied = |name: &str| {
        format!(
            "configmaps \"{name}\" is forbidden: ValidatingAdmissionPolicy 'never' with binding 'never' denied request: failed expression: object.data.k == 'allowed'"
        )
    };
    let (code, body) = apply(&s, &format!("{cms}/new"), &cm("new", "2")).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["message"], denied("new"));

    let (code, body) = apply(&s, &format!("{cms}/old"), &cm("old", "3")).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["message"], denied("old"));
    let (_, old) = s.call(Method::GET, &format!("{cms}/old"), None).await;
    assert_eq!(old["data"]["k"], "1", "the refused apply changed nothing");

    // What the policy allows is applied, both ways.
    let (code, body) = apply(&s, &format!("{cms}/old"), &cm("old", "allowed")).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, body) = apply(&s, &format!("{cms}/fresh"), &cm("fresh", "allowed")).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn an_unreachable_webhook_that_must_not_fail_open_refuses_applies() {
    let s = Server::start().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"k": "v"}})
    };
    let (code, body) = apply(&s, &format!("{cms}/old"), &cm("old")).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    for (collection, kind) in [
        (
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
        ),
        (
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        ),
    ] {
        created(
            &s,
            &format!("/apis/admissionregistration.k8s.io/v1/{collection}"),
            json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "closed"},
            "webhooks": [{"name": "closed.example.com", "failurePolicy": "Fail",
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/")},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                    "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}),
        )
        .await;
        let refused = format!(
            "Internal error occurred: failed calling webhook \"closed.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        );
        let (code, body) = apply(&s, &format!("{cms}/new"), &cm("new")).await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{kind}: {body}");
        assert_eq!(body["message"], refused, "{kind}");
        let mut changed = cm("old");
        changed["data"]["k"] = json!("w");
        let (code, body) = apply(&s, &format!("{cms}/old"), &changed).await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{kind}: {body}");
        assert_eq!(body["message"], refused, "{kind}");
        let (code, body) = s
            .call(
                Method::DELETE,
                &format!("/apis/admissionregistration.k8s.io/v1/{collection}/closed"),
                None,
            )
            .await;
        assert_eq!(code, StatusCode::OK, "{body}");
    }
}
