//! What an API server shares among its requests: its options and its state. Everything that
//! serves a request takes the state from here; nothing here knows how requests are served, so
//! the handlers depend on the state and the state on none of them.

use std::{sync::Arc, time::Duration};

use store::Store;

use crate::{
    aggregator::discovered::Aggregator,
    audit::Auditor,
    authorizer::policy_cache::PolicyCache,
    cache::Cache,
    inflight::{InFlight, InFlightLimits},
    metrics::Metrics,
    registry::{Kind, Registry},
};

/// Settings of an API server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The bootstrap admin's bearer token (user [`crate::ADMIN_USER`] in `system:masters`);
    /// `None` accepts no such token.
    pub token: Option<String>,
    /// Watch-cache history per resource, in events.
    pub history: usize,
    /// Whether upstream's ServiceAccount admission runs (pods get the `default` ServiceAccount
    /// and must name one that exists); on only where the serviceaccount controller creates them.
    pub service_accounts: bool,
    /// Watch-cache history per resource, in bytes of objects.
    pub history_bytes: usize,
    /// Requests served at once: the seats API Priority and Fairness shares among its priority
    /// levels (crate::flowcontrol), and the cap on open watches over [`ApiServer::router`].
    pub in_flight: InFlightLimits,
    /// How long an Event lives after its last write (upstream's `--event-ttl`, 1 h); `None`
    /// keeps Events forever.
    pub event_ttl: Option<Duration>,
    /// The most Events kept at once (`--event-budget`); beyond it the least recently written are
    /// deleted before their TTL ([`crate::expiry::keep_within_budget`]). `None` keeps every Event
    /// for its TTL, as upstream does.
    pub event_budget: Option<usize>,
    /// The key ServiceAccount tokens are signed and checked with (upstream's `sa.key`); `None`
    /// issues no tokens (TokenRequest fails) and accepts none.
    pub service_account_key: Option<Arc<satoken::Key>>,
    /// Audit logging (`--audit-policy-file`, `--audit-log-path`) of requests over
    /// [`ApiServer::router`]; `None` audits nothing.
    pub audit: Option<Arc<Auditor>>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            token: None,
            history: 100_000,
            service_accounts: false,
            history_bytes: crate::cache::DEFAULT_HISTORY_BYTES,
            in_flight: InFlightLimits::default(),
            event_ttl: Some(DEFAULT_EVENT_TTL),
            event_budget: Some(DEFAULT_EVENT_BUDGET),
            service_account_key: None,
            audit: None,
        }
    }
}

/// Upstream's default `--event-ttl`.
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);

/// The most Events a server keeps by default: about 140 MiB in the watch cache at the 1.4 KB a
/// kubelet's Event takes there. Upstream bounds Events only by their TTL and etcd's quota (2 GiB
/// by default, shared with every other object, and a full quota refuses every write); a flood of
/// them (150,000 pods starting at once record about 460,000) would otherwise hold more memory
/// than the pods themselves.
pub const DEFAULT_EVENT_BUDGET: usize = 100_000;

/// A running API server. Cheap to clone: every request's middleware layers take a clone, so the
/// state is one `Arc` (one reference count to move, where its ten fields' own `Arc`s were ten:
/// dropping those clones was 1.2% of `bench phases`' CPU).
#[derive(Clone)]
pub struct ApiServer(pub(crate) Arc<ServerState>);

impl std::ops::Deref for ApiServer {
    type Target = ServerState;

    fn deref(&self) -> &ServerState {
        &self.0
    }
}

/// What an [`ApiServer`] shares among its requests.
pub struct ServerState {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) cache: Arc<Cache>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) in_flight: Arc<InFlight>,
    /// API Priority and Fairness (crate::flowcontrol).
    pub(crate) flow_control: Arc<crate::flowcontrol::FlowControl>,
    pub(crate) token: Option<Arc<str>>,
    pub(crate) service_accounts: bool,
    /// The RBAC snapshot authorization decides over (crate::authorizer).
    pub(crate) authz: Arc<PolicyCache>,
    pub(crate) service_account_key: Option<Arc<satoken::Key>>,
    pub(crate) audit: Option<Arc<Auditor>>,
    /// What the in-process kube-aggregator remembers (crate::aggregator).
    pub(crate) aggregator: Arc<Aggregator>,
}

impl ApiServer {
    /// The served kinds.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        self.cache.registry()
    }

    /// The kind that stores what `view` serves.
    pub(crate) fn storage_of(&self, view: &Arc<Kind>) -> Arc<Kind> {
        self.registry().storage_of(view)
    }
}
