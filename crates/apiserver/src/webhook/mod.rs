//! Admission webhooks: the Mutating- and ValidatingWebhookConfigurations called as upstream's
//! `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins call them
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook`).
//!
//! - [`config`]: the stored configurations' webhooks, defaulted and ordered.
//! - [`matching`]: rules, match policy, namespace and object selectors.
//! - [`review`]: the AdmissionReview sent and the answer's verification; denials.
//! - [`client`]: the HTTPS call, to a URL or through a Service's endpoints.
//! - [`dispatch`]: mutating (in order, with reinvocation) and validating (concurrent) dispatch.
//!
//! `matchConditions` (CEL) are not evaluated: a webhook with them is called whenever its rules
//! and selectors match.

mod client;
pub(crate) mod config;
mod dispatch;

pub(crate) use dispatch::Write;
pub(crate) mod matching;
mod review;

use crate::{error::ApiResult, plugins::Review, state::ApiServer};
use serde_json::Value;

/// Calls the mutating webhooks that match the write, in order; their patches change `obj`.
pub(crate) async fn mutate(
    server: &ApiServer,
    review: &Review<'_>,
    obj: &mut Value,
) -> ApiResult<Vec<String>> {
    dispatch::mutate(server, review, obj).await
}

/// Calls the validating webhooks that match the write; a refusal is an error.
pub(crate) async fn validate(
    server: &ApiServer,
    review: &Review<'_>,
    obj: &Value,
) -> ApiResult<Vec<String>> {
    dispatch::validate(server, review, obj).await
}

/// Upstream's `MutatingAdmissionWebhook` plugin: the configured webhooks decide which writes
/// they match.
pub(crate) struct MutatingWebhooks;

#[async_trait::async_trait]
impl crate::plugins::Plugin for MutatingWebhooks {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    fn handles(&self, review: &Review<'_>) -> bool {
        !crate::plugins::creates_subresource(review)
    }

    fn may_mutate(&self, server: &ApiServer, _review: &Review<'_>) -> bool {
        config::any(server, config::Flavor::Mutating)
    }

    async fn admit(
        &self,
        server: &ApiServer,
        review: &Review<'_>,
        obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        mutate(server, review, obj).await
    }
}

/// Upstream's `ValidatingAdmissionWebhook` plugin.
pub(crate) struct ValidatingWebhooks;

#[async_trait::async_trait]
impl crate::plugins::Plugin for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn handles(&self, review: &Review<'_>) -> bool {
        !crate::plugins::creates_subresource(review)
    }

    async fn validate(
        &self,
        server: &ApiServer,
        review: &Review<'_>,
        obj: &Value,
    ) -> ApiResult<Vec<String>> {
        validate(server, review, obj).await
    }
}
