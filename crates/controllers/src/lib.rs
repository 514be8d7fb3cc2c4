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
pub mod gc;
pub mod history;
#[cfg(feature = "test-support")]
pub mod invariants;
pub mod job;
pub mod namespace;
pub mod node_lifecycle;
pub mod pacing;
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
pub mod util;
pub mod volume;

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

/// Declares every controller once, one row each: its settings (a field of [`Settings`], with
/// its doc), the controller (whose [`Controller::NAME`] `--controllers` takes), the
/// ServiceAccount in `kube-system` it acts as (`None`: the controller manager's own identity, as
/// upstream), whose bootstrap role is `system:controller:<account>` (upstream's
/// `controller_policy.go`, in [`authz::bootstrap`]), and how it starts. Adding a controller is
/// adding a row.
macro_rules! controllers {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $config:ty => $controller:ty, account $account:expr, start $start:expr;
    )*) => {
        /// Which controllers run, and each one's settings.
        #[derive(Clone, Debug, Default)]
        pub struct Settings {
            /// The controllers to run (default: all).
            pub enabled: Selection,
            $( $(#[doc = $doc])* pub $field: $config, )*
            /// Whether the Deployment, ReplicaSet, DaemonSet and StatefulSet controllers ask the
            /// disruption budgets before an update of every workload, not only of those annotated
            /// ([`disruption_gate`]; `--honor-disruption-budgets`).
            pub honor_disruption_budgets: bool,
        }

        /// Every controller, in the order they start.
        const CONTROLLERS: &[Row] = &[$(
            Row {
                name: <$controller as Controller>::NAME,
                account: $account,
                start: $start,
            },
        )*];
    };
}

/// One controller of the table.
struct Row {
    /// Upstream's name, as `--controllers` takes it.
    name: &'static str,
    /// The ServiceAccount it acts as, if not the controller manager's identity.
    account: Option<&'static str>,
    /// How it starts from the settings.
    start: Starter,
}

/// Makes one incarnation of a controller, as [`runtime::supervise`] asks.
type Start = Box<dyn FnMut() -> BoxFuture<'static, ()> + Send>;
/// Turns the settings into a controller's [`Start`].
type Starter = fn(&Informers, &Settings) -> Start;

controllers! {
    /// The ReplicaSet controller's.
    replicaset: replicaset::Config => ReplicaSetController,
        account Some("replicaset-controller"),
        start |i, s| on_cache(i, (s.replicaset.clone(), s.honor_disruption_budgets), |i, (c, honor)| {
            let controller = ReplicaSetController::new(i, c);
            controller.disruption_gate().set_default(honor);
            controller
        });
    /// The ReplicationController controller's.
    replicationcontroller: replicationcontroller::Config => ReplicationManager,
        account Some("replication-controller"),
        start |i, s| on_cache(i, s.replicationcontroller.clone(), ReplicationManager::new);
    /// The Deployment controller's.
    deployment: deployment::Config => DeploymentController,
        account Some("deployment-controller"),
        start |i, s| on_cache(i, (s.deployment.clone(), s.honor_disruption_budgets), |i, (c, honor)| {
            let controller = DeploymentController::new(i, c);
            controller.disruption_gate().set_default(honor);
            controller
        });
    /// The DaemonSet controller's.
    daemonset: daemonset::Config => DaemonSetController,
        account Some("daemon-set-controller"),
        start |i, s| on_cache(i, (s.daemonset.clone(), s.honor_disruption_budgets), |i, (c, honor)| {
            let controller = DaemonSetController::new(i, c);
            controller.disruption_gate().set_default(honor);
            controller
        });
    /// The garbage collector's.
    garbage_collector: gc::Config => GarbageCollector,
        account Some("generic-garbage-collector"),
        start |i, s| on_cache(i, s.garbage_collector.clone(), GarbageCollector::new);
    /// The pod garbage collector's.
    pod_gc: pod_gc::Config => PodGarbageCollector,
        account Some("pod-garbage-collector"),
        start |i, s| on_cache(i, s.pod_gc.clone(), PodGarbageCollector::new);
    /// The node lifecycle controller's.
    node_lifecycle: node_lifecycle::Config => NodeLifecycleController,
        account Some("node-controller"),
        start |i, s| on_cache(i, s.node_lifecycle.clone(), NodeLifecycleController::new);
    /// The serviceaccount controller's.
    serviceaccount: serviceaccount::Config => ServiceAccountController,
        account Some("service-account-controller"),
        start |i, s| on_cache(i, s.serviceaccount.clone(), ServiceAccountController::new);
    /// The root CA certificate publisher's (the bundle it publishes).
    root_ca: root_ca::Config => RootCaCertPublisher,
        account Some("root-ca-cert-publisher"),
        start root_ca::start;
    /// The ServiceAccount token controller's (the signing key; it writes `root_ca`'s bundle).
    serviceaccount_token: serviceaccount_token::Config => serviceaccount_token::TokensController,
        account None,
        start serviceaccount_token::start;
    /// The namespace controller's.
    namespace: namespace::Config => NamespaceController,
        account Some("namespace-controller"),
        start |i, s| on_cache(i, s.namespace.clone(), NamespaceController::new);
    /// The StatefulSet controller's.
    statefulset: statefulset::Config => StatefulSetController,
        account Some("statefulset-controller"),
        start |i, s| on_cache(i, (s.statefulset.clone(), s.honor_disruption_budgets), |i, (c, honor)| {
            let controller = StatefulSetController::new(i, c);
            controller.disruption_gate().set_default(honor);
            controller
        });
    /// The volume controller's.
    volume: volume::Config => VolumeController,
        account Some("persistent-volume-binder"),
        start |i, s| on_cache(i, s.volume.clone(), VolumeController::new);
    /// The Job controller's.
    job: job::Config => JobController,
        account Some("job-controller"),
        start |i, s| on_cache(i, s.job.clone(), JobController::new);
    /// The CronJob controller's (its clock, for tests).
    cronjob: cronjob::Config => CronJobController,
        account Some("cronjob-controller"),
        start |i, s| on_cache(i, s.cronjob.clone(), CronJobController::new);
    /// The TTL-after-finished controller's.
    ttl_after_finished: ttl_after_finished::Config => TtlAfterFinishedController,
        account Some("ttl-after-finished-controller"),
        start |i, s| on_cache(i, s.ttl_after_finished.clone(), TtlAfterFinishedController::new);
    /// The endpoints controller's.
    endpoints: endpoints::Config => EndpointsController,
        account Some("endpoint-controller"),
        start |i, s| on_cache(i, s.endpoints.clone(), EndpointsController::new);
    /// The endpointslice controller's.
    endpointslice: endpointslice::Config => EndpointSliceController,
        account Some("endpointslice-controller"),
        start |i, s| on_cache(i, s.endpointslice.clone(), EndpointSliceController::new);
    /// The disruption controller's.
    disruption: disruption::Config => DisruptionController,
        account Some("disruption-controller"),
        start |i, s| on_cache(i, s.disruption.clone(), DisruptionController::new);
    /// The resource quota controller's.
    resourcequota: resourcequota::Config => ResourceQuotaController,
        account Some("resourcequota-controller"),
        start |i, s| on_cache(i, s.resourcequota.clone(), ResourceQuotaController::new);
    /// The ClusterRole aggregation controller's.
    clusterrole_aggregation: clusterrole_aggregation::Config => ClusterRoleAggregationController,
        account Some("clusterrole-aggregation-controller"),
        start |i, s| on_cache(i, s.clusterrole_aggregation.clone(), ClusterRoleAggregationController::new);
}

/// The ServiceAccount in `kube-system` the controller of this name runs as (upstream's, with
/// `--use-service-account-credentials`); `None` for those that use the controller manager's own
/// identity, and for names of no controller.
pub fn service_account(controller: &str) -> Option<&'static str> {
    CONTROLLERS
        .iter()
        .find(|row| row.name == controller)
        .and_then(|row| row.account)
}

/// Every controller's name.
pub fn names() -> Vec<&'static str> {
    CONTROLLERS.iter().map(|row| row.name).collect()
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
/// ([`service_account`]) while all read the shared cache.
pub fn run_as(
    informers: &Informers,
    settings: &Settings,
    accounts: Option<&accounts::ClientFor>,
) -> Result<impl Future<Output = ()> + Send + 'static, UnknownController> {
    let enabled = enabled(settings)?;
    let starts: Vec<(&'static str, Start)> = CONTROLLERS
        .iter()
        .filter(|row| enabled.contains(row.name))
        .map(|row| {
            let informers = match accounts {
                Some(client_for) => informers.acting_as(client_for(row.account)),
                None => informers.clone(),
            };
            (row.name, (row.start)(&informers, settings))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row's ServiceAccount has upstream's bootstrap role, bound to it: a controller added
    /// with an account upstream does not know would run with no rights.
    #[test]
    fn every_account_has_its_bootstrap_role() {
        let policy = authz::bootstrap::policy();
        for row in CONTROLLERS {
            let Some(account) = row.account else { continue };
            let role = format!("system:controller:{account}");
            assert!(
                policy
                    .cluster_roles
                    .iter()
                    .any(|r| r.metadata.name.as_deref() == Some(role.as_str())),
                "{}: no ClusterRole {role}",
                row.name
            );
            let bound = policy.cluster_role_bindings.iter().any(|b| {
                b.role_ref.name == role
                    && b.subjects.iter().flatten().any(|s| {
                        s.kind == "ServiceAccount"
                            && s.name == account
                            && s.namespace.as_deref() == Some("kube-system")
                    })
            });
            assert!(bound, "{}: {role} is not bound to its account", row.name);
        }
        assert_eq!(service_account("job"), Some("job-controller"));
        assert_eq!(service_account("serviceaccount-token"), None);
    }
}
