//! Scheduler settings; every delay is configurable so tests run fast.

use std::time::Duration;

/// How the scheduler behaves. `Default` follows upstream's defaults.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// Pods naming this scheduler (or none, for `default-scheduler`) are ours.
    pub scheduler_name: String,
    /// Bind requests in flight at once; decisions stay sequential so accounting is exact.
    pub parallel_binds: usize,
    /// Upstream's `percentageOfNodesToScore`; `None` is the adaptive default.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Upstream's `podInitialBackoffSeconds` (1s).
    pub initial_backoff: Duration,
    /// Upstream's `podMaxBackoffSeconds` (10s).
    pub max_backoff: Duration,
    /// How often leftover unschedulable pods are checked (upstream: 30s).
    pub flush_interval: Duration,
    /// Upstream's `podMaxInUnschedulablePodsDuration` (5 min): retry even without a change.
    pub max_in_unschedulable: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            scheduler_name: crate::pod_info::DEFAULT_SCHEDULER_NAME.to_string(),
            parallel_binds: 32,
            percentage_of_nodes_to_score: None,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            flush_interval: Duration::from_secs(30),
            max_in_unschedulable: Duration::from_secs(300),
        }
    }
}
