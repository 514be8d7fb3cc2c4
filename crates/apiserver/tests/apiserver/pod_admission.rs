//! LimitRanger and RuntimeClass admission of new pods, as upstream's plugins (the conformance
//! specs "LimitRange should create a LimitRange with defaults and ensure pod has those defaults
//! applied" and "RuntimeClass should schedule a Pod requesting a RuntimeClass and initialize its
//! Overhead").

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}})
}

#[tokio::test]
async fn a_limit_range_defaults_and_bounds_new_pods() {
    let s = Server::start().await;
    let lr = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"},
        "spec": {"limits": [{"type": "Container",
            "min": {"cpu": "100m", "memory": "100Mi"},
            "max": {"cpu": "500m", "memory": "500Mi"},
            "defaultRequest": {"cpu": "200m"}}]}});
    let (code, created) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/limitranges",
            Some(lr),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    // Defaulted as upstream: the default limit from max, the default request from it, then min.
    assert_eq!(
        created["spec"]["limits"][0]["default"],
        json!({"cpu": "500m", "memory": "500Mi"})
    );
    assert_eq!(
        created["spec"]["limits"][0]["defaultRequest"],
        json!({"cpu": "200m", "memory": "500Mi"})
    );

    let (code, p) = s
        .call(Method::POST, PODS, Some(pod("plain", json!({}))))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{p}");
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "200m", "memory": "500Mi"},
               "limits": {"cpu": "500m", "memory": "500Mi"}})
    );
    assert!(
        p["metadata"]["annotations"]["kubernetes.io/limit-ranger"]
            .as_str()
            .unwrap()
            .starts_with("LimitRanger plugin set: ")
    );

    let (code, status) = s
        .call(
            Method::POST,
            PODS,
            Some(pod("small", json!({"requests": {"cpu": "50m"}}))),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        "pods \"small\" is forbidden: minimum cpu usage per Container is 100m, but request is 50m"
    );
    let (code, status) = s
        .call(
            Method::POST,
            PODS,
            Some(pod(
                "big",
                json!({"limits": {"cpu": "600m", "memory": "600Mi"}}),
            )),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("maximum cpu usage per Container is 500m, but limit is 600m")
            && message.contains("maximum memory usage per Container is 500Mi, but limit is 600Mi"),
        "{message}"
    );
}

#[tokio::test]
async fn a_runtime_class_sets_overhead_and_scheduling() {
    let s = Server::start().await;
    let rc = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "sandboxed"}, "handler": "runsc",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
        "scheduling": {"nodeSelector": {"sandbox": "yes"},
            "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}});
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/node.k8s.io/v1/runtimeclasses",
            Some(rc),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");

    let mut p = pod("sandboxed", json!({}));
    p["spec"]["runtimeClassName"] = json!("sandboxed");
    let (code, created) = s.call(Method::POST, PODS, Some(p.clone())).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["spec"]["overhead"],
        json!({"cpu": "250m", "memory": "120Mi"})
    );
    assert_eq!(created["spec"]["nodeSelector"], json!({"sandbox": "yes"}));
    assert!(
        created["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "sandbox")
    );

    p["metadata"]["name"] = json!("other-overhead");
    p["spec"]["overhead"] = json!({"cpu": "1"});
    let (code, status) = s.call(Method::POST, PODS, Some(p.clone())).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        "pods \"other-overhead\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    );

    p["metadata"]["name"] = json!("missing");
    p["spec"]["runtimeClassName"] = json!("nope");
    let (code, status) = s.call(Method::POST, PODS, Some(p)).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        "pods \"missing\" is forbidden: pod rejected: RuntimeClass \"nope\" not found"
    );
}

#[tokio::test]
async fn a_pod_without_a_class_preempts_lower_priorities() {
    let s = Server::start().await;
    let (code, p) = s
        .call(Method::POST, PODS, Some(pod("plain", json!({}))))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{p}");
    // Upstream's Priority admission without a default class: priority 0, PreemptLowerPriority.
    assert_eq!(p["spec"]["priority"], 0);
    assert_eq!(p["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    let mut never = pod("never", json!({}));
    never["spec"]["preemptionPolicy"] = json!("Never");
    let (code, status) = s.call(Method::POST, PODS, Some(never)).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
}

/// The message upstream's kube-apiserver v1.28.4 gave for this pod (recorded by hand): each
/// constraint reports its first violation, repeated messages once.
#[tokio::test]
async fn limit_range_violations_read_as_upstream_words_them() {
    let s = Server::start().await;
    let lr = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
        "spec": {"limits": [
            {"type": "Container", "min": {"cpu": "100m", "memory": "100Mi"},
             "max": {"cpu": "500m", "memory": "500Mi"}, "defaultRequest": {"cpu": "200m"}},
            {"type": "Pod", "max": {"cpu": "2"}}]}});
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/limitranges",
            Some(lr),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p3"}, "spec": {
        "containers": [
            {"name": "a", "image": "busybox", "resources": {"limits": {"cpu": "1100m"}}},
            {"name": "b", "image": "busybox", "resources": {"limits": {"cpu": "1100m"}}}]}});
    let (code, status) = s.call(Method::POST, PODS, Some(p)).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        "pods \"p3\" is forbidden: [maximum cpu usage per Container is 500m, but limit is 1100m, maximum cpu usage per Pod is 2, but limit is 2200m]"
    );
}
