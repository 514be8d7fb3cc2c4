//! The garbage collector, as upstream's `pkg/controller/garbagecollector`: deletes objects whose
//! owners are gone (Background), holds an owner in `foregroundDeletion` until its blocking
//! dependents are gone (Foreground), and strips an owner's references from its dependents before
//! releasing it (Orphan).
//!
//! The shared cache's objects of every [`Kind`] feed one [`Graph`] (uid -> owners and
//! dependents); each change yields the [`Work`] it makes necessary, which workers take from a
//! [`WorkQueue`]. Decisions are made on the graph; an owner the graph
//! has not seen is looked up live by name (a recreated object with another uid counts as absent);
//! every write carries the object's `resourceVersion` as precondition, so a decision on stale
//! data fails with a conflict and is retried on fresh data instead of doing harm.
//!
//! Owners can wait on each other in a cycle (a foreground deletion of one of three pods that own
//! each other round, upstream's conformance spec "should not be blocked by dependency circle").
//! As upstream, an owner in foreground deletion queues only the blocking dependents not already
//! waiting for their own (so owners in a cycle do not queue each other for ever), and a dependent
//! whose owner and own dependent both wait has its references unblocked before its deletion,
//! which breaks the cycle ([`collector::Plan::UnblockThenDelete`]).

pub mod collector;
pub mod graph;
pub mod resources;

pub use collector::GarbageCollector;
pub use graph::{Graph, Work};
pub use resources::{Kind, default_kinds};

use crate::runtime::{Action, Backoff, Controller, WorkQueue};
use graph::{Identity, Observed};
use informer::{Change, Informer, Informers, Object, Subscription};
use k8s_openapi::{
    api::{
        apps::v1::{ControllerRevision, Deployment, ReplicaSet, StatefulSet},
        batch::v1::{CronJob, Job},
        core::v1::{Node, PersistentVolumeClaim, Pod},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use std::sync::{Arc, Mutex};

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
}

/// How the collector runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The kinds to watch ([`default_kinds`] serves this API server; add kinds for a real
    /// cluster). An owner of another kind cannot be verified and is treated as present.
    pub kinds: Vec<Kind>,
    /// Concurrent workers (upstream runs 20 for deletions).
    pub workers: usize,
    /// Retry delays of failed items.
    pub backoff: Backoff,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            kinds: default_kinds(),
            workers: 20,
            backoff: Backoff::default(),
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

    fn workers(&self) -> usize {
        self.config.workers
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        self.config
            .kinds
            .iter()
            .map(|kind| self.follow_kind(kind))
            .collect()
    }

    async fn reconcile(self: &Arc<Self>, work: Work) -> Result<Action, Error> {
        self.process(work).await
    }
}

impl GarbageCollector {
    /// The collector on the shared cache; its graph fills from the cache's events.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            queue: WorkQueue::new(config.backoff),
            graph: Arc::new(Mutex::new(Graph::new())),
            informers: informers.clone(),
            config,
            processed: Default::default(),
        })
    }

    /// Feeds the graph from the cache's objects of `kind`: the typed informer the other
    /// controllers share where there is one, a dynamic one otherwise (DaemonSets are cached as
    /// dynamic objects, which keeps rollwright's `podUpdatePolicy`).
    fn follow_kind(self: &Arc<Self>, kind: &Kind) -> Subscription {
        let i = &self.informers;
        let r = &kind.resource;
        match (r.group.as_str(), r.kind.as_str()) {
            ("", "Pod") => self.follow(&i.get::<Pod>(), kind),
            ("", "Node") => self.follow(&i.get::<Node>(), kind),
            ("", "PersistentVolumeClaim") => self.follow(&i.get::<PersistentVolumeClaim>(), kind),
            ("apps", "ReplicaSet") => self.follow(&i.get::<ReplicaSet>(), kind),
            ("apps", "Deployment") => self.follow(&i.get::<Deployment>(), kind),
            ("apps", "StatefulSet") => self.follow(&i.get::<StatefulSet>(), kind),
            ("apps", "ControllerRevision") => self.follow(&i.get::<ControllerRevision>(), kind),
            ("batch", "Job") => self.follow(&i.get::<Job>(), kind),
            ("batch", "CronJob") => self.follow(&i.get::<CronJob>(), kind),
            _ => self.follow(&i.dynamic(r), kind),
        }
    }

    fn follow<K: Object>(self: &Arc<Self>, informer: &Informer<K>, kind: &Kind) -> Subscription {
        let (gc, kind) = (Arc::clone(self), kind.clone());
        informer.subscribe(move |change| {
            let work = match change {
                Change::Added(o) | Change::Updated { new: o, .. } => observe(&kind, o.meta())
                    .map(|obs| lock(&gc.graph).upsert(obs))
                    .unwrap_or_default(),
                Change::Deleted(o) => match &o.meta().uid {
                    Some(uid) => lock(&gc.graph).remove(uid),
                    None => Vec::new(),
                },
            };
            for w in work {
                gc.queue.add(w);
            }
        })
    }
}

/// The parts of an object's metadata the graph needs, if it has a uid.
fn observe(kind: &Kind, meta: &ObjectMeta) -> Option<Observed> {
    Some(Observed {
        identity: Identity {
            api_version: kind.resource.api_version.clone(),
            kind: kind.resource.kind.clone(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
            uid: meta.uid.clone()?,
        },
        owners: meta.owner_references.clone().unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        finalizers: meta.finalizers.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone(),
    })
}
