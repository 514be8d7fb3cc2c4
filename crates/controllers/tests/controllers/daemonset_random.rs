//! DaemonSet rolling updates under random sequences of template changes (some never becoming
//! ready) and rollbacks by template at random short intervals, with and without surge (issue
//! 43: the DaemonSet's bounds held with one update at a time; two back to back were never
//! tried). An independent watcher ([`controllers::daemonset_invariants`]), listed before the
//! first change, checks at every pod event: one live pod per revision per node (two at most
//! with surge, one without), at most `maxSurge` nodes with a new pod beside an old available
//! one, at most `maxUnavailable` nodes without an available pod, and, without unavailability
//! allowed, no available pod going while its node has no other.
//!
//! Pods are bound to their nodes and their graceful deletions take a little while, as on real
//! nodes. Each round's seed is printed and a failing round names it; `ROLLWRIGHT_SEED=N`
//! replays one round, `ROLLWRIGHT_RANDOM_ROUNDS=N` runs more and
//! `ROLLWRIGHT_SEED_BASE=random` tries fresh sequences, on purpose (CI runs a few fixed ones).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::support;

use controllers::daemonset_invariants::{DaemonWatcher, Rule};
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Node};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const NODES: usize = 5;

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// A new image; `ready` is false for an image whose pods never become ready.
    Image { image: String, ready: bool },
    /// Back to an image used earlier (a rollback by template).
    Undo(String),
    /// Nothing for this long before the next step.
    Wait(Duration),
}

/// (maxSurge, maxUnavailable) as written, and resolved over 5 nodes (both round up; validation
/// allows surge only with maxUnavailable 0).
const STRATEGIES: [(&str, &str, i32, i32); 7] = [
    ("0", "1", 0, 1),
    ("0", "2", 0, 2),
    ("0", "30%", 0, 2),
    ("1", "0", 1, 0),
    ("2", "0", 2, 0),
    ("40%", "0", 2, 0),
    ("20%", "0", 1, 0),
];

fn int_or_percent(s: &str) -> Value {
    s.parse::<i64>().map_or_else(|_| json!(s), |n| json!(n))
}

fn sequence(rng: &mut StdRng, len: usize) -> Vec<Step> {
    random_steps(
        rng,
        len,
        |rng, roll, images| match roll {
            0..=5 => {
                let (image, ready) = images.fresh(rng);
                Step::Image { image, ready }
            }
            6 | 7 => Step::Undo(images.earlier(rng)),
            _ => Step::Wait(Duration::from_millis(rng.random_range(0..200))),
        },
        Step::Wait,
    )
}

async fn set_image(api: &Api<DaemonSet>, image: &str) {
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}});
    api.patch("agent", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
}

/// Waits until the DaemonSet has rolled out over every node (what `kubectl rollout status`
/// checks) and only pods of `image` are left, one per node.
async fn wait_rolled_out(c: &Cluster, api: &Api<DaemonSet>, image: &str) {
    let n = NODES as i32;
    embedded::wait_until(api, "agent rolled out", TIMEOUT, |ds: &DaemonSet| {
        let s = ds.status.clone().unwrap_or_default();
        s.observed_generation >= ds.metadata.generation
            && s.desired_number_scheduled == n
            && s.updated_number_scheduled == Some(n)
            && s.number_available == Some(n)
            && s.current_number_scheduled == n
    })
    .await
    .unwrap();
    wait_pods(&c.client, "app=agent", "only current pods", |pods| {
        pods.len() == NODES
            && pods.iter().all(|p| {
                p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image)
                    && p.metadata.deletion_timestamp.is_none()
            })
    })
    .await;
}

async fn round(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (surge, unavailable, max_surge, max_unavailable) =
        STRATEGIES[rng.random_range(0..STRATEGIES.len())];
    let steps = sequence(&mut rng, 8);
    eprintln!("seed {seed}: maxSurge {surge}, maxUnavailable {unavailable}, {steps:?}");

    let mut c = Cluster::replicaset_only().await;
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["daemonset"]),
        daemonset: controllers::daemonset::Config {
            failed_pod_backoff: controllers::runtime::Backoff {
                base: Duration::from_millis(50),
                max: Duration::from_secs(1),
            },
            ..Default::default()
        },
        ..Default::default()
    };
    c.controllers
        .push(spawn_controllers(&c.client, &settings, Duration::ZERO));
    c.controllers.push(node_agent(
        c.client.clone(),
        "node-0",
        Duration::from_millis(30),
    ));
    let nodes: Api<Node> = Api::all(c.client.clone());
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    for name in &names {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let api: Api<DaemonSet> = Api::default_namespaced(c.client.clone());
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": int_or_percent(surge), "maxUnavailable": int_or_percent(unavailable)}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"containers": [{"name": "c", "image": "img:0"}]}},
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &ds).await.unwrap();
    wait_rolled_out(&c, &api, "img:0").await;

    let watcher = DaemonWatcher::start(
        c.client.clone(),
        "default",
        "app=agent",
        Rule {
            nodes: names.iter().cloned().collect(),
            max_surge,
            max_unavailable,
            min_ready_seconds: 0,
        },
    )
    .await;
    for step in &steps {
        match step {
            Step::Image { image, ready } => {
                if !ready {
                    c.kubelet.block(image);
                }
                set_image(&api, image).await;
            }
            Step::Undo(image) => set_image(&api, image).await,
            Step::Wait(d) => tokio::time::sleep(*d).await,
        }
    }
    // The end: a template that becomes ready, fully rolled out.
    set_image(&api, "img:last").await;
    wait_rolled_out(&c, &api, "img:last").await;

    let violations = watcher.violations();
    assert_eq!(
        violations,
        Vec::<String>::new(),
        "seed {seed}: maxSurge {surge}, maxUnavailable {unavailable}, {steps:?}"
    );
    assert!(
        watcher.max_surge_seen() + watcher.max_unavailable_seen() >= 1,
        "seed {seed}: the watcher saw the rollout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_template_changes_keep_max_surge_and_max_unavailable() {
    random_rounds(4, round).await;
}
