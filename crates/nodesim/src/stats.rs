//! Counters the simulation keeps, so a benchmark (or the CLI) can tell when it has caught up
//! without watching every pod itself.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one simulation.
#[derive(Debug, Default)]
pub struct Stats {
    /// Simulated nodes known.
    pub nodes: AtomicU64,
    /// Pods being simulated.
    pub pods: AtomicU64,
    /// Of those, Ready ones (as the simulation sees them; their writes may be queued).
    pub pods_ready: AtomicU64,
    /// API writes done.
    pub writes: AtomicU64,
    /// API writes that failed (not counting a pod gone in the meantime).
    pub write_errors: AtomicU64,
    /// Writes queued or in flight.
    pub pending_writes: AtomicU64,
    /// Events dropped because too many were queued (upstream's broadcaster drops them too).
    pub events_dropped: AtomicU64,
    /// Lease renewals done.
    pub lease_renewals: AtomicU64,
    /// From when each renewal was due to when its write returned: what the node lifecycle
    /// controller's grace period (40s) must cover, or the node goes `Unknown`. Renewals only;
    /// a node's first lease write, as it registers or resumes, is not one.
    pub lease_latency: crate::latency::Histogram,
    /// Pod statuses written back because someone else changed their `Ready` condition: a number
    /// that keeps growing means two writers disagree about a pod.
    pub status_resyncs: AtomicU64,
    /// The projected ServiceAccount tokens the simulated kubelets hold, by pod.
    pub tokens: crate::tokens::Tokens,
}

impl Stats {
    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Ordering::Relaxed);
    }
}
