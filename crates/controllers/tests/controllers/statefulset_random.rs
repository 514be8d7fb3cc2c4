//! StatefulSet rolling updates under random sequences of template changes (some never becoming
//! ready), rollbacks by template and partition changes at random short intervals, in both pod
//! management policies and with several `maxUnavailable` values (issue 43). The independent
//! watcher ([`controllers::stateful_invariants`]), listed before the first change, checks at
//! every pod event: at most `maxUnavailable` ordinals unavailable, no pod below the partition
//! deleted or moved to another revision once the controller has observed that partition, and
//! under `OrderedReady` updates from the highest ordinal down, a batch at a time.
//!
//! A partition raised mid-rollout binds the controller only once it has read it: the watcher
//! protects the pods below it from the moment the set's `status.observedGeneration` says so
//! (a lowered partition protects fewer pods, at once). Pods are bound to a node and their
//! graceful deletions take a little while, as on a real node.
//!
//! Each round's seed is printed and a failing round names it; `ROLLWRIGHT_SEED=N` replays one
//! round, `ROLLWRIGHT_RANDOM_ROUNDS=N` runs more and
//! `ROLLWRIGHT_SEED_BASE=random` tries fresh sequences, on purpose (CI runs a few fixed ones).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::support;

use controllers::stateful_invariants::{Rule, StatefulWatcher};
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const REPLICAS: i32 = 5;

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// A new image; `ready` is false for an image whose pods never become ready.
    Image { image: String, ready: bool },
    /// Back to an image used earlier (a rollback by template).
    Undo(String),
    /// A new `partition`.
    Partition(i32),
    /// Nothing for this long before the next step.
    Wait(Duration),
}

fn sequence(rng: &mut StdRng, len: usize) -> Vec<Step> {
    random_steps(
        rng,
        len,
        |rng, roll, images| match roll {
            0..=4 => {
                let (image, ready) = images.fresh(rng);
                Step::Image { image, ready }
            }
            5 => Step::Undo(images.earlier(rng)),
            6 | 7 => Step::Partition(rng.random_range(0..=REPLICAS)),
            _ => Step::Wait(Duration::from_millis(rng.random_range(0..200))),
        },
        Step::Wait,
    )
}

async fn patch(api: &Api<StatefulSet>, patch: Value) -> StatefulSet {
    api.patch("db", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap()
}

async fn set_image(api: &Api<StatefulSet>, image: &str) {
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}});
    api.patch("db", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
}

fn partition_patch(partition: i32) -> Value {
    json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": partition}}}})
}

/// Waits until the set has observed generation `generation`.
async fn wait_observed(api: &Api<StatefulSet>, generation: i64) {
    embedded::wait_until(
        api,
        &format!("db observed generation {generation}"),
        TIMEOUT,
        |s: &StatefulSet| {
            s.status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .is_some_and(|o| o >= generation)
        },
    )
    .await
    .unwrap();
}

/// Waits until the set has rolled out (what `kubectl rollout status` checks, partition 0) and
/// its pods all run `image`.
async fn wait_rolled_out(c: &Cluster, api: &Api<StatefulSet>, image: &str) {
    embedded::wait_until(api, "db rolled out", TIMEOUT, |s: &StatefulSet| {
        let st = s.status.clone().unwrap_or_default();
        st.observed_generation >= s.metadata.generation
            && st.replicas == REPLICAS
            && st.ready_replicas == Some(REPLICAS)
            && st.updated_replicas == Some(REPLICAS)
            && st.current_revision.is_some()
            && st.current_revision == st.update_revision
    })
    .await
    .unwrap();
    wait_pods(&c.client, "app=db", "only current pods", |pods| {
        pods.len() == REPLICAS as usize
            && pods.iter().all(|p| {
                p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image)
                    && p.metadata.deletion_timestamp.is_none()
                    && api::pod::is_ready(p)
            })
    })
    .await;
}

async fn round(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let ordered = rng.random_bool(0.5);
    let max_unavailable = rng.random_range(1..=3);
    let steps = sequence(&mut rng, 8);
    let policy = if ordered { "OrderedReady" } else { "Parallel" };
    eprintln!("seed {seed}: {policy}, maxUnavailable {max_unavailable}, {steps:?}");

    let mut c = Cluster::replicaset_only().await;
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["statefulset"]),
        ..Default::default()
    };
    c.controllers
        .push(spawn_controllers(&c.client, &settings, Duration::ZERO));
    c.controllers.push(node_agent(
        c.client.clone(),
        "node-0",
        Duration::from_millis(30),
    ));
    let api: Api<StatefulSet> = Api::default_namespaced(c.client.clone());
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": REPLICAS,
            "serviceName": "db",
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": "db"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "partition": 0, "maxUnavailable": max_unavailable}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "c", "image": "img:0"}]}},
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &set).await.unwrap();
    wait_rolled_out(&c, &api, "img:0").await;

    let watcher = StatefulWatcher::start(
        c.client.clone(),
        "default",
        "db",
        "app=db",
        Rule {
            start: 0,
            replicas: REPLICAS,
            partition: 0,
            max_unavailable,
            ordered,
            min_ready_seconds: 0,
        },
    )
    .await;
    let mut partition = 0;
    for step in &steps {
        match step {
            Step::Image { image, ready } => {
                if !ready {
                    c.kubelet.block(image);
                }
                set_image(&api, image).await;
                watcher.template_changed();
            }
            Step::Undo(image) => {
                set_image(&api, image).await;
                watcher.template_changed();
            }
            Step::Partition(p) => {
                // Fewer pods are protected at once; more only once the controller has read it.
                watcher.set_partition(partition.min(*p));
                let written = patch(&api, partition_patch(*p)).await;
                wait_observed(&api, written.metadata.generation.unwrap()).await;
                watcher.set_partition(*p);
                partition = *p;
            }
            Step::Wait(d) => tokio::time::sleep(*d).await,
        }
    }
    // The end: no partition, a template that becomes ready, fully rolled out.
    watcher.set_partition(0);
    patch(&api, partition_patch(0)).await;
    set_image(&api, "img:last").await;
    watcher.template_changed();
    wait_rolled_out(&c, &api, "img:last").await;

    let violations = watcher.violations();
    assert_eq!(
        violations,
        Vec::<String>::new(),
        "seed {seed}: {policy}, maxUnavailable {max_unavailable}, {steps:?}"
    );
    assert!(
        watcher.max_unavailable_seen() >= 1,
        "seed {seed}: the watcher saw the rollout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_template_and_partition_changes_keep_max_unavailable_and_the_partition() {
    random_rounds(4, round).await;
}
