//! Events expire `--event-ttl` after their last write, as upstream's lease on each Event makes
//! them: gone from the store and the cache, and watchers see them DELETED.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use apiserver::ServerOptions;
use axum::http::{Method, StatusCode};
use common::{DEADLINE, Server};
use serde_json::json;
use std::time::Duration;

fn event(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "Pulled", "message": "pulled", "type": "Normal", "count": 1
    })
}

#[tokio::test]
async fn an_event_expires_and_watchers_see_it_deleted() {
    let s = Server::start_with(ServerOptions {
        event_ttl: Some(Duration::from_secs(1)),
        ..Default::default()
    })
    .await;
    let (code, created) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/events",
            Some(event("web.1")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // Pods do not expire.
    let (code, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(common::pod("web")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);

    let mut watch = s
        .stream(&format!(
            "/api/v1/namespaces/default/events?watch=1&resourceVersion={rv}"
        ))
        .await;
    let ev = watch
        .next_within(DEADLINE)
        .await
        .expect("the Event is deleted once its TTL has passed");
    assert_eq!(ev["type"], "DELETED", "{ev}");
    assert_eq!(ev["object"]["metadata"]["name"], "web.1");

    let (_, events) = s
        .call(Method::GET, "/api/v1/namespaces/default/events", None)
        .await;
    assert_eq!(events["items"].as_array().unwrap().len(), 0, "{events}");
    let (code, _) = s
        .call(Method::GET, "/api/v1/namespaces/default/pods/web", None)
        .await;
    assert_eq!(code, StatusCode::OK);
}

/// Beyond `--event-budget` Events, the least recently written are deleted before their TTL:
/// watchers see them DELETED, the newest stay, and the metric counts what went.
#[tokio::test]
async fn events_beyond_the_budget_go_least_recently_written_first() {
    let s = Server::start_with(ServerOptions {
        event_ttl: None,
        event_budget: Some(3),
        ..Default::default()
    })
    .await;
    const EVENTS: &str = "/api/v1/namespaces/default/events";
    let (_, listed) = s.call(Method::GET, EVENTS, None).await;
    let rv = listed["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = s
        .stream(&format!("{EVENTS}?watch=1&resourceVersion={rv}"))
        .await;
    for i in 1..=5 {
        let (code, created) = s
            .call(Method::POST, EVENTS, Some(event(&format!("web.{i}"))))
            .await;
        assert_eq!(code, StatusCode::CREATED, "{created}");
    }
    let mut deleted = Vec::new();
    while deleted.len() < 2 {
        let ev = watch
            .next_within(DEADLINE)
            .await
            .expect("Events beyond the budget are deleted");
        if ev["type"] == "DELETED" {
            deleted.push(
                ev["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
    }
    deleted.sort();
    assert_eq!(deleted, ["web.1", "web.2"]);

    let (_, events) = s.call(Method::GET, EVENTS, None).await;
    let mut kept: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap())
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, ["web.3", "web.4", "web.5"], "{events}");
    let (code, metrics) = common::call_raw(&s.router, Method::GET, "/metrics", None).await;
    assert_eq!(code, StatusCode::OK);
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains("rollwright_events_evicted_total 2"),
        "{metrics}"
    );
}
