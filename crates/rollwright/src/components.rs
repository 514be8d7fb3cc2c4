//! The cluster's moving parts besides the API server: simulated nodes, the scheduler and the
//! controllers. Each runs on a `kube::Client`, so the same code starts them in-process for
//! `rollwright up` and against any cluster for `rollwright nodes|scheduler|controllers`.

use kube::Client;
use std::path::PathBuf;
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

/// Settings of the controllers that have any.
#[derive(Clone, Debug, Default)]
pub struct ControllerSettings {
    /// The node lifecycle controller's (grace period before a silent node is `Unknown`).
    pub node_lifecycle: controllers::node_lifecycle::Config,
}

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
    let (tx, rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    if let Some(config) = what.nodes.clone() {
        let profile = match &what.profile {
            Some(path) => nodesim::load_profile(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            None => nodesim::Profile::default(),
        };
        let (client, stop) = (client.clone(), shutdown_signal(&rx));
        tasks.spawn(async move {
            if let Err(e) = nodesim::run(client, config, profile, stop).await {
                tracing::error!(error = %e, "node simulator stopped");
            }
        });
    }
    if let Some(config) = what.scheduler.clone() {
        let (client, stop) = (client.clone(), shutdown_signal(&rx));
        tasks.spawn(async move { scheduler::run(client, config, stop).await });
    }
    if let Some(settings) = &what.controllers {
        for controller in controller_tasks(client.clone(), settings) {
            let stop = shutdown_signal(&rx);
            tasks.spawn(async move {
                tokio::select! {
                    _ = controller => {}
                    _ = stop => {}
                }
            });
        }
    }
    Ok(Running {
        tasks,
        shutdown: tx,
    })
}

/// The controllers, each a future that runs until dropped.
fn controller_tasks(
    client: Client,
    settings: &ControllerSettings,
) -> Vec<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> {
    vec![
        Box::pin(controllers::run_gc(client.clone(), Default::default())),
        Box::pin(controllers::run_pod_gc(client.clone(), Default::default())),
        Box::pin(controllers::run_node_lifecycle(
            client.clone(),
            settings.node_lifecycle.clone(),
        )),
        Box::pin(controllers::replicaset::run(
            client.clone(),
            Default::default(),
        )),
        Box::pin(controllers::deployment::run(
            client.clone(),
            Default::default(),
        )),
        Box::pin(controllers::statefulset::run(
            client.clone(),
            Default::default(),
        )),
        Box::pin(controllers::volume::run(client.clone(), Default::default())),
        // Stopped by dropping, like the others.
        Box::pin(controllers::daemonset::run_daemonset(
            client,
            Default::default(),
            std::future::pending(),
        )),
    ]
}

impl Running {
    /// Signals every part to stop and waits for them.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}
