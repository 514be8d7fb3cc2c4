//! How the simulated nodes look and how fast their pods move.

use crate::distribution::Distribution;
use std::{collections::BTreeMap, time::Duration};

/// The label that marks a node as simulated: nodesim drives every node carrying it, including
/// nodes created later by anyone through the API.
pub const SIMULATED_LABEL: &str = "rollwright.io/simulated";
/// Annotation that stops a node's kubelet (`stopped`): no lease renewals, no status posts.
pub const HEARTBEAT_ANNOTATION: &str = "rollwright.io/heartbeat";
/// Annotation listing pressures (`memory,disk,pid`) a node reports as True conditions.
pub const PRESSURE_ANNOTATION: &str = "rollwright.io/pressure";
/// Where node leases live, as upstream.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The simulation's settings. `Default` is a realistic small cluster; tests shrink the delays.
#[derive(Clone, Debug)]
pub struct NodeSim {
    /// How many nodes `run` registers (`node-0` ... `node-{n-1}`).
    pub nodes: usize,
    /// Node names are this prefix and an index.
    pub name_prefix: String,
    /// CPU capacity (a quantity).
    pub cpu: String,
    /// Memory capacity.
    pub memory: String,
    /// Ephemeral storage capacity.
    pub ephemeral_storage: String,
    /// Pod capacity.
    pub max_pods: u32,
    /// `topology.kubernetes.io/zone` values, assigned round robin.
    pub zones: Vec<String>,
    /// More labels for registered nodes.
    pub extra_labels: BTreeMap<String, String>,
    /// `nodeInfo.kubeletVersion` (and kube-proxy's).
    pub kubelet_version: String,
    /// How often each node renews its Lease (upstream: 10s).
    pub heartbeat_interval: Duration,
    /// `leaseDurationSeconds` on the Lease (upstream: 40).
    pub lease_duration_seconds: i32,
    /// Node status is posted on change and at least this often (upstream's
    /// `nodeStatusReportFrequency`: 5 minutes).
    pub status_report_interval: Duration,
    /// When someone else changes a pod's `Ready` condition, its status is written back, at most
    /// once per this interval per pod (upstream's status manager syncs every 10s), so two
    /// writers that disagree cannot spin.
    pub status_resync_interval: Duration,
    /// From a pod's binding to its containers running (pull, create, start).
    pub start_delay: Distribution,
    /// From a container running to it passing readiness (and an init container's run time).
    pub readiness_delay: Distribution,
    /// Multiplies grace periods: 0.01 makes a 30s grace take 0.3s.
    pub grace_scale: f64,
    /// Multiplies crash-loop and image-pull back-offs (10s, 20s, ... 5m) and probe periods.
    pub backoff_scale: f64,
    /// The most API writes in flight at once.
    pub max_in_flight_writes: usize,
    /// Whether to record Events (a benchmark may turn them off to measure the rest).
    pub events: bool,
}

impl Default for NodeSim {
    fn default() -> Self {
        NodeSim {
            nodes: 3,
            name_prefix: "node-".into(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            ephemeral_storage: "100Gi".into(),
            max_pods: 110,
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            extra_labels: BTreeMap::new(),
            kubelet_version: "v1.32.4".into(),
            heartbeat_interval: Duration::from_secs(10),
            lease_duration_seconds: 40,
            status_report_interval: Duration::from_secs(300),
            status_resync_interval: Duration::from_secs(10),
            start_delay: Distribution::Uniform(
                Duration::from_millis(500),
                Duration::from_millis(1500),
            ),
            readiness_delay: Distribution::Uniform(
                Duration::from_millis(500),
                Duration::from_millis(1500),
            ),
            grace_scale: 0.01,
            backoff_scale: 1.0,
            max_in_flight_writes: 64,
            events: true,
        }
    }
}

impl NodeSim {
    /// The name of the `i`th registered node.
    pub fn node_name(&self, i: usize) -> String {
        format!("{}{i}", self.name_prefix)
    }

    /// `d` multiplied by the back-off scale.
    pub(crate) fn backoff(&self, d: Duration) -> Duration {
        d.mul_f64(self.backoff_scale.max(0.0))
    }

    /// A grace period in seconds, scaled.
    pub(crate) fn grace(&self, seconds: i64) -> Duration {
        Duration::from_secs(seconds.max(0) as u64).mul_f64(self.grace_scale.max(0.0))
    }
}
