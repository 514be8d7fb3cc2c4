//! The scale benchmark `rollwright bench` runs: N simulated nodes, M pods bound through the
//! binding subresource, timed until every pod is Ready, with the process's CPU time and peak
//! memory.

use crate::{Error, NodeSim, Profile, Stats, distribution::Distribution, run_with_stats};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{Api, Client, Resource, api::PostParams, core::Request};
use serde_json::json;
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

/// What a benchmark run measured. CPU and memory are the whole process's: when the API server
/// runs in the same process (as in `rollwright bench`), they include it.
#[derive(Clone, Debug)]
pub struct Report {
    /// Nodes simulated.
    pub nodes: usize,
    /// Pods driven to Ready.
    pub pods: usize,
    /// From the start to every node registered and heartbeating.
    pub register: Duration,
    /// From the first pod created to the last one Ready (and its status written).
    pub pods_ready: Duration,
    /// Process CPU seconds (user + system) over the whole run.
    pub cpu_seconds: f64,
    /// Peak resident memory of the process (VmHWM), in KiB.
    pub peak_rss_kib: u64,
    /// API writes the simulation made.
    pub writes: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} nodes registered in {:.1}s; {} pods Ready in {:.1}s; {:.1} CPU s; peak RSS {} MiB; {} writes; {} events dropped",
            self.nodes,
            self.register.as_secs_f64(),
            self.pods,
            self.pods_ready.as_secs_f64(),
            self.cpu_seconds,
            self.peak_rss_kib / 1024,
            self.writes,
            self.events_dropped
        )
    }
}

/// Runs the benchmark on `client`: registers `nodes` nodes with zero start and readiness delays,
/// creates `pods` pods in namespace `bench` and binds them round robin, waits until all are
/// Ready, and stops the simulation. `events` turns event recording on or off.
pub async fn run(client: Client, nodes: usize, pods: usize, events: bool) -> Result<Report, Error> {
    let t0 = Instant::now();
    let cpu0 = cpu_seconds();
    let cfg = NodeSim {
        nodes,
        start_delay: Distribution::default(),
        readiness_delay: Distribution::default(),
        events,
        ..NodeSim::default()
    };
    let stats = Arc::new(Stats::default());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let sim = tokio::spawn(run_with_stats(
        client.clone(),
        cfg.clone(),
        Profile::default(),
        async move {
            let _ = stop_rx.await;
        },
        stats.clone(),
    ));
    wait(|| Stats::get(&stats.nodes) as usize >= nodes).await;
    let register = t0.elapsed();

    let ns: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "bench"}}))?;
    match ns.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let t1 = Instant::now();
    let api: Api<Pod> = Api::namespaced(client.clone(), "bench");
    stream::iter(0..pods)
        .map(|i| {
            let (api, client, cfg) = (api.clone(), client.clone(), &cfg);
            async move {
                let name = format!("bench-{i}");
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"app": "bench"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
                }))?;
                api.create(&PostParams::default(), &pod).await?;
                bind(&client, "bench", &name, &cfg.node_name(i % nodes.max(1))).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(64)
        .try_collect::<()>()
        .await?;
    wait(|| {
        Stats::get(&stats.pods_ready) as usize >= pods && Stats::get(&stats.pending_writes) == 0
    })
    .await;
    let pods_ready = t1.elapsed();
    let _ = stop_tx.send(());
    let _ = sim.await;
    Ok(Report {
        nodes,
        pods,
        register,
        pods_ready,
        cpu_seconds: cpu_seconds() - cpu0,
        peak_rss_kib: peak_rss_kib(),
        writes: Stats::get(&stats.writes),
        events_dropped: Stats::get(&stats.events_dropped),
    })
}

/// Binds a pod to a node through the `binding` subresource, as the scheduler does.
pub async fn bind(client: &Client, namespace: &str, pod: &str, node: &str) -> Result<(), Error> {
    let req = Request::new(Pod::url_path(&(), Some(namespace)));
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let r = req
        .create_subresource(
            "binding",
            pod,
            &PostParams::default(),
            serde_json::to_vec(&binding)?,
        )
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(r).await?;
    Ok(())
}

async fn wait(mut done: impl FnMut() -> bool) {
    // A benchmark polls its own counters; it has no watch to wake it.
    while !done() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// User + system CPU seconds of this process so far (from /proc; 0 where unavailable).
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces) start at field 3.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15; /proc reports them in USER_HZ (100 on Linux).
    (ticks(11) + ticks(12)) / 100.0
}

/// Peak resident memory of this process in KiB (VmHWM; 0 where unavailable).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
