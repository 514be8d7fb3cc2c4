//! `Impersonate-*` headers: a user allowed to `impersonate` acts as another, as upstream's
//! `WithImpersonation` does. Every part asked for (the user or ServiceAccount, each group, the
//! uid, each extra value) is authorized on its own; the headers are removed once honoured.

use crate::{context::Identity, error::ApiError, state::ApiServer};
use authz::{Attributes, UserInfo};
use axum::{
    extract::Request,
    http::HeaderMap,
    response::{IntoResponse, Response},
};
use std::sync::Arc;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// The impersonation step: a request that asks to impersonate leaves it as the user it acts as (its
/// headers removed), or is answered here.
pub(crate) fn apply(s: &ApiServer, req: &mut Request) -> Result<(), Box<Response>> {
    let headers = req.headers();
    let asked = headers.keys().any(|k| {
        let k = k.as_str();
        k == USER || k == GROUP || k == UID || k.starts_with(EXTRA)
    });
    if !asked {
        return Ok(());
    }
    let Some(identity) = req.extensions().get::<Identity>().cloned() else {
        return Err(Box::new(
            ApiError::internal("impersonation before authentication").into_response(),
        ));
    };
    match s.impersonated(&identity.user, headers) {
        Ok(user) => {
            let headers = req.headers_mut();
            let names: Vec<_> = headers
                .keys()
                .filter(|k| k.as_str().starts_with("impersonate-"))
                .cloned()
                .collect();
            for name in names {
                headers.remove(name);
            }
            req.extensions_mut().insert(Identity {
                user: Arc::new(user),
                impersonator: Some(identity.user),
            });
            Ok(())
        }
        Err(Refused::Forbidden(e)) => Err(Box::new(e.into_response())),
        Err(Refused::Malformed(why)) => Err(Box::new(internal_error(req.uri(), &why))),
    }
}

/// Why impersonation was not honoured.
enum Refused {
    /// A part of it is not allowed: upstream's Forbidden.
    Forbidden(ApiError),
    /// The headers ask for nothing that can be honoured (groups without a user).
    Malformed(String),
}

impl From<ApiError> for Refused {
    fn from(e: ApiError) -> Self {
        Refused::Forbidden(e)
    }
}

/// Upstream's `responsewriters.InternalError`, which its impersonation filter answers malformed
/// headers with: a plain-text 500 naming the request URI.
fn internal_error(uri: &http::Uri, why: &str) -> Response {
    let uri = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let text = format!("Internal Server Error: {}: {why}", go_quote(uri))
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let mut r = (
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("{text}\n"),
    )
        .into_response();
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        axum::http::HeaderValue::from_static("nosniff"),
    );
    r
}

/// Go's `%q` of a string (a JSON string is the same for what a URI holds).
fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

impl ApiServer {
    /// The user `impersonator` asks to act as, if every part of it is allowed.
    fn impersonated(
        &self,
        impersonator: &Arc<UserInfo>,
        headers: &HeaderMap,
    ) -> Result<UserInfo, Refused> {
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect()
        };
        let groups = values(GROUP);
        let uid = values(UID).into_iter().next();
        let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
        for name in headers.keys().filter(|k| k.as_str().starts_with(EXTRA)) {
            let key = percent_encoding::percent_decode_str(&name.as_str()[EXTRA.len()..])
                .decode_utf8_lossy()
                .into_owned();
            extra.entry(key).or_default().extend(values(name.as_str()));
        }
        let Some(username) = values(USER).into_iter().next() else {
            return Err(Refused::Malformed(format!(
                "requested {} without impersonating a user",
                describe(&groups, uid.as_deref(), &extra)
            )));
        };
        let mut checks = Vec::new();
        let service_account = service_account_of(&username);
        match service_account {
            Some((ns, name)) => {
                checks.push(("", "serviceaccounts", "", ns.to_string(), name.to_string()))
            }
            None => checks.push(("", "users", "", String::new(), username.clone())),
        }
        for g in &groups {
            checks.push(("", "groups", "", String::new(), g.clone()));
        }
        if let Some(uid) = &uid {
            checks.push((
                "authentication.k8s.io",
                "uids",
                "",
                String::new(),
                uid.clone(),
            ));
        }
        for (key, vals) in &extra {
            for v in vals {
                checks.push((
                    "authentication.k8s.io",
                    "userextras",
                    key.as_str(),
                    String::new(),
                    v.clone(),
                ));
            }
        }
        for (group, resource, subresource, namespace, name) in checks {
            let attrs = Attributes {
                user: impersonator.as_ref().clone(),
                verb: "impersonate".into(),
                resource_request: true,
                api_group: group.into(),
                resource: resource.into(),
                subresource: subresource.into(),
                namespace,
                name,
                ..Default::default()
            };
            let decision = self.authorize(&attrs);
            if !decision.allowed() {
                return Err(super::authorization::forbidden(&attrs, decision.reason()).into());
            }
        }
        let mut groups = groups;
        if let Some((ns, _)) = service_account
            && groups.is_empty()
        {
            groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
        // Upstream adds the groups every such user has: authenticated, unless anonymous.
        if username == authz::ANONYMOUS_USER {
            if !groups.iter().any(|g| g == authz::UNAUTHENTICATED_GROUP) {
                groups.push(authz::UNAUTHENTICATED_GROUP.into());
            }
        } else if !groups.iter().any(|g| g == authz::AUTHENTICATED_GROUP) {
            groups.push(authz::AUTHENTICATED_GROUP.into());
        }
        Ok(UserInfo {
            username,
            uid: uid.unwrap_or_default(),
            groups,
            extra,
        })
    }
}

/// The namespace and name of a ServiceAccount username, as upstream's `SplitUsername` reads it:
/// exactly `system:serviceaccount:NAMESPACE:NAME` with a valid namespace (a DNS label) and name
/// (a DNS subdomain). Anything else (`system:serviceaccount:a:adm:x`) is a plain user's name, so
/// impersonating it needs `impersonate users`, not `impersonate serviceaccounts` in `a`.
fn service_account_of(username: &str) -> Option<(&str, &str)> {
    let (namespace, name) = satoken::split_username(username)?;
    let label = namespace.len() <= 63
        && !namespace.contains('.')
        && api::validation::dns1123_subdomain(namespace).is_empty();
    (label && api::validation::dns1123_subdomain(name).is_empty()).then_some((namespace, name))
}

fn describe(
    groups: &[String],
    uid: Option<&str>,
    extra: &std::collections::BTreeMap<String, Vec<String>>,
) -> String {
    // Go's `%v` of upstream's `[]ObjectReference` (Kind Namespace Name UID APIVersion
    // ResourceVersion FieldPath): groups, then extras, then the uid, in upstream's order.
    const VERSION: &str = "authentication.k8s.io/v1";
    let reference = |kind: &str, name: &str, version: &str, field: &str| {
        format!("{{{kind}  {name}  {version}  {field}}}")
    };
    let mut parts: Vec<String> = groups
        .iter()
        .map(|g| reference("Group", g, "", ""))
        .collect();
    for (k, vs) in extra {
        parts.extend(vs.iter().map(|v| reference("UserExtra", v, VERSION, k)));
    }
    if let Some(uid) = uid {
        parts.push(reference("UID", uid, VERSION, ""));
    }
    format!("[{}]", parts.join(" "))
}
