//! `rollwright whatif`: rehearse a change of a real cluster on its snapshot before making it.
//!
//! Each run starts an embedded control plane, loads the snapshot ([`load`]) before anything
//! else runs, then starts the scheduler, the controllers and simulated nodes with the timing the
//! snapshot measured ([`timing`]). Once the loaded cluster has settled (its Ready pods are Ready
//! again and every workload's status is current), it makes the changes ([`change`]) and follows
//! the rollout to its end ([`measure`]). Several runs differ in their timing seed; [`report`]
//! adds them up.
//!
//! Each run has a clock of its own that jumps ahead whenever every component is waiting on a
//! timer, and runs as the real one while any works (a current-thread runtime on tokio's clock,
//! paused whenever it parks; the wall clock read off it by the `clock` crate): a rollout whose
//! pods take 20 s to become Ready rehearses in the time its control plane's work takes, while
//! progress deadlines, `minReadySeconds`, probe periods, grace periods and node heartbeats act
//! as they would, in the same simulated time, and the control plane's own latency counts as it
//! does on a real cluster. `--real-time` runs on the real clock instead, for as long as the
//! rollout takes.
//!
//! The controllers, the scheduler and the simulated kubelets run under client rate limits
//! ([`pace`], `--control-plane`): by default the ones the snapshot measured on the copied
//! cluster, upstream's defaults where it could not, so that a rollout of hundreds of pods is
//! paced as the real control plane paces it. Where the snapshot holds an update it can replay,
//! the controllers' limit is checked against how long that update took ([`calibrate`]). The
//! verdict says which limits it assumed and why.

pub mod bench;
pub mod calibrate;
pub mod change;
pub mod frames;
pub mod load;
pub mod measure;
pub mod pace;
pub mod page;
pub mod report;
pub mod timing;

use crate::cli::snapshot::Snapshot;
use anyhow::Context;
use change::Change;
use measure::{Watch, WorkloadId};
use rollwright::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};
use tokio::time::Instant;

/// `whatif` flags.
#[derive(clap::Args, Debug)]
pub struct WhatifArgs {
    /// The cluster, as `rollwright snapshot` wrote it.
    #[arg(long)]
    pub snapshot: PathBuf,
    /// A change to rehearse: a rollwright verb (`"set image deploy/web web=nginx:1.28"`,
    /// `"rollout restart ds/agent -n kube-system"`, `"scale deploy/web --replicas 20"`,
    /// `"apply -f new.yaml"`) or `"drain NODE"`. Repeat for several, made in order.
    #[arg(long = "change", required = true)]
    pub changes: Vec<String>,
    /// A fault profile for the simulated pods (crates/nodesim/PROFILE.md); its rules come before
    /// the timing the snapshot measured.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Runs, each with another timing seed.
    #[arg(long, default_value_t = 1)]
    pub runs: u64,
    /// Give up on a run after this long.
    #[arg(long, default_value = "10m", value_parser = rollwright::duration::parse)]
    pub timeout: Duration,
    /// Call a rollout stalled when nothing moved for this long.
    #[arg(long, default_value = "60s", value_parser = rollwright::duration::parse)]
    pub stall_after: Duration,
    /// Run on the real clock, as long as the rollout itself takes, instead of the accelerated
    /// one.
    #[arg(long)]
    pub real_time: bool,
    /// Also write the figures, per run and over time, to this file: a self-contained HTML page
    /// with charts if it ends in `.html`, JSON otherwise.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The client rate limits of the rehearsal's controllers, scheduler and kubelets:
    /// `measured` (what the snapshot measured, upstream's defaults where it saw nothing; the
    /// default when the snapshot has measurements), `kube-defaults` (controllers 20/30,
    /// scheduler 50/100, kubelet 50/100), `unlimited`, or per component, e.g.
    /// `controllers=qps=20,burst=30;scheduler=qps=50,burst=100;kubelet=unlimited` (the
    /// components not named as `measured`).
    #[arg(long, value_name = "MODE")]
    pub control_plane: Option<pace::Choice>,
}

/// How long a loaded cluster may take to settle before the change is made anyway.
const SETTLE: Duration = Duration::from_secs(120);

/// Runs `whatif`.
pub async fn run(args: WhatifArgs) -> anyhow::Result<()> {
    if args.runs == 0 {
        anyhow::bail!("--runs must be 1 or more");
    }
    // Each run makes the changes anew; the report says what they did.
    crate::cli::output::quiet();
    let changes: Vec<Change> = args
        .changes
        .iter()
        .map(|c| Change::parse(c))
        .collect::<anyhow::Result<_>>()?;
    let text = std::fs::read_to_string(&args.snapshot)
        .with_context(|| format!("cannot read {}", args.snapshot.display()))?;
    let snapshot: Snapshot = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a snapshot (make one with `rollwright snapshot -o FILE`)",
            args.snapshot.display()
        )
    })?;
    let user_profile: Option<serde_json::Value> = match &args.profile {
        Some(path) => {
            // Checked as the simulator reads it, then kept as a document to add rules to.
            nodesim::load_profile(path).map_err(|e| anyhow::anyhow!("{e}"))?;
            let text = std::fs::read_to_string(path)?;
            Some(
                serde_saphyr::from_str(&text)
                    .with_context(|| format!("reading {}", path.display()))?,
            )
        }
        None => None,
    };
    let limits = Limits {
        stall_after: args.stall_after,
        timeout: args.timeout,
        accelerated: !args.real_time,
    };
    let rates = pace::Rates::resolve(args.control_plane.as_ref(), snapshot.control_plane.as_ref());
    let report = predict(
        &snapshot,
        args.snapshot.display().to_string(),
        &args.changes,
        &changes,
        user_profile.as_ref(),
        args.runs,
        limits,
        &rates,
    )
    .await?;
    if let Some(path) = &args.report {
        let text = if path.extension().is_some_and(|e| e == "html" || e == "htm") {
            page::html(&report)
        } else {
            serde_json::to_string_pretty(&report)? + "\n"
        };
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", report.text());
    Ok(())
}

/// When a run ends without finishing.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Nothing moved for this long.
    pub stall_after: Duration,
    /// The run took this long.
    pub timeout: Duration,
    /// Run on a clock of the run's own that jumps ahead whenever everything waits.
    pub accelerated: bool,
}

/// Rehearses `changes` (as written: `texts`) on `snapshot` (read from `source`) `runs` times,
/// its control plane's clients limited by `rates`.
#[allow(clippy::too_many_arguments)]
pub async fn predict(
    snapshot: &Snapshot,
    source: String,
    texts: &[String],
    changes: &[Change],
    user_profile: Option<&serde_json::Value>,
    runs: u64,
    limits: Limits,
    rates: &pace::Rates,
) -> anyhow::Result<report::Report> {
    let (rules, derived) = timing::rules(snapshot);
    let rates = &calibrate::calibrate(
        snapshot,
        &timing::profile(user_profile, &rules, 1),
        limits,
        rates.clone(),
    )?;
    let mut done = Vec::new();
    for seed in 1..=runs {
        let profile = timing::profile(user_profile, &rules, seed);
        eprintln!("run {seed} of {runs}:");
        let run = if limits.accelerated {
            on_accelerated_clock(snapshot, changes, &profile, seed, limits, rates)?
        } else {
            rehearse(snapshot, changes, &profile, seed, limits, rates).await?
        };
        done.push(run);
    }
    Ok(report::Report::of(
        source,
        texts.to_vec(),
        &derived,
        rates.clone(),
        done,
    ))
}

/// Makes `changes` on the cluster `client` (whose kubeconfig is `kubeconfig`) reaches and
/// follows the rollout they cause, as a rehearsal run does: what a rehearsal is measured against.
pub async fn change_and_follow(
    client: &kube::Client,
    kubeconfig: &std::path::Path,
    watch: &Watch,
    changes: &[Change],
    limits: Limits,
) -> anyhow::Result<measure::Outcome> {
    let before: BTreeMap<WorkloadId, i64> = watch
        .workloads()
        .into_iter()
        .map(|(id, s)| (id, s.generation))
        .collect();
    let refused = Arc::new(Mutex::new(Vec::new()));
    let mut drained: BTreeSet<WorkloadId> = BTreeSet::new();
    let mut drains = Vec::new();
    let old_pods = watch.pod_uids();
    let start = Instant::now();
    for change in changes {
        if let Change::Drain(node) = change {
            drained.extend(watch.on_node(node));
        }
        let owners = owner_finder(watch.workloads());
        if let Some(task) = change
            .make(kubeconfig, client, refused.clone(), owners)
            .await?
        {
            drains.push(task);
        }
    }
    let busy = || {
        drains
            .iter()
            .any(|t: &tokio::task::JoinHandle<()>| !t.is_finished())
    };
    let outcome = measure::follow(
        watch,
        measure::Following {
            before: &before,
            also: &drained,
            busy: &busy,
            evictions: &refused,
            old_pods: &old_pods,
        },
        start,
        limits.stall_after,
        limits.timeout,
    )
    .await
    .context("the changes changed no Deployment, DaemonSet or StatefulSet");
    for task in drains {
        task.abort();
    }
    outcome
}

/// Work the control plane is given to do in real time, beyond the run's own time limits,
/// before a run on the accelerated clock is given up: its clock only moves when every
/// component waits, so a component that never stops working would keep it from moving.
const REAL_TIME_MARGIN: Duration = Duration::from_secs(600);

/// [`rehearse`] on a thread and a runtime of its own, whose clock runs while any task works and
/// is paused while every task waits (tokio's `pause` and `resume`, from the runtime's park and
/// unpark hooks): paused, the runtime jumps it to the next timer instead of sleeping. Only a
/// current-thread runtime can run on such a clock, so the run's control plane, simulated nodes
/// and clients all share one thread.
fn on_accelerated_clock(
    snapshot: &Snapshot,
    changes: &[Change],
    profile: &serde_json::Value,
    seed: u64,
    limits: Limits,
    rates: &pace::Rates,
) -> anyhow::Result<report::Run> {
    let real_limit = limits.timeout + SETTLE * 2 + REAL_TIME_MARGIN;
    let run = || -> anyhow::Result<report::Run> {
        // Frozen while the thread is parked (every task waits), so that it jumps to the next
        // timer; running while it works, so that the control plane's work takes as long in
        // the rehearsal as it does.
        let frozen = Arc::new(AtomicBool::new(false));
        let (parking, unparked) = (frozen.clone(), frozen);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(move || {
                if !parking.swap(true, Ordering::Relaxed) {
                    tokio::time::pause();
                }
            })
            .on_thread_unpark(move || {
                if unparked.swap(false, Ordering::Relaxed) {
                    tokio::time::resume();
                }
            })
            .build()
            .context("a runtime for the rehearsal")?;
        let (give_up, given_up) = tokio::sync::oneshot::channel::<()>();
        let (_running, ended) = std::sync::mpsc::channel::<()>();
        // A real-time watchdog: the run's own clock cannot be trusted to end a run that never
        // lets it move. It goes when the run does (`_running` dropped).
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = ended.recv_timeout(real_limit)
            {
                let _ = give_up.send(());
            }
        });
        runtime.block_on(async {
            tokio::select! {
                run = rehearse(snapshot, changes, profile, seed, limits, rates) => run,
                Ok(()) = given_up => anyhow::bail!(
                    "the rehearsal did not end in {} s of real time: its control plane never went idle",
                    real_limit.as_secs()
                ),
            }
        })
    };
    // The calling runtime's worker waits for the run; `block_in_place` hands its other tasks
    // to another worker meanwhile.
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("rehearsal".into())
                .spawn_scoped(scope, run)
                .context("a thread for the rehearsal")?
                .join()
                .map_err(|_| anyhow::anyhow!("the rehearsal's thread panicked"))?
        })
    })
}

/// One run: a control plane of its own, loaded, settled, changed and followed, its
/// components' clients limited by `rates`.
async fn rehearse(
    snapshot: &Snapshot,
    changes: &[Change],
    profile: &serde_json::Value,
    seed: u64,
    limits: Limits,
    rates: &pace::Rates,
) -> anyhow::Result<report::Run> {
    let dir = tempfile::tempdir().context("a directory for the rehearsal")?;
    let profile_path = dir.path().join("profile.yaml");
    // JSON is YAML: the simulator reads the document as written.
    std::fs::write(&profile_path, profile.to_string())?;
    // The parts are started here rather than by the control plane, which runs its own without
    // client limits: each user's client gets its component's bucket.
    let components = Components {
        nodes: Some(nodesim::NodeSim {
            nodes: 0,
            ..Default::default()
        }),
        profile: Some(profile_path),
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
    };
    let cp = ControlPlane::start(Options {
        data_dir: dir.path().join("cluster"),
        port: 0,
        store: StoreKind::Memory,
        components: Components::default(),
        ..Default::default()
    })
    .await?;
    let client = embedded::client_for(&cp.server);
    // Real time: on the accelerated clock, loading takes none.
    let began = std::time::Instant::now();
    let loaded = load::load(&client, snapshot).await?;
    eprintln!(
        "  loaded {} nodes and {} pods ({} Ready) in {:.1} s",
        loaded.nodes,
        loaded.pods,
        loaded.ready,
        began.elapsed().as_secs_f64()
    );
    for skipped in &loaded.left_out {
        tracing::info!("left out: {skipped}");
    }
    let parts = rollwright::components::start_with_identities(
        &components,
        pace::clients_as(&cp.server, rates),
    )?;
    let watch = Watch::start(client.clone()).await;
    settle(
        &watch,
        &loaded,
        &standing_in(snapshot),
        &healthy_in(snapshot),
    )
    .await;
    quiet(&client).await?;
    eprintln!(
        "  running as in the snapshot after {:.1} s",
        began.elapsed().as_secs_f64()
    );

    let requests_before = requests(&client).await?;
    let old_pods = watch.pod_uids();
    let outcome = change_and_follow(&client, &cp.kubeconfig, &watch, changes, limits).await?;
    let api_requests = requests(&client).await?.saturating_sub(requests_before);
    let created = watch.created_seconds(&old_pods);
    eprintln!(
        "  {} after {:.1} s",
        if outcome.finished {
            "rolled out"
        } else {
            "stopped"
        },
        outcome.seconds
    );
    drop(watch);
    parts.stop().await;
    cp.stop().await;
    Ok(report::Run {
        seed,
        outcome,
        api_requests,
        pace: report::RunPace::of(&created),
    })
}

/// Waits until every node has reported Ready (the simulator took them over, so their first
/// status posts and Leases are written, as on a cluster that has been running), the pods Ready in
/// the snapshot are Ready again, every workload's status is current, counts as many available
/// pods as the snapshot's did and is rolled out if it was, and every PodDisruptionBudget's status
/// is computed and counts as many healthy pods as the snapshot's; or until [`SETTLE`] passes: the
/// rehearsal then starts from what there is, and says so. A change made while a workload is
/// still rolling (once in 40 runs of the suite's drain test, a StatefulSet rolled both its pods
/// right after the load) is rehearsed on a cluster the snapshot does not describe.
async fn settle(
    watch: &Watch,
    loaded: &load::Loaded,
    recorded: &BTreeMap<WorkloadId, (i32, bool)>,
    healthy: &BTreeMap<String, i32>,
) {
    let deadline = Instant::now() + SETTLE;
    loop {
        let behind: Vec<String> = watch
            .workloads()
            .iter()
            .filter(|(id, s)| {
                let (available, done) = recorded.get(*id).copied().unwrap_or((0, false));
                !(s.observed && s.available >= available && (s.done || !done))
            })
            .map(|(id, _)| id.to_string())
            .collect();
        let (nodes, pods) = (watch.ready_nodes(), watch.ready_pods());
        let budgets = watch.budgets_behind(healthy);
        if behind.is_empty()
            && budgets.is_empty()
            && nodes >= loaded.ready_nodes
            && pods >= loaded.ready
        {
            return;
        }
        if Instant::now() >= deadline {
            let none_or = |v: &[String]| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(", ")
                }
            };
            eprintln!(
                "  warning: the loaded cluster did not settle in {} s ({nodes} of {} nodes and {pods} of {} pods Ready; workloads not yet as recorded: {}; budgets not yet current: {}); rehearsing from there",
                SETTLE.as_secs(),
                loaded.ready_nodes,
                loaded.ready,
                none_or(&behind),
                none_or(&budgets),
            );
            return;
        }
        watch.changed(Duration::from_millis(500)).await;
    }
}

/// A settled cluster writes little: what a running cluster writes while nothing rolls.
const QUIET_REQUESTS_PER_SECOND: u64 = 50;

/// Waits until the control plane has worked through the load (its controllers' first syncs,
/// the simulator's first posts): fewer than [`QUIET_REQUESTS_PER_SECOND`] requests, the nodes'
/// upkeep aside, in a second; or until [`SETTLE`] passes. A change made while the load is still
/// being digested competes with it for the CPU, and rolls slower than on the real cluster,
/// which had long digested it.
async fn quiet(client: &kube::Client) -> anyhow::Result<()> {
    let deadline = Instant::now() + SETTLE;
    let mut last = requests(client).await?;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = requests(client).await?;
        if now.saturating_sub(last) < QUIET_REQUESTS_PER_SECOND {
            return Ok(());
        }
        tracing::debug!(requests = now - last, "still settling");
        last = now;
    }
    Ok(())
}

/// Each workload's available pods as the snapshot recorded them.
/// Each PodDisruptionBudget's `currentHealthy` in the snapshot, by `namespace/name`.
fn healthy_in(snapshot: &Snapshot) -> BTreeMap<String, i32> {
    let items = snapshot
        .objects
        .get("podDisruptionBudgets")
        .and_then(serde_json::Value::as_array);
    items
        .into_iter()
        .flatten()
        .map(|b| {
            let text = |p: &str| {
                b.pointer(p)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
            };
            let healthy = b
                .pointer("/status/currentHealthy")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0);
            (
                format!("{}/{}", text("/metadata/namespace"), text("/metadata/name")),
                i32::try_from(healthy).unwrap_or(i32::MAX),
            )
        })
        .collect()
}

/// Each workload's available pods in the snapshot, and whether it had rolled out.
fn standing_in(snapshot: &Snapshot) -> BTreeMap<WorkloadId, (i32, bool)> {
    fn each<K: serde::de::DeserializeOwned + kube::Resource>(
        snapshot: &Snapshot,
        key: &str,
        kind: &'static str,
        standing: fn(&K) -> measure::Standing,
        out: &mut BTreeMap<WorkloadId, (i32, bool)>,
    ) {
        let items = snapshot
            .objects
            .get(key)
            .and_then(serde_json::Value::as_array);
        for object in items.into_iter().flatten() {
            if let Ok(w) = serde_json::from_value::<K>(object.clone()) {
                let meta = w.meta();
                let id = WorkloadId {
                    kind,
                    namespace: meta.namespace.clone().unwrap_or_default(),
                    name: meta.name.clone().unwrap_or_default(),
                };
                let s = standing(&w);
                out.insert(id, (s.available, s.done));
            }
        }
    }
    let mut out = BTreeMap::new();
    each(
        snapshot,
        "deployments",
        "deployment",
        measure::deployment,
        &mut out,
    );
    each(
        snapshot,
        "daemonSets",
        "daemonset",
        measure::daemonset,
        &mut out,
    );
    each(
        snapshot,
        "statefulSets",
        "statefulset",
        measure::statefulset,
        &mut out,
    );
    out
}

/// Maps a pod to the workload whose selector picks it (for refused evictions).
fn owner_finder(
    workloads: BTreeMap<WorkloadId, measure::Standing>,
) -> impl Fn(&k8s_openapi::api::core::v1::Pod) -> Option<WorkloadId> + Send + 'static {
    move |pod| {
        workloads
            .iter()
            .find(|(id, s)| measure::owns(id, s, pod))
            .map(|(id, _)| id.clone())
    }
}

/// The API requests the server has served so far (`apiserver_request_total`, summed), less
/// the nodes' own upkeep (Lease renewals and Node status posts), which a cluster pays whether
/// anything rolls or not.
async fn requests(client: &kube::Client) -> anyhow::Result<u64> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .context("a metrics request")?;
    let text = client.request_text(request).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| !l.contains(r#"resource="leases""#) && !l.contains(r#"resource="nodes""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}
