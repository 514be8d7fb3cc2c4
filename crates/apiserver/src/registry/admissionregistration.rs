//! admissionregistration.k8s.io/v1: webhook configurations (called by crate::webhook) and
//! validating admission policies (evaluated by crate::policy).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use serde_json::json;

use super::{Kind, Rules, Subresource};
use crate::table::{AGE, Desc, NAME, Printer, age_cell, arr, col, name_cell, plain};

/// The admissionregistration.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    let webhooks = Printer::Columns {
        columns: || {
            vec![
                NAME,
                col(
                    "Webhooks",
                    "integer",
                    0,
                    Desc::Text("Webhooks indicates the number of webhooks."),
                ),
                AGE,
            ]
        },
        row: |obj, now| {
            plain(vec![
                name_cell(obj),
                json!(arr(obj, &["webhooks"]).len()),
                age_cell(obj, now),
            ])
        },
    };
    vec![
        // Each kind's name is a DNS subdomain, as upstream's validation of each checks, and
        // each webhook's client is a Service or an `https://` URL without user information.
        Kind::of::<MutatingWebhookConfiguration>()
            .strategy(
                Rules::new().validate(
                    api::validation::admissionregistration::validate_webhook_configuration,
                ),
            )
            .printer(webhooks.clone()),
        // Policies are evaluated by crate::policy, which defaults and validates them.
        Kind::of::<ValidatingAdmissionPolicy>()
            .subresources(&[Subresource::Status])
            .strategy(
                Rules::new()
                    .defaults(crate::policy::validation::default_policy)
                    .validate(crate::policy::validation::validate_policy),
            ),
        Kind::of::<ValidatingAdmissionPolicyBinding>().strategy(
            Rules::new()
                .defaults(crate::policy::validation::default_binding)
                .validate(crate::policy::validation::validate_binding),
        ),
        Kind::of::<ValidatingWebhookConfiguration>()
            .strategy(
                Rules::new().validate(
                    api::validation::admissionregistration::validate_webhook_configuration,
                ),
            )
            .printer(webhooks),
    ]
}
