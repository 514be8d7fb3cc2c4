//! How the simulated nodes look and how fast their pods move.

use crate::distribution::Distribution;
use std::{collections::BTreeMap, time::Duration};

/// The label that marks a node as simulated: nodesim drives every node carrying it, including
/// nodes created later by anyone through the API.
pub use api::simulated::LABEL as SIMULATED_LABEL;
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
    /// Multiplies crash-loop, image-pull and volume-mount back-offs (10s, 20s, ... 5m) and
    /// probe times (`initialDelaySeconds`, `periodSeconds`): 1 keeps upstream's.
    pub backoff_scale: f64,
    /// The most API writes in flight at once.
    pub max_in_flight_writes: usize,
    /// Whether to record Events (a benchmark may turn them off to measure the rest).
    pub events: bool,
    /// The nodes this simulator drives when several share one cluster.
    pub shard: Shard,
}

/// Which simulated nodes one process drives when several simulate one cluster (`--shard 1/3`):
/// a node belongs to shard `fnv1a(name) % count`, so the processes agree on every node, including
/// nodes added later, without talking to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This process's shard, from 0.
    pub index: u32,
    /// How many shards there are.
    pub count: u32,
}

impl Default for Shard {
    /// One process drives every node.
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// Whether the node called `name` is this shard's.
    pub fn owns(&self, name: &str) -> bool {
        self.count <= 1 || fnv1a(name) % u64::from(self.count) == u64::from(self.index)
    }
}

/// 64-bit FNV-1a: stable across processes and releases, unlike std's randomly keyed hasher
/// (written here: a few lines, where a crate would bring a `Hasher` to wrap anyway).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A `--shard` that is not `INDEX/COUNT` with `INDEX < COUNT`.
#[derive(Debug, thiserror::Error)]
#[error("invalid shard {0:?}: expected INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/3")]
pub struct BadShard(String);

impl std::str::FromStr for Shard {
    type Err = BadShard;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadShard(s.to_string());
        let (index, count) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = index.trim().parse().map_err(|_| bad())?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
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
            shard: Shard::default(),
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_every_node_between_them_exactly_once() {
        let shards: Vec<Shard> = (0..3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        let mut per_shard = [0; 3];
        for n in 0..300 {
            let name = format!("node-{n}");
            let owners: Vec<usize> = (0..3).filter(|i| shards[*i].owns(&name)).collect();
            assert_eq!(owners.len(), 1, "{name}: {owners:?}");
            per_shard[owners[0]] += 1;
        }
        assert!(per_shard.iter().all(|n| *n > 70), "{per_shard:?}");
        assert!(Shard::default().owns("anything"));
    }

    #[test]
    fn shard_flags_parse_or_say_what_is_expected() {
        assert_eq!(
            "1/3".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 3 }
        );
        assert_eq!("1/3".parse::<Shard>().unwrap().to_string(), "1/3");
        for bad in ["3/3", "0/0", "1", "a/2", "-1/2"] {
            let e = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(e.contains("INDEX/COUNT"), "{bad}: {e}");
        }
    }
}
