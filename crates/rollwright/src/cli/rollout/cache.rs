//! A local copy of one workload and what belongs to it (revisions, pods, and on request the
//! nodes and events), fed by watches: one list per watch when it starts, then only changes.
//! `rollout status` and `rollout watch` redraw from it as often as they like without asking
//! the server again, which is what keeps a 5,000-node view fluid.

use super::model::{
    CONTROLLER_REVISION_HASH, EventView, NodeView, POD_TEMPLATE_HASH, PodView, RevisionView,
    Snapshot, WorkloadView,
};
use crate::cli::{
    failure::Explain,
    kubeconfig::Session,
    workload::{Kind, WorkloadRef},
};
use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, ReplicaSet},
    core::v1::{Event, Node, Pod},
};
use kube::{
    Api, Resource, ResourceExt,
    api::DynamicObject,
    runtime::{WatchStreamExt, watcher},
};
use serde_json::Value;
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};
use tokio::sync::watch;

/// What to follow besides the workload, its revisions and its pods.
#[derive(Clone, Copy, Debug, Default)]
pub struct Extras {
    /// The cluster's nodes (the DaemonSet view has a cell per node).
    pub nodes: bool,
    /// Events of the namespace about the workload, its revisions and pods.
    pub events: bool,
}

/// Objects of one type by name, replaced as a whole when a watch (re)lists.
struct Mirror<V> {
    items: HashMap<String, V>,
    relisting: Option<HashMap<String, V>>,
    synced: bool,
}

impl<V> Default for Mirror<V> {
    fn default() -> Self {
        Self {
            items: HashMap::new(),
            relisting: None,
            synced: false,
        }
    }
}

impl<V> Mirror<V> {
    /// Applies one watch event; `read` turns an object into its entry (or drops it).
    fn apply<K: Resource>(&mut self, event: watcher::Event<K>, read: impl Fn(&K) -> Option<V>) {
        match event {
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(obj) => {
                if let Some(v) = read(&obj) {
                    self.relisting
                        .get_or_insert_default()
                        .insert(obj.name_any(), v);
                }
            }
            watcher::Event::InitDone => {
                if let Some(items) = self.relisting.take() {
                    self.items = items;
                }
                self.synced = true;
            }
            watcher::Event::Apply(obj) => match read(&obj) {
                Some(v) => {
                    self.items.insert(obj.name_any(), v);
                }
                None => {
                    self.items.remove(&obj.name_any());
                }
            },
            watcher::Event::Delete(obj) => {
                self.items.remove(&obj.name_any());
            }
        }
    }
}

/// Everything the watches have delivered.
struct Index {
    kind: Kind,
    name: String,
    workload: Mirror<Value>,
    revisions: Mirror<RevisionView>,
    pods: Mirror<Arc<PodView>>,
    nodes: Option<Mirror<Arc<NodeView>>>,
    events: Option<Mirror<EventView>>,
    /// The last watch error, until a watch delivers again.
    error: Option<String>,
}

/// How many events the snapshot keeps (the newest).
const EVENTS_KEPT: usize = 200;

impl Index {
    fn synced(&self) -> bool {
        self.workload.synced
            && self.revisions.synced
            && self.pods.synced
            && self.nodes.as_ref().is_none_or(|m| m.synced)
            && self.events.as_ref().is_none_or(|m| m.synced)
    }

    fn snapshot(&self) -> Option<Snapshot> {
        let obj = self.workload.items.get(&self.name)?;
        let workload = WorkloadView::from_json(self.kind, obj);
        let mut revisions: Vec<RevisionView> = self
            .revisions
            .items
            .values()
            .filter(|r| r.owner_uid.as_deref() == Some(workload.uid.as_str()))
            .cloned()
            .collect();
        revisions.sort_by_key(|r| r.number);
        let owners: HashSet<&str> = match self.kind {
            Kind::Deployment => revisions.iter().map(|r| r.uid.as_str()).collect(),
            Kind::DaemonSet | Kind::StatefulSet => HashSet::from([workload.uid.as_str()]),
        };
        let mut pods: Vec<Arc<PodView>> = self
            .pods
            .items
            .values()
            .filter(|p| p.owner_uid.as_deref().is_some_and(|o| owners.contains(o)))
            .cloned()
            .collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        let mut nodes: Vec<Arc<NodeView>> = self
            .nodes
            .iter()
            .flat_map(|m| m.items.values().cloned())
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let pod_names: HashSet<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        let revision_names: HashSet<&str> = revisions.iter().map(|r| r.name.as_str()).collect();
        let mut events: Vec<EventView> = self
            .events
            .iter()
            .flat_map(|m| m.items.values())
            .filter(|e| {
                e.object_name == workload.name
                    || pod_names.contains(e.object_name.as_str())
                    || revision_names.contains(e.object_name.as_str())
            })
            .cloned()
            .collect();
        events.sort_by_key(|e| e.time);
        let skip = events.len().saturating_sub(EVENTS_KEPT);
        events.drain(..skip);
        Some(Snapshot {
            workload,
            revisions,
            pods,
            nodes,
            events,
        })
    }
}

/// The cache; dropping it stops its watches.
pub struct Cache {
    index: Arc<Mutex<Index>>,
    changes: watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Runs a watch for as long as the cache lives, applying its events under the lock and
/// announcing each change.
fn follow<K>(
    api: Api<K>,
    config: watcher::Config,
    index: &Arc<Mutex<Index>>,
    tx: &Arc<watch::Sender<u64>>,
    apply: fn(&mut Index, watcher::Event<K>),
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (index, tx) = (Arc::clone(index), Arc::clone(tx));
    tokio::spawn(async move {
        let mut stream = watcher(api, config).default_backoff().boxed();
        while let Some(item) = stream.next().await {
            {
                let mut idx = index.lock().unwrap_or_else(|e| e.into_inner());
                match item {
                    Ok(event) => {
                        apply(&mut idx, event);
                        idx.error = None;
                    }
                    Err(e) => idx.error = Some(e.to_string()),
                }
            }
            tx.send_modify(|v| *v += 1);
        }
    })
}

fn revision_label(kind: Kind) -> &'static str {
    match kind {
        Kind::Deployment => POD_TEMPLATE_HASH,
        Kind::DaemonSet | Kind::StatefulSet => CONTROLLER_REVISION_HASH,
    }
}

impl Cache {
    /// Reads the workload once (so a wrong name or an unreachable server fails here, with one
    /// clear line), then starts the watches.
    pub async fn start(
        session: &Session,
        workload: &WorkloadRef,
        namespace: &str,
        extras: Extras,
    ) -> anyhow::Result<Cache> {
        let client = session.client.clone();
        let kind = workload.kind;
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &kind.api_resource());
        let obj = api
            .get(&workload.name)
            .await
            .explain(session, Some(namespace))?;
        let selector_json = obj
            .data
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or_default();
        let selector = api::selector::LabelSelector::from_json(&selector_json)
            .with_context(|| format!("reading the selector of {workload}"))?
            .to_string();
        let index = Arc::new(Mutex::new(Index {
            kind,
            name: workload.name.clone(),
            workload: Mirror::default(),
            revisions: Mirror::default(),
            pods: Mirror::default(),
            nodes: extras.nodes.then(Mirror::default),
            events: extras.events.then(Mirror::default),
            error: None,
        }));
        let (tx, rx) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let by_name =
            watcher::Config::default().fields(&format!("metadata.name={}", workload.name));
        let selected = watcher::Config::default().labels(&selector);
        let mut tasks = vec![follow(api, by_name, &index, &tx, |idx, ev| {
            idx.workload
                .apply(ev, |o: &DynamicObject| serde_json::to_value(o).ok())
        })];
        tasks.push(follow(
            Api::<Pod>::namespaced(client.clone(), namespace),
            selected.clone(),
            &index,
            &tx,
            |idx, ev| {
                let label = revision_label(idx.kind);
                idx.pods
                    .apply(ev, |p: &Pod| Some(Arc::new(PodView::from_pod(p, label))))
            },
        ));
        tasks.push(match kind {
            Kind::Deployment => follow(
                Api::<ReplicaSet>::namespaced(client.clone(), namespace),
                selected,
                &index,
                &tx,
                |idx, ev| {
                    idx.revisions.apply(ev, |rs: &ReplicaSet| {
                        Some(RevisionView::from_replica_set(rs))
                    })
                },
            ),
            Kind::DaemonSet | Kind::StatefulSet => follow(
                Api::<ControllerRevision>::namespaced(client.clone(), namespace),
                selected,
                &index,
                &tx,
                |idx, ev| {
                    let kind = idx.kind;
                    idx.revisions.apply(ev, |cr: &ControllerRevision| {
                        Some(RevisionView::from_controller_revision(kind, cr))
                    })
                },
            ),
        });
        if extras.nodes {
            tasks.push(follow(
                Api::<Node>::all(client.clone()),
                watcher::Config::default(),
                &index,
                &tx,
                |idx, ev| {
                    if let Some(m) = idx.nodes.as_mut() {
                        m.apply(ev, |n: &Node| Some(Arc::new(NodeView::from_node(n))));
                    }
                },
            ));
        }
        if extras.events {
            tasks.push(follow(
                Api::<Event>::namespaced(client, namespace),
                watcher::Config::default(),
                &index,
                &tx,
                |idx, ev| {
                    // Most of a namespace's events are about other objects: keep only those
                    // that may be ours (the workload's name prefixes its revisions and pods).
                    let prefix = idx.name.clone();
                    if let Some(m) = idx.events.as_mut() {
                        m.apply(ev, |e: &Event| {
                            e.involved_object
                                .name
                                .as_deref()
                                .is_some_and(|n| n.starts_with(&prefix))
                                .then(|| EventView::from_event(e))
                        });
                    }
                },
            ));
        }
        Ok(Cache {
            index,
            changes: rx,
            tasks,
        })
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether every watch has delivered its first list.
    pub fn synced(&self) -> bool {
        self.index().synced()
    }

    /// The state now; `None` once the workload is gone.
    pub fn snapshot(&self) -> Option<Snapshot> {
        self.index().snapshot()
    }

    /// The last watch error, while the watches retry.
    pub fn error(&self) -> Option<String> {
        self.index().error.clone()
    }

    /// Waits for the next change.
    pub async fn changed(&mut self) -> anyhow::Result<()> {
        self.changes
            .changed()
            .await
            .context("the watches of the rollout stopped")
    }

    /// Waits until every watch has listed.
    pub async fn wait_synced(&mut self) -> anyhow::Result<()> {
        while !self.synced() {
            self.changed().await?;
        }
        Ok(())
    }
}
