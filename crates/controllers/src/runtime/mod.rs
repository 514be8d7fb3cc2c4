//! The machinery every controller shares: the [`Controller`] contract, [`run`] (the one way a
//! controller runs), the rate-limited [`WorkQueue`], [`supervise`] (restart after a panic), and
//! what most controllers would otherwise each write again: their [`Config`] and, when an API
//! call is all that can fail, their error ([`ApiError`]).
//!
//! We do not build on `kube::runtime::Controller`: it reconciles one object kind keyed by
//! `ObjectRef<K>` and owns its watches, while ours read one shared cache
//! ([`informer::Informers`]) and some are keyed otherwise (the garbage collector by graph item,
//! node lifecycle by node and pod). A queue keyed by any `K` with client-go's semantics serves
//! them all.

pub mod action;
pub mod config;
pub mod controller;
pub mod error;
pub mod queue;
pub mod queue_metrics;
pub mod supervisor;

pub use action::Action;
pub use config::Config;
pub use controller::{Controller, Retry, run};
pub use error::ApiError;
pub use queue::{Backoff, WorkQueue};
pub use supervisor::supervise;
