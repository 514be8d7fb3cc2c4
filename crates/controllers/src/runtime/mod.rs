//! The machinery every controller shares: the [`Controller`] contract, [`run`] (the one way a
//! controller runs), the rate-limited [`WorkQueue`] and [`supervise`] (restart after a panic).
//!
//! We do not build on `kube::runtime::Controller`: it reconciles one object kind keyed by
//! `ObjectRef<K>` and owns its watches, while ours read one shared cache
//! ([`informer::Informers`]) and some are keyed otherwise (the garbage collector by graph item,
//! node lifecycle by node and pod). A queue keyed by any `K` with client-go's semantics serves
//! them all.

pub mod action;
pub mod controller;
pub mod queue;
pub mod supervisor;

pub use action::Action;
pub use controller::{Controller, Retry, run};
pub use queue::{Backoff, WorkQueue};
pub use supervisor::supervise;
