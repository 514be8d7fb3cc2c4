//! The scheduling loop: follow nodes and pods in the process's shared cache, keep the scheduler
//! cache and queue current, decide one pod at a time, bind concurrently.
//!
//! One task owns the cache and the queue, so decisions need no locks and always see every earlier
//! decision (assumed pods). Only the bind requests and status writes run concurrently, at most
//! `parallel_binds` binds at once; a failed bind forgets its assumed pod and retries after backoff.

use crate::{
    algorithm::{self, Decision, Victim},
    cache::{Cache, NodeChange, Placement},
    condition,
    config::SchedulerConfig,
    diagnosis,
    node_info::NodeInfo,
    pod_info::{PodInfo, is_terminal, wants_scheduling},
    preemption::Budget,
    queue::{Backoff, QueuedPod, SchedulingQueue},
    volume_binding::VolumeBinding,
};
use events::{EventType, Recorder};
use futures::StreamExt;
use informer::{Change, Informer, Informers, Shared};
use k8s_openapi::{
    api::{
        core::v1::{Binding, Namespace, Node, ObjectReference, Pod},
        policy::v1::PodDisruptionBudget,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    },
};
use std::{
    future::Future,
    hash::{Hash, Hasher},
    pin::pin,
};
use tokio::{sync::mpsc, task::JoinSet, time::Instant};

/// A change of the shared cache, handed from its handlers to the scheduling task.
enum Event {
    Node(Change<Node>),
    Pod(Change<Pod>),
    Namespace(Change<Namespace>),
}

/// Runs the scheduler on the shared cache `informers` until `shutdown` completes.
///
/// The cache's handlers pass node and pod changes to the one task that owns the scheduler cache;
/// a pod's latest version is looked up in the shared cache when its turn comes. Nothing is
/// decided before both kinds have listed, as upstream waits for its informers to sync, so a
/// restart does not mark pods unschedulable against an empty cluster.
pub async fn run(informers: Informers, config: SchedulerConfig, shutdown: impl Future) {
    let (tx, events) = mpsc::unbounded_channel();
    let pods: Informer<Pod> = informers.get();
    let nodes: Informer<Node> = informers.get();
    let namespaces: Informer<Namespace> = informers.get();
    let node_tx = tx.clone();
    let namespace_tx = tx.clone();
    let _subscriptions = [
        nodes.subscribe(move |c| {
            let _ = node_tx.send(Event::Node(c.clone()));
        }),
        namespaces.subscribe(move |c| {
            let _ = namespace_tx.send(Event::Namespace(c.clone()));
        }),
        pods.subscribe(move |c| {
            let _ = tx.send(Event::Pod(c.clone()));
        }),
    ];
    // Claims, volumes and classes come from watches of the volume binding's own.
    let (volumes, volume_watches) = VolumeBinding::start(informers.client().clone());
    // Disruption budgets are read only when preempting, from a reflector of their own.
    let (budgets, budgets_writer) = reflector::store();
    let budget_watch = reflector::reflector(
        budgets_writer,
        watcher(
            Api::<PodDisruptionBudget>::all(informers.client().clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
    )
    .for_each(|_| async {});
    tokio::select! {
        () = budget_watch => {}
        () = Scheduler::new(informers.client().clone(), config, pods, nodes, budgets, volumes)
            .run(events, shutdown) => {}
        () = volume_watches => {}
    }
}

struct BindDone {
    uid: String,
    namespace: String,
    name: String,
    node: String,
    reference: ObjectReference,
    result: Result<(), kube::Error>,
}

struct Scheduler {
    client: Client,
    config: SchedulerConfig,
    recorder: Recorder,
    pods: Informer<Pod>,
    nodes: Informer<Node>,
    budgets: Store<PodDisruptionBudget>,
    volumes: VolumeBinding,
    cache: Cache,
    queue: SchedulingQueue,
    next_start: usize,
    binds: JoinSet<BindDone>,
}

impl Scheduler {
    fn new(
        client: Client,
        config: SchedulerConfig,
        pods: Informer<Pod>,
        nodes: Informer<Node>,
        budgets: Store<PodDisruptionBudget>,
        volumes: VolumeBinding,
    ) -> Self {
        let recorder = Recorder::new(client.clone(), config.scheduler_name.clone(), None);
        let queue = SchedulingQueue::new(Backoff {
            initial: config.initial_backoff,
            max: config.max_backoff,
        });
        Self {
            client,
            config,
            recorder,
            pods,
            nodes,
            budgets,
            volumes,
            cache: Cache::default(),
            queue,
            next_start: 0,
            binds: JoinSet::new(),
        }
    }

    async fn run(mut self, mut events: mpsc::UnboundedReceiver<Event>, shutdown: impl Future) {
        let mut shutdown = pin!(shutdown);
        let volumes_changed = self.volumes.changed();
        let mut flush = tokio::time::interval(self.config.flush_interval);
        flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let can_schedule = self.pods.has_synced()
                && self.nodes.has_synced()
                && self.binds.len() < self.config.parallel_binds.max(1)
                && self.queue.has_active();
            let backoff_until = self.queue.next_backoff();
            // Watch events and bind results come first, so every decision sees the latest state.
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(done) = self.binds.join_next(), if !self.binds.is_empty() => match done {
                    Ok(done) => self.bind_finished(done),
                    Err(e) => tracing::warn!(error = %e, "bind task failed"),
                },
                Some(event) = events.recv() => match event {
                    Event::Node(change) => self.node_event(change),
                    Event::Pod(change) => self.pod_event(change),
                    Event::Namespace(change) => self.namespace_event(change),
                },
                () = volumes_changed.notified() => {
                    // A claim, volume or class changed: pods waiting for one may fit now.
                    self.queue.move_all_unschedulable(Instant::now());
                }
                _ = flush.tick() => {
                    let now = Instant::now();
                    self.queue.flush_unschedulable_leftover(now, self.config.max_in_unschedulable);
                    self.queue.flush_backoff(now);
                }
                () = tokio::time::sleep_until(backoff_until.unwrap_or_else(Instant::now)), if backoff_until.is_some() => {
                    self.queue.flush_backoff(Instant::now());
                }
                () = std::future::ready(()), if can_schedule => self.schedule_next(),
            }
        }
        self.binds.shutdown().await;
    }

    fn node_event(&mut self, change: Change<Node>) {
        match change {
            Change::Added(node) | Change::Updated { new: node, .. } => self.node_applied(&node),
            Change::Deleted(node) => self.cache.remove_node(&node.name_any()),
        }
    }

    fn node_applied(&mut self, node: &Node) {
        if self.cache.upsert_node(NodeInfo::new(node)) != NodeChange::Unchanged {
            // A new node, or new labels, taints, allocatable or cordon: waiting pods may fit now.
            self.queue.move_all_unschedulable(Instant::now());
        }
    }

    fn namespace_event(&mut self, change: Change<Namespace>) {
        match change {
            Change::Added(ns) | Change::Updated { new: ns, .. } => {
                let labels = ns.metadata.labels.clone().unwrap_or_default();
                if self.cache.set_namespace(&ns.name_any(), labels) {
                    // A namespaceSelector of some affinity term may select it now.
                    self.queue.move_all_unschedulable(Instant::now());
                }
            }
            Change::Deleted(ns) => self.cache.remove_namespace(&ns.name_any()),
        }
    }

    fn pod_event(&mut self, change: Change<Pod>) {
        match change {
            Change::Added(pod) | Change::Updated { new: pod, .. } => self.pod_applied(&pod),
            Change::Deleted(pod) => {
                if let Some(uid) = &pod.metadata.uid {
                    self.pod_gone(uid);
                }
            }
        }
    }

    fn pod_applied(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        if is_terminal(pod) {
            self.pod_gone(uid);
            return;
        }
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty());
        if let Some(node) = node {
            self.queue.remove(uid);
            let terminating = pod.metadata.deletion_timestamp.is_some();
            if !self.cache.is_confirmed_on(uid, node, terminating) && !self.cache.confirm(uid, node)
            {
                self.cache
                    .set_bound(uid, Placement::new(&PodInfo::new(pod), node));
            }
            return;
        }
        if self.cache.is_assumed(uid) {
            // Our bind is in flight; the watch has not caught up yet.
            return;
        }
        if !wants_scheduling(pod, &self.config.scheduler_name) {
            self.queue.remove(uid);
            return;
        }
        if self.queue.contains(uid) {
            self.queue
                .pod_updated(uid, || fingerprint(pod), Instant::now());
        } else {
            let queued = QueuedPod {
                uid: uid.to_string(),
                namespace: pod.namespace().unwrap_or_default(),
                name: pod.name_any(),
            };
            self.queue.add(
                queued,
                pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
            );
        }
    }

    fn pod_gone(&mut self, uid: &str) {
        self.queue.remove(uid);
        if self.cache.remove_pod(uid) {
            // Resources were freed: waiting pods may fit now.
            self.queue.move_all_unschedulable(Instant::now());
        }
    }

    fn schedule_next(&mut self) {
        let Some(queued) = self.queue.pop() else {
            return;
        };
        let pod: Option<Shared<Pod>> = self
            .pods
            .get(&informer::key(&queued.namespace, &queued.name));
        let Some(pod) = pod.filter(|p| p.metadata.uid.as_deref() == Some(&queued.uid)) else {
            self.queue.remove(&queued.uid);
            return;
        };
        if !wants_scheduling(&pod, &self.config.scheduler_name) {
            self.queue.remove(&queued.uid);
            return;
        }
        let mut info = PodInfo::new(&pod);
        let (volumes, volume_state) = match self.volumes.prefilter(&pod, &info, &self.cache) {
            Ok(v) => v,
            Err(reason) => {
                let message = algorithm::rejected_before_filtering(&info, &self.cache, &reason);
                return self.unschedulable(queued, &pod, message, None);
            }
        };
        volumes.constrain(&mut info);
        let budgets = &self.budgets;
        match algorithm::schedule_with(
            &info,
            volume_state,
            &self.cache,
            &mut self.next_start,
            self.config.percentage_of_nodes_to_score,
            || budgets.state().iter().filter_map(|b| budget(b)).collect(),
        ) {
            Decision::Bind(node) => {
                self.cache.assume(&queued.uid, Placement::new(&info, &node));
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &queued.namespace);
                let reference = events::reference(pod.object());
                let client = self.client.clone();
                self.binds.spawn(async move {
                    let result = match volumes.select_node(&client, &node).await {
                        Ok(()) => bind(&api, &queued.name, &node).await,
                        Err(e) => Err(e),
                    };
                    BindDone {
                        uid: queued.uid,
                        namespace: queued.namespace,
                        name: queued.name,
                        node,
                        reference,
                        result,
                    }
                });
            }
            Decision::Unschedulable(message) => {
                // While its victims terminate the pod keeps its nomination (upstream leaves it
                // alone when the pod may not preempt again); otherwise preemption found nothing
                // and the nomination goes, as upstream clears it.
                let nominated =
                    if message.ends_with(&format!("{}.", diagnosis::TERMINATING_ON_NOMINATED)) {
                        info.nominated_node.clone()
                    } else {
                        self.cache.clear_nomination(&queued.uid);
                        None
                    };
                self.unschedulable(queued, &pod, message, nominated)
            }
            Decision::Preempt {
                node,
                victims,
                message,
            } => {
                self.cache.nominate(&info, &node);
                self.evict(&pod, &node, victims);
                self.unschedulable(queued, &pod, message, Some(node));
            }
        }
    }

    /// Evicts preemption victims as upstream's `PreemptPod`: a `DisruptionTarget` condition
    /// says why, then the pod is deleted (its UID as precondition) and a `Preempted` event names
    /// the preemptor.
    fn evict(&mut self, preemptor: &Shared<Pod>, node: &str, victims: Vec<Victim>) {
        let preemptor_uid = preemptor.metadata.uid.clone().unwrap_or_default();
        for v in victims {
            let Some(pod) = self
                .pods
                .get(&informer::key(&v.namespace, &v.name))
                .filter(|p| p.metadata.uid.as_deref() == Some(&v.uid))
            else {
                continue;
            };
            self.recorder.record(
                &events::reference(pod.object()),
                EventType::Normal,
                "Preempted",
                format!("Preempted by pod {preemptor_uid} on node {node}"),
            );
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &v.namespace);
            let condition = condition::preempted_patch(&self.config.scheduler_name, clock::now());
            tokio::spawn(async move {
                if let Err(e) = api
                    .patch_status(
                        &v.name,
                        &PatchParams::default(),
                        &Patch::Strategic(&condition),
                    )
                    .await
                {
                    tracing::debug!(pod = %v.name, error = %e, "DisruptionTarget condition not written");
                }
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(v.uid.clone()),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                if let Err(e) = api.delete(&v.name, &params).await {
                    tracing::debug!(pod = %v.name, error = %e, "preemption victim not deleted");
                }
            });
        }
    }

    /// Puts a pod that fits nowhere (yet) aside, with an event and its `PodScheduled` condition;
    /// `nominated` is the node a preemption made room on (`None` clears an old nomination).
    fn unschedulable(
        &mut self,
        queued: QueuedPod,
        pod: &Shared<Pod>,
        message: String,
        nominated: Option<String>,
    ) {
        tracing::debug!(pod = %queued.name, %message, "unschedulable");
        self.queue
            .unschedulable(&queued.uid, Instant::now(), fingerprint(pod));
        self.recorder.record(
            &events::reference(pod.object()),
            EventType::Warning,
            "FailedScheduling",
            message.clone(),
        );
        if let Some(patch) =
            condition::unschedulable_patch(pod, &message, nominated.as_deref(), clock::now())
        {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &queued.namespace);
            tokio::spawn(async move {
                if let Err(e) = api
                    .patch_status(
                        &queued.name,
                        &PatchParams::default(),
                        &Patch::Strategic(&patch),
                    )
                    .await
                {
                    tracing::debug!(pod = %queued.name, error = %e, "PodScheduled condition not written");
                }
            });
        }
    }

    fn bind_finished(&mut self, done: BindDone) {
        match done.result {
            Ok(()) => {
                self.queue.remove(&done.uid);
                let message = format!(
                    "Successfully assigned {}/{} to {}",
                    done.namespace, done.name, done.node
                );
                self.recorder
                    .record(&done.reference, EventType::Normal, "Scheduled", message);
            }
            Err(e) => {
                self.cache.forget(&done.uid);
                match &e {
                    // Gone, or bound / being deleted meanwhile: the watch tells the rest.
                    kube::Error::Api(s) if s.code == 404 || s.code == 409 => {
                        self.queue.remove(&done.uid)
                    }
                    _ => {
                        tracing::warn!(pod = %done.name, node = %done.node, error = %e, "bind failed; retrying");
                        let message = format!("Binding rejected: {e}");
                        self.recorder.record(
                            &done.reference,
                            EventType::Warning,
                            "FailedScheduling",
                            message,
                        );
                        self.queue.retry_later(&done.uid, Instant::now());
                    }
                }
            }
        }
    }
}

/// What preemption needs of a PodDisruptionBudget; `None` for one it cannot read.
fn budget(b: &PodDisruptionBudget) -> Option<Budget> {
    let selector = b.spec.as_ref()?.selector.as_ref()?;
    let status = b.status.as_ref();
    Some(Budget {
        namespace: b.namespace().unwrap_or_default(),
        selector: api::selector::LabelSelector::from_label_selector(selector).ok()?,
        allowed: status.map_or(0, |s| i64::from(s.disruptions_allowed)),
        disrupted: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default(),
    })
}

async fn bind(api: &Api<Pod>, name: &str, node: &str) -> Result<(), kube::Error> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    api.create_subresource::<_, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await?;
    Ok(())
}

/// Identifies a pod's spec, so a pending pod whose spec changes (e.g. a toleration added) is
/// retried while our own status writes are not.
fn fingerprint(pod: &Pod) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(&pod.spec)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}
