//! A Kubernetes-compatible API server over a [`store::Store`].
//!
//! Requests are routed by the [`registry`] of kinds; reads are served from the [`cache`], writes
//! go through [`admission`] (driven by each kind's strategy) to the store with compare-and-swap on
//! the revision.

#![warn(missing_docs)]

pub mod admission;
mod admission_chain;
mod aggregator;
mod apply;
pub mod audit;
mod authorizer;
mod bootstrap_policy;
pub mod cache;
mod change;
mod component_status;
mod connection;
mod context;
pub mod discovery;
pub mod error;
mod eviction;
pub mod expiry;
mod filters;
mod flowcontrol;
mod guarded_body;
mod health;
pub mod inflight;
mod limit_ranger;
mod managed_fields;
pub mod metrics;
mod node_restriction;
pub mod object;
pub mod openapi;
mod outbound;
mod patch;
mod plugins;
mod pod_exec;
mod pod_log;
mod pod_security;
mod policy;
mod priority;
pub mod protobuf;
mod quota;
mod rbac_guard;
pub mod registry;
pub mod request;
mod rest;
mod review;
mod runtime_class;
mod serve;
mod server;
mod service_account;
mod service_account_token;
mod state;
mod strict;
mod subresource;
pub mod table;
pub mod tls;
mod view;
mod watch;
mod webhook;

pub use connection::ConnectionLimits;
pub use filters::authentication::ADMIN_USER;
pub use filters::chain::act_as;
pub use serve::{serve_tls, serve_tls_with};
pub use state::{ApiServer, DEFAULT_EVENT_BUDGET, DEFAULT_EVENT_TTL, ServerOptions};
