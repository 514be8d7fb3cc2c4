//! The rate limit and the metrics as a tower layer on a `kube::Client`'s service stack: client-go's
//! `Request.tryThrottle` (wait on the clientset's limiter before every request, watches
//! included) and its request metrics.
//!
//! The wait happens in `poll_ready`: `kube::Client` puts its stack behind one `tower::Buffer`,
//! whose worker takes a request, polls the stack ready, then calls it. Waiting there holds every
//! later request of the client (and of its clones) back while one waits, which is what a shared
//! token bucket does anyway (reservations are served in order), and the request is handed to the
//! inner service only when its token is there.

use crate::{flowcontrol::RateLimiter, metrics};
use futures::future::BoxFuture;
use http::Request;
use std::{
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, ready},
    time::Duration,
};
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// client-go logs a wait longer than this at verbosity 3 (here: `debug`).
const LONG_THROTTLE: Duration = Duration::from_millis(50);
/// client-go logs a wait longer than this at verbosity 0 (here: `info`), at most once every
/// [`INFO_INTERVAL`] so that a throttled rollout does not flood the log.
const EXTRA_LONG_THROTTLE: Duration = Duration::from_secs(1);
const INFO_INTERVAL: Duration = Duration::from_secs(10);

/// Wraps a client's service: every request waits on `limiter` (when there is one) and is counted.
/// Each client built with one layer shares its limiter; build a layer per client for a limiter
/// each.
#[derive(Clone, Debug)]
pub struct ThrottleLayer {
    limiter: Option<RateLimiter>,
    host: Arc<str>,
}

impl ThrottleLayer {
    /// Requests to `host` (the metrics' label) waiting on `limiter`, or not limited at all.
    pub fn new(limiter: Option<RateLimiter>, host: impl Into<Arc<str>>) -> Self {
        Self {
            limiter,
            host: host.into(),
        }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;

    fn layer(&self, inner: S) -> Throttle<S> {
        Throttle {
            inner,
            limiter: self.limiter.clone(),
            host: self.host.clone(),
            state: State::Idle,
            last_info: Arc::new(Mutex::new(None)),
        }
    }
}

/// Where the next request stands with the limiter.
enum State {
    /// No token taken yet.
    Idle,
    /// A token reserved for later; waiting for it since the instant.
    Waiting(Instant, Pin<Box<Sleep>>),
    /// The token is there; the wait it took.
    Granted(Duration),
}

/// The service [`ThrottleLayer`] makes.
pub struct Throttle<S> {
    inner: S,
    limiter: Option<RateLimiter>,
    host: Arc<str>,
    state: State,
    last_info: Arc<Mutex<Option<Instant>>>,
}

impl<S, B> Service<Request<B>> for Throttle<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
    S::Response: ResponseStatus,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(limiter) = &self.limiter {
            loop {
                match &mut self.state {
                    State::Idle => {
                        let since = Instant::now();
                        let at = limiter.reserve();
                        self.state = State::Waiting(since, Box::pin(tokio::time::sleep_until(at)));
                    }
                    State::Waiting(since, sleep) => {
                        ready!(sleep.as_mut().poll(cx));
                        self.state = State::Granted(since.elapsed());
                    }
                    State::Granted(_) => break,
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().as_str().to_owned();
        if let State::Granted(waited) = std::mem::replace(&mut self.state, State::Idle) {
            metrics::observe_wait(&method, &self.host, waited);
            if waited > LONG_THROTTLE {
                let message = format!(
                    "Waited for {waited:?} due to client-side throttling, not priority and fairness, request: {method}:{}",
                    request.uri()
                );
                if waited > EXTRA_LONG_THROTTLE && self.info_due() {
                    tracing::info!("{message}");
                } else {
                    tracing::debug!("{message}");
                }
            }
        }
        let host = self.host.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = result.as_ref().ok().map(ResponseStatus::status_code);
            metrics::observe_response(&method, &host, code, started.elapsed());
            result
        })
    }
}

impl<S> Throttle<S> {
    /// Whether an `info` line may be logged now (one every [`INFO_INTERVAL`] per client).
    fn info_due(&self) -> bool {
        let now = Instant::now();
        let mut last = self.last_info.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| now.duration_since(at) < INFO_INTERVAL) {
            return false;
        }
        *last = Some(now);
        true
    }
}

/// A response's status code, for the metrics.
pub trait ResponseStatus {
    /// The HTTP status code.
    fn status_code(&self) -> u16;
}

impl<B> ResponseStatus for http::Response<B> {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::Limit;
    use bytes::Bytes;
    use std::convert::Infallible;

    const QUARTER: Duration = Duration::from_millis(250);

    /// A kube client whose requests never leave the process: every request is answered `{}` at
    /// once, so the only waits are the limiter's.
    fn client(layer: &ThrottleLayer) -> kube::Client {
        let answer = tower::service_fn(|_: Request<kube::client::Body>| async {
            Ok::<_, Infallible>(
                http::Response::builder()
                    .status(200)
                    .body(kube::client::Body::from(Bytes::from_static(b"{}")))
                    .unwrap_or_else(|e| panic!("{e}")),
            )
        });
        kube::client::ClientBuilder::new(layer.layer(answer), "default").build()
    }

    async fn get(client: &kube::Client) {
        let request = Request::get("/api").body(Vec::new()).unwrap_or_default();
        let answer = client.request_text(request).await;
        assert!(answer.is_ok(), "{answer:?}");
    }

    fn layer(host: &str, limit: Limit) -> ThrottleLayer {
        ThrottleLayer::new(Some(RateLimiter::new(limit)), host)
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_sends_its_burst_at_once_then_at_qps() {
        let client = client(&layer("burst:1", Limit { qps: 4.0, burst: 3 }));
        let start = Instant::now();
        for _ in 0..3 {
            get(&client).await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        for _ in 0..4 {
            get(&client).await;
        }
        assert_eq!(start.elapsed(), 4 * QUARTER);
        // The four waits, each over the 50 ms of client-go's log line, were counted.
        let (count, total) = metrics::waits("burst:1");
        assert_eq!(count, 7);
        assert_eq!(total, 4 * QUARTER);
    }

    #[tokio::test(start_paused = true)]
    async fn clones_of_a_client_share_its_limiter_and_other_clients_do_not() {
        let shared = client(&layer("share:1", Limit { qps: 4.0, burst: 2 }));
        let clone = shared.clone();
        let start = Instant::now();
        // Eight requests from the two handles at once: two go at once, six wait a quarter each
        // after the other, whichever handle sent them.
        let mut all = Vec::new();
        for i in 0..8 {
            let c = if i % 2 == 0 {
                shared.clone()
            } else {
                clone.clone()
            };
            all.push(tokio::spawn(async move { get(&c).await }));
        }
        for done in all {
            assert!(done.await.is_ok());
        }
        assert_eq!(start.elapsed(), 6 * QUARTER);
        // A client of its own (a layer of its own) starts with a full bucket.
        let other = client(&layer("share:2", Limit { qps: 4.0, burst: 2 }));
        let start = Instant::now();
        get(&other).await;
        get(&other).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn two_clients_on_one_layer_share_its_limiter() {
        // client-go shares a limiter between clientsets only when given the same `RateLimiter`;
        // here, one layer.
        let layer = layer("share:3", Limit { qps: 4.0, burst: 1 });
        let (a, b) = (client(&layer), client(&layer));
        let start = Instant::now();
        get(&a).await;
        get(&b).await;
        get(&a).await;
        assert_eq!(start.elapsed(), 2 * QUARTER);
    }

    #[tokio::test(start_paused = true)]
    async fn clients_limited_on_one_base_each_have_their_own_limiter() {
        // As kube-controller-manager's controllers: one configuration, a clientset each.
        let base = client(&ThrottleLayer::new(None, "base:1"));
        let limit = Some(Limit { qps: 4.0, burst: 1 });
        let (a, b) = (
            crate::limited(&base, limit, "own:1"),
            crate::limited(&base, limit, "own:1"),
        );
        let start = Instant::now();
        get(&a).await;
        get(&b).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        get(&a).await;
        assert_eq!(start.elapsed(), QUARTER);
        // The base carried all three.
        let mut registry = prometheus_client::registry::Registry::default();
        metrics::register(&mut registry);
        let mut text = String::new();
        assert!(prometheus_client::encoding::text::encode(&mut text, &registry).is_ok());
        assert!(
            text.contains(
                "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"base:1\"} 3"
            ),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_client_waits_before_each_request_and_then_its_limiter() {
        let base = client(&ThrottleLayer::new(None, "base:2"));
        let slow = crate::delayed(&base, QUARTER);
        let start = Instant::now();
        get(&slow).await;
        get(&slow).await;
        assert_eq!(start.elapsed(), 2 * QUARTER);
        // Side by side, each waits its own quarter: latency, not a rate.
        let other = slow.clone();
        let start = Instant::now();
        futures::future::join(get(&slow), get(&other)).await;
        assert_eq!(start.elapsed(), QUARTER);
        // Limited on top, as the rehearsal's controllers: three at once leave the limiter a
        // quarter apart, and each then waits its quarter.
        let limited = crate::limited(&slow, Some(Limit { qps: 4.0, burst: 1 }), "own:2");
        let start = Instant::now();
        futures::future::join3(get(&limited), get(&limited), get(&limited)).await;
        assert_eq!(start.elapsed(), 3 * QUARTER);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_limit_nothing_waits_and_responses_are_counted() {
        let client = client(&ThrottleLayer::new(None, "free:1"));
        let start = Instant::now();
        for _ in 0..100 {
            get(&client).await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(metrics::waits("free:1"), (0, Duration::ZERO));
        let mut registry = prometheus_client::registry::Registry::default();
        metrics::register(&mut registry);
        let mut text = String::new();
        assert!(prometheus_client::encoding::text::encode(&mut text, &registry).is_ok());
        assert!(
            text.contains(
                "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"free:1\"} 100"
            ),
            "{text}"
        );
    }
}
