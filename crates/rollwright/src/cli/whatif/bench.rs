//! `rollwright bench whatif`: how honest a rehearsal is. A source cluster runs with pod timing
//! the rehearsal is not told (a fault profile of its own), carrying a Deployment with a
//! PodDisruptionBudget, a DaemonSet on every node and a StatefulSet. For each change, the
//! source is snapshotted, the change rehearsed on the snapshot, then made on the source and
//! followed the same way; the table prints the predicted and the real duration side by side.
//! Figures, not assertions: run on purpose, not in CI.

use super::{Limits, change::Change, change_and_follow, measure::Watch, predict};
use crate::cli::snapshot;
use anyhow::Context;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    policy::v1::PodDisruptionBudget,
};
use kube::{Api, api::PostParams};
use rollwright::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use serde_json::json;
use std::time::Duration;

/// Options of the rehearsal benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct WhatifBench {
    /// Simulated nodes of the source cluster (the DaemonSet runs on each).
    #[arg(long, default_value_t = 20)]
    nodes: usize,
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 60)]
    replicas: i32,
    /// Replicas of the StatefulSet.
    #[arg(long, default_value_t = 4)]
    stateful_replicas: i32,
    /// Rehearsal runs per change.
    #[arg(long, default_value_t = 3)]
    runs: u64,
    /// The source's pod timing (a profile's `startDelay`), unknown to the rehearsal.
    #[arg(long, default_value = "{normal: {mean: 2s, stddev: 500ms}}")]
    start_delay: String,
    /// The source's readiness delay.
    #[arg(long, default_value = "{uniform: [1s, 3s]}")]
    readiness_delay: String,
    /// Rehearse on the real clock instead of the accelerated one.
    #[arg(long)]
    real_time: bool,
}

fn workloads(replicas: i32, stateful: i32) -> anyhow::Result<(Deployment, DaemonSet, StatefulSet)> {
    let template = |app: &str, image: &str| {
        json!({"metadata": {"labels": {"app": app}},
            "spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": app,
                "image": image, "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}})
    };
    let d = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": template("web", "web:1")}}))?;
    let ds = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"rollingUpdate": {"maxUnavailable": "20%"}},
            "template": template("agent", "agent:1")}}))?;
    let sts = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": stateful, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": template("db", "db:1")}}))?;
    Ok((d, ds, sts))
}

/// Runs the benchmark.
pub async fn run(b: WhatifBench) -> anyhow::Result<()> {
    crate::cli::output::quiet();
    let dir = tempfile::tempdir()?;
    let profile = dir.path().join("source-profile.yaml");
    std::fs::write(
        &profile,
        format!(
            "startDelay: {}\nreadinessDelay: {}\n",
            b.start_delay, b.readiness_delay
        ),
    )?;
    nodesim::load_profile(&profile).map_err(|e| anyhow::anyhow!("the source timing: {e}"))?;
    let cp = ControlPlane::start(Options {
        data_dir: dir.path().join("source"),
        port: 0,
        store: StoreKind::Memory,
        components: Components::all(b.nodes, Some(profile)),
        ..Default::default()
    })
    .await?;
    let client = embedded::client_for(&cp.server);
    let (d, ds, sts) = workloads(b.replicas, b.stateful_replicas)?;
    let pp = PostParams::default();
    Api::<Deployment>::default_namespaced(client.clone())
        .create(&pp, &d)
        .await?;
    Api::<DaemonSet>::default_namespaced(client.clone())
        .create(&pp, &ds)
        .await?;
    Api::<StatefulSet>::default_namespaced(client.clone())
        .create(&pp, &sts)
        .await?;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": "90%", "selector": {"matchLabels": {"app": "web"}}}}))?;
    Api::<PodDisruptionBudget>::default_namespaced(client.clone())
        .create(&pp, &pdb)
        .await?;
    let watch = Watch::start(client.clone()).await;
    rolled_out(&watch).await?;

    let limits = Limits {
        stall_after: Duration::from_secs(60),
        timeout: Duration::from_secs(600),
        accelerated: !b.real_time,
    };
    let changes = [
        "set image deploy/web web=web:2",
        "rollout restart ds/agent",
        "set image sts/db db=db:2",
        "drain node-1",
    ];
    println!(
        "source: {} nodes, deployment/web {} replicas (PDB 90%), daemonset/agent, statefulset/db {} replicas; start {}, readiness {}",
        b.nodes, b.replicas, b.stateful_replicas, b.start_delay, b.readiness_delay
    );
    println!(
        "\n{:<34} {:>10} {:>15} {:>8} {:>8}",
        "CHANGE", "PREDICTED", "SPREAD", "REAL", "ERROR"
    );
    for text in changes {
        let change = [Change::parse(text)?];
        let snap = snapshot::take(&client, "source", &[]).await?;
        let report = predict(
            &snap,
            "source".into(),
            &[text.to_string()],
            &change,
            None,
            b.runs,
            limits,
        )
        .await?;
        let real = change_and_follow(&client, &cp.kubeconfig, &watch, &change, limits).await?;
        let error = (report.predicted_seconds - real.seconds) / real.seconds * 100.0;
        println!(
            "{:<34} {:>8.1} s {:>6.1}-{:<6.1} s {:>6.1} s {:>+7.1}%{}",
            text,
            report.predicted_seconds,
            report.spread_seconds.0,
            report.spread_seconds.1,
            real.seconds,
            error,
            if report.finished && real.finished {
                ""
            } else {
                "  (did not finish)"
            }
        );
        if let Change::Drain(node) = &change[0] {
            // Back in service for whatever comes next.
            ops_uncordon(&client, node).await?;
        }
    }
    drop(watch);
    cp.stop().await;
    Ok(())
}

async fn ops_uncordon(client: &kube::Client, node: &str) -> anyhow::Result<()> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"unschedulable": null}})),
        )
        .await
        .context("uncordoning")?;
    Ok(())
}

/// Waits until every workload is rolled out (10 minutes at most).
async fn rolled_out(watch: &Watch) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let all = watch.workloads();
        if !all.is_empty() && all.values().all(|s| s.done) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("the source cluster did not roll out in 10 minutes");
        }
        watch.changed(Duration::from_millis(500)).await;
    }
}
