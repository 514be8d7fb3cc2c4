//! The API server's integration tests: the server in process, over HTTPS on a free loopback port.
//!
//! One binary for all of them: each test file used to link the whole control plane on its own,
//! which cost minutes of linking and gigabytes of disk per file on CI's small machine.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod aggregation;
mod apply_admission;
mod audit;
mod common;
mod component_statuses;
mod crd_conditions;
mod deletion_defaults;
mod discovery;
mod ephemeral_containers;
mod event_ttl;
mod field_selectors;
mod field_validation;
mod flowcontrol;
mod health;
mod large_lists;
mod name_validation;
mod namespace_finalize;
mod namespace_isolation;
mod node_restriction;
mod openapi_v2;
mod overload;
mod patch_limits;
mod pod_admission;
mod pod_security;
mod pod_streams;
mod policy_cost;
mod policy_limits;
mod quota;
mod rbac;
mod reviews;
mod service_account_admission;
mod service_account_tokens;
mod simulated_addresses;
mod status_uid;
mod validating_admission_policy;
mod watch_bookmarks;
mod watch_relist;
mod webhooks;
