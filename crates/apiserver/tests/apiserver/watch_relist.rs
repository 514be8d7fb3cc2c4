//! A watcher never misses a change silently when the watch cache relists from the store: it sees
//! every change, or it is ended with 410 Expired and relists (as upstream's cacher ends its
//! watchers when its reflector relists).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use axum::http::{Method, StatusCode};
use bytes::Bytes;
use common::{DEADLINE, Server, pod};
use std::collections::BTreeSet;
use store::Store;

#[tokio::test]
async fn a_watcher_sees_every_change_or_410_across_a_relist() {
    let s = Server::start().await;
    for name in ["a", "b", "c", "d"] {
        let (code, body) = s
            .call(
                Method::POST,
                "/api/v1/namespaces/default/pods",
                Some(pod(name)),
            )
            .await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let (_, list) = s
        .call(Method::GET, "/api/v1/namespaces/default/pods", None)
        .await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = s
        .stream(&format!(
            "/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"
        ))
        .await;

    // The cache loses its store watch and cannot relist until the writes below are done, as when
    // it falls out of the store's window under load.
    s.store.hold_lists(true);
    s.store.break_watches();
    let key = |name: &str| format!("/registry/core/pods/default/{name}");
    for name in ["b", "a"] {
        let kv = s.store.get(&key(name)).await.unwrap().unwrap();
        let mut obj: serde_json::Value = serde_json::from_slice(&kv.value).unwrap();
        obj["metadata"]["labels"]["changed"] = "yes".into();
        let bytes = Bytes::from(serde_json::to_vec(&obj).unwrap());
        s.store.update(&key(name), bytes, None).await.unwrap();
    }
    for name in ["c", "d"] {
        s.store.delete(&key(name), None).await.unwrap();
    }
    s.store.hold_lists(false);

    let mut missing: BTreeSet<(&str, &str)> = [
        ("MODIFIED", "b"),
        ("MODIFIED", "a"),
        ("DELETED", "c"),
        ("DELETED", "d"),
    ]
    .into();
    let mut seen = Vec::new();
    while !missing.is_empty() {
        let Some(ev) = watch.next_within(DEADLINE).await else {
            panic!("the watch went quiet with {missing:?} unseen and no 410; saw {seen:?}");
        };
        let kind = ev["type"].as_str().unwrap_or_default().to_string();
        if kind == "ERROR" {
            assert_eq!(ev["object"]["code"], 410, "{ev}");
            // Relisting is the client's way back; the list shows the store as it is.
            let (_, list) = s
                .call(Method::GET, "/api/v1/namespaces/default/pods", None)
                .await;
            let names: Vec<&str> = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["metadata"]["name"].as_str())
                .collect();
            assert_eq!(names, ["a", "b"]);
            return;
        }
        let name = ev["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        missing.retain(|(k, n)| !(*k == kind && *n == name));
        seen.push(format!("{kind} {name}"));
    }
}

#[tokio::test]
async fn a_watch_from_before_a_relist_is_expired() {
    let s = Server::start().await;
    let (_, created) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("a")),
        )
        .await;
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut sentinel = s
        .stream(&format!(
            "/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"
        ))
        .await;
    s.store.hold_lists(true);
    s.store.break_watches();
    s.store
        .delete("/registry/core/pods/default/a", None)
        .await
        .unwrap();
    s.store.hold_lists(false);
    // The sentinel hears of the relist (an ERROR; before the fix, the deletion replayed as news).
    let ev = sentinel.next_within(DEADLINE).await.unwrap();
    assert!(
        matches!(ev["type"].as_str(), Some("ERROR" | "DELETED")),
        "{ev}"
    );
    // The history from before the relist is gone: resuming there is 410, not a replay.
    let mut watch = s
        .stream(&format!(
            "/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"
        ))
        .await;
    let ev = watch.next_within(DEADLINE).await.unwrap();
    assert_eq!(
        (ev["type"].as_str(), &ev["object"]["code"]),
        (Some("ERROR"), &410.into()),
        "{ev}"
    );
}
