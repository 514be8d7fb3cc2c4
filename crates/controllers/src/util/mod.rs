//! What the controllers share and no controller is (upstream's `pkg/controller/controller_utils.go`
//! and its neighbours): each helper once, for every controller that needs it.
//!
//! - [`expectations`]: what a controller's own watch must still show before it trusts the cache.
//! - [`ownership`], [`owners`]: adoption and release of children, and the parsed owners a child's
//!   change concerns.
//! - [`pod_control`]: the one place workload controllers write pods (slow-start batches, events).
//! - [`update`]: whole-object writes retried on conflict, as upstream's controllers make them.
//! - [`written`]: read-your-writes for a controller's cache.
//! - [`api_error`]: what a failed API call says in events and conditions.

pub mod api_error;
pub mod expectations;
pub mod owners;
pub mod ownership;
pub mod pod_control;
pub mod update;
pub mod written;
