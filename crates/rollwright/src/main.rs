//! `rollwright`: the embedded Kubernetes-compatible control plane and its tools.

use anyhow::Context;
use clap::{Parser, Subcommand};
use rollwright::control_plane::{ControlPlane, Options, StoreKind};
use std::{net::IpAddr, path::PathBuf};

#[derive(Parser)]
#[command(name = "rollwright", version, about = "A Kubernetes workload-rollout system with an embedded control plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct ServeArgs {
    /// Directory for the store, certificates and kubeconfig.
    #[arg(long, default_value = ".rollwright", env = "ROLLWRIGHT_DATA_DIR")]
    data_dir: PathBuf,
    /// Port to listen on; 0 picks a free one (the kubeconfig names it).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Address to bind. Loopback by default; anything else exposes the API beyond this machine.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Store backend.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
}

#[derive(Subcommand)]
enum Command {
    /// Start the whole control plane and run until Ctrl-C or SIGTERM.
    Up(ServeArgs),
    /// Run the API server alone.
    Apiserver(ServeArgs),
    /// Run a benchmark and print its figures.
    Bench {
        #[command(subcommand)]
        scenario: rollwright::bench::Scenario,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Up(args) | Command::Apiserver(args) => serve(args).await,
        Command::Bench { scenario } => rollwright::bench::run(scenario).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let cp = ControlPlane::start(Options {
        data_dir: args.data_dir.clone(),
        bind: args.bind,
        port: args.port,
        store: args.store,
    })
    .await?;
    let kubeconfig = std::fs::canonicalize(&cp.kubeconfig).unwrap_or(cp.kubeconfig.clone());
    println!("rollwright API server listening on https://{}", cp.addr);
    println!("kubeconfig: {}", kubeconfig.display());
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get namespaces");
    shutdown_signal().await.context("waiting for a shutdown signal")?;
    tracing::info!("shutting down");
    cp.stop().await;
    Ok(())
}

async fn shutdown_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}
