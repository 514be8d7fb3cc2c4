//! authorization.k8s.io/v1: the access reviews, created only and never stored (served by
//! `crate::review`).

use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
};

use super::Kind;

/// The authorization.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<LocalSubjectAccessReview>().never_stored(),
        Kind::of::<SelfSubjectAccessReview>().never_stored(),
        Kind::of::<SelfSubjectRulesReview>().never_stored(),
        Kind::of::<SubjectAccessReview>().never_stored(),
    ]
}
