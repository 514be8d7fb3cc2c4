//! The server never dials an address of a simulated node or pod: a webhook or an APIService
//! whose endpoints are simulated pods is answered as a dial to an address where nothing listens
//! (connection refused), and nothing leaves the process. The same address dials once no
//! simulated node claims it.
//!
//! The simulated node here claims `127.0.0.0/24` as its pod CIDR, so that a listener on
//! 127.0.0.1 can count every connection the server would have opened.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use crate::common::{DEADLINE, Server};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

/// A TCP listener on 127.0.0.1 that counts the connections it accepts and closes them.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            drop(tcp);
        }
    });
    (port, accepted)
}

fn node(simulated: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-0", "labels": {"rollwright.io/simulated": simulated}},
        "spec": {"podCIDR": "127.0.0.0/24", "podCIDRs": ["127.0.0.0/24"]}})
}

async fn post(s: &Server, uri: &str, body: Value) {
    let (code, body) = s.call(Method::POST, uri, Some(body)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

/// A Service `backend` whose one endpoint is 127.0.0.1:`port`, as a simulated pod's would be.
async fn service_on(s: &Server, port: u16) {
    post(
        s,
        "/api/v1/namespaces/default/services",
        json!({"apiVersion": "v1",
        "kind": "Service", "metadata": {"name": "backend"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}),
    )
    .await;
    post(
        s,
        "/api/v1/namespaces/default/endpoints",
        json!({"apiVersion": "v1",
        "kind": "Endpoints", "metadata": {"name": "backend"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port}]}]}),
    )
    .await;
}

async fn relabel(s: &Server, simulated: &str) {
    let (code, body) = s
        .call(
            Method::PUT,
            "/api/v1/nodes/node-0",
            Some({
                let (_, mut n) = s.call(Method::GET, "/api/v1/nodes/node-0", None).await;
                n["metadata"]["labels"]["rollwright.io/simulated"] = json!(simulated);
                n
            }),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn webhooks_on_simulated_addresses_are_refused_without_a_dial() {
    let s = Server::start().await;
    let (port, accepted) = counting_listener().await;
    post(&s, "/api/v1/nodes", node("true")).await;
    service_on(&s, port).await;
    let hook = |name: &str, client: Value| {
        json!({"name": name, "failurePolicy": "Fail",
        "clientConfig": client,
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]})
    };
    post(
        &s,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "simulated"},
        "webhooks": [hook("svc.example.com", json!({"service":
            {"namespace": "default", "name": "backend", "path": "/"}}))]}),
    )
    .await;
    let cm =
        |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(cm("a")),
        )
        .await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "Internal error occurred: failed calling webhook \"svc.example.com\": failed to call webhook: Post \"https://backend.default.svc:443/?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    // A URL naming a simulated address directly is not dialled either.
    let (code, body) = s
        .call(
            Method::DELETE,
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/simulated",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    post(&s, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "simulated"},
        "webhooks": [hook("url.example.com", json!({"url": format!("https://127.0.0.1:{port}/")}))]})).await;
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(cm("b")),
        )
        .await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(
        body["message"].as_str().unwrap().ends_with(&format!(
            "dial tcp 127.0.0.1:{port}: connect: connection refused"
        )),
        "{body}"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the server dialled a simulated address"
    );

    // Once no simulated node claims the address, the same configuration dials it.
    relabel(&s, "false").await;
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(cm("c")),
        )
        .await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(
        accepted.load(Ordering::SeqCst) > 0,
        "the real address was not dialled: {body}"
    );
}

#[tokio::test]
async fn an_api_service_on_simulated_endpoints_is_unavailable_without_a_dial() {
    let s = Server::start().await;
    let (port, accepted) = counting_listener().await;
    post(&s, "/api/v1/nodes", node("true")).await;
    service_on(&s, port).await;
    post(
        &s,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1beta1.metrics.k8s.io"},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
            "versionPriority": 100, "insecureSkipTLSVerify": true,
            "service": {"namespace": "default", "name": "backend", "port": 443}}}),
    )
    .await;
    let mut watch = s
        .stream("/apis/apiregistration.k8s.io/v1/apiservices?watch=true&fieldSelector=metadata.name%3Dv1beta1.metrics.k8s.io")
        .await;
    let available = tokio::time::timeout(DEADLINE, async {
        loop {
            let event = watch.next().await.expect("the watch goes on");
            let c = event["object"]["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Available" && c["reason"] == "FailedDiscoveryCheck")
                .cloned();
            if let Some(c) = c {
                return c;
            }
        }
    })
    .await
    .expect("the APIService's availability is checked");
    assert_eq!(available["status"], "False");
    assert!(
        available["message"].as_str().unwrap().contains(&format!(
            "dial tcp 127.0.0.1:{port}: connect: connection refused"
        )),
        "{available}"
    );
    // A request for the group through the aggregator is not proxied there either.
    let _ = s
        .call(Method::GET, "/apis/metrics.k8s.io/v1beta1/pods", None)
        .await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the server dialled a simulated address"
    );
}
