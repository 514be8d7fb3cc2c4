//! `pods/log` and `pods/exec` on a simulated node: the log is what the container's command
//! plainly prints, read from the pod's spec and status (nothing is dialled), with upstream's
//! options and refusals; exec answers as a kubelet does for a container with no such program.

use crate::common::{DEADLINE, Server, call_raw};
use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const PODS: &str = "/api/v1/namespaces/default/pods";

async fn create_pod(s: &Server, name: &str, command: Value, node: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": command}]}});
    if let Some(n) = node {
        pod["spec"]["nodeName"] = json!(n);
    }
    let (code, body) = s.call(Method::POST, PODS, Some(pod)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    body
}

/// Writes the container's state as the node would report it.
async fn set_state(s: &Server, name: &str, state: Value) {
    let (_, mut pod) = s.call(Method::GET, &format!("{PODS}/{name}"), None).await;
    pod["status"] = json!({"phase": "Running", "containerStatuses": [{"name": "c",
        "image": "busybox:1.36", "imageID": "", "ready": true, "restartCount": 0,
        "containerID": "containerd://abc123", "state": state}]});
    let (code, body) = s
        .call(Method::PUT, &format!("{PODS}/{name}/status"), Some(pod))
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
}

async fn log(s: &Server, uri: &str) -> (StatusCode, String) {
    let (code, bytes) = call_raw(&s.router, Method::GET, uri, None).await;
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

fn message(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    format!(
        "{} {}",
        v["reason"].as_str().unwrap_or(""),
        v["message"].as_str().unwrap_or("")
    )
}

fn seconds_ago(n: i64) -> String {
    let t = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(n);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[tokio::test]
async fn a_log_is_what_the_container_plainly_printed() {
    let s = Server::start().await;
    create_pod(
        &s,
        "echo",
        json!(["sh", "-c", "echo hello; echo world; sleep 3600"]),
        Some("node-0"),
    )
    .await;
    let uri = format!("{PODS}/echo/log");
    // Not started yet: the kubelet's refusal, relayed as a BadRequest.
    let (code, body) = log(&s, &uri).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        message(&body),
        "BadRequest container \"c\" in pod \"echo\" is waiting to start: ContainerCreating"
    );
    let started = seconds_ago(5);
    set_state(&s, "echo", json!({"running": {"startedAt": started}})).await;
    assert_eq!(
        log(&s, &uri).await,
        (StatusCode::OK, "hello\nworld\n".into())
    );
    assert_eq!(log(&s, &format!("{uri}?tailLines=1")).await.1, "world\n");
    assert_eq!(log(&s, &format!("{uri}?tailLines=0")).await.1, "");
    assert_eq!(log(&s, &format!("{uri}?limitBytes=3")).await.1, "hel");
    assert_eq!(
        log(&s, &format!("{uri}?timestamps=true&tailLines=1"))
            .await
            .1,
        format!("{started} world\n")
    );
    assert_eq!(
        log(&s, &format!("{uri}?container=c")).await.1,
        "hello\nworld\n"
    );
    // Upstream's checks: the container must exist, a previous run must have been.
    let (code, body) = log(&s, &format!("{uri}?container=nope")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        message(&body),
        "BadRequest container nope is not valid for pod echo"
    );
    let (code, body) = log(&s, &format!("{uri}?previous=true")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        message(&body),
        "BadRequest previous terminated container \"c\" in pod \"echo\" not found"
    );
    let (code, body) = log(&s, &format!("{uri}?tailLines=-1")).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (code, _) = log(&s, &format!("{PODS}/missing/log")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    // A command that prints nothing it states has an empty log; so has an unscheduled pod.
    create_pod(&s, "quiet", json!(["/app/server"]), Some("node-0")).await;
    set_state(
        &s,
        "quiet",
        json!({"running": {"startedAt": seconds_ago(1)}}),
    )
    .await;
    assert_eq!(
        log(&s, &format!("{PODS}/quiet/log")).await,
        (StatusCode::OK, String::new())
    );
    create_pod(&s, "pending", json!(["echo", "x"]), None).await;
    assert_eq!(
        log(&s, &format!("{PODS}/pending/log")).await,
        (StatusCode::OK, String::new())
    );

    // A finished run keeps its log, also as the previous one of a restarted container.
    create_pod(&s, "done", json!(["echo", "bye"]), Some("node-0")).await;
    set_state(&s, "done", json!({"terminated": {"exitCode": 0, "reason": "Completed",
        "startedAt": seconds_ago(3), "finishedAt": seconds_ago(3), "containerID": "containerd://d1"}})).await;
    assert_eq!(log(&s, &format!("{PODS}/done/log")).await.1, "bye\n");
}

#[tokio::test]
async fn a_follow_stream_sends_lines_as_printed_and_ends_when_the_container_stops() {
    let s = Server::start().await;
    create_pod(
        &s,
        "f",
        json!(["sh", "-c", "echo a; sleep 1; echo b; sleep 3600"]),
        Some("node-0"),
    )
    .await;
    set_state(&s, "f", json!({"running": {"startedAt": seconds_ago(0)}})).await;
    let req = Request::builder()
        .uri(format!("{PODS}/f/log?follow=true"))
        .body(Body::empty())
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body().into_data_stream();
    let mut got = String::new();
    let until = tokio::time::Instant::now() + DEADLINE;
    while got != "a\nb\n" {
        let chunk = tokio::time::timeout_at(until, body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push_str(&String::from_utf8_lossy(&chunk));
    }
    // The node reports the container stopped: the stream ends.
    set_state(&s, "f", json!({"terminated": {"exitCode": 137, "reason": "Error",
        "startedAt": seconds_ago(2), "finishedAt": seconds_ago(0), "containerID": "containerd://abc123"}})).await;
    let end = tokio::time::timeout(DEADLINE, body.next()).await.unwrap();
    assert!(end.is_none(), "{end:?}");
}

#[tokio::test]
async fn exec_answers_as_for_a_container_without_the_program() {
    let s = Server::start().await;
    create_pod(&s, "x", json!(["sleep", "3600"]), Some("node-0")).await;
    let uri = format!("{PODS}/x/exec?command=sh&container=c&stdin=true&stdout=true&tty=true");
    let (code, body) = log(&s, &uri).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(
        message(&body),
        "InternalError Internal error occurred: container not found (\"c\")"
    );
    set_state(&s, "x", json!({"running": {"startedAt": seconds_ago(1)}})).await;
    let (code, bytes) = call_raw(&s.router, Method::POST, &uri, None).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        message(&String::from_utf8_lossy(&bytes)),
        "InternalError Internal error occurred: error executing command in container: failed to exec in container: failed to start exec \"abc123\": OCI runtime exec failed: exec failed: unable to start container process: exec: \"sh\": executable file not found in $PATH: unknown"
    );
    let (code, body) = log(&s, &format!("{PODS}/x/exec?command=sh&container=other")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        message(&body),
        "BadRequest container other is not valid for pod x"
    );
}
