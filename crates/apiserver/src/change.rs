//! What a write decides to do with the current object and what it did, shared by every write
//! path (create, update, patch, apply, subresources) and the admission plugins that see it.

use std::sync::Arc;

use serde_json::Value;

use crate::registry::Kind;

/// A client's write as [`ApiServer::admitted_update`] describes it to the admission plugins.
pub(crate) struct Write<'a> {
    /// The kind and version the client wrote.
    pub view: &'a Kind,
    /// The subresource written, `None` for the main resource.
    pub subresource: Option<&'a str>,
}

/// What a write did. The objects are shared with the cache's parsed copies of what this server
/// wrote last (see `cache::recent`), so reading one costs nothing and owning one may cost a copy.
pub(crate) enum Outcome {
    /// Stored (or would have been, under dry run): the new object, `resourceVersion` set.
    Written(Arc<Value>),
    /// Nothing changed: the stored object.
    Unchanged(Arc<Value>),
    /// Deleted: the last state, `resourceVersion` at the deletion.
    Deleted(Arc<Value>),
}

impl Outcome {
    /// The object.
    pub(crate) fn value(&self) -> &Value {
        match self {
            Outcome::Written(v) | Outcome::Unchanged(v) | Outcome::Deleted(v) => v,
        }
    }

    /// The object, owned (a copy when the cache still shares it).
    pub(crate) fn into_value(self) -> Value {
        match self {
            Outcome::Written(v) | Outcome::Unchanged(v) | Outcome::Deleted(v) => {
                Arc::unwrap_or_clone(v)
            }
        }
    }
}

/// What a write function decides to do with the current object.
pub(crate) enum Change {
    /// Store this object.
    Write(Value),
    /// Delete the object.
    Delete,
}
