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
