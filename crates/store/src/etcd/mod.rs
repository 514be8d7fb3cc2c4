//! The store over etcd v3, so that several API servers can serve one cluster, as upstream's do.
//!
//! The mapping is upstream's (`k8s.io/apiserver/pkg/storage/etcd3`): a revision is etcd's
//! revision and an object's `resourceVersion` its `mod_revision`; a create is a transaction on
//! `create_revision == 0`, an update or delete a transaction on `mod_revision == expected`; a
//! compaction is etcd's. Revisions therefore mean the same on every API server of one etcd.
//!
//! Watches are served from an in-memory [`Window`] fed by one etcd watch over the whole key space,
//! the same window the other backends use, so a watch behaves alike on every backend (replay,
//! live events, `Compacted` for a watcher that fell out of the window). A write returns once the
//! window holds it: what this store acknowledged, its watchers have. Writes by other API servers
//! arrive through the same etcd watch. When etcd reports that the feed's own position was
//! compacted away (this process was cut off for long), the window jumps past the gap and its
//! watchers end with `Compacted`, so the API server relists, as upstream's reflector does.
//!
//! The etcd key space (or at least everything under the keys the API server uses) is assumed to
//! be rollwright's alone, as an etcd behind kube-apiserver is: a revision spent by another client
//! is one the API server's cache never sees an event for.

pub mod compactor;
mod lease;
pub mod member;
mod members;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use etcd_client::{
    Compare, CompareOp, DeleteOptions, EventType, GetOptions, KvClient, PutOptions, ResponseHeader,
    Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use lease::Leases;
use members::{Members, Retry};
use tokio::{sync::Notify, task::JoinHandle};

use crate::{
    Event, EventKind, EventStream, KeyValue, Result, Revision, Store, StoreError,
    window::{DEFAULT_CAPACITY, Window},
};

/// How many keys one range request of a list fetches: pages keep each response far below gRPC's
/// message limit whatever the size of the whole list.
const LIST_PAGE: i64 = 1_000;

/// The longest pause between attempts to re-establish the etcd watch.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How to talk to etcd.
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// Events kept in memory for watches (see the crate's contract).
    pub window: usize,
    /// How long one request may take before the store reports etcd unavailable. Without a quorum
    /// an etcd member answers "no leader" at once (the client asks it to require one), so this
    /// bounds only the moments before the members notice.
    pub request_timeout: Duration,
    /// How long connecting to one member may take.
    pub connect_timeout: Duration,
    /// Keys under these prefixes are deleted by etcd this long after their last write (upstream
    /// writes Events with a lease of `--event-ttl`).
    pub expiring: Vec<(String, Duration)>,
    /// How often to compact etcd's history ([`compactor`]), as upstream's
    /// `--etcd-compaction-interval`; `None` (or zero) leaves it to someone else (etcd's own
    /// `--auto-compaction-*`, or an operator).
    pub compaction_interval: Option<Duration>,
}

/// Upstream's default `--etcd-compaction-interval`.
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(5 * 60);

impl Default for EtcdOptions {
    fn default() -> Self {
        Self {
            window: DEFAULT_CAPACITY,
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            expiring: Vec::new(),
            compaction_interval: Some(DEFAULT_COMPACTION_INTERVAL),
        }
    }
}

/// A [`Store`] on an etcd cluster.
pub struct EtcdStore {
    members: Arc<Members>,
    window: Arc<Window>,
    /// The newest revision any response has shown: what [`Store::revision`] answers.
    known: Arc<AtomicU64>,
    leases: Leases,
    opts: EtcdOptions,
    /// Told when an acknowledged write has not reached the window in time: the feed's watch is
    /// then on a member that stopped delivering (see [`feed`]).
    stale: Arc<Notify>,
    feed: JoinHandle<()>,
    compactor: Option<JoinHandle<()>>,
}

impl EtcdStore {
    /// Connects to the members at `endpoints` (URLs such as `http://127.0.0.1:2379`) and starts
    /// following etcd's history from its current revision. Fails with
    /// [`StoreError::Unavailable`] when no member answers a read in time.
    pub async fn connect<E: AsRef<str>>(endpoints: &[E], opts: EtcdOptions) -> Result<Self> {
        if endpoints.is_empty() {
            return Err(StoreError::Backend("no etcd endpoints given".into()));
        }
        let members = Arc::new(Members::connect(endpoints, &opts).await?);
        let known = Arc::new(AtomicU64::new(0));
        let start = current(&members, &known, opts.request_timeout)
            .await
            .map_err(|e| {
                let urls: Vec<&str> = endpoints.iter().map(AsRef::as_ref).collect();
                StoreError::Unavailable(format!("cannot reach etcd at {}: {e}", urls.join(",")))
            })?;
        let window = Window::new(opts.window, start);
        let stale = Arc::new(Notify::new());
        let feed = tokio::spawn(feed(
            Feed {
                members: Arc::clone(&members),
                window: Arc::clone(&window),
                known: Arc::clone(&known),
                stale: Arc::clone(&stale),
            },
            opts.request_timeout,
        ));
        let compactor = opts
            .compaction_interval
            .filter(|interval| !interval.is_zero())
            .map(|interval| {
                tokio::spawn(compactor::run(
                    Arc::clone(&members),
                    interval,
                    opts.request_timeout,
                ))
            });
        Ok(Self {
            members,
            window,
            known,
            leases: Leases::new(opts.expiring.clone()),
            opts,
            stale,
            feed,
            compactor,
        })
    }

    /// Runs one round of the compaction protocol now, from what `known` says (the periodic
    /// compactor's step, for a caller that drives the rounds itself).
    pub async fn compaction_round(
        &self,
        known: compactor::Known,
    ) -> (compactor::Known, Result<compactor::Round>) {
        compactor::round(&self.members, known, self.opts.request_timeout).await
    }

    /// Runs one request on the members (see [`Members::call`]) and notes the revision its header
    /// shows.
    async fn call<T, F, Fut>(&self, what: &'static str, retry: Retry, request: F) -> Result<T>
    where
        F: Fn(KvClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
        T: Headed,
    {
        let response = self
            .members
            .call(what, retry, self.opts.request_timeout, request)
            .await?;
        note(&self.known, response.header());
        Ok(response)
    }

    /// A transaction that writes `key` when `compares` hold and reads it otherwise.
    async fn txn(
        &self,
        key: &str,
        compares: Vec<Compare>,
        write: TxnOp,
    ) -> Result<(Revision, etcd_client::TxnResponse)> {
        let txn = Txn::new()
            .when(compares)
            .and_then([write])
            .or_else([TxnOp::get(key, None)]);
        let response = self
            .call("write", Retry::Unsent, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await?;
        let revision = header_revision(response.header())?;
        Ok((revision, response))
    }

    /// How to put `key`: with the lease of its prefix, if its prefix expires.
    async fn put_options(&self, key: &str) -> Result<PutOptions> {
        let lease = self
            .leases
            .for_key(key, &self.members, self.opts.request_timeout)
            .await?;
        Ok(match lease {
            Some(id) => PutOptions::new().with_lease(id),
            None => PutOptions::new(),
        })
    }

    /// Waits until the window has the write at `revision`, so that an acknowledged write is
    /// visible to every watch of this store. The write is durable either way: if the feed is
    /// reconnecting for longer than a request may take, the write is acknowledged without it.
    async fn published(&self, revision: Revision) {
        if tokio::time::timeout(self.opts.request_timeout, self.window.reached(revision))
            .await
            .is_err()
        {
            tracing::warn!(
                revision,
                "etcd store: the watch has not delivered an acknowledged write yet; re-watching"
            );
            self.stale.notify_one();
        }
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        self.feed.abort();
        if let Some(compactor) = &self.compactor {
            compactor.abort();
        }
        self.window.close();
    }
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let (revision, response) = self
            .txn(
                key,
                vec![Compare::create_revision(key, CompareOp::Equal, 0)],
                TxnOp::put(key, value.to_vec(), Some(self.put_options(key).await?)),
            )
            .await?;
        if !response.succeeded() {
            return Err(StoreError::AlreadyExists(key.to_owned()));
        }
        self.published(revision).await;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: revision,
            mod_revision: revision,
        })
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        let (revision, response) = self
            .txn(
                key,
                existing(key, expected)?,
                TxnOp::put(
                    key,
                    value.to_vec(),
                    Some(self.put_options(key).await?.with_prev_key()),
                ),
            )
            .await?;
        if !response.succeeded() {
            return Err(refusal(key, expected, &response));
        }
        let prev = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Put(put) => put.prev_key().map(|kv| kv.create_revision()),
            _ => None,
        });
        let create_revision = revision_of(prev.ok_or_else(|| missing_prev(key))?)?;
        self.published(revision).await;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision,
            mod_revision: revision,
        })
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        let (revision, response) = self
            .txn(
                key,
                existing(key, expected)?,
                TxnOp::delete(key, Some(DeleteOptions::new().with_prev_key())),
            )
            .await?;
        if !response.succeeded() {
            return Err(refusal(key, expected, &response));
        }
        let prev = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(mut delete) => delete.take_prev_kvs().into_iter().next(),
            _ => None,
        });
        let prev = prev.ok_or_else(|| missing_prev(key))?;
        let create_revision = revision_of(prev.create_revision())?;
        let (_, value) = prev.into_key_value();
        self.published(revision).await;
        Ok(KeyValue {
            key: key.to_owned(),
            value: Bytes::from(value),
            create_revision,
            mod_revision: revision,
        })
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let mut response = self
            .call("read", Retry::Any, |mut kv| async move {
                kv.get(key, None).await
            })
            .await?;
        response
            .take_kvs()
            .into_iter()
            .next()
            .map(convert)
            .transpose()
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        let (mut from, end) = key_range(prefix);
        let mut kvs = Vec::new();
        // The first page fixes the revision; the others read at it, so the pages are one snapshot.
        let mut at: Option<Revision> = None;
        loop {
            let mut options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(LIST_PAGE);
            if let Some(at) = at {
                options = options.with_revision(signed(at)?);
            }
            let mut response = self
                .call("list", Retry::Any, |mut kv| {
                    let (from, options) = (from.clone(), options.clone());
                    async move { kv.get(from, Some(options)).await }
                })
                .await?;
            let revision = *at.get_or_insert(header_revision(response.header())?);
            let more = response.more();
            let page = response.take_kvs();
            if let Some(last) = page.last() {
                // The next page starts just after the last key of this one.
                from = [last.key(), &[0]].concat();
            }
            for kv in page {
                kvs.push(convert(kv)?);
            }
            if !more {
                return Ok((kvs, revision));
            }
        }
    }

    fn watch(&self, prefix: &str, from: Revision) -> Result<EventStream> {
        self.window.watch(prefix, from)
    }

    /// Nothing: etcd deletes the keys of [`EtcdOptions::expiring`] itself when their lease runs
    /// out, and their deletions arrive through the watch like any other.
    async fn written_before(
        &self,
        _prefix: &str,
        _before: std::time::SystemTime,
        _limit: usize,
    ) -> Result<Vec<(String, Revision)>> {
        Ok(Vec::new())
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let revision = revision.min(self.revision());
        self.window.compact(revision);
        if revision == 0 {
            return Ok(());
        }
        // Our `compact(r)` keeps what a watch from `r` needs, the events after `r`; etcd's keeps
        // revision `r` itself too, one more than needed, which no watch of ours can tell.
        let response =
            compactor::compact(&self.members, revision, self.opts.request_timeout).await?;
        if let Some(response) = response {
            note(&self.known, response.header());
        }
        Ok(())
    }

    fn revision(&self) -> Revision {
        self.known.load(Ordering::Acquire)
    }

    async fn current_revision(&self) -> Result<Revision> {
        current(&self.members, &self.known, self.opts.request_timeout).await
    }
}

/// Responses that carry etcd's header.
trait Headed {
    fn header(&self) -> Option<&ResponseHeader>;
}

macro_rules! headed {
    ($($t:ty),*) => {
        $(impl Headed for $t {
            fn header(&self) -> Option<&ResponseHeader> {
                <$t>::header(self)
            }
        })*
    };
}

headed!(
    etcd_client::GetResponse,
    etcd_client::TxnResponse,
    etcd_client::CompactionResponse
);

/// What the feed works with: the members, where it publishes, and who tells it that it is stale.
struct Feed {
    members: Arc<Members>,
    window: Arc<Window>,
    known: Arc<AtomicU64>,
    stale: Arc<Notify>,
}

/// Follows etcd's history from the window's revision and publishes it to the window, for as long
/// as the store lives; reconnects after errors and jumps past history etcd compacted away.
///
/// A watch can also go quiet without failing: its member stalls, or its connection is half-open
/// until the keep-alive notices. Acknowledged writes are then missing from the window, so when
/// the store says so ([`Feed::stale`]) the feed re-watches on the member that answered the
/// writes, from where the window stands: nothing is lost or delivered twice either way. Opening a
/// watch is bounded by `timeout` for the same reason.
async fn feed(feed: Feed, timeout: Duration) {
    let Feed {
        members,
        window,
        known,
        stale,
    } = feed;
    let (key, end) = key_range("");
    let mut backoff = Duration::from_millis(50);
    loop {
        let mut client = members.watch_client();
        let from = window.current() + 1;
        let options = WatchOptions::new()
            .with_range(end.clone())
            .with_start_revision(from as i64)
            .with_prev_key();
        let opened = tokio::time::timeout(timeout, client.watch(key.clone(), Some(options)))
            .await
            .unwrap_or_else(|_| Err(etcd_client::Error::WatchError("no answer in time".into())));
        match opened {
            Ok(mut stream) => loop {
                let message = tokio::select! {
                    message = stream.message() => Some(message),
                    () = stale.notified() => None,
                };
                let Some(message) = message else {
                    tracing::warn!(from, "etcd watch delivers nothing; re-watching");
                    break;
                };
                match message {
                    Ok(Some(response)) => {
                        if response.compact_revision() > 0 {
                            let compacted = response.compact_revision() as Revision;
                            tracing::warn!(
                                from,
                                compacted,
                                "etcd store: history after our revision was compacted; watchers relist"
                            );
                            // etcd still has everything from `compacted` on: restart there.
                            window.reset(compacted - 1);
                            break;
                        }
                        if response.canceled() {
                            tracing::warn!(
                                reason = response.cancel_reason(),
                                "etcd watch canceled"
                            );
                            break;
                        }
                        let mut events = Vec::with_capacity(response.events().len());
                        for event in response.events() {
                            match event_of(event) {
                                Ok(event) => events.push(event),
                                Err(e) => tracing::warn!(error = %e, "etcd store: event skipped"),
                            }
                        }
                        if let Some(last) = events.last() {
                            known.fetch_max(last.revision(), Ordering::AcqRel);
                            window.publish(events);
                        }
                        backoff = Duration::from_millis(50);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "etcd watch ended; reconnecting");
                        members.failed();
                        break;
                    }
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "etcd watch failed; retrying");
                members.failed();
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A watch event as the store reports it: a deletion carries the key's last value.
fn event_of(event: &etcd_client::Event) -> Result<Event> {
    let kv = event
        .kv()
        .ok_or_else(|| StoreError::Backend("etcd event without a key".into()))?;
    let prev = event.prev_kv().cloned().map(convert).transpose()?;
    match event.event_type() {
        EventType::Put => {
            let kv = convert(kv.clone())?;
            // etcd sends the previous value of a re-created key too when it is still retained;
            // a creation has none in the store's terms.
            let prev = prev.filter(|_| kv.create_revision != kv.mod_revision);
            Ok(Event {
                kind: EventKind::Put,
                kv,
                prev,
            })
        }
        EventType::Delete => {
            let mod_revision = revision_of(kv.mod_revision())?;
            let last = prev.clone().unwrap_or_else(|| KeyValue {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                value: Bytes::new(),
                create_revision: 0,
                mod_revision,
            });
            Ok(Event {
                kind: EventKind::Delete,
                kv: KeyValue {
                    mod_revision,
                    ..last
                },
                prev,
            })
        }
    }
}

/// etcd's current revision, by a linearizable read of one key (its header is what matters).
async fn current(members: &Members, known: &AtomicU64, timeout: Duration) -> Result<Revision> {
    let options = GetOptions::new().with_keys_only().with_limit(1);
    let response = members
        .call("read", Retry::Any, timeout, |mut kv| {
            let options = options.clone();
            async move { kv.get("/", Some(options)).await }
        })
        .await?;
    let revision = header_revision(response.header())?;
    known.fetch_max(revision, Ordering::AcqRel);
    Ok(revision)
}

/// The compares of an update or delete: the key exists (a missing key has `mod_revision` 0,
/// which must not pass for `expected == 0`) and, if asked, is at `expected`.
fn existing(key: &str, expected: Option<Revision>) -> Result<Vec<Compare>> {
    let mut compares = vec![Compare::version(key, CompareOp::Greater, 0)];
    if let Some(expected) = expected {
        compares.push(Compare::mod_revision(
            key,
            CompareOp::Equal,
            signed(expected)?,
        ));
    }
    Ok(compares)
}

/// Why an update or delete transaction took its `else` branch, from the key it read there.
fn refusal(
    key: &str,
    expected: Option<Revision>,
    response: &etcd_client::TxnResponse,
) -> StoreError {
    let current = response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.mod_revision()),
        _ => None,
    });
    match (current, expected) {
        (Some(current), Some(expected)) => StoreError::Conflict {
            key: key.to_owned(),
            expected,
            current: current.max(0) as Revision,
        },
        _ => StoreError::NotFound(key.to_owned()),
    }
}

fn convert(kv: etcd_client::KeyValue) -> Result<KeyValue> {
    let create_revision = revision_of(kv.create_revision())?;
    let mod_revision = revision_of(kv.mod_revision())?;
    let (key, value) = kv.into_key_value();
    Ok(KeyValue {
        key: String::from_utf8(key)
            .map_err(|e| StoreError::Backend(format!("etcd key is not UTF-8: {e}")))?,
        value: Bytes::from(value),
        create_revision,
        mod_revision,
    })
}

/// The keys under `prefix` as etcd's `[key, range_end)`; the empty prefix is every key.
fn key_range(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    if prefix.is_empty() {
        return (vec![0], vec![0]);
    }
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return (prefix.as_bytes().to_vec(), end);
        }
    }
    // A prefix of only 0xff bytes: everything from it on.
    (prefix.as_bytes().to_vec(), vec![0])
}

fn note(known: &AtomicU64, header: Option<&ResponseHeader>) {
    if let Some(header) = header
        && let Ok(revision) = revision_of(header.revision())
    {
        known.fetch_max(revision, Ordering::AcqRel);
    }
}

fn header_revision(header: Option<&ResponseHeader>) -> Result<Revision> {
    revision_of(
        header
            .ok_or_else(|| StoreError::Backend("etcd response without a header".into()))?
            .revision(),
    )
}

fn revision_of(revision: i64) -> Result<Revision> {
    Revision::try_from(revision)
        .map_err(|_| StoreError::Backend(format!("etcd returned revision {revision}")))
}

pub(super) fn signed(revision: Revision) -> Result<i64> {
    i64::try_from(revision)
        .map_err(|_| StoreError::Backend(format!("revision {revision} is beyond etcd's range")))
}

fn missing_prev(key: &str) -> StoreError {
    StoreError::Backend(format!("etcd did not return the previous value of {key}"))
}

fn timed_out(what: &str, after: Duration) -> StoreError {
    StoreError::Unavailable(format!(
        "etcd did not answer a {what} within {}s",
        after.as_secs_f64()
    ))
}
