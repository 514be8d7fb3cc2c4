//! ValidatingAdmissionPolicy expressions within cel-go's limits: a policy too deep to parse is
//! refused at create with upstream's message; one stored before that check (or written straight
//! to the store) leaves the server starting and answering, and denies under `failurePolicy:
//! Fail` instead of taking the process down; an expression as deep as the limit allows is
//! evaluated (on the CEL evaluators' stacks, not an async worker's).

use std::sync::Arc;

use crate::common::{DEADLINE, Server, call};
use apiserver::{ApiServer, ServerOptions};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use store::{Store, memory::MemoryStore};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// `1+1+...+1 > 0` with `terms` ones.
fn sum(terms: usize) -> String {
    format!("{} > 0", vec!["1"; terms].join("+"))
}

fn policy(name: &str, expression: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": expression}]}})
}

fn binding(name: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}})
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

#[tokio::test]
async fn a_policy_deeper_than_the_parser_allows_is_refused_with_upstreams_message() {
    let s = Server::start().await;
    for terms in [2_000, 20_000] {
        let expression = sum(terms);
        let (code, body) = s
            .call(Method::POST, POLICIES, Some(policy("deep", &expression)))
            .await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{terms}: {body}");
        let cause = &body["details"]["causes"][0];
        assert_eq!(cause["field"], "spec.validations[0].expression", "{body}");
        assert_eq!(
            cause["message"]
                .as_str()
                .unwrap()
                .rsplit_once(": compilation failed: ")
                .unwrap()
                .1,
            "ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
        );
    }
    let long = format!("'{}' == ''", "x".repeat(100_000));
    let (code, body) = s
        .call(Method::POST, POLICIES, Some(policy("long", &long)))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100008, limit 100000"
        ),
        "{body}"
    );
    // The server is up and answers.
    let (code, _) = s.call(Method::GET, POLICIES, None).await;
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn an_expression_as_deep_as_allowed_is_evaluated() {
    let s = Server::start().await;
    let (code, body) = s
        .call(Method::POST, POLICIES, Some(policy("deep", &sum(200))))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, body) = s.call(Method::POST, BINDINGS, Some(binding("deep"))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, body) = s.call(Method::POST, CONFIGMAPS, Some(configmap("a"))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    // One as deep that is false denies, evaluated the same way.
    let negative = format!("{} < 0", vec!["1"; 200].join("+"));
    let (code, body) = s
        .call(Method::POST, POLICIES, Some(policy("negative", &negative)))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, body) = s
        .call(Method::POST, BINDINGS, Some(binding("negative")))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, body) = s.call(Method::POST, CONFIGMAPS, Some(configmap("b"))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "configmaps \"b\" is forbidden: ValidatingAdmissionPolicy 'negative' with binding 'negative' denied request: failed expression: {negative}"
        )
    );
}

/// A policy too deep to parse, already in the store when the server starts (as one stored by an
/// earlier version, or restored from a backup), bound to the Leases every component renews.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_policy_too_deep_to_parse_leaves_the_server_up_and_denies() {
    let store = Arc::new(MemoryStore::new());
    let stored = |kind: &str, name: &str, mut obj: Value| {
        obj["metadata"]["uid"] = json!(format!("{kind}-{name}"));
        obj["metadata"]["creationTimestamp"] = json!("2026-11-28T00:00:00Z");
        (
            format!("/registry/admissionregistration.k8s.io/{kind}/{name}"),
            bytes::Bytes::from(obj.to_string()),
        )
    };
    let mut deep = policy("deep", &sum(2_000));
    deep["spec"]["matchConstraints"]["resourceRules"] = json!([
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["configmaps"]},
        {"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["leases"]}]);
    for (key, bytes) in [
        stored("validatingadmissionpolicies", "deep", deep),
        stored("validatingadmissionpolicybindings", "deep", binding("deep")),
    ] {
        store.create(&key, bytes).await.unwrap();
    }
    let opts = ServerOptions {
        token: Some(crate::common::ADMIN_TOKEN.to_string()),
        ..ServerOptions::default()
    };
    let server = tokio::time::timeout(
        DEADLINE,
        ApiServer::start(store.clone() as Arc<dyn Store>, opts),
    )
    .await
    .expect("the server starts")
    .unwrap();
    let router = server.in_process_router();
    let (code, _) = call(&router, Method::GET, "/readyz", None).await;
    assert_eq!(code, StatusCode::OK);
    let (code, body) = call(&router, Method::POST, CONFIGMAPS, Some(configmap("b"))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        "configmaps \"b\" is forbidden: ValidatingAdmissionPolicy 'deep' with binding 'deep' denied request: compilation error: ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
    );
    // The administrator can remove the policy, and writes go through again.
    let (code, body) = call(&router, Method::DELETE, &format!("{POLICIES}/deep"), None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, body) = call(&router, Method::POST, CONFIGMAPS, Some(configmap("b"))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}
