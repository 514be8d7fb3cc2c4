//! The cluster's controllers, each talking to the API only through a `kube::Client` so they run
//! unchanged in `rollwright up` and against a real cluster.
//!
//! - [`gc`]: the garbage collector (owner references, cascading deletion).
//! - [`pod_gc`]: the pod garbage collector (orphaned, terminated and stuck terminating pods).
//! - [`node_lifecycle`]: node health from Leases, condition and NoExecute taints, taint-based
//!   eviction.
//! - [`runtime`]: the work queue and reconcile contract they share (and the workload
//!   controllers will).
//!
//! Each controller is one future: [`run_gc`] and [`run_node_lifecycle`] run until dropped, so the
//! binary spawns them (and stops them by aborting the task).

#![warn(missing_docs)]

pub mod daemonset;
pub mod deployment;
pub mod expectations;
pub mod gc;
pub mod history;
#[cfg(feature = "test-support")]
pub mod invariants;
pub mod node_lifecycle;
pub mod owner_index;
pub mod ownership;
pub mod pod_gc;
pub mod replicaset;
pub mod runtime;
#[cfg(feature = "test-support")]
pub mod stateful_invariants;
pub mod statefulset;
pub mod volume;

use kube::Client;

/// Runs the garbage collector until dropped. See [`gc::Config`] for the knobs.
pub async fn run_gc(client: Client, config: gc::Config) {
    gc::run(client, config).await
}

/// Runs the pod garbage collector until dropped. See [`pod_gc::Config`] for the knobs.
pub async fn run_pod_gc(client: Client, config: pod_gc::Config) {
    pod_gc::run(client, config).await
}

/// Runs the node lifecycle controller until dropped. See [`node_lifecycle::Config`].
pub async fn run_node_lifecycle(client: Client, config: node_lifecycle::Config) {
    node_lifecycle::run(client, config).await
}
