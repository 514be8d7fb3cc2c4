//! Server-side apply: field ownership (`metadata.managedFields`), merging an applied
//! configuration into the live object, and conflicts between managers, as upstream's
//! structured-merge-diff does them. Pure: no HTTP, no storage.
//!
//! - [`set`] and [`path`]: sets of field paths and their `fieldsV1` form.
//! - [`schema`]: what a type says about merging (list types, atomic structs and maps);
//!   [`builtin`] adds upstream's list types to the built-in kinds' OpenAPI schemas.
//! - [`fields`], [`diff`], [`merge`]: what a value sets, what a write changed, and merging and
//!   removing fields.
//! - [`managed`]: `managedFields` entries; [`conflict`]: refused applies.
//! - [`operation`]: the two writes that move ownership, [`apply`] and [`update`].

pub mod builtin;
pub mod conflict;
pub mod diff;
pub mod fields;
pub mod managed;
pub mod merge;
pub mod operation;
pub mod path;
pub mod schema;
pub mod set;

pub use conflict::{Conflict, Conflicts};
pub use managed::{ManagedEntry, ManagedFields, Operation};
pub use operation::{ApplyError, LAST_APPLIED, Requested, Scope, Writer, apply, settle, update};
pub use path::{Path, PathElement};
pub use schema::{Deduced, ListType, OpenApi, Schema, Shape};
pub use set::FieldSet;

#[cfg(test)]
mod tests;
