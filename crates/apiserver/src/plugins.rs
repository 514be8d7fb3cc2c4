//! The admission chain (upstream's `k8s.io/apiserver/pkg/admission`): one [`Plugin`] trait, one
//! ordered list of plugins ([`CHAIN`]), run once from the one write path that create, update,
//! patch, apply and delete share ([`ApiServer::admit`]).
//!
//! Each plugin sees a [`Review`] (upstream's `admission.Attributes`): who writes, what, and the
//! object before and after. A new plugin implements [`Plugin`] where its logic lives and takes
//! its place in [`CHAIN`]; nothing else calls it.

use crate::{
    error::{ApiError, ApiResult},
    registry::Kind,
    server::ApiServer,
};
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

/// One admission plugin (upstream's `admission.Interface`): it says which writes it handles,
/// may change the object in the mutating phase, and may refuse it in the validating phase.
/// Every write (create, update, patch, apply, delete) reaches every plugin through [`CHAIN`] and
/// [`ApiServer::admit`], so that no verb can skip one.
#[async_trait::async_trait]
pub(crate) trait Plugin: Send + Sync {
    /// Upstream's name for the plugin (`--enable-admission-plugins`).
    fn name(&self) -> &'static str;

    /// Whether the plugin acts on this write: its kinds, operations and subresources.
    fn handles(&self, review: &Review<'_>) -> bool;

    /// The mutating phase (upstream's `MutationInterface.Admit`): defaults or refuses.
    async fn admit(
        &self,
        _server: &ApiServer,
        _review: &Review<'_>,
        _obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        Ok(Vec::new())
    }

    /// The validating phase (upstream's `ValidationInterface.Validate`): refuses, never changes.
    async fn validate(
        &self,
        _server: &ApiServer,
        _review: &Review<'_>,
        _obj: &Value,
    ) -> ApiResult<Vec<String>> {
        Ok(Vec::new())
    }
}

/// The plugins in upstream's order (`pkg/kubeapiserver/options/plugins.go`): every mutating
/// phase runs before any validating phase. NamespaceLifecycle runs before the chain, where the
/// write is prepared; ResourceQuota runs as the object is stored, where its charge is kept only
/// if the write succeeds.
pub(crate) const CHAIN: &[&dyn Plugin] = &[
    &crate::limit_ranger::LimitRanger,
    &crate::service_account::ServiceAccount,
    &crate::node_restriction::NodeRestriction,
    &crate::priority::Priority,
    &crate::runtime_class::RuntimeClass,
    &crate::webhook::MutatingWebhooks,
    &crate::rbac_guard::RbacEscalation,
    &crate::pod_security::PodSecurity,
    &crate::policy::ValidatingAdmissionPolicy,
    &crate::webhook::ValidatingWebhooks,
];

/// Whether `review` creates a Pod (the main resource): what the pod-defaulting plugins handle.
pub(crate) fn creates_pod(review: &Review<'_>) -> bool {
    review.operation == Operation::Create
        && review.subresource.is_none()
        && review.kind.is("", "Pod")
}

/// Whether `review` creates a subresource whose object is not of the kind: a pod's `eviction`
/// (an Eviction) or a ServiceAccount's `token` (a TokenRequest). NodeRestriction judges these;
/// the webhooks and policies, which describe the object as of `review.kind`, are not sent them
/// yet (upstream sends them with the subresource's own kind).
pub(crate) fn creates_subresource(review: &Review<'_>) -> bool {
    review.operation == Operation::Create && review.subresource.is_some()
}

impl ApiServer {
    /// Runs the admission chain on `obj` (the new object; for a delete, the old one): every
    /// handling plugin's mutating phase, then every handling plugin's validating phase. Returns
    /// the warnings they gave; an error refuses the write.
    pub(crate) async fn admit(
        &self,
        review: &Review<'_>,
        obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        let mut warnings = Vec::new();
        for &plugin in CHAIN.iter().filter(|p| p.handles(review)) {
            let admitted = plugin.admit(self, review, obj).await;
            warnings.extend(admitted.inspect_err(|e| refused(plugin, review, e))?);
        }
        for &plugin in CHAIN.iter().filter(|p| p.handles(review)) {
            let validated = plugin.validate(self, review, obj).await;
            warnings.extend(validated.inspect_err(|e| refused(plugin, review, e))?);
        }
        Ok(warnings)
    }
}

fn refused(plugin: &dyn Plugin, review: &Review<'_>, e: &ApiError) {
    tracing::debug!(
        plugin = plugin.name(),
        kind = %review.kind.kind,
        name = review.name,
        operation = review.operation.as_str(),
        error = %e,
        "admission refused the write"
    );
}
