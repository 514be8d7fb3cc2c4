//! A ReplicaSet scaled up and down in quick succession at random short intervals, some of its
//! pods deleted by hand meanwhile, on a cache that may lag the server (issue 43: scale-down
//! racing a scale-up). What upstream's controller promises, and the independent watcher
//! ([`controllers::replicaset_invariants`], listed before the first change) checks at every
//! creation: a sync never creates beyond the `spec.replicas` it read, so the active pods never
//! exceed the largest `spec.replicas` of the generations from the newest one the controller
//! reported observed to the current one. In the end it converges: exactly `spec.replicas`
//! active pods, and a status that says so.
//!
//! Each round's seed is printed and a failing round names it; `ROLLWRIGHT_SEED=N` replays one
//! round, `ROLLWRIGHT_RANDOM_ROUNDS=N` runs more and
//! `ROLLWRIGHT_SEED_BASE=random` tries fresh sequences, on purpose (CI runs a few fixed ones).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::support;

use controllers::replicaset_invariants::ReplicaWatcher;
use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::json;
use std::time::Duration;
use support::*;

const MOST: i32 = 8;

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// A new `spec.replicas`.
    Scale(i32),
    /// A user deletes the `n`th active pod (by name order), if there is one.
    DeletePod(usize),
    /// Nothing for this long before the next step.
    Wait(Duration),
}

fn sequence(rng: &mut StdRng, len: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    for _ in 0..len {
        let step = match rng.random_range(0..10) {
            0..=5 => Step::Scale(rng.random_range(0..=MOST)),
            6 => Step::DeletePod(rng.random_range(0..MOST as usize)),
            _ => Step::Wait(Duration::from_millis(rng.random_range(0..150))),
        };
        steps.push(step);
        if rng.random_bool(0.5) {
            steps.push(Step::Wait(Duration::from_millis(rng.random_range(0..30))));
        }
    }
    steps
}

async fn scale(api: &Api<ReplicaSet>, replicas: i32) {
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

/// Waits until exactly `replicas` pods are active and ready and the status says so for the
/// current generation.
async fn wait_converged(c: &Cluster, api: &Api<ReplicaSet>, replicas: i32) {
    embedded::wait_until(api, "web converged", TIMEOUT, |rs: &ReplicaSet| {
        let s = rs.status.clone().unwrap_or_default();
        rs.name_any() == "web"
            && s.observed_generation == rs.metadata.generation
            && s.replicas == replicas
            && s.ready_replicas.unwrap_or(0) == replicas
    })
    .await
    .unwrap();
    wait_pods(&c.client, "app=web", "converged pods", |pods| {
        pods.iter().filter(|p| api::pod::is_active(p)).count() == replicas as usize
            && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none())
    })
    .await;
}

async fn round(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let lag = Duration::from_millis([0, 0, 5, 20][rng.random_range(0..4)]);
    let initial = rng.random_range(1..=MOST);
    let steps = sequence(&mut rng, 12);
    eprintln!("seed {seed}: cache lag {lag:?}, {initial} replicas, {steps:?}");

    let mut c = Cluster::replicaset_with_lag(lag).await;
    c.controllers.push(node_agent(
        c.client.clone(),
        "node-0",
        Duration::from_millis(30),
    ));
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": initial,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "img:0"}]}},
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &rs).await.unwrap();
    wait_converged(&c, &api, initial).await;

    let watcher = ReplicaWatcher::start(c.client.clone(), "default", "web", "app=web").await;
    let pods: Api<Pod> = Api::default_namespaced(c.client.clone());
    let mut last = initial;
    for step in &steps {
        match step {
            Step::Scale(n) => {
                scale(&api, *n).await;
                last = *n;
            }
            Step::DeletePod(i) => {
                let mut active: Vec<Pod> = pods
                    .list(&ListParams::default().labels("app=web"))
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .filter(api::pod::is_active)
                    .collect();
                active.sort_by_key(|p| p.name_any());
                if let Some(p) = active.get(*i) {
                    // Gone already is fine.
                    let _ = pods.delete(&p.name_any(), &DeleteParams::default()).await;
                }
            }
            Step::Wait(d) => tokio::time::sleep(*d).await,
        }
    }
    wait_converged(&c, &api, last).await;

    let violations = watcher.violations();
    assert_eq!(
        violations,
        Vec::<String>::new(),
        "seed {seed}: cache lag {lag:?}, {initial} replicas, {steps:?}"
    );
    assert!(
        watcher.events_seen() > 0,
        "seed {seed}: the watcher saw the scaling"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_scale_changes_never_create_beyond_spec_and_converge() {
    random_rounds(6, round).await;
}
