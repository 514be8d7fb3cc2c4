//! The watch cache: every object in memory, by resource, fed by one watch on the store.
//!
//! All reads (get, list, watch) are served from here, as upstream's cacher does; the store is only
//! read at start-up. Each resource keeps its objects, a bounded history of recent events (so a
//! watch can resume from a recent `resourceVersion`), and a broadcast channel for live events.
//! Objects are kept as serialized JSON with their `resourceVersion` already set, plus the few
//! parsed fields that selectors need, so a list of 100,000 pods is a concatenation of bytes.

mod prepared;
mod recent;

use crate::{
    object,
    registry::{Cluster, Kind, Registry},
};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use std::{
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    sync::{
        Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};
use store::{EventKind, KeyValue, Revision, Store};
use tokio::sync::{broadcast, watch};

/// One object as the cache holds it.
///
/// The cache holds every object of the cluster and a history of recent versions, so each entry
/// is kept to the JSON and as little beside it as selectors need: with 150,000 pods the per-entry
/// extras (labels as a JSON map, each selectable field's name as its own string) once took a
/// third as much memory as the JSON itself. See BENCHMARKS.md, issue 15.
#[derive(Debug)]
pub struct Entry {
    /// The object's revision (its `resourceVersion`).
    pub rev: Revision,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: Box<str>,
    /// Name.
    pub name: Box<str>,
    /// The whole object as JSON, `resourceVersion` included.
    pub json: Bytes,
    /// `metadata.labels` with string values, by key.
    labels: Labels,
    /// The kind's selectable field names, shared by every entry of the kind.
    field_names: Arc<[String]>,
    /// Their values in the same order.
    field_values: Packed,
}

impl Entry {
    /// Parses the object.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// The value of a selectable field (the kind's `selectable_fields`).
    pub fn field(&self, name: &str) -> Option<String> {
        match name {
            "metadata.name" => Some(self.name.to_string()),
            "metadata.namespace" => Some(self.namespace.to_string()),
            _ => self.field_str(name).map(str::to_string),
        }
    }

    /// The value of a selectable field other than the name and namespace, unparsed.
    fn field_str(&self, name: &str) -> Option<&str> {
        self.field_names
            .iter()
            .position(|f| f == name)
            .and_then(|i| self.field_values.get(i))
    }

    /// The node the object is indexed under ([`NODE_FIELD`]), if it has one.
    fn node(&self) -> Option<&str> {
        self.field_str(NODE_FIELD).filter(|n| !n.is_empty())
    }

    /// Whether the selectable field `name` is `value`, without copying it (what [`Entry::field`]
    /// would say, for the scans that compare it over every object of a kind).
    pub fn field_is(&self, name: &str, value: &str) -> bool {
        match name {
            "metadata.name" => &*self.name == value,
            "metadata.namespace" => &*self.namespace == value,
            _ => self.field_str(name).is_some_and(|v| v == value),
        }
    }

    /// The value of label `key`, if it is set to a string (a non-string value counts as absent,
    /// as a label selector over the JSON map has it).
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    /// Whether the labels satisfy `selector`.
    pub fn matches_labels(&self, selector: &api::selector::LabelSelector) -> bool {
        selector.matches(|k| self.labels.get(k))
    }
}

/// Strings packed into one allocation, read back by position.
#[derive(Debug, Default)]
struct Packed {
    text: Box<str>,
    /// Where each string ends in `text`.
    ends: Box<[u32]>,
}

impl Packed {
    fn new<'a>(items: impl IntoIterator<Item = &'a str>) -> Self {
        let mut text = String::new();
        let mut ends = Vec::new();
        for s in items {
            text.push_str(s);
            ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        }
        Packed {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = match i {
            0 => 0,
            _ => *self.ends.get(i - 1)? as usize,
        };
        self.text.get(start..end)
    }
}

/// Labels as sorted (key, value) pairs packed together: keys at even positions, values at odd.
#[derive(Debug, Default)]
struct Labels(Packed);

impl Labels {
    fn of(obj: &Value) -> Self {
        let Some(map) = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
        else {
            return Labels::default();
        };
        let mut pairs: Vec<(&str, &str)> = map
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
            .collect();
        pairs.sort_unstable();
        Labels(Packed::new(pairs.into_iter().flat_map(|(k, v)| [k, v])))
    }

    fn get(&self, key: &str) -> Option<&str> {
        let n = self.0.len() / 2;
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.0.get(2 * mid)?.cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.0.get(2 * mid + 1),
            }
        }
        None
    }
}

/// What the cache holds for one resource, in bytes (what was asked of the allocator, without its
/// rounding): `rollwright bench nodes` prints it per pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Objects held.
    pub objects: usize,
    /// Their JSON.
    pub json_bytes: usize,
    /// Everything else per object: the entry, its map key, name, labels and field values.
    pub other_bytes: usize,
    /// Events in the watch history.
    pub history_events: usize,
    /// Older versions the history (and its events' previous states) keeps alive besides the
    /// current objects: their count, and their JSON and other bytes together.
    pub history_versions: usize,
    /// See `history_versions`.
    pub history_bytes: usize,
}

impl Entry {
    /// The heap bytes of this entry besides its JSON.
    fn other_bytes(&self) -> usize {
        std::mem::size_of::<Entry>()
            + 2 * std::mem::size_of::<usize>() // the `Arc`'s counts
            + self.namespace.len()
            + self.name.len()
            + self.labels.0.text.len()
            + std::mem::size_of_val(&*self.labels.0.ends)
            + self.field_values.text.len()
            + std::mem::size_of_val(&*self.field_values.ends)
    }
}

/// The kind of a watch event, as the wire names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

impl ResourceCache {
    /// Notes `entry`, held under `key`, in [`ResourceCache::by_node`].
    fn index(&mut self, key: &str, entry: &Entry) {
        if let Some(node) = entry.node() {
            self.by_node
                .entry(node.into())
                .or_default()
                .insert(key.to_string());
        }
    }

    /// Takes `entry`, held under `key` until now, out of [`ResourceCache::by_node`].
    fn unindex(&mut self, key: &str, entry: &Entry) {
        let Some(node) = entry.node() else { return };
        if let Some(keys) = self.by_node.get_mut(node) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_node.remove(node);
            }
        }
    }
}

/// A change to one object.
#[derive(Debug)]
pub struct CacheEvent {
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for deletions, its last state at the deletion revision).
    pub entry: Arc<Entry>,
    /// The object before the change, to tell when it leaves or enters a selector.
    pub prev: Option<Arc<Entry>>,
}

/// The selectable field the cache indexes objects by, where their kind has it: a pod's node.
/// The Node authorizer asks for a node's pods on every request a kubelet makes for a pod's
/// token, Secret or ConfigMap (upstream's keeps a graph of them for it); scanning the
/// namespace's pods for each one was a tenth of `rollwright up`'s CPU in a 2,000-pod rollout
/// once every pod's token was asked for (issue 42).
const NODE_FIELD: &str = "spec.nodeName";

struct ResourceCache {
    objects: BTreeMap<String, Arc<Entry>>,
    /// The keys of `objects` by node ([`Entry::node`]), for the kinds that have one.
    by_node: HashMap<Box<str>, BTreeSet<String>>,
    history: VecDeque<Arc<CacheEvent>>,
    /// The bytes of the objects `history` holds (each event's object after the change).
    history_bytes: usize,
    /// Every event with a revision above this one is in `history`.
    window_start: Revision,
    tx: broadcast::Sender<Arc<CacheEvent>>,
    /// Counts every change to `objects` (see [`ChangeCount`]).
    changes: Arc<AtomicU64>,
}

/// How many times a resource's contents have changed in the cache. What a reader derives from
/// the objects (the RBAC policy) stays current exactly as long as the count it noted before
/// reading them: a change is counted under the same lock that applies it, so a request that
/// comes after the cache applied a write sees the new count, with no follower task in between.
#[derive(Clone, Debug)]
pub struct ChangeCount(Arc<AtomicU64>);

impl ChangeCount {
    /// The count now.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// A consistent page source: the list a paginated request started from.
struct Snapshot {
    entries: Arc<Vec<Arc<Entry>>>,
    created: Instant,
}

/// The cache of every resource.
pub struct Cache {
    registry: Arc<Registry>,
    /// Per stored resource (`group/plural`), created on first use.
    resources: RwLock<HashMap<String, Arc<RwLock<ResourceCache>>>>,
    /// The revision the cache was first filled at: a resource first seen later has every event
    /// since then (there were none), so its watch window starts here.
    origin: std::sync::atomic::AtomicU64,
    revision: watch::Sender<Revision>,
    history_limit: usize,
    history_byte_limit: usize,
    following: AtomicBool,
    snapshots: Mutex<HashMap<u64, Snapshot>>,
    next_snapshot: std::sync::atomic::AtomicU64,
    /// What writers know of the objects they are storing (see [`prepared`]).
    notes: prepared::Notes,
    /// The objects this server wrote last, parsed (see [`recent`]).
    recent: recent::Recent,
}

/// How long a paginated list's snapshot is kept for `continue` (upstream's etcd compaction
/// interval is 5 minutes, after which a continue token expires).
const SNAPSHOT_TTL: Duration = Duration::from_secs(300);
/// At most this many snapshots are kept; older ones expire early.
const MAX_SNAPSHOTS: usize = 256;
/// The live channel's capacity per resource: a watcher this far behind is ended with 410 and
/// relists, as upstream drops a watcher that cannot keep up. The channel keeps its last events
/// alive, so this also bounds memory beside the history.
const BROADCAST_CAPACITY: usize = 1 << 14;
/// The history of one resource holds at most this many bytes of objects by default (besides its
/// limit in events), so that a kind with large objects cannot grow the cache without bound.
pub const DEFAULT_HISTORY_BYTES: usize = 64 << 20;
/// The first wait before relisting after a failed list, doubled on each failure up to the most.
const RELIST_FIRST_DELAY: Duration = Duration::from_millis(200);
const RELIST_MAX_DELAY: Duration = Duration::from_secs(10);

/// How a watcher starts.
pub struct Subscription {
    /// Events to send first (replayed history or synthetic ADDED events), in order.
    pub initial: Vec<Arc<CacheEvent>>,
    /// The live events after them.
    pub live: broadcast::Receiver<Arc<CacheEvent>>,
    /// The revision up to which `initial` brings the watcher.
    pub rev: Revision,
}

/// Why a watch cannot start where it asked.
#[derive(Debug, thiserror::Error)]
#[error("too old resource version: {requested} ({oldest})")]
pub struct TooOld {
    /// The revision asked for.
    pub requested: Revision,
    /// The oldest revision a watch can start from for this resource.
    pub oldest: Revision,
}

fn read(l: &RwLock<ResourceCache>) -> RwLockReadGuard<'_, ResourceCache> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write(l: &RwLock<ResourceCache>) -> RwLockWriteGuard<'_, ResourceCache> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl Cache {
    /// An empty cache of the kinds in `registry` that keeps `history_limit` events per resource
    /// (and at most [`DEFAULT_HISTORY_BYTES`] of them).
    pub fn new(history_limit: usize, registry: Arc<Registry>) -> Self {
        Self::with_limits(history_limit, DEFAULT_HISTORY_BYTES, registry)
    }

    /// An empty cache whose history per resource keeps at most `events` events and `bytes` bytes
    /// of objects (at least 16 events, whatever their size).
    pub fn with_limits(events: usize, bytes: usize, registry: Arc<Registry>) -> Self {
        Self {
            registry,
            resources: RwLock::new(HashMap::new()),
            origin: std::sync::atomic::AtomicU64::new(0),
            revision: watch::channel(0).0,
            history_limit: events.max(16),
            history_byte_limit: bytes,
            following: AtomicBool::new(false),
            snapshots: Mutex::new(HashMap::new()),
            next_snapshot: std::sync::atomic::AtomicU64::new(1),
            notes: prepared::Notes::default(),
            recent: recent::Recent::default(),
        }
    }

    /// The slot of the resource `def` is stored in (a view shares its owner's), created empty on
    /// first use; a resource created after start-up starts its window at the current revision.
    fn slot(&self, def: &Kind) -> Arc<RwLock<ResourceCache>> {
        let (group, plural) = def.storage_resource();
        let key = slot_key(group, plural);
        if let Some(s) = self
            .resources
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return s.clone();
        }
        let mut all = self.resources.write().unwrap_or_else(|e| e.into_inner());
        all.entry(key)
            .or_insert_with(|| {
                Arc::new(RwLock::new(ResourceCache {
                    objects: BTreeMap::new(),
                    by_node: HashMap::new(),
                    history: VecDeque::new(),
                    history_bytes: 0,
                    window_start: self.origin.load(std::sync::atomic::Ordering::Acquire),
                    tx: broadcast::channel(BROADCAST_CAPACITY).0,
                    changes: Arc::default(),
                }))
            })
            .clone()
    }

    /// The change count of the resource `def` is stored in.
    pub fn changes(&self, def: &Kind) -> ChangeCount {
        ChangeCount(read(&self.slot(def)).changes.clone())
    }

    /// The registry of kinds this cache serves.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The revision the cache has applied.
    pub fn revision(&self) -> Revision {
        *self.revision.borrow()
    }

    /// Waits until the cache has applied `rev`, or `timeout` passes (returns whether it got there).
    pub async fn wait_for(&self, rev: Revision, timeout: Duration) -> bool {
        let mut rx = self.revision.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= rev))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// One object.
    pub fn get(&self, def: &Kind, namespace: Option<&str>, name: &str) -> Option<Arc<Entry>> {
        read(&self.slot(def))
            .objects
            .get(&object_key(def, namespace, name))
            .cloned()
    }

    /// Objects of a resource, in key order, optionally in one namespace, with the revision they
    /// are consistent at.
    pub fn list(&self, def: &Kind, namespace: Option<&str>) -> (Vec<Arc<Entry>>, Revision) {
        let slot = self.slot(def);
        let guard = read(&slot);
        let rev = self.revision();
        let items = match namespace.filter(|_| def.namespaced) {
            Some(ns) => {
                let start = format!("{ns}/");
                guard
                    .objects
                    .range(start.clone()..)
                    .take_while(|(k, _)| k.starts_with(&start))
                    .map(|(_, v)| v.clone())
                    .collect()
            }
            None => guard.objects.values().cloned().collect(),
        };
        (items, rev)
    }

    /// The objects on node `node` (their `spec.nodeName`) in `namespace` (all namespaces when
    /// none), from the cache's index of them, in key order.
    pub fn list_on_node(&self, def: &Kind, namespace: Option<&str>, node: &str) -> Vec<Arc<Entry>> {
        let slot = self.slot(def);
        let guard = read(&slot);
        let prefix = namespace
            .filter(|_| def.namespaced)
            .map(|ns| format!("{ns}/"));
        guard
            .by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter(|k| prefix.as_deref().is_none_or(|p| k.starts_with(p)))
            .filter_map(|k| guard.objects.get(k).cloned())
            .collect()
    }

    /// Objects of a resource as they were at revision `at` (a list with
    /// `resourceVersionMatch=Exact`), rebuilt by undoing the history after it; `TooOld` when the
    /// history no longer reaches back that far, as etcd answers for a compacted revision.
    pub fn list_at(
        &self,
        def: &Kind,
        namespace: Option<&str>,
        at: Revision,
    ) -> Result<Vec<Arc<Entry>>, TooOld> {
        let slot = self.slot(def);
        let guard = read(&slot);
        if at < guard.window_start {
            return Err(TooOld {
                requested: at,
                oldest: guard.window_start,
            });
        }
        // What changed after `at`, as it was then (`None`: it did not exist yet), by key:
        // undoing the history newest first leaves each key as it was before its oldest change.
        let mut then: BTreeMap<String, Option<Arc<Entry>>> = BTreeMap::new();
        for ev in guard.history.iter().rev().take_while(|e| e.entry.rev > at) {
            let key = object_key(
                def,
                Some(&*ev.entry.namespace).filter(|s| !s.is_empty()),
                &ev.entry.name,
            );
            then.insert(key, ev.prev.clone());
        }
        let wanted = |e: &Entry| {
            namespace
                .filter(|_| def.namespaced)
                .is_none_or(|ns| &*e.namespace == ns)
        };
        // The objects unchanged since, and the changed ones as they were, put back in key order:
        // pointers only, where a clone of the whole map once copied every key for each list.
        let mut items: Vec<(&str, &Arc<Entry>)> = guard
            .objects
            .iter()
            .filter(|(k, e)| !then.contains_key(*k) && wanted(e))
            .map(|(k, e)| (k.as_str(), e))
            .chain(
                then.iter()
                    .filter_map(|(k, e)| e.as_ref().filter(|e| wanted(e)).map(|e| (k.as_str(), e))),
            )
            .collect();
        // Two sorted runs: a merge.
        items.sort_by(|a, b| a.0.cmp(b.0));
        Ok(items.into_iter().map(|(_, e)| e.clone()).collect())
    }

    /// Keeps a list for later pages; returns its id.
    pub fn save_snapshot(&self, entries: Arc<Vec<Arc<Entry>>>) -> u64 {
        let id = self
            .next_snapshot
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut snaps = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        snaps.retain(|_, s| s.created.elapsed() < SNAPSHOT_TTL);
        if snaps.len() >= MAX_SNAPSHOTS
            && let Some(oldest) = snaps.iter().min_by_key(|(_, s)| s.created).map(|(k, _)| *k)
        {
            snaps.remove(&oldest);
        }
        snaps.insert(
            id,
            Snapshot {
                entries,
                created: Instant::now(),
            },
        );
        id
    }

    /// A list kept by [`Cache::save_snapshot`], if not expired.
    pub fn snapshot(&self, id: u64) -> Option<Arc<Vec<Arc<Entry>>>> {
        let snaps = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        snaps
            .get(&id)
            .filter(|s| s.created.elapsed() < SNAPSHOT_TTL)
            .map(|s| s.entries.clone())
    }

    /// Starts a watch on a resource after revision `from` (`None`: from now, with the current
    /// objects sent first as ADDED events, as upstream does for an unset `resourceVersion`).
    pub fn subscribe(&self, def: &Kind, from: Option<Revision>) -> Result<Subscription, TooOld> {
        let slot = self.slot(def);
        let guard = read(&slot);
        let live = guard.tx.subscribe();
        let rev = self.revision();
        let initial = match from {
            None => guard
                .objects
                .values()
                .map(|e| {
                    Arc::new(CacheEvent {
                        kind: EventType::Added,
                        entry: e.clone(),
                        prev: None,
                    })
                })
                .collect(),
            Some(from) => {
                if from < guard.window_start {
                    return Err(TooOld {
                        requested: from,
                        oldest: guard.window_start,
                    });
                }
                guard
                    .history
                    .iter()
                    .filter(|e| e.entry.rev > from)
                    .cloned()
                    .collect()
            }
        };
        Ok(Subscription { initial, live, rev })
    }

    /// Notes that `bytes`, the serialized `obj`, are about to be stored under `key`, so that the
    /// cache indexes them without parsing them again when the write comes back (see [`prepared`]).
    pub(crate) fn note_write(&self, key: &str, obj: &Value, bytes: &Bytes) {
        if let Some((def, _, _)) = parse_key(&self.registry, key) {
            self.notes
                .note(key, bytes, prepared::Indexed::of(&def, obj));
        }
    }

    /// The object `entry` (stored under `key`) holds, parsed: the writer's own value when this
    /// server wrote that revision and still keeps it ([`recent`]), parsed from the JSON
    /// otherwise.
    pub(crate) fn parsed(&self, key: &str, entry: &Entry) -> Arc<Value> {
        match self.recent.get(key, entry.rev) {
            Some(kept) => {
                // Every debug build (the whole test suite) checks that what was kept is what
                // is stored.
                debug_assert_eq!(*kept, entry.value(), "kept object of {key} differs");
                kept
            }
            None => Arc::new(entry.value()),
        }
    }

    /// Keeps `obj`, of `def`, just stored under `key` at `rev`, for the next writer of `key`.
    pub(crate) fn remember(&self, def: &Kind, key: &str, rev: Revision, obj: &Arc<Value>) {
        self.recent.remember(def, key, rev, obj);
    }

    /// Forgets what [`Self::remember`] kept under `key`, which was deleted.
    pub(crate) fn forget_deleted(&self, key: &str) {
        self.recent.forget(key);
    }

    /// Drops the note of a write that failed.
    pub(crate) fn forget_write(&self, key: &str, bytes: &Bytes) {
        self.notes.forget(key, bytes);
    }

    /// Applies one store event and publishes its revision. Called only by the feeding task, in
    /// revision order.
    fn apply(&self, kind: EventKind, kv: &KeyValue) {
        self.apply_object(kind, kv);
        self.revision.send_replace(kv.mod_revision);
    }

    /// Applies one store event without moving the published revision (a relist publishes once,
    /// at the end, so no waiter wakes on a half-applied list).
    fn apply_object(&self, kind: EventKind, kv: &KeyValue) {
        let Some((def, ns, name)) = parse_key(&self.registry, &kv.key) else {
            return;
        };
        let noted = self.notes.take(&kv.key, &kv.value);
        let entry = match decode(&def, ns, name, kv, noted) {
            Some(e) => Arc::new(e),
            None => {
                tracing::warn!(key = %kv.key, "undecodable object in store; skipped");
                return;
            }
        };
        let key = object_key(&def, Some(ns).filter(|s| !s.is_empty()), name);
        let slot = self.slot(&def);
        let mut guard = write(&slot);
        // Only a kind with a node is indexed by it: every other write keeps its key unshared.
        let prev = if entry.field_names.iter().any(|f| f == NODE_FIELD) {
            let prev = match kind {
                EventKind::Put => guard.objects.insert(key.clone(), entry.clone()),
                EventKind::Delete => guard.objects.remove(&key),
            };
            if let Some(prev) = &prev {
                guard.unindex(&key, prev);
            }
            if kind == EventKind::Put {
                guard.index(&key, &entry);
            }
            prev
        } else {
            match kind {
                EventKind::Put => guard.objects.insert(key, entry.clone()),
                EventKind::Delete => guard.objects.remove(&key),
            }
        };
        guard.changes.fetch_add(1, Ordering::Release);
        let event_type = match (kind, &prev) {
            (EventKind::Delete, _) => EventType::Deleted,
            (EventKind::Put, None) => EventType::Added,
            (EventKind::Put, Some(_)) => EventType::Modified,
        };
        let event = Arc::new(CacheEvent {
            kind: event_type,
            entry,
            prev,
        });
        guard.history_bytes += event.entry.json.len();
        guard.history.push_back(event.clone());
        while guard.history.len() > self.history_limit
            || (guard.history_bytes > self.history_byte_limit && guard.history.len() > 16)
        {
            if let Some(old) = guard.history.pop_front() {
                guard.history_bytes -= old.entry.json.len();
                guard.window_start = old.entry.rev;
            }
        }
        // No receivers is fine: nobody is watching this resource.
        let _ = guard.tx.send(event);
    }

    /// Replaces the contents with a fresh list from the store taken at `rev` (at start-up, or
    /// after the store watch was lost). As upstream's cacher does on a relist, the history starts
    /// over, empty, at `rev`, and every open watch ends (with 410 Expired, see the watch module):
    /// the difference between two lists cannot say in which order things changed in between, nor
    /// what was created and deleted in the gap, so a watcher that was following must relist.
    fn replace(&self, items: &[KeyValue], rev: Revision) {
        let mut fresh: HashMap<String, BTreeMap<String, Arc<Entry>>> = HashMap::new();
        for kv in items {
            let Some((def, ns, name)) = parse_key(&self.registry, &kv.key) else {
                continue;
            };
            let Some(entry) = decode(&def, ns, name, kv, None) else {
                tracing::warn!(key = %kv.key, "undecodable object in store; skipped");
                continue;
            };
            // Creates the slot, so that the loop below fills it.
            self.slot(&def);
            let (group, plural) = def.storage_resource();
            fresh.entry(slot_key(group, plural)).or_default().insert(
                object_key(&def, Some(ns).filter(|s| !s.is_empty()), name),
                Arc::new(entry),
            );
        }
        // The events the writers' notes wait for were lost with the watch.
        self.notes.clear();
        // A resource first used after this has no events since `rev` either.
        self.origin.store(rev, Ordering::Release);
        let slots: Vec<(String, Arc<RwLock<ResourceCache>>)> = self
            .resources
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, slot) in slots {
            let mut guard = write(&slot);
            guard.objects = fresh.remove(&key).unwrap_or_default();
            guard.by_node.clear();
            let objects = std::mem::take(&mut guard.objects);
            for (key, entry) in &objects {
                guard.index(key, entry);
            }
            guard.objects = objects;
            guard.changes.fetch_add(1, Ordering::Release);
            guard.history.clear();
            guard.history_bytes = 0;
            guard.window_start = rev;
            // Dropping the old sender ends each receiver once it has taken what was sent before.
            guard.tx = broadcast::channel(BROADCAST_CAPACITY).0;
        }
        self.revision.send_replace(rev.max(self.revision()));
    }

    /// Follows the store from revision `from` (where [`Cache::prime`] left it) until the store
    /// closes. On a lost watch (the store's history moved past us) it relists, backing off while
    /// the store keeps failing, and carries on.
    pub async fn run(self: Arc<Self>, store: Arc<dyn Store>, from: Revision) {
        let mut rev = from;
        loop {
            match store.watch("/registry/", rev) {
                Ok(mut stream) => {
                    while let Some(ev) = stream.next().await {
                        match ev {
                            Ok(ev) => self.apply(ev.kind, &ev.kv),
                            Err(store::StoreError::Closed) => return,
                            Err(e) => {
                                tracing::warn!(error = %e, "cache: store watch ended; relisting");
                                break;
                            }
                        }
                    }
                }
                Err(store::StoreError::Closed) => return,
                Err(e) => tracing::warn!(error = %e, "cache: watch from store failed; relisting"),
            }
            self.following.store(false, Ordering::Release);
            let mut delay = RELIST_FIRST_DELAY;
            rev = loop {
                match store.list("/registry/").await {
                    Ok((items, rev)) => {
                        self.replace(&items, rev);
                        break rev;
                    }
                    Err(store::StoreError::Closed) => return,
                    Err(e) => {
                        // Backing off keeps a store that fails for a long time (a full disk) from
                        // filling the log; reads keep being served from what the cache holds.
                        tracing::warn!(error = %e, retry_in = ?delay, "cache: list from store failed");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(RELIST_MAX_DELAY);
                    }
                }
            };
            self.following.store(true, Ordering::Release);
        }
    }

    /// Whether the cache follows the store (false while a relist keeps failing): the API
    /// server's `informer-sync` readiness check.
    pub fn is_following(&self) -> bool {
        self.following.load(Ordering::Acquire)
    }

    /// Primes the cache synchronously from the store (so a server answers correctly from its
    /// first request), returning the revision reached.
    pub async fn prime(&self, store: &dyn Store) -> Result<Revision, store::StoreError> {
        let (items, rev) = store.list("/registry/").await?;
        self.replace(&items, rev);
        self.following.store(true, Ordering::Release);
        Ok(rev)
    }

    /// What the cache holds of the resource `def` is stored in (its current objects, not the
    /// history of older versions).
    pub fn footprint(&self, def: &Kind) -> Footprint {
        let slot = self.slot(def);
        let guard = read(&slot);
        let mut f = Footprint {
            objects: guard.objects.len(),
            ..Footprint::default()
        };
        for (key, e) in &guard.objects {
            f.json_bytes += e.json.len();
            f.other_bytes += e.other_bytes() + std::mem::size_of::<String>() + key.len();
        }
        f.history_events = guard.history.len();
        let current: std::collections::HashSet<*const Entry> =
            guard.objects.values().map(Arc::as_ptr).collect();
        let mut seen = std::collections::HashSet::new();
        for ev in &guard.history {
            f.history_bytes += std::mem::size_of::<CacheEvent>() + 2 * std::mem::size_of::<usize>();
            for e in std::iter::once(&ev.entry).chain(&ev.prev) {
                let p = Arc::as_ptr(e);
                if !current.contains(&p) && seen.insert(p) {
                    f.history_versions += 1;
                    f.history_bytes += e.json.len() + e.other_bytes();
                }
            }
        }
        f
    }

    /// How many objects of `def`'s resource the cache holds (what a list of it goes through).
    pub fn len(&self, def: &Kind) -> usize {
        read(&self.slot(def)).objects.len()
    }

    /// How many objects of each stored resource the cache holds (for metrics), by plural.
    pub fn counts(&self) -> Vec<(String, usize)> {
        self.registry
            .kinds()
            .iter()
            .filter(|k| matches!(k.storage, crate::registry::Storage::Own))
            .map(|k| (k.plural.clone(), read(&self.slot(k)).objects.len()))
            .collect()
    }
}

/// The cache's key of an object: `ns/name`, or `name` for cluster-scoped resources.
fn object_key(def: &Kind, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if def.namespaced => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// The slot of a stored resource: `group/plural` (`/plural` for core).
fn slot_key(group: &str, plural: &str) -> String {
    format!("{group}/{plural}")
}

/// Splits a store key `/registry/{group}/{plural}/[{ns}/]{name}` into the kind that owns the
/// objects there (none for kinds the registry does not serve) and the object's namespace and name.
fn parse_key<'k>(registry: &Registry, key: &'k str) -> Option<(Arc<Kind>, &'k str, &'k str)> {
    let rest = key.strip_prefix("/registry/")?;
    let (group, rest) = rest.split_once('/')?;
    let (plural, rest) = rest.split_once('/')?;
    let group = if group == "core" { "" } else { group };
    let def = registry.owner(group, plural)?;
    if def.namespaced {
        let (ns, name) = rest.split_once('/')?;
        Some((def, ns, name))
    } else {
        Some((def, "", rest))
    }
}

/// Builds an entry from stored bytes: injects `resourceVersion`, extracts selectable fields. A
/// write's note ([`prepared`]) spares the parse.
fn decode(
    def: &Kind,
    ns: &str,
    name: &str,
    kv: &KeyValue,
    noted: Option<prepared::Indexed>,
) -> Option<Entry> {
    let spliced = prepared::with_resource_version(&kv.value, kv.mod_revision);
    let (json, indexed) = match (spliced, noted) {
        (Some(json), Some(indexed)) => (json, indexed),
        (spliced, _) => {
            let mut value: Value = serde_json::from_slice(&kv.value).ok()?;
            if !value.is_object() {
                return None;
            }
            object::meta_mut(&mut value).insert(
                "resourceVersion".into(),
                Value::String(kv.mod_revision.to_string()),
            );
            let indexed = prepared::Indexed::of(def, &value);
            let json = match spliced {
                Some(json) => json,
                // `to_vec` grows its buffer by doubling, and `Bytes` would keep all of it for as
                // long as the entry lives: copy into an allocation of the size.
                None => Bytes::copy_from_slice(&serde_json::to_vec(&value).ok()?),
            };
            (json, indexed)
        }
    };
    Some(Entry {
        rev: kv.mod_revision,
        namespace: ns.into(),
        name: name.into(),
        json,
        labels: indexed.labels,
        field_names: def.selectable_fields.clone(),
        field_values: indexed.field_values,
    })
}

impl Cluster for Cache {
    fn objects(&self, group: &str, plural: &str) -> Vec<Value> {
        let Some(def) = self.registry.owner(group, plural) else {
            return Vec::new();
        };
        self.list(&def, None).0.iter().map(|e| e.value()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Arc<Registry> {
        Arc::new(Registry::new())
    }

    fn find(group: &str, version: &str, plural: &str) -> Option<Arc<Kind>> {
        Registry::new().find(group, version, plural)
    }

    fn kv(key: &str, value: &str, rev: Revision) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Bytes::from(value.to_string()),
            create_revision: rev,
            mod_revision: rev,
        }
    }

    #[test]
    fn parses_keys_of_namespaced_and_cluster_resources() {
        let r = Registry::new();
        let (def, ns, name) = parse_key(&r, "/registry/apps/deployments/default/web").unwrap();
        assert_eq!(
            (def.kind.as_str(), ns, name),
            ("Deployment", "default", "web")
        );
        let (def, ns, name) = parse_key(&r, "/registry/core/nodes/node-0").unwrap();
        assert_eq!((def.kind.as_str(), ns, name), ("Node", "", "node-0"));
        assert!(parse_key(&r, "/registry/core/widgets/x").is_none());
    }

    #[test]
    fn counts_each_change_of_a_resource_where_it_is_applied() {
        let cache = Cache::new(100, registry());
        let pods = find("", "v1", "pods").unwrap();
        let roles = find("rbac.authorization.k8s.io", "v1", "roles").unwrap();
        cache.replace(&[], 0);
        let (pod_changes, role_changes) = (cache.changes(&pods), cache.changes(&roles));
        let (pods_at, roles_at) = (pod_changes.get(), role_changes.get());
        let key = "/registry/core/pods/default/a";
        cache.apply(EventKind::Put, &kv(key, r#"{"metadata":{"name":"a"}}"#, 1));
        assert_eq!(pod_changes.get(), pods_at + 1, "a create");
        cache.apply(EventKind::Put, &kv(key, r#"{"metadata":{"name":"a"}}"#, 2));
        cache.apply(
            EventKind::Delete,
            &kv(key, r#"{"metadata":{"name":"a"}}"#, 3),
        );
        assert_eq!(pod_changes.get(), pods_at + 3, "an update and a delete");
        assert_eq!(role_changes.get(), roles_at, "another resource's changes");
        // A relist may change anything: every resource counts it.
        cache.replace(&[], 4);
        assert!(role_changes.get() > roles_at);
        assert_eq!(cache.changes(&roles).get(), role_changes.get());
    }

    #[test]
    fn applies_events_and_replays_history_after_a_revision() {
        let cache = Cache::new(100, registry());
        let pods = find("", "v1", "pods").unwrap();
        cache.replace(&[], 0);
        cache.apply(
            EventKind::Put,
            &kv(
                "/registry/core/pods/default/a",
                r#"{"metadata":{"name":"a","labels":{"app":"x"}},"spec":{"nodeName":"n1"}}"#,
                1,
            ),
        );
        cache.apply(
            EventKind::Put,
            &kv(
                "/registry/core/pods/default/a",
                r#"{"metadata":{"name":"a"}}"#,
                2,
            ),
        );
        cache.apply(
            EventKind::Delete,
            &kv(
                "/registry/core/pods/default/a",
                r#"{"metadata":{"name":"a"}}"#,
                3,
            ),
        );
        assert_eq!(cache.revision(), 3);
        assert!(cache.get(&pods, Some("default"), "a").is_none());
        let sub = cache.subscribe(&pods, Some(1)).unwrap();
        let kinds: Vec<_> = sub.initial.iter().map(|e| (e.kind, e.entry.rev)).collect();
        assert_eq!(
            kinds,
            vec![(EventType::Modified, 2), (EventType::Deleted, 3)]
        );
        let first = cache.subscribe(&pods, Some(0)).unwrap();
        assert_eq!(first.initial.len(), 3);
        assert_eq!(
            first.initial[0].entry.field("spec.nodeName").as_deref(),
            Some("n1")
        );
        assert_eq!(first.initial[0].entry.label("app"), Some("x"));
    }

    #[test]
    fn a_noted_write_is_indexed_as_its_parse_would_be() {
        let pods = find("", "v1", "pods").unwrap();
        let obj = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "default", "labels": {"app": "x", "n": 3}},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}
        });
        let stored = kv(
            "/registry/core/pods/default/a",
            &serde_json::to_string(&obj).unwrap(),
            9,
        );
        let parsed = decode(&pods, "default", "a", &stored, None).unwrap();
        let noted = decode(
            &pods,
            "default",
            "a",
            &stored,
            Some(prepared::Indexed::of(&pods, &obj)),
        )
        .unwrap();
        assert_eq!(noted.json, parsed.json);
        assert_eq!(noted.value()["metadata"]["resourceVersion"], "9");
        for f in ["spec.nodeName", "status.phase", "spec.schedulerName"] {
            assert_eq!(noted.field(f), parsed.field(f), "{f}");
        }
        assert_eq!(noted.label("app"), Some("x"));
        assert_eq!(noted.label("n"), None);
    }

    #[test]
    fn an_entry_answers_labels_and_fields_as_the_object_has_them() {
        let pods = find("", "v1", "pods").unwrap();
        let e = decode(
            &pods,
            "default",
            "a",
            &kv(
                "/registry/core/pods/default/a",
                r#"{"metadata":{"name":"a","labels":{"tier":"web","app":"x","n":3,"a.b/c":""}},
                    "spec":{"nodeName":"n1","hostNetwork":true},"status":{"phase":"Running"}}"#,
                7,
            ),
            None,
        )
        .unwrap();
        assert_eq!(e.label("app"), Some("x"));
        assert_eq!(e.label("tier"), Some("web"));
        assert_eq!(e.label("a.b/c"), Some(""));
        assert_eq!(e.label("n"), None, "a non-string value counts as absent");
        assert_eq!(e.label("zzz"), None);
        let sel = api::selector::LabelSelector::parse("app=x,tier in (web),!n").unwrap();
        assert!(e.matches_labels(&sel));
        let sel = api::selector::LabelSelector::parse("app=y").unwrap();
        assert!(!e.matches_labels(&sel));
        assert_eq!(e.field("spec.nodeName").as_deref(), Some("n1"));
        assert_eq!(e.field("spec.hostNetwork").as_deref(), Some("true"));
        assert_eq!(e.field("status.phase").as_deref(), Some("Running"));
        assert_eq!(e.field("status.podIP").as_deref(), Some(""));
        assert_eq!(e.field("metadata.name").as_deref(), Some("a"));
        assert_eq!(e.field("spec.unknown"), None);
        let json: Value = serde_json::from_slice(&e.json).unwrap();
        assert_eq!(json["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn the_footprint_counts_current_objects_and_the_older_versions_history_keeps() {
        let cache = Cache::new(100, registry());
        let pods = find("", "v1", "pods").unwrap();
        cache.replace(&[], 0);
        for (i, name) in ["a", "a", "b"].iter().enumerate() {
            cache.apply(
                EventKind::Put,
                &kv(
                    &format!("/registry/core/pods/default/{name}"),
                    r#"{"metadata":{}}"#,
                    i as u64 + 1,
                ),
            );
        }
        let f = cache.footprint(&pods);
        assert_eq!((f.objects, f.history_events, f.history_versions), (2, 3, 1));
        let current = cache.get(&pods, Some("default"), "a").unwrap();
        assert_eq!(f.json_bytes, 2 * current.json.len());
        assert!(f.history_bytes > current.json.len());
    }

    #[test]
    fn a_watch_older_than_the_history_window_is_refused() {
        let cache = Cache::new(16, registry());
        let pods = find("", "v1", "pods").unwrap();
        cache.replace(&[], 0);
        for i in 1..=40u64 {
            cache.apply(
                EventKind::Put,
                &kv(
                    &format!("/registry/core/pods/default/p{i}"),
                    r#"{"metadata":{}}"#,
                    i,
                ),
            );
        }
        assert!(cache.subscribe(&pods, Some(5)).is_err());
        let sub = cache.subscribe(&pods, Some(30)).unwrap();
        assert_eq!(sub.initial.len(), 10);
        assert_eq!(cache.list(&pods, Some("default")).0.len(), 40);
        assert_eq!(cache.list(&pods, Some("other")).0.len(), 0);
    }

    #[test]
    fn a_filtered_list_keeps_what_the_test_accepts_in_one_namespace_in_key_order() {
        let cache = Cache::new(16, registry());
        let pods = find("", "v1", "pods").unwrap();
        cache.replace(&[], 0);
        let put = |ns: &str, name: &str, node: &str, rev: u64| {
            cache.apply(
                EventKind::Put,
                &kv(
                    &format!("/registry/core/pods/{ns}/{name}"),
                    &format!(r#"{{"metadata":{{"name":"{name}","namespace":"{ns}"}},"spec":{{"nodeName":"{node}"}}}}"#),
                    rev,
                ),
            );
        };
        put("default", "c", "node-1", 1);
        put("default", "a", "node-1", 2);
        put("default", "b", "node-2", 3);
        put("other", "d", "node-1", 4);
        let names =
            |items: Vec<Arc<Entry>>| items.iter().map(|e| e.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(cache.list(&pods, Some("default")).0), ["a", "b", "c"]);
        // The node index follows deletions and relists.
        assert_eq!(
            names(cache.list_on_node(&pods, Some("default"), "node-1")),
            ["a", "c"]
        );
        assert_eq!(
            names(cache.list_on_node(&pods, None, "node-1")),
            ["a", "c", "d"]
        );
        cache.apply(
            EventKind::Delete,
            &kv(
                "/registry/core/pods/default/a",
                r#"{"metadata":{"name":"a","namespace":"default"},"spec":{"nodeName":"node-1"}}"#,
                5,
            ),
        );
        assert_eq!(names(cache.list_on_node(&pods, None, "node-1")), ["c", "d"]);
        assert!(cache.list_on_node(&pods, None, "node-3").is_empty());
        cache.replace(
            &[kv(
                "/registry/core/pods/default/e",
                r#"{"metadata":{"name":"e","namespace":"default"},"spec":{"nodeName":"node-3"}}"#,
                6,
            )],
            6,
        );
        assert!(cache.list_on_node(&pods, None, "node-1").is_empty());
        assert_eq!(names(cache.list_on_node(&pods, None, "node-3")), ["e"]);
    }

    #[test]
    fn lists_as_of_an_earlier_revision_by_undoing_history() {
        let cache = Cache::new(16, registry());
        let pods = find("", "v1", "pods").unwrap();
        cache.replace(&[], 0);
        cache.apply(
            EventKind::Put,
            &kv(
                "/registry/core/pods/default/a",
                r#"{"metadata":{"labels":{"v":"1"}}}"#,
                1,
            ),
        );
        cache.apply(
            EventKind::Put,
            &kv("/registry/core/pods/other/b", r#"{"metadata":{}}"#, 2),
        );
        cache.apply(
            EventKind::Put,
            &kv(
                "/registry/core/pods/default/a",
                r#"{"metadata":{"labels":{"v":"2"}}}"#,
                3,
            ),
        );
        cache.apply(
            EventKind::Delete,
            &kv("/registry/core/pods/other/b", r#"{"metadata":{}}"#, 4),
        );
        cache.apply(
            EventKind::Put,
            &kv("/registry/core/pods/default/c", r#"{"metadata":{}}"#, 5),
        );
        // (revision, namespace, the objects then as "name@rev")
        let cases = [
            (0, None, ""),
            (1, None, "a@1"),
            (2, None, "a@1 b@2"),
            (3, Some("default"), "a@3"),
            (4, None, "a@3"),
            (5, None, "a@3 c@5"),
        ];
        for (rev, ns, want) in cases {
            let have: Vec<String> = cache
                .list_at(&pods, ns, rev)
                .unwrap()
                .iter()
                .map(|e| format!("{}@{}", e.name, e.rev))
                .collect();
            assert_eq!(have.join(" "), want, "at {rev} in {ns:?}");
        }
        for i in 6..=30u64 {
            cache.apply(
                EventKind::Put,
                &kv(
                    &format!("/registry/core/pods/default/p{i}"),
                    r#"{"metadata":{}}"#,
                    i,
                ),
            );
        }
        assert!(
            cache.list_at(&pods, None, 5).is_err(),
            "history no longer reaches revision 5"
        );
        assert_eq!(cache.list_at(&pods, None, 30).unwrap().len(), 27);
    }

    #[test]
    fn a_relist_restarts_history_and_ends_every_watch() {
        let cache = Cache::new(100, registry());
        let pods = find("", "v1", "pods").unwrap();
        cache.replace(
            &[
                kv("/registry/core/pods/default/a", r#"{"metadata":{}}"#, 1),
                kv("/registry/core/pods/default/b", r#"{"metadata":{}}"#, 2),
            ],
            2,
        );
        let mut sub = cache.subscribe(&pods, Some(2)).unwrap();
        cache.replace(
            &[kv("/registry/core/pods/default/a", r#"{"metadata":{}}"#, 1)],
            5,
        );
        assert!(matches!(
            sub.live.try_recv(),
            Err(broadcast::error::TryRecvError::Closed)
        ));
        assert_eq!(cache.revision(), 5);
        assert!(cache.get(&pods, Some("default"), "b").is_none());
        assert!(
            cache.subscribe(&pods, Some(2)).is_err(),
            "history restarts at the relist"
        );
        assert!(cache.list_at(&pods, None, 4).is_err());
        assert_eq!(cache.subscribe(&pods, Some(5)).unwrap().initial.len(), 0);
    }

    #[test]
    fn history_is_bounded_in_bytes_as_well_as_events() {
        let cache = Cache::with_limits(1000, 40 * 100, registry());
        let pods = find("", "v1", "pods").unwrap();
        cache.replace(&[], 0);
        let big = format!(
            r#"{{"metadata":{{}},"spec":{{"x":"{}"}}}}"#,
            "y".repeat(100)
        );
        for i in 1..=200u64 {
            cache.apply(
                EventKind::Put,
                &kv(&format!("/registry/core/pods/default/p{i}"), &big, i),
            );
        }
        let oldest = cache.subscribe(&pods, Some(0)).err().unwrap().oldest;
        assert!(
            oldest > 150,
            "only the last ~35 events of ~120 bytes fit: {oldest}"
        );
        assert!(cache.subscribe(&pods, Some(180)).is_ok());
    }
}
