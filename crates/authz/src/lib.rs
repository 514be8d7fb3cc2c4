//! Who a request is and whether it may do what it asks.
//!
//! The API server authenticates a request into a [`UserInfo`], describes what it asks as
//! [`Attributes`], and asks its authorizers (upstream's order: the `system:masters` group, the
//! Node authorizer, RBAC) for a [`Decision`]. This crate knows nothing of HTTP or storage: the
//! server hands it the RBAC objects and a view of which pods run where.

#![warn(missing_docs)]

pub mod aggregation;
mod attributes;
pub mod bootstrap;
pub mod escalation;
pub mod node;
mod quote;
pub mod rbac;
pub mod reconcile;
mod user;

pub use attributes::{Attributes, Decision};
pub use quote::{quote, quote_list};
pub use user::{
    ANONYMOUS_USER, AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP, UserInfo,
};
