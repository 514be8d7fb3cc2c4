//! The durable store: one SQLite file in WAL mode, written by one thread with group commit.
//!
//! Every write request goes to a dedicated writer thread (rusqlite is synchronous, and keeping it
//! off the tokio runtime keeps fsyncs from stalling async tasks). The thread takes everything that
//! queued up while it was busy, applies it all in ONE transaction — each write with its own CAS
//! check and its own consecutive revision; a write that fails its check fails alone — commits once
//! (one fsync, `synchronous=FULL`), then publishes the events to the watch window in order and only
//! then answers the callers. So a write is acknowledged only once durable, and under load the cost
//! of the fsync is shared by the whole batch.
//!
//! Reads go through separate connections: WAL gives each read transaction a consistent snapshot, so
//! `list` returns its keys together with the revision stored in that same snapshot.
//!
//! History is kept in memory only (see the window module): after a restart the window starts empty
//! at the stored revision, so a watch from an older revision fails with `Compacted`, which is what
//! upstream's 410 Gone after an etcd compaction looks like to a client.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    thread,
};

use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

use crate::{
    Event, EventKind, EventStream, KeyValue, Result, Revision, Store, StoreError,
    memory::Write,
    window::{DEFAULT_CAPACITY, Window},
};

const SCHEMA: &str = "
    BEGIN;
    CREATE TABLE IF NOT EXISTS kv (
        key TEXT PRIMARY KEY,
        value BLOB NOT NULL,
        create_rev INTEGER NOT NULL,
        mod_rev INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS meta (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        revision INTEGER NOT NULL
    );
    INSERT OR IGNORE INTO meta (id, revision) VALUES (0, 0);
    COMMIT;
";
const SELECT_KEY: &str = "SELECT value, create_rev, mod_rev FROM kv WHERE key = ?1";
const SELECT_FROM: &str =
    "SELECT key, value, create_rev, mod_rev FROM kv WHERE key >= ?1 ORDER BY key";
const SELECT_REVISION: &str = "SELECT revision FROM meta WHERE id = 0";
const UPSERT: &str = "INSERT INTO kv (key, value, create_rev, mod_rev, mod_time)
    VALUES (?1, ?2, ?3, ?4, ?5)
    ON CONFLICT (key) DO UPDATE SET
        value = excluded.value, mod_rev = excluded.mod_rev, mod_time = excluded.mod_time";
/// When each key was last written (Unix milliseconds), for time-to-live sweeps; files made before
/// it existed get it with 0 ("long ago") for every key.
const HAS_MOD_TIME: &str = "SELECT COUNT(*) FROM pragma_table_info('kv') WHERE name = 'mod_time'";
const ADD_MOD_TIME: &str = "ALTER TABLE kv ADD COLUMN mod_time INTEGER NOT NULL DEFAULT 0";
/// The health probe's transactions (see `Writer::probe`); `probe` exists for nothing else.
const PROBE: &str = "
    CREATE TABLE IF NOT EXISTS probe (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
    BEGIN IMMEDIATE;
    INSERT OR REPLACE INTO probe (id, data) VALUES (0, zeroblob(8192));
    COMMIT;
    BEGIN IMMEDIATE;
    DELETE FROM probe;
    COMMIT;
";
const SELECT_WRITTEN_BEFORE: &str = "SELECT key, mod_rev FROM kv
    WHERE key >= ?1 AND mod_time < ?2 ORDER BY key";
const DELETE: &str = "DELETE FROM kv WHERE key = ?1";
const UPDATE_REVISION: &str = "UPDATE meta SET revision = ?1 WHERE id = 0";

/// Idle read connections kept for reuse; more concurrent reads open (and then close) extra ones.
const IDLE_READERS: usize = 8;

/// How a [`SqliteStore`] is tuned; [`Default`] suits the API server.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Events retained in memory for watches to resume from (default 10,000). A watcher that falls
    /// further behind than this is ended with `Compacted` and must relist.
    pub window: usize,
    /// The most writes one transaction takes (default 4,096): bounds the latency a huge queue adds
    /// to the first write in it, while still sharing one fsync among many writes.
    pub max_batch: usize,
    /// The most writes waiting for the writer thread (default 8,192): past it, callers wait to
    /// queue, so a burst the disk cannot keep up with holds memory bounded (the API server's
    /// in-flight limit then turns clients away).
    pub queue: usize,
    /// A quota on the database's size in bytes (none by default), as etcd's
    /// `--quota-backend-bytes`: a write past it fails with "database or disk is full", exactly as
    /// when the disk itself fills, and works again once deletions have made room.
    pub max_size: Option<u64>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            window: DEFAULT_CAPACITY,
            max_batch: 4096,
            queue: 8192,
            max_size: None,
        }
    }
}

/// The durable [`Store`]: acknowledged writes survive a crash (even `kill -9` or power loss, as far
/// as the disk honours fsync), and concurrent writes share commits.
pub struct SqliteStore {
    /// Taken on drop, which tells the writer thread to finish.
    requests: Option<mpsc::Sender<Job>>,
    writer: Option<thread::JoinHandle<()>>,
    shared: Arc<Shared>,
    readers: Arc<Readers>,
}

/// What the writer thread publishes and the store's callers read.
struct Shared {
    window: Arc<Window>,
    /// The revision of the last acknowledged write.
    revision: AtomicU64,
    /// Transactions committed since open.
    commits: AtomicU64,
    /// Why the last write transaction failed, until one succeeds: the store is then unhealthy.
    failure: Mutex<Option<String>>,
}

impl Shared {
    fn set_failure(&self, failure: Option<String>) {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = failure;
    }

    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Work for the writer thread.
enum Job {
    /// A write, with where to send its outcome.
    Write(Request),
    /// A health probe: a small write transaction, committed and undone, to learn whether writes
    /// work again after a failure.
    Probe(oneshot::Sender<Result<()>>),
}

/// A write waiting for the writer thread, with where to send its outcome.
struct Request {
    write: Write,
    reply: oneshot::Sender<Result<KeyValue>>,
}

impl SqliteStore {
    /// Opens (or creates) the store at `path`.
    ///
    /// This is synchronous: it opens the file, sets WAL mode and `synchronous=FULL`, creates the
    /// tables if needed and starts the writer thread. It does brief blocking I/O, which is fine at
    /// start-up; from a busy runtime, call it inside `spawn_blocking`.
    pub fn open(path: &Path, opts: SqliteOptions) -> Result<Self> {
        let conn = open_writer(path)?;
        if let Some(max_size) = opts.max_size {
            let page_size: u64 = conn
                .query_row("PRAGMA page_size", [], |row| row.get(0))
                .map_err(|e| backend(path, e))?;
            conn.pragma_update(None, "max_page_count", (max_size / page_size.max(1)).max(1))
                .map_err(|e| backend(path, e))?;
        }
        let revision = conn
            .query_row(SELECT_REVISION, [], |row| row.get::<_, Revision>(0))
            .map_err(|e| backend(path, e))?;
        let readers = Arc::new(Readers {
            path: path.to_owned(),
            idle: Mutex::new(Vec::new()),
        });
        // Fail now, not on the first read, if the file cannot be read concurrently.
        readers.read(|_| Ok(()))?;
        let shared = Arc::new(Shared {
            window: Window::new(opts.window, revision),
            revision: AtomicU64::new(revision),
            commits: AtomicU64::new(0),
            failure: Mutex::new(None),
        });
        let (requests, queue) = mpsc::channel(opts.queue.max(1));
        let writer = Writer {
            conn,
            revision,
            shared: Arc::clone(&shared),
            max_batch: opts.max_batch,
        };
        let writer = thread::Builder::new()
            .name("store-sqlite-writer".into())
            .spawn(move || writer.run(queue))
            .map_err(|e| StoreError::Backend(format!("starting the writer thread: {e}")))?;
        tracing::debug!(path = %path.display(), revision, "opened sqlite store");
        Ok(Self {
            requests: Some(requests),
            writer: Some(writer),
            shared,
            readers,
        })
    }

    /// Transactions committed since open: with concurrent writers this is far lower than the number
    /// of writes, which is the point of group commit (and what tests and metrics check).
    pub fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }

    async fn submit(&self, write: Write) -> Result<KeyValue> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(Job::Write(Request { write, reply }))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let readers = Arc::clone(&self.readers);
        tokio::task::spawn_blocking(move || readers.read(read))
            .await
            .map_err(|e| StoreError::Backend(format!("read task: {e}")))?
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Closing the queue lets the writer finish what is queued and close its connection, so the
        // file is released when drop returns (a reopen then sees everything).
        drop(self.requests.take());
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!("sqlite writer thread panicked");
        }
        self.shared.window.close();
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        self.submit(Write::Create {
            key: key.to_owned(),
            value,
        })
        .await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        self.submit(Write::Update {
            key: key.to_owned(),
            value,
            expected,
        })
        .await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        self.submit(Write::Delete {
            key: key.to_owned(),
            expected,
        })
        .await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let key = key.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(SELECT_KEY)?
                .query_row([&key], |row| key_value(key.clone(), row, 0))
                .optional()
        })
        .await
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        let prefix = prefix.to_owned();
        self.read(move |conn| {
            // One read transaction: the revision and the keys come from the same WAL snapshot.
            let tx = conn.unchecked_transaction()?;
            let revision = tx.query_row(SELECT_REVISION, [], |row| row.get::<_, Revision>(0))?;
            let mut kvs = Vec::new();
            {
                let mut select = tx.prepare_cached(SELECT_FROM)?;
                let mut rows = select.query([&prefix])?;
                // Keys under a prefix are contiguous in byte order, starting at the prefix itself.
                while let Some(row) = rows.next()? {
                    let key: String = row.get(0)?;
                    if !key.starts_with(&prefix) {
                        break;
                    }
                    kvs.push(key_value(key, row, 1)?);
                }
            }
            tx.finish()?;
            Ok((kvs, revision))
        })
        .await
    }

    async fn written_before(
        &self,
        prefix: &str,
        before: std::time::SystemTime,
        limit: usize,
    ) -> Result<Vec<(String, Revision)>> {
        let prefix = prefix.to_owned();
        let before = crate::unix_millis(before);
        self.read(move |conn| {
            let mut select = conn.prepare_cached(SELECT_WRITTEN_BEFORE)?;
            let mut rows = select.query(params![prefix, before])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let key: String = row.get(0)?;
                if !key.starts_with(&prefix) || out.len() >= limit {
                    break;
                }
                out.push((key, row.get(1)?));
            }
            Ok(out)
        })
        .await
    }

    fn watch(&self, prefix: &str, from: Revision) -> Result<EventStream> {
        self.shared.window.watch(prefix, from)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        // The table holds only current values; history lives in the window alone.
        self.shared.window.compact(revision);
        Ok(())
    }

    fn revision(&self) -> Revision {
        self.shared.revision.load(Ordering::Acquire)
    }

    async fn check(&self) -> Result<()> {
        if self.writer.as_ref().is_none_or(|w| w.is_finished()) {
            return Err(StoreError::Backend(
                "the writer thread has stopped; restart the server".into(),
            ));
        }
        if self.shared.failure().is_none() {
            return Ok(());
        }
        // The last write failed: find out whether writes work again rather than wait for one.
        let (reply, answer) = oneshot::channel();
        self.requests
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(Job::Probe(reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

/// The writer thread's state: the only connection that writes.
struct Writer {
    conn: Connection,
    /// The last committed revision.
    revision: Revision,
    shared: Arc<Shared>,
    max_batch: usize,
}

impl Writer {
    fn run(mut self, mut queue: mpsc::Receiver<Job>) {
        let mut batch = Vec::new();
        while let Some(first) = queue.blocking_recv() {
            let mut probe = match first {
                Job::Write(request) => {
                    batch.push(request);
                    None
                }
                Job::Probe(reply) => Some(reply),
            };
            // Everything that queued while the last commit was syncing joins this one.
            while probe.is_none() && batch.len() < self.max_batch {
                match queue.try_recv() {
                    Ok(Job::Write(request)) => batch.push(request),
                    Ok(Job::Probe(reply)) => probe = Some(reply),
                    Err(_) => break,
                }
            }
            if !batch.is_empty() {
                self.commit(&mut batch);
            }
            if let Some(reply) = probe {
                let _ = reply.send(self.probe());
            }
        }
    }

    /// Writes a page-sized row and removes it again, in two committed transactions, so that
    /// both a full disk (which fails the commit) and a full quota (which fails the insert) show.
    fn probe(&mut self) -> Result<()> {
        let outcome = self
            .conn
            .execute_batch(PROBE)
            .map_err(|e| StoreError::Backend(e.to_string()));
        if !self.conn.is_autocommit() {
            // A failed statement left its transaction open; the next batch needs a clean slate.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        match &outcome {
            Ok(()) => self.shared.set_failure(None),
            Err(e) => self.shared.set_failure(Some(e.to_string())),
        }
        outcome
    }

    /// Applies, commits and answers one batch.
    fn commit(&mut self, batch: &mut Vec<Request>) {
        let (writes, replies): (Vec<_>, Vec<_>) = batch
            .drain(..)
            .map(|request| (request.write, request.reply))
            .unzip();
        let count = writes.len();
        let outcomes = match self.transact(writes) {
            Ok(outcomes) => outcomes,
            Err(error) => {
                // Rolled back: none of the batch happened, and the revision did not move.
                tracing::error!(%error, writes = count, "sqlite write batch failed");
                self.shared.set_failure(Some(error.to_string()));
                let error = StoreError::Backend(error.to_string());
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
                return;
            }
        };
        self.shared.set_failure(None);
        let mut events = Vec::with_capacity(count);
        let mut answers = Vec::with_capacity(count);
        for outcome in outcomes {
            match outcome {
                Ok(event) => {
                    answers.push(Ok(event.kv.clone()));
                    events.push(event);
                }
                Err(error) => answers.push(Err(error)),
            }
        }
        tracing::trace!(
            writes = count,
            events = events.len(),
            revision = self.revision,
            "commit"
        );
        // Publish before acknowledging: a caller that has its answer finds the event in the window
        // and the revision in `revision()`.
        if !events.is_empty() {
            self.shared.window.publish(events);
        }
        self.shared.revision.store(self.revision, Ordering::Release);
        for (reply, answer) in replies.into_iter().zip(answers) {
            // A caller that stopped waiting still had its write applied, like any crashed client.
            let _ = reply.send(answer);
        }
    }

    /// Runs the writes in one transaction and commits it if any succeeded. Failed checks fail only
    /// their write; an SQLite error fails the whole batch.
    fn transact(&mut self, writes: Vec<Write>) -> Result<Vec<Result<Event>>, BatchError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Revisions are only unique if this thread is the file's only writer; a second store open
        // on the same file (another process, say) shows up here as a revision we did not write.
        // Cached statements: parsing the SQL of each batch again was 1% of a rollout's CPU.
        let stored = tx
            .prepare_cached(SELECT_REVISION)?
            .query_row([], |row| row.get::<_, Revision>(0))?;
        if stored != self.revision {
            return Err(BatchError::NotOnlyWriter {
                stored,
                ours: self.revision,
            });
        }
        let mut revision = self.revision;
        let mut outcomes = Vec::with_capacity(writes.len());
        {
            let mut select = tx.prepare_cached(SELECT_KEY)?;
            let mut upsert = tx.prepare_cached(UPSERT)?;
            let now = crate::unix_millis(clock::system_now());
            let mut delete = tx.prepare_cached(DELETE)?;
            for write in writes {
                let key = write.key();
                let current = select
                    .query_row([key], |row| key_value(key.to_owned(), row, 0))
                    .optional()?;
                match write.apply(current, revision + 1) {
                    Ok(event) => {
                        let kv = &event.kv;
                        match event.kind {
                            EventKind::Put => upsert.execute(params![
                                kv.key,
                                &kv.value[..],
                                kv.create_revision,
                                kv.mod_revision,
                                now,
                            ])?,
                            EventKind::Delete => delete.execute([&kv.key])?,
                        };
                        revision += 1;
                        outcomes.push(Ok(event));
                    }
                    Err(error) => outcomes.push(Err(error)),
                }
            }
        }
        if revision != self.revision {
            tx.prepare_cached(UPDATE_REVISION)?.execute([revision])?;
            tx.commit()?;
            self.revision = revision;
            self.shared.commits.fetch_add(1, Ordering::Relaxed);
        }
        // Otherwise every write failed its check: the transaction rolls back on drop, no fsync.
        Ok(outcomes)
    }
}

/// Why a whole batch failed (and was rolled back).
#[derive(Debug, thiserror::Error)]
enum BatchError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// Revisions are only unique if this thread is the file's only writer.
    #[error("stored revision {stored} is not this writer's {ours}: is the file open twice?")]
    NotOnlyWriter { stored: Revision, ours: Revision },
}

/// Pooled read connections.
struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    /// Runs `read` on an idle connection (or a new one). Blocking: call from `spawn_blocking`.
    fn read<T>(&self, read: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_reader(&self.path).map_err(|e| backend(&self.path, e))?,
        };
        let out = read(&conn).map_err(|e| backend(&self.path, e))?;
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        }
        Ok(out)
    }
}

fn open_writer(path: &Path) -> Result<Connection> {
    let fail = |e| backend(path, e);
    private_files(path)?;
    let conn = Connection::open(path).map_err(fail)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(fail)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(fail)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Backend(format!(
            "{}: journal mode is {mode}, not wal",
            path.display()
        )));
    }
    // FULL syncs the WAL on every commit: a commit that returned is on disk.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(fail)?;
    conn.execute_batch(SCHEMA).map_err(fail)?;
    let has_mod_time: i64 = conn
        .query_row(HAS_MOD_TIME, [], |row| row.get(0))
        .map_err(fail)?;
    if has_mod_time == 0 {
        conn.execute(ADD_MOD_TIME, []).map_err(fail)?;
    }
    Ok(conn)
}

/// The store holds every Secret in the cluster: its file is readable by its owner only. SQLite
/// creates the `-wal` and `-shm` files with the database file's permissions, so creating the
/// database 0600 before SQLite first opens it makes all three private; files left by an older
/// version with wider permissions are narrowed.
#[cfg(unix)]
fn private_files(path: &Path) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let fail = |p: &Path, e: std::io::Error| StoreError::Backend(format!("{}: {e}", p.display()));
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| fail(path, e))?;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = Path::new(&name);
        match std::fs::metadata(file) {
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| fail(file, e))?;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(file, e)),
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn private_files(_path: &Path) -> Result<()> {
    Ok(())
}

fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// Reads `value, create_rev, mod_rev` starting at column `first`.
fn key_value(key: String, row: &Row<'_>, first: usize) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key,
        value: Bytes::from(row.get::<_, Vec<u8>>(first)?),
        create_revision: row.get(first + 1)?,
        mod_revision: row.get(first + 2)?,
    })
}

fn backend(path: &Path, error: rusqlite::Error) -> StoreError {
    StoreError::Backend(format!("{}: {error}", path.display()))
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::Store;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }

    #[tokio::test]
    async fn the_store_and_its_wal_and_shm_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
        // A write makes SQLite use the WAL and the shared-memory index.
        store
            .create("/registry/secrets/default/s", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        for file in [
            path.clone(),
            with_suffix(&path, "-wal"),
            with_suffix(&path, "-shm"),
        ] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }

    #[tokio::test]
    async fn a_store_left_readable_by_others_is_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        {
            let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
            store
                .create("/registry/secrets/default/s", Bytes::from_static(b"{}"))
                .await
                .unwrap();
        }
        for suffix in ["", "-wal", "-shm"] {
            let file = with_suffix(&path, suffix);
            if file.exists() {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
        }
        let _store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
        for file in [
            path.clone(),
            with_suffix(&path, "-wal"),
            with_suffix(&path, "-shm"),
        ] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }
}
