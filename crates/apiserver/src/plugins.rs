//! The admission plugins that run after the built-in mutations of a write, in upstream's order:
//! mutating webhooks, then Pod Security, then ValidatingAdmissionPolicy, then validating webhooks
//! (after RBAC's escalation check, which upstream's RBAC storage makes).
//!
//! Each plugin sees a [`Review`] (upstream's `admission.Attributes`): who writes, what, and the
//! object before and after. The built-in plugins that only default or check one kind
//! (ServiceAccount, LimitRanger, Priority, RuntimeClass, ResourceQuota) run before, where the
//! write is prepared.

use crate::{error::ApiResult, registry::Kind, server::ApiServer};
use authz::UserInfo;
use serde_json::Value;

/// What a write does (upstream's `admission.Operation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    /// A new object.
    Create,
    /// A changed object (PUT, PATCH, apply).
    Update,
    /// An object going away.
    Delete,
}

impl Operation {
    /// The name AdmissionReview and webhook rules use.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

/// One write as the admission plugins see it.
pub(crate) struct Review<'a> {
    /// Who writes.
    pub user: &'a UserInfo,
    /// What the write does.
    pub operation: Operation,
    /// The kind as stored.
    pub kind: &'a Kind,
    /// The kind and version the client wrote (differs from `kind` for an older version).
    pub view: &'a Kind,
    /// The object's namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<&'a str>,
    /// The object's name (may be empty on create with `generateName`).
    pub name: &'a str,
    /// The subresource written (`status`, `scale`...), `None` for the main resource.
    pub subresource: Option<&'a str>,
    /// The stored object an update or delete starts from.
    pub old: Option<&'a Value>,
    /// Whether the write is a dry run (webhooks with side effects refuse those).
    pub dry_run: bool,
}

impl ApiServer {
    /// Runs the admission plugins on `obj` (the new object; for a delete, the old one). Returns
    /// the warnings they gave; an error refuses the write.
    pub(crate) async fn admit(
        &self,
        review: &Review<'_>,
        obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        crate::rbac_guard::check(self, review, obj)?;
        let mut warnings = crate::webhook::mutate(self, review, obj).await?;
        warnings.extend(crate::pod_security::admit(self, review, obj)?);
        warnings.extend(crate::policy::validate(self, review, obj).await?);
        warnings.extend(crate::webhook::validate(self, review, obj).await?);
        Ok(warnings)
    }
}
