//! authentication.k8s.io/v1: TokenReview and SelfSubjectReview, created only and never stored
//! (served by `crate::review`). TokenRequest is `serviceaccounts/token`, a subresource.

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview};

use super::Kind;

/// The authentication.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<SelfSubjectReview>().never_stored(),
        Kind::of::<TokenReview>().never_stored(),
    ]
}
