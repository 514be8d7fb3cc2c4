//! One call of a webhook: the AdmissionReview POSTed over HTTPS to `clientConfig.url`, or to
//! a ready endpoint of `clientConfig.service` with the certificate checked for
//! `NAME.NAMESPACE.svc` (upstream's `util/webhook/client.go` with the endpoint service resolver,
//! `util/proxy.ResolveEndpoint`), trusting only `caBundle`, within `timeoutSeconds`.
//!
//! Errors read as Go's `url.Error` of the POST (`Post "URL?timeout=10s": ...`), the way upstream's
//! messages quote them.
//!
//! Each call opens its own connection through tokio-rustls and hyper's HTTP/1.1 connection API:
//! the address dialled (an endpoint's IP) differs from the name verified (the Service's DNS
//! name), which the pooled clients only offer through a custom resolver; webhook calls are rare
//! enough that the pool would buy little.

use std::{net::SocketAddr, time::Duration};

use axum::body::Body;
use bytes::Bytes;
use http::{Request, header};
use serde_json::Value;

use super::config::{Hook, ServiceRef};
use crate::{outbound, state::ApiServer};

/// The largest answer read from a webhook.
const MAX_ANSWER: usize = 32 << 20;

/// A failed POST, worded as Go's `url.Error`.
#[derive(Debug, thiserror::Error)]
#[error("Post \"{url}\": {why}")]
pub(super) struct CallError {
    url: String,
    why: String,
}

/// Where a call goes.
struct Target {
    /// The URL as messages show it (with `?timeout=`).
    shown: String,
    /// `host[:port]` for the `Host` header.
    authority: String,
    /// The path and query sent.
    path_and_query: String,
    /// The name the certificate must be valid for.
    server_name: String,
    /// What is dialled: a host name or IP, and a port.
    dial: Dial,
}

enum Dial {
    /// A host (name or IP) and port from a URL, resolved by the system.
    Host(String, u16),
    /// A Service, resolved through its Endpoints when the call is made.
    Service(ServiceRef, u16),
}

/// Go's `time.Duration` text of whole seconds (`10s`, `1m30s`).
fn go_seconds(secs: u64) -> String {
    match (secs / 3600, secs / 60 % 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// The path as upstream's REST client joins it: always absolute, `/` when empty.
fn rooted(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

fn target(hook: &Hook) -> Result<Target, CallError> {
    // Upstream's client rounds the remaining time up to whole seconds for `?timeout=`.
    let timeout = go_seconds(hook.timeout.as_secs() + u64::from(hook.timeout.subsec_nanos() > 0));
    if let Some(svc) = &hook.client.service {
        let port = u16::try_from(svc.port.unwrap_or(443)).unwrap_or(443);
        let server_name = format!("{}.{}.svc", svc.name, svc.namespace);
        let authority = format!("{server_name}:{port}");
        let path_and_query = format!(
            "{}?timeout={timeout}",
            rooted(svc.path.as_deref().unwrap_or_default())
        );
        return Ok(Target {
            shown: format!("https://{authority}{path_and_query}"),
            authority,
            path_and_query,
            server_name,
            dial: Dial::Service(svc.clone(), port),
        });
    }
    let url = hook.client.url.clone().unwrap_or_default();
    let fail = |why: String| CallError {
        url: url.clone(),
        why,
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| fail(e.to_string()))?;
    if uri.scheme_str() != Some("https") {
        return Err(fail(format!(
            "unsupported protocol scheme {:?}",
            uri.scheme_str().unwrap_or_default()
        )));
    }
    let Some(authority) = uri.authority() else {
        return Err(fail("no Host in request URL".into()));
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = authority.port_u16().unwrap_or(443);
    let path_and_query = format!("{}?timeout={timeout}", rooted(uri.path()));
    Ok(Target {
        shown: format!("https://{authority}{path_and_query}"),
        authority: authority.to_string(),
        path_and_query,
        server_name: host.clone(),
        dial: Dial::Host(host, port),
    })
}

async fn exchange(
    server: &ApiServer,
    hook: &Hook,
    t: &Target,
    body: Bytes,
) -> Result<Bytes, String> {
    let (addrs, shown_addr): (Vec<SocketAddr>, String) = match &t.dial {
        Dial::Host(host, port) => {
            let shown = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            let addrs = tokio::net::lookup_host((host.as_str(), *port))
                .await
                .map_err(|e| format!("dial tcp: lookup {host}: {e}"))?
                .collect();
            (addrs, shown)
        }
        Dial::Service(svc, port) => {
            let addr = outbound::resolve_endpoint(server, &svc.namespace, &svc.name, *port)?;
            (vec![addr], addr.to_string())
        }
    };
    let config = outbound::tls_config(outbound::Trust::Bundle(&hook.client.ca_pem()))?;
    let mut sender = outbound::connect(server, &addrs, &shown_addr, &t.server_name, config).await?;
    let request = Request::post(t.path_and_query.as_str())
        .header(header::HOST, t.authority.as_str())
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, */*")
        .body(Body::from(body))
        .map_err(|e| e.to_string())?;
    let result = async {
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = axum::body::to_bytes(Body::new(response.into_body()), MAX_ANSWER)
            .await
            .map_err(|e| e.to_string())?;
        if status.is_success() {
            return Ok(bytes);
        }
        // Upstream's REST client passes on a Status answer's message, and words any other
        // answer by its code.
        let message = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| {
            (v["kind"] == "Status")
                .then(|| v["message"].as_str().map(str::to_string))
                .flatten()
        });
        if let Some(message) = message {
            return Err(message);
        }
        Err(match status.as_u16() {
            404 => "the server could not find the requested resource".to_string(),
            code if code >= 500 => format!(
                "an error on the server ({:?}) has prevented the request from succeeding",
                String::from_utf8_lossy(&bytes)
            ),
            code => format!(
                "the server responded with the status code {code} but did not return more information"
            ),
        })
    }
    .await;
    drop(sender);
    result
}

/// POSTs `body` (an AdmissionReview) to the webhook and returns the answer's bytes, within the
/// webhook's timeout.
pub(super) async fn post(
    server: &ApiServer,
    hook: &Hook,
    body: Vec<u8>,
) -> Result<Bytes, CallError> {
    let t = target(hook)?;
    let deadline: Duration = hook.timeout;
    match tokio::time::timeout(deadline, exchange(server, hook, &t, Bytes::from(body))).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(why)) => Err(CallError { url: t.shown, why }),
        Err(_) => Err(CallError {
            url: t.shown,
            why: "context deadline exceeded".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::config::hooks_of;
    use serde_json::json;

    fn hook(client: Value, timeout: u64) -> Hook {
        hooks_of(&json!({"metadata": {"name": "c"}, "webhooks": [
            {"name": "h", "clientConfig": client, "timeoutSeconds": timeout}]}))
        .remove(0)
    }

    #[test]
    fn urls_are_shown_as_upstreams_client_builds_them() {
        let t = target(&hook(json!({"url": "https://127.0.0.1:8443/mutate"}), 10)).unwrap();
        assert_eq!(t.shown, "https://127.0.0.1:8443/mutate?timeout=10s");
        assert_eq!(t.server_name, "127.0.0.1");
        let t = target(&hook(
            json!({"service": {"namespace": "ns", "name": "svc", "path": "/validate"}}),
            1,
        ))
        .unwrap();
        assert_eq!(t.shown, "https://svc.ns.svc:443/validate?timeout=1s");
        assert_eq!(t.server_name, "svc.ns.svc");
        let t = target(&hook(
            json!({"service": {"namespace": "ns", "name": "svc", "port": 8443}}),
            90,
        ))
        .unwrap();
        assert_eq!(t.shown, "https://svc.ns.svc:8443/?timeout=1m30s");
        let e = target(&hook(json!({"url": "http://127.0.0.1/"}), 10))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "Post \"http://127.0.0.1/\": unsupported protocol scheme \"http\""
        );
    }
}
