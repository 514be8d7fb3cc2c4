//! The garbage collector, as upstream's `pkg/controller/garbagecollector`: deletes objects whose
//! owners are gone (Background), holds an owner in `foregroundDeletion` until its blocking
//! dependents are gone (Foreground), and strips an owner's references from its dependents before
//! releasing it (Orphan).
//!
//! Metadata-only watches of every [`Kind`] feed one [`Graph`] (uid -> owners and dependents);
//! each change yields the [`Work`] it makes necessary, which workers take from a
//! [`WorkQueue`](crate::runtime::WorkQueue). Decisions are made on the graph; an owner the graph
//! has not seen is looked up live by name (a recreated object with another uid counts as absent);
//! every write carries the object's `resourceVersion` as precondition, so a decision on stale
//! data fails with a conflict and is retried on fresh data instead of doing harm.

pub mod collector;
pub mod graph;
pub mod resources;

pub use graph::{Graph, Work};
pub use resources::{Kind, default_kinds};

use crate::runtime::{Backoff, WorkQueue, run_workers};
use collector::Collector;
use futures::StreamExt;
use graph::{Identity, Observed, Uid};
use kube::{
    Api, Client,
    api::{DynamicObject, PartialObjectMeta},
    runtime::{WatchStreamExt, watcher},
};
use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};
use tokio::sync::watch;

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

/// Runs the garbage collector until the future is dropped. Workers start once every watch has
/// listed its kind, so nothing is judged on a half-built graph.
pub async fn run(client: Client, config: Config) {
    let graph: SharedGraph = Arc::new(Mutex::new(Graph::new()));
    let queue = WorkQueue::new(config.backoff);
    let (synced_tx, mut synced_rx) = watch::channel(false);
    let collector = Collector::new(
        client.clone(),
        config.kinds.clone(),
        Arc::clone(&graph),
        queue.clone(),
    );
    let ingest = ingest(
        client,
        config.kinds.clone(),
        Arc::clone(&graph),
        queue.clone(),
        synced_tx,
    );
    let workers = async {
        if synced_rx.wait_for(|s| *s).await.is_err() {
            return;
        }
        tracing::info!(objects = lock(&graph).len(), "garbage collector synced");
        run_workers("garbage-collector", queue.clone(), config.workers, |w| {
            collector.reconcile(w)
        })
        .await
    };
    tokio::join!(ingest, workers);
}

/// The parts of an object's metadata the graph needs, if it has a uid.
fn observe(kind: &Kind, obj: PartialObjectMeta<DynamicObject>) -> Option<Observed> {
    let meta = obj.metadata;
    Some(Observed {
        identity: Identity {
            api_version: kind.resource.api_version.clone(),
            kind: kind.resource.kind.clone(),
            namespace: meta.namespace,
            name: meta.name?,
            uid: meta.uid?,
        },
        owners: meta.owner_references.unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        finalizers: meta.finalizers.unwrap_or_default(),
        resource_version: meta.resource_version,
    })
}

/// Applies the events of every kind's watch to the graph and queues the resulting work.
async fn ingest(
    client: Client,
    kinds: Vec<Kind>,
    graph: SharedGraph,
    queue: WorkQueue<Work>,
    synced: watch::Sender<bool>,
) {
    let streams = kinds.iter().enumerate().map(|(i, kind)| {
        let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(client.clone(), &kind.resource);
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |event| (i, event))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    let mut listing: Vec<Option<HashSet<Uid>>> = vec![None; kinds.len()];
    let mut listed_once = vec![false; kinds.len()];
    while let Some((i, event)) = events.next().await {
        let kind = &kinds[i];
        let work = match event {
            Ok(watcher::Event::Init) => {
                listing[i] = Some(HashSet::new());
                Vec::new()
            }
            Ok(watcher::Event::InitApply(obj)) => match observe(kind, obj) {
                Some(o) => {
                    if let Some(seen) = listing[i].as_mut() {
                        seen.insert(o.identity.uid.clone());
                    }
                    lock(&graph).upsert(o)
                }
                None => Vec::new(),
            },
            Ok(watcher::Event::InitDone) => {
                let seen = listing[i].take().unwrap_or_default();
                let work = lock(&graph).retain_listed(
                    &kind.resource.api_version,
                    &kind.resource.kind,
                    &seen,
                );
                listed_once[i] = true;
                if listed_once.iter().all(|l| *l) {
                    synced.send_replace(true);
                }
                work
            }
            Ok(watcher::Event::Apply(obj)) => observe(kind, obj)
                .map(|o| lock(&graph).upsert(o))
                .unwrap_or_default(),
            Ok(watcher::Event::Delete(obj)) => match obj.metadata.uid {
                Some(uid) => lock(&graph).remove(&uid),
                None => Vec::new(),
            },
            Err(error) => {
                tracing::warn!(kind = %kind.resource.kind, %error, "garbage collector watch failed; retrying");
                Vec::new()
            }
        };
        for w in work {
            queue.add(w);
        }
    }
}
