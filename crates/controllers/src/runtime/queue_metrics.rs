//! The work queues' Prometheus metrics, with the names and labels client-go's `workqueue`
//! registers through component-base, so that kube-controller-manager's dashboards read ours:
//! `workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total`,
//! `workqueue_queue_duration_seconds` (added to handed out) and `workqueue_work_duration_seconds`
//! (handed out to done), each by queue `name` (the controller's).
//!
//! Process-wide, as upstream's: a queue reports once [`super::run`] names it.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use std::{sync::LazyLock, time::Duration};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueName {
    name: &'static str,
}

/// client-go's buckets for both durations: 10 ns to 10 s by powers of ten.
fn duration_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1e-8, 10.0, 10,
    ))
}

struct Families {
    depth: Family<QueueName, Gauge>,
    adds: Family<QueueName, Counter>,
    retries: Family<QueueName, Counter>,
    queue_duration: Family<QueueName, Histogram>,
    work_duration: Family<QueueName, Histogram>,
}

static FAMILIES: LazyLock<Families> = LazyLock::new(|| Families {
    depth: Family::default(),
    adds: Family::default(),
    retries: Family::default(),
    queue_duration: Family::new_with_constructor(duration_histogram),
    work_duration: Family::new_with_constructor(duration_histogram),
});

/// Adds the work queues' metrics to `registry` (for a `/metrics` endpoint).
pub fn register(registry: &mut Registry) {
    let f = &*FAMILIES;
    registry.register(
        "workqueue_depth",
        "Current depth of workqueue",
        f.depth.clone(),
    );
    registry.register(
        "workqueue_adds",
        "Total number of adds handled by workqueue",
        f.adds.clone(),
    );
    registry.register(
        "workqueue_retries",
        "Total number of retries handled by workqueue",
        f.retries.clone(),
    );
    registry.register(
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        f.queue_duration.clone(),
    );
    registry.register(
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes",
        f.work_duration.clone(),
    );
}

/// One queue's series.
#[derive(Clone, Debug)]
pub(crate) struct QueueMetrics {
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) retries: Counter,
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
}

impl QueueMetrics {
    /// The series of the queue `name`.
    pub(crate) fn named(name: &'static str) -> Self {
        let label = QueueName { name };
        let f = &*FAMILIES;
        Self {
            depth: f.depth.get_or_create(&label).clone(),
            adds: f.adds.get_or_create(&label).clone(),
            retries: f.retries.get_or_create(&label).clone(),
            queue_duration: f.queue_duration.get_or_create(&label).clone(),
            work_duration: f.work_duration.get_or_create(&label).clone(),
        }
    }
}

/// Seconds, as the histograms take them.
pub(crate) fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}
