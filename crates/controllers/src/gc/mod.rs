//! The garbage collector, as upstream's `pkg/controller/garbagecollector`: deletes objects whose
//! owners are gone (Background), holds an owner in `foregroundDeletion` until its blocking
//! dependents are gone (Foreground), and strips an owner's references from its dependents before
//! releasing it (Orphan).
//!
//! What it watches comes from discovery, as upstream's: every served resource that supports
//! `list`, `watch` and `delete` ([`resources`]), custom resources included; discovery is read
//! again every [`Config::resync`] and at once when a CRD or an APIService changes, and each
//! kind added or removed starts or stops its monitor ([`monitors`]). Every watched object
//! feeds one [`Graph`] (uid -> owners and dependents); each change yields the [`Work`] it makes
//! necessary, which workers take from a [`WorkQueue`]. An owner reference resolves against
//! what discovery found: to a kind the server does not serve, the dependent is left alone and
//! retried, as upstream does with its REST mapping error.
//!
//! Decisions are made on the graph; an owner the graph has not seen where the reference says
//! (in the dependent's namespace, unless the owner's kind is cluster-scoped) is looked up live
//! by name (a recreated object with another uid counts as absent); every write carries the object's `resourceVersion` as precondition, so a decision on stale
//! data fails with a conflict and is retried on fresh data instead of doing harm.
//!
//! Owners can wait on each other in a cycle (a foreground deletion of one of three pods that own
//! each other round, upstream's conformance spec "should not be blocked by dependency circle").
//! As upstream, an owner in foreground deletion queues only the blocking dependents not already
//! waiting for their own (so owners in a cycle do not queue each other for ever), and a dependent
//! whose owner and own dependent both wait has its references unblocked before its deletion,
//! which breaks the cycle ([`collector::Plan::UnblockThenDelete`]).

pub mod collector;
pub mod discovery;
pub mod graph;
mod monitors;
pub mod resources;

pub use collector::GarbageCollector;
pub use graph::{Graph, Work};
pub use resources::{Kind, Served, ServedGroup};

use crate::runtime::{Action, Controller, WorkQueue};
use events::Recorder;
use informer::{Informers, Subscription};
use monitors::{Monitors, Sink};
use std::{
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};
use tokio::sync::{Notify, watch};

/// How many more discovery rounds follow a CRD or APIService change, and how far apart.
const FOLLOW_UPS: u32 = 3;
const FOLLOW_UP: Duration = Duration::from_secs(1);

/// The component name upstream's collector records events as.
const COMPONENT: &str = "garbage-collector-controller";

/// Why the collector could not act on an item (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    /// Some dependents could not be orphaned; the owner keeps its `orphan` finalizer.
    #[error("orphaning {failed} dependents of {owner} failed: {first}")]
    Orphaning {
        /// The owner.
        owner: String,
        /// How many dependents failed.
        failed: usize,
        /// The first failure.
        first: String,
    },
    /// A reference names a kind the server does not serve (yet: a CRD may be on its way).
    #[error("unable to get REST mapping for {api_version}/{kind}.")]
    UnknownKind {
        /// The reference's `apiVersion`.
        api_version: String,
        /// The reference's `kind`.
        kind: String,
    },
    /// An owner exists but no watch has shown it yet.
    #[error("item hasn't been observed via informer yet: {0}")]
    NotObserved(String),
}

/// How the collector runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How often discovery is read again (upstream's controller manager: 30 s). A change to a
    /// CRD or an APIService makes it read at once.
    pub resync: Duration,
    /// How it runs: concurrent workers (upstream runs 20 for deletions); retry delays of failed
    /// items.
    pub run: crate::runtime::Config<20>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(30),
            run: Default::default(),
        }
    }
}

/// The graph as the watches and the workers share it. A plain mutex: it is held only for
/// in-memory updates and lookups, never across an API call.
pub(crate) type SharedGraph = Arc<Mutex<Graph>>;

pub(crate) fn lock(graph: &SharedGraph) -> std::sync::MutexGuard<'_, Graph> {
    // Graph methods finish their changes before anything can panic; a poisoned graph is usable.
    graph.lock().unwrap_or_else(|e| e.into_inner())
}

impl Controller for GarbageCollector {
    const NAME: &'static str = "garbagecollector";
    type Key = Work;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Work> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let task = tokio::spawn(Arc::clone(self).keep_monitors());
        let stop = task.abort_handle();
        vec![Subscription::on_drop(move || stop.abort())]
    }

    async fn reconcile(self: &Arc<Self>, work: Work) -> Result<Action, Error> {
        self.process(work).await
    }
}

impl GarbageCollector {
    /// The collector on the shared cache; its graph fills from its monitors' events once
    /// discovery has said what to watch.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), COMPONENT, None),
            client,
            queue: config.run.queue(),
            graph: Arc::new(Mutex::new(Graph::new())),
            informers: informers.clone(),
            served: Arc::new(RwLock::new(Served::default())),
            ready: watch::Sender::new(false),
            rediscover: Arc::new(Notify::new()),
            unresolved: Mutex::new(Default::default()),
            config,
            processed: Default::default(),
        })
    }

    /// Upstream's `Sync`: reads discovery now, then every `resync` or when poked, and makes
    /// the monitors follow what it finds. New monitors get one period to list (upstream's
    /// wait for their caches); the first round's listing lets the workers start.
    async fn keep_monitors(self: Arc<Self>) {
        let sink = Sink {
            graph: Arc::clone(&self.graph),
            queue: self.queue.clone(),
            rediscover: Arc::clone(&self.rediscover),
        };
        let mut monitors = Monitors::default();
        let mut groups = Vec::new();
        // Rounds still to read soon after a poke: the API server may serve a new CRD's group a
        // moment after the CRD's change shows in its watch.
        let mut follow_ups = 0;
        loop {
            match discovery::discover(&self.client, &groups).await {
                Ok(found) if found.is_empty() => {
                    tracing::info!("no resources reported by discovery; skipping sync")
                }
                Ok(found) if found == groups => tracing::trace!("discovery unchanged"),
                Ok(found) => {
                    let served = Served::new(&found);
                    let (changed, listed) =
                        monitors.sync(served.deletable(), &self.informers, &sink);
                    *self.served.write().unwrap_or_else(|e| e.into_inner()) = served;
                    groups = found;
                    let all = futures::future::join_all(listed);
                    if tokio::time::timeout(self.config.resync, all).await.is_err() {
                        tracing::info!("timed out waiting for the monitors to list");
                    }
                    tracing::debug!(monitors = monitors.len(), changed, "synced monitors");
                    self.ready.send_replace(true);
                    let waiting: Vec<Work> = self
                        .unresolved
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .drain()
                        .collect();
                    for w in waiting {
                        self.queue.add(w);
                    }
                }
                Err(error) => tracing::info!(%error, "failed to discover resources"),
            }
            let next = if follow_ups > 0 {
                follow_ups -= 1;
                FOLLOW_UP
            } else {
                self.config.resync
            };
            tokio::select! {
                _ = tokio::time::sleep(next) => {}
                _ = self.rediscover.notified() => follow_ups = FOLLOW_UPS,
            }
        }
    }
}
