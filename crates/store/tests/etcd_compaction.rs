//! etcd's history is compacted as upstream's API servers compact it: several stores on one etcd
//! agree through one key so that one of them compacts each round, to the revision the round
//! before recorded; and a store left running does it on its own.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::time::{Duration, Instant};

use bytes::Bytes;
use store::{
    Revision, Store,
    etcd::{
        EtcdOptions, EtcdStore,
        compactor::{KEY, Known, Round},
        member::LocalCluster,
    },
};

async fn cluster() -> Option<LocalCluster> {
    if LocalCluster::binary().is_none() {
        eprintln!("skipped: no etcd binary (apt-get install etcd-server)");
        return None;
    }
    Some(LocalCluster::start(1).await.unwrap())
}

async fn store(etcd: &LocalCluster, compaction_interval: Option<Duration>) -> EtcdStore {
    let opts = EtcdOptions {
        compaction_interval,
        ..EtcdOptions::default()
    };
    EtcdStore::connect(&etcd.client_urls(), opts).await.unwrap()
}

/// Whether etcd still answers a read of `key` at `revision` (false once it is compacted away).
async fn readable_at(etcd: &LocalCluster, key: &str, revision: Revision) -> bool {
    let revision = i64::try_from(revision).unwrap();
    etcd.has_history_at(key, revision).await.unwrap()
}

/// The compaction key's version: the protocol's logical clock.
async fn clock(etcd: &LocalCluster) -> i64 {
    let mut client = etcd_client::Client::connect(etcd.client_urls(), None)
        .await
        .unwrap();
    let response = client.get(KEY, None).await.unwrap();
    response.kvs().first().map_or(0, |kv| kv.version())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_compactors_on_one_etcd_take_turns_and_compact_what_the_round_before_recorded() {
    let Some(etcd) = cluster().await else {
        return;
    };
    let (a, b) = (store(&etcd, None).await, store(&etcd, None).await);
    let old = a.create("/k", Bytes::from_static(b"1")).await.unwrap();
    a.update("/k", Bytes::from_static(b"2"), Some(old.mod_revision))
        .await
        .unwrap();

    // The first round only starts the clock and records where etcd is.
    let (known_a, round) = a.compaction_round(Known::default()).await;
    assert_eq!(round.unwrap(), Round::Started);
    assert_eq!(known_a.time, 1);
    assert!(known_a.revision > old.mod_revision);
    assert_eq!(clock(&etcd).await, 1);

    // b's clock is behind: its swap fails, it learns the clock and compacts nothing.
    let (known_b, round) = b.compaction_round(Known::default()).await;
    assert_eq!(round.unwrap(), Round::Lost);
    assert_eq!(known_b.time, 1);
    assert!(readable_at(&etcd, "/k", old.mod_revision).await);

    // a's next round compacts up to the revision its first recorded: the old version is gone,
    // the current one stays.
    let recorded = known_a.revision;
    let (known_a, round) = a.compaction_round(known_a).await;
    assert_eq!(round.unwrap(), Round::Compacted(recorded));
    assert!(!readable_at(&etcd, "/k", old.mod_revision).await);
    assert_eq!(
        a.get("/k").await.unwrap().unwrap().value,
        Bytes::from_static(b"2")
    );
    assert_eq!(clock(&etcd).await, 2);

    // b, one tick behind again, loses once more and then takes its turn; a, now behind, loses.
    let (known_b, round) = b.compaction_round(known_b).await;
    assert_eq!(round.unwrap(), Round::Lost);
    assert_eq!(known_b.time, 2);
    let (known_b, round) = b.compaction_round(known_b).await;
    assert!(matches!(round.unwrap(), Round::Compacted(_)));
    assert_eq!(known_b.time, 3);
    let (_, round) = a.compaction_round(known_a).await;
    assert_eq!(round.unwrap(), Round::Lost);
    assert_eq!(clock(&etcd).await, 3);

    // Writes go on after compaction.
    let current = a.get("/k").await.unwrap().unwrap();
    b.update("/k", Bytes::from_static(b"3"), Some(current.mod_revision))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_left_running_compacts_etcd_by_itself() {
    let Some(etcd) = cluster().await else {
        return;
    };
    let s = store(&etcd, Some(Duration::from_millis(100))).await;
    let old = s.create("/k", Bytes::from_static(b"1")).await.unwrap();
    s.update("/k", Bytes::from_static(b"2"), Some(old.mod_revision))
        .await
        .unwrap();
    // Two rounds: the first records a revision past the old version, the second compacts to it.
    // etcd announces a compaction to no one, so the test asks until it sees it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while readable_at(&etcd, "/k", old.mod_revision).await {
        assert!(
            Instant::now() < deadline,
            "etcd was not compacted within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(clock(&etcd).await >= 2);
    assert_eq!(
        s.get("/k").await.unwrap().unwrap().value,
        Bytes::from_static(b"2")
    );
}
