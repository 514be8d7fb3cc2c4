//! Budget-aware updates (issue 41): workloads annotated `rollwright.io/honor-disruption-budgets`
//! ask their PodDisruptionBudget before an update takes a pod down, driven with real `kubectl`
//! against a whole in-process cluster (simulated nodes, the scheduler, the controllers).
//!
//! The reproductions of upstream's kubernetes/kubernetes#89820 (two StatefulSets under one
//! `minAvailable` budget, updated together) and #95374 (a StatefulSet and a Deployment) must
//! never have fewer live, ready pods than the budget asks at any moment a watch shows, and both
//! rollouts must finish. Upstream's controllers delete directly and take one pod of each down at
//! once. The watcher has listed the pods before the test changes anything; every wait is on a
//! watch or a command with a deadline.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{self, Rig};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use nodesim::{NodeSim, distribution::Distribution};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

/// How long a rollout of a few pods, one disruption at a time, may take on a loaded two-core
/// machine.
const TIMEOUT: Duration = Duration::from_secs(120);
const HONOR: &str = "rollwright.io/honor-disruption-budgets";
const IN_PLACE: &str = "rollwright.io/pod-update-policy";

/// Pods take about a second to start and become ready, so the two workloads' updates overlap.
async fn start() -> Rig {
    let sim = NodeSim {
        nodes: 2,
        start_delay: Distribution::Fixed(Duration::from_millis(300)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(600)),
        ..Default::default()
    };
    let mut rig = Rig::start(sim, "seed: 1\nrules: []\n").await;
    rig.start_scheduler_and_controllers();
    rig
}

fn image_of(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or("")
}

/// Healthy as a budget counts it: ready and not being deleted. A pod restarting in place is not
/// ready while it restarts.
fn healthy(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && api::pod::is_ready(p)
        && !api::pod::restarting_in_place(p)
}

/// What the watcher saw.
#[derive(Debug, Default)]
struct Seen {
    /// Moments with fewer healthy pods than the budget asks, each with the pods then.
    violations: Vec<String>,
    /// The fewest healthy pods at once.
    min_healthy: usize,
    /// The last state of every pod seen.
    pods: BTreeMap<String, Pod>,
}

/// A watch of the pods labelled `tier=<tier>` that checks, at every event, that at least
/// `min_available` of them are healthy.
struct Invariant {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Invariant {
    /// Returns once the watch has listed, so nothing the test does next goes unseen.
    async fn start(client: kube::Client, tier: &str, min_available: usize) -> Self {
        let seen = Arc::new(Mutex::new(Seen {
            min_healthy: usize::MAX,
            ..Default::default()
        }));
        let out = Arc::clone(&seen);
        let check = move |pods: &HashMap<String, Pod>| {
            let mut s = out.lock().unwrap();
            let now = pods.values().filter(|p| healthy(p)).count();
            s.min_healthy = s.min_healthy.min(now);
            if now < min_available {
                let state: Vec<String> = pods
                    .values()
                    .map(|p| {
                        format!(
                            "{} {} ready={} deleting={} restarting={}",
                            p.name_any(),
                            image_of(p),
                            api::pod::is_ready(p),
                            p.metadata.deletion_timestamp.is_some(),
                            api::pod::restarting_in_place(p),
                        )
                    })
                    .collect();
                let msg = format!(
                    "{now} healthy pods (minAvailable {min_available}):\n{}",
                    state.join("\n")
                );
                s.violations.push(msg);
            }
            for p in pods.values() {
                s.pods.insert(p.name_any(), p.clone());
            }
        };
        let labels = format!("tier={tier}");
        let task = common::pod_watch::checked(client, &labels, TIMEOUT * 3, check).await;
        Invariant { seen, task }
    }

    /// Stops watching; fails the test on a breach.
    fn finish(self) -> Seen {
        self.task.abort();
        let seen = std::mem::take(&mut *self.seen.lock().unwrap());
        assert!(
            seen.violations.is_empty(),
            "{} violations, the first:\n{}",
            seen.violations.len(),
            seen.violations[0]
        );
        seen
    }
}

/// A StatefulSet of `replicas` pods labelled `app=<name>, tier=<tier>`, asking the budgets.
fn stateful_set(name: &str, tier: &str, replicas: i32, in_place: bool) -> Value {
    let mut annotations = json!({HONOR: "true"});
    if in_place {
        // The in-place switch as a real cluster's API takes it (the annotation works on both).
        annotations[IN_PLACE] = json!("InPlaceIfPossible");
    }
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            // Alone, each set would take both its pods down at once.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": replicas}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": tier}},
                "spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": "app:1"}]},
            },
        },
    })
}

fn budget(tier: &str, min_available: i32) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": tier},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"tier": tier}}},
    })
}

/// Waits until budget `name`'s status has observed its spec and counts `healthy` pods.
async fn budget_counts(rig: &Rig, name: &str, healthy: i64) {
    let api: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::default_namespaced(rig.client.clone());
    embedded::wait_until(
        &api,
        &format!("budget {name} counting {healthy}"),
        TIMEOUT,
        |b| {
            b.name_any() == name
                && b.status.as_ref().is_some_and(|s| {
                    i64::from(s.current_healthy) == healthy
                        && s.observed_generation >= b.metadata.generation
                })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

async fn rolled_out(rig: &Rig, what: &str) {
    let out = rig
        .kubectl(&["rollout", "status", what, "--timeout=120s"])
        .await;
    assert!(
        out.contains("complete") || out.contains("successfully rolled out"),
        "{what}: {out}"
    );
}

fn all_on(seen: &Seen, image: &str, want: usize) {
    let live: Vec<&Pod> = seen
        .pods
        .values()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let on = live.iter().filter(|p| image_of(p) == image).count();
    assert!(on >= want, "{on} of the pods on {image}: {live:?}");
}

/// upstream #89820: two StatefulSets of 2 (each free to take both its pods down) under one budget
/// of `minAvailable: 3`, updated together: never fewer than 3 healthy pods, both finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_statefulsets_under_one_budget_never_go_below_it() {
    let rig = start().await;
    rig.apply(&budget("db", 3)).await;
    rig.apply(&stateful_set("a", "db", 2, false)).await;
    rig.apply(&stateful_set("b", "db", 2, false)).await;
    rolled_out(&rig, "sts/a").await;
    rolled_out(&rig, "sts/b").await;
    budget_counts(&rig, "db", 4).await;

    let watch = Invariant::start(rig.client.clone(), "db", 3).await;
    rig.kubectl(&["set", "image", "sts/a", "sts/b", "app=app:2"])
        .await;
    rolled_out(&rig, "sts/a").await;
    rolled_out(&rig, "sts/b").await;
    budget_counts(&rig, "db", 4).await;
    let seen = watch.finish();
    assert_eq!(seen.min_healthy, 3, "the updates were observed");
    all_on(&seen, "app:2", 4);
    // One disruption at a time: the other set waited on the budget, and said so.
    common::wait_event(
        rig.client.clone(),
        "default",
        None,
        "DisruptionBudget",
        "waiting on pdb/db (0 disruptions allowed)",
    )
    .await;
    rig.stop().await;
}

/// upstream #95374: a StatefulSet and a Deployment (`maxSurge: 0`, `maxUnavailable: 1`) of 2
/// each under one budget of `minAvailable: 3`, updated together: never fewer than 3 healthy pods,
/// both finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_and_a_deployment_under_one_budget_never_go_below_it() {
    let rig = start().await;
    rig.apply(&budget("shop", 3)).await;
    rig.apply(&stateful_set("db", "shop", 2, false)).await;
    rig.apply(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {HONOR: "true"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web", "tier": "shop"}},
                "spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": "app:1"}]},
            },
        },
    }))
    .await;
    rolled_out(&rig, "sts/db").await;
    rolled_out(&rig, "deploy/web").await;
    budget_counts(&rig, "shop", 4).await;

    let watch = Invariant::start(rig.client.clone(), "shop", 3).await;
    rig.kubectl(&["set", "image", "sts/db", "deploy/web", "app=app:2"])
        .await;
    rolled_out(&rig, "sts/db").await;
    rolled_out(&rig, "deploy/web").await;
    budget_counts(&rig, "shop", 4).await;
    let seen = watch.finish();
    assert_eq!(seen.min_healthy, 3, "the updates were observed");
    all_on(&seen, "app:2", 4);
    // Done: nothing holds the Deployment; its Progressing condition kept upstream's reasons.
    let d = rig
        .c
        .kubectl_json(&["get", "deploy", "web", "-o", "json"])
        .await;
    let conditions = d["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().all(|c| c["type"] != "RolloutHeld"), "{d}");
    let progressing = conditions
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap();
    assert_eq!(progressing["reason"], "NewReplicaSetAvailable", "{d}");
    rig.stop().await;
}

/// Two StatefulSets updated in place under one budget: first held by a budget that allows
/// nothing (the condition, the event and `rollwright rollout status` say so), then, with
/// `minAvailable: 3`, never fewer than 3 healthy pods while both restart theirs, every pod
/// keeping its UID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_updates_wait_on_the_budget_and_never_go_below_it() {
    let rig = start().await;
    rig.apply(&budget("db", 4)).await;
    rig.apply(&stateful_set("a", "db", 2, true)).await;
    rig.apply(&stateful_set("b", "db", 2, true)).await;
    rolled_out(&rig, "sts/a").await;
    rolled_out(&rig, "sts/b").await;
    budget_counts(&rig, "db", 4).await;
    let pods: Api<Pod> = Api::default_namespaced(rig.client.clone());
    let uids = |list: Vec<Pod>| -> BTreeMap<String, String> {
        list.iter()
            .map(|p| (p.name_any(), p.uid().unwrap()))
            .collect()
    };
    let before = uids(pods.list(&Default::default()).await.unwrap().items);
    assert_eq!(before.len(), 4);

    let watch = Invariant::start(rig.client.clone(), "db", 3).await;
    rig.kubectl(&["set", "image", "sts/a", "sts/b", "app=app:2"])
        .await;
    // Held: the budget allows no disruption.
    let mut view = rig.c.rollwright_spawn(&["rollout", "status", "sts/a"]);
    let held = view
        .until("the budget told", |l| {
            l.contains("waiting on pdb/db (0 disruptions allowed)")
        })
        .await;
    assert!(held.starts_with("statefulset \"a\" revision 2"), "{held}");
    let event = common::wait_event(
        rig.client.clone(),
        "default",
        Some("a"),
        "DisruptionBudget",
        "waiting on pdb/db (0 disruptions allowed)",
    )
    .await;
    assert!(
        event
            .message
            .unwrap()
            .contains("needs 4 healthy pods and has 4 currently"),
        "the event says why"
    );
    let sts = rig.c.kubectl_json(&["get", "sts", "a", "-o", "json"]).await;
    let condition = sts["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "RolloutHeld")
        .cloned()
        .unwrap_or_else(|| panic!("no RolloutHeld condition: {sts}"));
    assert_eq!(condition["reason"], "DisruptionBudget", "{condition}");

    // One disruption allowed: both roll, one pod at a time.
    rig.kubectl(&[
        "patch",
        "pdb",
        "db",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":3}}"#,
    ])
    .await;
    rolled_out(&rig, "sts/a").await;
    rolled_out(&rig, "sts/b").await;
    view.until("the end", |l| l.contains("complete")).await;
    budget_counts(&rig, "db", 4).await;
    let seen = watch.finish();
    assert_eq!(seen.min_healthy, 3, "the updates were observed");
    all_on(&seen, "app:2", 4);
    let after = uids(seen.pods.values().cloned().collect());
    assert_eq!(after, before, "updated in place, not recreated");
    let sts = rig.c.kubectl_json(&["get", "sts", "a", "-o", "json"]).await;
    assert!(
        sts["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|c| c["type"] != "RolloutHeld"),
        "{sts}"
    );
    rig.stop().await;
}
