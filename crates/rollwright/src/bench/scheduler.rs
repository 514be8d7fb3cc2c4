//! `rollwright bench scheduler`: binding throughput.
//!
//! Starts an API server in this process, creates plain Nodes (not simulated: nothing else writes
//! while the scheduler works) and pending pods, then starts the scheduler on an in-process client
//! and times it until a watch has seen every pod bound.

use super::peak_rss;
use crate::control_plane::{ControlPlane, Options, StoreKind};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

/// Options of the scheduler benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct SchedulerBench {
    /// Nodes (8 CPU, 32Gi, 110 pods each).
    #[arg(long, default_value_t = 5_000)]
    nodes: usize,
    /// Pending pods (100m CPU each) to bind.
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Store backend of the in-process API server.
    #[arg(long, value_enum, default_value_t = StoreKind::Memory)]
    store: StoreKind,
    /// Put the pods in groups of three (as three-replica StatefulSets) whose members refuse to
    /// share a node (required pod anti-affinity on `kubernetes.io/hostname`).
    #[arg(long)]
    anti_affinity: bool,
}

/// Pods per anti-affinity group with `--anti-affinity`.
const GROUP_SIZE: usize = 3;

/// Requests in flight while setting up.
const SETUP_CONCURRENCY: usize = 64;

fn node(name: &str, zone: usize) -> anyhow::Result<(Node, serde_json::Value)> {
    let resources =
        json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    let status = json!({"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
    }});
    let node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": format!("zone-{}", zone % 3),
        }},
    }))?;
    Ok((node, status))
}

fn pod(name: &str, group: Option<usize>) -> anyhow::Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
    });
    if let Some(g) = group {
        let group = format!("g{g}");
        pod["metadata"]["labels"]["group"] = json!(group);
        pod["spec"]["affinity"] = json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"group": group}},
                "topologyKey": "kubernetes.io/hostname"}]}});
    }
    Ok(serde_json::from_value(pod)?)
}

/// Runs the benchmark and prints its figures.
pub async fn run(b: SchedulerBench) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let cp = ControlPlane::start(Options {
        data_dir: tmp.path().to_path_buf(),
        port: 0,
        store: b.store,
        ..Default::default()
    })
    .await?;
    let client = embedded::client_for(&cp.server);
    println!(
        "rollwright bench scheduler: {} pending pods over {} nodes, store {:?}{}",
        b.pods,
        b.nodes,
        b.store,
        if b.anti_affinity {
            ", in groups of 3 with required anti-affinity on kubernetes.io/hostname"
        } else {
            ""
        }
    );

    let setup = Instant::now();
    let nodes: Api<Node> = Api::all(client.clone());
    stream::iter(0..b.nodes)
        .map(|i| {
            let nodes = nodes.clone();
            async move {
                let name = format!("node-{i}");
                let (obj, status) = node(&name, i)?;
                nodes.create(&PostParams::default(), &obj).await?;
                nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let anti_affinity = b.anti_affinity;
    stream::iter(0..b.pods)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let group = anti_affinity.then_some(i / GROUP_SIZE);
                pods.create(
                    &PostParams::default(),
                    &pod(&format!("pending-{i}"), group)?,
                )
                .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await?;
    println!(
        "setup: {} nodes and {} pods created in {:.1}s",
        b.nodes,
        b.pods,
        setup.elapsed().as_secs_f64()
    );

    // The watch is running (and has listed every pod, none bound) before the scheduler starts.
    let mut bound: HashMap<String, String> = HashMap::new();
    let mut seen = 0usize;
    let mut events = watcher(pods.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    while seen < b.pods {
        match events.try_next().await? {
            Some(p) => {
                seen += 1;
                if let Some(n) = p.spec.and_then(|s| s.node_name) {
                    bound.insert(p.metadata.name.unwrap_or_default(), n);
                }
            }
            None => anyhow::bail!("the pod watch ended during the initial list"),
        }
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let cpu0 = nodesim::bench::cpu_seconds();
    let started = Instant::now();
    let sched = tokio::spawn(scheduler::run(
        informer::Informers::new(client.clone()),
        scheduler::SchedulerConfig::default(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let deadline = Duration::from_secs(b.timeout);
    tokio::time::timeout(deadline, async {
        while bound.len() < b.pods {
            match events.try_next().await? {
                Some(p) => {
                    if let Some(n) = p.spec.and_then(|s| s.node_name) {
                        bound.insert(p.metadata.name.unwrap_or_default(), n);
                    }
                }
                None => anyhow::bail!("the pod watch ended"),
            }
        }
        anyhow::Ok(())
    })
    .await
    .map_err(|_| {
        anyhow::anyhow!(
            "only {} of {} pods bound within {}s",
            bound.len(),
            b.pods,
            b.timeout
        )
    })??;
    let elapsed = started.elapsed();
    let cpu = nodesim::bench::cpu_seconds() - cpu0;
    let _ = stop_tx.send(());
    let _ = sched.await;

    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for n in bound.values() {
        *per_node.entry(n.as_str()).or_default() += 1;
    }
    if b.anti_affinity {
        // Pod `pending-i` is in group i / 3: no two of a group may share a node.
        let mut groups: HashMap<(usize, &str), usize> = HashMap::new();
        for (name, node) in &bound {
            let i: usize = name.trim_start_matches("pending-").parse()?;
            *groups.entry((i / GROUP_SIZE, node.as_str())).or_default() += 1;
        }
        let shared = groups.values().filter(|&&n| n > 1).count();
        println!("anti-affinity: {shared} groups with two pods on one node (must be 0)");
        anyhow::ensure!(shared == 0, "anti-affinity violated");
    }
    println!(
        "scheduled: {} pods bound in {:.2}s = {:.0} pods/s; {} nodes used, at most {} pods on a node; {:.1} CPU s (scheduler and API server)",
        b.pods,
        elapsed.as_secs_f64(),
        b.pods as f64 / elapsed.as_secs_f64().max(1e-9),
        per_node.len(),
        per_node.values().max().copied().unwrap_or(0),
        cpu
    );
    println!(
        "memory: peak RSS {:.0} MiB (whole process)",
        peak_rss().unwrap_or(0) as f64 / 1048576.0
    );
    cp.stop().await;
    Ok(())
}
