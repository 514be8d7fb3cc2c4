//! The machinery every controller in this crate shares: a rate-limited work queue and a small
//! reconcile contract over it.
//!
//! We do not build on `kube::runtime::Controller`: it reconciles one object kind keyed by
//! `ObjectRef<K>`, while the garbage collector's items are graph nodes of any kind and the node
//! lifecycle controller drives two queues (nodes, pods) from three watches. A queue keyed by any
//! `K` with client-go's semantics (pending keys deduplicated, a key is never processed twice at
//! once, per-key exponential backoff, delayed adds) serves all of them, and the workload
//! controllers to come (keyed by `namespace/name`) reuse it unchanged.

pub mod queue;
pub mod worker;

pub use queue::{Backoff, WorkQueue};
pub use worker::{Action, run_workers};
