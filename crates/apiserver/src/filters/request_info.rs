//! What a request asks, read from its method and URL alone as upstream's `RequestInfoFactory`
//! reads it (`endpoints/request/requestinfo.go`), in the form authorizers and the audit policy
//! take ([`Attributes`], upstream's `GetAuthorizerAttributes`).
//!
//! Not [`crate::request::parse_path`]: that finds the served kind a path routes to, while upstream
//! audits and authorizes a request before routing, so a resource nobody serves, a legacy
//! `/watch/` path or a named watch are described as the client asked (a `get` with `?watch` on a
//! named object stays `get`; `fieldSelector=metadata.name=x` names the object of a list).

use std::sync::Arc;

use crate::request::Params;
use authz::{Attributes, UserInfo};
use axum::{
    extract::Request,
    http::{Method, Uri},
};

/// Upstream's `specialVerbs`: path segments that are verbs (`/api/v1/watch/pods`).
const SPECIAL_VERBS: [&str; 2] = ["proxy", "watch"];

/// Upstream's `namespaceSubresources`: `/namespaces/{name}/status` is the namespace's own.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// The request's attributes without a user, parsed once by the chain's first step
/// ([`insert`]) and read by every layer after it (audit, authorization), as upstream's
/// `WithRequestInfo` puts `RequestInfo` in the request's context.
#[derive(Clone, Debug)]
pub(crate) struct RequestInfo(Arc<Attributes>);

impl RequestInfo {
    /// The attributes with `user` asking: parsed by [`insert`] for this request, or, for a
    /// request that did not pass that layer, parsed now.
    pub(crate) fn of(req: &Request, user: UserInfo) -> Attributes {
        match req.extensions().get::<RequestInfo>() {
            Some(info) => Attributes {
                user,
                ..(*info.0).clone()
            },
            None => attributes(req.method(), req.uri(), user),
        }
    }
}

/// The chain's first step: parses the request's attributes once, into its extensions.
pub(crate) fn insert(req: &mut Request) {
    let info = RequestInfo(Arc::new(attributes(
        req.method(),
        req.uri(),
        UserInfo::default(),
    )));
    req.extensions_mut().insert(info);
}

/// The request's attributes, `user` asking.
pub(crate) fn attributes(method: &Method, uri: &Uri, user: UserInfo) -> Attributes {
    let path = uri.path();
    let mut attrs = Attributes {
        user,
        verb: method.as_str().to_ascii_lowercase(),
        path: path.to_string(),
        ..Default::default()
    };
    let trimmed = path.trim_matches('/');
    let parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    // `/api/{version}/{resource}...` or `/apis/{group}/{version}/{resource}...`; anything shorter
    // or elsewhere is a non-resource request.
    let mut rest = match parts.as_slice() {
        ["api", rest @ ..] if rest.len() >= 2 => rest,
        ["apis", group, rest @ ..] if rest.len() >= 2 => {
            attrs.api_group = group.to_string();
            rest
        }
        _ => return attrs,
    };
    attrs.resource_request = true;
    attrs.api_version = rest[0].to_string();
    rest = &rest[1..];
    if SPECIAL_VERBS.contains(&rest[0]) {
        if rest.len() < 2 {
            // Upstream errors here and its filters answer 500; nothing is asked of a resource.
            attrs.resource_request = false;
            return attrs;
        }
        attrs.verb = rest[0].to_string();
        rest = &rest[1..];
    } else {
        attrs.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string();
    }
    if rest[0] == "namespaces" && rest.len() > 1 {
        attrs.namespace = rest[1].to_string();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    attrs.resource = rest[0].to_string();
    if let Some(name) = rest.get(1) {
        attrs.name = name.to_string();
    }
    if let Some(sub) = rest.get(2)
        && attrs.verb != "proxy"
    {
        attrs.subresource = sub.to_string();
    }
    if attrs.name.is_empty() && attrs.verb == "get" {
        let params = Params::parse(uri.query()).unwrap_or_else(|_| {
            // Upstream falls back to reading `watch` alone when the options do not decode.
            Params::parse(uri.query().map(watch_only).as_deref()).unwrap_or_default()
        });
        attrs.verb = if params.is_watch() { "watch" } else { "list" }.to_string();
        if let Some(name) = params
            .field_selector
            .as_deref()
            .and_then(|s| api::selector::FieldSelector::parse(s).ok())
            .and_then(|sel| sel.exact("metadata.name").map(str::to_string))
            .filter(|n| is_path_segment(n))
        {
            attrs.name = name;
        }
    }
    if attrs.name.is_empty() && attrs.verb == "delete" {
        attrs.verb = "deletecollection".to_string();
    }
    attrs
}

/// The `watch=...` pair of a query, alone.
fn watch_only(query: &str) -> String {
    query
        .split('&')
        .find(|p| p.split('=').next() == Some("watch"))
        .unwrap_or("")
        .to_string()
}

/// Upstream's `IsValidPathSegmentName`.
fn is_path_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(
        method: Method,
        uri: &str,
    ) -> (String, bool, String, String, String, String, String, String) {
        let a = attributes(&method, &uri.parse().unwrap(), UserInfo::anonymous());
        (
            a.verb,
            a.resource_request,
            a.api_group,
            a.api_version,
            a.namespace,
            a.resource,
            a.name,
            a.subresource,
        )
    }

    /// Upstream's `TestGetAPIRequestInfo` cases.
    #[test]
    fn reads_requests_as_upstreams_request_info() {
        let cases: &[(Method, &str, [&str; 7])] = &[
            (
                Method::GET,
                "/api/v1/namespaces",
                ["list", "", "v1", "", "namespaces", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other",
                ["get", "", "v1", "other", "namespaces", "other", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods",
                ["list", "", "v1", "other", "pods", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo",
                ["get", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::HEAD,
                "/api/v1/namespaces/other/pods/foo",
                ["get", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::GET,
                "/api/v1/pods",
                ["list", "", "v1", "", "pods", "", ""],
            ),
            (
                Method::HEAD,
                "/api/v1/pods",
                ["list", "", "v1", "", "pods", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo",
                ["get", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods",
                ["list", "", "v1", "other", "pods", "", ""],
            ),
            // A special verb in the path.
            (
                Method::GET,
                "/api/v1/proxy/namespaces/other/pods/foo",
                ["proxy", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::GET,
                "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource",
                ["proxy", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::GET,
                "/api/v1/watch/pods",
                ["watch", "", "v1", "", "pods", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=true",
                ["watch", "", "v1", "", "pods", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=false",
                ["list", "", "v1", "", "pods", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/other/pods",
                ["watch", "", "v1", "other", "pods", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods?watch=1",
                ["watch", "", "v1", "other", "pods", "", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods?watch=0",
                ["list", "", "v1", "other", "pods", "", ""],
            ),
            // Subresources.
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo/status",
                ["get", "", "v1", "other", "pods", "foo", "status"],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo/proxy/subpath",
                ["get", "", "v1", "other", "pods", "foo", "proxy"],
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/other/finalize",
                [
                    "update",
                    "",
                    "v1",
                    "other",
                    "namespaces",
                    "other",
                    "finalize",
                ],
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/other/status",
                ["update", "", "v1", "other", "namespaces", "other", "status"],
            ),
            // Verbs by method.
            (
                Method::POST,
                "/api/v1/namespaces/other/pods",
                ["create", "", "v1", "other", "pods", "", ""],
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/other/pods/foo",
                ["update", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/other/pods/foo",
                ["patch", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/other/pods/foo",
                ["delete", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/other/pods",
                ["deletecollection", "", "v1", "other", "pods", "", ""],
            ),
            // Groups.
            (
                Method::GET,
                "/apis/extensions/v1beta1/namespaces/other/pods",
                ["list", "extensions", "v1beta1", "other", "pods", "", ""],
            ),
            (
                Method::GET,
                "/apis/extensions/v1beta1/namespaces/other/pods/foo",
                ["get", "extensions", "v1beta1", "other", "pods", "foo", ""],
            ),
            // Named by the field selector.
            (
                Method::GET,
                "/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3Dfoo&watch=true",
                ["watch", "", "v1", "other", "pods", "foo", ""],
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3D..",
                ["list", "", "v1", "other", "pods", "", ""],
            ),
            // A named watch stays a get.
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo?watch=true",
                ["get", "", "v1", "other", "pods", "foo", ""],
            ),
        ];
        for (method, uri, want) in cases {
            let (verb, resource_request, group, version, ns, res, name, sub) =
                info(method.clone(), uri);
            assert!(resource_request, "{method} {uri}");
            assert_eq!(
                [verb.as_str(), &group, &version, &ns, &res, &name, &sub],
                *want,
                "{method} {uri}"
            );
        }
    }

    /// Upstream's `TestGetNonAPIRequestInfo` cases.
    #[test]
    fn other_paths_are_non_resource_requests() {
        for (uri, resource_request) in [
            ("/api", false),
            ("/api/v1", false),
            ("/apis", false),
            ("/apis/extensions", false),
            ("/apis/extensions/v1beta1", false),
            ("/apis/extensions/v1beta1/pods", true),
            ("/api/v1/pods", true),
            ("/healthz", false),
            ("/", false),
            ("/other", false),
            ("/api/v1/watch", false),
        ] {
            let a = attributes(&Method::GET, &uri.parse().unwrap(), UserInfo::anonymous());
            assert_eq!(a.resource_request, resource_request, "{uri}");
            if !resource_request {
                assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", uri));
            }
        }
    }
}
