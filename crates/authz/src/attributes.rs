//! What a request asks to do, and the answer.

use crate::UserInfo;

/// A request as authorizers see it (upstream's `authorizer.Attributes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or a
    /// special verb (`impersonate`, `bind`, `escalate`, `use`, `approve`...); for a
    /// non-resource request, the lower-case HTTP method.
    pub verb: String,
    /// Whether this is a request for an API resource (otherwise `path` is what is asked for).
    pub resource_request: bool,
    /// The API group (`""` for the core group).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The resource (plural, lower case).
    pub resource: String,
    /// The subresource (`status`, `scale`, `token`...), empty for the main resource.
    pub subresource: String,
    /// The namespace, empty for cluster-scoped requests and for requests across all namespaces.
    pub namespace: String,
    /// The object's name, empty for collections.
    pub name: String,
    /// The URL path of a non-resource request (`/healthz`, `/api`).
    pub path: String,
}

/// An authorizer's answer (upstream's `authorizer.Decision` with its reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reason says by what (upstream's RBAC says which binding and role).
    Allow(String),
    /// Denied outright; no later authorizer is asked.
    Deny(String),
    /// This authorizer has nothing to say; the next one is asked. The reason is kept for the
    /// Forbidden message when nobody allows.
    NoOpinion(String),
}

impl Decision {
    /// Whether the request may go on.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    /// The reason given with the decision.
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
        }
    }
}
