//! `rollwright rollout ...`: rollouts of Deployments, DaemonSets and StatefulSets.

pub mod cache;
pub mod model;
pub mod pace;
pub mod progress;
pub mod status;

use clap::Subcommand;

/// The `rollout` subcommands.
#[derive(Subcommand, Debug)]
pub enum Rollout {
    /// Follow a rollout until it is done: per revision, pace, ETA and the pods it waits on.
    Status(status::StatusArgs),
}

/// Runs a `rollout` subcommand.
pub async fn run(command: Rollout) -> anyhow::Result<()> {
    match command {
        Rollout::Status(args) => status::run(args).await,
    }
}
