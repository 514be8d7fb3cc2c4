//! Deployment rollouts under random sequences of template changes, pauses, resumes and undos
//! at random short intervals, some new templates never becoming ready: an independent watcher,
//! listed before the first change, checks at every pod and ReplicaSet event that the
//! Deployment's pods never exceed `replicas + maxSurge` and its available pods never drop below
//! `replicas - maxUnavailable` (issue 43: two quick updates once made 10 pods where 8 were
//! allowed).
//!
//! Each round's seed is printed and a failing round names it; `ROLLWRIGHT_SEED=N` replays one
//! round, `ROLLWRIGHT_RANDOM_ROUNDS=N` runs more and
//! `ROLLWRIGHT_SEED_BASE=random` tries fresh sequences, on purpose (CI runs a few fixed ones).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::support;

use controllers::invariants::{InvariantWatcher, Rule};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::{Api, api::ListParams};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// A new image; `ready` is false for an image whose pods never become ready.
    Image {
        image: String,
        ready: bool,
    },
    /// Back to an image used earlier (a rollback by template).
    Undo(String),
    Pause,
    Resume,
    /// Nothing for this long before the next step.
    Wait(Duration),
}

/// A strategy and its fenceposts for 6 replicas: (maxSurge, maxUnavailable, surge, unavailable).
const STRATEGIES: [(i64, i64); 3] = [(2, 0), (1, 1), (3, 2)];
const REPLICAS: i32 = 6;

/// A random sequence of `len` steps; every image but the ones listed as unready becomes ready.
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
            6 => Step::Pause,
            7 => Step::Resume,
            _ => Step::Wait(Duration::from_millis(rng.random_range(0..150))),
        },
        Step::Wait,
    )
}

async fn round(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (surge, unavailable) = STRATEGIES[rng.random_range(0..STRATEGIES.len())];
    let steps = sequence(&mut rng, 8);
    eprintln!("seed {seed}: maxSurge {surge}, maxUnavailable {unavailable}, {steps:?}");

    let c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment(
            "web",
            REPLICAS,
            "img:0",
            rolling(json!(surge), json!(unavailable)),
        ),
    )
    .await;
    wait_rolled_out(&api, "web", REPLICAS).await;
    let watcher = InvariantWatcher::start(
        c.client.clone(),
        "default",
        "app=web",
        Rule::Rolling {
            max_pods: REPLICAS + surge as i32,
            min_available: REPLICAS - unavailable as i32,
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
                set_image(&api, "web", image).await;
            }
            Step::Undo(image) => set_image(&api, "web", image).await,
            Step::Pause => merge(&api, "web", json!({"spec": {"paused": true}})).await,
            Step::Resume => merge(&api, "web", json!({"spec": {"paused": false}})).await,
            Step::Wait(d) => tokio::time::sleep(*d).await,
        }
    }
    // The end: resumed, on a template that becomes ready, fully rolled out.
    merge(&api, "web", json!({"spec": {"paused": false}})).await;
    set_image(&api, "web", "img:last").await;
    wait_rolled_out(&api, "web", REPLICAS).await;

    let rss: Vec<ReplicaSet> = Api::default_namespaced(c.client.clone())
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items;
    let sizes: Vec<(Value, i32)> = rss
        .iter()
        .map(|rs| {
            let image = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .map_or(Value::Null, |t| {
                    json!(t.spec.as_ref().map(|s| s.containers[0].image.clone()))
                });
            (
                image,
                rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
            )
        })
        .collect();
    let active: Vec<_> = sizes.iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(
        active,
        vec![&(json!("img:last"), REPLICAS)],
        "seed {seed}: only the last template has replicas"
    );
    let violations = watcher.violations();
    if !violations.is_empty() {
        // What the controller did, in order, to read beside the violations.
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::default_namespaced(c.client.clone());
        let mut seen = events.list(&ListParams::default()).await.unwrap().items;
        seen.sort_by_key(|e| {
            e.metadata
                .resource_version
                .clone()
                .map(|v| v.parse::<u64>().ok())
        });
        for e in seen {
            eprintln!(
                "event {}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            );
        }
    }
    assert_eq!(violations, Vec::<String>::new(), "seed {seed}: {steps:?}");
    assert!(
        watcher.events_seen() > 0,
        "seed {seed}: the watcher saw the rollout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_template_changes_keep_max_surge_and_max_unavailable() {
    random_rounds(4, round).await;
}
