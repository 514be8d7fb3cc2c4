//! The cluster's controllers. They talk to the API only through a `kube::Client` and read it only
//! through the process's shared cache ([`informer::Informers`]), so they run unchanged in
//! `rollwright up` and against a real cluster.
//!
//! - [`replicaset`], [`deployment`], [`daemonset`], [`statefulset`]: the workload controllers;
//!   [`replicationcontroller`] is the ReplicaSet controller over ReplicationControllers.
//! - [`volume`]: claims and volumes (default class, a simulated provisioner, binding, reclaim,
//!   in-use protection).
//! - [`gc`]: the garbage collector (owner references, cascading deletion).
//! - [`pod_gc`]: the pod garbage collector (orphaned, terminated and stuck terminating pods).
//! - [`namespace`]: namespace deletion (emptying a Terminating namespace, then finalizing it).
//! - [`serviceaccount`]: the `default` ServiceAccount of every namespace.
//! - [`serviceaccount_token`]: legacy token Secrets filled with a signed token, the CA and the
//!   namespace; those of gone ServiceAccounts deleted.
//! - [`root_ca`]: every namespace's `kube-root-ca.crt` ConfigMap with the cluster's CA bundle.
//! - [`clusterrole_aggregation`]: the rules of ClusterRoles with an `aggregationRule`.
//! - [`job`]: Jobs (completions, parallelism, back-off limit, deadline, Indexed mode, pod
//!   failure policy, suspension).
//! - [`cronjob`]: CronJobs (schedules, concurrency policy, history limits) on a [`cronjob::Clock`].
//! - [`ttl_after_finished`]: deletes finished Jobs after `ttlSecondsAfterFinished`.
//! - [`endpoints`], [`endpointslice`]: the addresses of every Service's pods, as Endpoints and
//!   as EndpointSlices.
//! - [`disruption`]: PodDisruptionBudget status (the API server's eviction consults it).
//! - [`disruption_gate`]: budget-aware updates: the workload controllers ask the budgets before
//!   taking a pod down for an update (opt-in).
//! - [`resourcequota`]: ResourceQuota status: each quota's limits and what its namespace uses
//!   (the API server's quota admission charges creates against it).
//! - [`node_lifecycle`]: node health from Leases, condition and NoExecute taints, taint-based
//!   eviction.
//!
//! # The contract every controller follows
//!
//! A controller is a struct implementing [`runtime::Controller`]:
//! - `new(&Informers, Config) -> Arc<Self>` takes its [`informer::Informer`]s from the shared
//!   cache (`informers.get::<Pod>()`: one watch per kind for the whole process, objects decoded
//!   once and shared as [`informer::Shared`]) and makes its [`runtime::WorkQueue`] from the
//!   shared part of its settings ([`runtime::Config::queue`]: its own `Config`, or the `run`
//!   field of one with more settings), which also says how many workers drain it, so the
//!   controller need not say it again;
//! - [`Controller::watch`](runtime::Controller::watch) subscribes event handlers
//!   ([`informer::Informer::subscribe`]) that map a [`informer::Change`] to the keys it cares
//!   about (a pod's controller reference to its ReplicaSet's `namespace/name`) and queue them;
//! - [`Controller::reconcile`](runtime::Controller::reconcile) reads the cache (the indexes:
//!   [`informer::Store::controlled_by`], [`informer::Store::orphans`],
//!   [`informer::Store::on_node`], ...), writes through the client and returns an
//!   [`runtime::Action`]: a requeue only for what time alone changes, never to poll;
//! - errors are retried with the key's back-off ([`runtime::Retry`]).
//!
//! [`runtime::run`] runs any controller that way; [`run`] starts the controllers chosen by name
//! ([`Settings::enabled`], `--controllers=*,-garbagecollector` style), each under
//! [`runtime::supervise`], which restarts a controller whose task panicked.

#![warn(missing_docs)]

pub mod accounts;
pub mod api_error;
pub mod autorollback;
pub mod clusterrole_aggregation;
pub mod cronjob;
pub mod daemonset;
#[cfg(feature = "test-support")]
pub mod daemonset_invariants;
pub mod deployment;
pub mod disruption;
pub mod disruption_gate;
pub mod endpoints;
pub mod endpointslice;
pub mod expectations;
pub mod gc;
pub mod history;
#[cfg(feature = "test-support")]
pub mod invariants;
pub mod job;
pub mod namespace;
pub mod node_lifecycle;
pub mod owners;
pub mod ownership;
pub mod pacing;
pub mod pod_control;
pub mod pod_gc;
pub mod progress;
pub mod replicaset;
#[cfg(feature = "test-support")]
pub mod replicaset_invariants;
pub mod replicationcontroller;
pub mod resourcequota;
pub mod root_ca;
pub mod runtime;
pub mod selection;
pub mod serviceaccount;
pub mod serviceaccount_token;
#[cfg(feature = "test-support")]
pub mod stateful_invariants;
pub mod statefulset;
pub mod switches;
pub mod ttl_after_finished;
pub mod update;
pub mod volume;
pub mod written;

use clusterrole_aggregation::ClusterRoleAggregationController;
use cronjob::CronJobController;
use daemonset::DaemonSetController;
use deployment::DeploymentController;
use disruption::DisruptionController;
use endpoints::EndpointsController;
use endpointslice::EndpointSliceController;
use futures::future::BoxFuture;
use gc::GarbageCollector;
use informer::Informers;
use job::JobController;
use namespace::NamespaceController;
use node_lifecycle::NodeLifecycleController;
use pod_gc::PodGarbageCollector;
use replicaset::ReplicaSetController;
use replicationcontroller::ReplicationManager;
use resourcequota::ResourceQuotaController;
use root_ca::RootCaCertPublisher;
use runtime::{Controller, supervisor::RESTART_BACKOFF};
pub use selection::{Selection, UnknownController};
use serviceaccount::ServiceAccountController;
use statefulset::StatefulSetController;
use std::{collections::BTreeSet, future::Future, sync::Arc};
use tokio::task::JoinSet;
use ttl_after_finished::TtlAfterFinishedController;
use volume::VolumeController;

/// Which controllers run, and each one's settings.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The controllers to run (default: all).
    pub enabled: Selection,
    /// The ReplicaSet controller's.
    pub replicaset: replicaset::Config,
    /// The ReplicationController controller's.
    pub replicationcontroller: replicationcontroller::Config,
    /// The Deployment controller's.
    pub deployment: deployment::Config,
    /// The DaemonSet controller's.
    pub daemonset: daemonset::Config,
    /// The garbage collector's.
    pub garbage_collector: gc::Config,
    /// The pod garbage collector's.
    pub pod_gc: pod_gc::Config,
    /// The node lifecycle controller's.
    pub node_lifecycle: node_lifecycle::Config,
    /// The serviceaccount controller's.
    pub serviceaccount: serviceaccount::Config,
    /// The root CA certificate publisher's (the bundle it publishes).
    pub root_ca: root_ca::Config,
    /// The ServiceAccount token controller's (the signing key; it writes `root_ca`'s bundle).
    pub serviceaccount_token: serviceaccount_token::Config,
    /// The namespace controller's.
    pub namespace: namespace::Config,
    /// The StatefulSet controller's.
    pub statefulset: statefulset::Config,
    /// The volume controller's.
    pub volume: volume::Config,
    /// The Job controller's.
    pub job: job::Config,
    /// The CronJob controller's (its clock, for tests).
    pub cronjob: cronjob::Config,
    /// The TTL-after-finished controller's.
    pub ttl_after_finished: ttl_after_finished::Config,
    /// The endpoints controller's.
    pub endpoints: endpoints::Config,
    /// The endpointslice controller's.
    pub endpointslice: endpointslice::Config,
    /// The disruption controller's.
    pub disruption: disruption::Config,
    /// The resource quota controller's.
    pub resourcequota: resourcequota::Config,
    /// The ClusterRole aggregation controller's.
    pub clusterrole_aggregation: clusterrole_aggregation::Config,
    /// Whether the Deployment, ReplicaSet, DaemonSet and StatefulSet controllers ask the
    /// disruption budgets before an update of every workload, not only of those annotated
    /// ([`disruption_gate`]; `--honor-disruption-budgets`).
    pub honor_disruption_budgets: bool,
}

/// Makes one incarnation of a controller, as [`runtime::supervise`] asks.
type Start = Box<dyn FnMut() -> BoxFuture<'static, ()> + Send>;
/// Turns the settings into a controller's [`Start`].
type Starter = fn(&Informers, &Settings) -> Start;

/// Every controller, by the name `--controllers` takes (upstream's names), and how it starts.
const CONTROLLERS: &[(&str, Starter)] = &[
    (ReplicaSetController::NAME, |i, s| {
        on_cache(
            i,
            (s.replicaset.clone(), s.honor_disruption_budgets),
            |i, (c, honor)| {
                let controller = ReplicaSetController::new(i, c);
                controller.disruption_gate().set_default(honor);
                controller
            },
        )
    }),
    (ReplicationManager::NAME, |i, s| {
        on_cache(i, s.replicationcontroller.clone(), ReplicationManager::new)
    }),
    (DeploymentController::NAME, |i, s| {
        on_cache(
            i,
            (s.deployment.clone(), s.honor_disruption_budgets),
            |i, (c, honor)| {
                let controller = DeploymentController::new(i, c);
                controller.disruption_gate().set_default(honor);
                controller
            },
        )
    }),
    (DaemonSetController::NAME, |i, s| {
        on_cache(
            i,
            (s.daemonset.clone(), s.honor_disruption_budgets),
            |i, (c, honor)| {
                let controller = DaemonSetController::new(i, c);
                controller.disruption_gate().set_default(honor);
                controller
            },
        )
    }),
    (GarbageCollector::NAME, |i, s| {
        on_cache(i, s.garbage_collector.clone(), GarbageCollector::new)
    }),
    (PodGarbageCollector::NAME, |i, s| {
        on_cache(i, s.pod_gc.clone(), PodGarbageCollector::new)
    }),
    (NodeLifecycleController::NAME, |i, s| {
        on_cache(i, s.node_lifecycle.clone(), NodeLifecycleController::new)
    }),
    (ServiceAccountController::NAME, |i, s| {
        on_cache(i, s.serviceaccount.clone(), ServiceAccountController::new)
    }),
    (RootCaCertPublisher::NAME, root_ca::start),
    (
        <serviceaccount_token::TokensController as Controller>::NAME,
        serviceaccount_token::start,
    ),
    (NamespaceController::NAME, |i, s| {
        on_cache(i, s.namespace.clone(), NamespaceController::new)
    }),
    (StatefulSetController::NAME, |i, s| {
        on_cache(
            i,
            (s.statefulset.clone(), s.honor_disruption_budgets),
            |i, (c, honor)| {
                let controller = StatefulSetController::new(i, c);
                controller.disruption_gate().set_default(honor);
                controller
            },
        )
    }),
    (VolumeController::NAME, |i, s| {
        on_cache(i, s.volume.clone(), VolumeController::new)
    }),
    (JobController::NAME, |i, s| {
        on_cache(i, s.job.clone(), JobController::new)
    }),
    (CronJobController::NAME, |i, s| {
        on_cache(i, s.cronjob.clone(), CronJobController::new)
    }),
    (TtlAfterFinishedController::NAME, |i, s| {
        on_cache(
            i,
            s.ttl_after_finished.clone(),
            TtlAfterFinishedController::new,
        )
    }),
    (EndpointsController::NAME, |i, s| {
        on_cache(i, s.endpoints.clone(), EndpointsController::new)
    }),
    (EndpointSliceController::NAME, |i, s| {
        on_cache(i, s.endpointslice.clone(), EndpointSliceController::new)
    }),
    (DisruptionController::NAME, |i, s| {
        on_cache(i, s.disruption.clone(), DisruptionController::new)
    }),
    (ResourceQuotaController::NAME, |i, s| {
        on_cache(i, s.resourcequota.clone(), ResourceQuotaController::new)
    }),
    (ClusterRoleAggregationController::NAME, |i, s| {
        on_cache(
            i,
            s.clusterrole_aggregation.clone(),
            ClusterRoleAggregationController::new,
        )
    }),
];

/// Every controller's name.
pub fn names() -> Vec<&'static str> {
    CONTROLLERS.iter().map(|(name, _)| *name).collect()
}

/// The controllers `settings` enables.
pub fn enabled(settings: &Settings) -> Result<BTreeSet<&'static str>, UnknownController> {
    settings.enabled.resolve(&names())
}

/// Starts a controller: a fresh one each time (after a panic, the old one's queue and
/// expectations are gone with it).
fn on_cache<C: Controller, Cfg: Clone + Send + 'static>(
    informers: &Informers,
    config: Cfg,
    new: fn(&Informers, Cfg) -> Arc<C>,
) -> Start {
    let informers = informers.clone();
    Box::new(move || {
        Box::pin(runtime::run(
            new(&informers, config.clone()),
            informers.clone(),
        ))
    })
}

/// The controllers `settings` enables, on the shared cache `informers`, each supervised; the
/// future runs until dropped, which stops them all. An unknown name is an error before anything
/// starts.
pub fn run(
    informers: &Informers,
    settings: &Settings,
) -> Result<impl Future<Output = ()> + Send + 'static, UnknownController> {
    run_as(informers, settings, None)
}

/// [`run`], each controller writing as its own identity from `accounts`
/// ([`accounts::service_account`]) while all read the shared cache.
pub fn run_as(
    informers: &Informers,
    settings: &Settings,
    accounts: Option<&accounts::ClientFor>,
) -> Result<impl Future<Output = ()> + Send + 'static, UnknownController> {
    let enabled = enabled(settings)?;
    let starts: Vec<(&'static str, Start)> = CONTROLLERS
        .iter()
        .filter(|(name, _)| enabled.contains(name))
        .map(|(name, start)| {
            let informers = match accounts {
                Some(client_for) => {
                    informers.acting_as(client_for(accounts::service_account(name)))
                }
                None => informers.clone(),
            };
            (*name, start(&informers, settings))
        })
        .collect();
    Ok(async move {
        // Dropping the set (the controllers stopping) aborts every supervisor, and with it
        // every controller task.
        let mut set = JoinSet::new();
        for (name, start) in starts {
            set.spawn(runtime::supervise(name, RESTART_BACKOFF, start));
        }
        while set.join_next().await.is_some() {}
    })
}
