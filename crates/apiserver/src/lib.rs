//! A Kubernetes-compatible API server over a [`store::Store`].
//!
//! Requests are routed by [`resource::RESOURCES`]; reads are served from the [`cache`], writes go
//! through [`admission`] to the store with compare-and-swap on the revision.

#![warn(missing_docs)]

pub mod admission;
mod apply;
pub mod cache;
pub mod discovery;
pub mod error;
pub mod metrics;
pub mod object;
pub mod openapi;
pub mod protobuf;
pub mod request;
pub mod resource;
mod rest;
mod server;
mod subresource;
pub mod table;
pub mod tls;
mod typecheck;
mod watch;

pub use server::{ApiServer, ServerOptions, serve_tls};
