//! The rollwright CLI: rollouts you can see (`rollout status|history|undo|pause|resume|restart|
//! watch`) and the everyday commands (`get`, `apply`, `delete`, `set image`, `scale`) for any
//! cluster a kubeconfig names. One module per command family; the decisions (what a rollout
//! waits on, its pace, the history table, a revision diff, the screen) are plain functions over
//! plain data in those modules, with the I/O at their edges.

pub mod apply;
pub mod change_cause;
pub mod delete;
pub mod discovery;
pub mod failure;
pub mod get;
pub mod kubeconfig;
pub mod manifest;
pub mod output;
pub mod rollout;
pub mod scale;
pub mod set_image;
pub mod snapshot;
pub mod three_way;
pub mod whatif;
pub mod workload;

use clap::Subcommand;

/// The CLI's commands, flattened into the binary's top-level commands.
#[derive(Subcommand)]
pub enum Command {
    /// Rollouts: status, history, undo, pause, resume, restart, watch.
    #[command(subcommand)]
    Rollout(rollout::Rollout),
    /// Set fields of a workload: `set image`.
    #[command(subcommand)]
    Set(set_image::Set),
    /// Change the number of pods of a Deployment or StatefulSet.
    Scale(scale::ScaleArgs),
    /// List objects, or show them (-o wide|yaml|json|name).
    Get(get::GetArgs),
    /// Create or update objects from manifests (client-side apply).
    Apply(apply::ApplyArgs),
    /// Delete objects, and wait until they are gone.
    Delete(delete::DeleteArgs),
    /// Read a cluster's nodes, workloads, pods and budgets (list only, never Secrets) into one
    /// JSON file, for rehearsing a rollout of it.
    Snapshot(snapshot::SnapshotArgs),
    /// Rehearse a change (set image, rollout restart, scale, apply, drain) on a snapshot: how
    /// long the rollout takes, how low availability dips, where and why it stalls.
    Whatif(whatif::WhatifArgs),
}

/// Runs one CLI command.
pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Rollout(r) => rollout::run(r).await,
        Command::Set(s) => set_image::run(s).await,
        Command::Scale(args) => scale::run(args).await,
        Command::Get(args) => get::run(args).await,
        Command::Apply(args) => apply::run(args).await,
        Command::Delete(args) => delete::run(args).await,
        Command::Snapshot(args) => snapshot::run(args).await,
        Command::Whatif(args) => Box::pin(whatif::run(args)).await,
    }
}
