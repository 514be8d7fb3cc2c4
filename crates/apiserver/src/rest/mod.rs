//! The REST verbs on a resource: get, list, create, update, patch, delete, deletecollection,
//! one file per verb group, over the watch cache and the store.
//!
//! Reads come from the watch cache after it has caught up with the store; writes go to the store
//! with compare-and-swap on the revision, every one through the admission chain
//! ([`crate::admission_chain`]).

mod create;
mod delete;
mod list_body;
mod read;
mod response;
mod update;
mod write;

pub(crate) use delete::DeleteOptions;
pub(crate) use read::Filter;
pub(crate) use response::{entry_json, json_response, object_response, table_of, with_warnings};
