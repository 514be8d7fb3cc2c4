//! `pods/ephemeralcontainers`, as `kubectl debug` uses it (issue 36, smaller items: it answered
//! 404): the Pod is read and written through it; a write takes only the ephemeral containers, which
//! are checked as upstream's `ValidatePodEphemeralContainersUpdate` checks them, and stay once added;
//! the pod's own writes and creates cannot set them.

use crate::common::Server;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A strategic merge patch, as kubectl sends one.
async fn patch(s: &Server, uri: &str, body: Value) -> (StatusCode, Value) {
    crate::common::patch(
        &s.router,
        uri,
        "application/strategic-merge-patch+json",
        body,
    )
    .await
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn ephemeral_containers_are_added_through_their_subresource_only() {
    let s = Server::start().await;
    let pod = |ephemeral: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}],
                     "ephemeralContainers": ephemeral}})
    };
    let (code, body) = s
        .call(
            Method::POST,
            PODS,
            Some(pod(json!([{"name": "d", "image": "busybox"}]))),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        message(&body),
        "Pod \"p\" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create"
    );
    let (code, body) = s.call(Method::POST, PODS, Some(pod(json!([])))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");

    let sub = format!("{PODS}/p/ephemeralcontainers");
    let (code, body) = s.call(Method::GET, &sub, None).await;
    assert_eq!((code, body["kind"].as_str()), (StatusCode::OK, Some("Pod")));

    // What `kubectl debug p -it --image=busybox --target=app` sends; the image change beside it
    // is not the subresource's to make and is dropped.
    let debugger = json!({"name": "debugger", "image": "busybox:1.36",
        "targetContainerName": "app", "stdin": true, "tty": true});
    let (code, body) = patch(
        &s,
        &sub,
        json!({"spec": {"ephemeralContainers": [debugger],
                        "containers": [{"name": "app", "image": "nginx:1.28"}]}}),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["spec"]["ephemeralContainers"][0]["name"], "debugger");
    assert_eq!(body["spec"]["containers"][0]["image"], "nginx:1.27");

    // An ephemeral container may not hold what a workload's container does, nor reuse a name.
    let (code, body) = patch(
        &s,
        &sub,
        json!({"spec": {"ephemeralContainers": [{"name": "app", "image": "busybox",
            "ports": [{"containerPort": 80}]}]}}),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let causes: Vec<&str> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap_or_default())
        .collect();
    // (Where the new one lands in the merged list is the strategic merge's to say.)
    assert!(
        causes.iter().any(|c| c.ends_with("].name"))
            && causes.iter().any(|c| c.ends_with("].ports")),
        "{body}"
    );
    assert!(
        message(&body).contains("Duplicate value: \"app\"")
            && message(&body)
                .contains(".ports: Forbidden: cannot be set for an Ephemeral Container"),
        "{body}"
    );

    // Once added, one stays: a replace without it is refused.
    let (_, mut current) = s.call(Method::GET, &sub, None).await;
    current["spec"]["ephemeralContainers"] = json!([]);
    let (code, body) = s.call(Method::PUT, &sub, Some(current)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        message(&body).contains("existing ephemeral containers \"debugger\" may not be removed"),
        "{body}"
    );

    // The pod's own update cannot change them either.
    let (_, mut current) = s.call(Method::GET, &format!("{PODS}/p"), None).await;
    current["spec"]["ephemeralContainers"] = json!([]);
    let (code, body) = s
        .call(Method::PUT, &format!("{PODS}/p"), Some(current))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        message(&body).contains("Forbidden: pod updates may not change fields"),
        "{body}"
    );
}

#[tokio::test]
async fn discovery_lists_the_subresource_as_upstream_does() {
    let s = Server::start().await;
    let (code, body) = s.call(Method::GET, "/api/v1", None).await;
    assert_eq!(code, StatusCode::OK);
    let entry = body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/ephemeralcontainers")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(entry["kind"], "Pod", "{body}");
    assert_eq!(entry["namespaced"], true);
    assert_eq!(entry["verbs"], json!(["get", "patch", "update"]));
}
