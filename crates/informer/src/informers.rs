//! The process's set of informers (client-go's `SharedInformerFactory`): the first reader of a
//! kind starts its watch, every later reader shares it. Dropping the last clone of
//! [`Informers`] stops every watch.

use crate::{
    informer::{Informer, MetaHandler, Subscription},
    object::Object,
};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, PartialObjectMeta},
    runtime::{WatchStreamExt, watcher},
};
use std::{
    any::{Any, TypeId},
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};
use tokio::{sync::watch, task::AbortHandle};

/// A kind's group, version and kind.
type Gvk = (String, String, String);

/// Subscribes a [`MetaHandler`] to one running informer; also gives its listed signal.
type Feed = Box<dyn Fn(MetaHandler) -> (Subscription, watch::Receiver<bool>) + Send + Sync>;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Slot {
    Typed(TypeId),
    Dynamic { group: String, kind: String },
}

struct Inner {
    client: Client,
    lag: Duration,
    /// The kinds `lag` applies to; empty for every kind.
    lagging: Vec<String>,
    slots: Mutex<HashMap<Slot, Box<dyn Any + Send + Sync>>>,
    /// Every running informer by the group, version and kind it watches, whatever its type:
    /// what [`Informers::follow_metadata`] finds.
    feeds: Mutex<HashMap<Gvk, Feed>>,
    synced: Mutex<Vec<watch::Receiver<bool>>>,
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Inner {
    fn lag_of(&self, kind: &str) -> Duration {
        if self.lagging.is_empty() || self.lagging.iter().any(|k| k == kind) {
            self.lag
        } else {
            Duration::ZERO
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().unwrap_or_else(|e| e.into_inner()) {
            task.abort();
        }
    }
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section completes its change before anything can panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One watch per kind for the whole process, decoded once and shared; clones share it.
#[derive(Clone)]
pub struct Informers {
    inner: Arc<Inner>,
    /// The client writes go through: the watches' own, or another identity's
    /// ([`Informers::acting_as`]).
    writer: Client,
}

impl std::fmt::Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers")
            .field("kinds", &guard(&self.inner.slots).len())
            .finish()
    }
}

impl Informers {
    /// Informers whose watches go through `client`.
    pub fn new(client: Client) -> Self {
        Self::with_lag(client, Duration::ZERO)
    }

    /// Informers that apply every watch event `lag` late: for tests that play a slow watch
    /// (which is what controller expectations guard against).
    pub fn with_lag(client: Client, lag: Duration) -> Self {
        Self::with_lag_on(client, lag, &[])
    }

    /// Informers whose watches of `kinds` (every kind if empty) apply each event `lag` late: for
    /// tests that play one watch falling behind another.
    pub fn with_lag_on(client: Client, lag: Duration, kinds: &[&str]) -> Self {
        Self {
            writer: client.clone(),
            inner: Arc::new(Inner {
                client,
                lag,
                lagging: kinds.iter().map(|k| (*k).to_owned()).collect(),
                slots: Mutex::new(HashMap::new()),
                feeds: Mutex::new(HashMap::new()),
                synced: Mutex::new(Vec::new()),
                tasks: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The client to write with: the watches' own unless this is a view
    /// [`acting as`](Informers::acting_as) another identity.
    pub fn client(&self) -> &Client {
        &self.writer
    }

    /// The same informers (the same watches and caches) for a component that writes as
    /// another identity, `client`'s: each controller writes as its own ServiceAccount while
    /// the process keeps one watch per kind, as kube-controller-manager's shared informers do.
    pub fn acting_as(&self, client: Client) -> Self {
        Self {
            inner: self.inner.clone(),
            writer: client,
        }
    }

    /// The informer of kind `K`, starting its watch if this is the first ask. Must be called
    /// within a Tokio runtime.
    pub fn get<K>(&self) -> Informer<K>
    where
        K: Object,
        K::DynamicType: Default,
    {
        let api = Api::<K>::all(self.inner.client.clone());
        let dt = Default::default();
        let gvk = (
            K::group(&dt).into_owned(),
            K::version(&dt).into_owned(),
            K::kind(&dt).into_owned(),
        );
        self.slot(Slot::Typed(TypeId::of::<K>()), api, gvk)
    }

    /// The informer of a kind known only at run time (the garbage collector's extra kinds).
    pub fn dynamic(&self, resource: &ApiResource) -> Informer<DynamicObject> {
        let slot = Slot::Dynamic {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
        };
        let api = Api::<DynamicObject>::all_with(self.inner.client.clone(), resource);
        let gvk = (
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
        );
        self.slot(slot, api, gvk)
    }

    /// A watch of the metadata of `resource`'s objects that only the caller reads, and that
    /// stops when the returned [`Subscription`] is dropped: for a kind that may stop being
    /// served (the garbage collector's monitor of a custom resource whose CRD goes away), whose
    /// objects no other reader decodes. Its listing is not awaited by
    /// [`Informers::wait_synced`]; wait on [`Informer::wait_synced`].
    pub fn metadata(
        &self,
        resource: &ApiResource,
    ) -> (Informer<PartialObjectMeta<DynamicObject>>, Subscription) {
        let api =
            Api::<PartialObjectMeta<DynamicObject>>::all_with(self.inner.client.clone(), resource);
        let (informer, feeder) = Informer::new();
        let events = watcher(api, watcher::Config::default()).default_backoff();
        let lag = self.inner.lag_of(&resource.kind);
        let task = tokio::spawn(feeder.follow(resource.kind.clone(), events, lag));
        let stop = task.abort_handle();
        (informer, Subscription::on_drop(move || stop.abort()))
    }

    /// The metadata of `resource`'s objects (its group, version and kind) from the informer
    /// the process already runs for it, typed or dynamic, so that a reader of every kind (the
    /// garbage collector) neither lists the kinds the cache holds nor watches them twice:
    /// `handler` gets every change from now on, and the future ends once that informer has
    /// listed. `None` when no reader caches the kind: the caller watches it itself
    /// ([`Informers::metadata`]).
    pub fn follow_metadata(
        &self,
        resource: &ApiResource,
        handler: MetaHandler,
    ) -> Option<(Subscription, impl Future<Output = ()> + Send + 'static)> {
        let gvk = (
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
        );
        let feeds = guard(&self.inner.feeds);
        let (subscription, mut listed) = feeds.get(&gvk)?(handler);
        Some((subscription, async move {
            let _ = listed.wait_for(|s| *s).await;
        }))
    }

    fn slot<K: Object>(&self, slot: Slot, api: Api<K>, gvk: Gvk) -> Informer<K> {
        let kind = gvk.2.clone();
        let mut slots = guard(&self.inner.slots);
        if let Some(existing) = slots.get(&slot)
            && let Some(informer) = existing.downcast_ref::<Informer<K>>()
        {
            return informer.clone();
        }
        let (informer, feeder) = Informer::<K>::new();
        let events = watcher(api, watcher::Config::default()).default_backoff();
        let lag = self.inner.lag_of(&kind);
        let task = tokio::spawn(feeder.follow(kind, events, lag));
        guard(&self.inner.tasks).push(task.abort_handle());
        guard(&self.inner.synced).push(informer.synced_signal());
        slots.insert(slot, Box::new(informer.clone()));
        let feed = informer.clone();
        guard(&self.inner.feeds).insert(
            gvk,
            Box::new(move |handler| (feed.subscribe_meta(handler), feed.synced_signal())),
        );
        informer
    }

    /// Waits until every informer started so far has listed (upstream's `WaitForCacheSync`):
    /// deciding on a half-filled cache would, say, recreate pods that exist.
    pub async fn wait_synced(&self) {
        let signals: Vec<watch::Receiver<bool>> = guard(&self.inner.synced).clone();
        for mut rx in signals {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// Whether every informer started so far has listed.
    pub fn has_synced(&self) -> bool {
        guard(&self.inner.synced).iter().all(|rx| *rx.borrow())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Namespace, Node};
    use kube::api::PostParams;

    #[tokio::test]
    async fn one_watch_per_kind_shared_by_every_reader() {
        let server = embedded::Embedded::memory().await.unwrap();
        let informers = Informers::new(server.client());
        let a = informers.get::<Node>();
        let b = informers.get::<Node>();
        let _ns = informers.get::<Namespace>();
        assert_eq!(guard(&informers.inner.tasks).len(), 2);
        informers.wait_synced().await;
        let api: Api<Node> = Api::all(server.client());
        let mut node = Node::default();
        node.metadata.name = Some("one".into());
        api.create(&PostParams::default(), &node).await.unwrap();
        let seen = Arc::new(tokio::sync::Notify::new());
        let _sub = {
            let seen = Arc::clone(&seen);
            a.subscribe(move |c| {
                if c.object().metadata.name.as_deref() == Some("one") {
                    seen.notify_one();
                }
            })
        };
        tokio::time::timeout(Duration::from_secs(10), seen.notified())
            .await
            .unwrap();
        // The second reader holds the very same object, decoded once.
        let (x, y) = (a.get("one").unwrap(), b.get("one").unwrap());
        assert!(Arc::ptr_eq(&x, &y));
    }

    #[tokio::test]
    async fn metadata_readers_follow_the_informer_the_process_runs() {
        let server = embedded::Embedded::memory().await.unwrap();
        let informers = Informers::new(server.client());
        let nodes = ApiResource::erase::<Node>(&());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let handler: MetaHandler = Arc::new(move |c: crate::MetaChange<'_>| {
            let _ = tx.send((c.meta.name.clone(), c.deleted));
        });
        // No reader caches nodes yet: the caller would watch them itself.
        assert!(informers.follow_metadata(&nodes, handler.clone()).is_none());
        let _typed = informers.get::<Node>();
        let api: Api<Node> = Api::all(server.client());
        let mut node = Node::default();
        node.metadata.name = Some("one".into());
        api.create(&PostParams::default(), &node).await.unwrap();
        let (_sub, listed) = informers.follow_metadata(&nodes, handler).unwrap();
        tokio::time::timeout(Duration::from_secs(10), listed)
            .await
            .unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(change) = rx.recv().await {
                if change == (Some("one".to_string()), false) {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap();
        assert!(seen);
        // Through the typed informer's watch: no second one.
        assert_eq!(guard(&informers.inner.tasks).len(), 1);
    }
}
