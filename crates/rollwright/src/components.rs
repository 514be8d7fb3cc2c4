//! The cluster's moving parts besides the API server: simulated nodes, the scheduler and the
//! controllers. Each runs on a `kube::Client`, so the same code starts them in-process for
//! `rollwright up` and against any cluster for `rollwright nodes|scheduler|controllers`. The
//! scheduler and the controllers started together read one shared cache
//! ([`informer::Informers`]): one watch per kind for the process.

use informer::Informers;
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
        let informers = Informers::new(client.clone());
        let controllers = controllers::run(&informers, settings)?;
        let stop = shutdown_signal(&rx);
        tasks.spawn(async move {
            // Dropping the controllers (and the last handle on the cache) stops them and the
            // watches.
            tokio::select! {
                _ = controllers => {}
                _ = stop => {}
            }
        });
    }
    Ok(Running {
        tasks,
        shutdown: tx,
    })
}

impl Running {
    /// Signals every part to stop and waits for them.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}
