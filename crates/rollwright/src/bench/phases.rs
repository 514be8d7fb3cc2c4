//! `rollwright bench phases`: issue 15's four rollout phases, side by side with upstream's figures.
//!
//! One process runs everything `rollwright up --nodes N --profile P` runs (API server on a durable
//! SQLite store, simulated nodes, scheduler, controllers, all on in-process clients over the
//! shared cache), with a fault profile of zero start and readiness delays and the chosen
//! `graceScale`. The benchmark itself talks HTTPS, making the requests kubectl would (`apply` is a
//! create, `set image` a strategic merge patch of the container's image), and times each phase from
//! the request to the moment a watch shows the object's status done (`kubectl rollout status`'s
//! test). Per phase it prints wall seconds, whole-process CPU seconds, the phase's peak RSS and the
//! API requests the server counted, each with its ratio to upstream v1.28.4's figures.
//!
//! The reference is issue 24's table (November 2026): upstream v1.28.4 (etcd 3.4.23,
//! kube-apiserver, kube-controller-manager and kube-scheduler with client QPS 1000/2000, 500 hollow
//! nodes from a Python simulator, graceful deletions ending at once) measured on the same kind of
//! quiet 2-core machine rollwright runs on, each process's utime + stime counted. It replaces issue
//! 15's built-in column (11.0 / 22.2 / 46.3 / 77.1 CPU s), which came from a busier run and
//! overstated every ratio by 1.2-1.5x. Issue 24 did not measure memory, so peak RSS is printed
//! without a ratio. The targets are ten times the reference, in wall time and in CPU, and the
//! table says per phase whether each ratio reaches 10x.

use super::meter::{Requests, delta, request_counts};
use crate::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use anyhow::Context as _;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    core::v1::{Namespace, Node},
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::{
    collections::HashSet,
    fmt::Debug,
    time::{Duration, Instant},
};

/// Options of the phases benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct PhasesBench {
    /// Simulated nodes (the DaemonSet runs a pod on each).
    #[arg(long, default_value_t = 500)]
    nodes: usize,
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 2_000)]
    replicas: i32,
    /// The simulated kubelets' `graceScale`: 0 ends graceful deletions at once, as upstream's
    /// simulator did in the reference run; nodesim's default is 0.01 (a 30s grace takes 0.3s).
    #[arg(long, default_value_t = 0.0)]
    grace_scale: f64,
    /// Data directory (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Give up after this many seconds per phase.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Store backend (the issue's figures are on SQLite).
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// With `--store etcd`: the members' client URLs (default: a one-member etcd on loopback,
    /// started for the run; its CPU is printed apart, as it is another process).
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
}

/// The namespace of both workloads.
const NAMESPACE: &str = "perf";
/// The DaemonSet's name.
const DAEMONSET: &str = "perf-ds";
/// The Deployment's name.
const DEPLOYMENT: &str = "perf-deploy";
/// The image both start with, and the one `set image` moves them to.
const IMAGE: &str = "registry.k8s.io/pause:3.9";
const NEXT_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// Where [`PHASES`]' upstream figures come from, printed with every table so that a figure copied
/// out of the output keeps its reference.
const REFERENCE: &str = "upstream v1.28.4 (etcd 3.4.23, kube-apiserver, KCM, scheduler at client QPS 1000/2000, 500 hollow nodes), measured on a quiet 2-core machine of the same kind: issue 24's table, 2026-11";

/// The ratio to upstream a phase must reach, in wall time and in CPU (issue 24's goal).
const GOAL: f64 = 10.0;

/// One phase and upstream's figures for it (issue 24's reference).
struct Phase {
    name: &'static str,
    upstream_wall: f64,
    upstream_cpu: f64,
}

impl Phase {
    /// Ten times upstream: the most wall seconds a phase may take.
    fn target_wall(&self) -> f64 {
        self.upstream_wall / GOAL
    }

    /// Ten times upstream: the most CPU seconds a phase may use.
    fn target_cpu(&self) -> f64 {
        self.upstream_cpu / GOAL
    }
}

const PHASES: [Phase; 4] = [
    Phase {
        name: "DaemonSet on all nodes: apply -> all available",
        upstream_wall: 5.07,
        upstream_cpu: 9.36,
    },
    Phase {
        name: "DaemonSet image update, maxUnavailable 10%",
        upstream_wall: 7.90,
        upstream_cpu: 15.15,
    },
    Phase {
        name: "Deployment: apply -> available",
        upstream_wall: 15.09,
        upstream_cpu: 29.14,
    },
    Phase {
        name: "Deployment rolling update 25%/25%",
        upstream_wall: 27.50,
        upstream_cpu: 54.01,
    },
];

/// The meters at one moment.
struct Reading {
    at: Instant,
    cpu: f64,
    requests: Requests,
}

impl Reading {
    async fn take(client: &kube::Client) -> anyhow::Result<Self> {
        Ok(Self {
            at: Instant::now(),
            cpu: nodesim::bench::cpu_seconds(),
            requests: request_counts(client).await?,
        })
    }
}

/// What one phase measured.
struct Measured {
    wall: f64,
    cpu: f64,
    rss_mib: f64,
    requests: Vec<(u64, String, String)>,
}

/// Starts a fresh peak-RSS window (Linux: writing 5 to `clear_refs` resets `VmHWM`); false when
/// the kernel refuses, so the peak is then the process's since it started.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The 1-minute load average, to note beside the figures (the machine is shared).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Runs `act` and waits until `done` holds for the object `name` in `api`: one phase, measured.
async fn phase<K, A, D>(
    client: &kube::Client,
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
    let precise_rss = reset_peak_rss();
    let start = Reading::take(client).await?;
    act.await?;
    embedded::wait_until(api, name, timeout, |o: &K| {
        o.meta().name.as_deref() == Some(name) && done(o)
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let end = Reading::take(client).await?;
    if !precise_rss {
        eprintln!("note: VmHWM could not be reset; the RSS shown is the peak since start");
    }
    Ok(Measured {
        wall: end.at.duration_since(start.at).as_secs_f64(),
        cpu: end.cpu - start.cpu,
        rss_mib: super::peak_rss().unwrap_or(0) as f64 / 1_048_576.0,
        requests: delta(&start.requests, &end.requests),
    })
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
                               "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}},
            "template": {
                "metadata": {"labels": {"app": DAEMONSET}},
                "spec": {"terminationGracePeriodSeconds": 30,
                         "containers": [{"name": "pause", "image": IMAGE}]},
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
                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": DEPLOYMENT}},
                "spec": {"terminationGracePeriodSeconds": 30,
                         "containers": [{"name": "pause", "image": IMAGE}]},
            },
        },
    }))?)
}

/// `kubectl set image <kind>/<name> pause=<image>`: a strategic merge patch of the container.
fn set_image() -> Patch<serde_json::Value> {
    Patch::Strategic(json!({"spec": {"template": {"spec": {
        "containers": [{"name": "pause", "image": NEXT_IMAGE}]}}}}))
}

/// Runs the four phases and prints their figures.
pub async fn run(b: PhasesBench) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = b
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let timeout = Duration::from_secs(b.timeout_secs);
    // What `rollwright up --nodes N --profile P` runs, P setting zero delays and the grace scale.
    let profile = tmp.path().join("phases-profile.yaml");
    std::fs::write(
        &profile,
        format!(
            "startDelay: 0s\nreadinessDelay: 0s\ngraceScale: {}\n",
            b.grace_scale
        ),
    )?;
    let etcd = match (b.store, b.etcd_servers.is_empty()) {
        (StoreKind::Etcd, true) => Some(super::meter::BenchEtcd::start().await?),
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
    let store = match b.store {
        StoreKind::Sqlite => "SQLite store (durable)",
        StoreKind::Etcd => "etcd store",
        StoreKind::Memory => "memory store (not durable)",
    };
    println!(
        "rollwright bench phases: {} simulated nodes, {} replicas, graceScale {}, {store}, kubectl-equivalent requests over HTTPS; load average {} at start",
        b.nodes,
        b.replicas,
        b.grace_scale,
        load_average()
    );

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
        .context("creating the namespace")?;
    println!(
        "setup: {} nodes Ready in {:.1}s",
        b.nodes,
        setup.elapsed().as_secs_f64()
    );

    let ds_api: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let deploy_api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let (nodes, replicas) = (b.nodes, b.replicas);
    let mut results = Vec::new();
    results.push(
        phase(
            &client,
            &ds_api,
            DAEMONSET,
            timeout,
            async {
                ds_api.create(&PostParams::default(), &daemonset()?).await?;
                Ok(())
            },
            |d| daemonset_done(d, nodes),
        )
        .await?,
    );
    results.push(
        phase(
            &client,
            &ds_api,
            DAEMONSET,
            timeout,
            async {
                ds_api
                    .patch(DAEMONSET, &PatchParams::default(), &set_image())
                    .await?;
                Ok(())
            },
            |d| daemonset_done(d, nodes),
        )
        .await?,
    );
    results.push(
        phase(
            &client,
            &deploy_api,
            DEPLOYMENT,
            timeout,
            async {
                deploy_api
                    .create(&PostParams::default(), &deployment(replicas)?)
                    .await?;
                Ok(())
            },
            |d| deployment_done(d, replicas),
        )
        .await?,
    );
    results.push(
        phase(
            &client,
            &deploy_api,
            DEPLOYMENT,
            timeout,
            async {
                deploy_api
                    .patch(DEPLOYMENT, &PatchParams::default(), &set_image())
                    .await?;
                Ok(())
            },
            |d| deployment_done(d, replicas),
        )
        .await?,
    );
    print_table(&results, nodes, usize::try_from(replicas).unwrap_or(0));
    println!("load average {} at the end", load_average());
    if let Some(etcd) = &etcd {
        println!("the run's {}", etcd.report());
    }
    cp.stop().await;
    Ok(())
}

fn print_table(results: &[Measured], nodes: usize, replicas: usize) {
    println!("\nupstream reference: {REFERENCE}");
    println!(
        "\n| phase | wall s | upstream wall s | wall ratio | CPU s | upstream CPU s | CPU ratio | peak RSS MiB | API requests |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (p, m) in PHASES.iter().zip(results) {
        let total: u64 = m.requests.iter().map(|r| r.0).sum();
        println!(
            "| {} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {} | {:.0} | {} |",
            p.name,
            m.wall,
            p.upstream_wall,
            verdict(p.upstream_wall, m.wall),
            m.cpu,
            p.upstream_cpu,
            verdict(p.upstream_cpu, m.cpu),
            m.rss_mib,
            total,
        );
    }
    println!("\ntargets ({GOAL:.0}x upstream), wall / CPU s:");
    for (p, m) in PHASES.iter().zip(results) {
        let met = |v: f64, t: f64| if v <= t { "met" } else { "not met" };
        println!(
            "  {}: <= {:.2} s {} / <= {:.2} s {}",
            p.name,
            p.target_wall(),
            met(m.wall, p.target_wall()),
            p.target_cpu(),
            met(m.cpu, p.target_cpu()),
        );
    }
    // The most pods each phase holds: the DaemonSet's one per node (its update surges none),
    // then the Deployment's replicas beside them with its 25% surge.
    let deployment = nodes + replicas + replicas.div_ceil(4);
    println!("\nmemory:");
    for ((p, m), pods) in PHASES
        .iter()
        .zip(results)
        .zip([nodes, nodes, deployment, deployment])
    {
        println!(
            "  {}: {}",
            p.name,
            super::budget::CONTROL_PLANE.verdict(m.rss_mib, pods)
        );
    }
    for (p, m) in PHASES.iter().zip(results) {
        println!("\n{}: requests by verb and resource", p.name);
        for (n, verb, resource) in m.requests.iter().take(10) {
            println!("  {n:>8}  {verb} {resource}");
        }
    }
}

/// `upstream / ours` as printed: the ratio and whether it reaches [`GOAL`].
fn verdict(upstream: f64, ours: f64) -> String {
    let ratio = upstream / ours.max(1e-9);
    let mark = if ratio >= GOAL {
        "10x met"
    } else {
        "10x not met"
    };
    format!("{ratio:.1}x ({mark})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_targets_are_issue_24s() {
        let wall: Vec<String> = PHASES
            .iter()
            .map(|p| format!("{:.2}", p.target_wall()))
            .collect();
        let cpu: Vec<String> = PHASES
            .iter()
            .map(|p| format!("{:.2}", p.target_cpu()))
            .collect();
        assert_eq!(wall, ["0.51", "0.79", "1.51", "2.75"]);
        assert_eq!(cpu, ["0.94", "1.52", "2.91", "5.40"]);
        assert_eq!(verdict(9.36, 0.93), "10.1x (10x met)");
        assert_eq!(verdict(9.36, 1.26), "7.4x (10x not met)");
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
