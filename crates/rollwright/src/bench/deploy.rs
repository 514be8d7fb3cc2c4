//! `rollwright bench deploy`: one big Deployment created and then rolled (issue 4).
//!
//! Starts a control plane in this process with simulated nodes (no start or readiness delay by
//! default) and the scheduler; the controllers run on a runtime of their own and reach the server
//! over HTTPS as `rollwright controllers --kubeconfig` would, so the CPU of their threads is
//! theirs alone. Creates a Deployment, times it to available, then changes its image and times the
//! rollout, counting API requests from the server's `apiserver_request_total`.

use super::{
    ideal::{self, PodTimes},
    meter::{CONTROLLER_THREADS, delta, request_counts, spawn_controllers, threads_cpu_seconds},
    peak_rss,
};
use crate::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use anyhow::Context as _;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Node};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

/// Options of the Deployment benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct DeployBench {
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 10_000)]
    replicas: i32,
    /// Simulated nodes.
    #[arg(long, default_value_t = 500)]
    nodes: usize,
    /// The rolling update's maxSurge.
    #[arg(long, default_value = "25%")]
    max_surge: String,
    /// The rolling update's maxUnavailable.
    #[arg(long, default_value = "25%")]
    max_unavailable: String,
    /// Milliseconds from a pod's binding to its containers running.
    #[arg(long, default_value_t = 0)]
    start_delay_ms: u64,
    /// Milliseconds from running to Ready.
    #[arg(long, default_value_t = 0)]
    readiness_delay_ms: u64,
    /// Store backend.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// Data directory (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Give up after this many seconds per phase.
    #[arg(long, default_value_t = 1800)]
    timeout_secs: u64,
    /// Print the ReplicaSets' replicas, ready and available every this many milliseconds during
    /// the rollout, to see where its time goes (0: off).
    #[arg(long, default_value_t = 0)]
    timeline_ms: u64,
}

/// Prints, every `every`, each ReplicaSet's desired/current/ready/available counts (oldest
/// first) with the time since `started`, until aborted.
fn spawn_timeline(
    client: kube::Client,
    started: Instant,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    tokio::spawn(async move {
        let api: Api<ReplicaSet> = Api::namespaced(client, "default");
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let Ok(list) = api.list(&Default::default()).await else {
                continue;
            };
            let mut sets = list.items;
            sets.sort_by_key(|rs| rs.metadata.creation_timestamp.clone());
            let line: Vec<String> = sets
                .iter()
                .map(|rs| {
                    let st = rs.status.as_ref();
                    format!(
                        "{} {}/{}/{}/{}",
                        rs.labels()
                            .get("pod-template-hash")
                            .map_or("?", String::as_str),
                        rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
                        st.map_or(0, |s| s.replicas),
                        st.and_then(|s| s.ready_replicas).unwrap_or(0),
                        st.and_then(|s| s.available_replicas).unwrap_or(0)
                    )
                })
                .collect();
            println!(
                "  t={:>6.2}s  (desired/current/ready/available)  {}",
                started.elapsed().as_secs_f64(),
                line.join("  ")
            );
        }
    })
}

fn manifest(replicas: i32, surge: &str, unavailable: &str) -> anyhow::Result<Deployment> {
    let int_or_percent = |s: &str| match s.parse::<i64>() {
        Ok(n) => serde_json::json!(n),
        Err(_) => serde_json::json!(s),
    };
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bench", "labels": {"app": "bench"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "bench"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": int_or_percent(surge), "maxUnavailable": int_or_percent(unavailable)}},
            "template": {
                "metadata": {"labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
            },
        },
    }))?)
}

/// `kubectl rollout status`'s notion of done.
fn rolled_out(d: &Deployment) -> bool {
    let Some(s) = &d.status else { return false };
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == want
        && s.available_replicas.unwrap_or(0) == want
}

/// Waits until the Deployment satisfies `pred`.
async fn wait_deployment(
    api: &Api<Deployment>,
    what: &str,
    timeout: Duration,
    mut pred: impl FnMut(&Deployment) -> bool,
) -> anyhow::Result<Deployment> {
    embedded::wait_until(api, what, timeout, |d: &Deployment| {
        d.name_any() == "bench" && pred(d)
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs the benchmark and prints its figures.
pub async fn run(b: DeployBench) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = b
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let timeout = Duration::from_secs(b.timeout_secs);
    // Room for every pod plus the surge and the ones still terminating, evenly spread.
    let per_node = (b.replicas.max(0) as u64 * 2).div_ceil(b.nodes.max(1) as u64) as u32 + 10;
    let nodes = nodesim::NodeSim {
        nodes: b.nodes,
        max_pods: per_node.max(110),
        start_delay: nodesim::distribution::Distribution::Fixed(Duration::from_millis(
            b.start_delay_ms,
        )),
        readiness_delay: nodesim::distribution::Distribution::Fixed(Duration::from_millis(
            b.readiness_delay_ms,
        )),
        ..Default::default()
    };
    let cp = ControlPlane::start(Options {
        data_dir: dir.clone(),
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
        "rollwright bench deploy: {} replicas on {} simulated nodes (max {} pods each; start {}ms, readiness {}ms), maxSurge {} maxUnavailable {}, store {:?}",
        b.replicas,
        b.nodes,
        per_node.max(110),
        b.start_delay_ms,
        b.readiness_delay_ms,
        b.max_surge,
        b.max_unavailable,
        b.store
    );

    // Every node registered before the clock starts.
    let mut seen = HashSet::new();
    embedded::wait_until(
        &Api::<Node>::all(client.clone()),
        "nodes registered",
        timeout,
        |n: &Node| {
            seen.insert(n.name_any());
            seen.len() >= b.nodes
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;

    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let (cpu0, ctl0, req0) = (
        nodesim::bench::cpu_seconds(),
        threads_cpu_seconds(CONTROLLER_THREADS),
        request_counts(&client).await?,
    );
    let started = Instant::now();
    api.create(
        &PostParams::default(),
        &manifest(b.replicas, &b.max_surge, &b.max_unavailable)?,
    )
    .await
    .context("creating the Deployment")?;
    wait_deployment(&api, "available", timeout, rolled_out).await?;
    let create_time = started.elapsed();
    let (cpu1, ctl1, req1) = (
        nodesim::bench::cpu_seconds(),
        threads_cpu_seconds(CONTROLLER_THREADS),
        request_counts(&client).await?,
    );
    let create_requests: u64 = delta(&req0, &req1).iter().map(|r| r.0).sum();
    let times = PodTimes {
        start: Duration::from_millis(b.start_delay_ms),
        readiness: Duration::from_millis(b.readiness_delay_ms),
        ..Default::default()
    };
    println!(
        "create: {} pods available in {:.2}s = {:.0} pods/s; CPU: controllers {:.2}s, whole process {:.2}s; {} API requests = {:.1} per pod",
        b.replicas,
        create_time.as_secs_f64(),
        f64::from(b.replicas) / create_time.as_secs_f64(),
        ctl1 - ctl0,
        cpu1 - cpu0,
        create_requests,
        create_requests as f64 / f64::from(b.replicas.max(1))
    );

    println!(
        "create: physical limit (one wave of start + readiness): {}",
        ideal::versus(times.until_available(), create_time)
    );

    // The rollout: a new image.
    let started = Instant::now();
    let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2"}]}}}});
    let patched = api
        .patch("bench", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .context("changing the image")?;
    let timeline = (b.timeline_ms > 0).then(|| {
        spawn_timeline(
            client.clone(),
            started,
            Duration::from_millis(b.timeline_ms),
        )
    });
    let generation = patched.metadata.generation.unwrap_or(0);
    wait_deployment(&api, "rolled out", timeout, |d| {
        d.status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0)
            >= generation
            && rolled_out(d)
    })
    .await?;
    let roll_time = started.elapsed();
    if let Some(t) = timeline {
        t.abort();
    }
    let (cpu2, ctl2, req2) = (
        nodesim::bench::cpu_seconds(),
        threads_cpu_seconds(CONTROLLER_THREADS),
        request_counts(&client).await?,
    );
    let requests = delta(&req1, &req2);
    let total: u64 = requests.iter().map(|r| r.0).sum();
    let replaced = f64::from(b.replicas.max(1));
    println!(
        "rollout: {} pods replaced in {:.2}s = {:.0} pods/s; CPU: controllers {:.2}s, whole process {:.2}s (API server, store, nodes, scheduler, controllers)",
        b.replicas,
        roll_time.as_secs_f64(),
        replaced / roll_time.as_secs_f64(),
        ctl2 - ctl1,
        cpu2 - cpu1
    );
    if let Some(waves) =
        ideal::deployment_rollout_waves(b.replicas, &b.max_surge, &b.max_unavailable)
    {
        println!(
            "rollout: physical limit ({waves} waves of start + readiness): {}",
            ideal::versus(times.until_available() * waves, roll_time)
        );
    }
    println!(
        "rollout: {total} API requests = {:.1} per replaced pod; by verb and resource:",
        total as f64 / replaced
    );
    for (n, verb, resource) in &requests {
        println!(
            "  {n:>8}  {:>6.2}/pod  {verb} {resource}",
            *n as f64 / replaced
        );
    }
    println!(
        "memory: peak RSS {:.0} MiB (everything in this process)",
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
    fn rolled_out_needs_every_replica_updated_available_and_observed() {
        let d = |generation: i64,
                 observed: i64,
                 replicas: i32,
                 updated: i32,
                 available: i32|
         -> Deployment {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "bench", "generation": generation},
                "spec": {"replicas": 4, "selector": {}, "template": {}},
                "status": {"observedGeneration": observed, "replicas": replicas,
                           "updatedReplicas": updated, "availableReplicas": available},
            }))
            .unwrap_or_default()
        };
        for (case, want) in [
            (d(2, 2, 4, 4, 4), true),
            (d(2, 1, 4, 4, 4), false), // the new spec not yet seen
            (d(2, 2, 5, 4, 4), false), // an old pod left
            (d(2, 2, 4, 3, 4), false), // one not updated
            (d(2, 2, 4, 4, 3), false), // one not available
        ] {
            assert_eq!(rolled_out(&case), want, "{:?}", case.status);
        }
    }
}
