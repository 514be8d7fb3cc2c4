//! `rollwright bench whatif`: how honest a rehearsal is. A source cluster runs with pod timing
//! the rehearsal is not told (a fault profile of its own), carrying a Deployment with a
//! PodDisruptionBudget, a DaemonSet on every node and a StatefulSet. For each change, the
//! source is snapshotted, the change rehearsed on the snapshot, then made on the source and
//! followed the same way; the table prints the predicted and the real duration side by side.
//! Figures, not assertions: run on purpose, not in CI.

use super::{
    Limits,
    change::Change,
    change_and_follow,
    measure::{Outcome, Watch},
    predict,
    report::Report,
};
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
    /// The rehearsal's client limits, as `whatif --control-plane` (default: what the snapshot
    /// measured of the source, which runs without limits).
    #[arg(long, value_name = "MODE")]
    control_plane: Option<super::pace::Choice>,
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

/// The source cluster: running with pod timing the rehearsal is not told, every workload
/// rolled out.
pub(super) struct Source {
    cp: ControlPlane,
    client: kube::Client,
    watch: Watch,
    _dir: tempfile::TempDir,
}

impl Source {
    /// Starts it with `b`'s nodes, workloads and timing, a PodDisruptionBudget of 90% on the
    /// Deployment, and waits until everything has rolled out.
    pub(super) async fn start(b: &WhatifBench) -> anyhow::Result<Source> {
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
        Ok(Source {
            cp,
            client,
            watch,
            _dir: dir,
        })
    }

    /// Snapshots the source, rehearses `text` on the snapshot `runs` times, then makes it on the
    /// source and follows it the same way: the prediction and the real thing.
    pub(super) async fn compare(
        &self,
        text: &str,
        runs: u64,
        limits: Limits,
        control_plane: Option<&super::pace::Choice>,
    ) -> anyhow::Result<(Report, Outcome)> {
        let change = [Change::parse(text)?];
        let snap = snapshot::take(&self.client, "source", &[]).await?;
        let rates = super::pace::Rates::resolve(control_plane, snap.control_plane.as_ref());
        let report = predict(
            &snap,
            "source".into(),
            &[text.to_string()],
            &change,
            None,
            runs,
            limits,
            &rates,
        )
        .await?;
        let real = change_and_follow(
            &self.client,
            &self.cp.kubeconfig,
            &self.watch,
            &change,
            limits,
        )
        .await?;
        if let Change::Drain(node) = &change[0] {
            // Back in service for whatever comes next.
            ops_uncordon(&self.client, node).await?;
        }
        Ok((report, real))
    }

    pub(super) async fn stop(self) {
        drop(self.watch);
        self.cp.stop().await;
    }
}

/// Runs the benchmark.
pub async fn run(b: WhatifBench) -> anyhow::Result<()> {
    crate::cli::output::quiet();
    let source = Source::start(&b).await?;
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
        "source: {} nodes, deployment/web {} replicas (PDB 90%), daemonset/agent, statefulset/db {} replicas; start {}, readiness {}; rehearsed on the {} clock",
        b.nodes,
        b.replicas,
        b.stateful_replicas,
        b.start_delay,
        b.readiness_delay,
        if b.real_time { "real" } else { "accelerated" }
    );
    println!(
        "\n{:<34} {:>10} {:>15} {:>8} {:>8} {:>10}",
        "CHANGE", "PREDICTED", "SPREAD", "REAL", "ERROR", "REHEARSAL"
    );
    for text in changes {
        let began = std::time::Instant::now();
        let (report, real) = source
            .compare(text, b.runs, limits, b.control_plane.as_ref())
            .await?;
        // What the rehearsals took of the machine's time, the real rollout aside.
        let rehearsal = began.elapsed().as_secs_f64() - real.seconds;
        let error = (report.predicted_seconds - real.seconds) / real.seconds * 100.0;
        println!(
            "{:<34} {:>8.1} s {:>6.1}-{:<6.1} s {:>6.1} s {:>+7.1}% {:>8.1} s{}",
            text,
            report.predicted_seconds,
            report.spread_seconds.0,
            report.spread_seconds.1,
            real.seconds,
            error,
            rehearsal,
            if report.finished && real.finished {
                ""
            } else {
                "  (did not finish)"
            }
        );
    }
    source.stop().await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::whatif::measure::Stall;
    use k8s_openapi::api::core::v1::Pod;
    use std::collections::BTreeSet;

    /// Waits until the Deployment's controller has observed its latest generation and it has
    /// rolled out.
    async fn rolled_out_since(watch: &Watch, deployments: &Api<Deployment>) -> anyhow::Result<()> {
        let generation = deployments.get("web").await?.metadata.generation;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
        loop {
            let current = watch
                .workloads()
                .into_iter()
                .find(|(id, _)| id.name == "web");
            if current.is_some_and(|(_, s)| Some(s.generation) == generation && s.done) {
                return Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the source's web:1.1 did not roll out in 5 minutes"
            );
            watch.changed(Duration::from_millis(500)).await;
        }
    }

    fn reasons(stalls: &[Stall]) -> BTreeSet<(String, String)> {
        stalls
            .iter()
            .map(|s| (s.workload.clone(), s.reason.clone()))
            .collect()
    }

    /// The honesty check, at a size CI can afford: the same change made on a source
    /// cluster (a control plane with a timing profile the rehearsal is not told) and rehearsed
    /// on its snapshot, on the accelerated clock. The rollout is six waits for one pod to become
    /// Ready (a 2 s start and a 2.5-3 s readiness delay each), so the control plane's own latency,
    /// which the rehearsal leaves out, is a small part of it. Then a drain that a budget blocks:
    /// both stall, for the same reasons.
    ///
    /// The pods the rehearsal measures come from a rollout of the same kind, one at a time, as
    /// a cluster's pods do. Pods all made at one instant share the fraction of a second their
    /// timestamps (kept to the second) cut off, so their times to Ready are all rounded the same
    /// way, and their mean can be off by half a second; pods made one after another are
    /// rounded each its own way, and their mean is not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rehearsal_predicts_the_real_rollout_within_15_percent_and_its_stalls()
    -> anyhow::Result<()> {
        let b = WhatifBench {
            nodes: 4,
            replicas: 6,
            stateful_replicas: 2,
            runs: 3,
            start_delay: "2s".into(),
            readiness_delay: "{uniform: [2500ms, 3s]}".into(),
            real_time: false,
            control_plane: None,
        };
        let source = Source::start(&b).await?;
        let deployments: Api<Deployment> = Api::default_namespaced(source.client.clone());
        deployments
            .patch(
                "web",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {
                    "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                    "template": {"spec": {"containers": [{"name": "web", "image": "web:1.1"}]}}}})),
            )
            .await?;
        rolled_out_since(&source.watch, &deployments).await?;
        let limits = Limits {
            stall_after: Duration::from_secs(5),
            timeout: Duration::from_secs(300),
            accelerated: true,
        };

        let (predicted, real) = source
            .compare("set image deploy/web web=web:2", b.runs, limits, None)
            .await?;
        assert!(predicted.finished, "the rehearsal finished: {predicted:?}");
        assert!(real.finished, "the real rollout finished: {real:?}");
        let error = (predicted.predicted_seconds - real.seconds).abs() / real.seconds;
        eprintln!(
            "image update: predicted {:.1} s, real {:.1} s",
            predicted.predicted_seconds, real.seconds
        );
        assert!(
            error <= 0.15,
            "predicted {:.1} s, real {:.1} s: {:.0}% off",
            predicted.predicted_seconds,
            real.seconds,
            error * 100.0
        );

        // A budget that lets no database pod go, and a drain of a node one runs on.
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}}))?;
        Api::<PodDisruptionBudget>::default_namespaced(source.client.clone())
            .create(&PostParams::default(), &pdb)
            .await?;
        let node = Api::<Pod>::default_namespaced(source.client.clone())
            .get("db-0")
            .await?
            .spec
            .and_then(|s| s.node_name)
            .context("db-0 is bound")?;
        let (predicted, real) = source
            .compare(&format!("drain {node}"), 1, limits, None)
            .await?;
        assert!(!predicted.finished && !real.finished, "both stall");
        assert!(
            reasons(&real.stalls).contains(&(
                "statefulset/default/db".to_string(),
                "EvictionBlocked".to_string()
            )),
            "the budget blocks the real drain: {:?}",
            real.stalls
        );
        // What each followed workload did in the rehearsal, should the two part.
        let rehearsed: Vec<_> = predicted
            .runs
            .iter()
            .flat_map(|r| &r.outcome.workloads)
            .map(|w| (&w.workload, &w.timeline, &w.revisions))
            .collect();
        assert_eq!(
            reasons(&predicted.stalls),
            reasons(&real.stalls),
            "rehearsed stalls {:?}, real {:?}; rehearsed (seconds, available, updated) and pods per revision: {rehearsed:?}",
            predicted.stalls,
            real.stalls
        );
        source.stop().await;
        Ok(())
    }
}
