//! The cluster's moving parts besides the API server: simulated nodes, the scheduler and the
//! controllers. Each runs on a `kube::Client`, so the same code starts them in-process for
//! `rollwright up` and against any cluster for `rollwright nodes|scheduler|controllers`. The
//! scheduler and the controllers started together read one shared cache
//! ([`informer::Informers`]): one watch per kind for the process.

use informer::Informers;
use kube::Client;
use std::{path::PathBuf, sync::Arc};
use tokio::{sync::watch, task::JoinSet};

/// Which parts to run, and how. `None` leaves a part out.
#[derive(Clone, Debug, Default)]
pub struct Components {
    /// The node simulator.
    pub nodes: Option<nodesim::NodeSim>,
    /// Fault profile for the simulated pods.
    pub profile: Option<PathBuf>,
    /// The scheduler.
    pub scheduler: Option<scheduler::SchedulerConfig>,
    /// The controllers (garbage collector, node lifecycle, workloads).
    pub controllers: Option<ControllerSettings>,
}

/// Which controllers run (`--controllers`) and their settings.
pub type ControllerSettings = controllers::Settings;

impl Components {
    /// Everything, as `rollwright up` runs it, with `nodes` simulated nodes.
    pub fn all(nodes: usize, profile: Option<PathBuf>) -> Self {
        Self {
            nodes: Some(nodesim::NodeSim {
                nodes,
                ..Default::default()
            }),
            profile,
            scheduler: Some(Default::default()),
            controllers: Some(Default::default()),
        }
    }
}

/// The running parts; [`Running::stop`] ends them.
pub struct Running {
    tasks: JoinSet<()>,
    shutdown: watch::Sender<bool>,
}

fn shutdown_signal(rx: &watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Starts the chosen parts on `client`. A fault profile that does not load is an error here, before
/// anything starts.
pub fn start(client: Client, what: &Components) -> anyhow::Result<Running> {
    start_elected(client, what, None)
}

/// Clients acting as a given user: how parts started in the API server's process get their own
/// identities without credentials crossing a socket.
pub type ClientAs = Arc<dyn Fn(authz::UserInfo) -> Client + Send + Sync>;

/// The user kube-controller-manager runs as; its shared informers read with it (upstream grants
/// it `list` and `watch` on everything for that).
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
/// The user kube-scheduler runs as.
const SCHEDULER: &str = "system:kube-scheduler";

/// [`start`], each part with its own identity from `client_as`, as upstream's components run:
/// the shared cache reads as `system:kube-controller-manager`, each controller writes as its
/// ServiceAccount (`kube-system/deployment-controller`...), the scheduler as
/// `system:kube-scheduler`, each simulated node as `system:node:NAME` (its watches read as
/// `rollwright:node-simulator`).
pub fn start_with_identities(what: &Components, client_as: ClientAs) -> anyhow::Result<Running> {
    let manager = client_as(authz::UserInfo::new(CONTROLLER_MANAGER, &[]));
    start_parts(manager, what, None, Some(client_as), None)
}

/// How the scheduler and the controllers are elected when several processes run them.
#[derive(Clone)]
pub struct Election {
    /// The Lease's timings.
    pub config: leader::Config,
    /// The Leases' namespace (kube-controller-manager's `--leader-elect-resource-namespace`).
    pub namespace: String,
    /// The client the elector reads and renews its Lease with (`None`: the part's). Upstream's
    /// leader election has a clientset, and so a rate limiter, of its own, so that a busy
    /// controller's requests never hold a renewal back past the renew deadline.
    pub client: Option<Client>,
}

impl Default for Election {
    fn default() -> Self {
        Self {
            config: leader::Config::default(),
            namespace: "kube-system".to_owned(),
            client: None,
        }
    }
}

/// [`start`], with the scheduler and the controllers each acting only while they hold their Lease
/// (`NAMESPACE/rollwright-scheduler`, `NAMESPACE/rollwright-controllers`) when `election` is
/// given, so that of several processes only one of each acts at a time.
pub fn start_elected(
    client: Client,
    what: &Components,
    election: Option<&Election>,
) -> anyhow::Result<Running> {
    start_parts(client, what, election, None, None)
}

/// [`start_elected`], each controller writing through its own client from `controller_clients`
/// (given the controller's upstream ServiceAccount name, or `None`), as kube-controller-manager
/// gives each controller a clientset, and so a rate limiter, of its own.
pub fn start_with_controller_clients(
    client: Client,
    what: &Components,
    election: Option<&Election>,
    controller_clients: controllers::accounts::ClientFor,
) -> anyhow::Result<Running> {
    start_parts(client, what, election, None, Some(controller_clients))
}

fn start_parts(
    client: Client,
    what: &Components,
    election: Option<&Election>,
    client_as: Option<ClientAs>,
    controller_clients: Option<controllers::accounts::ClientFor>,
) -> anyhow::Result<Running> {
    let (tx, rx) = watch::channel(false);
    // The scheduler writes as itself; the controllers each as their ServiceAccount.
    let scheduler_client = client_as
        .as_ref()
        .map(|f| f(authz::UserInfo::new(SCHEDULER, &[])));
    let accounts: Option<controllers::accounts::ClientFor> = client_as
        .clone()
        .map(|f| {
            let manager = client.clone();
            let for_account: controllers::accounts::ClientFor =
                Arc::new(move |account: Option<&str>| match account {
                    Some(name) => f(service_account_user("kube-system", name)),
                    None => manager.clone(),
                });
            for_account
        })
        .or(controller_clients);
    let mut tasks = JoinSet::new();
    if let Some(config) = what.nodes.clone() {
        let profile = match &what.profile {
            Some(path) => nodesim::load_profile(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            None => nodesim::Profile::default(),
        };
        // Each node acts as its kubelet would (`system:node:NAME`), the shared watches as the
        // simulator's reader (granted by `control_plane::ensure_cluster_objects`).
        let identities = match &client_as {
            Some(f) => {
                let f = f.clone();
                let users = f.clone();
                nodesim::Identities::new(
                    f(nodesim::identity::reader_user()),
                    Arc::new(move |node: &str| f(nodesim::identity::node_user(node))),
                )
                .with_users(Arc::new(move |user| users(user)))
            }
            None => nodesim::Identities::single(client.clone()),
        };
        let stop = shutdown_signal(&rx);
        tasks.spawn(async move {
            if let Err(e) = nodesim::run_as(identities, config, profile, stop).await {
                tracing::error!(error = %e, "node simulator stopped");
            }
        });
    }
    // Unelected, the scheduler and the controllers share one cache; elected, each term starts
    // afresh on a cache of its own, as kube-controller-manager starts its informers only once
    // elected.
    let shared = election.is_none().then(|| Informers::new(client.clone()));
    if let Some(config) = what.scheduler.clone() {
        let (client, stop) = (client.clone(), shutdown_signal(&rx));
        match election {
            Some(election) => {
                let elector = elector(&client, SCHEDULER_LEASE, election)?;
                crate::status_server::Leading::candidate(SCHEDULER_LEASE);
                tasks.spawn(async move {
                    elector
                        .run(stop, || {
                            let leading = crate::status_server::Leading::start(SCHEDULER_LEASE);
                            let run = scheduler::run(
                                Informers::new(client.clone()),
                                config.clone(),
                                std::future::pending::<()>(),
                            );
                            async move {
                                let _leading = leading;
                                run.await
                            }
                        })
                        .await;
                });
            }
            None => {
                let informers = match (&shared, scheduler_client) {
                    (Some(shared), Some(own)) => shared.acting_as(own),
                    (Some(shared), None) => shared.clone(),
                    (None, own) => Informers::new(own.unwrap_or(client)),
                };
                tasks.spawn(async move { scheduler::run(informers, config, stop).await });
            }
        }
    }
    if let Some(settings) = &what.controllers {
        // Checked here, before anything starts: an unknown controller name is an error.
        let informers = shared.unwrap_or_else(|| Informers::new(client.clone()));
        let first: futures::future::BoxFuture<'static, ()> = Box::pin(controllers::run_as(
            &informers,
            settings,
            accounts.as_ref(),
        )?);
        let stop = shutdown_signal(&rx);
        match election {
            Some(election) => {
                let elector = elector(&client, CONTROLLERS_LEASE, election)?;
                crate::status_server::Leading::candidate(CONTROLLERS_LEASE);
                let (client, settings) = (client.clone(), settings.clone());
                let mut first = Some(first);
                tasks.spawn(async move {
                    elector
                        .run(stop, move || {
                            let leading = crate::status_server::Leading::start(CONTROLLERS_LEASE);
                            let run = first.take().map(Ok).unwrap_or_else(|| {
                                start_controllers(&client, &settings, accounts.as_ref())
                            });
                            async move {
                                let _leading = leading;
                                match run {
                                    Ok(controllers) => controllers.await,
                                    Err(e) => tracing::error!(error = %e, "controllers"),
                                }
                            }
                        })
                        .await;
                });
            }
            None => {
                tasks.spawn(async move {
                    // Dropping the controllers (and the last handle on the cache) stops them and
                    // the watches.
                    tokio::select! {
                        _ = first => {}
                        _ = stop => {}
                    }
                });
            }
        }
    }
    Ok(Running {
        tasks,
        shutdown: tx,
    })
}

/// The controllers on a cache of their own, as one future that runs them until dropped.
fn start_controllers(
    client: &Client,
    settings: &ControllerSettings,
    accounts: Option<&controllers::accounts::ClientFor>,
) -> anyhow::Result<futures::future::BoxFuture<'static, ()>> {
    let informers = Informers::new(client.clone());
    Ok(Box::pin(controllers::run_as(
        &informers, settings, accounts,
    )?))
}

/// The user a ServiceAccount's token authenticates as.
fn service_account_user(namespace: &str, name: &str) -> authz::UserInfo {
    authz::UserInfo::new(
        format!("system:serviceaccount:{namespace}:{name}"),
        &[
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{namespace}"),
            authz::AUTHENTICATED_GROUP,
        ],
    )
}

/// The scheduler's Lease.
pub const SCHEDULER_LEASE: &str = "rollwright-scheduler";
/// The controllers' Lease.
pub const CONTROLLERS_LEASE: &str = "rollwright-controllers";

/// A candidate for the Lease `NAMESPACE/NAME`, named after this process.
fn elector(client: &Client, name: &str, election: &Election) -> anyhow::Result<leader::Elector> {
    Ok(leader::Elector::new(
        election.client.clone().unwrap_or_else(|| client.clone()),
        &election.namespace,
        name,
        leader::Elector::unique_identity(name),
        election.config.clone(),
    )?)
}

impl Running {
    /// Signals every part to stop and waits for them.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}
