//! The rollwright CLI: rollouts you can see (`rollout status|history|undo|pause|resume|restart|
//! watch`) and the everyday commands (`get`, `apply`, `delete`, `set image`, `scale`) for any
//! cluster a kubeconfig names. One module per command family; the decisions (what a rollout
//! waits on, its pace, the history table, a revision diff, the screen) are plain functions over
//! plain data in those modules, with the I/O at their edges.

pub mod discovery;
pub mod failure;
pub mod kubeconfig;
pub mod rollout;
pub mod workload;

use clap::Subcommand;

/// The CLI's commands, flattened into the binary's top-level commands.
#[derive(Subcommand)]
pub enum Command {
    /// Rollouts: status, history, undo, pause, resume, restart, watch.
    #[command(subcommand)]
    Rollout(rollout::Rollout),
}

/// Runs one CLI command.
pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Rollout(r) => rollout::run(r).await,
    }
}
