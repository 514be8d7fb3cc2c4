//! Admission webhooks: the Mutating- and ValidatingWebhookConfigurations called as upstream calls
//! them. (Being built: until then none are called.)

use crate::{error::ApiResult, plugins::Review, server::ApiServer};
use serde_json::Value;

/// Calls the mutating webhooks that match the write, in order; their patches change `obj`.
pub(crate) async fn mutate(
    _server: &ApiServer,
    _review: &Review<'_>,
    _obj: &mut Value,
) -> ApiResult<Vec<String>> {
    Ok(Vec::new())
}

/// Calls the validating webhooks that match the write; a refusal is an error.
pub(crate) async fn validate(
    _server: &ApiServer,
    _review: &Review<'_>,
    _obj: &Value,
) -> ApiResult<Vec<String>> {
    Ok(Vec::new())
}
