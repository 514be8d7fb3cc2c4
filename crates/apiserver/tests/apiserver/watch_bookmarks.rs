//! A watcher that asked for bookmarks gets one every interval, even when its selector filters out
//! a steady stream of changes to its kind (so it can resume after a reconnect instead of relisting).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use axum::http::Method;
use common::{Server, pod};
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn a_filtered_watcher_on_a_busy_kind_gets_its_bookmarks() {
    let s = Server::start().await;
    let mut watch = s
        .stream("/api/v1/namespaces/default/pods?watch=1&allowWatchBookmarks=true&labelSelector=app%3Dnone")
        .await;
    // A pod every second, none of which the watcher's selector matches.
    let router = s.router.clone();
    let writer = tokio::spawn(async move {
        for i in 0.. {
            tokio::time::sleep(Duration::from_secs(1)).await;
            common::call(
                &router,
                Method::POST,
                "/api/v1/namespaces/default/pods",
                Some(pod(&format!("p{i}"))),
            )
            .await;
        }
    });
    let mut revisions = Vec::new();
    // Bookmarks are due every 30 s; two should come within 75 s of (paused) time.
    while revisions.len() < 2 {
        let ev = watch
            .next_within(Duration::from_secs(75))
            .await
            .expect("a BOOKMARK within the interval");
        assert_eq!(ev["type"], "BOOKMARK", "{ev}");
        let rv: u64 = ev["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        revisions.push(rv);
    }
    assert!(
        revisions[1] > revisions[0],
        "bookmarks carry progress: {revisions:?}"
    );
    writer.abort();
}
