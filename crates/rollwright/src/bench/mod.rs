//! Benchmarks: named scenarios run on purpose (never in CI) that print the figures recorded in
//! `BENCHMARKS.md`.

mod api;

/// A benchmark scenario.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Scenario {
    /// Create pods through the API with concurrent clients, list them, fan a watch out.
    Api(api::ApiBench),
}

/// Runs a scenario.
pub async fn run(s: Scenario) -> anyhow::Result<()> {
    match s {
        Scenario::Api(b) => api::run(b).await,
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
