//! The server's in-flight limits. As upstream with API Priority and Fairness on (its default),
//! the read-only and mutating limits (`--max-requests-inflight` 400,
//! `--max-mutating-requests-inflight` 200) are added up into the seats the priority levels share
//! ([`crate::flowcontrol`]), which limits and queues reads and writes per level and flow. What
//! this filter still does is count requests by kind and cap open watches: a watch holds a seat
//! only while it starts, and each open one holds memory for as long as it lives.

use crate::{error::ApiError, metrics::Metrics, request::Params};
use axum::{
    extract::Request,
    http::{HeaderValue, Method, header},
    response::{IntoResponse, Response},
};
use std::{sync::Arc, time::Duration};
use tokio::sync::Semaphore;

/// How many requests of each kind are served at once.
#[derive(Clone, Debug)]
pub struct InFlightLimits {
    /// Reads (get, list, discovery), as upstream's `--max-requests-inflight`: with
    /// [`Self::mutating`], the seats API Priority and Fairness shares among its levels.
    pub read_only: usize,
    /// Writes (create, update, patch, delete), as upstream's `--max-mutating-requests-inflight`.
    pub mutating: usize,
    /// Open watches.
    pub watches: usize,
    /// How long a request may take to send its body (upstream's `--request-timeout`, 60 s, which
    /// bounds every request that is not long-running): a client that trickles its body cannot
    /// hold a slot past this.
    pub request_timeout: Duration,
}

impl InFlightLimits {
    /// The seats the priority levels share (upstream's `serverConcurrencyLimit`).
    pub fn total(&self) -> u32 {
        u32::try_from(self.read_only.saturating_add(self.mutating)).unwrap_or(u32::MAX)
    }
}

impl Default for InFlightLimits {
    fn default() -> Self {
        Self {
            read_only: 400,
            mutating: 200,
            watches: 8192,
            request_timeout: Duration::from_secs(60),
        }
    }
}

/// Which limit a request counts against (upstream's `request_kind` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestKind {
    ReadOnly,
    Mutating,
    LongRunning,
}

impl RequestKind {
    /// The method decides first, as upstream's verb does (a POST is `create` whatever its query
    /// says): only a read can be a watch, so a write with `?watch=1` still takes a mutating slot.
    fn of(req: &Request) -> Self {
        match *req.method() {
            Method::GET | Method::HEAD if is_watch(req) => RequestKind::LongRunning,
            Method::GET | Method::HEAD | Method::OPTIONS => RequestKind::ReadOnly,
            _ => RequestKind::Mutating,
        }
    }

    /// The name upstream's metrics use.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RequestKind::ReadOnly => "readOnly",
            RequestKind::Mutating => "mutating",
            RequestKind::LongRunning => "longRunning",
        }
    }
}

fn is_watch(req: &Request) -> bool {
    Params::parse(req.uri().query()).is_ok_and(|p| p.is_watch())
        || req.uri().path().contains("/watch/")
}

/// The permits of one server.
pub(crate) struct InFlight {
    watches: Arc<Semaphore>,
    /// [`InFlightLimits::request_timeout`].
    pub(crate) request_timeout: Duration,
}

impl InFlight {
    pub(crate) fn new(limits: &InFlightLimits) -> Self {
        Self {
            watches: Arc::new(Semaphore::new(limits.watches.max(1))),
            request_timeout: limits.request_timeout,
        }
    }
}

/// The filter: counts the request by kind, and takes a watch slot for a watch or answers 429.
pub(crate) async fn run<F, Fut>(
    in_flight: &InFlight,
    metrics: &Metrics,
    req: Request,
    next: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let kind = RequestKind::of(&req);
    let permit = if kind == RequestKind::LongRunning {
        let Ok(permit) = in_flight.watches.clone().try_acquire_owned() else {
            metrics.dropped_request(kind.as_str());
            let mut resp = ApiError::too_many_requests(RETRY_AFTER_SECONDS).into_response();
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            return resp;
        };
        Some(permit)
    } else {
        None
    };
    let gauge = metrics.in_flight(kind.as_str());
    let resp = next(req).await;
    // The request is in flight until its body is sent: a watch for as long as it streams.
    resp.map(|body| crate::guarded_body::guarded(body, (permit, gauge)))
}

/// What upstream's filter tells a client to wait before it retries.
const RETRY_AFTER_SECONDS: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    #[test]
    fn requests_count_against_their_kind() {
        let cases = [
            ("GET", "/api/v1/pods", RequestKind::ReadOnly),
            ("GET", "/api/v1/pods?watch=true", RequestKind::LongRunning),
            (
                "GET",
                "/api/v1/pods?watch=1&labelSelector=a",
                RequestKind::LongRunning,
            ),
            ("GET", "/api/v1/watch/pods", RequestKind::LongRunning),
            ("GET", "/api/v1/pods?watch=false", RequestKind::ReadOnly),
            (
                "POST",
                "/api/v1/namespaces/default/pods",
                RequestKind::Mutating,
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/a/deployments/b",
                RequestKind::Mutating,
            ),
            ("DELETE", "/api/v1/namespaces/a/pods", RequestKind::Mutating),
            // A write asking to watch is still a write: it may not take a watch slot.
            (
                "POST",
                "/api/v1/namespaces/default/pods?watch=1",
                RequestKind::Mutating,
            ),
            (
                "PUT",
                "/api/v1/namespaces/a/pods/b?watch=true",
                RequestKind::Mutating,
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/a/deployments/b?watch=1",
                RequestKind::Mutating,
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods?watch=1",
                RequestKind::Mutating,
            ),
            ("POST", "/api/v1/watch/pods", RequestKind::Mutating),
        ];
        for (method, uri, want) in cases {
            let req = Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap_or_default();
            assert_eq!(RequestKind::of(&req), want, "{method} {uri}");
        }
    }
}
