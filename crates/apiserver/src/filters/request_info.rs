//! What a request asks for, read from its method and URL alone, as upstream's
//! `RequestInfoFactory` reads it: before the registry is consulted, so that a request for a
//! resource the server lacks is authorized (and refused) like any other.

use authz::{Attributes, UserInfo};
use http::Method;

/// The authorization attributes of a request by `user`.
pub(crate) fn attributes(
    method: &Method,
    path: &str,
    query: Option<&str>,
    user: &UserInfo,
) -> Attributes {
    let non_resource = || Attributes {
        user: user.clone(),
        verb: method.as_str().to_ascii_lowercase(),
        resource_request: false,
        path: path.to_string(),
        ..Default::default()
    };
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let (group, rest) = match parts.as_slice() {
        ["api", rest @ ..] if rest.len() >= 2 => ("", rest),
        ["apis", group, rest @ ..] if rest.len() >= 2 => (*group, rest),
        _ => return non_resource(),
    };
    let (version, mut rest) = (rest[0], &rest[1..]);
    let mut verb = match rest {
        // `/watch/...` and `/proxy/...` name their verb in the path.
        [special @ ("watch" | "proxy"), more @ ..] if !more.is_empty() => {
            rest = more;
            special.to_string()
        }
        [] => return non_resource(),
        _ => match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string(),
    };
    let mut namespace = "";
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = rest[1];
        // `/namespaces/{ns}/{resource}...`; `/namespaces/{ns}[/status|/finalize]` is the
        // namespace object itself (whose namespace is its own name).
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    let resource = rest.first().copied().unwrap_or_default();
    let mut name = rest.get(1).copied().unwrap_or_default().to_string();
    let subresource = if verb == "proxy" {
        ""
    } else {
        rest.get(2).copied().unwrap_or_default()
    };
    if name.is_empty() && verb == "get" {
        let pairs = || form_urlencoded(query);
        let watch = pairs()
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0" | ""));
        verb = if watch { "watch" } else { "list" }.to_string();
        // A list of one name (`fieldSelector=metadata.name=x`) is authorized as that name.
        if let Some((_, selector)) = pairs().find(|(k, _)| k == "fieldSelector")
            && let Some(only) = exact_name(&selector)
        {
            name = only;
        }
    }
    if name.is_empty() && verb == "delete" {
        verb = "deletecollection".to_string();
    }
    Attributes {
        user: user.clone(),
        verb,
        resource_request: true,
        api_group: group.to_string(),
        api_version: version.to_string(),
        resource: resource.to_string(),
        subresource: subresource.to_string(),
        namespace: namespace.to_string(),
        name,
        path: path.to_string(),
    }
}

fn form_urlencoded(query: Option<&str>) -> impl Iterator<Item = (String, String)> + '_ {
    query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(k), decode(v))
        })
}

/// The name a field selector requires exactly (`metadata.name=x` or `metadata.name==x`, alone
/// or with other terms), if it is a valid path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        let valid =
            !value.is_empty() && value != "." && value != ".." && !value.contains(['/', '%']);
        valid.then(|| value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, uri: &str) -> Attributes {
        let (path, query) = uri
            .split_once('?')
            .map_or((uri, None), |(p, q)| (p, Some(q)));
        attributes(&method, path, query, &UserInfo::anonymous())
    }

    /// Cases from upstream's `requestinfo_test.go`.
    #[test]
    fn reads_requests_as_upstream() {
        let cases: &[(Method, &str, &str, &str, &str, &str, &str, &str)] = &[
            // method, uri, verb, group, namespace, resource, name, subresource
            (
                Method::GET,
                "/api/v1/namespaces",
                "list",
                "",
                "",
                "namespaces",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other",
                "get",
                "",
                "other",
                "namespaces",
                "other",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo",
                "get",
                "",
                "other",
                "pods",
                "foo",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods",
                "list",
                "",
                "other",
                "pods",
                "",
                "",
            ),
            (Method::GET, "/api/v1/pods", "list", "", "", "pods", "", ""),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods?watch=true",
                "watch",
                "",
                "other",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/other/pods",
                "watch",
                "",
                "other",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/other/pods/foo/log",
                "get",
                "",
                "other",
                "pods",
                "foo",
                "log",
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/other/finalize",
                "update",
                "",
                "other",
                "namespaces",
                "other",
                "finalize",
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/other/status",
                "update",
                "",
                "other",
                "namespaces",
                "other",
                "status",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/other/pods",
                "create",
                "",
                "other",
                "pods",
                "",
                "",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/other/pods",
                "deletecollection",
                "",
                "other",
                "pods",
                "",
                "",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/other/pods/foo",
                "delete",
                "",
                "other",
                "pods",
                "foo",
                "",
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                "patch",
                "apps",
                "a",
                "deployments",
                "d",
                "scale",
            ),
            (
                Method::GET,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "list",
                "rbac.authorization.k8s.io",
                "",
                "clusterroles",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dfoo",
                "list",
                "",
                "a",
                "pods",
                "foo",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dfoo%2Fbar",
                "list",
                "",
                "a",
                "pods",
                "",
                "",
            ),
        ];
        for (method, uri, verb, group, ns, resource, name, sub) in cases {
            let a = attrs(method.clone(), uri);
            assert!(a.resource_request, "{uri}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.api_group.as_str(),
                    a.namespace.as_str(),
                    a.resource.as_str(),
                    a.name.as_str(),
                    a.subresource.as_str()
                ),
                (*verb, *group, *ns, *resource, *name, *sub),
                "{method} {uri}"
            );
        }
    }

    #[test]
    fn discovery_and_health_are_not_resources() {
        for uri in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
            "/version",
            "/openapi/v2",
        ] {
            let a = attrs(Method::GET, uri);
            assert!(!a.resource_request, "{uri}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", uri));
        }
    }
}
