//! The ResourceQuota kind's write rules (upstream's `pkg/registry/core/resourcequota`): a create
//! starts without status (the quota controller computes it), `spec.hard` names standard or
//! qualified resources with non-negative (and for counts, whole) amounts, scopes fit the
//! resources they limit and never change, and a status write is checked the same way.

use crate::registry::strategy::Strategy;
use api::{field::FieldError, validation::quota};
use serde_json::Value;

/// ResourceQuota's strategy; its status subresource is the quota controller's (and the quota
/// admission's) to write.
pub(crate) struct QuotaStrategy;

impl Strategy for QuotaStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        quota::validate_resource_quota(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        quota::validate_resource_quota_update(new, old)
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        quota::validate_resource_quota_status_update(new, old)
    }
}
