//! The collector's watches, one per watched kind (upstream's `GraphBuilder` monitors and
//! `syncMonitors`): started for each kind discovery adds, stopped for each it removes, each
//! feeding its objects' metadata to the graph.
//!
//! A kind the process already caches (pods, the workloads, ...: whichever informer a controller
//! started, typed or dynamic) is followed through the shared cache
//! ([`Informers::follow_metadata`]), as upstream's collector uses the shared informers; any other
//! kind, custom resources included, through a metadata-only watch of the collector's own
//! (upstream's metadata informers), which stops with its monitor. Which kinds those are is
//! asked of the cache, not listed here.

use super::{
    SharedGraph,
    graph::{Identity, Observed, Work},
    lock,
    resources::Kind,
};
use crate::runtime::WorkQueue;
use futures::future::BoxFuture;
use informer::{Informers, MetaChange, MetaHandler, Subscription};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::{collections::HashMap, sync::Arc};
use tokio::sync::Notify;

/// Where monitors deliver: the graph, the queue of the work its changes make, and the signal
/// that asks for discovery again.
#[derive(Clone)]
pub(crate) struct Sink {
    pub graph: SharedGraph,
    pub queue: WorkQueue<Work>,
    pub rediscover: Arc<Notify>,
}

/// The running monitors, by `apiVersion` and plural (upstream keys them by group, version and
/// resource: a kind whose preferred version changes is watched anew).
#[derive(Default)]
pub(crate) struct Monitors {
    running: HashMap<(String, String), Vec<Subscription>>,
}

impl Monitors {
    /// Starts a monitor for each of `kinds` not watched yet and stops the others. Returns
    /// whether anything changed and, for each new monitor, a future that ends once it has
    /// listed.
    pub fn sync(
        &mut self,
        kinds: &[Kind],
        informers: &Informers,
        sink: &Sink,
    ) -> (bool, Vec<BoxFuture<'static, ()>>) {
        let mut current = HashMap::new();
        let mut synced = Vec::new();
        for kind in kinds {
            let key = (
                kind.resource.api_version.clone(),
                kind.resource.plural.clone(),
            );
            if current.contains_key(&key) {
                continue;
            }
            let monitor = match self.running.remove(&key) {
                Some(running) => running,
                None => {
                    tracing::debug!(api_version = %key.0, resource = %key.1, "starting monitor");
                    let (subscriptions, listed) = start(kind, informers, sink);
                    synced.push(listed);
                    subscriptions
                }
            };
            current.insert(key, monitor);
        }
        let removed = self.running.len();
        for (api_version, resource) in self.running.keys() {
            tracing::debug!(%api_version, %resource, "stopping monitor");
        }
        // Dropping a monitor's subscriptions stops it.
        self.running = current;
        (removed > 0 || !synced.is_empty(), synced)
    }

    /// How many kinds are watched.
    pub fn len(&self) -> usize {
        self.running.len()
    }
}

/// Starts the monitor of `kind`: its subscriptions (dropping them stops it) and a future that
/// ends once it has listed.
fn start(
    kind: &Kind,
    informers: &Informers,
    sink: &Sink,
) -> (Vec<Subscription>, BoxFuture<'static, ()>) {
    let handler = feed(kind, sink);
    if let Some((subscription, listed)) = informers.follow_metadata(&kind.resource, handler.clone())
    {
        return (vec![subscription], Box::pin(listed));
    }
    let (informer, watch) = informers.metadata(&kind.resource);
    let subscription = informer.subscribe_meta(handler);
    (
        vec![subscription, watch],
        Box::pin(async move { informer.wait_synced().await }),
    )
}

/// The handler that feeds a kind's changes to the graph and their work to the queue.
fn feed(kind: &Kind, sink: &Sink) -> MetaHandler {
    // A CRD or an APIService that changes may change what is served.
    let rediscovers = kind.is("apiextensions.k8s.io", "CustomResourceDefinition")
        || kind.is("apiregistration.k8s.io", "APIService");
    let (sink, kind) = (sink.clone(), kind.clone());
    Arc::new(move |change: MetaChange<'_>| {
        let work = if change.deleted {
            match &change.meta.uid {
                Some(uid) => lock(&sink.graph).remove(uid),
                None => Vec::new(),
            }
        } else {
            observe(&kind, change.meta)
                .map(|obs| lock(&sink.graph).upsert(obs))
                .unwrap_or_default()
        };
        for w in work {
            sink.queue.add(w);
        }
        if rediscovers && !change.resync {
            sink.rediscover.notify_one();
        }
    })
}

/// The parts of an object's metadata the graph needs, if it has a uid.
fn observe(kind: &Kind, meta: &ObjectMeta) -> Option<Observed> {
    Some(Observed {
        identity: Identity {
            api_version: kind.resource.api_version.clone(),
            kind: kind.resource.kind.clone(),
            namespace: meta.namespace.clone().filter(|ns| !ns.is_empty()),
            name: meta.name.clone()?,
            uid: meta.uid.clone()?,
        },
        owners: meta.owner_references.clone().unwrap_or_default(),
        deleting: meta.deletion_timestamp.is_some(),
        finalizers: meta.finalizers.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gc::Graph;
    use k8s_openapi::api::core::v1::PodTemplate;
    use kube::{Api, api::PostParams};
    use std::{sync::Mutex, time::Duration};

    /// A PodTemplate owned by the (absent) object of uid `owner`.
    fn template(name: &str, owner: &str) -> PodTemplate {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": owner}]},
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn monitors_start_and_stop_with_the_kinds_given() {
        let server = embedded::Embedded::memory().await.unwrap();
        let informers = Informers::new(server.client());
        let sink = Sink {
            graph: Arc::new(Mutex::new(Graph::new())),
            queue: WorkQueue::default(),
            rediscover: Arc::new(Notify::new()),
        };
        // A kind no controller caches: followed by a metadata watch of the collector's own.
        let kind = Kind::new("v1", "PodTemplate", "podtemplates", true).unwrap();
        let mut monitors = Monitors::default();
        let (changed, listed) = monitors.sync(std::slice::from_ref(&kind), &informers, &sink);
        assert!(changed);
        assert_eq!(listed.len(), 1);
        futures::future::join_all(listed).await;

        // Its objects reach the graph: the unseen owner is queued for verification.
        let api: Api<PodTemplate> = Api::namespaced(server.client(), "default");
        api.create(&PostParams::default(), &template("t", "owner-1"))
            .await
            .unwrap();
        let work = tokio::time::timeout(Duration::from_secs(10), sink.queue.next())
            .await
            .unwrap();
        assert_eq!(work, Some(Work::AttemptToDelete("owner-1".into())));
        let graph = lock(&sink.graph);
        let node = graph
            .get("owner-1")
            .map(|n| n.dependents.len())
            .unwrap_or_default();
        assert_eq!(node, 1);
        drop(graph);

        // The same kinds again: nothing to do.
        let (changed, listed) = monitors.sync(std::slice::from_ref(&kind), &informers, &sink);
        assert!(!changed && listed.is_empty());
        // The kind goes away: its monitor stops.
        let (changed, listed) = monitors.sync(&[], &informers, &sink);
        assert!(changed && listed.is_empty());
        assert_eq!(monitors.len(), 0);
    }
}
