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
    /// handling plugin's mutating phase, then every handling plugin's validating phase. `intake`
    /// is what the write path did with the kind's strategy before ([`Self::intake`]): decided
    /// once and carried here, so that a webhook configuration removed in between cannot leave
    /// a write validated by neither. Returns the warnings the plugins gave; an error refuses the
    /// write. What the plugins spent is held in `review.reserved`, which the caller keeps once
    /// the object is stored.
    pub(crate) async fn admit(
        &self,
        review: &Review<'_>,
        obj: &mut Value,
        intake: Pass,
    ) -> ApiResult<Vec<String>> {
        let mut warnings = Vec::new();
        let handling: Vec<&dyn Plugin> = CHAIN
            .iter()
            .copied()
            .filter(|p| p.handles(review))
            .collect();
        let unvalidated = intake == Pass::Intake { validate: false };
        if handling.is_empty() && !unvalidated {
            return Ok(warnings);
        }
        let revalidate = unvalidated || self.mutable(review);
        // Every debug build checks the plugins' word: a write none said it may change must come
        // out of the mutating phase as it went in, unless one said it did after all.
        #[cfg(debug_assertions)]
        let unchanged = (matches!(review.operation, Operation::Create | Operation::Update)
            && !revalidate)
            .then(|| obj.clone());
        for &plugin in &handling {
            let admitted = plugin.admit(self, review, obj).await;
            warnings.extend(admitted.inspect_err(|e| refused(plugin, review, e))?);
        }
        #[cfg(debug_assertions)]
        if let Some(unchanged) = unchanged {
            assert!(
                review.was_mutated() || crate::admission::same_object(&unchanged, obj),
                "a plugin that said it would not changed {} {}",
                review.kind.kind,
                review.name
            );
        }
        if revalidate || review.was_mutated() {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use std::sync::Arc;

    use authz::UserInfo;
    use serde_json::json;
    use store::{Store, memory::MemoryStore};

    use super::*;

    async fn server() -> ApiServer {
        ApiServer::start(
            Arc::new(MemoryStore::new()) as Arc<dyn Store>,
            crate::ServerOptions::default(),
        )
        .await
        .unwrap()
    }

    /// A create whose intake left validation to the chain (a mutating webhook was configured
    /// then) is validated by the chain even when nothing may mutate it any more (the
    /// configuration was deleted before the chain ran): no write goes through unvalidated.
    #[tokio::test]
    async fn a_write_intake_left_unvalidated_is_validated_by_the_chain() {
        let server = server().await;
        let kind = server.registry().find("", "v1", "configmaps").unwrap();
        let user = UserInfo::new("someone", &["system:authenticated"]);
        let review = Review {
            user: &user,
            operation: Operation::Create,
            kind: &kind,
            view: &kind,
            namespace: Some("default"),
            name: "Not_A_Name",
            subresource: None,
            old: None,
            dry_run: false,
            reserved: Default::default(),
            mutated: Default::default(),
        };
        assert_eq!(server.intake(&review), Pass::VALIDATED);
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "Not_A_Name", "namespace": "default"}});
        let refused = server
            .admit(&review, &mut obj, Pass::Intake { validate: false })
            .await
            .unwrap_err();
        assert_eq!(refused.code, 422, "{refused:?}");
        assert!(refused.message.contains("metadata.name"), "{refused:?}");
    }
}
