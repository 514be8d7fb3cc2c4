//! The authenticated identity of a request, as upstream's `user.Info`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Upstream's `system:masters` group: its members may do anything, before any authorizer asks.
pub const MASTERS_GROUP: &str = "system:masters";
/// Every authenticated user's group.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group of requests without credentials.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The user of requests without credentials.
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// Who made a request. Serializes as `authentication.k8s.io/v1` `UserInfo` (the form TokenReview,
/// SubjectAccessReview, SelfSubjectReview and AdmissionReview carry).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    /// The user's name (`system:serviceaccount:NS:NAME`, `system:node:NODE`, a certificate's CN).
    pub username: String,
    /// A unique id, empty when the authenticator has none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups the user belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Whatever else the authenticator knows (a ServiceAccount token's pod name and uid).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user of `name` in `groups`.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        Self {
            username: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    /// The identity of a request without credentials.
    pub fn anonymous() -> Self {
        Self::new(ANONYMOUS_USER, &[UNAUTHENTICATED_GROUP])
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}
