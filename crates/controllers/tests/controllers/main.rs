//! The controllers' integration tests: each controller against a real in-process API server.
//!
//! One binary for all of them: each test file used to link the whole control plane on its own,
//! which cost minutes of linking and gigabytes of disk per file on CI's small machine.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod clusterrole_aggregation;
mod cronjob;
mod daemonset;
mod daemonset_random;
mod daemonset_revisions;
mod deployment;
mod deployment_random;
mod endpoints;
mod gc;
mod gc_cycle;
mod job;
mod job_orphans;
mod namespace;
mod node_lifecycle;
mod pod_gc;
mod replicaset;
mod replicaset_random;
mod replicationcontroller;
mod resourcequota;
mod root_ca;
mod serviceaccount;
mod serviceaccount_token;
mod statefulset;
mod statefulset_random;
mod support;
mod volume;
