//! Prometheus metrics of the API server, served at `/metrics`.

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use std::{
    collections::HashMap,
    sync::{Arc, RwLock, atomic::AtomicU64},
};

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

/// A priority level and FlowSchema (upstream's flow-control labels).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FlowLabels {
    priority_level: String,
    flow_schema: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectLabels {
    priority_level: String,
    flow_schema: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WaitLabels {
    execute: &'static str,
    priority_level: String,
    flow_schema: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LevelLabels {
    priority_level: String,
}

/// API Priority and Fairness' metrics, named as upstream's (`util/flowcontrol/metrics`).
struct FlowControlMetrics {
    rejected: Family<RejectLabels, Counter>,
    dispatched: Family<FlowLabels, Counter>,
    inqueue: Family<FlowLabels, Gauge>,
    executing: Family<FlowLabels, Gauge>,
    executing_seats: Family<FlowLabels, Gauge>,
    wait: Family<WaitLabels, Histogram>,
    nominal: Family<LevelLabels, Gauge>,
    /// Each flow's metrics by level, then FlowSchema ([`Metrics::apf_flow`]).
    flows: RwLock<HashMap<String, HashMap<String, Flow>>>,
}

impl FlowControlMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = Self {
            rejected: Family::default(),
            dispatched: Family::default(),
            inqueue: Family::default(),
            executing: Family::default(),
            executing_seats: Family::default(),
            // Upstream's buckets.
            wait: Family::new_with_constructor(|| {
                Histogram::new([
                    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
                ])
            }),
            nominal: Family::default(),
            flows: RwLock::default(),
        };
        registry.register(
            "apiserver_flowcontrol_rejected_requests",
            "Number of requests rejected by API Priority and Fairness subsystem",
            m.rejected.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_dispatched_requests",
            "Number of requests executed by API Priority and Fairness subsystem",
            m.dispatched.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            m.inqueue.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
            m.executing.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_executing_seats",
            "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
            m.executing_seats.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            m.wait.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            m.nominal.clone(),
        );
        m
    }
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
    events_evicted: Counter,
    flow_control: FlowControlMetrics,
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
        let events_evicted = Counter::default();
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
        registry.register(
            "rollwright_events_evicted",
            "Events deleted before their TTL to keep the server within --event-budget",
            events_evicted.clone(),
        );
        let flow_control = FlowControlMetrics::register(&mut registry);
        Self {
            flow_control,
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
            events_evicted,
        }
    }

    /// The gauge of LIST response bytes held in memory (see `rest::list_body`): what bounds a
    /// list's memory is what the server renders ahead of a slow reader, which this makes visible.
    pub fn list_buffered(&self) -> Gauge {
        self.list_buffered.clone()
    }

    /// Counts Events deleted before their TTL to keep within the server's Event budget.
    pub(crate) fn events_evicted(&self, n: u64) {
        self.events_evicted.inc_by(n);
    }

    /// How many Events were deleted before their TTL to keep within the Event budget.
    pub fn events_evicted_total(&self) -> u64 {
        self.events_evicted.get()
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

    /// Counts a request API Priority and Fairness refused for `reason` after `waited` seconds.
    pub(crate) fn apf_rejected(
        &self,
        level: &str,
        schema: &str,
        reason: &'static str,
        waited: f64,
    ) {
        let m = &self.flow_control;
        m.rejected
            .get_or_create(&RejectLabels {
                priority_level: level.into(),
                flow_schema: schema.into(),
                reason,
            })
            .inc();
        m.wait
            .get_or_create(&WaitLabels {
                execute: "false",
                priority_level: level.into(),
                flow_schema: schema.into(),
            })
            .observe(waited);
    }

    /// The metrics of one flow (a priority level and a FlowSchema), looked up by their labels
    /// once: a request updates five of them, and each lookup by labels allocates the labels.
    pub(crate) fn apf_flow(&self, level: &str, schema: &str) -> Flow {
        let m = &self.flow_control;
        if let Some(flow) = m
            .flows
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(level)
            .and_then(|schemas| schemas.get(schema))
        {
            return flow.clone();
        }
        let labels = flow(level, schema);
        let made = Flow {
            dispatched: m.dispatched.get_or_create(&labels).clone(),
            inqueue: m.inqueue.get_or_create(&labels).clone(),
            executing: m.executing.get_or_create(&labels).clone(),
            executing_seats: m.executing_seats.get_or_create(&labels).clone(),
            wait: m
                .wait
                .get_or_create(&WaitLabels {
                    execute: "true",
                    priority_level: level.into(),
                    flow_schema: schema.into(),
                })
                .clone(),
        };
        m.flows
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(level.to_string())
            .or_default()
            .insert(schema.to_string(), made.clone());
        made
    }

    /// Sets a level's nominal concurrency limit.
    pub(crate) fn apf_nominal_limit(&self, level: &str, seats: u32) {
        self.flow_control
            .nominal
            .get_or_create(&LevelLabels {
                priority_level: level.into(),
            })
            .set(i64::from(seats));
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

fn flow(level: &str, schema: &str) -> FlowLabels {
    FlowLabels {
        priority_level: level.into(),
        flow_schema: schema.into(),
    }
}

/// One flow's metrics ([`Metrics::apf_flow`]).
#[derive(Clone)]
pub(crate) struct Flow {
    dispatched: Counter,
    inqueue: Gauge,
    executing: Gauge,
    executing_seats: Gauge,
    wait: Histogram,
}

impl Flow {
    /// Counts a request let through, after waiting `waited` seconds for its seats.
    pub(crate) fn dispatched(&self, waited: Option<f64>) {
        self.dispatched.inc();
        if let Some(waited) = waited {
            self.wait.observe(waited);
        }
    }

    /// Counts a request waiting for its seats until the guard drops.
    pub(crate) fn inqueue(&self) -> GaugeGuard {
        GaugeGuard::inc(self.inqueue.clone())
    }

    /// Counts a request executing on `seats` seats until the guard drops.
    pub(crate) fn executing(&self, seats: u32) -> Executing {
        self.executing.inc();
        self.executing_seats.inc_by(i64::from(seats));
        Executing {
            requests: self.executing.clone(),
            seats: self.executing_seats.clone(),
            width: i64::from(seats),
        }
    }
}

/// A request executing: the executing-requests and -seats gauges, lowered when dropped.
pub(crate) struct Executing {
    requests: Gauge,
    seats: Gauge,
    width: i64,
}

impl Drop for Executing {
    fn drop(&mut self) {
        self.requests.dec();
        self.seats.dec_by(self.width);
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
