//! `rollwright chaos`: rollouts under fire.
//!
//! Deployments, DaemonSets and StatefulSets of every update strategy (RollingUpdate with surge or
//! unavailable, Recreate, OnDelete, OrderedReady and Parallel; some rollouts through an image that
//! never pulls) are rolled out again and
//! again while the whole control plane (a child `rollwright up` on one data directory) or only the
//! controllers (a child `rollwright controllers`) are killed with SIGKILL at random moments and
//! started again. An independent watcher in its own process makes the rollouts' writes, records
//! every write the API server acknowledged and checks the invariants of `../shared/SEMANTICS.md`
//! at every event (see the `invariants` module). At the end it looks for every acknowledged write.
//!
//! The run prints rollouts completed, restarts, acknowledged writes lost, invariant violations,
//! duplicate daemon pods and the time to recover after a restart (p50/p99), and fails when a write
//! was lost or an invariant broken. Figures are in RELIABILITY.md with the command.

mod cluster;
mod invariants;
mod watcher;
mod workload;

use anyhow::Context;
use cluster::Cluster;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::{
    Api, Client,
    api::ListParams,
    runtime::{WatchStreamExt, watcher as kube_watcher},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};
use tokio::{io::AsyncReadExt, sync::watch};

/// `rollwright chaos` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// SIGKILLs to deliver.
    #[arg(long, default_value_t = 100)]
    pub kills: usize,
    /// Rollouts to make at least (more follow while kills remain).
    #[arg(long, default_value_t = 40)]
    pub rollouts: usize,
    /// Simulated nodes.
    #[arg(long, default_value_t = 4)]
    pub nodes: usize,
    /// Mean time between kills (each wait is drawn between half and one and a half of it).
    #[arg(long, default_value = "3s", value_parser = crate::duration::parse)]
    pub every: Duration,
    /// The run ends by itself within this time.
    #[arg(long, default_value = "10m", value_parser = crate::duration::parse)]
    pub deadline: Duration,
    /// The share of kills that take down the whole control plane; the others kill only the
    /// controllers.
    #[arg(long, default_value_t = 0.5)]
    pub control_plane_share: f64,
    /// Seed of the kill times, kill kinds and failing rollouts (default: random, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The cluster's data directory (default: a temporary one, kept only if the run fails).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    role: Option<Role>,
}

#[derive(clap::Subcommand, Debug, Clone)]
enum Role {
    /// The independent watcher (started by the run itself).
    #[command(hide = true)]
    Watch(watcher::WatchArgs),
}

/// Time kept back at the end of the run for the rollouts in progress and the final checks.
const RESERVE: Duration = Duration::from_secs(120);
/// How long after a restart the controllers may take to write a status again before the
/// restart counts as having hit an idle cluster.
const PROGRESS_WAIT: Duration = Duration::from_secs(30);

/// Runs the campaign (or, started by it, the watcher).
pub async fn run(args: Args) -> anyhow::Result<()> {
    if let Some(Role::Watch(w)) = args.role {
        return watcher::run(w).await;
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    // Interrupted, the campaign is dropped, and with it the children (they are killed on drop).
    tokio::select! {
        result = campaign(args) => result,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted"),
        _ = term.recv() => anyhow::bail!("terminated"),
    }
}

async fn campaign(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let seed = args.seed.unwrap_or_else(rand::random);
    let temp = match &args.data_dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("creating a data directory")?),
    };
    let dir = args
        .data_dir
        .clone()
        .or_else(|| temp.as_ref().map(|t| t.path().to_path_buf()))
        .context("no data directory")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let profile = dir.join("faults.yaml");
    std::fs::write(
        &profile,
        "seed: 1\nrules:\n- name: broken-images\n  match: {image: \"*broken*\"}\n  fault: imagePullFailure\n",
    )?;
    println!(
        "rollwright chaos: {} kills, {} rollouts at least, {} nodes, seed {seed}, data in {}",
        args.kills,
        args.rollouts,
        args.nodes,
        dir.display()
    );
    let mut cluster = Cluster::start(&dir, args.nodes, profile).await?;
    let client = client(&cluster.kubeconfig()).await?;
    cluster::wait_ready(&client).await?;

    let mut watcher = tokio::process::Command::new(std::env::current_exe()?)
        .args(["chaos", "watch", "--kubeconfig"])
        .arg(cluster.kubeconfig())
        .args(["--nodes", &args.nodes.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(["--rollouts", &args.rollouts.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("watcher.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("starting the watcher")?;
    let stop_watcher = watcher.stdin.take();
    let mut report_out = watcher.stdout.take().context("watcher stdout")?;
    let progress = follow_status(&client);

    let mut rng = StdRng::seed_from_u64(seed);
    let mut control_plane_kills = 0;
    let mut controller_kills = 0;
    let mut api_back = Vec::new();
    let mut acting_again = Vec::new();
    let mut idle = 0;
    let kill_count = watch::Sender::new(0usize);
    let mut measurements = tokio::task::JoinSet::new();
    for k in 0..args.kills {
        let wait = args.every.mul_f64(rng.random_range(0.5..1.5));
        if started.elapsed() + wait + RESERVE > args.deadline {
            println!("  stopping the kills after {k}: the deadline is near");
            break;
        }
        tokio::time::sleep(wait).await;
        if let Ok(Some(status)) = watcher.try_wait() {
            anyhow::bail!(
                "the watcher ended early ({status}); see {}",
                dir.join("watcher.log").display()
            );
        }
        let before = revision(&client).await;
        let killed = Instant::now();
        let whole = rng.random_bool(args.control_plane_share);
        tracing::info!(
            kill = k + 1,
            what = if whole {
                "control plane"
            } else {
                "controllers"
            },
            revision = before,
            "SIGKILL"
        );
        if whole {
            api_back.push(cluster.kill_control_plane(&client).await?);
            control_plane_kills += 1;
        } else {
            cluster.kill_controllers().await?;
            controller_kills += 1;
        }
        // Measured beside the kill loop: ends with the controllers' first status write, or
        // without a figure at the next kill or after PROGRESS_WAIT.
        kill_count.send_replace(k + 1);
        let (mut rx, mut next_kill) = (progress.clone(), kill_count.subscribe());
        measurements.spawn(async move {
            tokio::select! {
                done = tokio::time::timeout(PROGRESS_WAIT, rx.wait_for(|rv| *rv > before)) => {
                    done.ok().and_then(Result::ok).map(|_| killed.elapsed())
                }
                _ = next_kill.changed() => None,
            }
        });
        if (k + 1) % 10 == 0 {
            println!(
                "  {} kills ({control_plane_kills} control plane), {:?} in",
                k + 1,
                started.elapsed()
            );
        }
    }

    while let Some(m) = measurements.join_next().await {
        match m.ok().flatten() {
            Some(d) => acting_again.push(d),
            None => idle += 1,
        }
    }
    // Stop: the watcher finishes the rollouts in progress, checks its ledger and reports.
    drop(stop_watcher);
    let left = args.deadline.saturating_sub(started.elapsed());
    let mut out = String::new();
    let read = tokio::time::timeout(left, report_out.read_to_string(&mut out)).await;
    let _ = watcher.start_kill();
    cluster.stop().await;
    if read.is_err() {
        anyhow::bail!(
            "the watcher did not report before the deadline; see {}",
            dir.join("watcher.log").display()
        );
    }
    let report: watcher::Report = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .with_context(|| {
            format!(
                "the watcher printed no report; see {}",
                dir.join("watcher.log").display()
            )
        })?;

    let duplicates = report
        .breaches
        .iter()
        .filter(|b| b.is_duplicate_daemon_pod())
        .count();
    let violations = report.breaches.len() - duplicates;
    println!("rollwright chaos: done in {:?}", started.elapsed());
    println!(
        "  rollouts completed        {} of {} started ({} through a failing image)",
        report.rollouts_completed, report.rollouts_started, report.rollouts_through_failing_images
    );
    println!(
        "  restarts                  {} ({control_plane_kills} control plane, {controller_kills} controllers only)",
        control_plane_kills + controller_kills
    );
    println!(
        "  acknowledged writes lost  {} of {}",
        report.writes_lost.len(),
        report.writes_acknowledged
    );
    println!("  invariant violations      {violations}");
    println!("  duplicate daemon pods     {duplicates}");
    println!("  watch events checked      {}", report.events_checked);
    println!(
        "  API back after a control-plane kill       {}",
        quantiles(&mut api_back)
    );
    println!(
        "  controllers acting again after a restart  {} ({idle} not measured: nothing to do within {PROGRESS_WAIT:?}, or the next kill came first)",
        quantiles(&mut acting_again)
    );
    for stuck in &report.rollouts_stuck {
        println!("  not completed: {stuck}");
    }
    for lost in &report.writes_lost {
        println!("  lost: {lost}");
    }
    for b in &report.breaches {
        println!("  broken: {} {}: {}", b.workload, b.rule, b.detail);
    }
    if !report.writes_lost.is_empty() || !report.breaches.is_empty() {
        if let Some(t) = temp {
            let kept = t.keep();
            println!("  logs kept in {}", kept.display());
        }
        anyhow::bail!("chaos found lost writes or broken invariants");
    }
    Ok(())
}

/// "p50 1.2s  p99 2.3s (n=40)".
fn quantiles(d: &mut [Duration]) -> String {
    if d.is_empty() {
        return "none measured".into();
    }
    d.sort();
    format!(
        "p50 {:.2?}  p99 {:.2?}  (n={})",
        crate::bench::quantile(d, 0.5),
        crate::bench::quantile(d, 0.99),
        d.len()
    )
}

async fn client(kubeconfig: &std::path::Path) -> anyhow::Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(Client::try_from(cfg)?)
}

/// The API server's revision now (0 if it does not answer).
async fn revision(client: &Client) -> u64 {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), workload::NAMESPACE);
    tokio::time::timeout(
        Duration::from_secs(2),
        leases.list_metadata(&ListParams::default().limit(1)),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .and_then(|l| l.metadata.resource_version)
    .and_then(|rv| rv.parse().ok())
    .unwrap_or(0)
}

/// The revision of the latest status change of a chaos workload (only the controllers write
/// those): how the run sees the controllers at work after a restart.
fn follow_status(client: &Client) -> watch::Receiver<u64> {
    let (tx, rx) = watch::channel(0u64);
    tokio::spawn(follow_status_of::<Deployment>(client.clone(), tx.clone()));
    tokio::spawn(follow_status_of::<DaemonSet>(client.clone(), tx.clone()));
    tokio::spawn(follow_status_of::<StatefulSet>(client.clone(), tx));
    rx
}

async fn follow_status_of<K: workload::Rollable>(client: Client, tx: watch::Sender<u64>) {
    let mut last: std::collections::HashMap<String, serde_json::Value> = Default::default();
    let api: Api<K> = Api::namespaced(client, workload::NAMESPACE);
    let mut s = kube_watcher(api, kube_watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(ev) = s.next().await {
        let Ok(obj) = ev else { continue };
        let status = obj.status_json();
        let meta = obj.meta();
        let name = meta.name.clone().unwrap_or_default();
        if last.get(&name) != Some(&status) {
            last.insert(name, status);
            if let Some(rv) = meta
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse::<u64>().ok())
            {
                tx.send_modify(|r| *r = (*r).max(rv));
            }
        }
    }
}
