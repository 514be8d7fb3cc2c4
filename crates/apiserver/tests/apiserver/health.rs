//! Health that can fail: a store that cannot write fails `/readyz`, `/healthz` and `/livez` by
//! the check's name, writes fail with a 5xx Status saying why, reads keep working, the relist loop
//! backs off, and everything recovers by itself once the store works again.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use apiserver::{ApiServer, ServerOptions};
use axum::http::{Method, StatusCode};
use common::{DEADLINE, Server, call_raw, pod};
use std::{sync::Arc, time::Duration};
use store::{
    Store, StoreError,
    sqlite::{SqliteOptions, SqliteStore},
};

async fn text(s: &Server, uri: &str) -> (StatusCode, String) {
    let (code, body) = call_raw(&s.router, Method::GET, uri, None).await;
    (code, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_store_that_cannot_write_fails_the_named_check_and_recovers() {
    let s = Server::start().await;
    assert_eq!(text(&s, "/readyz").await, (StatusCode::OK, "ok".into()));
    let (code, verbose) = text(&s, "/readyz?verbose").await;
    assert_eq!(code, StatusCode::OK);
    for line in [
        "[+]ping ok",
        "[+]etcd ok",
        "[+]informer-sync ok",
        "readyz check passed",
    ] {
        assert!(verbose.contains(line), "{line} in {verbose}");
    }

    s.store.fail_writes(Some(StoreError::Backend(
        "/data/store.db: database or disk is full".into(),
    )));
    for endpoint in ["readyz", "healthz", "livez"] {
        let (code, body) = text(&s, &format!("/{endpoint}")).await;
        assert_eq!(
            code,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{endpoint}: {body}"
        );
        assert!(body.contains("[-]etcd failed: reason withheld"), "{body}");
        assert!(body.contains("[+]ping ok"), "{body}");
        assert!(
            body.ends_with(&format!("{endpoint} check failed")),
            "{body}"
        );
    }
    assert_eq!(
        text(&s, "/readyz/etcd").await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(text(&s, "/readyz/ping").await.0, StatusCode::OK);
    assert_eq!(text(&s, "/readyz?exclude=etcd").await.0, StatusCode::OK);

    let (code, status) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("a")),
        )
        .await;
    assert!(code.is_server_error(), "{code}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "InternalError");
    assert!(
        status["message"].as_str().unwrap().contains("disk is full"),
        "{status}"
    );
    let (code, _) = s
        .call(Method::GET, "/api/v1/namespaces/default/pods", None)
        .await;
    assert_eq!(code, StatusCode::OK, "reads keep working");

    s.store.fail_writes(None);
    assert_eq!(text(&s, "/readyz").await, (StatusCode::OK, "ok".into()));
    let (code, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("a")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
}

#[tokio::test(start_paused = true)]
async fn the_relist_loop_backs_off_while_the_store_fails_and_recovers_after() {
    let s = Server::start().await;
    // A write the cache has seen: it follows the store's watch, which the break below ends.
    let (code, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("z")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = s
        .call(Method::GET, "/api/v1/namespaces/default/pods/z", None)
        .await;
    assert_eq!(code, StatusCode::OK);
    let before = s.store.lists();
    s.store
        .fail_reads(Some(StoreError::Backend("disk I/O error".into())));
    s.store.break_watches();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let lists = s.store.lists() - before;
    assert!(
        lists <= 15,
        "{lists} lists in a minute: the relist loop does not back off"
    );
    let (code, body) = text(&s, "/readyz").await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("[-]informer-sync failed"), "{body}");
    let (code, _) = s.call(Method::GET, "/api/v1/namespaces", None).await;
    assert_eq!(
        code,
        StatusCode::OK,
        "reads are served from the cache meanwhile"
    );

    s.store.fail_reads(None);
    let (code, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("a")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    // The cache relists on its next try and the write shows.
    tokio::time::timeout(DEADLINE, async {
        while s
            .call(Method::GET, "/api/v1/namespaces/default/pods/a", None)
            .await
            .0
            != StatusCode::OK
        {}
    })
    .await
    .expect("the cache follows the store again");
    assert_eq!(text(&s, "/readyz").await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sqlite_store_fails_writes_with_the_cause_and_recovers_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(
        &dir.path().join("store.db"),
        SqliteOptions {
            max_size: Some(512 << 10),
            ..Default::default()
        },
    )
    .unwrap();
    let server = ApiServer::start(Arc::new(store) as Arc<dyn Store>, ServerOptions::default())
        .await
        .unwrap();
    let router = server.in_process_router();
    let mut big = pod("x");
    big["metadata"]["annotations"] = serde_json::json!({"filler": "y".repeat(4000)});
    let mut created = Vec::new();
    let status = loop {
        let mut p = big.clone();
        let name = format!("p{}", created.len());
        p["metadata"]["name"] = name.clone().into();
        let (code, body) = common::call(
            &router,
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(p),
        )
        .await;
        if code != StatusCode::CREATED {
            assert!(code.is_server_error(), "{code} {body}");
            break body;
        }
        created.push(name);
        assert!(created.len() < 1000, "the store never filled");
    };
    assert_eq!(status["reason"], "InternalError", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("database or disk is full"),
        "{status}"
    );
    let (code, body) = call_raw(&router, Method::GET, "/readyz", None).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(String::from_utf8_lossy(&body).contains("[-]etcd failed"));
    let (code, list) = common::call(
        &router,
        Method::GET,
        "/api/v1/namespaces/default/pods",
        None,
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(list["items"].as_array().unwrap().len(), created.len());

    // Space returns: deletions make room, and the server is healthy and writable again.
    for name in &created[..created.len() / 2] {
        let (code, body) = common::call(
            &router,
            Method::DELETE,
            &format!("/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0"),
            None,
        )
        .await;
        assert!(code.is_success(), "{code} {body}");
    }
    let (code, _) = call_raw(&router, Method::GET, "/readyz", None).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = common::call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/pods",
        Some(pod("after")),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
}
