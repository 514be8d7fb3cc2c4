//! The rest client's metrics, with the names and labels client-go registers through
//! `k8s.io/component-base/metrics/prometheus/restclient`, so that dashboards built for
//! kube-controller-manager read rollwright's:
//!
//! - `rest_client_rate_limiter_duration_seconds{verb,host}`: how long requests waited on the
//!   client-side rate limit;
//! - `rest_client_request_duration_seconds{verb,host}`: from sending to the response's headers;
//! - `rest_client_requests_total{code,method,host}`: responses by status code (`<error>` when
//!   none came).
//!
//! Process-wide, as client-go's are: every client of the process adds to the same series.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};
use std::{sync::LazyLock, time::Duration};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbHost {
    verb: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeMethodHost {
    code: String,
    method: String,
    host: String,
}

/// component-base's buckets for both latency histograms.
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

struct RestClientMetrics {
    rate_limiter: Family<VerbHost, Histogram>,
    latency: Family<VerbHost, Histogram>,
    requests: Family<CodeMethodHost, Counter>,
}

static METRICS: LazyLock<RestClientMetrics> = LazyLock::new(|| RestClientMetrics {
    rate_limiter: Family::new_with_constructor(latency_histogram),
    latency: Family::new_with_constructor(latency_histogram),
    requests: Family::default(),
});

/// Adds the rest client's metrics to `registry` (for a `/metrics` endpoint). A series appears
/// once a request has been counted in it. The registry ends each help text with a period.
pub fn register(registry: &mut Registry) {
    registry.register(
        "rest_client_rate_limiter_duration_seconds",
        "Client side rate limiter latency in seconds. Broken down by verb, and host",
        METRICS.rate_limiter.clone(),
    );
    registry.register(
        "rest_client_request_duration_seconds",
        "Request latency in seconds. Broken down by verb, and host",
        METRICS.latency.clone(),
    );
    // The registry appends `_total` to a counter's name.
    registry.register(
        "rest_client_requests",
        "Number of HTTP requests, partitioned by status code, method, and host",
        METRICS.requests.clone(),
    );
}

/// The `host` label of a client of `cluster_url`: its authority, as client-go labels by
/// `url.Host`.
pub fn host(cluster_url: &http::Uri) -> String {
    cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default()
}

pub(crate) fn observe_wait(verb: &str, host: &str, waited: Duration) {
    METRICS
        .rate_limiter
        .get_or_create(&VerbHost {
            verb: verb.to_owned(),
            host: host.to_owned(),
        })
        .observe(waited.as_secs_f64());
}

pub(crate) fn observe_response(method: &str, host: &str, code: Option<u16>, took: Duration) {
    METRICS
        .latency
        .get_or_create(&VerbHost {
            verb: method.to_owned(),
            host: host.to_owned(),
        })
        .observe(took.as_secs_f64());
    METRICS
        .requests
        .get_or_create(&CodeMethodHost {
            code: code.map_or_else(|| "<error>".to_owned(), |c| c.to_string()),
            method: method.to_owned(),
            host: host.to_owned(),
        })
        .inc();
}

/// How many requests to `host` have waited on a rate limiter, and for how long in all: for tests
/// and reports.
pub fn waits(host: &str) -> (u64, Duration) {
    let mut registry = Registry::default();
    register(&mut registry);
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        return (0, Duration::ZERO);
    }
    let label = format!("host=\"{host}\"");
    let (mut count, mut sum) = (0u64, 0f64);
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if !series.contains(&label) {
            continue;
        }
        if series.starts_with("rest_client_rate_limiter_duration_seconds_count") {
            count += value.parse::<u64>().unwrap_or(0);
        } else if series.starts_with("rest_client_rate_limiter_duration_seconds_sum") {
            sum += value.parse::<f64>().unwrap_or(0.0);
        }
    }
    (count, Duration::from_secs_f64(sum.max(0.0)))
}
