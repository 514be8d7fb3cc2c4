//! The simulation loop: one task owns every simulated node and pod, fed by two watches (nodes
//! carrying the simulated label, pods with a `spec.nodeName`) and one heap of deadlines. Nothing
//! here waits on the API: writes go to the [`Writer`](crate::writer::Writer) queue. The watches
//! read as the simulator's reader; each node's events are recorded with that node's client (see
//! [`Identities`]).

use crate::{
    Identities,
    config::{HEARTBEAT_ANNOTATION, NodeSim, PRESSURE_ANNOTATION, SIMULATED_LABEL},
    distribution::{Distribution, pod_rng, stable_hash},
    mounts::{Kind, Objects},
    node::{self, Observed, Pressure},
    pod::{Ctx, Outcome, PodSim, PodView, wall_now},
    profile::Profile,
    resync::{self, Resync},
    stats::Stats,
    volumes::VolumeGate,
    writer::{Key, Write, Writer},
};
use events::{EventType, Recorder};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, ObjectReference, PersistentVolumeClaim, Pod, Secret,
};
use kube::{
    Api, ResourceExt,
    core::PartialObjectMeta,
    runtime::{WatchStreamExt, watcher},
};
use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, HashSet},
    net::Ipv4Addr,
    pin::pin,
    sync::Arc,
    time::Duration,
};
use tokio::time::Instant;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Pod(String),
    Lease(String),
    NodeStatus(String),
    /// Write a pod's status back after someone else changed it (deferred by the interval).
    Resync(String),
}

struct SimNode {
    uid: String,
    index: u32,
    stopped: bool,
    pressure: Pressure,
    observed: Vec<Observed>,
    has_info: bool,
    images: HashSet<String>,
    /// Files pods' commands made under host paths (see [`crate::command`]).
    files: HashSet<String>,
    /// Pod IPs in use, one bit per host of the node's /24.
    ips: [u64; 4],
    recorder: Recorder,
    lease_due: Option<Instant>,
    status_due: Instant,
    pods: HashSet<String>,
    /// The capacity the Node carried when first seen, kept in every status post (as kwok does),
    /// so a node added with its own capacity keeps it; `None`: the configured default.
    capacity: Option<serde_json::Value>,
}

impl SimNode {
    fn allocate_ip(&mut self) -> Option<u8> {
        (2u8..=254)
            .find(|h| self.ips[(*h / 64) as usize] & (1 << (h % 64)) == 0)
            .inspect(|h| {
                self.ips[(*h / 64) as usize] |= 1 << (h % 64);
            })
    }

    fn release_ip(&mut self, host: u8) {
        self.ips[(host / 64) as usize] &= !(1 << (host % 64));
    }
}

pub(crate) struct Engine {
    identities: Identities,
    cfg: NodeSim,
    profile: Profile,
    start_delay: Distribution,
    readiness_delay: Distribution,
    writer: Writer,
    stats: Arc<Stats>,
    nodes: HashMap<String, SimNode>,
    used_indices: HashSet<u32>,
    /// Boxed: a `PodSim` is over a kilobyte, and a map of them inline would hold that for every
    /// empty slot too (up to half the table) and copy all of it when the table grows.
    pods: HashMap<String, Box<PodSim>>,
    /// Bound pods whose node is not simulated (yet), by node; they start when it appears.
    parked: HashMap<String, HashMap<String, PodView>>,
    parked_node: HashMap<String, String>,
    /// Bound pods waiting for their claims to bind.
    volumes: VolumeGate,
    /// The Secrets and ConfigMaps that exist, which pods' volumes need.
    objects: Objects,
    timers: BinaryHeap<Reverse<(Instant, Timer)>>,
    /// The deadline each pod is queued for; older heap entries for it are stale.
    pod_timer: HashMap<String, Instant>,
    /// The token manager: started pods' projected ServiceAccount tokens.
    tokens: tokio::sync::mpsc::UnboundedSender<crate::tokens::Msg>,
    /// Certificate generators report their runs' ends here.
    tool_done: tokio::sync::mpsc::UnboundedSender<ToolDone>,
    tool_done_rx: Option<tokio::sync::mpsc::UnboundedReceiver<ToolDone>>,
}

/// A certificate generator's run ended.
#[derive(Debug)]
struct ToolDone {
    uid: String,
    init: bool,
    index: usize,
    container_id: String,
    code: i32,
}

/// How long a generator waits for its pod's ServiceAccount token (the kubelet mounts it before
/// the container starts; the simulation requests it as the pod starts).
const TOKEN_WAIT: Duration = Duration::from_secs(30);

/// Runs a generator as its pod's ServiceAccount: the token the kubelet holds for the container,
/// authenticated by the API server, then the tool's requests as that user.
async fn run_tool(
    identities: &Identities,
    node: &str,
    stats: &Stats,
    uid: &str,
    tool: &crate::certgen::Tool,
) -> Result<(), crate::certgen::Failure> {
    use crate::certgen::Failure;
    let Some(key) = tool.token_key.as_deref() else {
        return Err(Failure::InCluster(
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined".into(),
        ));
    };
    let held = tokio::time::timeout(
        TOKEN_WAIT,
        stats.tokens.wait_for(uid, |m| m.contains_key(key)),
    )
    .await
    .map_err(|_| Failure::InCluster(format!("no token at {key}")))?;
    let token = held.get(key).cloned().unwrap_or_default();
    let user = crate::certgen::authenticate(&identities.node(node), &token).await?;
    let Some(client) = identities.user(user) else {
        return Ok(());
    };
    crate::certgen::run(&tool.task, &client).await
}

impl Engine {
    pub(crate) fn new(
        identities: Identities,
        mut cfg: NodeSim,
        profile: Profile,
        writer: Writer,
        stats: Arc<Stats>,
    ) -> Engine {
        let start_delay = profile
            .start_delay
            .clone()
            .unwrap_or_else(|| cfg.start_delay.clone());
        let readiness_delay = profile
            .readiness_delay
            .clone()
            .unwrap_or_else(|| cfg.readiness_delay.clone());
        cfg.grace_scale = profile.grace_scale.unwrap_or(cfg.grace_scale);
        let (tool_done, tool_done_rx) = tokio::sync::mpsc::unbounded_channel();
        Engine {
            tool_done,
            tool_done_rx: Some(tool_done_rx),
            tokens: crate::tokens::start(identities.clone(), stats.clone()),
            identities,
            cfg,
            profile,
            start_delay,
            readiness_delay,
            writer,
            stats,
            nodes: HashMap::new(),
            used_indices: HashSet::new(),
            pods: HashMap::new(),
            parked: HashMap::new(),
            parked_node: HashMap::new(),
            volumes: VolumeGate::default(),
            objects: Objects::default(),
            timers: BinaryHeap::new(),
            pod_timer: HashMap::new(),
        }
    }

    /// Runs until `shutdown` completes.
    pub(crate) async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let reader = self.identities.reader().clone();
        let nodes: Api<Node> = Api::all(reader.clone());
        let pods: Api<Pod> = Api::all(reader.clone());
        let node_events = watcher(
            nodes,
            watcher::Config::default().labels(&format!("{SIMULATED_LABEL}=true")),
        )
        .default_backoff();
        let pod_events =
            watcher(pods, watcher::Config::default().fields("spec.nodeName!=")).default_backoff();
        let claim_events = watcher(
            Api::<PersistentVolumeClaim>::all(reader.clone()),
            watcher::Config::default(),
        )
        .default_backoff();
        // Only their names matter (does the object a volume needs exist?): metadata suffices.
        let secret_events = watcher(
            Api::<PartialObjectMeta<Secret>>::all(reader.clone()),
            watcher::Config::default(),
        )
        .default_backoff();
        let config_map_events = watcher(
            Api::<PartialObjectMeta<ConfigMap>>::all(reader),
            watcher::Config::default(),
        )
        .default_backoff();
        self.run_streams(
            node_events,
            pod_events,
            claim_events,
            (secret_events, config_map_events),
            shutdown,
        )
        .await;
    }

    async fn run_streams(
        &mut self,
        node_events: impl Stream<Item = Result<watcher::Event<Node>, watcher::Error>>,
        pod_events: impl Stream<Item = Result<watcher::Event<Pod>, watcher::Error>>,
        claim_events: impl Stream<Item = Result<watcher::Event<PersistentVolumeClaim>, watcher::Error>>,
        (secret_events, config_map_events): (
            impl Stream<Item = Result<watcher::Event<PartialObjectMeta<Secret>>, watcher::Error>>,
            impl Stream<Item = Result<watcher::Event<PartialObjectMeta<ConfigMap>>, watcher::Error>>,
        ),
        shutdown: impl Future<Output = ()>,
    ) {
        let mut node_events = pin!(node_events);
        let mut pod_events = pin!(pod_events);
        let mut claim_events = pin!(claim_events);
        let mut secret_events = pin!(secret_events);
        let mut config_map_events = pin!(config_map_events);
        let mut shutdown = pin!(shutdown);
        let mut nodes_relisting: Option<HashSet<String>> = None;
        let mut pods_relisting: Option<HashSet<String>> = None;
        let (_keep, fresh) = tokio::sync::mpsc::unbounded_channel();
        let mut tool_done = self.tool_done_rx.take().unwrap_or(fresh);
        loop {
            let next = self.timers.peek().map(|Reverse((t, _))| *t);
            let sleep = tokio::time::sleep_until(
                next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600)),
            );
            tokio::select! {
                _ = &mut shutdown => return,
                ev = node_events.next() => match ev {
                    Some(Ok(ev)) => self.on_node_event(ev, &mut nodes_relisting),
                    Some(Err(e)) => tracing::warn!(error = %e, "node watch"),
                    None => return,
                },
                ev = pod_events.next() => match ev {
                    Some(Ok(ev)) => self.on_pod_event(ev, &mut pods_relisting),
                    Some(Err(e)) => tracing::warn!(error = %e, "pod watch"),
                    None => return,
                },
                ev = claim_events.next() => match ev {
                    Some(Ok(ev)) => self.on_claim_event(ev),
                    Some(Err(e)) => tracing::warn!(error = %e, "claim watch"),
                    None => return,
                },
                ev = secret_events.next() => match ev {
                    Some(Ok(ev)) => self.on_object_event(Kind::Secret, ev),
                    Some(Err(e)) => tracing::warn!(error = %e, "secret watch"),
                    None => return,
                },
                ev = config_map_events.next() => match ev {
                    Some(Ok(ev)) => self.on_object_event(Kind::ConfigMap, ev),
                    Some(Err(e)) => tracing::warn!(error = %e, "configmap watch"),
                    None => return,
                },
                Some(done) = tool_done.recv() => self.with_pod(&done.uid, |pod, ctx| {
                    pod.tool_exited(done.init, done.index, &done.container_id, done.code, ctx)
                }),
                _ = sleep, if next.is_some() => self.fire_timers(),
            }
        }
    }

    fn on_node_event(&mut self, ev: watcher::Event<Node>, relisting: &mut Option<HashSet<String>>) {
        match ev {
            watcher::Event::Apply(n) => self.on_node(&n),
            watcher::Event::Delete(n) => self.forget_node(&n.name_any()),
            watcher::Event::Init => *relisting = Some(HashSet::new()),
            watcher::Event::InitApply(n) => {
                if let Some(seen) = relisting.as_mut() {
                    seen.insert(n.name_any());
                }
                self.on_node(&n);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = relisting.take() {
                    let gone: Vec<String> = self
                        .nodes
                        .keys()
                        .filter(|n| !seen.contains(*n))
                        .cloned()
                        .collect();
                    for n in gone {
                        self.forget_node(&n);
                    }
                }
            }
        }
    }

    fn on_pod_event(&mut self, ev: watcher::Event<Pod>, relisting: &mut Option<HashSet<String>>) {
        match ev {
            watcher::Event::Apply(p) => self.on_pod(&p),
            watcher::Event::Delete(p) => {
                if let Some(uid) = p.metadata.uid.as_deref() {
                    self.forget_pod(uid);
                }
            }
            watcher::Event::Init => *relisting = Some(HashSet::new()),
            watcher::Event::InitApply(p) => {
                if let (Some(seen), Some(uid)) = (relisting.as_mut(), p.metadata.uid.as_ref()) {
                    seen.insert(uid.clone());
                }
                self.on_pod(&p);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = relisting.take() {
                    let gone: Vec<String> = self
                        .pods
                        .keys()
                        .chain(self.parked_node.keys())
                        .chain(self.volumes.held())
                        .filter(|u| !seen.contains(*u))
                        .cloned()
                        .collect();
                    for uid in gone {
                        self.forget_pod(&uid);
                    }
                }
            }
        }
    }

    // ---- nodes ----

    fn index_for(&mut self, n: &Node) -> u32 {
        let from_cidr = n
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidr.as_deref())
            .and_then(node::index_from_cidr);
        let from_name = n
            .name_any()
            .strip_prefix(&self.cfg.name_prefix)
            .and_then(|s| s.parse::<u32>().ok());
        let index = [from_cidr, from_name]
            .into_iter()
            .flatten()
            .find(|i| !self.used_indices.contains(i))
            .unwrap_or_else(|| {
                (0..)
                    .find(|i| !self.used_indices.contains(i))
                    .unwrap_or(u32::MAX)
            });
        self.used_indices.insert(index);
        index
    }

    fn on_node(&mut self, n: &Node) {
        let name = n.name_any();
        if n.labels().get(SIMULATED_LABEL).map(String::as_str) != Some("true")
            || !self.cfg.shard.owns(&name)
        {
            self.forget_node(&name);
            return;
        }
        let now = Instant::now();
        let annotations = n.annotations();
        let stopped = annotations
            .get(HEARTBEAT_ANNOTATION)
            .is_some_and(|v| v == "stopped");
        let pressure = Pressure::parse(
            annotations
                .get(PRESSURE_ANNOTATION)
                .map_or("", String::as_str),
        );
        let status = n.status.as_ref();
        let observed: Vec<Observed> = status
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| Observed {
                        kind: c.type_.clone(),
                        status: c.status.clone(),
                        last_transition: c.last_transition_time.as_ref().map(|t| node::time(t.0)),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let has_info = status
            .and_then(|s| s.node_info.as_ref())
            .is_some_and(|i| !i.kubelet_version.is_empty());
        let is_new = !self.nodes.contains_key(&name);
        if is_new {
            let capacity = status
                .and_then(|s| s.capacity.as_ref())
                .filter(|c| !c.is_empty())
                .and_then(|c| serde_json::to_value(c).ok());
            let index = self.index_for(n);
            let recorder =
                Recorder::new(self.identities.node(&name), "kubelet", Some(name.clone()));
            let sim = SimNode {
                uid: n.metadata.uid.clone().unwrap_or_default(),
                index,
                stopped: true,
                pressure,
                observed: Vec::new(),
                has_info: false,
                images: HashSet::new(),
                files: HashSet::new(),
                ips: [0; 4],
                recorder,
                lease_due: None,
                status_due: now + self.cfg.status_report_interval,
                pods: HashSet::new(),
                capacity,
            };
            self.nodes.insert(name.clone(), sim);
            Stats::add(&self.stats.nodes, 1);
            self.node_event(
                &name,
                EventType::Normal,
                "Starting",
                "Starting kubelet.".into(),
            );
            self.timers.push(Reverse((
                now + self.cfg.status_report_interval,
                Timer::NodeStatus(name.clone()),
            )));
        }
        let Some(sim) = self.nodes.get_mut(&name) else {
            return;
        };
        let was_stopped = sim.stopped;
        let old_observed = std::mem::replace(&mut sim.observed, observed);
        let old_pressure = std::mem::replace(&mut sim.pressure, pressure);
        sim.stopped = stopped;
        sim.has_info = has_info;
        sim.uid = n.metadata.uid.clone().unwrap_or_default();
        if !stopped && was_stopped {
            // Resume (or begin): renew now, then every interval, spread by name over the
            // interval so 5,000 nodes do not renew in the same instant.
            let interval = self.cfg.heartbeat_interval.max(Duration::from_millis(1));
            let offset = if is_new {
                Duration::from_nanos(
                    stable_hash(&[name.as_bytes()]) % interval.as_nanos().max(1) as u64,
                )
            } else {
                Duration::ZERO
            };
            self.lease_write(&name, None);
            let due = now + offset.max(Duration::from_millis(1)).min(interval);
            if let Some(sim) = self.nodes.get_mut(&name) {
                sim.lease_due = Some(due);
            }
            self.timers.push(Reverse((due, Timer::Lease(name.clone()))));
            // As the kubelet's status manager after it reconnects: every pod's full status, so
            // whatever changed meanwhile, here or on the server (the node lifecycle controller
            // marks the pods of a silent node NotReady), is what the kubelet knows again.
            let pods: Vec<String> = self
                .nodes
                .get(&name)
                .map(|n| n.pods.iter().cloned().collect())
                .unwrap_or_default();
            for uid in pods {
                self.write_pod(&uid);
            }
        }
        if stopped && let Some(sim) = self.nodes.get_mut(&name) {
            sim.lease_due = None;
        }
        let Some(sim) = self.nodes.get(&name) else {
            return;
        };
        if !stopped && node::needs_post(&sim.observed, sim.has_info, sim.pressure) {
            self.post_status(&name, &old_observed, old_pressure, false);
        }
        if is_new && let Some(parked) = self.parked.remove(&name) {
            for (uid, view) in parked {
                self.parked_node.remove(&uid);
                self.start_pod(&view);
            }
        }
    }

    /// Posts the node's status; `periodic` when only the report interval calls for it.
    fn post_status(
        &mut self,
        name: &str,
        before: &[Observed],
        old_pressure: Pressure,
        periodic: bool,
    ) {
        let Some(sim) = self.nodes.get_mut(name) else {
            return;
        };
        let wall = node::time(clock::now());
        // Once the node has its addresses, capacity and info, only the conditions change (or
        // their heartbeat does): the whole status was four times the bytes, and 65,000 nodes
        // report within the same minute.
        let status = if sim.has_info {
            serde_json::json!({"conditions": node::condition_list(sim.pressure, &sim.observed, &wall)})
        } else {
            node::status(
                &self.cfg,
                name,
                sim.index,
                sim.pressure,
                &sim.observed,
                &wall,
                sim.capacity.as_ref(),
            )
        };
        sim.status_due = Instant::now() + self.cfg.status_report_interval;
        let pressure = sim.pressure;
        let refresh = periodic && sim.has_info;
        self.writer.push(
            Key::Node(name.to_string()),
            Write::NodeStatus {
                node: name.to_string(),
                status,
                refresh,
            },
        );
        // Upstream records a node event for each condition that changes.
        let was = |kind: &str| {
            before
                .iter()
                .find(|o| o.kind == kind)
                .map(|o| o.status.as_str())
        };
        if was("Ready").is_some_and(|s| s != "True") {
            self.node_event(
                name,
                EventType::Normal,
                "NodeReady",
                format!("Node {name} status is now: NodeReady"),
            );
        }
        let flips = [
            (
                old_pressure.memory,
                pressure.memory,
                "NodeHasInsufficientMemory",
                "NodeHasSufficientMemory",
            ),
            (
                old_pressure.disk,
                pressure.disk,
                "NodeHasDiskPressure",
                "NodeHasNoDiskPressure",
            ),
            (
                old_pressure.pid,
                pressure.pid,
                "NodeHasInsufficientPID",
                "NodeHasSufficientPID",
            ),
        ];
        for (old, new, on, off) in flips {
            if old != new && !before.is_empty() {
                let reason = if new { on } else { off };
                self.node_event(
                    name,
                    EventType::Normal,
                    reason,
                    format!("Node {name} status is now: {reason}"),
                );
            }
        }
    }

    /// Queues a lease write; `due` is when it was due, for a renewal.
    fn lease_write(&mut self, name: &str, due: Option<Instant>) {
        let Some(sim) = self.nodes.get(name) else {
            return;
        };
        Stats::add(&self.stats.lease_renewals, 1);
        let write = Write::Lease {
            node: name.to_string(),
            node_uid: sim.uid.clone(),
            duration: self.cfg.lease_duration_seconds,
            due,
        };
        self.writer.push(Key::Lease(name.to_string()), write);
    }

    fn node_event(&self, name: &str, kind: EventType, reason: &str, message: String) {
        let Some(sim) = self.nodes.get(name) else {
            return;
        };
        if !self.cfg.events {
            return;
        }
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.to_string()),
            uid: Some(sim.uid.clone()),
            ..Default::default()
        };
        self.writer.event(
            name,
            Write::Event {
                recorder: sim.recorder.clone(),
                reference: Box::new(reference),
                kind,
                reason: reason.into(),
                message,
                at: clock::now(),
            },
        );
    }

    fn forget_node(&mut self, name: &str) {
        let Some(sim) = self.nodes.remove(name) else {
            return;
        };
        self.identities.forget(name);
        Stats::sub(&self.stats.nodes, 1);
        self.used_indices.remove(&sim.index);
        for uid in sim.pods {
            if let Some(pod) = self.pods.remove(&uid) {
                self.count_pod(&pod, -1);
                self.pod_timer.remove(&uid);
            }
        }
    }

    // ---- pods ----

    fn on_pod(&mut self, p: &Pod) {
        let Some(view) = PodView::from_pod(p) else {
            return;
        };
        // Another simulator's pod (sharded nodes): never parked here.
        if !self.cfg.shard.owns(&view.node) {
            return;
        }
        if self.pods.contains_key(&view.uid) {
            let uid = view.uid.clone();
            match view.deletion_grace {
                Some(grace) => self.with_pod(&uid, |pod, ctx| pod.observe_deletion(grace, ctx)),
                None => self.with_pod(&uid, |pod, ctx| pod.observe_spec(&view, ctx)),
            }
            let seen = view.status.as_ref().and_then(resync::ready_of);
            if let Some(pod) = self.pods.get_mut(&uid) {
                pod.reported.saw(seen);
            }
            self.resync_pod(&uid);
        } else if let Some(view) = self.volumes.admit(view) {
            self.place(view);
        }
    }

    /// Starts a pod whose volumes are ready, or parks it until its node is simulated.
    fn place(&mut self, view: PodView) {
        if self.nodes.contains_key(&view.node) {
            self.start_pod(&view);
        } else {
            self.parked_node.insert(view.uid.clone(), view.node.clone());
            self.parked
                .entry(view.node.clone())
                .or_default()
                .insert(view.uid.clone(), view);
        }
    }

    fn on_claim_event(&mut self, ev: watcher::Event<PersistentVolumeClaim>) {
        let (claim, bound) = match ev {
            watcher::Event::Apply(c) | watcher::Event::InitApply(c) => {
                let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
                (c, bound)
            }
            watcher::Event::Delete(c) => (c, false),
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        let ns = claim.namespace().unwrap_or_default();
        for view in self.volumes.claim_changed(&ns, &claim.name_any(), bound) {
            self.place(view);
        }
    }

    /// A Secret or ConfigMap changed: pods whose volumes wait for it find it at their next
    /// attempt, as the kubelet's retries do.
    fn on_object_event<K>(&mut self, kind: Kind, ev: watcher::Event<PartialObjectMeta<K>>) {
        let key = |o: &PartialObjectMeta<K>| {
            (
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            )
        };
        match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                let (ns, name) = key(&o);
                self.objects.added(kind, &ns, &name);
            }
            watcher::Event::Delete(o) => {
                let (ns, name) = key(&o);
                self.objects.removed(kind, &ns, &name);
            }
            watcher::Event::Init => self.objects.relist(kind),
            watcher::Event::InitDone => self.objects.listed(kind),
        }
    }

    fn start_pod(&mut self, view: &PodView) {
        let Some(node) = self.nodes.get_mut(&view.node) else {
            return;
        };
        let host_ip = node::node_ip(node.index);
        // A `hostNetwork` pod is its node's network: its IP is the node's (upstream's
        // `kubelet_pods.go` reports the host IPs as the pod's).
        let ip = if view.host_network {
            Some(host_ip)
        } else {
            let (a, b) = node::pod_cidr(node.index);
            node.allocate_ip().map(|h| Ipv4Addr::new(10, a, b, h))
        };
        node.pods.insert(view.uid.clone());
        let rng = pod_rng(self.profile.seed, &view.namespace, &view.name, &view.uid);
        let mut ctx = Ctx {
            cfg: &self.cfg,
            profile: &self.profile,
            start_delay: &self.start_delay,
            readiness_delay: &self.readiness_delay,
            node_images: &mut node.images,
            node_files: &mut node.files,
            objects: &self.objects,
            now: Instant::now(),
            wall: wall_now(),
        };
        let mut pod = Box::new(PodSim::new(view, ip, host_ip, rng, &mut ctx));
        let mut out = pod.advance(&mut ctx);
        // A pod this process did not see before gets its first status whatever happened.
        out.status_changed = true;
        self.count_pod(&pod, 1);
        let uid = view.uid.clone();
        self.pods.insert(uid.clone(), pod);
        if !view.tokens.is_empty() {
            // The kubelet gets a pod's tokens as it mounts its volumes.
            let _ = self.tokens.send(crate::tokens::Msg::Start {
                node: view.node.clone(),
                namespace: view.namespace.clone(),
                name: view.name.clone(),
                uid: uid.clone(),
                account: view.service_account.clone(),
                sources: view.tokens.clone(),
            });
        }
        self.apply(&uid, out);
        if let Some(grace) = view.deletion_grace {
            self.with_pod(&uid, |pod, ctx| pod.observe_deletion(grace, ctx));
        }
    }

    /// Runs `f` on a pod with a context, then queues what it asks for.
    fn with_pod(&mut self, uid: &str, f: impl FnOnce(&mut PodSim, &mut Ctx<'_>) -> Outcome) {
        let Some(pod) = self.pods.get_mut(uid) else {
            return;
        };
        let Some(node) = self.nodes.get_mut(&pod.node) else {
            return;
        };
        let was_ready = pod.is_ready();
        let mut ctx = Ctx {
            cfg: &self.cfg,
            profile: &self.profile,
            start_delay: &self.start_delay,
            readiness_delay: &self.readiness_delay,
            node_images: &mut node.images,
            node_files: &mut node.files,
            objects: &self.objects,
            now: Instant::now(),
            wall: wall_now(),
        };
        let out = f(pod, &mut ctx);
        if pod.is_ready() != was_ready {
            if pod.is_ready() {
                Stats::add(&self.stats.pods_ready, 1)
            } else {
                Stats::sub(&self.stats.pods_ready, 1)
            }
        }
        self.apply(uid, out);
    }

    fn count_pod(&self, pod: &PodSim, sign: i64) {
        let add = |c, n| {
            if sign > 0 {
                Stats::add(c, n)
            } else {
                Stats::sub(c, n)
            }
        };
        add(&self.stats.pods, 1);
        if pod.is_ready() {
            add(&self.stats.pods_ready, 1);
        }
    }

    fn apply(&mut self, uid: &str, mut out: Outcome) {
        let Some(pod) = self.pods.get(uid) else {
            return;
        };
        for start in std::mem::take(&mut out.tools) {
            let (identities, stats, done) = (
                self.identities.clone(),
                self.stats.clone(),
                self.tool_done.clone(),
            );
            let (node, uid) = (pod.node.clone(), uid.to_string());
            tokio::spawn(async move {
                let code = match run_tool(&identities, &node, &stats, &uid, &start.tool).await {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::info!(pod = %uid, error = %e, "certificate generator failed");
                        1
                    }
                };
                let _ = done.send(ToolDone {
                    uid,
                    init: start.init,
                    index: start.index,
                    container_id: start.container_id,
                    code,
                });
            });
        }
        // A stopped kubelet reports nothing: its containers go on, and it posts every pod's
        // status when it starts again.
        if self.nodes.get(&pod.node).is_some_and(|n| n.stopped) {
            self.schedule_pod(uid);
            return;
        }
        if self.cfg.events
            && !out.events.is_empty()
            && let Some(node) = self.nodes.get(&pod.node)
        {
            {
                for ev in out.events {
                    let reference = ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Pod".into()),
                        name: Some(pod.name.clone()),
                        namespace: Some(pod.namespace.clone()),
                        uid: Some(pod.uid.clone()),
                        field_path: ev.field_path,
                        ..Default::default()
                    };
                    self.writer.event(
                        &pod.node,
                        Write::Event {
                            recorder: node.recorder.clone(),
                            reference: Box::new(reference),
                            kind: ev.kind,
                            reason: ev.reason.into_owned(),
                            message: ev.message,
                            at: clock::now(),
                        },
                    );
                }
            }
        }
        if out.finish || out.status_changed {
            self.write_pod(uid);
        }
        self.schedule_pod(uid);
    }

    /// Queues the pod's status, or its final status and deletion once its containers are gone.
    fn write_pod(&mut self, uid: &str) {
        let Some(pod) = self.pods.get_mut(uid) else {
            return;
        };
        let wall = wall_now();
        let status = pod.status(&wall);
        pod.reported.wrote(resync::ready_of(&status));
        let status = match serde_json::value::to_raw_value(&status) {
            Ok(s) => s,
            Err(e) => {
                // A `Value` always serializes; this keeps the writer total all the same.
                tracing::warn!(error = %e, "pod status not serializable; not written");
                return;
            }
        };
        let write = if pod.finished {
            Write::PodFinish {
                node: pod.node.clone(),
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                status,
            }
        } else {
            Write::PodStatus {
                node: pod.node.clone(),
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                status,
            }
        };
        self.writer.push(Key::Pod(uid.to_string()), write);
    }

    /// Writes the pod's status back if someone else changed its `Ready` condition while its
    /// node runs (upstream's status manager does on its periodic sync; we do on the event), at
    /// most once per `status_resync_interval`: later divergences wait for a timer.
    fn resync_pod(&mut self, uid: &str) {
        let now = Instant::now();
        let interval = self.cfg.status_resync_interval;
        let Some(pod) = self.pods.get_mut(uid) else {
            return;
        };
        // A stopped kubelet writes nothing (it posts everything when it starts); a finished pod
        // is being deleted.
        if pod.finished || self.nodes.get(&pod.node).is_none_or(|n| n.stopped) {
            return;
        }
        match pod.reported.decide(pod.is_ready(), now, interval) {
            Resync::InSync => {}
            Resync::Now => {
                tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), "pod status changed by someone else; writing it back");
                pod.reported.resynced(now);
                Stats::add(&self.stats.status_resyncs, 1);
                self.write_pod(uid);
            }
            Resync::At(at) => {
                if pod.reported.due.is_none_or(|d| d > at) {
                    pod.reported.due = Some(at);
                    self.timers
                        .push(Reverse((at, Timer::Resync(uid.to_string()))));
                }
            }
        }
    }

    fn schedule_pod(&mut self, uid: &str) {
        let Some(pod) = self.pods.get(uid) else {
            return;
        };
        match pod.wake() {
            Some(t) if self.pod_timer.get(uid) != Some(&t) => {
                self.pod_timer.insert(uid.to_string(), t);
                self.timers.push(Reverse((t, Timer::Pod(uid.to_string()))));
            }
            Some(_) => {}
            None => {
                self.pod_timer.remove(uid);
            }
        }
    }

    fn forget_pod(&mut self, uid: &str) {
        self.volumes.forget(uid);
        if let Some(node) = self.parked_node.remove(uid)
            && let Some(m) = self.parked.get_mut(&node)
        {
            m.remove(uid);
            if m.is_empty() {
                self.parked.remove(&node);
            }
        }
        let Some(pod) = self.pods.remove(uid) else {
            return;
        };
        let _ = self.tokens.send(crate::tokens::Msg::Stop {
            uid: uid.to_string(),
        });
        self.pod_timer.remove(uid);
        self.count_pod(&pod, -1);
        if let Some(node) = self.nodes.get_mut(&pod.node) {
            node.pods.remove(uid);
            if let Some(ip) = pod.ip.filter(|_| !pod.host_network) {
                node.release_ip(ip.octets()[3]);
            }
        }
    }

    // ---- timers ----

    fn fire_timers(&mut self) {
        let now = Instant::now();
        // A bounded batch, so watch events are not starved by a burst of deadlines.
        for _ in 0..4096 {
            let Some(Reverse((t, _))) = self.timers.peek() else {
                return;
            };
            if *t > now {
                return;
            }
            let Some(Reverse((t, timer))) = self.timers.pop() else {
                return;
            };
            match timer {
                Timer::Pod(uid) => {
                    if self.pod_timer.get(&uid) == Some(&t) {
                        self.pod_timer.remove(&uid);
                        self.with_pod(&uid, |pod, ctx| pod.advance(ctx));
                    }
                }
                Timer::Resync(uid) => {
                    if let Some(pod) = self.pods.get_mut(&uid)
                        && pod.reported.due == Some(t)
                    {
                        pod.reported.due = None;
                        self.resync_pod(&uid);
                    }
                }
                Timer::Lease(name) => {
                    let Some(sim) = self.nodes.get_mut(&name) else {
                        continue;
                    };
                    if sim.stopped || sim.lease_due != Some(t) {
                        continue;
                    }
                    let next = t + self.cfg.heartbeat_interval.max(Duration::from_millis(1));
                    sim.lease_due = Some(next);
                    self.timers
                        .push(Reverse((next, Timer::Lease(name.clone()))));
                    self.lease_write(&name, Some(t));
                }
                Timer::NodeStatus(name) => {
                    let Some(sim) = self.nodes.get(&name) else {
                        continue;
                    };
                    let due = sim.status_due;
                    if due > t {
                        self.timers.push(Reverse((due, Timer::NodeStatus(name))));
                        continue;
                    }
                    if !sim.stopped {
                        let (obs, p) = (sim.observed.clone(), sim.pressure);
                        self.post_status(&name, &obs, p, true);
                    }
                    let next = now + self.cfg.status_report_interval;
                    if let Some(sim) = self.nodes.get_mut(&name) {
                        sim.status_due = next;
                    }
                    self.timers.push(Reverse((next, Timer::NodeStatus(name))));
                }
            }
        }
    }
}
