//! A Kubernetes-compatible API server over a [`store::Store`].
//!
//! Requests are routed by the [`registry`] of kinds; reads are served from the [`cache`], writes
//! go through [`admission`] (driven by each kind's strategy) to the store with compare-and-swap on
//! the revision.

#![warn(missing_docs)]

pub mod admission;
mod aggregator;
mod apply;
pub mod audit;
mod authorizer;
mod bootstrap_policy;
pub mod cache;
mod connection;
mod context;
pub mod discovery;
pub mod error;
mod eviction;
pub mod expiry;
mod filters;
mod guarded_body;
mod health;
pub mod inflight;
mod limit_ranger;
pub mod metrics;
mod node_restriction;
pub mod object;
pub mod openapi;
mod outbound;
mod patch;
mod plugins;
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
mod server;
mod service_account;
mod service_account_token;
mod strict;
mod subresource;
pub mod table;
pub mod tls;
mod watch;
mod webhook;

pub use filters::authentication::ADMIN_USER;
pub use server::{
    ApiServer, ConnectionLimits, DEFAULT_EVENT_TTL, ServerOptions, act_as, serve_tls,
    serve_tls_with,
};
