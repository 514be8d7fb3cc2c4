//! Paced DaemonSet and StatefulSet rollouts (issue 41): `rollwright.io/max-updating` and
//! `rollwright.io/min-update-interval`, driven with real `kubectl` against a whole in-process
//! cluster (simulated nodes under a fault profile, the scheduler, the controllers).
//!
//! The DaemonSet case is upstream's #111073: a networking DaemonSet whose old pods turn NotReady
//! mid-rollout (a readiness probe that starts failing on the old image) must still never have
//! more than `max-updating` new pods unavailable, although `maxUnavailable` would let it replace
//! every not-ready old pod at once. A watcher that has listed the pods before the test changes
//! anything checks that at every event; the spacing of the updates is read from the pods'
//! server-side timestamps afterwards, never from the test's own clock. The StatefulSet case
//! rolls in place, so the pods keep their names and the interval is read from the times the
//! controller stamped on them.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{self, Rig};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use nodesim::{NodeSim, distribution::Distribution};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

/// How long a rollout of a few pods paced 2s apart may take on a loaded two-core machine.
const TIMEOUT: Duration = Duration::from_secs(90);
const INTERVAL: &str = "2s";
const MAX_UPDATING: &str = "rollwright.io/max-updating";
const MIN_UPDATE_INTERVAL: &str = "rollwright.io/min-update-interval";

/// Pods of image `net:1` fail their readiness probe from 4s after they start, for good: the old
/// revision of the DaemonSet goes NotReady while (or before) it is being rolled out.
const PROFILE: &str = r#"
seed: 1
rules:
  - name: old-goes-unready
    match: {image: "net:1"}
    fault: {readinessFailure: {after: 4s, for: 10m}}
"#;

async fn start(nodes: usize) -> Rig {
    let sim = NodeSim {
        nodes,
        start_delay: Distribution::Fixed(Duration::from_millis(50)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(50)),
        ..Default::default()
    };
    let mut rig = Rig::start(sim, PROFILE).await;
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

/// Unavailable as the controllers count it (`minReadySeconds` is 0 here): not Ready, or still
/// restarting after an in-place update.
fn unavailable(p: &Pod) -> bool {
    !api::pod::is_ready(p) || api::pod::restarting_in_place(p)
}

fn live(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
}

/// What the watcher saw.
#[derive(Debug, Default)]
struct Seen {
    /// Breaches of the max-updating invariant, each with the pods at that moment.
    violations: Vec<String>,
    /// The most new pods unavailable at once.
    max_new_unavailable: usize,
    /// An old pod was live and not ready while a new pod existed (#111073's situation).
    old_unready_mid_rollout: bool,
    /// Pods in the order they were first seen on the new image.
    new_order: Vec<String>,
    /// Old pods' deletions: name -> `deletionTimestamp - deletionGracePeriodSeconds`.
    deleted_at: BTreeMap<String, Timestamp>,
    /// The last state of every pod seen.
    pods: BTreeMap<String, Pod>,
}

/// A watch of the pods labelled `app=<app>` that checks, at every event, that no more than
/// `max_updating` pods on `new_image` are unavailable.
struct Invariant {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Invariant {
    /// Returns once the watch has listed, so nothing the test does next goes unseen.
    async fn start(client: kube::Client, app: &str, new_image: &str, max_updating: usize) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let out = Arc::clone(&seen);
        let new_image = new_image.to_string();
        let check = move |pods: &HashMap<String, Pod>| {
            let is_new = |p: &Pod| image_of(p) == new_image;
            let mut s = out.lock().unwrap();
            let new_unavailable = pods
                .values()
                .filter(|p| is_new(p) && live(p) && unavailable(p))
                .count();
            s.max_new_unavailable = s.max_new_unavailable.max(new_unavailable);
            if new_unavailable > max_updating {
                let state: Vec<String> = pods
                    .values()
                    .map(|p| {
                        format!(
                            "{} {} ready={} live={}",
                            p.name_any(),
                            image_of(p),
                            api::pod::is_ready(p),
                            live(p)
                        )
                    })
                    .collect();
                let msg = format!(
                    "{new_unavailable} new pods unavailable (max-updating {max_updating}):\n{}",
                    state.join("\n")
                );
                s.violations.push(msg);
            }
            if pods.values().any(is_new)
                && pods
                    .values()
                    .any(|p| !is_new(p) && live(p) && !api::pod::is_ready(p))
            {
                s.old_unready_mid_rollout = true;
            }
            for p in pods.values() {
                let name = p.name_any();
                if is_new(p) && !s.new_order.contains(&name) {
                    s.new_order.push(name.clone());
                }
                if !is_new(p)
                    && let Some(at) = p.metadata.deletion_timestamp.as_ref()
                {
                    let grace = p.metadata.deletion_grace_period_seconds.unwrap_or(0);
                    s.deleted_at
                        .entry(name.clone())
                        .or_insert(at.0 - SignedDuration::from_secs(grace));
                }
                s.pods.insert(name, p.clone());
            }
        };
        let labels = format!("app={app}");
        let task = common::pod_watch::checked(client, &labels, TIMEOUT * 2, check).await;
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

/// The gaps between consecutive times, in order.
fn gaps(mut times: Vec<Timestamp>) -> Vec<SignedDuration> {
    times.sort();
    times
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .collect()
}

fn at_least_interval(what: &str, times: Vec<Timestamp>, want: usize) {
    assert_eq!(times.len(), want, "{what}: {times:?}");
    let interval = SignedDuration::from_secs(2);
    let gaps = gaps(times.clone());
    assert!(
        gaps.iter().all(|g| *g >= interval),
        "{what} less than {INTERVAL} apart: {times:?}"
    );
}

fn paced_condition(obj: &Value) -> Option<Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "RolloutPaced")
        .cloned()
}

/// upstream #111073: a DaemonSet over 4 nodes whose old pods go NotReady mid-rollout, with
/// `maxUnavailable: 2`, `max-updating: 1` and a 2s interval: one new pod in flight at a time,
/// updates started at least 2s apart, the views saying so; then unreadable annotations are
/// reported and ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_whose_old_pods_go_not_ready_is_updated_one_paced_pod_at_a_time() {
    let rig = start(4).await;
    let ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "net", "annotations": {MAX_UPDATING: "1", MIN_UPDATE_INTERVAL: INTERVAL}},
        "spec": {
            "selector": {"matchLabels": {"app": "net"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
            "template": {
                "metadata": {"labels": {"app": "net"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "app", "image": "net:1",
                        "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1, "failureThreshold": 1}}],
                },
            },
        },
    });
    rig.apply(&ds).await;
    rig.kubectl(&["rollout", "status", "ds/net", "--timeout=60s"])
        .await;

    let watch = Invariant::start(rig.client.clone(), "net", "net:2", 1).await;
    rig.kubectl(&["set", "image", "ds/net", "app=net:2"]).await;
    // Four updates 2s apart: the view, started now, follows it for seconds.
    let mut view = rig.c.rollwright_spawn(&["rollout", "status", "ds/net"]);
    let paced = view
        .until("the interval told", |l| {
            l.contains("paced: next update in") && l.contains("(min-update-interval 2s)")
        })
        .await;
    assert!(
        paced.starts_with("daemon set \"net\" revision 2"),
        "{paced}"
    );
    let out = rig
        .kubectl(&["rollout", "status", "ds/net", "--timeout=90s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    view.until("the end", |l| l.contains("successfully rolled out"))
        .await;
    let seen = watch.finish();

    assert!(
        seen.old_unready_mid_rollout,
        "old pods never went NotReady during the rollout: {seen:?}"
    );
    assert_eq!(seen.max_new_unavailable, 1, "the rollout was observed");
    let new: Vec<&Pod> = seen
        .pods
        .values()
        .filter(|p| image_of(p) == "net:2")
        .collect();
    at_least_interval(
        "new pods created",
        new.iter()
            .map(|p| p.metadata.creation_timestamp.as_ref().unwrap().0)
            .collect(),
        4,
    );
    at_least_interval(
        "old pods deleted",
        seen.deleted_at.values().copied().collect(),
        4,
    );

    // Done: nothing paces it any more.
    let obj = rig
        .c
        .kubectl_json(&["get", "ds", "net", "-o", "json"])
        .await;
    assert_eq!(paced_condition(&obj), None, "{obj}");

    // Values that cannot be read: a Warning naming the annotation and the fix, a condition
    // saying the same, and a rollout as if they were absent.
    rig.kubectl(&[
        "annotate",
        "ds",
        "net",
        "--overwrite",
        &format!("{MAX_UPDATING}=lots"),
        &format!("{MIN_UPDATE_INTERVAL}=soon"),
    ])
    .await;
    rig.kubectl(&["set", "image", "ds/net", "app=net:3"]).await;
    for (annotation, fix) in [(MAX_UPDATING, "\"25%\""), (MIN_UPDATE_INTERVAL, "\"30s\"")] {
        let event = common::wait_event(
            rig.client.clone(),
            "default",
            Some("net"),
            "InvalidPacingAnnotation",
            &format!("ignoring annotation {annotation}="),
        )
        .await;
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert!(event.message.unwrap().contains(fix));
    }
    let out = rig
        .kubectl(&["rollout", "status", "ds/net", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let obj = rig
        .c
        .kubectl_json(&["get", "ds", "net", "-o", "json"])
        .await;
    let condition = paced_condition(&obj).expect("the condition tells the ignored annotations");
    assert_eq!(condition["status"], "False", "{condition}");
    assert_eq!(
        condition["reason"], "InvalidPacingAnnotation",
        "{condition}"
    );
    rig.stop().await;
}

/// A StatefulSet of 3 updated in place (`Parallel`, `maxUnavailable: 3`, which alone would patch
/// every pod at once) with `max-updating: 1` and a 2s interval: one pod restarting at a time,
/// from the highest ordinal down, at least 2s apart, every pod keeping its UID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_updated_in_place_is_paced_too() {
    let rig = start(2).await;
    let sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "annotations": {
            MAX_UPDATING: "1", MIN_UPDATE_INTERVAL: INTERVAL,
            // The in-place switch as a real cluster's API takes it (the annotation works on both).
            "rollwright.io/pod-update-policy": "InPlaceIfPossible"}},
        "spec": {
            "serviceName": "db",
            "replicas": 3,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "db"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 3}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": "db:1"}]},
            },
        },
    });
    rig.apply(&sts).await;
    rig.kubectl(&["rollout", "status", "sts/db", "--timeout=60s"])
        .await;
    let pods: Api<Pod> = Api::default_namespaced(rig.client.clone());
    let before: BTreeMap<String, String> = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect();
    assert_eq!(before.len(), 3);

    let watch = Invariant::start(rig.client.clone(), "db", "db:2", 1).await;
    rig.kubectl(&["set", "image", "sts/db", "app=db:2"]).await;
    let out = rig
        .kubectl(&["rollout", "status", "sts/db", "--timeout=90s"])
        .await;
    // kubectl words a set with a (defaulted) partition as a partitioned roll out.
    assert!(out.contains("complete"), "{out}");
    let seen = watch.finish();

    assert_eq!(seen.max_new_unavailable, 1, "the rollout was observed");
    assert_eq!(seen.new_order, ["db-2", "db-1", "db-0"]);
    let after: BTreeMap<String, String> = seen
        .pods
        .values()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect();
    assert_eq!(after, before, "updated in place, not recreated");
    at_least_interval(
        "in-place updates",
        seen.pods
            .values()
            .map(|p| {
                p.annotations()["rollwright.io/in-place-update-time"]
                    .parse()
                    .unwrap()
            })
            .collect(),
        3,
    );
    let obj = rig
        .c
        .kubectl_json(&["get", "sts", "db", "-o", "json"])
        .await;
    assert_eq!(paced_condition(&obj), None, "{obj}");
    rig.stop().await;
}
