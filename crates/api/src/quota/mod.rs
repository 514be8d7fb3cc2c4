//! Resource quota accounting, shared by the API server's quota admission and the quota
//! controller so that both measure an object the same way (upstream keeps this in
//! `pkg/quota/v1`; the validation of the ResourceQuota kind itself is in
//! [`crate::validation::quota`]).
//!
//! - [`resources`]: resource lists (sums, masks, comparisons) and upstream's canonical printing;
//! - [`evaluator`]: what a pod, service, claim or any counted object uses, and which quotas
//!   cover it (scopes).

pub mod evaluator;
pub mod resources;

pub use evaluator::{Evaluator, GroupResource, Object, scope_selectors};
pub use resources::{Amount, Format, ResourceList};
