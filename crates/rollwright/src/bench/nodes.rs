//! `rollwright bench nodes`: the node simulator at scale.
//!
//! Starts an API server in this process (no scheduler, no controllers), then runs
//! `nodesim::bench::run`: registers the nodes, creates the pods and binds them round robin through
//! the binding subresource, and waits until the simulation has driven every pod to Ready. CPU and
//! peak memory are the whole process's, so they include the API server and its store.
//!
//! `--daemonset` runs issue 24's scenario instead (see [`super::fleet`]).

use super::{budget, footprint, peak_rss};
use crate::control_plane::{ControlPlane, Options, StoreKind};

/// Options of the node simulator benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct NodesBench {
    /// Simulated nodes.
    #[arg(long, default_value_t = 5_000)]
    pub(super) nodes: usize,
    /// Pods to drive to Ready.
    #[arg(long, default_value_t = 100_000)]
    pods: usize,
    /// Do not record Events (measures the simulation without the event pipeline).
    #[arg(long)]
    pub(super) no_events: bool,
    /// Store backend of the in-process API server (`etcd`: a one-member etcd started for the
    /// run). SQLite, as `up` and every other benchmark run it: the in-memory store holds every
    /// object a second time beside the watch cache.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    pub(super) store: StoreKind,
    /// Data directory (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    pub(super) data_dir: Option<std::path::PathBuf>,
    /// Instead of pods: run the scheduler and the controllers too, create a DaemonSet on every
    /// node and roll it with `--max-unavailable`; print lease-renewal latency, nodes gone
    /// NotReady and memory per node (issue 24). `--pods` is not used.
    #[arg(long)]
    pub(super) daemonset: bool,
    /// With `--daemonset`: the update's `maxUnavailable`.
    #[arg(long, default_value = "10%")]
    pub(super) max_unavailable: String,
    /// With `--daemonset`: milliseconds from a pod's containers running to Ready (they start at
    /// once).
    #[arg(long, default_value_t = 1000)]
    pub(super) readiness_delay_ms: u64,
    /// With `--daemonset`: simulate the nodes in this many `rollwright nodes --shard i/N` child
    /// processes instead of in this one (0: in this one).
    #[arg(long, default_value_t = 0)]
    pub(super) shards: usize,
    /// With `--daemonset`: give up after this many seconds per phase.
    #[arg(long, default_value_t = 1800)]
    pub(super) timeout_secs: u64,
}

/// Runs the pods scenario and prints its figures (`--daemonset` is [`super::fleet::run`]).
pub async fn run(b: NodesBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        b.shards == 0,
        "--shards needs --daemonset (the pods mode simulates in this process)"
    );
    let tmp = tempfile::tempdir()?;
    let dir = b
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let cp = ControlPlane::start(Options {
        data_dir: dir.clone(),
        port: 0,
        store: b.store,
        ..Default::default()
    })
    .await?;
    println!(
        "rollwright bench nodes: {} nodes, {} pods, events {}, store {:?}",
        b.nodes,
        b.pods,
        if b.no_events { "off" } else { "on" },
        b.store
    );
    let idle_rss = peak_rss().unwrap_or(0);
    // In-process, as `rollwright up` runs the simulator: no TCP or TLS between it and the server.
    let client = embedded::client_for(&cp.server);
    let report = nodesim::bench::run(client, b.nodes, b.pods, !b.no_events).await?;
    println!("{report}");
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "process: {:.1} CPU s during the run ({:.1} CPU s per 10,000 pods); peak RSS {:.0} MiB (API server alone before the run: {:.0} MiB)",
        report.cpu_seconds,
        report.cpu_seconds * 10_000.0 / b.pods.max(1) as f64,
        mib(report.peak_rss_kib),
        idle_rss as f64 / 1048576.0
    );
    println!(
        "throughput: {:.0} pods Ready/s; {:.1} writes per pod",
        b.pods as f64 / report.pods_ready.as_secs_f64().max(1e-9),
        report.writes as f64 / b.pods.max(1) as f64
    );
    footprint::print(&cp.server, &dir, b.pods);
    println!(
        "memory: {}",
        budget::API_SERVER_AND_NODES.verdict(mib(report.peak_rss_kib), b.pods)
    );
    cp.stop().await;
    Ok(())
}
