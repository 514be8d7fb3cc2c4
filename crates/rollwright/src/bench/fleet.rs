//! `rollwright bench nodes --daemonset`: issue 24's third goal. Up to 65,000 simulated nodes
//! renew their Leases every 10 s and report node status as the kubelet does, while a DaemonSet is
//! created on all of them and rolled with `maxUnavailable`. The process runs the API server, the
//! scheduler (daemon pods bind through their nodeAffinity, as upstream's) and every controller, the
//! node lifecycle controller among them: a renewal later than its grace period would really mark
//! a node `Unknown`, and the node watch here would count it.
//!
//! The simulator runs in this process, or (`--shards N`) in N `rollwright nodes --shard i/N`
//! child processes against this process's API server over HTTPS on loopback, which report their
//! lease latency when stopped.
//!
//! Two watches judge the run from outside, as any client would: one over the simulated nodes
//! (Ready, and any node whose Ready left True), and one over the daemon pods that checks the
//! DaemonSet's promises at every event ([`DaemonWatch`]). Both have listed before the DaemonSet
//! is created.

use super::{
    daemonset::{manifest, wait_rolled_out},
    ideal::{self, PodTimes},
    meter::{BenchEtcd, process_cpu_seconds, process_peak_rss},
    nodes::NodesBench,
    peak_rss, rss,
};
use crate::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use anyhow::Context as _;
use api::pod::{is_active, is_ready};
use futures::StreamExt;
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Node, core::v1::Pod};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};
use tokio::sync::watch;

/// The node lifecycle controller's grace period (its default, upstream's
/// `--node-monitor-grace-period`): a renewal later than this makes the node `Unknown`.
const GRACE_PERIOD: Duration = Duration::from_secs(40);

/// The namespace of the DaemonSet.
const NAMESPACE: &str = "default";

/// The lease-renewal figures a simulator reports (one JSON line from a shard).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LeaseReport {
    /// Which simulator (`0/2`; `0/1` for the only one).
    pub shard: String,
    /// Nodes it simulated at the end.
    pub nodes: u64,
    /// Renewals whose write returned.
    pub renewals: u64,
    /// Median latency from due to written, in microseconds.
    pub p50_us: u64,
    /// 99th percentile, in microseconds.
    pub p99_us: u64,
    /// Largest, in microseconds.
    pub max_us: u64,
    /// API writes of the simulation, and those that failed.
    pub writes: u64,
    /// API writes that failed.
    pub write_errors: u64,
}

impl LeaseReport {
    /// The figures in `stats` now.
    pub fn of(stats: &nodesim::Stats, shard: String) -> Self {
        let h = &stats.lease_latency;
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Self {
            shard,
            nodes: nodesim::Stats::get(&stats.nodes),
            renewals: h.count(),
            p50_us: us(h.quantile(0.5)),
            p99_us: us(h.quantile(0.99)),
            max_us: us(h.max()),
            writes: nodesim::Stats::get(&stats.writes),
            write_errors: nodesim::Stats::get(&stats.write_errors),
        }
    }
}

/// The line `rollwright nodes --report-leases` prints on shutdown.
#[derive(Serialize, Deserialize)]
struct ReportLine {
    lease_latency: LeaseReport,
}

/// `{"lease_latency": {...}}`, the line a shard prints for the benchmark that started it.
pub fn lease_report_line(stats: &nodesim::Stats, shard: String) -> String {
    serde_json::to_string(&ReportLine {
        lease_latency: LeaseReport::of(stats, shard),
    })
    .unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until `done` holds, re-checking whenever `changed` moves; fails after `timeout` or
/// when the watch behind `changed` has ended.
async fn wait_for(
    changed: &mut watch::Receiver<u64>,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let waited = tokio::time::timeout(timeout, async {
        loop {
            if done() {
                return true;
            }
            if changed.changed().await.is_err() {
                return done();
            }
        }
    })
    .await;
    match waited {
        Ok(true) => Ok(()),
        Ok(false) => anyhow::bail!("the watch for {what} ended"),
        Err(_) => anyhow::bail!("timed out after {}s waiting for {what}", timeout.as_secs()),
    }
}

/// What the node watch has seen.
#[derive(Default)]
struct NodeState {
    ready: HashSet<String>,
    /// Nodes whose Ready condition left True after it had been True.
    went_not_ready: HashSet<String>,
    transitions: u64,
}

/// A watch over the simulated nodes: how many are Ready, and which left Ready.
struct NodeWatch {
    state: Arc<Mutex<NodeState>>,
    changed: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

impl NodeWatch {
    fn start(client: kube::Client) -> Self {
        let state = Arc::new(Mutex::new(NodeState::default()));
        let (tx, changed) = watch::channel(0u64);
        let s = state.clone();
        let task = tokio::spawn(async move {
            let cfg =
                watcher::Config::default().labels(&format!("{}=true", nodesim::SIMULATED_LABEL));
            let mut events = watcher(Api::<Node>::all(client), cfg)
                .default_backoff()
                .boxed();
            while let Some(ev) = events.next().await {
                let mut st = lock(&s);
                match ev {
                    Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                        let name = n.name_any();
                        if node_ready(&n) {
                            st.ready.insert(name);
                        } else if st.ready.remove(&name) {
                            st.went_not_ready.insert(name);
                            st.transitions += 1;
                        }
                    }
                    Ok(watcher::Event::Delete(n)) => {
                        st.ready.remove(&n.name_any());
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                    Err(e) => tracing::warn!(error = %e, "bench node watch"),
                }
                drop(st);
                tx.send_modify(|n| *n += 1);
            }
        });
        Self {
            state,
            changed,
            task,
        }
    }

    fn ready(&self) -> usize {
        lock(&self.state).ready.len()
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What one daemon pod contributes to the checks.
#[derive(Clone, PartialEq, Eq)]
struct PodFacts {
    node: String,
    active: bool,
    ready: bool,
}

#[derive(Default, Clone, Copy)]
struct NodeCount {
    active: i32,
    ready: i32,
}

/// The DaemonSet's promises, kept incrementally so that each pod event costs O(1) at 65,000
/// nodes (the chaos watcher's `daemon_set` rule re-reads every pod per event): the same rules,
/// on the same definitions (`api::pod::is_active`, `is_ready`; no `minReadySeconds`):
/// - no node ever runs two active daemon pods (no `maxSurge` here: a *duplicate daemon pod*);
/// - once every node had an available pod, at most `maxUnavailable` nodes lack one.
#[derive(Default)]
struct DaemonState {
    desired: i64,
    limit: i64,
    pods: HashMap<String, PodFacts>,
    per_node: HashMap<String, NodeCount>,
    /// Nodes with an active, Ready daemon pod.
    with: i64,
    /// Nodes with more than one active daemon pod.
    duplicated: i64,
    relisting: bool,
    listed: bool,
    armed: bool,
    /// The most nodes without an available pod once armed.
    max_without: i64,
    unavailable_open: bool,
    duplicate_open: bool,
    /// Each time a rule went from kept to broken.
    breaches: Vec<String>,
    events: u64,
}

impl DaemonState {
    fn new(desired: usize, limit: i32) -> Self {
        Self {
            desired: desired as i64,
            limit: i64::from(limit),
            ..Default::default()
        }
    }

    fn count(&mut self, f: &PodFacts, sign: i32) {
        if f.node.is_empty() || !f.active {
            return;
        }
        let c = self.per_node.entry(f.node.clone()).or_default();
        let (was_with, was_dup) = (c.ready > 0, c.active > 1);
        c.active += sign;
        if f.ready {
            c.ready += sign;
        }
        let (is_with, is_dup) = (c.ready > 0, c.active > 1);
        let empty = c.active == 0;
        self.with += i64::from(is_with) - i64::from(was_with);
        self.duplicated += i64::from(is_dup) - i64::from(was_dup);
        if empty {
            self.per_node.remove(&f.node);
        }
    }

    fn set(&mut self, uid: String, facts: Option<PodFacts>) {
        let old = match &facts {
            Some(f) => self.pods.insert(uid, f.clone()),
            None => self.pods.remove(&uid),
        };
        if old == facts {
            return;
        }
        if let Some(old) = old {
            self.count(&old, -1);
        }
        if let Some(new) = facts {
            self.count(&new, 1);
        }
    }

    fn on_event(&mut self, ev: watcher::Event<Pod>) {
        let facts = |p: &Pod| PodFacts {
            node: p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            active: is_active(p),
            ready: is_ready(p),
        };
        match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                let f = facts(&p);
                self.set(p.metadata.uid.unwrap_or_default(), Some(f));
            }
            watcher::Event::Delete(p) => self.set(p.metadata.uid.unwrap_or_default(), None),
            watcher::Event::Init => {
                // A relist: judge again once the whole list is in.
                self.relisting = true;
                self.pods.clear();
                self.per_node.clear();
                self.with = 0;
                self.duplicated = 0;
            }
            watcher::Event::InitDone => {
                self.relisting = false;
                self.listed = true;
            }
        }
        self.check();
    }

    fn check(&mut self) {
        self.events += 1;
        if self.relisting {
            return;
        }
        let without = self.desired - self.with;
        if without <= 0 {
            self.armed = true;
        }
        if self.armed {
            self.max_without = self.max_without.max(without);
        }
        let unavailable = self.armed && without > self.limit;
        if unavailable && !self.unavailable_open {
            self.breaches.push(format!(
                "max-unavailable: {without} nodes without an available pod > maxUnavailable {}",
                self.limit
            ));
        }
        self.unavailable_open = unavailable;
        let duplicate = self.duplicated > 0;
        if duplicate && !self.duplicate_open {
            self.breaches.push(format!(
                "duplicate-daemon-pod: {} nodes run two active daemon pods",
                self.duplicated
            ));
        }
        self.duplicate_open = duplicate;
    }
}

/// The watch over the daemon pods that keeps [`DaemonState`].
struct DaemonWatch {
    state: Arc<Mutex<DaemonState>>,
    changed: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl DaemonWatch {
    fn start(client: kube::Client, selector: &str, state: DaemonState) -> Self {
        let state = Arc::new(Mutex::new(state));
        let (tx, changed) = watch::channel(0u64);
        let s = state.clone();
        let cfg = watcher::Config::default().labels(selector);
        let task = tokio::spawn(async move {
            let mut events = watcher(Api::<Pod>::namespaced(client, NAMESPACE), cfg)
                .default_backoff()
                .boxed();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(ev) => lock(&s).on_event(ev),
                    Err(e) => tracing::warn!(error = %e, "bench daemon pod watch"),
                }
                tx.send_modify(|n| *n += 1);
            }
        });
        Self {
            state,
            changed,
            task,
        }
    }
}

impl Drop for DaemonWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One `rollwright nodes --shard` child.
struct Shard {
    index: usize,
    child: tokio::process::Child,
}

/// Starts `count` shard processes of this binary against the API server of `kubeconfig`.
fn start_shards(
    b: &NodesBench,
    kubeconfig: &std::path::Path,
    count: usize,
) -> anyhow::Result<Vec<Shard>> {
    let exe = std::env::current_exe().context("finding this binary to run the shards")?;
    (0..count)
        .map(|index| {
            let mut cmd = tokio::process::Command::new(&exe);
            cmd.arg("nodes")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(["--count", &b.nodes.to_string()])
                .args(["--shard", &format!("{index}/{count}")])
                .args(["--start-delay-ms", "0"])
                .args(["--readiness-delay-ms", &b.readiness_delay_ms.to_string()])
                .arg("--report-leases")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true);
            if b.no_events {
                cmd.arg("--no-events");
            }
            let child = cmd
                .spawn()
                .with_context(|| format!("starting shard {index}/{count}"))?;
            Ok(Shard { index, child })
        })
        .collect()
}

/// What a stopped shard cost and reported.
struct ShardEnd {
    pid: u32,
    cpu: f64,
    peak_rss: u64,
    leases: Option<LeaseReport>,
}

/// Stops a shard with SIGTERM (it stops its simulation and prints its lease report) after
/// reading its CPU and peak memory.
async fn stop_shard(shard: Shard) -> anyhow::Result<ShardEnd> {
    let pid = shard.child.id().context("a shard exited early")?;
    let (cpu, peak) = (process_cpu_seconds(pid), process_peak_rss(pid).unwrap_or(0));
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .context("signalling a shard")?;
    anyhow::ensure!(status.success(), "kill -TERM {pid} failed");
    let out = tokio::time::timeout(Duration::from_secs(120), shard.child.wait_with_output())
        .await
        .with_context(|| format!("shard {} did not stop in 120s", shard.index))??;
    let text = String::from_utf8_lossy(&out.stdout);
    let leases = text
        .lines()
        .filter_map(|l| serde_json::from_str::<ReportLine>(l).ok())
        .map(|r| r.lease_latency)
        .next_back();
    Ok(ShardEnd {
        pid,
        cpu,
        peak_rss: peak,
        leases,
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Runs the DaemonSet mode of `bench nodes` and prints its figures.
pub async fn run(b: &NodesBench) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = b
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let timeout = Duration::from_secs(b.timeout_secs);
    let readiness = Duration::from_millis(b.readiness_delay_ms);
    let etcd = match b.store {
        StoreKind::Etcd => Some(BenchEtcd::start().await?),
        _ => None,
    };
    let cpu0 = nodesim::bench::cpu_seconds();
    let cp = ControlPlane::start(Options {
        data_dir: dir.clone(),
        port: 0,
        store: b.store,
        etcd_servers: etcd.as_ref().map(BenchEtcd::urls).unwrap_or_default(),
        components: Components {
            scheduler: Some(Default::default()),
            controllers: Some(Default::default()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await?;
    let client = embedded::client_for(&cp.server);
    let idle_rss = rss().unwrap_or(0);
    let sim = nodesim::NodeSim {
        nodes: b.nodes,
        start_delay: nodesim::distribution::Distribution::Fixed(Duration::ZERO),
        readiness_delay: nodesim::distribution::Distribution::Fixed(readiness),
        events: !b.no_events,
        ..Default::default()
    };
    println!(
        "rollwright bench nodes --daemonset: {} simulated nodes (Lease renewed every {}s, leaseDurationSeconds {}, node status every {}s or on change; pods start at once and are Ready {}ms later), maxUnavailable {}, store {:?}, events {}, simulator {}",
        b.nodes,
        sim.heartbeat_interval.as_secs(),
        sim.lease_duration_seconds,
        sim.status_report_interval.as_secs(),
        b.readiness_delay_ms,
        b.max_unavailable,
        b.store,
        if b.no_events { "off" } else { "on" },
        if b.shards == 0 {
            "in this process".to_string()
        } else {
            format!("in {} `rollwright nodes --shard` processes", b.shards)
        }
    );

    let mut nodes = NodeWatch::start(client.clone());
    let t0 = Instant::now();
    let stats = Arc::new(nodesim::Stats::default());
    let (sim_stop, sim_stopped) = tokio::sync::oneshot::channel::<()>();
    let (in_process, shards) = if b.shards == 0 {
        let task = tokio::spawn(nodesim::run_with_stats(
            client.clone(),
            sim.clone(),
            nodesim::Profile::default(),
            async move {
                let _ = sim_stopped.await;
            },
            stats.clone(),
        ));
        (Some(task), Vec::new())
    } else {
        (None, start_shards(b, &cp.kubeconfig, b.shards)?)
    };
    let progress = spawn_progress(nodes.state.clone(), stats.clone(), b.nodes);

    let want = b.nodes;
    let state = nodes.state.clone();
    wait_for(&mut nodes.changed, "every node Ready", timeout, || {
        lock(&state).ready.len() >= want
    })
    .await?;
    let registered = t0.elapsed();
    println!(
        "nodes: {} registered and Ready in {:.1}s; RSS now {:.0} MiB (API server alone before: {:.0} MiB)",
        nodes.ready(),
        registered.as_secs_f64(),
        mib(rss().unwrap_or(0)),
        mib(idle_rss)
    );

    // The daemon pods' watch has listed before anything of the DaemonSet exists.
    let desired = i32::try_from(b.nodes).unwrap_or(i32::MAX);
    let limit = ideal::resolve(&b.max_unavailable, desired, true)
        .with_context(|| format!("--max-unavailable {}", b.max_unavailable))?;
    let mut daemons = DaemonWatch::start(
        client.clone(),
        &format!("app={}", super::daemonset::NAME),
        DaemonState::new(b.nodes, limit),
    );
    let ds_state = daemons.state.clone();
    wait_for(
        &mut daemons.changed,
        "the daemon pods' list",
        timeout,
        || lock(&ds_state).listed,
    )
    .await?;

    let times = PodTimes {
        readiness,
        grace: Duration::from_secs(super::daemonset::GRACE_SECONDS).mul_f64(sim.grace_scale),
        ..Default::default()
    };
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let t1 = Instant::now();
    api.create(&PostParams::default(), &manifest(&b.max_unavailable)?)
        .await
        .context("creating the DaemonSet")?;
    wait_rolled_out(&api, b.nodes, "every daemon pod available", timeout).await?;
    let create = t1.elapsed();
    println!(
        "create: {} daemon pods available in {:.2}s; ideal (1 wave of {:.2}s): {}",
        b.nodes,
        create.as_secs_f64(),
        times.until_available().as_secs_f64(),
        ideal::versus(times.until_available(), create)
    );
    // Armed only once every node had an available pod, as the rule says.
    let ds_state = daemons.state.clone();
    wait_for(
        &mut daemons.changed,
        "the pod watch to see every daemon pod available",
        timeout,
        || lock(&ds_state).armed,
    )
    .await?;

    let t2 = Instant::now();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "registry.example/agent:2"}]}}}});
    api.patch(
        super::daemonset::NAME,
        &PatchParams::default(),
        &Patch::Strategic(&patch),
    )
    .await
    .context("changing the image")?;
    wait_rolled_out(&api, b.nodes, "the rolling update done", timeout).await?;
    let update = t2.elapsed();
    let waves = ideal::batched_waves(desired, limit).unwrap_or(0);
    let ideal_update = times.replace_in_place() * waves;
    println!(
        "update (maxUnavailable {} = {limit} nodes): every pod replaced in {:.2}s; ideal ({waves} waves of {:.2}s): {}",
        b.max_unavailable,
        update.as_secs_f64(),
        times.replace_in_place().as_secs_f64(),
        ideal::versus(ideal_update, update)
    );
    super::footprint::print(&cp.server, &dir, b.nodes);
    let cpu_process = nodesim::bench::cpu_seconds() - cpu0;
    let peak_process = peak_rss().unwrap_or(0);
    progress.abort();

    // Stop the simulators; the shards report their leases as they stop.
    let mut reports = Vec::new();
    let mut shard_ends = Vec::new();
    if let Some(task) = in_process {
        reports.push(LeaseReport::of(&stats, "0/1".into()));
        let _ = sim_stop.send(());
        match task.await {
            Ok(r) => r?,
            Err(e) => anyhow::bail!("the node simulator panicked: {e}"),
        }
    }
    for shard in shards {
        let end = stop_shard(shard).await?;
        if let Some(r) = &end.leases {
            reports.push(r.clone());
        }
        shard_ends.push(end);
    }

    let breaches = {
        let d = lock(&daemons.state);
        println!(
            "invariants: {} daemon pod events checked from a watch listed before the create; at most {} nodes without an available pod during the update (maxUnavailable {limit}); {} breaches{}",
            d.events,
            d.max_without,
            d.breaches.len(),
            if d.breaches.is_empty() {
                String::new()
            } else {
                format!(": {}", d.breaches.join("; "))
            }
        );
        d.breaches.len()
    };
    for r in &reports {
        println!(
            "lease renewals (simulator {}, {} nodes): {} renewals, due to written p50 {:.1}ms, p99 {:.1}ms, max {:.1}ms; node-monitor grace period {}s: {}; {} writes, {} failed",
            r.shard,
            r.nodes,
            r.renewals,
            ms(r.p50_us),
            ms(r.p99_us),
            ms(r.max_us),
            GRACE_PERIOD.as_secs(),
            if Duration::from_micros(r.max_us) < GRACE_PERIOD {
                "every renewal within it"
            } else {
                "exceeded"
            },
            r.writes,
            r.write_errors
        );
    }
    let not_ready = {
        let n = lock(&nodes.state);
        println!(
            "nodes NotReady: {} ({} transitions out of Ready seen by the node watch)",
            n.went_not_ready.len(),
            n.transitions
        );
        n.went_not_ready.len()
    };
    let per_node = |bytes: u64| bytes as f64 / 1024.0 / b.nodes.max(1) as f64;
    let mut total_rss = peak_process;
    let mut total_cpu = cpu_process;
    println!(
        "this process (API server, store, scheduler, controllers{}): peak RSS {:.0} MiB ({:.1} KiB per node), {:.1} CPU s",
        if b.shards == 0 { ", simulator" } else { "" },
        mib(peak_process),
        per_node(peak_process),
        cpu_process
    );
    for (i, end) in shard_ends.iter().enumerate() {
        println!(
            "shard {i}/{} (pid {}): peak RSS {:.0} MiB, {:.1} CPU s",
            b.shards,
            end.pid,
            mib(end.peak_rss),
            end.cpu
        );
        total_rss += end.peak_rss;
        total_cpu += end.cpu;
    }
    if let Some(etcd) = &etcd {
        println!("{}", etcd.report());
        if let Some(pid) = etcd.pid() {
            total_rss += process_peak_rss(pid).unwrap_or(0);
            total_cpu += process_cpu_seconds(pid);
        }
    }
    println!(
        "total: peak RSS {:.0} MiB summed over processes ({:.1} KiB per node; budget 8,192 MiB: {}), {:.1} CPU s; nodes {:.1}s, create {:.1}s, update {:.1}s",
        mib(total_rss),
        per_node(total_rss),
        if total_rss <= 8 << 30 {
            "within"
        } else {
            "OVER"
        },
        total_cpu,
        registered.as_secs_f64(),
        create.as_secs_f64(),
        update.as_secs_f64()
    );
    cp.stop().await;
    anyhow::ensure!(
        breaches == 0,
        "the DaemonSet's invariants broke during the run"
    );
    anyhow::ensure!(not_ready == 0, "{not_ready} nodes went NotReady");
    Ok(())
}

/// Prints where the run is every 30 s on standard error, so a run that stalls says where.
fn spawn_progress(
    nodes: Arc<Mutex<NodeState>>,
    stats: Arc<nodesim::Stats>,
    total: usize,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        tick.tick().await;
        loop {
            tick.tick().await;
            let (ready, not_ready) = {
                let n = lock(&nodes);
                (n.ready.len(), n.went_not_ready.len())
            };
            eprintln!(
                "[{:>5.0}s] nodes Ready {ready}/{total} ({not_ready} went NotReady); pods simulated here {}, Ready {}; lease renewals here {} (p99 {:.1}ms, max {:.1}ms); writes pending {}; RSS {:.0} MiB",
                start.elapsed().as_secs_f64(),
                nodesim::Stats::get(&stats.pods),
                nodesim::Stats::get(&stats.pods_ready),
                stats.lease_latency.count(),
                stats.lease_latency.quantile(0.99).as_secs_f64() * 1000.0,
                stats.lease_latency.max().as_secs_f64() * 1000.0,
                nodesim::Stats::get(&stats.pending_writes),
                mib(rss().unwrap_or(0)),
            );
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, node: &str, ready: bool, deleting: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": uid, "uid": uid,
                         "deletionTimestamp": if deleting { json!("2026-01-01T00:00:00Z") } else { json!(null) }},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap_or_default()
    }

    #[test]
    fn daemon_rules_arm_once_every_node_has_a_pod_then_count_nodes_without_one() {
        let mut s = DaemonState::new(3, 1);
        s.on_event(watcher::Event::Init);
        s.on_event(watcher::Event::InitDone);
        for (uid, node) in [("a", "n0"), ("b", "n1")] {
            s.on_event(watcher::Event::Apply(pod(uid, node, true, false)));
        }
        assert!(!s.armed, "one node still lacks a pod");
        s.on_event(watcher::Event::Apply(pod("c", "n2", true, false)));
        assert!(s.armed);
        // One node down: allowed.
        s.on_event(watcher::Event::Apply(pod("a", "n0", true, true)));
        assert!(s.breaches.is_empty(), "{:?}", s.breaches);
        // Its replacement is not Ready yet while a second node goes down: two > 1.
        s.on_event(watcher::Event::Delete(pod("a", "n0", true, true)));
        s.on_event(watcher::Event::Apply(pod("a2", "n0", false, false)));
        s.on_event(watcher::Event::Apply(pod("b", "n1", false, false)));
        assert_eq!(s.breaches.len(), 1, "{:?}", s.breaches);
        assert_eq!(s.max_without, 2);
        // Still broken: not counted again; then kept again.
        s.on_event(watcher::Event::Apply(pod("a2", "n0", true, false)));
        s.on_event(watcher::Event::Apply(pod("b", "n1", true, false)));
        assert_eq!(s.breaches.len(), 1);
        assert!(!s.unavailable_open);
    }

    #[test]
    fn two_active_daemon_pods_on_a_node_are_a_duplicate_but_a_terminating_one_is_not() {
        let mut s = DaemonState::new(1, 1);
        s.on_event(watcher::Event::InitDone);
        s.on_event(watcher::Event::Apply(pod("a", "n0", true, false)));
        s.on_event(watcher::Event::Apply(pod("a", "n0", true, true)));
        s.on_event(watcher::Event::Apply(pod("b", "n0", false, false)));
        assert!(s.breaches.is_empty(), "{:?}", s.breaches);
        s.on_event(watcher::Event::Apply(pod("c", "n0", false, false)));
        assert_eq!(s.breaches.len(), 1);
        assert!(s.breaches[0].starts_with("duplicate-daemon-pod"));
    }

    #[test]
    fn a_relist_is_judged_only_once_complete() {
        let mut s = DaemonState::new(2, 0);
        s.on_event(watcher::Event::InitDone);
        s.on_event(watcher::Event::Apply(pod("a", "n0", true, false)));
        s.on_event(watcher::Event::Apply(pod("b", "n1", true, false)));
        assert!(s.armed);
        s.on_event(watcher::Event::Init);
        s.on_event(watcher::Event::InitApply(pod("a", "n0", true, false)));
        s.on_event(watcher::Event::InitApply(pod("b", "n1", true, false)));
        s.on_event(watcher::Event::InitDone);
        assert!(s.breaches.is_empty(), "{:?}", s.breaches);
        assert_eq!(s.with, 2);
    }

    #[test]
    fn lease_reports_round_trip_through_their_line() {
        let stats = nodesim::Stats::default();
        stats.lease_latency.record(Duration::from_millis(3));
        let line = lease_report_line(&stats, "1/2".into());
        let back: ReportLine = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.lease_latency.shard, "1/2");
        assert_eq!(back.lease_latency.renewals, 1);
        assert!(back.lease_latency.p99_us >= 3000);
    }
}
