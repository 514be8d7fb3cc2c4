//! A store that fails on demand, wrapped around any other.
//!
//! The API server must behave when its storage misbehaves: a full disk or an SQLite error fails
//! writes (reads from the watch cache keep working), a dead writer makes the health checks fail,
//! a lost store watch makes the cache relist. Those conditions are rare and hard to cause for real,
//! so tests (and chaos runs) wrap the real store in a [`FaultyStore`] and switch faults on and off.
//! With no fault switched on it is a transparent pass-through.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::watch;

use crate::{EventStream, KeyValue, Result, Revision, Store, StoreError};

/// A [`Store`] that passes everything to `inner` unless told to fail.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    faults: Mutex<Faults>,
    /// Bumped by [`FaultyStore::break_watches`]; each watch ends when it moves.
    watch_breaks: watch::Sender<u64>,
    /// While `true`, writes wait before reaching `inner`.
    writes_held: watch::Sender<bool>,
    /// While `true`, lists wait before reaching `inner`.
    lists_held: watch::Sender<bool>,
    /// How many writes wait at the held gate now.
    writes_waiting: watch::Sender<usize>,
    /// Lists asked for so far.
    lists: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Faults {
    /// The error every write fails with, while set.
    writes: Option<StoreError>,
    /// The error every read fails with, while set.
    reads: Option<StoreError>,
}

impl FaultyStore {
    /// Wraps `inner`, with no fault switched on.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            faults: Mutex::new(Faults::default()),
            watch_breaks: watch::channel(0).0,
            writes_held: watch::channel(false).0,
            lists_held: watch::channel(false).0,
            writes_waiting: watch::channel(0).0,
            lists: Default::default(),
        }
    }

    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes every write fail with `error` (e.g. a [`StoreError::Backend`] saying the disk is
    /// full), or heals writes with `None`. Failed writes do not happen, as with a real backend.
    pub fn fail_writes(&self, error: Option<StoreError>) {
        self.faults().writes = error;
    }

    /// Makes every read (`get`, `list`) fail with `error`, or heals reads with `None`.
    pub fn fail_reads(&self, error: Option<StoreError>) {
        self.faults().reads = error;
    }

    /// Holds every write before it reaches the store until released, so a test can keep requests
    /// in flight for as long as it needs.
    pub fn hold_writes(&self, held: bool) {
        self.writes_held.send_replace(held);
    }

    /// Holds every list before it reaches the store until released, so a test can make writes
    /// while a relisting cache is blind to them.
    pub fn hold_lists(&self, held: bool) {
        self.lists_held.send_replace(held);
    }

    /// Ends every open watch with [`StoreError::Compacted`], as when a watcher falls out of the
    /// store's window; watches opened later are not affected.
    pub fn break_watches(&self) {
        self.watch_breaks.send_modify(|n| *n += 1);
    }

    fn write_fault(&self) -> Result<()> {
        self.faults().writes.clone().map_or(Ok(()), Err)
    }

    fn read_fault(&self) -> Result<()> {
        self.faults().reads.clone().map_or(Ok(()), Err)
    }

    /// How many lists were asked for so far (failed ones included).
    pub fn lists(&self) -> usize {
        self.lists.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until `n` writes wait at the gate [`FaultyStore::hold_writes`] closed.
    pub async fn until_writes_waiting(&self, n: usize) {
        let mut rx = self.writes_waiting.subscribe();
        let _ = rx.wait_for(|waiting| *waiting >= n).await;
    }

    async fn before_write(&self) -> Result<()> {
        self.writes_waiting.send_modify(|n| *n += 1);
        wait_released(&self.writes_held).await;
        self.writes_waiting.send_modify(|n| *n -= 1);
        self.write_fault()
    }
}

/// A watch of the inner store that [`FaultyStore::break_watches`] can end.
struct BreakableWatch {
    inner: EventStream,
    breaks: watch::Receiver<u64>,
    from: Revision,
    done: bool,
}

impl BreakableWatch {
    async fn next(&mut self) -> Option<Result<crate::Event>> {
        if self.done {
            return None;
        }
        tokio::select! {
            biased;
            // A break (or the store going away) ends the watch as a fall out of the window would.
            _ = self.breaks.changed() => {
                self.done = true;
                Some(Err(StoreError::Compacted { requested: self.from, oldest: self.from + 1 }))
            }
            item = self.inner.next() => {
                if let Some(Ok(event)) = &item {
                    self.from = event.revision();
                }
                self.done = !matches!(item, Some(Ok(_)));
                item
            }
        }
    }
}

/// Waits while `gate` holds `true`.
async fn wait_released(gate: &watch::Sender<bool>) {
    let mut rx = gate.subscribe();
    // The sender lives as long as the store that is being called, so this cannot fail.
    let _ = rx.wait_for(|held| !*held).await;
}

#[async_trait::async_trait]
impl Store for FaultyStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        self.before_write().await?;
        self.inner.create(key, value).await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        self.before_write().await?;
        self.inner.update(key, value, expected).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        self.before_write().await?;
        self.inner.delete(key, expected).await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.read_fault()?;
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        self.lists
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        wait_released(&self.lists_held).await;
        self.read_fault()?;
        self.inner.list(prefix).await
    }

    async fn written_before(
        &self,
        prefix: &str,
        before: std::time::SystemTime,
        limit: usize,
    ) -> Result<Vec<(String, Revision)>> {
        self.read_fault()?;
        self.inner.written_before(prefix, before, limit).await
    }

    fn watch(&self, prefix: &str, from: Revision) -> Result<EventStream> {
        let mut breaks = self.watch_breaks.subscribe();
        breaks.borrow_and_update();
        let watch = BreakableWatch {
            inner: self.inner.watch(prefix, from)?,
            breaks,
            from,
            done: false,
        };
        Ok(futures::stream::unfold(watch, |mut w| async move {
            let item = w.next().await?;
            Some((item, w))
        })
        .boxed())
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }

    fn revision(&self) -> Revision {
        self.inner.revision()
    }

    async fn check(&self) -> Result<()> {
        self.write_fault()?;
        self.inner.check().await
    }
}
