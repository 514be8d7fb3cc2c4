//! Simulated kubelets. [`run`] registers nodes and then drives every node carrying the
//! `rollwright.io/simulated=true` label, and every pod bound to one, through the API alone: leases
//! renew, pods go Pending -> Running -> Ready with upstream's statuses and events, graceful
//! deletion completes, images change in place, and faults from a [`Profile`] show up as a real
//! kubelet would report them. Because it only uses `kube::Client`s, it runs unchanged against a
//! real cluster (as kwok does): with one client ([`run`]), or with each node acting as its own
//! `system:node:NAME` and the shared watches as a reader of their own ([`run_as`]).

#![warn(missing_docs)]

pub mod bench;
pub mod certgen;
pub use ::command;
pub mod config;
pub mod distribution;
mod engine;
pub mod identity;
pub mod image;
pub mod latency;
pub mod mounts;
pub mod node;
pub mod ops;
pub mod pod;
pub mod probe;
pub mod profile;
pub mod resync;
pub mod stats;
pub mod tokens;
pub mod volumes;
mod writer;

pub use config::{
    BadShard, HEARTBEAT_ANNOTATION, LEASE_NAMESPACE, NodeSim, PRESSURE_ANNOTATION, SIMULATED_LABEL,
    Shard,
};
pub use identity::Identities;
pub use profile::{FAULT_ANNOTATION, Profile, ProfileError};
pub use stats::Stats;

use kube::Client;
use std::sync::Arc;

/// Why the simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{}", api_message(.0))]
    Api(#[from] kube::Error),
    /// An object could not be built.
    #[error("building an object: {0}")]
    Json(#[from] serde_json::Error),
    /// The fault profile is invalid.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A file could not be read.
    #[error("reading {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        error: std::io::Error,
    },
}

/// The server's own message for a refused request (kube's rendering repeats the whole Status).
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("the API server refused: {}", status.message),
        other => format!("API: {other}"),
    }
}

/// Registers `config.nodes` nodes (creating or adopting them), then simulates every simulated
/// node and its pods until `shutdown` completes.
pub async fn run(
    client: Client,
    config: NodeSim,
    profile: Profile,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    run_with_stats(
        client,
        config,
        profile,
        shutdown,
        Arc::new(Stats::default()),
    )
    .await
}

/// [`run`], keeping counters in `stats` so a caller can tell when the simulation has caught up.
pub async fn run_with_stats(
    client: Client,
    config: NodeSim,
    profile: Profile,
    shutdown: impl Future<Output = ()>,
    stats: Arc<Stats>,
) -> Result<(), Error> {
    run_as_with_stats(Identities::single(client), config, profile, shutdown, stats).await
}

/// [`run`], each node registering itself and writing its status, Lease, pods and events through
/// its own client from `identities`, and the shared watches reading through its reader.
pub async fn run_as(
    identities: Identities,
    config: NodeSim,
    profile: Profile,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    run_as_with_stats(
        identities,
        config,
        profile,
        shutdown,
        Arc::new(Stats::default()),
    )
    .await
}

/// [`run_as`], keeping counters in `stats`.
pub async fn run_as_with_stats(
    identities: Identities,
    config: NodeSim,
    profile: Profile,
    shutdown: impl Future<Output = ()>,
    stats: Arc<Stats>,
) -> Result<(), Error> {
    ops::register(&identities, &config).await?;
    let (writer, dispatcher) = writer::Writer::start(
        identities.clone(),
        config.max_in_flight_writes,
        stats.clone(),
    );
    engine::Engine::new(identities, config, profile, writer, stats)
        .run(shutdown)
        .await;
    dispatcher.abort();
    Ok(())
}

/// Reads a profile file.
pub fn load_profile(path: &std::path::Path) -> Result<Profile, Error> {
    let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.display().to_string(),
        error,
    })?;
    Ok(Profile::from_yaml(&text)?)
}
