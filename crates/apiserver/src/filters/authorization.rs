//! The authorization layer: every request is allowed by an authorizer or refused with upstream's
//! Forbidden status, whose message names the user, the verb and what was asked for.

use crate::{
    context::Identity,
    error::{ApiError, ApiResult},
    state::ApiServer,
};
use authz::Attributes;
use axum::extract::Request;

/// The authorization step: whether the request's user may do what it asks; the 403 otherwise.
pub(crate) fn check(s: &ApiServer, req: &Request) -> ApiResult<()> {
    let Some(identity) = req.extensions().get::<Identity>() else {
        return Err(ApiError::internal("authorization before authentication"));
    };
    let attrs = super::request_info::RequestInfo::of(req, identity.user.as_ref().clone());
    let decision = s.authorize(&attrs);
    crate::audit::record_decision(&decision);
    s.metrics.authorization(&decision);
    if decision.allowed() {
        Ok(())
    } else {
        tracing::debug!(user = %attrs.user.username, verb = %attrs.verb, resource = %attrs.resource, path = %attrs.path, reason = %decision.reason(), "forbidden");
        Err(forbidden(&attrs, decision.reason()))
    }
}

pub(crate) fn forbidden(attrs: &Attributes, reason: &str) -> ApiError {
    let user = &attrs.user.username;
    let what = if !attrs.resource_request {
        format!("User {user:?} cannot {} path {:?}", attrs.verb, attrs.path)
    } else {
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        if attrs.namespace.is_empty() {
            format!(
                "User {user:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
                attrs.verb, attrs.api_group
            )
        } else {
            format!(
                "User {user:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
                attrs.verb, attrs.api_group, attrs.namespace
            )
        }
    };
    let why = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    if attrs.resource_request {
        ApiError::forbidden_for(&attrs.api_group, &attrs.resource, &attrs.name, &why)
    } else {
        ApiError::forbidden_for("", "", "", &why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use authz::UserInfo;

    #[test]
    fn messages_are_upstreams() {
        let attrs = Attributes {
            user: UserInfo::new("alice", &[]),
            verb: "list".into(),
            resource_request: true,
            resource: "secrets".into(),
            namespace: "b".into(),
            ..Default::default()
        };
        assert_eq!(
            forbidden(&attrs, "").message,
            r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "b""#
        );
        let attrs = Attributes {
            user: UserInfo::new("system:anonymous", &[]),
            verb: "get".into(),
            path: "/api".into(),
            ..Default::default()
        };
        assert_eq!(
            forbidden(&attrs, "").message,
            r#"forbidden: User "system:anonymous" cannot get path "/api""#
        );
        let attrs = Attributes {
            user: UserInfo::new("bob", &[]),
            verb: "get".into(),
            resource_request: true,
            api_group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            name: "web".into(),
            ..Default::default()
        };
        assert_eq!(
            forbidden(&attrs, "").message,
            r#"deployments.apps "web" is forbidden: User "bob" cannot get resource "deployments/scale" in API group "apps" at the cluster scope"#
        );
    }
}
