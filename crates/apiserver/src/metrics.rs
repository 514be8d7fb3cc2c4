//! Prometheus metrics of the API server, served at `/metrics`.

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use std::sync::{Arc, atomic::AtomicU64};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: String,
    resource: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    verb: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    request_kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    watches: Family<ResourceLabels, Gauge>,
    objects: Family<ResourceLabels, Gauge>,
    revision: Gauge<u64, AtomicU64>,
    in_flight: Family<KindLabels, Gauge>,
    dropped: Family<KindLabels, Counter>,
    authorizations: Family<ResultLabels, Counter>,
    list_buffered: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ])
        });
        let watches = Family::<ResourceLabels, Gauge>::default();
        let objects = Family::<ResourceLabels, Gauge>::default();
        let revision = Gauge::<u64, AtomicU64>::default();
        let in_flight = Family::<KindLabels, Gauge>::default();
        let dropped = Family::<KindLabels, Counter>::default();
        let authorizations = Family::<ResultLabels, Counter>::default();
        let list_buffered = Gauge::default();
        registry.register(
            "authorization_attempts",
            "Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', 'no-opinion' or 'error'.",
            authorizations.clone(),
        );
        registry.register(
            "apiserver_current_inflight_requests",
            "Requests being served, by kind (readOnly, mutating, longRunning)",
            in_flight.clone(),
        );
        registry.register(
            "apiserver_dropped_requests",
            "Requests refused with 429 by the max-in-flight filter, by kind",
            dropped.clone(),
        );
        registry.register(
            "apiserver_request",
            "Requests by verb, resource and HTTP code",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Request latency by verb and resource (watches: time to first byte)",
            latency.clone(),
        );
        registry.register(
            "apiserver_registered_watchers",
            "Open watches by resource",
            watches.clone(),
        );
        registry.register(
            "apiserver_storage_objects",
            "Objects in the watch cache by resource",
            objects.clone(),
        );
        registry.register(
            "rollwright_store_revision",
            "The store's current revision",
            revision.clone(),
        );
        registry.register(
            "rollwright_list_response_buffered_bytes",
            "Bytes of LIST response bodies the server has rendered and not yet handed to the connection or seen dropped",
            list_buffered.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            watches,
            objects,
            revision,
            in_flight,
            dropped,
            authorizations,
            list_buffered,
        }
    }

    /// The gauge of LIST response bytes held in memory (see `rest::list_body`): what bounds a
    /// list's memory is what the server renders ahead of a slow reader, which this makes visible.
    pub fn list_buffered(&self) -> Gauge {
        self.list_buffered.clone()
    }

    /// Counts one authorization decision, as upstream's `authorization_attempts_total` by
    /// `result`: a request no authorizer allowed is `denied` when one refused it outright and
    /// `no-opinion` when none had a rule for it (RBAC's usual refusal).
    pub fn authorization(&self, decision: &authz::Decision) {
        let result = match decision {
            authz::Decision::Allow(_) => "allowed",
            authz::Decision::Deny(_) => "denied",
            authz::Decision::NoOpinion(_) => "no-opinion",
        };
        self.authorizations
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Counts a request refused by the max-in-flight filter.
    pub fn dropped_request(&self, kind: &str) {
        self.dropped
            .get_or_create(&KindLabels {
                request_kind: kind.into(),
            })
            .inc();
    }

    /// Counts a request in flight until the guard drops.
    pub fn in_flight(&self, kind: &str) -> GaugeGuard {
        GaugeGuard::inc(
            self.in_flight
                .get_or_create(&KindLabels {
                    request_kind: kind.into(),
                })
                .clone(),
        )
    }

    /// Records one finished request.
    pub fn observe(&self, verb: &str, resource: &str, code: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.into(),
                resource: resource.into(),
                code: code.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&LatencyLabels {
                verb: verb.into(),
                resource: resource.into(),
            })
            .observe(seconds);
    }

    /// Counts an open watch until the guard drops.
    pub fn open_watch(self: &Arc<Self>, resource: &str) -> GaugeGuard {
        GaugeGuard::inc(
            self.watches
                .get_or_create(&ResourceLabels {
                    resource: resource.into(),
                })
                .clone(),
        )
    }

    /// The exposition text, refreshing the gauges read from elsewhere.
    pub fn render(&self, revision: u64, counts: &[(&str, usize)]) -> String {
        self.revision.set(revision);
        for (res, n) in counts {
            self.objects
                .get_or_create(&ResourceLabels {
                    resource: (*res).into(),
                })
                .set(*n as i64);
        }
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Holds a gauge one higher (an open watch, a request in flight) until dropped.
pub struct GaugeGuard(Gauge);

impl GaugeGuard {
    fn inc(gauge: Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}
