//! What every write shares: the namespace lifecycle check, the retry bound of compare-and-swap,
//! and the side effects of a stored write (a CustomResourceDefinition's kinds served at once).

use crate::{
    change::{Change, Outcome},
    error::{ApiError, ApiResult},
    object,
    registry::Kind,
    state::ApiServer,
};
use serde_json::Value;
use std::sync::Arc;
use store::Revision;

/// How many times a write retries after losing a compare-and-swap race it did not ask for.
pub(super) const MAX_RETRIES: usize = 16;

/// Sets `metadata.resourceVersion`.
pub(crate) fn set_rv(obj: &mut Value, rev: Revision) {
    object::meta_mut(obj).insert("resourceVersion".into(), Value::String(rev.to_string()));
}

/// Whether `spec.finalizers` (namespaces') is empty or absent.
pub(super) fn spec_finalizers_released(obj: &Value) -> bool {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|f| f.is_empty())
}

impl ApiServer {
    /// Refuses creates in a namespace that does not exist or is going away, naming the object
    /// (its name, or its `generateName` prefix) as upstream's NamespaceLifecycle admission does.
    pub(crate) fn check_namespace_open(
        &self,
        def: &Kind,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<()> {
        let (Some(ns), true) = (ns, def.namespaced) else {
            return Ok(());
        };
        let ns_def = self.namespaces()?;
        let entry = self
            .cache
            .get(&ns_def, None, ns)
            .ok_or_else(|| ApiError::not_found(&ns_def, ns))?;
        // Upstream's NamespaceLifecycle admission asks the phase, which deletion sets to
        // Terminating with the deletion timestamp; the cache indexes it, so nothing is parsed.
        if entry.field_is("status.phase", "Terminating") {
            return Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                def.group_resource(),
            )));
        }
        Ok(())
    }

    /// The namespaces kind.
    pub(super) fn namespaces(&self) -> ApiResult<Arc<Kind>> {
        self.registry()
            .find("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("no namespaces kind"))
    }

    /// What a stored write changes beyond the object: a CustomResourceDefinition's kinds are
    /// served (or no longer served) as soon as it is written.
    pub(crate) fn after_write(&self, def: &Kind, obj: &Value) {
        if crate::registry::apiextensions::is_definition(def) {
            crate::registry::apiextensions::register(self.registry(), obj);
        }
    }

    pub(crate) fn after_outcome(&self, def: &Kind, outcome: &Outcome) {
        match outcome {
            Outcome::Written(v) => self.after_write(def, v),
            Outcome::Deleted(v) if crate::registry::apiextensions::is_definition(def) => {
                crate::registry::apiextensions::unregister(self.registry(), v)
            }
            _ => {}
        }
    }

    /// An update that removes the last finalizer of an object being deleted deletes it (for a
    /// namespace, also the last of `spec.finalizers`, which the namespace controller removes).
    pub(crate) fn finish_if_released(&self, next: Value) -> Change {
        let grace = next
            .get("metadata")
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if object::is_deleting(&next)
            && object::finalizers(&next).is_empty()
            && spec_finalizers_released(&next)
            && grace == 0
        {
            Change::Delete
        } else {
            Change::Write(next)
        }
    }
}
