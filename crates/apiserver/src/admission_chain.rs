//! The admission chain: every [`Plugin`] in upstream's order, run once from the one write path
//! that create, update, patch, apply and delete share ([`ApiServer::admit`]). A write some
//! plugin may change is prepared and validated by its kind's strategy after the mutating phase,
//! as upstream's `rest.BeforeCreate` runs; any other write was validated on intake.

use serde_json::Value;

use crate::{
    admission::Pass,
    error::{ApiError, ApiResult},
    plugins::{Operation, Plugin, Review},
    state::ApiServer,
};

/// The plugins in upstream's order (`pkg/kubeapiserver/options/plugins.go`): every mutating
/// phase runs before any validating phase. NamespaceLifecycle runs before the chain, where the
/// write is prepared. ResourceQuota, last, charges the quotas in its validating phase; the charge
/// is kept once the object is stored ([`crate::plugins::Reserved`]) and given back otherwise.
pub(crate) const CHAIN: &[&dyn Plugin] = &[
    &crate::limit_ranger::LIMIT_RANGER,
    &crate::service_account::ServiceAccount,
    &crate::node_restriction::NodeRestriction,
    &crate::priority::PRIORITY,
    &crate::runtime_class::RUNTIME_CLASS,
    &crate::webhook::MutatingWebhooks,
    &crate::rbac_guard::RbacEscalation,
    &crate::pod_security::PodSecurity,
    &crate::policy::ValidatingAdmissionPolicy,
    &crate::webhook::ValidatingWebhooks,
    &crate::quota::ResourceQuotaAdmission,
];

impl ApiServer {
    /// Runs the admission chain on `obj` (the new object; for a delete, the old one): every
    /// handling plugin's mutating phase, then every handling plugin's validating phase. Returns
    /// the warnings they gave; an error refuses the write. What the plugins spent is held in
    /// `review.reserved`, which the caller keeps once the object is stored.
    pub(crate) async fn admit(
        &self,
        review: &Review<'_>,
        obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        let mut warnings = Vec::new();
        let handling: Vec<&dyn Plugin> = CHAIN
            .iter()
            .copied()
            .filter(|p| p.handles(review))
            .collect();
        if handling.is_empty() {
            return Ok(warnings);
        }
        let mutable = self.mutable(review);
        // Every debug build checks the plugins' word: a write none said it may change must come
        // out of the mutating phase as it went in.
        #[cfg(debug_assertions)]
        let unchanged = (matches!(review.operation, Operation::Create | Operation::Update)
            && !mutable)
            .then(|| obj.clone());
        for &plugin in &handling {
            let admitted = plugin.admit(self, review, obj).await;
            warnings.extend(admitted.inspect_err(|e| refused(plugin, review, e))?);
        }
        #[cfg(debug_assertions)]
        if let Some(unchanged) = unchanged {
            assert!(
                crate::admission::same_object(&unchanged, obj),
                "a plugin that said it would not changed {} {}",
                review.kind.kind,
                review.name
            );
        }
        if mutable {
            crate::admission::after_mutation(review.kind, obj, review.old, review.subresource)?;
        }
        for &plugin in &handling {
            let validated = plugin.validate(self, review, obj).await;
            warnings.extend(validated.inspect_err(|e| refused(plugin, review, e))?);
        }
        Ok(warnings)
    }

    /// How the write path runs the kind's strategy on the object `review` writes before
    /// admission: validated there unless a plugin that handles the write may change it, when
    /// [`Self::admit`] runs the strategy after the mutating phase
    /// ([`crate::admission::after_mutation`]).
    pub(crate) fn intake(&self, review: &Review<'_>) -> Pass {
        Pass::Intake {
            validate: !self.mutable(review),
        }
    }

    /// Whether a plugin that handles the write may change its object.
    fn mutable(&self, review: &Review<'_>) -> bool {
        matches!(review.operation, Operation::Create | Operation::Update)
            && CHAIN
                .iter()
                .any(|p| p.handles(review) && p.may_mutate(self, review))
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
