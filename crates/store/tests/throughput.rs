//! How fast the SQLite write path is under many concurrent writers. Ignored by default (it is a
//! measurement, not a check of behaviour); run it with
//! `cargo test -p store --release --test throughput -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::{sync::Arc, time::Instant};

use bytes::Bytes;
use store::{
    Store,
    sqlite::{SqliteOptions, SqliteStore},
};

const WRITES: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn sqlite_concurrent_creates() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(&dir.path().join("store.db"), SqliteOptions::default()).unwrap(),
    );
    // About the size of a small pod's JSON.
    let value = Bytes::from(vec![b'x'; 1500]);
    let start = Instant::now();
    let tasks: Vec<_> = (0..WRITES)
        .map(|i| {
            let store = Arc::clone(&store);
            let value = value.clone();
            tokio::spawn(async move {
                store
                    .create(&format!("/registry/pods/default/pod-{i}"), value)
                    .await
                    .unwrap();
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    assert_eq!(store.revision(), WRITES);
    println!(
        "{WRITES} concurrent creates in {:.2?} ({:.0}/s), {} commits",
        elapsed,
        WRITES as f64 / elapsed.as_secs_f64(),
        store.commits()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn sqlite_sequential_creates() {
    const SEQUENTIAL: u64 = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("store.db"), SqliteOptions::default()).unwrap();
    let value = Bytes::from(vec![b'x'; 1500]);
    let start = Instant::now();
    for i in 0..SEQUENTIAL {
        store
            .create(&format!("/registry/pods/default/pod-{i}"), value.clone())
            .await
            .unwrap();
    }
    let elapsed = start.elapsed();
    assert_eq!(store.commits(), SEQUENTIAL);
    println!(
        "{SEQUENTIAL} sequential creates in {:.2?} ({:.0?} each, one commit each)",
        elapsed,
        elapsed / SEQUENTIAL as u32
    );
}
