//! Requests for a remote APIService's group/version, passed to its Service as upstream's
//! `proxyHandler` (`pkg/apiserver/handler_proxy.go`) passes them: after this server authenticated
//! and authorized them, to an endpoint of the Service over HTTPS (the certificate checked for
//! `NAME.NAMESPACE.svc` against `caBundle`, or not at all with `insecureSkipTLSVerify`), with the
//! caller's credentials removed and the user in the front-proxy headers the backend trusts
//! (`X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-*`). An APIService that is not available
//! is answered with upstream's plain `503 service unavailable`.

use std::time::Duration;

use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::ApiService;
use crate::{context::Identity, outbound, state::ApiServer};

/// The front-proxy headers (upstream's `--requestheader-*-headers` defaults, `X-Remote-User`,
/// `X-Remote-Group`, `X-Remote-Extra-`), as HTTP/2 writes them.
pub(crate) const USER_HEADER: &str = "x-remote-user";
pub(crate) const GROUP_HEADER: &str = "x-remote-group";
const EXTRA_PREFIX: &str = "x-remote-extra-";

/// How long a discovery request (`/apis/GROUP/VERSION`) may take to answer (upstream's
/// `aggregatedDiscoveryTimeout`), and any other request to start answering.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Headers that belong to one connection, never passed on (Go's `httputil.ReverseProxy`).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// What Go's `url.PathEscape`-style encoding of an extra's key leaves as is.
const EXTRA_KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The remote APIService that serves `path`, if one does.
fn remote_for(server: &ApiServer, path: &str) -> Option<ApiService> {
    let rest = path.strip_prefix("/apis/")?;
    let mut parts = rest.splitn(3, '/');
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    let def = super::kind(server)?;
    let entry = server
        .cache
        .get(&def, None, &format!("{version}.{group}"))?;
    // Every request of a built-in group passes here: a local APIService (stored compactly, its
    // `spec.service` absent or null) is told by its bytes, without parsing it.
    let remote = entry
        .json
        .windows(SERVICE_OBJECT.len())
        .any(|w| w == SERVICE_OBJECT);
    if !remote {
        return None;
    }
    let api = ApiService::parse(&entry.value());
    api.service.is_some().then_some(api)
}

/// How a stored remote APIService's `spec.service` begins.
const SERVICE_OBJECT: &[u8] = b"\"service\":{";

/// The layer: requests of a remote APIService are proxied, all others go on.
pub(crate) async fn route(State(server): State<ApiServer>, req: Request, next: Next) -> Response {
    match remote_for(&server, req.uri().path()) {
        Some(api) => proxy(&server, &api, req).await,
        None => next.run(req).await,
    }
}

/// Go's `http.Error`: a plain-text answer.
fn plain(code: StatusCode, text: &str) -> Response {
    let mut r = (code, format!("{text}\n")).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// The request's headers as the backend gets them: no connection headers, no credentials or
/// impersonation, and the user in the front-proxy headers.
fn forwarded_headers(incoming: &HeaderMap, user: &authz::UserInfo) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in incoming {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || n == "authorization"
            || n.starts_with("impersonate-")
            || n.starts_with("x-remote-")
            || n == "host"
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    if let Ok(v) = HeaderValue::from_str(&user.username) {
        out.insert(USER_HEADER, v);
    }
    for group in &user.groups {
        if let Ok(v) = HeaderValue::from_str(group) {
            out.append(GROUP_HEADER, v);
        }
    }
    for (key, values) in &user.extra {
        let name = format!("{EXTRA_PREFIX}{}", utf8_percent_encode(key, EXTRA_KEY));
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        for value in values {
            if let Ok(v) = HeaderValue::from_str(value) {
                out.append(name.clone(), v);
            }
        }
    }
    out
}

async fn proxy(server: &ApiServer, api: &ApiService, req: Request) -> Response {
    if !api.available {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
    }
    let Some(svc) = &api.service else {
        return plain(StatusCode::NOT_FOUND, "");
    };
    let Some(user) = req.extensions().get::<Identity>().map(|i| i.user.clone()) else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "missing user");
    };
    let Ok(addr) = outbound::resolve_endpoint(server, &svc.namespace, &svc.name, svc.port) else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
    };
    let (parts, body) = req.into_parts();
    let discovery = parts.uri.path().trim_matches('/').split('/').count() == 3;
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_string(), ToString::to_string);
    let mut headers = forwarded_headers(&parts.headers, &user);
    if let Ok(host) = HeaderValue::from_str(&addr.to_string()) {
        headers.insert(header::HOST, host);
    }
    let trust = if api.insecure {
        outbound::Trust::Anything
    } else {
        outbound::Trust::Bundle(&api.ca_bundle)
    };
    let server_name = format!("{}.{}.svc", svc.name, svc.namespace);
    let exchange = async {
        let config = outbound::tls_config(trust)?;
        let mut sender =
            outbound::connect(server, &[addr], &addr.to_string(), &server_name, config).await?;
        let mut request = http::Request::new(body);
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = path_and_query
            .parse()
            .map_err(|e: http::uri::InvalidUri| e.to_string())?;
        *request.headers_mut() = headers;
        sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())
    };
    let limit = if discovery {
        DISCOVERY_TIMEOUT
    } else {
        REQUEST_TIMEOUT
    };
    let answer = match tokio::time::timeout(limit, exchange).await {
        Ok(Ok(answer)) => answer,
        // Upstream's proxy answers a failed round trip with the error, as 503.
        Ok(Err(why)) => return plain(StatusCode::SERVICE_UNAVAILABLE, &why),
        Err(_) => return plain(StatusCode::SERVICE_UNAVAILABLE, "context deadline exceeded"),
    };
    let (mut head, body) = answer.into_parts();
    for name in HOP_BY_HOP {
        head.headers.remove(*name);
    }
    Response::from_parts(head, Body::new(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_replaced_by_the_front_proxy_headers() {
        let mut incoming = HeaderMap::new();
        incoming.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer secret"),
        );
        incoming.insert("impersonate-user", HeaderValue::from_static("bob"));
        incoming.insert("x-remote-user", HeaderValue::from_static("mallory"));
        incoming.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
        incoming.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let mut user = authz::UserInfo::new("alice", &["devs", "system:authenticated"]);
        user.extra.insert(
            "scopes.example.com/Key".into(),
            vec!["a".into(), "b".into()],
        );
        let out = forwarded_headers(&incoming, &user);
        assert!(out.get(header::AUTHORIZATION).is_none());
        assert!(out.get("impersonate-user").is_none());
        assert!(out.get(header::CONNECTION).is_none());
        assert_eq!(out.get(header::ACCEPT).unwrap(), "application/json");
        assert_eq!(
            out.get_all(USER_HEADER).iter().collect::<Vec<_>>(),
            ["alice"]
        );
        assert_eq!(
            out.get_all(GROUP_HEADER).iter().collect::<Vec<_>>(),
            ["devs", "system:authenticated"]
        );
        assert_eq!(
            out.get_all("x-remote-extra-scopes.example.com%2fkey")
                .iter()
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
    }
}
