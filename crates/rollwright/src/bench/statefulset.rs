//! `rollwright bench statefulset`: a Parallel StatefulSet rolled with `maxUnavailable`, timed
//! against its physical limit (issue 15).
//!
//! Set up as `bench daemonset` is: API server, store, simulated nodes and scheduler in this
//! process, the controllers on a runtime of their own over HTTPS. Two phases, each timed until
//! `kubectl rollout status` would say done: creating the StatefulSet (Parallel: every pod at
//! once), and a new image rolled with `maxUnavailable` (each wave deletes that many pods and
//! waits for their replacements). Each phase prints its ideal: waves times the pods' grace,
//! start and readiness delays.

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
use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Node, Pod},
};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

/// Options of the StatefulSet benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct StatefulsetBench {
    /// Replicas of the StatefulSet.
    #[arg(long, default_value_t = 1_000)]
    replicas: i32,
    /// Simulated nodes.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// The rolling update's `maxUnavailable`.
    #[arg(long, default_value = "10%")]
    max_unavailable: String,
    /// Update pods whose template changed only in its images in place (the rolling update's
    /// `podUpdatePolicy: InPlaceIfPossible`, seed 004) instead of recreating them.
    #[arg(long)]
    in_place: bool,
    /// Milliseconds from a pod's binding to its containers running.
    #[arg(long, default_value_t = 0)]
    start_delay_ms: u64,
    /// Milliseconds from running to Ready.
    #[arg(long, default_value_t = 1_000)]
    readiness_delay_ms: u64,
    /// The simulated kubelets' `graceScale` (the pods' grace is 1s).
    #[arg(long, default_value_t = 0.0)]
    grace_scale: f64,
    /// Store backend.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// Give up after this many seconds per phase.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
}

/// The StatefulSet's name.
const NAME: &str = "bench";
/// The pods' `terminationGracePeriodSeconds`.
const GRACE_SECONDS: u64 = 1;

/// A Parallel StatefulSet `name` of `replicas` whose pods (labelled `app: name`) run `pod_spec`,
/// rolled `max_unavailable` (`10%` or `3`) at a time. This benchmark and `bench phases` both make
/// theirs here, so that both time the same kind of rollout.
pub(super) fn manifest(
    name: &str,
    replicas: i32,
    max_unavailable: &str,
    pod_spec: serde_json::Value,
) -> anyhow::Result<StatefulSet> {
    let max_unavailable = max_unavailable
        .parse::<i64>()
        .map_or_else(|_| json!(max_unavailable), |n| json!(n));
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": max_unavailable}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": pod_spec,
            },
        },
    }))?)
}

/// `kubectl rollout status`'s notion of done for a StatefulSet without a partition: the spec
/// observed, every replica updated and ready, and the update revision current.
///
/// kubectl itself, for a RollingUpdate strategy with a partition (the API server defaults it to
/// 0), stops at ready and updated replicas and does not compare the revisions. Upstream's
/// controller makes the update revision current in the very status write that first shows every
/// replica updated and ready (`completeRollingUpdate`), so on upstream the stricter test here is
/// met at the same moment, and on rollwright it also holds the controller to that semantics.
pub(super) fn rolled_out(s: &StatefulSet) -> bool {
    let Some(st) = &s.status else { return false };
    let want = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    st.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0)
        && st.replicas == want
        && st.updated_replicas == Some(want)
        && st.ready_replicas == Some(want)
        && st.available_replicas.is_none_or(|a| a == want)
        && st.current_revision == st.update_revision
}

/// Runs the benchmark and prints its figures.
pub async fn run(b: StatefulsetBench) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let timeout = Duration::from_secs(b.timeout_secs);
    let times = PodTimes {
        start: Duration::from_millis(b.start_delay_ms),
        readiness: Duration::from_millis(b.readiness_delay_ms),
        grace: Duration::from_secs(GRACE_SECONDS).mul_f64(b.grace_scale.max(0.0)),
        ..Default::default()
    };
    let per_node = (b.replicas.max(0) as u64 * 2).div_ceil(b.nodes.max(1) as u64) as u32 + 10;
    let nodes = nodesim::NodeSim {
        nodes: b.nodes,
        max_pods: per_node.max(110),
        start_delay: nodesim::distribution::Distribution::Fixed(times.start),
        readiness_delay: nodesim::distribution::Distribution::Fixed(times.readiness),
        grace_scale: b.grace_scale,
        ..Default::default()
    };
    let cp = ControlPlane::start(Options {
        data_dir: tmp.path().to_path_buf(),
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
        "rollwright bench statefulset: {} replicas (Parallel) on {} simulated nodes (start {}ms, readiness {}ms, graceScale {}), maxUnavailable {}, store {:?}",
        b.replicas,
        b.nodes,
        b.start_delay_ms,
        b.readiness_delay_ms,
        b.grace_scale,
        b.max_unavailable,
        b.store
    );
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

    let api: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let wait = |what: &'static str| {
        let api = api.clone();
        async move {
            let waited = embedded::wait_until(&api, what, timeout, |s: &StatefulSet| {
                s.name_any() == NAME && rolled_out(s)
            })
            .await;
            match waited {
                Ok(s) => Ok(s),
                Err(e) => {
                    // Say where it stopped: the status, and the pods by revision and readiness.
                    let status = api.get(NAME).await.ok().and_then(|s| s.status);
                    let pods = Api::<Pod>::namespaced(api.clone().into_client(), "default")
                        .list(&ListParams::default().labels(&format!("app={NAME}")))
                        .await
                        .map(|l| l.items)
                        .unwrap_or_default();
                    let mut by: std::collections::BTreeMap<(String, bool, bool), usize> =
                        Default::default();
                    for p in &pods {
                        let hash = p.labels().get("controller-revision-hash").cloned();
                        let key = (
                            hash.unwrap_or_default(),
                            api::pod::is_ready(p),
                            p.metadata.deletion_timestamp.is_some(),
                        );
                        *by.entry(key).or_default() += 1;
                    }
                    Err(anyhow::anyhow!(
                        "{e}; status {status:?}; pods (revision, ready, deleting): {by:?}"
                    ))
                }
            }
        }
    };
    let meter = async || -> anyhow::Result<_> {
        Ok((
            Instant::now(),
            nodesim::bench::cpu_seconds(),
            threads_cpu_seconds(CONTROLLER_THREADS),
            request_counts(&client).await?,
        ))
    };
    let report = |phase: &str, from: &(Instant, f64, f64, _), to: &(Instant, f64, f64, _)| {
        let total: u64 = delta(&from.3, &to.3).iter().map(|r| r.0).sum();
        println!(
            "{phase}: {:.2}s wall; CPU: controllers {:.2}s, whole process {:.2}s; {total} API requests ({:.1} per pod); peak RSS so far {:.0} MiB",
            to.0.duration_since(from.0).as_secs_f64(),
            to.2 - from.2,
            to.1 - from.1,
            total as f64 / f64::from(b.replicas.max(1)),
            peak_rss().unwrap_or(0) as f64 / 1048576.0,
        );
    };

    let m0 = meter().await?;
    api.create(
        &PostParams::default(),
        &manifest(
            NAME,
            b.replicas,
            &b.max_unavailable,
            json!({"terminationGracePeriodSeconds": GRACE_SECONDS,
                   "containers": [{"name": "app", "image": "registry.example/app:1"}]}),
        )?,
    )
    .await
    .context("creating the StatefulSet")?;
    wait("all replicas ready").await?;
    let m1 = meter().await?;
    report("create (Parallel)", &m0, &m1);
    println!(
        "  physical limit (1 wave of start + readiness): {}",
        ideal::versus(times.until_available(), m1.0.duration_since(m0.0))
    );

    let mut patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2"}]}}}});
    if b.in_place {
        patch["spec"]["updateStrategy"] =
            json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}});
    }
    api.patch(NAME, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .context("changing the image")?;
    wait("rolled out").await?;
    let m2 = meter().await?;
    let how = if b.in_place {
        "in place"
    } else {
        "recreating pods"
    };
    report(
        &format!(
            "rolling update, maxUnavailable {}, {how}",
            b.max_unavailable
        ),
        &m1,
        &m2,
    );
    if let Some(waves) = ideal::statefulset_waves(b.replicas, &b.max_unavailable) {
        // In place, a wave is a container restart: no grace, no new pod to schedule.
        let (wave, parts) = if b.in_place {
            (times.until_available(), "start + readiness")
        } else {
            (times.replace_in_place(), "grace + start + readiness")
        };
        println!(
            "  physical limit ({waves} waves of {parts}, {:.2}s each): {}",
            wave.as_secs_f64(),
            ideal::versus(wave * waves, m2.0.duration_since(m1.0))
        );
    }

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
    fn rolled_out_needs_the_update_revision_current_and_every_replica_ready() {
        let s = |observed: i64, ready: i32, current: &str| -> StatefulSet {
            serde_json::from_value(json!({
                "metadata": {"name": NAME, "generation": 2},
                "spec": {"replicas": 3, "selector": {}, "template": {}, "serviceName": NAME},
                "status": {"observedGeneration": observed, "replicas": 3, "updatedReplicas": 3,
                           "readyReplicas": ready, "availableReplicas": ready,
                           "currentRevision": current, "updateRevision": "b"},
            }))
            .unwrap_or_default()
        };
        assert!(rolled_out(&s(2, 3, "b")));
        assert!(!rolled_out(&s(1, 3, "b")));
        assert!(!rolled_out(&s(2, 2, "b")));
        assert!(!rolled_out(&s(2, 3, "a")));
    }

    #[test]
    fn the_manifest_is_parallel_with_max_unavailable() {
        let s = manifest(NAME, 1_000, "10%", json!({"containers": []})).unwrap_or_default();
        let spec = s.spec.unwrap_or_default();
        assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
        let rolling = spec.update_strategy.and_then(|u| u.rolling_update);
        assert_eq!(
            rolling.and_then(|r| r.max_unavailable),
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("10%".into()))
        );
    }
}
