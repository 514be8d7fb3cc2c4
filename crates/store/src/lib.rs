//! The revisioned key-value store behind the API server.
//!
//! Every write gets the next value of one global revision counter; that revision is what the API
//! server shows as an object's `resourceVersion`. Updates and deletes are compare-and-swap on it,
//! and a watch can resume from any revision still retained. The value is opaque bytes (the object's
//! JSON without `resourceVersion`, which the API server injects from the revision on read), so the
//! store knows nothing of Kubernetes.
//!
//! Backends: [`sqlite`] (durable, group commit; the default), [`etcd`] (several API servers on one
//! etcd cluster) and [`memory`] (tests).

#![warn(missing_docs)]

pub mod etcd;
pub mod faulty;
pub mod memory;
pub mod sqlite;
mod window;

use bytes::Bytes;
use futures::stream::BoxStream;

/// A position in the store's single, global history. Revision 0 is "before anything".
pub type Revision = u64;

/// One key at one revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The full key, e.g. `/registry/pods/default/web-0`.
    pub key: String,
    /// The stored bytes.
    pub value: Bytes,
    /// The revision that created this key (unchanged by updates).
    pub create_revision: Revision,
    /// The revision of the last write to this key. For a deletion event it is the deletion's
    /// revision while `value` is the last value the key had.
    pub mod_revision: Revision,
}

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Created or updated (see [`Event::prev`] to tell which).
    Put,
    /// Deleted.
    Delete,
}

/// A change, as seen by a watcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change (for deletions: the last value, at the deletion's revision).
    pub kv: KeyValue,
    /// The key before the change; `None` for a creation.
    pub prev: Option<KeyValue>,
}

impl Event {
    /// The revision at which this event happened.
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// `create` of a key that exists.
    #[error("key {0} already exists")]
    AlreadyExists(String),
    /// `update`/`delete` of a key that does not exist.
    #[error("key {0} not found")]
    NotFound(String),
    /// Compare-and-swap failed: the key is at another revision now.
    #[error("key {key} is at revision {current}, not {expected}")]
    Conflict {
        /// The key.
        key: String,
        /// The revision the caller expected.
        expected: Revision,
        /// The revision the key has.
        current: Revision,
    },
    /// A watch asked for history that compaction already removed.
    #[error("revision {requested} is compacted (oldest retained is {oldest})")]
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// The oldest revision a watch can start after.
        oldest: Revision,
    },
    /// The backend failed (I/O, corruption). The write, if any, did not happen.
    #[error("storage backend: {0}")]
    Backend(String),
    /// The backend cannot be reached or cannot decide now (etcd without a quorum). A write that
    /// fails so may or may not have happened; retrying later is the remedy.
    #[error("storage backend unavailable: {0}")]
    Unavailable(String),
    /// The store is shutting down.
    #[error("store is closed")]
    Closed,
}

/// Milliseconds since the Unix epoch, as the stores record when each key was written.
pub(crate) fn unix_millis(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Result of a store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A stream of events for keys under a prefix, in revision order.
pub type EventStream = BoxStream<'static, Result<Event>>;

/// The contract every backend keeps.
///
/// Writes are linearizable and return only once durable (for durable backends). A watch started
/// from revision `r` yields every event with revision `> r` for its prefix, in order, with no gaps,
/// then follows live writes; if `r` is older than the retained window it fails with
/// [`StoreError::Compacted`].
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates `key`; fails with [`StoreError::AlreadyExists`] if it exists.
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue>;

    /// Replaces `key` if its `mod_revision` is `expected`, or unconditionally when `expected` is
    /// `None`.
    async fn update(&self, key: &str, value: Bytes, expected: Option<Revision>)
    -> Result<KeyValue>;

    /// Deletes `key` if its `mod_revision` is `expected` (or unconditionally when `None`); returns
    /// the last value with `mod_revision` set to the deletion's revision.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue>;

    /// Reads one key at the current revision.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Reads every key under `prefix` at one consistent revision, which it returns too.
    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)>;

    /// Watches keys under `prefix` for events after revision `from`.
    fn watch(&self, prefix: &str, from: Revision) -> Result<EventStream>;

    /// Drops history at and below `revision`: watches from there on fail with `Compacted`.
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// The revision of the last acknowledged write this store knows of.
    fn revision(&self) -> Revision;

    /// The revision of the last write acknowledged by any writer, asked of the backend now: what a
    /// consistent read must wait for when other processes write to the same backend (several API
    /// servers on one etcd). A backend that is the only writer knows it without asking.
    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.revision())
    }

    /// Keys under `prefix` last written before `before` (wall-clock time), with their revisions,
    /// at most `limit` of them: what a time-to-live sweep deletes. The caller deletes with
    /// compare-and-swap on the revision, so a key written meanwhile is kept (as an etcd lease is
    /// renewed by each write upstream makes to an Event).
    async fn written_before(
        &self,
        prefix: &str,
        before: std::time::SystemTime,
        limit: usize,
    ) -> Result<Vec<(String, Revision)>>;

    /// Whether the store can take writes now (the API server's `etcd` health check): `Ok`, or why
    /// not. A backend that failed may probe itself here, so that the check turns healthy again by
    /// itself once the cause (a full disk, say) is gone.
    async fn check(&self) -> Result<()> {
        Ok(())
    }
}
