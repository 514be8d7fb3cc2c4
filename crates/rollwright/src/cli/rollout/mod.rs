//! `rollwright rollout ...`: rollouts of Deployments, DaemonSets and StatefulSets.

pub mod cache;
pub mod history;
pub mod model;
pub mod pace;
pub mod pause;
pub mod progress;
pub mod restart;
pub mod revisions;
pub mod rollback;
pub mod status;
pub mod undo;
pub mod watch;

use clap::Subcommand;

/// The `rollout` subcommands.
#[derive(Subcommand, Debug)]
pub enum Rollout {
    /// Follow a rollout until it is done: per revision, pace, ETA and the pods it waits on.
    Status(status::StatusArgs),
    /// Revisions with change cause, age and pods; one revision's template; a diff of two.
    History(history::HistoryArgs),
    /// Roll back to the previous revision, or to --to-revision.
    Undo(undo::UndoArgs),
    /// Pause a rollout (Deployments, and beyond kubectl DaemonSets and StatefulSets).
    Pause(pause::PauseArgs),
    /// Resume a paused rollout.
    Resume(pause::PauseArgs),
    /// Restart every pod through a new revision.
    Restart(restart::RestartArgs),
    /// A full-screen view of a rollout: a cell per node, pod or ordinal, counts per revision,
    /// available pods over time, events; keys to pause, resume and undo.
    Watch(watch::WatchArgs),
}

/// Runs a `rollout` subcommand.
pub async fn run(command: Rollout) -> anyhow::Result<()> {
    match command {
        Rollout::Status(args) => status::run(args).await,
        Rollout::History(args) => history::run(args).await,
        Rollout::Undo(args) => undo::run(args).await,
        Rollout::Pause(args) => pause::run(args, true).await,
        Rollout::Resume(args) => pause::run(args, false).await,
        Rollout::Restart(args) => restart::run(args).await,
        Rollout::Watch(args) => watch::run(args).await,
    }
}
