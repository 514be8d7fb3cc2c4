//! rollwright's end-to-end tests: a control plane started by each test on a free loopback port,
//! driven by the real `kubectl`, the `kube` client and rollwright's own CLI.
//!
//! One binary for all of them: each test file used to link the whole control plane on its own,
//! which cost minutes of linking and gigabytes of disk per file on CI's small machine.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod access;
mod aggregation;
mod auto_rollback;
mod bench_nodes;
mod budgeted_rollouts;
mod certgen_jobs;
mod chaos;
mod cli_commands;
mod cli_rollout;
mod cli_watch;
mod client_rate_limits;
mod cluster;
mod cluster_controllers;
mod common;
mod crash;
mod crd;
mod daemonset_kubectl;
mod deployment_kubectl;
mod disruption;
mod endpoints;
mod etcd_faults;
mod etcd_servers;
mod garbage_collection;
mod informers;
mod install;
mod jobs;
mod kube_client;
mod kubectl;
mod kubectl_streams;
mod kubelet;
mod leader_election;
mod least_privilege;
mod node_failure;
mod paced_rollouts;
mod progress_deadline;
mod realworld;
mod scheduler_filters;
mod scheduling;
mod security;
mod server_side_apply;
mod snapshot;
mod snapshot_recorded;
mod statefulset_kubectl;
mod watch_restart;
mod whatif;
