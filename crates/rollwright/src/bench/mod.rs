//! Benchmarks: named scenarios run on purpose (never in CI) that print the figures recorded in
//! `BENCHMARKS.md`.

mod aftermath;
mod api;
mod budget;
mod daemonset;
mod deploy;
mod fleet;
mod footprint;
mod ideal;
mod meter;
mod nodes;
mod phases;
mod scheduler;
mod statefulset;

pub use fleet::{LeaseReport, lease_report_line};

/// A benchmark scenario.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Scenario {
    /// Create pods through the API with concurrent clients, list them, fan a watch out; on this
    /// process's control plane, or on any server by `--kubeconfig` (its processes by `--pid
    /// NAME=PID`; `tools/conformance api-perf` puts upstream's kube-apiserver beside rollwright's).
    Api(api::ApiBench),
    /// Simulate 5,000 nodes and drive 100,000 pods to Ready; CPU seconds and peak memory. With
    /// `--daemonset`: roll a DaemonSet over every node (issue 24: up to 65,000), with lease
    /// latency, NotReady nodes and memory per node.
    Nodes(nodes::NodesBench),
    /// Bind 10,000 pending pods over 5,000 nodes; pods per second.
    Scheduler(scheduler::SchedulerBench),
    /// Create a 10,000-replica Deployment on 500 simulated nodes, then roll it 25%/25%; times,
    /// controller CPU and API requests per replaced pod.
    Deploy(deploy::DeployBench),
    /// Create a DaemonSet over 5,000 simulated nodes, then roll it with maxUnavailable 10% and
    /// with maxSurge 10%; wall time, controller and process CPU, API requests, peak RSS.
    Daemonset(daemonset::DaemonsetBench),
    /// Issue 15's four phases (DaemonSet on 500 nodes, its image update, a 2,000-replica
    /// Deployment, its rolling update; with `--statefulset-replicas` a StatefulSet's create and
    /// roll) as `up` runs them, or against another cluster (`--kubeconfig`, its processes by
    /// `--pid NAME=PID`); wall, CPU, peak RSS and API requests per phase, and with
    /// `--readiness-ms` each phase's physical limit and overhead per wave (`tools/conformance
    /// perf` puts upstream beside them).
    Phases(phases::PhasesBench),
    /// Create a 1,000-replica Parallel StatefulSet, then roll it with maxUnavailable 10%; each
    /// phase beside its physical limit (waves times grace, start and readiness delays).
    Statefulset(statefulset::StatefulsetBench),
}

/// Runs a scenario.
pub async fn run(s: Scenario) -> anyhow::Result<()> {
    match s {
        Scenario::Api(b) => api::run(b).await,
        // `--daemonset` is issue 24's scenario, which reads the same options.
        Scenario::Nodes(b) if b.daemonset => fleet::run(&b).await,
        Scenario::Nodes(b) => nodes::run(b).await,
        Scenario::Scheduler(b) => scheduler::run(b).await,
        Scenario::Deploy(b) => deploy::run(b).await,
        Scenario::Daemonset(b) => daemonset::run(b).await,
        Scenario::Phases(b) => phases::run(b).await,
        Scenario::Statefulset(b) => statefulset::run(b).await,
    }
}

/// Peak resident set size of this process, in bytes (Linux `VmHWM`).
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Current resident set size of this process, in bytes (Linux `VmRSS`).
pub fn rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The `q` quantile of sorted durations.
pub fn quantile(sorted: &[std::time::Duration], q: f64) -> std::time::Duration {
    if sorted.is_empty() {
        return std::time::Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Parses a benchmark's options from `args` (the first is the program's name), as the command
/// line would, for tests of which options go together.
#[cfg(test)]
pub(crate) fn parse_options<B: clap::Args>(args: &[&str]) -> Result<B, clap::Error> {
    use clap::Parser as _;
    #[derive(clap::Parser, Debug)]
    struct Cli<B: clap::Args> {
        #[command(flatten)]
        options: B,
    }
    Cli::<B>::try_parse_from(args).map(|cli| cli.options)
}
