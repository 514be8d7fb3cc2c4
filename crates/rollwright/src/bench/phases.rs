//! `rollwright bench phases`: issue 15's four rollout phases (a DaemonSet on every node, its image
//! update with maxUnavailable 10%, a 2,000-replica Deployment, its rolling update 25%/25%), and
//! with `--statefulset-replicas N` two more (a Parallel StatefulSet, its image rolled with
//! `maxUnavailable`), each timed from the request to the moment a watch shows the object's status
//! done (`kubectl rollout status`'s test). The benchmark talks HTTPS, making the requests kubectl
//! would (`apply` is a create, `set image` a strategic merge patch of the container's image).
//!
//! With pods that take time to start and become Ready (`--start-ms`, `--readiness-ms`; issue 42
//! asks for 5s and 10s), each phase also prints its physical limit (its waves times a pod's start
//! and readiness, see [`ideal`]) and the overhead per wave: what the control plane adds on top of
//! the waiting, which is the figure to compare between rollwright and upstream.
//!
//! By default one process runs everything `rollwright up --nodes N --profile P` runs (API server
//! on a durable SQLite store, simulated nodes, scheduler, controllers, all on in-process clients
//! over the shared cache), with a fault profile of zero start and readiness delays and the chosen
//! `graceScale`. With `--kubeconfig FILE` the phases run against a cluster already running, its
//! N nodes registered: upstream's control plane with `rollwright nodes` as its kubelets, or
//! `rollwright up` as a process of its own (`tools/conformance perf` starts both). The benchmark
//! does not own that cluster's processes, so it measures those named by `--pid NAME=PID` from
//! `/proc`, as `ps` does.
//!
//! Per phase it prints wall seconds, each measured process's CPU seconds and peak RSS, and the
//! API requests the server counted (`apiserver_request_total` on `/metrics`, which rollwright and
//! kube-apiserver both serve). It prints no upstream figures: a ratio to figures taken on another
//! machine, on another day, misleads (issue 42: one fixed reference said 11.8x where upstream run
//! beside rollwright on the same machine and hour gave 5.8x). `tools/conformance perf` runs both
//! sides alternately in one sitting and `tools/perf-table.py` prints them side by side, from the
//! JSON line `--json` adds per phase.

use super::{
    aftermath,
    budget::CONTROL_PLANE,
    ideal::{self, Limit, PodTimes},
    meter::{BenchEtcd, ProcessUse, Watched, delta, processes_json, request_counts, round3},
    statefulset,
};
use crate::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use anyhow::Context as _;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    core::v1::{Namespace, Node, ServiceAccount},
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::{
    collections::HashSet,
    fmt::{Debug, Write as _},
    path::PathBuf,
    time::{Duration, Instant},
};

/// Options of the phases benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct PhasesBench {
    /// Simulated nodes (the DaemonSet runs a pod on each). With `--kubeconfig`: the cluster's
    /// nodes, all of which must become Ready before the first phase.
    #[arg(long, default_value_t = 500)]
    nodes: usize,
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 2_000)]
    replicas: i32,
    /// Replicas of a Parallel StatefulSet created and then rolled after the Deployment's phases;
    /// 0 (the default) runs only the four phases.
    #[arg(long, default_value_t = 0)]
    statefulset_replicas: i32,
    /// The StatefulSet's rolling update's `maxUnavailable` (`10%` or a count). Upstream keeps it
    /// only with the MaxUnavailableStatefulSet feature gate (`tools/conformance` turns it on);
    /// without it upstream rolls one pod at a time, which the phase then says.
    #[arg(long, default_value = "10%")]
    statefulset_max_unavailable: String,
    /// Milliseconds from a pod's binding to its containers running (`startDelay`). In this
    /// process the simulated kubelets are given it; with `--kubeconfig` the cluster's own kubelets
    /// decide, and this says what they were given, so that the ideal can be computed.
    #[arg(long, default_value_t = 0)]
    start_ms: u64,
    /// Milliseconds from a pod's containers running to it being Ready (`readinessDelay`), given to
    /// the kubelets or stated as `--start-ms` is. With both 0 (the default) there is no ideal to
    /// print: the whole time is the control plane's work.
    #[arg(long, default_value_t = 0)]
    readiness_ms: u64,
    /// The simulated kubelets' `graceScale`: 0 ends graceful deletions at once, as upstream's
    /// simulator did in issue 24's run; nodesim's default is 0.01 (a 30s grace takes 0.3s). With
    /// `--kubeconfig` the cluster's own kubelets decide (`tools/conformance perf` gives both
    /// sides a profile with `graceScale: 0`).
    #[arg(long, default_value_t = 0.0, conflicts_with = "kubeconfig")]
    grace_scale: f64,
    /// Data directory (default: a fresh temporary one, removed afterwards).
    #[arg(long, conflicts_with = "kubeconfig")]
    data_dir: Option<PathBuf>,
    /// Give up after this many seconds per phase.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Store backend (the issue's figures are on SQLite).
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite, conflicts_with = "kubeconfig")]
    store: StoreKind,
    /// With `--store etcd`: the members' client URLs (default: a one-member etcd on loopback,
    /// started for the run; its CPU is printed apart, as it is another process).
    #[arg(long, value_delimiter = ',', conflicts_with = "kubeconfig")]
    etcd_servers: Vec<String>,
    /// Run the phases against this cluster (its nodes already registered) instead of a control
    /// plane in this process.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// With `--kubeconfig`: a process of that cluster to measure, as NAME=PID (repeat for each):
    /// its CPU seconds (utime + stime) and its peak RSS in each phase (VmHWM, reset at the phase's
    /// start, which needs root or the process's owner).
    #[arg(long = "pid", value_name = "NAME=PID", requires = "kubeconfig")]
    pids: Vec<Watched>,
    /// Also print each phase's figures as one JSON line (what `tools/perf-table.py` reads).
    #[arg(long)]
    json: bool,
    /// Seconds to wait after the nodes are Ready and before the first phase, so that the
    /// cluster's own start-up is not counted in it: a kube-controller-manager started a few
    /// seconds before still taints, annotates and lists the new nodes and makes its controllers'
    /// ServiceAccounts. The second half of the wait is measured as the processes' idle CPU.
    #[arg(long, default_value_t = 0)]
    settle_secs: u64,
}

/// The namespace of both workloads.
const NAMESPACE: &str = "perf";
/// The DaemonSet's name.
const DAEMONSET: &str = "perf-ds";
/// The Deployment's name.
const DEPLOYMENT: &str = "perf-deploy";
/// The StatefulSet's name.
const STATEFULSET: &str = "perf-sts";
/// The pods' `terminationGracePeriodSeconds`, which `graceScale` shortens.
const GRACE_SECONDS: u64 = 30;
/// The DaemonSet's rolling update: issue 15's maxUnavailable, no surge.
const DAEMONSET_MAX_UNAVAILABLE: &str = "10%";
/// The Deployment's rolling update: issue 15's maxSurge and maxUnavailable.
const DEPLOYMENT_MAX_SURGE: &str = "25%";
const DEPLOYMENT_MAX_UNAVAILABLE: &str = "25%";
/// The image both start with, and the one `set image` moves them to.
const IMAGE: &str = "registry.k8s.io/pause:3.9";
const NEXT_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// The longest a phase's aftermath is waited for.
const AFTERMATH_LIMIT: Duration = Duration::from_secs(60);

/// One phase as planned before it runs.
#[derive(Clone, Debug)]
struct Phase {
    name: String,
    /// Its physical limit; none when pods start and become Ready at once, where the ideal is 0
    /// and the whole time is work.
    limit: Option<Limit>,
    /// The most pods the cluster holds during it, for the memory budget.
    pods: usize,
}

impl PhasesBench {
    /// A pod's times as the kubelets were given them (a deleted pod's grace scaled as the
    /// simulator runs it; with `--kubeconfig` `graceScale` is taken to be 0, as `tools/conformance
    /// perf` gives both sides).
    fn times(&self) -> PodTimes {
        PodTimes {
            start: Duration::from_millis(self.start_ms),
            readiness: Duration::from_millis(self.readiness_ms),
            grace: Duration::from_secs(GRACE_SECONDS).mul_f64(self.grace_scale.max(0.0)),
            ..Default::default()
        }
    }

    /// The phases in the order they run, each with its waves and the pods it holds. A create is
    /// one wave (every pod at once); the DaemonSet's and the StatefulSet's updates delete a pod
    /// before creating its replacement, so their waves also wait out the old pod's grace; the
    /// Deployment's new pods do not wait for the old ones to go.
    fn plan(&self) -> Vec<Phase> {
        let times = self.times();
        let timed = !(times.start + times.readiness).is_zero();
        let limit = |waves: Option<u32>, per_wave: Duration| {
            waves
                .filter(|_| timed)
                .map(|waves| Limit { waves, per_wave })
        };
        let nodes = i32::try_from(self.nodes).unwrap_or(i32::MAX);
        let replicas = usize::try_from(self.replicas).unwrap_or(0);
        // The Deployment's pods beside the DaemonSet's, with its 25% surge.
        let deployment = self.nodes + replicas + replicas.div_ceil(4);
        let mut plan = vec![
            Phase {
                name: "DaemonSet on all nodes: apply -> all available".into(),
                limit: limit(Some(1), times.until_available()),
                pods: self.nodes,
            },
            Phase {
                name: format!("DaemonSet image update, maxUnavailable {DAEMONSET_MAX_UNAVAILABLE}"),
                limit: limit(
                    ideal::daemonset_waves(nodes, DAEMONSET_MAX_UNAVAILABLE),
                    times.replace_in_place(),
                ),
                pods: self.nodes,
            },
            Phase {
                name: "Deployment: apply -> available".into(),
                limit: limit(Some(1), times.until_available()),
                pods: deployment,
            },
            Phase {
                name: format!(
                    "Deployment rolling update {DEPLOYMENT_MAX_SURGE}/{DEPLOYMENT_MAX_UNAVAILABLE}"
                ),
                limit: limit(
                    ideal::deployment_rollout_waves(
                        self.replicas,
                        DEPLOYMENT_MAX_SURGE,
                        DEPLOYMENT_MAX_UNAVAILABLE,
                    ),
                    times.until_available(),
                ),
                pods: deployment,
            },
        ];
        if self.statefulset_replicas > 0 {
            // The StatefulSet's pods beside the DaemonSet's and the rolled Deployment's; its
            // update surges none.
            let pods =
                self.nodes + replicas + usize::try_from(self.statefulset_replicas).unwrap_or(0);
            plan.push(Phase {
                name: "StatefulSet (Parallel): apply -> all ready".into(),
                limit: limit(Some(1), times.until_available()),
                pods,
            });
            plan.push(Phase {
                name: format!(
                    "StatefulSet image update, maxUnavailable {}",
                    self.statefulset_max_unavailable
                ),
                limit: limit(
                    ideal::statefulset_waves(
                        self.statefulset_replicas,
                        &self.statefulset_max_unavailable,
                    ),
                    times.replace_in_place(),
                ),
                pods,
            });
        }
        plan
    }

    /// The pods' times, as the run's first line states them.
    fn delays(&self) -> String {
        format!(
            "pods start {}ms after binding and are Ready {}ms later",
            self.start_ms, self.readiness_ms
        )
    }

    /// The StatefulSet the run makes, if any, as the first line states it.
    fn statefulset(&self) -> String {
        if self.statefulset_replicas > 0 {
            format!(
                ", a {}-replica StatefulSet (maxUnavailable {})",
                self.statefulset_replicas, self.statefulset_max_unavailable
            )
        } else {
            String::new()
        }
    }
}

/// What the table says instead of an upstream column.
const SIDE_BY_SIDE: &str = "no upstream ran in this sitting, so there is no ratio: `tools/conformance perf` (after `tools/conformance build`) runs upstream's control plane and `rollwright up` alternately on this machine and prints both side by side";

/// A process whose CPU and peak RSS each phase reports.
struct Measuring {
    process: Watched,
    /// Whether it runs rollwright's whole control plane, which [`CONTROL_PLANE`]'s memory
    /// budget is for.
    control_plane: bool,
}

/// The cluster the phases run on.
struct Target {
    client: kube::Client,
    measuring: Vec<Measuring>,
    /// The control plane this process runs, stopped at the end; none with `--kubeconfig`.
    own: Option<Own>,
}

impl Target {
    /// The processes each phase measures.
    fn processes(&self) -> impl Iterator<Item = &Watched> {
        self.measuring.iter().map(|m| &m.process)
    }
}

/// A control plane this process started, with what it needs until it stops.
struct Own {
    cp: ControlPlane,
    etcd: Option<BenchEtcd>,
    _dir: tempfile::TempDir,
}

impl Target {
    /// The control plane in this process, as `rollwright up --nodes N --profile P` runs it, P
    /// setting the start and readiness delays and the grace scale.
    async fn in_process(b: &PhasesBench) -> anyhow::Result<Self> {
        let tmp = tempfile::tempdir()?;
        let dir = b
            .data_dir
            .clone()
            .unwrap_or_else(|| tmp.path().to_path_buf());
        std::fs::create_dir_all(&dir)?;
        let profile = tmp.path().join("phases-profile.yaml");
        std::fs::write(
            &profile,
            format!(
                "startDelay: {}ms\nreadinessDelay: {}ms\ngraceScale: {}\n",
                b.start_ms, b.readiness_ms, b.grace_scale
            ),
        )?;
        let etcd = match (b.store, b.etcd_servers.is_empty()) {
            (StoreKind::Etcd, true) => Some(BenchEtcd::start().await?),
            _ => None,
        };
        let cp = ControlPlane::start(Options {
            data_dir: dir,
            port: 0,
            store: b.store,
            etcd_servers: etcd.as_ref().map_or(b.etcd_servers.clone(), |e| e.urls()),
            components: Components::all(b.nodes, Some(profile)),
            ..Default::default()
        })
        .await?;
        let client = cp.client().await?;
        let mut measuring = vec![Measuring {
            process: Watched {
                name: "this process".into(),
                pid: std::process::id(),
            },
            control_plane: true,
        }];
        if let Some(pid) = etcd.as_ref().and_then(BenchEtcd::pid) {
            measuring.push(Measuring {
                process: Watched {
                    name: "etcd".into(),
                    pid,
                },
                control_plane: false,
            });
        }
        let store = match b.store {
            StoreKind::Sqlite => "SQLite store (durable)",
            StoreKind::Etcd => "etcd store",
            StoreKind::Memory => "memory store (not durable)",
        };
        println!(
            "rollwright bench phases: {} simulated nodes, {} replicas{}, {}, graceScale {}, {store}, in this process, kubectl-equivalent requests over HTTPS; load average {} at start",
            b.nodes,
            b.replicas,
            b.statefulset(),
            b.delays(),
            b.grace_scale,
            load_average()
        );
        Ok(Self {
            client,
            measuring,
            own: Some(Own {
                cp,
                etcd,
                _dir: tmp,
            }),
        })
    }

    /// The cluster `kubeconfig` names, measuring the processes `pids` name.
    async fn external(b: &PhasesBench, kubeconfig: &std::path::Path) -> anyhow::Result<Self> {
        let (config, source) =
            restclient::config::Inference::from_env(Some(kubeconfig.to_path_buf()))
                .load()
                .await?;
        let server = config.cluster_url.clone();
        let client = kube::Client::try_from(config)?;
        let measuring: Vec<Measuring> = b
            .pids
            .iter()
            .map(|p| Measuring {
                control_plane: p.runs_up(),
                process: p.clone(),
            })
            .collect();
        let names: Vec<String> = measuring.iter().map(|m| m.process.to_string()).collect();
        println!(
            "rollwright bench phases: the cluster at {server} ({source}), {} nodes, {} replicas{}, its kubelets said to be given: {} (the ideal assumes it), kubectl-equivalent requests over HTTPS; measuring {}; load average {} at start",
            b.nodes,
            b.replicas,
            b.statefulset(),
            b.delays(),
            if names.is_empty() {
                "no process (give --pid NAME=PID)".to_string()
            } else {
                names.join(", ")
            },
            load_average()
        );
        Ok(Self {
            client,
            measuring,
            own: None,
        })
    }

    /// Stops what this process started.
    async fn stop(self) {
        if let Some(own) = self.own {
            if let Some(etcd) = &own.etcd {
                println!("the run's {}", etcd.report());
            }
            own.cp.stop().await;
        }
    }
}

/// What one phase measured.
#[derive(Clone)]
struct Measured {
    wall: f64,
    /// Seconds after the rollout was done that its Events went on being written (the CPU
    /// figures include them and one quiet second more; `aftermath`).
    aftermath: f64,
    /// Requests by verb and resource, largest first; why not, when the server's counters could
    /// not be read.
    requests: Result<Vec<(u64, String, String)>, String>,
    /// Each measured process's use, in `--pid` order.
    processes: Vec<(String, ProcessUse)>,
}

impl Measured {
    fn cpu(&self) -> f64 {
        self.processes.iter().map(|(_, u)| u.cpu).sum()
    }

    /// The sum of each process's peak: an upper bound on their peak together, since each may
    /// peak at a different moment.
    fn peak_rss_mib(&self) -> f64 {
        self.processes.iter().map(|(_, u)| u.peak_rss_mib).sum()
    }

    fn requests_total(&self) -> Option<u64> {
        self.requests
            .as_ref()
            .ok()
            .map(|r| r.iter().map(|(n, ..)| n).sum())
    }

    /// The phase as one JSON line for `tools/perf-table.py`; with a physical limit, also its
    /// ideal, waves and overhead per wave (absent otherwise, so that runs without delays read as
    /// before).
    fn json(&self, index: usize, phase: &Phase) -> serde_json::Value {
        let mut line = json!({
            "bench": "phases",
            "phase": index + 1,
            "name": phase.name,
            "wall_s": round3(self.wall),
            "aftermath_s": round3(self.aftermath),
            "requests": self.requests_total(),
            "processes": processes_json(&self.processes, "peak_of_phase"),
        });
        if let (Some(limit), Some(fields)) = (phase.limit, line.as_object_mut()) {
            fields.insert("ideal_s".into(), json!(round3(limit.ideal().as_secs_f64())));
            fields.insert("waves".into(), json!(limit.waves));
            fields.insert(
                "overhead_per_wave_s".into(),
                json!(round3(limit.overhead_per_wave(self.wall_time()))),
            );
        }
        line
    }

    /// The measured wall time as a duration, for [`Limit`].
    fn wall_time(&self) -> Duration {
        Duration::try_from_secs_f64(self.wall).unwrap_or_default()
    }
}

/// The 1-minute load average, to note beside the figures (the machine is shared).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Runs `act` and waits until `done` holds for the object `name` in `api`: one phase, measured.
/// The server's request counters are read outside the timed window: upstream's `/metrics` is
/// megabytes, and reading it is not the phase's work.
async fn phase<K, A, D>(
    target: &Target,
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    act: A,
    mut done: D,
) -> anyhow::Result<Measured>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    A: Future<Output = anyhow::Result<()>>,
    D: FnMut(&K) -> bool,
{
    let before = request_counts(&target.client).await;
    let starts = Watched::start_all(target.processes())?;
    let at = Instant::now();
    act.await?;
    embedded::wait_until(api, name, timeout, |o: &K| {
        o.meta().name.as_deref() == Some(name) && done(o)
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let wall = at.elapsed().as_secs_f64();
    // The phase's CPU is what it caused, the Events its kubelets are still writing included.
    let aftermath = aftermath::events_settled(&target.client, NAMESPACE, AFTERMATH_LIMIT).await?;
    let processes = Watched::finish_all(target.processes(), starts)?;
    let after = request_counts(&target.client).await;
    let requests = match (before, after) {
        (Ok(before), Ok(after)) => Ok(delta(&before, &after)),
        (Err(e), _) | (_, Err(e)) => Err(format!("{e:#}")),
    };
    Ok(Measured {
        wall,
        aftermath: aftermath.as_secs_f64(),
        requests,
        processes,
    })
}

/// A workload's first phase: `manifest` created (`kubectl apply` of a new object) until `done`.
async fn create<K>(
    target: &Target,
    api: &Api<K>,
    manifest: &K,
    timeout: Duration,
    done: impl FnMut(&K) -> bool,
) -> anyhow::Result<Measured>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug + Send + 'static,
{
    let name = manifest.meta().name.clone().unwrap_or_default();
    let act = async {
        api.create(&PostParams::default(), manifest).await?;
        Ok(())
    };
    phase(target, api, &name, timeout, act, done).await
}

/// A workload's second phase: its container's image set (`kubectl set image`) until `done`.
async fn roll<K>(
    target: &Target,
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    done: impl FnMut(&K) -> bool,
) -> anyhow::Result<Measured>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let act = async {
        api.patch(name, &PatchParams::default(), &set_image())
            .await?;
        Ok(())
    };
    phase(target, api, name, timeout, act, done).await
}

/// `kubectl rollout status` for a DaemonSet: the spec observed and every node running an
/// updated, available pod.
fn daemonset_done(ds: &DaemonSet, nodes: usize) -> bool {
    let Some(s) = &ds.status else { return false };
    let desired = i32::try_from(nodes).unwrap_or(i32::MAX);
    s.observed_generation.unwrap_or(0) >= ds.metadata.generation.unwrap_or(0)
        && s.desired_number_scheduled == desired
        && s.updated_number_scheduled == Some(desired)
        && s.number_available == Some(desired)
}

/// `kubectl rollout status` for a Deployment: the spec observed, every replica updated and
/// available, no old replica left.
fn deployment_done(d: &Deployment, replicas: i32) -> bool {
    let Some(s) = &d.status else { return false };
    s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas == Some(replicas)
        && s.available_replicas == Some(replicas)
        && s.replicas == Some(replicas)
}

fn daemonset() -> anyhow::Result<DaemonSet> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": DAEMONSET, "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": DAEMONSET}},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": DAEMONSET_MAX_UNAVAILABLE,
                                                 "maxSurge": 0}},
            "template": {
                "metadata": {"labels": {"app": DAEMONSET}},
                "spec": pod_spec(),
            },
        },
    }))?)
}

fn deployment(replicas: i32) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": DEPLOYMENT}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": DEPLOYMENT_MAX_SURGE,
                                           "maxUnavailable": DEPLOYMENT_MAX_UNAVAILABLE}},
            "template": {
                "metadata": {"labels": {"app": DEPLOYMENT}},
                "spec": pod_spec(),
            },
        },
    }))?)
}

/// Every workload's pods: one `pause` container, which [`set_image`] moves to the next image.
fn pod_spec() -> serde_json::Value {
    json!({"terminationGracePeriodSeconds": GRACE_SECONDS,
           "containers": [{"name": "pause", "image": IMAGE}]})
}

/// `kubectl set image <kind>/<name> pause=<image>`: a strategic merge patch of the container.
fn set_image() -> Patch<serde_json::Value> {
    Patch::Strategic(json!({"spec": {"template": {"spec": {
        "containers": [{"name": "pause", "image": NEXT_IMAGE}]}}}}))
}

/// Runs the phases and prints their figures.
pub async fn run(b: PhasesBench) -> anyhow::Result<()> {
    let target = match &b.kubeconfig {
        Some(kubeconfig) => Target::external(&b, kubeconfig).await?,
        None => Target::in_process(&b).await?,
    };
    let control_plane: Vec<bool> = target.measuring.iter().map(|m| m.control_plane).collect();
    let mut plan = b.plan();
    let result = run_phases(&b, &target, &mut plan).await;
    println!("load average {} at the end", load_average());
    target.stop().await;
    let results = result?;
    print!("{}", table(&results, &plan));
    print!("{}", limits(&results, &plan, &b));
    print!("{}", memory(&results, &plan, &control_plane));
    print!("{}", requests(&results, &plan));
    println!("\n{SIDE_BY_SIDE}");
    if b.json {
        for (i, (m, p)) in results.iter().zip(&plan).enumerate() {
            println!("{}", m.json(i, p));
        }
    }
    Ok(())
}

/// Waits for the nodes, makes the namespace, runs the phases `plan` lists (correcting the
/// StatefulSet update's waves if the server dropped its `maxUnavailable`).
async fn run_phases(
    b: &PhasesBench,
    target: &Target,
    plan: &mut [Phase],
) -> anyhow::Result<Vec<Measured>> {
    let client = &target.client;
    let timeout = Duration::from_secs(b.timeout_secs);
    let setup = Instant::now();
    let mut ready = HashSet::new();
    embedded::wait_until(
        &Api::<Node>::all(client.clone()),
        "nodes ready",
        timeout,
        |n: &Node| {
            let is_ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status == "True");
            if is_ready {
                ready.insert(n.name_any());
            }
            ready.len() >= b.nodes
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| {
            format!("creating the namespace {NAMESPACE} (the phases need a cluster without it)")
        })?;
    // Upstream's ServiceAccount admission refuses a namespace's pods until its controller has
    // made the `default` account; waiting for it here keeps that start-up out of phase one.
    let account = embedded::wait_until(
        &Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE),
        "the namespace's default ServiceAccount",
        Duration::from_secs(60),
        |sa: &ServiceAccount| sa.name_any() == "default",
    )
    .await;
    if let Err(e) = account {
        eprintln!("note: {e}; going on without it");
    }
    println!(
        "setup: {} nodes Ready, namespace {NAMESPACE} and its default ServiceAccount in {:.1}s",
        b.nodes,
        setup.elapsed().as_secs_f64()
    );
    if b.settle_secs > 0 {
        println!(
            "{}",
            settle(target, Duration::from_secs(b.settle_secs)).await?
        );
    }

    let ds_api: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let deploy_api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let (nodes, replicas) = (b.nodes, b.replicas);
    let mut results = vec![
        create(target, &ds_api, &daemonset()?, timeout, |d| {
            daemonset_done(d, nodes)
        })
        .await?,
        roll(target, &ds_api, DAEMONSET, timeout, |d| {
            daemonset_done(d, nodes)
        })
        .await?,
        create(target, &deploy_api, &deployment(replicas)?, timeout, |d| {
            deployment_done(d, replicas)
        })
        .await?,
        roll(target, &deploy_api, DEPLOYMENT, timeout, |d| {
            deployment_done(d, replicas)
        })
        .await?,
    ];
    if b.statefulset_replicas > 0 {
        let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), NAMESPACE);
        let manifest = statefulset::manifest(
            STATEFULSET,
            b.statefulset_replicas,
            &b.statefulset_max_unavailable,
            pod_spec(),
        )?;
        results.push(
            create(
                target,
                &sts_api,
                &manifest,
                timeout,
                statefulset::rolled_out,
            )
            .await?,
        );
        let stored = sts_api.get(STATEFULSET).await?;
        if let Some(update) = plan.get_mut(results.len()) {
            one_at_a_time_if_dropped(&stored, b.statefulset_replicas, update);
        }
        results.push(
            roll(
                target,
                &sts_api,
                STATEFULSET,
                timeout,
                statefulset::rolled_out,
            )
            .await?,
        );
    }
    Ok(results)
}

/// Upstream drops a StatefulSet's `maxUnavailable` unless the MaxUnavailableStatefulSet feature
/// gate is on, and then rolls one pod at a time: the update's phase says so, and its ideal
/// follows, rather than holding the controller to waves it was never given.
fn one_at_a_time_if_dropped(stored: &StatefulSet, replicas: i32, update: &mut Phase) {
    let kept = stored
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
        .is_some_and(|r| r.max_unavailable.is_some());
    if kept {
        return;
    }
    eprintln!(
        "note: the server dropped the StatefulSet's maxUnavailable (upstream without the MaxUnavailableStatefulSet feature gate): its update goes one pod at a time"
    );
    update.name = "StatefulSet image update, one pod at a time (maxUnavailable dropped)".into();
    if let Some(limit) = &mut update.limit {
        limit.waves = ideal::statefulset_waves(replicas, "1").unwrap_or(limit.waves);
    }
}

/// Waits `wait` for the cluster to settle, and says what the measured processes used each second
/// in its second half: the background (lease renewals, status reports) every phase includes.
async fn settle(target: &Target, wait: Duration) -> anyhow::Result<String> {
    tokio::time::sleep(wait / 2).await;
    let starts = Watched::start_all(target.processes())?;
    let at = Instant::now();
    tokio::time::sleep(wait - wait / 2).await;
    let seconds = at.elapsed().as_secs_f64();
    let idle: Vec<String> = Watched::finish_all(target.processes(), starts)?
        .into_iter()
        .map(|(name, used)| format!("{name} {:.3}", used.cpu / seconds.max(1e-9)))
        .collect();
    Ok(format!(
        "settled {:.0}s; idle CPU s per second over the last {seconds:.1}s: {}",
        wait.as_secs_f64(),
        idle.join(", ")
    ))
}

/// The phases' table: wall seconds (with the ideal, the waves, the multiple of the ideal and the
/// overhead per wave when pods take time to become Ready), each process's CPU seconds and peak
/// RSS (and their totals when there are several), the API requests.
fn table(results: &[Measured], plan: &[Phase]) -> String {
    let names: Vec<&str> = results
        .first()
        .map(|m| m.processes.iter().map(|(n, _)| n.as_str()).collect())
        .unwrap_or_default();
    let several = names.len() > 1;
    let mut out = String::from("\n| phase | wall s |");
    let mut rule = String::from("| --- | ---: |");
    let limited = plan.iter().any(|p| p.limit.is_some());
    if limited {
        out.push_str(" ideal s | waves | x ideal | overhead per wave s |");
        rule.push_str(" ---: | ---: | ---: | ---: |");
    }
    out.push_str(" Events after s |");
    rule.push_str(" ---: |");
    for what in ["CPU s", "peak RSS MiB"] {
        for name in &names {
            let _ = write!(out, " {what} {name} |");
            rule.push_str(" ---: |");
        }
        if several {
            let _ = write!(out, " {what} total |");
            rule.push_str(" ---: |");
        }
    }
    out.push_str(" API requests |\n");
    rule.push_str(" ---: |\n");
    out.push_str(&rule);
    let mut partial_peak = false;
    for (m, p) in results.iter().zip(plan) {
        let _ = write!(out, "| {} | {:.2} |", p.name, m.wall);
        match p.limit {
            Some(limit) => {
                let ideal = limit.ideal().as_secs_f64();
                let _ = write!(
                    out,
                    " {ideal:.2} | {} | {:.2} | {:.2} |",
                    limit.waves,
                    m.wall / ideal.max(1e-9),
                    limit.overhead_per_wave(m.wall_time())
                );
            }
            None if limited => out.push_str(" - | - | - | - |"),
            None => {}
        }
        let _ = write!(out, " {:.2} |", m.aftermath);
        for (_, u) in &m.processes {
            let _ = write!(out, " {:.2} |", u.cpu);
        }
        if several {
            let _ = write!(out, " {:.2} |", m.cpu());
        }
        for (_, u) in &m.processes {
            let mark = if u.peak_of_window { "" } else { "*" };
            partial_peak |= !u.peak_of_window;
            let _ = write!(out, " {:.0}{mark} |", u.peak_rss_mib);
        }
        if several {
            let _ = write!(out, " {:.0} |", m.peak_rss_mib());
        }
        match m.requests_total() {
            Some(n) => {
                let _ = writeln!(out, " {n} |");
            }
            None => out.push_str(" not readable |\n"),
        }
    }
    if names.is_empty() {
        out.push_str(
            "\nno process measured: give --pid NAME=PID for each process of the cluster\n",
        );
    }
    if several {
        out.push_str(
            "\nthe peak RSS total is the sum of each process's peak in the phase (they need not peak at once)\n",
        );
    }
    if partial_peak {
        out.push_str(
            "* the kernel refused to reset this process's VmHWM: the peak since it started\n",
        );
    }
    if let Some(Err(e)) = results.first().map(|m| &m.requests) {
        let _ = writeln!(
            out,
            "API requests: the server's /metrics could not be read: {e}"
        );
    }
    out
}

/// Each phase against its physical limit, as the other benchmarks print it (issue 42 asks for
/// 1.1x at most); nothing when pods are Ready at once.
fn limits(results: &[Measured], plan: &[Phase], b: &PhasesBench) -> String {
    if plan.iter().all(|p| p.limit.is_none()) {
        return String::new();
    }
    let times = b.times();
    let mut out = format!(
        "\nphysical limit ({}; a wave of a create or a Deployment's update is start + readiness, {:.2}s; of a DaemonSet's or StatefulSet's update the old pod's grace first, {:.2}s in all):\n",
        b.delays(),
        times.until_available().as_secs_f64(),
        times.replace_in_place().as_secs_f64(),
    );
    for (m, p) in results.iter().zip(plan) {
        let Some(limit) = p.limit else { continue };
        let _ = writeln!(
            out,
            "  {}: {} wave{} of {:.2}s: {}; overhead {:.3}s per wave",
            p.name,
            limit.waves,
            if limit.waves == 1 { "" } else { "s" },
            limit.per_wave.as_secs_f64(),
            ideal::versus(limit.ideal(), m.wall_time()),
            limit.overhead_per_wave(m.wall_time())
        );
    }
    out
}

/// Each phase's peak RSS beside [`CONTROL_PLANE`]'s budget. The budget is for rollwright's whole
/// control plane in one process, so only processes running it (`control_plane`, in the order of
/// the results' processes) are held to it; upstream's processes are not.
fn memory(results: &[Measured], plan: &[Phase], control_plane: &[bool]) -> String {
    let mut out = String::from("\nmemory:\n");
    if !control_plane.contains(&true) {
        out.push_str("  no budget verdict: no measured process runs rollwright's whole control plane (`rollwright up`, or this process without --kubeconfig), which the budget is for\n");
        return out;
    }
    for (m, p) in results.iter().zip(plan) {
        let peak: f64 = m
            .processes
            .iter()
            .zip(control_plane)
            .filter(|(_, cp)| **cp)
            .map(|((_, u), _)| u.peak_rss_mib)
            .sum();
        let _ = writeln!(out, "  {}: {}", p.name, CONTROL_PLANE.verdict(peak, p.pods));
    }
    out
}

/// The ten commonest requests of each phase, by verb and resource.
fn requests(results: &[Measured], plan: &[Phase]) -> String {
    let mut out = String::new();
    for (m, p) in results.iter().zip(plan) {
        let Ok(requests) = &m.requests else { continue };
        let _ = writeln!(out, "\n{}: requests by verb and resource", p.name);
        for (n, verb, resource) in requests.iter().take(10) {
            let _ = writeln!(out, "  {n:>8}  {verb} {resource}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(args: &[&str]) -> PhasesBench {
        let mut all = vec!["phases"];
        all.extend_from_slice(args);
        super::super::parse_options::<PhasesBench>(&all).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The four phases as run with the defaults: no delays, so no ideal.
    fn four() -> Vec<Phase> {
        bench(&[]).plan()
    }

    fn measured(
        wall: f64,
        processes: &[(&str, f64, f64, bool)],
        requests: Option<u64>,
    ) -> Measured {
        Measured {
            wall,
            aftermath: 0.25,
            requests: requests
                .map(|n| vec![(n, "create".to_string(), "pods".to_string())])
                .ok_or_else(|| "403 Forbidden".to_string()),
            processes: processes
                .iter()
                .map(|(name, cpu, peak, of_phase)| {
                    (
                        name.to_string(),
                        ProcessUse {
                            cpu: *cpu,
                            peak_rss_mib: *peak,
                            peak_of_window: *of_phase,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn one_process_gives_one_cpu_and_one_rss_column_and_no_upstream() {
        let results = vec![measured(0.55, &[("this process", 0.85, 180.4, true)], Some(4321)); 4];
        let t = table(&results, &four());
        assert!(
            t.contains(
                "| phase | wall s | Events after s | CPU s this process | peak RSS MiB this process | API requests |"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "| DaemonSet on all nodes: apply -> all available | 0.55 | 0.25 | 0.85 | 180 | 4321 |"
            ),
            "{t}"
        );
        assert!(!t.contains("total") && !t.contains("upstream"), "{t}");
        assert!(!t.contains("ideal"), "{t}");
        assert_eq!(limits(&results, &four(), &bench(&[])), "");
    }

    #[test]
    fn several_processes_get_totals_and_unreadable_counters_say_so() {
        let results = vec![
            measured(
                2.61,
                &[
                    ("etcd", 0.5, 100.0, true),
                    ("kube-apiserver", 2.0, 400.0, false)
                ],
                None,
            );
            4
        ];
        let t = table(&results, &four());
        assert!(t.contains("| CPU s etcd | CPU s kube-apiserver | CPU s total | peak RSS MiB etcd | peak RSS MiB kube-apiserver | peak RSS MiB total | API requests |"), "{t}");
        assert!(
            t.contains("| 2.61 | 0.25 | 0.50 | 2.00 | 2.50 | 100 | 400* | 500 | not readable |"),
            "{t}"
        );
        assert!(t.contains("could not be read: 403 Forbidden"), "{t}");
        assert!(t.contains("* the kernel refused"), "{t}");
    }

    #[test]
    fn the_budget_holds_only_rollwrights_control_plane() {
        let results = vec![measured(1.0, &[("rollwright-up", 1.0, 200.0, true)], Some(1)); 4];
        let m = memory(&results, &four(), &[true]);
        assert_eq!(
            m.lines().filter(|l| l.contains("peak RSS 200 MiB")).count(),
            4,
            "{m}"
        );
        assert!(m.contains("for 3000 pods"), "{m}");
        let upstream = vec![measured(1.0, &[("kube-apiserver", 1.0, 900.0, true)], Some(1)); 4];
        let m = memory(&upstream, &four(), &[false]);
        assert!(
            m.contains("no budget verdict") && !m.contains("OVER"),
            "{m}"
        );
    }

    #[test]
    fn a_phase_is_one_json_line_for_the_side_by_side_table() {
        let m = measured(1.23456, &[("etcd", 0.5, 100.0, true)], Some(10));
        let line = m.json(0, &four()[0]).to_string();
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["phase"], 1);
        assert_eq!(v["wall_s"], 1.235);
        assert_eq!(v["aftermath_s"], 0.25);
        assert_eq!(v["requests"], 10);
        assert_eq!(v["processes"][0]["name"], "etcd");
        assert_eq!(v["processes"][0]["cpu_s"], 0.5);
        assert_eq!(v["processes"][0]["peak_of_phase"], true);
        assert!(
            v.get("ideal_s").is_none() && v.get("waves").is_none(),
            "{line}"
        );
        let unreadable = measured(1.0, &[], None).json(3, &four()[3]);
        assert!(unreadable["requests"].is_null());
    }

    #[test]
    fn watching_other_processes_needs_a_kubeconfig() {
        let parse = super::super::parse_options::<PhasesBench>;
        assert!(parse(&["phases", "--pid", "etcd=1"]).is_err());
        assert!(parse(&["phases", "--kubeconfig", "k", "--store", "etcd"]).is_err());
        let b = parse(&[
            "phases",
            "--kubeconfig",
            "k",
            "--pid",
            "etcd=1",
            "--pid",
            "nodes=2",
        ])
        .unwrap();
        assert_eq!(b.pids.len(), 2);
        assert!(parse(&["phases"]).is_ok());
    }

    #[test]
    fn the_delays_and_the_statefulset_are_options_off_by_default() {
        let b = bench(&[]);
        assert_eq!(
            (b.start_ms, b.readiness_ms, b.statefulset_replicas),
            (0, 0, 0)
        );
        assert_eq!(b.statefulset_max_unavailable, "10%");
        assert_eq!(b.plan().len(), 4);
        let b = bench(&[
            "--readiness-ms",
            "5000",
            "--start-ms",
            "250",
            "--statefulset-replicas",
            "1000",
            "--statefulset-max-unavailable",
            "50",
        ]);
        assert_eq!((b.start_ms, b.readiness_ms), (250, 5_000));
        assert_eq!(b.statefulset_replicas, 1_000);
        assert_eq!(b.statefulset_max_unavailable, "50");
        // With another cluster the delays state what its kubelets were given.
        let b = bench(&["--kubeconfig", "k", "--readiness-ms", "10000"]);
        assert_eq!(b.times().readiness, Duration::from_secs(10));
        assert!(
            super::super::parse_options::<PhasesBench>(&["phases", "--readiness-ms", "5s"])
                .is_err()
        );
    }

    #[test]
    fn each_phase_has_issue_42s_waves() {
        let plan = bench(&["--readiness-ms", "5000", "--statefulset-replicas", "1000"]).plan();
        let waves: Vec<Option<u32>> = plan.iter().map(|p| p.limit.map(|l| l.waves)).collect();
        // Creates are one wave; 500 nodes at 10% are 10; 2,000 at 25%/25% are 2; 1,000 at 10% 10.
        assert_eq!(
            waves,
            [Some(1), Some(10), Some(1), Some(2), Some(1), Some(10)]
        );
        let ideals: Vec<u64> = plan
            .iter()
            .filter_map(|p| p.limit.map(|l| l.ideal().as_secs()))
            .collect();
        assert_eq!(ideals, [5, 50, 5, 10, 5, 50]);
        assert_eq!(plan[5].name, "StatefulSet image update, maxUnavailable 10%");
        assert_eq!(plan[5].pods, 3_500);
        // A grace the simulator runs is part of each in-place wave, not of the Deployment's.
        let graced = bench(&["--readiness-ms", "1000", "--grace-scale", "0.1"]).plan();
        let per_wave: Vec<u128> = graced
            .iter()
            .filter_map(|p| p.limit.map(|l| l.per_wave.as_millis()))
            .collect();
        assert_eq!(per_wave, [1_000, 4_000, 1_000, 1_000]);
    }

    #[test]
    fn the_ideal_is_printed_with_the_overhead_per_wave() {
        let b = bench(&[
            "--readiness-ms",
            "2000",
            "--nodes",
            "20",
            "--replicas",
            "40",
        ]);
        let plan = b.plan();
        let results = vec![measured(2.5, &[("this process", 1.0, 100.0, true)], Some(10)); 4];
        let t = table(&results, &plan);
        assert!(
            t.contains(
                "| phase | wall s | ideal s | waves | x ideal | overhead per wave s | Events after s | CPU s"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "| DaemonSet on all nodes: apply -> all available | 2.50 | 2.00 | 1 | 1.25 | 0.50 |"
            ),
            "{t}"
        );
        // 20 nodes at 10%: 10 waves of 2s, against 2.5s measured.
        assert!(t.contains("| 2.50 | 20.00 | 10 | 0.12 | -1.75 |"), "{t}");
        let l = limits(&results, &plan, &b);
        assert!(
            l.contains(
                "DaemonSet image update, maxUnavailable 10%: 10 waves of 2.00s: ideal 20.00s"
            ),
            "{l}"
        );
        let v = results[3].json(3, &plan[3]);
        assert_eq!(v["waves"], 2);
        assert_eq!(v["ideal_s"], 4.0);
        assert_eq!(v["overhead_per_wave_s"], -0.75);
    }

    #[test]
    fn a_dropped_max_unavailable_rolls_one_pod_at_a_time() {
        let mut plan = bench(&["--readiness-ms", "1000", "--statefulset-replicas", "20"]).plan();
        let kept = statefulset::manifest(STATEFULSET, 20, "10%", pod_spec()).unwrap_or_default();
        one_at_a_time_if_dropped(&kept, 20, &mut plan[5]);
        // Kept: 10% of 20 is 2 a wave.
        assert_eq!(plan[5].limit.map(|l| l.waves), Some(10));
        let mut dropped = kept.clone();
        if let Some(rolling) = dropped
            .spec
            .as_mut()
            .and_then(|s| s.update_strategy.as_mut())
            .and_then(|u| u.rolling_update.as_mut())
        {
            rolling.max_unavailable = None;
        }
        one_at_a_time_if_dropped(&dropped, 20, &mut plan[5]);
        assert_eq!(plan[5].limit.map(|l| l.waves), Some(20));
        assert!(
            plan[5].name.contains("one pod at a time"),
            "{}",
            plan[5].name
        );
    }

    #[test]
    fn done_follows_kubectl_rollout_status() {
        let d = |generation: i64, observed: i64, replicas: i32, updated: i32, available: i32| {
            serde_json::from_value::<Deployment>(json!({
                "metadata": {"name": DEPLOYMENT, "generation": generation},
                "status": {"observedGeneration": observed, "replicas": replicas,
                           "updatedReplicas": updated, "availableReplicas": available},
            }))
            .unwrap_or_default()
        };
        for (case, want) in [
            (d(2, 2, 4, 4, 4), true),
            (d(2, 1, 4, 4, 4), false),
            (d(2, 2, 5, 4, 4), false),
            (d(2, 2, 4, 3, 4), false),
            (d(2, 2, 4, 4, 3), false),
        ] {
            assert_eq!(deployment_done(&case, 4), want, "{:?}", case.status);
        }
        assert!(!deployment_done(&Deployment::default(), 4));
        assert!(!daemonset_done(&DaemonSet::default(), 4));
    }

    #[test]
    fn the_manifests_are_issue_15s() {
        let ds = daemonset().unwrap_or_default();
        let spec = ds.spec.unwrap_or_default();
        assert_eq!(
            spec.template.spec.unwrap_or_default().containers[0]
                .image
                .as_deref(),
            Some(IMAGE)
        );
        let d = deployment(2_000).unwrap_or_default();
        assert_eq!(d.spec.and_then(|s| s.replicas), Some(2_000));
    }
}
