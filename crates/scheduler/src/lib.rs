//! The scheduler: binds pending pods to nodes, as upstream's `kube-scheduler` with its default
//! profile would, with its filters in their order (NodeUnschedulable, NodeName, TaintToleration,
//! NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits,
//! VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity; least-allocated, spreading and
//! inter-pod affinity for scores), and preempts pods of lower priority when a pod fits nowhere
//! (DefaultPreemption).
//!
//! It talks to the API only through a [`kube::Client`], so it runs unchanged against a real
//! cluster. Decisions are pure functions over an incrementally kept [`cache::Cache`]; the I/O
//! lives in [`run`].

#![warn(missing_docs)]

pub mod algorithm;
pub mod cache;
pub mod condition;
pub mod config;
pub mod diagnosis;
pub mod disk;
pub mod filter;
pub mod fit;
pub mod host_ports;
pub mod inter_pod_affinity;
pub mod node_info;
pub mod node_ports;
pub mod node_volume_limits;
pub mod pod_affinity;
pub mod pod_info;
pub mod preemption;
pub mod queue;
pub mod resources;
pub mod scheduler;
pub mod score;
pub mod spread_constraint;
#[cfg(test)]
mod testing;
pub mod topology_spread;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

pub use config::SchedulerConfig;
pub use scheduler::run;
