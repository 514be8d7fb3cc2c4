//! The contract every backend keeps, checked once and run against each backend (etcd on a member
//! of its own, started by the test, when the etcd binary is installed); then what only the SQLite
//! backend promises (durability across reopen, group commit).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

#[path = "contract/rebased.rs"]
mod rebased;

use std::{collections::BTreeMap, sync::Arc};

use bytes::Bytes;
use futures::{FutureExt, StreamExt, future::join_all};
use rebased::Rebased;
use store::{
    Event, EventKind, EventStream, KeyValue, Revision, Store, StoreError,
    etcd::{EtcdOptions, EtcdStore, member::LocalCluster},
    memory::MemoryStore,
    sqlite::{SqliteOptions, SqliteStore},
};
use tempfile::TempDir;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Memory,
    Sqlite,
    Etcd,
}

/// A store and whatever must outlive it (fields drop in order: the store first).
struct Fixture {
    store: Arc<dyn Store>,
    _dir: Option<TempDir>,
    _etcd: Option<LocalCluster>,
}

impl Backend {
    async fn open(self) -> Fixture {
        self.open_with_window(10_000).await
    }

    async fn open_with_window(self, events: usize) -> Fixture {
        match self {
            Backend::Memory => Fixture {
                store: Arc::new(MemoryStore::with_window(events)),
                _dir: None,
                _etcd: None,
            },
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let opts = SqliteOptions {
                    window: events,
                    ..SqliteOptions::default()
                };
                let store = SqliteStore::open(&dir.path().join("store.db"), opts).unwrap();
                Fixture {
                    store: Arc::new(store),
                    _dir: Some(dir),
                    _etcd: None,
                }
            }
            Backend::Etcd => {
                // A member of its own per test: the suite counts revisions from an empty store.
                let etcd = LocalCluster::start(1).await.unwrap();
                let opts = EtcdOptions {
                    window: events,
                    ..EtcdOptions::default()
                };
                let store = EtcdStore::connect(&etcd.client_urls(), opts).await.unwrap();
                Fixture {
                    store: Arc::new(Rebased::new(store)),
                    _dir: None,
                    _etcd: Some(etcd),
                }
            }
        }
    }
}

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn kv(key: &str, value: &str, create_revision: Revision, mod_revision: Revision) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: v(value),
        create_revision,
        mod_revision,
    }
}

fn put(kv: KeyValue, prev: Option<KeyValue>) -> Event {
    Event {
        kind: EventKind::Put,
        kv,
        prev,
    }
}

fn del(kv: KeyValue, prev: KeyValue) -> Event {
    Event {
        kind: EventKind::Delete,
        kv,
        prev: Some(prev),
    }
}

/// The next `n` events, which must all be there.
async fn take(stream: &mut EventStream, n: usize) -> Vec<Event> {
    let mut events = Vec::with_capacity(n);
    for _ in 0..n {
        events.push(
            stream
                .next()
                .await
                .expect("stream ended")
                .expect("stream failed"),
        );
    }
    events
}

/// Everything the stream can yield without waiting for a new write.
fn ready(stream: &mut EventStream) -> Vec<Result<Event, StoreError>> {
    let mut out = Vec::new();
    while let Some(Some(item)) = stream.next().now_or_never() {
        out.push(item);
    }
    out
}

fn revisions(events: &[Event]) -> Vec<Revision> {
    events.iter().map(Event::revision).collect()
}

fn compacted(stream: Result<EventStream, StoreError>) -> StoreError {
    match stream {
        Ok(_) => panic!("watch should have failed"),
        Err(error) => error,
    }
}

async fn crud_and_cas(backend: Backend) {
    let f = backend.open().await;
    let s = &f.store;
    assert_eq!(s.revision(), 0);

    let a1 = s.create("/k/a", v("1")).await.unwrap();
    assert_eq!(a1, kv("/k/a", "1", 1, 1));
    assert_eq!(s.get("/k/a").await.unwrap(), Some(a1.clone()));
    assert_eq!(s.get("/k/none").await.unwrap(), None);
    assert_eq!(
        s.create("/k/a", v("x")).await,
        Err(StoreError::AlreadyExists("/k/a".into()))
    );

    let a2 = s.update("/k/a", v("2"), Some(1)).await.unwrap();
    assert_eq!(a2, kv("/k/a", "2", 1, 2));
    assert_eq!(
        s.update("/k/a", v("x"), Some(1)).await,
        Err(StoreError::Conflict {
            key: "/k/a".into(),
            expected: 1,
            current: 2
        })
    );
    let a3 = s.update("/k/a", v("3"), None).await.unwrap();
    assert_eq!(a3, kv("/k/a", "3", 1, 3));
    assert_eq!(s.get("/k/a").await.unwrap(), Some(a3));

    let not_found = Err(StoreError::NotFound("/k/none".into()));
    assert_eq!(s.update("/k/none", v("x"), None).await, not_found);
    assert_eq!(s.update("/k/none", v("x"), Some(3)).await, not_found);
    assert_eq!(s.delete("/k/none", None).await, not_found);
    assert_eq!(s.delete("/k/none", Some(3)).await, not_found);
    assert_eq!(
        s.delete("/k/a", Some(2)).await,
        Err(StoreError::Conflict {
            key: "/k/a".into(),
            expected: 2,
            current: 3
        })
    );
    // Failed writes consume no revision.
    assert_eq!(s.revision(), 3);
    assert_eq!(s.get("/k/a").await.unwrap(), Some(kv("/k/a", "3", 1, 3)));

    // A deletion returns the last value at the deletion's revision.
    assert_eq!(s.delete("/k/a", Some(3)).await, Ok(kv("/k/a", "3", 1, 4)));
    assert_eq!(s.get("/k/a").await.unwrap(), None);
    assert_eq!(s.revision(), 4);

    // A re-created key starts a new life; an unconditional delete ends it.
    assert_eq!(
        s.create("/k/a", v("again")).await,
        Ok(kv("/k/a", "again", 5, 5))
    );
    assert_eq!(s.delete("/k/a", None).await, Ok(kv("/k/a", "again", 5, 6)));
    assert_eq!(s.revision(), 6);
}

async fn list_under_prefix(backend: Backend) {
    let f = backend.open().await;
    let s = &f.store;
    for key in ["/p/a", "/p/b", "/q/a", "/p/c", "/p", "/pp/a"] {
        s.create(key, v(key)).await.unwrap();
    }
    s.delete("/p/b", None).await.unwrap();
    s.update("/p/a", v("new"), Some(1)).await.unwrap();

    let (kvs, revision) = s.list("/p/").await.unwrap();
    assert_eq!(kvs, vec![kv("/p/a", "new", 1, 8), kv("/p/c", "/p/c", 4, 4)]);
    assert_eq!(revision, 8);
    let cases: &[(&str, &[&str])] = &[
        ("/q/", &["/q/a"]),
        ("/p", &["/p", "/p/a", "/p/c", "/pp/a"]),
        ("/none/", &[]),
        ("", &["/p", "/p/a", "/p/c", "/pp/a", "/q/a"]),
    ];
    for (prefix, want) in cases {
        let (kvs, revision) = s.list(prefix).await.unwrap();
        let keys: Vec<_> = kvs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(&keys, want, "prefix {prefix:?}");
        assert_eq!(revision, 8);
    }
}

/// While one writer creates `/c/0`, `/c/1`, ... (key `i` at revision `i + 1`), every list must
/// see exactly the keys its revision says exist: the keys and the revision are one snapshot.
async fn list_is_a_consistent_snapshot(backend: Backend) {
    const KEYS: u64 = 300;
    let f = backend.open().await;
    let writer = {
        let s = Arc::clone(&f.store);
        tokio::spawn(async move {
            for i in 0..KEYS {
                assert_eq!(
                    s.create(&format!("/c/{i:04}"), v("x"))
                        .await
                        .unwrap()
                        .mod_revision,
                    i + 1
                );
            }
        })
    };
    let mut lists = 0;
    loop {
        let done = writer.is_finished();
        let (kvs, revision) = f.store.list("/c/").await.unwrap();
        assert_eq!(kvs.len() as u64, revision, "list at revision {revision}");
        for (i, kv) in kvs.iter().enumerate() {
            assert_eq!(kv.key, format!("/c/{i:04}"));
        }
        lists += 1;
        if done {
            break;
        }
        tokio::task::yield_now().await;
    }
    writer.await.unwrap();
    assert!(lists > 1);
    assert_eq!(f.store.list("/c/").await.unwrap().1, KEYS);
}

/// Writes five events: two keys under `/w/`, one under `/x/`.
async fn five_writes(s: &dyn Store) {
    s.create("/w/a", v("a1")).await.unwrap();
    s.create("/w/b", v("b1")).await.unwrap();
    s.update("/w/a", v("a2"), Some(1)).await.unwrap();
    s.delete("/w/b", Some(2)).await.unwrap();
    s.create("/x/c", v("c1")).await.unwrap();
}

async fn watch_replays_history(backend: Backend) {
    let f = backend.open().await;
    let s = &f.store;
    five_writes(s.as_ref()).await;

    let mut all = s.watch("/", 0).unwrap();
    let want = vec![
        put(kv("/w/a", "a1", 1, 1), None),
        put(kv("/w/b", "b1", 2, 2), None),
        put(kv("/w/a", "a2", 1, 3), Some(kv("/w/a", "a1", 1, 1))),
        del(kv("/w/b", "b1", 2, 4), kv("/w/b", "b1", 2, 2)),
        put(kv("/x/c", "c1", 5, 5), None),
    ];
    assert_eq!(take(&mut all, 5).await, want);
    assert!(ready(&mut all).is_empty());

    let cases: &[(&str, Revision, &[Revision])] = &[
        ("/", 2, &[3, 4, 5]),
        ("/", 4, &[5]),
        ("/w/", 0, &[1, 2, 3, 4]),
        ("/w/", 3, &[4]),
        ("/x/", 0, &[5]),
        ("/x/", 5, &[]),
        ("/w/a", 0, &[1, 3]),
        ("/y/", 0, &[]),
    ];
    for (prefix, from, want) in cases {
        // Acknowledged writes are in the window already: all of them are ready at once.
        let mut stream = s.watch(prefix, *from).unwrap();
        let got: Vec<_> = ready(&mut stream)
            .into_iter()
            .map(|e| e.unwrap().revision())
            .collect();
        assert_eq!(got, *want, "prefix {prefix:?} from {from}");
    }
}

async fn watch_from_current_sees_only_live_events(backend: Backend) {
    let f = backend.open().await;
    let s = &f.store;
    five_writes(s.as_ref()).await;

    let mut all = s.watch("/", s.revision()).unwrap();
    let mut w = s.watch("/w/", 5).unwrap();
    assert!(ready(&mut all).is_empty());
    assert!(ready(&mut w).is_empty());

    let a3 = s.update("/w/a", v("a3"), None).await.unwrap();
    s.create("/x/d", v("d1")).await.unwrap();
    let a4 = s.delete("/w/a", Some(6)).await.unwrap();

    assert_eq!(revisions(&take(&mut all, 3).await), vec![6, 7, 8]);
    assert_eq!(
        take(&mut w, 2).await,
        vec![put(a3.clone(), Some(kv("/w/a", "a2", 1, 3))), del(a4, a3),]
    );
    assert!(ready(&mut all).is_empty());
    assert!(ready(&mut w).is_empty());
}

async fn watch_after_compaction(backend: Backend) {
    let f = backend.open().await;
    let s = &f.store;
    let early = s.watch("/", 0).unwrap();
    five_writes(s.as_ref()).await;
    s.compact(3).await.unwrap();

    assert_eq!(
        compacted(s.watch("/", 2)),
        StoreError::Compacted {
            requested: 2,
            oldest: 3
        }
    );
    assert_eq!(
        compacted(s.watch("/w/", 0)),
        StoreError::Compacted {
            requested: 0,
            oldest: 3
        }
    );
    // The events after the compacted revision are still there.
    let mut stream = s.watch("/", 3).unwrap();
    assert_eq!(revisions(&take(&mut stream, 2).await), vec![4, 5]);
    // A watcher that had not yet received the compacted events is told so, not skipped past them.
    let mut early = early;
    assert_eq!(
        ready(&mut early)
            .into_iter()
            .map(|item| item.map(|e| e.revision()))
            .collect::<Vec<_>>(),
        vec![Err(StoreError::Compacted {
            requested: 0,
            oldest: 3
        })]
    );
    assert!(matches!(early.next().now_or_never(), Some(None)));

    // The store goes on working.
    s.create("/w/e", v("e1")).await.unwrap();
    assert_eq!(revisions(&take(&mut stream, 1).await), vec![6]);
    assert_eq!(s.list("/w/").await.unwrap().0.len(), 2);
}

async fn window_retains_only_the_last_events(backend: Backend) {
    let f = backend.open_with_window(4).await;
    let s = &f.store;
    for i in 0..10 {
        s.create(&format!("/k/{i}"), v("x")).await.unwrap();
    }
    assert_eq!(
        compacted(s.watch("/", 0)),
        StoreError::Compacted {
            requested: 0,
            oldest: 6
        }
    );
    assert_eq!(
        compacted(s.watch("/", 5)),
        StoreError::Compacted {
            requested: 5,
            oldest: 6
        }
    );
    let mut stream = s.watch("/", 6).unwrap();
    assert_eq!(revisions(&take(&mut stream, 4).await), vec![7, 8, 9, 10]);

    // A watcher that falls behind by more than the window ends with an error, never with a gap.
    let mut slow = s.watch("/", 10).unwrap();
    for i in 10..20 {
        s.create(&format!("/k/{i}"), v("x")).await.unwrap();
    }
    assert_eq!(
        ready(&mut slow)
            .into_iter()
            .map(|item| item.map(|e| e.revision()))
            .collect::<Vec<_>>(),
        vec![Err(StoreError::Compacted {
            requested: 10,
            oldest: 16
        })]
    );
    assert!(matches!(slow.next().now_or_never(), Some(None)));
}

/// 8 tasks x 200 creates: revisions are unique and consecutive, each task's in increasing order,
/// and watchers (one following live, one replaying afterwards, one on a prefix) see every event
/// once, in order, equal to what the writer was told.
async fn concurrent_writers(backend: Backend) {
    const TASKS: u64 = 8;
    const WRITES: u64 = 200;
    const TOTAL: u64 = TASKS * WRITES;
    let f = backend.open().await;
    let live = {
        let mut stream = f.store.watch("/c/", 0).unwrap();
        tokio::spawn(async move { take(&mut stream, TOTAL as usize).await })
    };
    let mut prefixed = f.store.watch("/c/3/", 0).unwrap();
    let writers: Vec<_> = (0..TASKS)
        .map(|task| {
            let s = Arc::clone(&f.store);
            tokio::spawn(async move {
                let mut written = Vec::new();
                for i in 0..WRITES {
                    written.push(
                        s.create(&format!("/c/{task}/{i:03}"), v("x"))
                            .await
                            .unwrap(),
                    );
                }
                written
            })
        })
        .collect();
    let mut by_revision = BTreeMap::new();
    for writer in join_all(writers).await {
        let written = writer.unwrap();
        assert!(
            written
                .windows(2)
                .all(|w| w[0].mod_revision < w[1].mod_revision)
        );
        for kv in written {
            assert!(
                by_revision.insert(kv.mod_revision, kv).is_none(),
                "revision reused"
            );
        }
    }
    assert_eq!(
        by_revision.keys().copied().collect::<Vec<_>>(),
        (1..=TOTAL).collect::<Vec<_>>()
    );
    assert_eq!(f.store.revision(), TOTAL);

    let want: Vec<Event> = by_revision
        .values()
        .map(|kv| put(kv.clone(), None))
        .collect();
    assert_eq!(live.await.unwrap(), want);
    let mut replay = f.store.watch("/c/", 0).unwrap();
    assert_eq!(take(&mut replay, TOTAL as usize).await, want);
    let want3: Vec<Event> = want
        .iter()
        .filter(|e| e.kv.key.starts_with("/c/3/"))
        .cloned()
        .collect();
    assert_eq!(want3.len() as u64, WRITES);
    assert_eq!(take(&mut prefixed, want3.len()).await, want3);
    assert!(ready(&mut prefixed).is_empty());

    let (kvs, revision) = f.store.list("/c/").await.unwrap();
    assert_eq!((kvs.len() as u64, revision), (TOTAL, TOTAL));
}

/// Compare-and-swap increments from 8 tasks: every increment lands exactly once.
async fn cas_increments_are_linearizable(backend: Backend) {
    const TASKS: u64 = 8;
    const INCREMENTS: u64 = 25;
    let f = backend.open().await;
    f.store.create("/counter", v("0")).await.unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let s = Arc::clone(&f.store);
            tokio::spawn(async move {
                let mut conflicts = 0;
                for _ in 0..INCREMENTS {
                    loop {
                        let current = s.get("/counter").await.unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&current.value)
                            .unwrap()
                            .parse()
                            .unwrap();
                        match s
                            .update(
                                "/counter",
                                v(&(n + 1).to_string()),
                                Some(current.mod_revision),
                            )
                            .await
                        {
                            Ok(_) => break,
                            Err(StoreError::Conflict { .. }) => conflicts += 1,
                            Err(other) => panic!("{other}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    for task in join_all(tasks).await {
        task.unwrap();
    }
    let counter = f.store.get("/counter").await.unwrap().unwrap();
    assert_eq!(counter.value, v(&(TASKS * INCREMENTS).to_string()));
    assert_eq!(counter.mod_revision, 1 + TASKS * INCREMENTS);
    assert_eq!(f.store.revision(), 1 + TASKS * INCREMENTS);
}

/// Many creates of one key at once: exactly one wins, the others fail alone.
async fn concurrent_creates_of_one_key(backend: Backend) {
    let f = backend.open().await;
    let s = &f.store;
    s.create("/before", v("x")).await.unwrap();
    let results = join_all((0..20).map(|i| s.create("/dup", v(&i.to_string())))).await;
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1);
    assert_eq!(won[0].mod_revision, 2);
    for result in &results {
        if let Err(error) = result {
            assert_eq!(*error, StoreError::AlreadyExists("/dup".into()));
        }
    }
    assert_eq!(s.revision(), 2);
    assert_eq!(s.get("/dup").await.unwrap().as_ref(), Some(won[0]));
}

async fn watch_ends_when_the_store_closes(backend: Backend) {
    let f = backend.open().await;
    f.store.create("/k", v("x")).await.unwrap();
    let mut stream = f.store.watch("/", 0).unwrap();
    drop(f);
    assert_eq!(take(&mut stream, 1).await[0].revision(), 1);
    assert_eq!(stream.next().await, Some(Err(StoreError::Closed)));
    assert_eq!(stream.next().await, None);
}

/// The sweep of the stores that do not expire keys themselves (etcd does, with leases: see
/// `etcd_keys_under_an_expiring_prefix_expire_by_lease`).
async fn written_before_finds_keys_by_last_write(backend: Backend) {
    let f = backend.open().await;
    let s = f.store.as_ref();
    for key in ["/e/a", "/e/b", "/p/a"] {
        s.create(key, v("1")).await.unwrap();
    }
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let long_ago = std::time::UNIX_EPOCH;
    // (written before, limit, the keys and revisions found)
    type Case<'a> = (std::time::SystemTime, usize, &'a [(&'a str, Revision)]);
    let cases: &[Case] = &[
        (later, 10, &[("/e/a", 1), ("/e/b", 2)]),
        (later, 1, &[("/e/a", 1)]),
        (long_ago, 10, &[]),
    ];
    for (before, limit, want) in cases {
        let got = s.written_before("/e/", *before, *limit).await.unwrap();
        let got: Vec<(&str, Revision)> = got.iter().map(|(k, r)| (k.as_str(), *r)).collect();
        assert_eq!(&got, want, "limit {limit}");
    }
    s.update("/e/b", v("2"), None).await.unwrap();
    s.delete("/e/a", None).await.unwrap();
    let got = s.written_before("/e/", later, 10).await.unwrap();
    assert_eq!(got, vec![("/e/b".to_string(), 4)]);
}

macro_rules! contract {
    ($($check:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::Backend::Memory).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::Backend::Sqlite).await
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    if store::etcd::member::LocalCluster::binary().is_none() {
                        eprintln!("skipped: no etcd binary (apt-get install etcd-server)");
                        return;
                    }
                    super::$check(super::Backend::Etcd).await
                }
            )*
        }
    };
}

contract!(
    crud_and_cas,
    list_under_prefix,
    list_is_a_consistent_snapshot,
    watch_replays_history,
    watch_from_current_sees_only_live_events,
    watch_after_compaction,
    window_retains_only_the_last_events,
    concurrent_writers,
    cas_increments_are_linearizable,
    concurrent_creates_of_one_key,
    watch_ends_when_the_store_closes,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_written_before_finds_keys_by_last_write() {
    written_before_finds_keys_by_last_write(Backend::Memory).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_written_before_finds_keys_by_last_write() {
    written_before_finds_keys_by_last_write(Backend::Sqlite).await
}

/// etcd deletes a key under an expiring prefix once its lease runs out (upstream's Events), and
/// the deletion reaches watchers; other keys stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_keys_under_an_expiring_prefix_expire_by_lease() {
    if LocalCluster::binary().is_none() {
        eprintln!("skipped: no etcd binary (apt-get install etcd-server)");
        return;
    }
    let etcd = LocalCluster::start(1).await.unwrap();
    let opts = EtcdOptions {
        expiring: vec![("/e/".into(), std::time::Duration::from_secs(1))],
        ..EtcdOptions::default()
    };
    let s = EtcdStore::connect(&etcd.client_urls(), opts).await.unwrap();
    let mut watch = s.watch("/", s.revision()).unwrap();
    let kept = s.create("/p/a", v("1")).await.unwrap();
    let event = s.create("/e/a", v("1")).await.unwrap();
    let written = take(&mut watch, 2).await;
    assert_eq!(
        written,
        vec![put(kept.clone(), None), put(event.clone(), None)]
    );
    // etcd checks its leases about every 500 ms: the deletion comes within seconds.
    let expired = tokio::time::timeout(std::time::Duration::from_secs(20), take(&mut watch, 1))
        .await
        .expect("the expiring key was not deleted within 20 s");
    assert_eq!(expired[0].kind, EventKind::Delete);
    assert_eq!(expired[0].kv.key, "/e/a");
    assert_eq!(s.get("/e/a").await.unwrap(), None);
    assert_eq!(s.get("/p/a").await.unwrap(), Some(kept));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_opens_a_file_from_before_write_times() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL,
                create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL);
             CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 0), revision INTEGER NOT NULL);
             INSERT INTO meta VALUES (0, 1);
             INSERT INTO kv VALUES ('/e/old', x'31', 1, 1);",
        )
        .unwrap();
    }
    let s = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    // Keys from before write times were recorded count as written long ago.
    let epoch_and_a_bit = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1);
    let got = s.written_before("/e/", epoch_and_a_bit, 10).await.unwrap();
    assert_eq!(got, vec![("/e/old".to_string(), 1)]);
    s.create("/e/new", v("1")).await.unwrap();
    assert_eq!(
        s.written_before("/e/", epoch_and_a_bit, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reopen_keeps_data_and_revision() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let s = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
        s.create("/a", v("a1")).await.unwrap();
        s.create("/b", v("b1")).await.unwrap();
        s.update("/a", v("a2"), Some(1)).await.unwrap();
        // The newest write is a deletion: the revision must still survive.
        s.delete("/b", None).await.unwrap();
        assert_eq!(s.revision(), 4);
    }
    let s = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(s.revision(), 4);
    assert_eq!(s.get("/a").await.unwrap(), Some(kv("/a", "a2", 1, 3)));
    assert_eq!(s.get("/b").await.unwrap(), None);
    assert_eq!(s.list("/").await.unwrap(), (vec![kv("/a", "a2", 1, 3)], 4));
    // History before the restart is gone, like upstream after a compaction.
    assert_eq!(
        compacted(s.watch("/", 3)),
        StoreError::Compacted {
            requested: 3,
            oldest: 4
        }
    );
    let mut stream = s.watch("/", 4).unwrap();
    assert_eq!(s.create("/c", v("c1")).await, Ok(kv("/c", "c1", 5, 5)));
    assert_eq!(
        take(&mut stream, 1).await,
        vec![put(kv("/c", "c1", 5, 5), None)]
    );
    assert_eq!(
        s.update("/a", v("x"), Some(1)).await,
        Err(StoreError::Conflict {
            key: "/a".into(),
            expected: 1,
            current: 3
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_group_commits_concurrent_writes() {
    const WRITES: u64 = 500;
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("store.db"), SqliteOptions::default()).unwrap();
    let keys: Vec<String> = (0..WRITES).map(|i| format!("/g/{i}")).collect();
    let results = join_all(keys.iter().map(|key| s.create(key, v("x")))).await;
    let mut revisions: Vec<_> = results
        .into_iter()
        .map(|r| r.unwrap().mod_revision)
        .collect();
    revisions.sort_unstable();
    assert_eq!(revisions, (1..=WRITES).collect::<Vec<_>>());
    let commits = s.commits();
    assert!(
        (1..WRITES).contains(&commits),
        "{commits} commits for {WRITES} writes"
    );
    // Writes that all fail their checks commit nothing.
    let failed = join_all(keys[..10].iter().map(|key| s.create(key, v("y")))).await;
    assert!(
        failed
            .iter()
            .all(|r| matches!(r, Err(StoreError::AlreadyExists(_))))
    );
    assert_eq!(s.commits(), commits);
    assert_eq!(s.revision(), WRITES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_refuses_a_second_writer_on_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let first = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    let second = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    first.create("/a", v("1")).await.unwrap();
    // The second store's revision is stale: its writes would reuse revisions, so they fail.
    assert!(matches!(
        second.create("/b", v("1")).await,
        Err(StoreError::Backend(_))
    ));
    assert_eq!(second.get("/b").await.unwrap(), None);
    assert_eq!(first.create("/c", v("1")).await.unwrap().mod_revision, 2);
}

/// A store on `etcd` with the default options.
async fn etcd_store(etcd: &LocalCluster) -> EtcdStore {
    EtcdStore::connect(&etcd.client_urls(), EtcdOptions::default())
        .await
        .unwrap()
}

/// Two stores on one etcd, as two API servers: each one's watch carries the other's writes with
/// the same revisions, and compare-and-swap holds across them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_stores_on_one_cluster_share_history() {
    let Ok(etcd) = LocalCluster::start(1)
        .await
        .map_err(|e| eprintln!("skipped: {e}"))
    else {
        return;
    };
    let (a, b) = (etcd_store(&etcd).await, etcd_store(&etcd).await);
    let start = a.revision();
    let mut watch_b = b.watch("/s/", start).unwrap();
    let mut watch_a = a.watch("/s/", start).unwrap();

    let x1 = a.create("/s/x", v("1")).await.unwrap();
    assert_eq!(
        b.create("/s/x", v("other")).await,
        Err(StoreError::AlreadyExists("/s/x".into()))
    );
    // b has not seen x1 through its watch necessarily, but the compare is etcd's.
    let x2 = b
        .update("/s/x", v("2"), Some(x1.mod_revision))
        .await
        .unwrap();
    assert_eq!(
        a.update("/s/x", v("stale"), Some(x1.mod_revision)).await,
        Err(StoreError::Conflict {
            key: "/s/x".into(),
            expected: x1.mod_revision,
            current: x2.mod_revision
        })
    );
    let gone = a.delete("/s/x", Some(x2.mod_revision)).await.unwrap();

    let want = vec![
        put(x1.clone(), None),
        put(x2.clone(), Some(x1)),
        del(gone, x2),
    ];
    assert_eq!(take(&mut watch_a, 3).await, want);
    assert_eq!(take(&mut watch_b, 3).await, want);
    // Each store knows the other's writes once it has asked etcd.
    let current = a.revision();
    assert_eq!(b.current_revision().await.unwrap(), current);
    assert_eq!(b.list("/s/").await.unwrap(), (vec![], current));
}

/// Three members on loopback: with one (a follower) down writes go on; with the leader down too
/// they fail as `Unavailable` while the window still serves watches; when the members return the
/// store writes again and every acknowledged write is there. (Killing the leader first makes the
/// writes in flight during the election fail as `Unavailable` too, which the API server's clients
/// retry; the end-to-end fault test does that.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_quorum_loss_fails_writes_cleanly() {
    let Ok(mut etcd) = LocalCluster::start(3)
        .await
        .map_err(|e| eprintln!("skipped: {e}"))
    else {
        return;
    };
    let s = etcd_store(&etcd).await;
    let start = s.revision();
    let mut acknowledged = vec![s.create("/q/0", v("x")).await.unwrap()];

    let leader = etcd.leader().await.unwrap();
    let follower = (leader + 1) % 3;
    etcd.kill(follower);
    // A write sent on the dead member's connection fails and may not be sent again (it may have
    // happened, as clientv3 decides too); the store moves to the next member. Whatever this
    // first write found, every write after it is acknowledged by the two members left.
    let mut maybe = vec!["/q/lost"];
    match s.create("/q/probe", v("x")).await {
        Ok(kv) => acknowledged.push(kv),
        Err(StoreError::Unavailable(_)) => maybe.push("/q/probe"),
        Err(e) => panic!("{e:?}"),
    }
    for i in 1..5 {
        acknowledged.push(s.create(&format!("/q/{i}"), v("x")).await.unwrap());
    }

    etcd.kill(leader);
    let failed = s.create("/q/lost", v("x")).await;
    assert!(
        matches!(failed, Err(StoreError::Unavailable(_))),
        "{failed:?}"
    );
    // What the store had acknowledged is still served from its window.
    let mut replay = s.watch("/q/", start).unwrap();
    let mut replayed = Vec::new();
    while replayed.len() < acknowledged.len() {
        let kv = take(&mut replay, 1).await.remove(0).kv;
        if !maybe.contains(&kv.key.as_str()) {
            replayed.push(kv);
        }
    }
    assert_eq!(replayed, acknowledged);

    etcd.start_member(follower).unwrap();
    etcd.start_member(leader).unwrap();
    etcd.ready(&etcd.client_urls()).await.unwrap();
    acknowledged.push(s.create("/q/after", v("x")).await.unwrap());
    let (kvs, _) = s.list("/q/").await.unwrap();
    for kv in &acknowledged {
        assert!(kvs.contains(kv), "{} lost", kv.key);
    }
    // The writes that failed may or may not have happened (as with any store that times out);
    // everything else is exactly what was acknowledged.
    let unacknowledged: Vec<&str> = kvs
        .iter()
        .filter(|kv| !acknowledged.contains(kv))
        .map(|kv| kv.key.as_str())
        .collect();
    assert!(
        unacknowledged.iter().all(|k| maybe.contains(k)),
        "{unacknowledged:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_past_its_quota_fails_writes_keeps_reads_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SqliteOptions {
        max_size: Some(256 << 10),
        ..SqliteOptions::default()
    };
    let s = SqliteStore::open(&dir.path().join("store.db"), opts).unwrap();
    let value = Bytes::from(vec![b'x'; 2000]);
    let mut written = Vec::new();
    let error = loop {
        let key = format!("/k/{:04}", written.len());
        match s.create(&key, value.clone()).await {
            Ok(_) => written.push(key),
            Err(e) => break e,
        }
        assert!(written.len() < 1000, "the quota never filled");
    };
    assert!(
        matches!(&error, StoreError::Backend(m) if m.contains("full")),
        "{error}"
    );
    assert!(s.check().await.is_err(), "unhealthy while full");
    let (kvs, _) = s.list("/k/").await.unwrap();
    assert_eq!(kvs.len(), written.len(), "reads keep working");

    for key in &written[..written.len() / 2] {
        s.delete(key, None).await.unwrap();
    }
    s.check().await.unwrap();
    s.create("/k/after", value).await.unwrap();
}

/// The member the store talks to dies (here whichever member it used first, leader or not): the
/// store moves on to the others for writes as well as reads, as clientv3 does, instead of sending
/// every write to the dead member's broken connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_writes_move_on_when_the_member_in_use_dies() {
    let Ok(mut etcd) = LocalCluster::start(3)
        .await
        .map_err(|e| eprintln!("skipped: {e}"))
    else {
        return;
    };
    let s = etcd_store(&etcd).await;
    for i in 0..3 {
        s.create(&format!("/m/before-{i}"), v("x")).await.unwrap();
    }
    etcd.kill(0);
    // Writes in flight while the others elect may fail as `Unavailable`; after that they succeed.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut failures = Vec::new();
    let mut written = 0;
    for i in 0.. {
        match s.create(&format!("/m/after-{i}"), v("x")).await {
            Ok(_) => {
                written += 1;
                if written == 5 {
                    break;
                }
            }
            Err(e) => {
                assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
                failures.push(e.to_string());
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "writes never resumed with a member down: {failures:?}"
        );
    }
    let (kvs, _) = s.list("/m/").await.unwrap();
    assert_eq!(kvs.len(), 8);
}

/// The member the store talks to hangs (stopped, as a member on a stalled disk or behind a
/// half-open connection does) instead of dying: requests time out rather than fail. The store
/// moves its requests and its watch to the other members, so writes resume and every watch of the
/// store sees them; it does not keep waiting on the member that never answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_writes_and_watches_move_on_when_the_member_in_use_hangs() {
    let Ok(etcd) = LocalCluster::start(3)
        .await
        .map_err(|e| eprintln!("skipped: {e}"))
    else {
        return;
    };
    let opts = EtcdOptions {
        request_timeout: std::time::Duration::from_secs(2),
        ..EtcdOptions::default()
    };
    let s = EtcdStore::connect(&etcd.client_urls(), opts).await.unwrap();
    let start = s.revision();
    s.create("/h/before", v("x")).await.unwrap();
    let pid = etcd.pid(0).unwrap().to_string();
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut written = vec!["/h/before".to_string()];
    let mut failures = Vec::new();
    for i in 0.. {
        let key = format!("/h/after-{i}");
        match s.create(&key, v("x")).await {
            Ok(_) => written.push(key),
            Err(e) => failures.push(e.to_string()),
        }
        if written.len() == 4 || tokio::time::Instant::now() > deadline {
            break;
        }
    }
    let mut watch = s.watch("/h/", start).unwrap();
    let seen = tokio::time::timeout_at(deadline, take(&mut watch, written.len())).await;
    signal("-CONT");
    assert_eq!(written.len(), 4, "writes never resumed: {failures:?}");
    let seen: Vec<String> = seen
        .expect("the store's watch delivers the writes made after the hang")
        .into_iter()
        .map(|e| e.kv.key)
        .collect();
    assert_eq!(seen, written);
}
