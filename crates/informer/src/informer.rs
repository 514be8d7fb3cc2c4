//! One kind's watch, its [`Store`] and the event handlers subscribed to it (client-go's
//! `SharedIndexInformer`): each watch event is decoded once, applied to the store, and then
//! handed to every handler as a [`Change`] with the previous version, which is what handlers
//! decide on (a controller lowers its expectations on an add or a delete, not on an update).
//!
//! Handlers run synchronously on the watch's task, after the store holds the change, so a
//! handler that queues a key guarantees the sync it causes sees the change. They must be quick:
//! map the change to keys, queue them, note expectations; never an API call.

use crate::{
    object::{Cached, Key, Object, Shared, key_of},
    store::Store,
};
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use std::{
    collections::HashSet,
    pin::pin,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};
use tokio::sync::watch;

/// What a watch event changed.
#[derive(Clone, Debug)]
pub enum Change<K: Object> {
    /// An object the store did not hold.
    Added(Shared<K>),
    /// A new version of an object the store held (after a relist, possibly the same version).
    Updated {
        /// The version held before.
        old: Shared<K>,
        /// The version held now.
        new: Shared<K>,
    },
    /// An object that is gone (its last known version).
    Deleted(Shared<K>),
}

impl<K: Object> Change<K> {
    /// The object as it is now (for a deletion, as it was last).
    pub fn object(&self) -> &Shared<K> {
        match self {
            Change::Added(o) | Change::Deleted(o) | Change::Updated { new: o, .. } => o,
        }
    }

    /// Whether a relist delivered a version the store already held: nothing changed.
    pub fn is_resync(&self) -> bool {
        matches!(self, Change::Updated { old, new }
            if old.meta().resource_version == new.meta().resource_version)
    }
}

type Handler<K> = Arc<dyn Fn(&Change<K>) + Send + Sync>;

/// A change as its object's metadata shows it: what a reader of every kind (the garbage
/// collector) needs, whatever the type its informer decodes the kind as.
#[derive(Clone, Copy, Debug)]
pub struct MetaChange<'a> {
    /// The object's metadata (for a delete, its last version's).
    pub meta: &'a ObjectMeta,
    /// Whether the object is gone.
    pub deleted: bool,
    /// Whether a relist delivered a version the store already held ([`Change::is_resync`]).
    pub resync: bool,
}

/// A handler of [`MetaChange`]s.
pub type MetaHandler = Arc<dyn Fn(MetaChange<'_>) + Send + Sync>;

struct Handlers<K: Object> {
    next_id: AtomicU64,
    list: RwLock<Vec<(u64, Handler<K>)>>,
}

/// One kind in the shared cache: its store, its handlers and whether it has listed. Cheap to
/// clone; obtained from [`crate::Informers`].
pub struct Informer<K: Object> {
    store: Store<K>,
    handlers: Arc<Handlers<K>>,
    synced: watch::Receiver<bool>,
}

impl<K: Object> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            handlers: Arc::clone(&self.handlers),
            synced: self.synced.clone(),
        }
    }
}

/// A handler's registration: dropping it unsubscribes the handler (a controller that stops or is
/// restarted after a panic leaves nothing behind).
#[must_use = "dropping a Subscription unsubscribes its handler at once"]
pub struct Subscription {
    unsubscribe: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(f) = self.unsubscribe.take() {
            f();
        }
    }
}

impl Subscription {
    /// A subscription that runs `unsubscribe` when dropped: for what a component starts on its
    /// own behalf (a task, an unshared watch) and must end when the component stops.
    pub fn on_drop(unsubscribe: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self {
            unsubscribe: Some(Box::new(unsubscribe)),
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Subscription")
    }
}

impl<K: Object> Informer<K> {
    /// An informer fed by [`Feeder`]; the pair is made by [`crate::Informers`] (and tests).
    pub(crate) fn new() -> (Self, Feeder<K>) {
        let (tx, rx) = watch::channel(false);
        let informer = Self {
            store: Store::default(),
            handlers: Arc::new(Handlers {
                next_id: AtomicU64::new(0),
                list: RwLock::new(Vec::new()),
            }),
            synced: rx,
        };
        let feeder = Feeder {
            informer: informer.clone(),
            synced: tx,
            listing: None,
        };
        (informer, feeder)
    }

    pub(crate) fn synced_signal(&self) -> watch::Receiver<bool> {
        self.synced.clone()
    }

    /// The objects.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Shared<K>> {
        self.store.get(key)
    }

    /// Whether the first list has completed (upstream's `HasSynced`).
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first list has completed.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        // The sender lives as long as the watch; if it is gone nothing will ever list.
        let _ = rx.wait_for(|s| *s).await;
    }

    /// [`Informer::subscribe`] with a handler that sees only each change's metadata.
    pub fn subscribe_meta(&self, handler: MetaHandler) -> Subscription {
        self.subscribe(move |change| {
            handler(MetaChange {
                meta: change.object().meta(),
                deleted: matches!(change, Change::Deleted(_)),
                resync: change.is_resync(),
            })
        })
    }

    /// Calls `handler` with every change from now on, first with every object already held (as
    /// [`Change::Added`], as client-go replays its store to a late handler).
    pub fn subscribe(&self, handler: impl Fn(&Change<K>) + Send + Sync + 'static) -> Subscription {
        let handler: Handler<K> = Arc::new(handler);
        let id = self.handlers.next_id.fetch_add(1, Ordering::Relaxed);
        {
            // Holding the handler list while replaying keeps a concurrent event from reaching
            // the new handler before the replay (it then reaches it after, at worst twice).
            let mut list = self
                .handlers
                .list
                .write()
                .unwrap_or_else(|e| e.into_inner());
            for obj in self.store.list() {
                handler(&Change::Added(obj));
            }
            list.push((id, handler));
        }
        let handlers = Arc::downgrade(&self.handlers);
        Subscription {
            unsubscribe: Some(Box::new(move || {
                if let Some(h) = handlers.upgrade() {
                    h.list
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .retain(|(i, _)| *i != id);
                }
            })),
        }
    }

    fn notify(&self, change: &Change<K>) {
        let handlers: Vec<Handler<K>> = self
            .handlers
            .list
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, h)| Arc::clone(h))
            .collect();
        for h in handlers {
            h(change);
        }
    }
}

/// Applies one watch's events to an [`Informer`]: relists included, where objects missing from
/// the new list come out as [`Change::Deleted`], as an informer's `Replace` does.
pub(crate) struct Feeder<K: Object> {
    informer: Informer<K>,
    synced: watch::Sender<bool>,
    listing: Option<HashSet<Key>>,
}

/// Drops the object's `managedFields`, as upstream's controller manager does for every object
/// of its shared informers (its `trim` transform): no controller reads them, and decoded they
/// were the largest part of the cache (a node's and a daemon pod's kubelet entries as JSON
/// trees: at 4,000 nodes, 120 of the informers' 260 MiB). A controller's update of a cached
/// object leaves them out, which the server reads as "keep the stored ones".
fn trimmed<K: Object>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

impl<K: Object> Feeder<K> {
    fn upsert(&self, obj: K) {
        let new = Cached::shared(trimmed(obj));
        let change = match self.informer.store.apply(Arc::clone(&new)) {
            Some(old) => Change::Updated { old, new },
            None => Change::Added(new),
        };
        self.informer.notify(&change);
    }

    /// Applies one event.
    pub(crate) fn handle(&mut self, event: watcher::Event<K>) {
        match event {
            watcher::Event::Init => self.listing = Some(HashSet::new()),
            watcher::Event::InitApply(obj) => {
                if let Some(seen) = self.listing.as_mut() {
                    seen.insert(key_of(&obj));
                }
                self.upsert(obj);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.listing.take() {
                    for key in self.informer.store.keys() {
                        if !seen.contains(&key)
                            && let Some(gone) = self.informer.store.remove(&key)
                        {
                            self.informer.notify(&Change::Deleted(gone));
                        }
                    }
                }
                self.synced.send_replace(true);
            }
            watcher::Event::Apply(obj) => self.upsert(obj),
            watcher::Event::Delete(obj) => {
                let gone = self
                    .informer
                    .store
                    .remove(&key_of(&obj))
                    .unwrap_or_else(|| Cached::shared(trimmed(obj)));
                self.informer.notify(&Change::Deleted(gone));
            }
        }
    }

    /// Follows `events` for ever (the watcher retries with back-off), each event `lag` late.
    pub(crate) async fn follow(
        mut self,
        kind: String,
        events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
        lag: Duration,
    ) {
        let mut events = pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(e) => {
                    if !lag.is_zero() {
                        tokio::time::sleep(lag).await;
                    }
                    self.handle(e)
                }
                Err(error) => {
                    tracing::warn!(%kind, %error, "watch failed; retrying")
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::ResourceExt;
    use std::sync::Mutex;

    fn pod(name: &str, rv: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.resource_version = Some(rv.into());
        p
    }

    fn describe(c: &Change<Pod>) -> String {
        match c {
            Change::Added(p) => format!("+{}", p.name_any()),
            Change::Updated { old, new } => format!(
                "~{}@{}->{}",
                new.name_any(),
                old.resource_version().unwrap_or_default(),
                new.resource_version().unwrap_or_default()
            ),
            Change::Deleted(p) => format!("-{}", p.name_any()),
        }
    }

    #[test]
    fn handlers_see_changes_after_a_replay_and_a_relist_deletes_what_it_misses() {
        let (informer, mut feeder) = Informer::<Pod>::new();
        feeder.handle(watcher::Event::Init);
        feeder.handle(watcher::Event::InitApply(pod("a", "1")));
        assert!(!informer.has_synced());
        feeder.handle(watcher::Event::InitDone);
        assert!(informer.has_synced());

        let seen = Arc::new(Mutex::new(Vec::new()));
        let sub = {
            let seen = Arc::clone(&seen);
            informer.subscribe(move |c| seen.lock().unwrap().push(describe(c)))
        };
        feeder.handle(watcher::Event::Apply(pod("b", "2")));
        feeder.handle(watcher::Event::Apply(pod("a", "3")));
        feeder.handle(watcher::Event::Init);
        feeder.handle(watcher::Event::InitApply(pod("b", "2")));
        feeder.handle(watcher::Event::InitDone);
        assert_eq!(
            *seen.lock().unwrap(),
            ["+a", "+b", "~a@1->3", "~b@2->2", "-a"]
        );
        assert_eq!(informer.store().keys(), ["ns/b"]);

        drop(sub);
        feeder.handle(watcher::Event::Delete(pod("b", "4")));
        assert_eq!(seen.lock().unwrap().len(), 5, "unsubscribed");
        assert!(informer.store().is_empty());
    }

    #[test]
    fn cached_objects_and_handlers_see_no_managed_fields() {
        let (informer, mut feeder) = Informer::<Pod>::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let _sub = {
            let seen = Arc::clone(&seen);
            informer.subscribe(move |c: &Change<Pod>| {
                seen.lock()
                    .unwrap()
                    .push(c.object().metadata.managed_fields.is_some())
            })
        };
        let mut p = pod("a", "1");
        p.metadata.managed_fields = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                manager: Some("kubelet".into()),
                operation: Some("Update".into()),
                ..Default::default()
            },
        ]);
        feeder.handle(watcher::Event::Apply(p.clone()));
        let cached = informer.store().get("ns/a").unwrap();
        assert_eq!(cached.metadata.managed_fields, None);
        feeder.handle(watcher::Event::Delete(p));
        assert_eq!(*seen.lock().unwrap(), [false, false]);
    }
}
