//! `rollwright bench daemonset`: one DaemonSet over thousands of simulated nodes (issue 5).
//!
//! Starts a control plane in this process with simulated nodes (no start or readiness delay by
//! default) and the scheduler; the controllers run on a runtime of their own and reach the server
//! over HTTPS as `rollwright controllers --kubeconfig` would, so the CPU of their threads is
//! theirs alone. Three phases, each timed until `kubectl rollout status` would say done:
//! creating the DaemonSet (a pod on every node, all available), a rolling update within
//! `maxUnavailable`, and a rolling update with `maxSurge` (`maxUnavailable: 0`). API requests
//! come from the server's own `apiserver_request_total` counters, read through `/metrics` before
//! and after each phase.

use super::{
    ideal::{self, PodTimes},
    meter::{
        CONTROLLER_THREADS, Requests, delta, request_counts, spawn_controllers, threads_cpu_seconds,
    },
    peak_rss,
};
use crate::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use anyhow::Context as _;
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Node};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

/// Options of the DaemonSet benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct DaemonsetBench {
    /// Simulated nodes (each gets one daemon pod).
    #[arg(long, default_value_t = 5_000)]
    nodes: usize,
    /// `maxUnavailable` of the first rolling update.
    #[arg(long, default_value = "10%")]
    max_unavailable: String,
    /// `maxSurge` of the second rolling update (whose `maxUnavailable` is 0).
    #[arg(long, default_value = "10%")]
    max_surge: String,
    /// Milliseconds from a pod's binding to its containers running.
    #[arg(long, default_value_t = 0)]
    start_delay_ms: u64,
    /// Milliseconds from running to Ready.
    #[arg(long, default_value_t = 0)]
    readiness_delay_ms: u64,
    /// The simulated kubelets' `graceScale` (nodesim's default 0.01: the pods' 1s grace takes
    /// 10ms).
    #[arg(long, default_value_t = 0.01)]
    grace_scale: f64,
    /// Store backend.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// Data directory (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Give up after this many seconds per phase.
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
}

/// The thread name of the controllers' runtime (what their CPU is summed by).
/// The DaemonSet's name.
pub(super) const NAME: &str = "bench";

/// An int-or-percent flag as JSON: a number if it parses as one, else the string (`10%`).
fn int_or_percent(s: &str) -> Value {
    s.parse::<i64>().map_or_else(|_| json!(s), |n| json!(n))
}

/// The daemon pods' `terminationGracePeriodSeconds`.
pub(super) const GRACE_SECONDS: u64 = 1;

/// The DaemonSet, rolling with `max_unavailable` (no surge).
pub(super) fn manifest(max_unavailable: &str) -> anyhow::Result<DaemonSet> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": NAME, "labels": {"app": NAME}},
        "spec": {
            "selector": {"matchLabels": {"app": NAME}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxUnavailable": int_or_percent(max_unavailable), "maxSurge": 0}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "terminationGracePeriodSeconds": GRACE_SECONDS,
                    "containers": [{"name": "agent", "image": "registry.example/agent:1",
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                },
            },
        },
    }))?)
}

/// `kubectl rollout status`'s notion of done for a DaemonSet: the latest spec observed, and every
/// node that should run the pod runs an updated, available one.
fn rolled_out(ds: &DaemonSet, nodes: usize) -> bool {
    let Some(s) = &ds.status else { return false };
    let desired = i32::try_from(nodes).unwrap_or(i32::MAX);
    s.observed_generation.unwrap_or(0) >= ds.metadata.generation.unwrap_or(0)
        && s.desired_number_scheduled == desired
        && s.updated_number_scheduled == Some(desired)
        && s.number_available == Some(desired)
}

/// One reading of the meters.
struct Meter {
    at: Instant,
    cpu: f64,
    controllers: f64,
    requests: Requests,
}

impl Meter {
    async fn read(client: &kube::Client) -> anyhow::Result<Self> {
        Ok(Self {
            at: Instant::now(),
            cpu: nodesim::bench::cpu_seconds(),
            controllers: threads_cpu_seconds(CONTROLLER_THREADS),
            requests: request_counts(client).await?,
        })
    }

    /// Prints one phase's figures, from `self` to `end`, over `pods` pods.
    fn report(&self, end: &Meter, phase: &str, pods: usize) {
        let wall = end.at.duration_since(self.at).as_secs_f64();
        let requests = delta(&self.requests, &end.requests);
        let total: u64 = requests.iter().map(|r| r.0).sum();
        let per = pods.max(1) as f64;
        println!(
            "{phase}: {wall:.2}s wall ({:.0} pods/s); CPU: controllers {:.2}s, whole process {:.2}s (API server, store, simulated nodes, scheduler, controllers); {total} API requests ({:.1} per pod); peak RSS so far {:.0} MiB",
            per / wall.max(1e-9),
            end.controllers - self.controllers,
            end.cpu - self.cpu,
            total as f64 / per,
            peak_rss().unwrap_or(0) as f64 / 1048576.0,
        );
        for (n, verb, resource) in requests.iter().take(8) {
            println!("  {n:>8}  {:>6.2}/pod  {verb} {resource}", *n as f64 / per);
        }
    }
}

/// Waits until the DaemonSet has rolled out its latest spec over every node.
pub(super) async fn wait_rolled_out(
    api: &Api<DaemonSet>,
    nodes: usize,
    what: &str,
    timeout: Duration,
) -> anyhow::Result<DaemonSet> {
    embedded::wait_until(api, what, timeout, |d: &DaemonSet| {
        d.name_any() == NAME && rolled_out(d, nodes)
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs the benchmark and prints its figures.
pub async fn run(b: DaemonsetBench) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = b
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let timeout = Duration::from_secs(b.timeout_secs);
    let nodes = nodesim::NodeSim {
        nodes: b.nodes,
        start_delay: nodesim::distribution::Distribution::Fixed(Duration::from_millis(
            b.start_delay_ms,
        )),
        readiness_delay: nodesim::distribution::Distribution::Fixed(Duration::from_millis(
            b.readiness_delay_ms,
        )),
        grace_scale: b.grace_scale,
        ..Default::default()
    };
    let times = PodTimes {
        start: Duration::from_millis(b.start_delay_ms),
        readiness: Duration::from_millis(b.readiness_delay_ms),
        grace: Duration::from_secs(GRACE_SECONDS).mul_f64(b.grace_scale.max(0.0)),
        ..Default::default()
    };
    let pods = i32::try_from(b.nodes).unwrap_or(i32::MAX);
    let limit = |waves: Option<u32>, per_wave: Duration, from: &Meter, to: &Meter| {
        if let Some(waves) = waves {
            println!(
                "  physical limit ({waves} waves of {:.2}s): {}",
                per_wave.as_secs_f64(),
                ideal::versus(per_wave * waves, to.at.duration_since(from.at))
            );
        }
    };
    let cp = ControlPlane::start(Options {
        data_dir: dir,
        port: 0,
        store: b.store,
        components: Components {
            nodes: Some(nodes),
            scheduler: Some(Default::default()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let controllers = spawn_controllers(cp.kubeconfig.clone(), stop_rx)?;
    let client = embedded::client_for(&cp.server);
    println!(
        "rollwright bench daemonset: {} simulated nodes (start {}ms, readiness {}ms, graceScale {}), maxUnavailable {} then maxSurge {}, store {:?}",
        b.nodes,
        b.start_delay_ms,
        b.readiness_delay_ms,
        b.grace_scale,
        b.max_unavailable,
        b.max_surge,
        b.store
    );

    // Every node registered and Ready before the clock starts.
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
    println!(
        "setup: {} nodes Ready in {:.1}s",
        b.nodes,
        setup.elapsed().as_secs_f64()
    );

    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let m0 = Meter::read(&client).await?;
    api.create(&PostParams::default(), &manifest(&b.max_unavailable)?)
        .await
        .context("creating the DaemonSet")?;
    wait_rolled_out(&api, b.nodes, "all daemon pods available", timeout).await?;
    let m1 = Meter::read(&client).await?;
    m0.report(&m1, "create (a pod per node, all available)", b.nodes);
    limit(Some(1), times.until_available(), &m0, &m1);

    // A new image, maxUnavailable as given.
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "registry.example/agent:2"}]}}}});
    api.patch(NAME, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .context("changing the image")?;
    wait_rolled_out(&api, b.nodes, "rolling update done", timeout).await?;
    let m2 = Meter::read(&client).await?;
    m1.report(
        &m2,
        &format!("rolling update, maxUnavailable {}", b.max_unavailable),
        b.nodes,
    );
    limit(
        ideal::daemonset_waves(pods, &b.max_unavailable),
        times.replace_in_place(),
        &m1,
        &m2,
    );

    // Another image, surging: the new pod starts beside the old one.
    let patch = json!({"spec": {
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": 0, "maxSurge": int_or_percent(&b.max_surge)}},
        "template": {"spec": {"containers": [{"name": "agent", "image": "registry.example/agent:3"}]}},
    }});
    api.patch(NAME, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .context("changing the image and strategy")?;
    wait_rolled_out(&api, b.nodes, "surging update done", timeout).await?;
    let m3 = Meter::read(&client).await?;
    m2.report(
        &m3,
        &format!("rolling update, maxSurge {} maxUnavailable 0", b.max_surge),
        b.nodes,
    );
    let surge = ideal::resolve(&b.max_surge, pods, true);
    limit(
        surge.and_then(|s| ideal::batched_waves(pods, s)),
        times.until_available(),
        &m2,
        &m3,
    );
    println!(
        "total: {:.2}s wall; CPU: controllers {:.2}s, whole process {:.2}s; peak RSS {:.0} MiB (everything in this process)",
        m3.at.duration_since(m0.at).as_secs_f64(),
        m3.controllers - m0.controllers,
        m3.cpu - m0.cpu,
        peak_rss().unwrap_or(0) as f64 / 1048576.0
    );

    let _ = stop_tx.send(());
    match tokio::task::spawn_blocking(move || controllers.join()).await? {
        Ok(r) => r?,
        Err(_) => anyhow::bail!("the controllers' thread panicked"),
    }
    cp.stop().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolled_out_needs_the_spec_observed_and_every_node_updated_and_available() {
        let ds = |generation: i64, observed: i64, desired: i32, updated: i32, available: i32| {
            serde_json::from_value::<DaemonSet>(json!({
                "metadata": {"name": NAME, "generation": generation},
                "status": {"observedGeneration": observed, "desiredNumberScheduled": desired,
                           "currentNumberScheduled": desired, "numberMisscheduled": 0,
                           "numberReady": available, "updatedNumberScheduled": updated,
                           "numberAvailable": available},
            }))
            .unwrap_or_default()
        };
        for (case, want) in [
            (ds(2, 2, 4, 4, 4), true),
            (ds(2, 1, 4, 4, 4), false), // the new spec not yet seen
            (ds(2, 2, 3, 3, 3), false), // a node not yet counted
            (ds(2, 2, 4, 3, 4), false), // one pod not updated
            (ds(2, 2, 4, 4, 3), false), // one not available
        ] {
            assert_eq!(rolled_out(&case, 4), want, "{:?}", case.status);
        }
        assert!(!rolled_out(&DaemonSet::default(), 4), "no status yet");
    }

    #[test]
    fn int_or_percent_flags_become_numbers_or_strings() {
        assert_eq!(int_or_percent("3"), json!(3));
        assert_eq!(int_or_percent("10%"), json!("10%"));
    }
}
