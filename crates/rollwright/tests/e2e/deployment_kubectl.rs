//! Deployments end to end (issue 4): real `kubectl` against a whole in-process cluster — API
//! server, simulated nodes with short fixed delays and a fault profile, the scheduler and the
//! controllers — with an independent invariant watcher on every rollout.
//!
//! Mid-rollout states are made deterministic, never timed: a template whose image matches the
//! profile's `*:stuck` rule (neverReady) or `*:broken` rule (imagePullFailure) freezes a rollout
//! exactly where its surge and unavailability budgets run out; stopping the scheduler freezes it
//! with pods Pending until the scheduler starts again. Waits are watches or
//! `kubectl rollout status --timeout`.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use common::Rig;
use controllers::invariants::{InvariantWatcher, Rule};
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::Pod,
};
use kube::{
    Api, ResourceExt,
    api::ListParams,
    runtime::wait::{await_condition, conditions::is_deleted},
};
use nodesim::distribution::Distribution;
use serde_json::{Value, json};
use std::{
    collections::{BTreeSet, HashSet},
    time::Duration,
};

/// How long a watch waits for a state a working cluster reaches in a second or two.
const TIMEOUT: Duration = Duration::from_secs(45);

/// Images ending in `:broken` fail to pull; images ending in `:stuck` run but never get ready.
const PROFILE: &str = r#"
seed: 1
rules:
  - name: broken
    match: {image: "*:broken"}
    fault: imagePullFailure
  - name: stuck
    match: {image: "*:stuck"}
    fault: neverReady
"#;

const REVISION: &str = "deployment.kubernetes.io/revision";
const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// A cluster whose scheduler and controllers the test can stop and start again.
struct Env(Rig);

impl std::ops::Deref for Env {
    type Target = Rig;
    fn deref(&self) -> &Rig {
        &self.0
    }
}

impl std::ops::DerefMut for Env {
    fn deref_mut(&mut self) -> &mut Rig {
        &mut self.0
    }
}

impl Env {
    /// Four simulated nodes whose pods start after 100ms and get ready 100ms later; the scheduler
    /// and controllers run beside them as in `rollwright up`.
    async fn start() -> Env {
        let nodes = nodesim::NodeSim {
            nodes: 4,
            start_delay: Distribution::Fixed(Duration::from_millis(100)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
            ..Default::default()
        };
        let mut rig = Rig::start(nodes, PROFILE).await;
        rig.start_scheduler_and_controllers();
        Env(rig)
    }

    async fn stop(self) {
        self.0.stop().await;
    }

    async fn set_image(&self, name: &str, image: &str) {
        let out = self
            .kubectl(&[
                "set",
                "image",
                &format!("deployment/{name}"),
                &format!("app={image}"),
            ])
            .await;
        assert!(out.contains("image updated"), "{out}");
    }

    /// `kubectl rollout status`, which must report success.
    async fn rollout_status(&self, name: &str) {
        let out = self
            .kubectl(&[
                "rollout",
                "status",
                &format!("deployment/{name}"),
                "--timeout=45s",
            ])
            .await;
        assert!(
            out.contains(&format!("deployment \"{name}\" successfully rolled out")),
            "{out}"
        );
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::default_namespaced(self.client.clone())
    }

    fn rs_api(&self) -> Api<ReplicaSet> {
        Api::default_namespaced(self.client.clone())
    }

    fn pod_api(&self) -> Api<Pod> {
        Api::default_namespaced(self.client.clone())
    }

    /// The app's ReplicaSets, oldest revision first.
    async fn replica_sets(&self, app: &str) -> Vec<ReplicaSet> {
        let mut v = self
            .rs_api()
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap()
            .items;
        v.sort_by_key(|rs| revision(rs).parse::<i64>().unwrap_or(0));
        v
    }

    /// `(revision, spec.replicas)` of each of the app's ReplicaSets, oldest first.
    async fn sizes(&self, app: &str) -> Vec<(String, i32)> {
        self.replica_sets(app)
            .await
            .iter()
            .map(|rs| (revision(rs), size(rs)))
            .collect()
    }

    /// The app's pods that are not terminating.
    async fn active_pods(&self, app: &str) -> Vec<Pod> {
        self.pod_api()
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(api::pod::is_active)
            .collect()
    }

    /// Waits until the ReplicaSet of revision `rev` asks for `replicas` pods and has them.
    async fn wait_rs(&self, rev: &str, replicas: i32) -> ReplicaSet {
        embedded::wait_until(
            &self.rs_api(),
            &format!("revision {rev} at {replicas}"),
            TIMEOUT,
            |rs: &ReplicaSet| {
                revision(rs) == rev
                    && size(rs) == replicas
                    && rs.status.as_ref().map(|s| s.replicas) == Some(replicas)
            },
        )
        .await
        .unwrap()
    }

    async fn wait_deployment(
        &self,
        what: &str,
        pred: impl FnMut(&Deployment) -> bool,
    ) -> Deployment {
        embedded::wait_until(&self.deployments(), what, TIMEOUT, pred)
            .await
            .unwrap()
    }

    /// Waits until the Deployment's controller has seen its latest spec.
    async fn wait_observed(&self, name: &str) -> Deployment {
        self.wait_deployment("spec observed", |d| {
            d.name_any() == name
                && d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
        })
        .await
    }

    async fn watch(&self, rule: Rule) -> InvariantWatcher {
        InvariantWatcher::start(self.client.clone(), "default", "app=web", rule).await
    }
}

/// A Deployment manifest for kubectl (JSON is YAML).
fn deployment(name: &str, replicas: i32, image: &str, strategy: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    })
}

fn rolling(surge: Value, unavailable: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

fn rolling_rule(replicas: i32, surge: i32, unavailable: i32) -> Rule {
    Rule::Rolling {
        max_pods: replicas + surge,
        min_available: replicas - unavailable,
        min_ready_seconds: 0,
    }
}

fn size(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn revision(rs: &ReplicaSet) -> String {
    rs.annotations().get(REVISION).cloned().unwrap_or_default()
}

fn rs_image(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .unwrap()
        .template
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

fn pod_image(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

fn uids(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().map(|p| p.uid().unwrap()).collect()
}

/// The condition `type_` as (status, reason, message).
fn condition(d: &Deployment, type_: &str) -> Option<(String, String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

fn has_condition(d: &Deployment, type_: &str, status: &str, reason: &str) -> bool {
    condition(d, type_).is_some_and(|(s, r, _)| s == status && r == reason)
}

/// The rows of `kubectl rollout history` as (revision, change cause).
fn history(out: &str) -> Vec<(String, String)> {
    out.lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (rev, cause) = l
                .trim()
                .split_once(char::is_whitespace)
                .unwrap_or((l.trim(), ""));
            (rev.to_string(), cause.trim().to_string())
        })
        .collect()
}

fn rows(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn revs(v: &[(&str, i32)]) -> Vec<(String, i32)> {
    v.iter().map(|(a, b)| (a.to_string(), *b)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_deployment_rolls_out_with_a_hashed_replica_set_and_rollout_status_returns() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        3,
        "nginx:1",
        rolling(json!("25%"), json!("25%")),
    ))
    .await;
    env.rollout_status("web").await;

    let rss = env.replica_sets("web").await;
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs.labels().get("pod-template-hash").cloned().unwrap();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    let spec = rs.spec.clone().unwrap();
    assert_eq!(
        spec.selector.match_labels.unwrap().get("pod-template-hash"),
        Some(&hash)
    );
    assert_eq!(
        spec.template
            .unwrap()
            .metadata
            .unwrap()
            .labels
            .unwrap()
            .get("pod-template-hash"),
        Some(&hash)
    );
    let ann = rs.annotations();
    // 25% of 3: surge rounds up to 1.
    for (k, v) in [
        (REVISION, "1"),
        ("deployment.kubernetes.io/desired-replicas", "3"),
        ("deployment.kubernetes.io/max-replicas", "4"),
    ] {
        assert_eq!(ann.get(k).map(String::as_str), Some(v), "{k}");
    }
    let owner = api::pod::controller_of(&rs.metadata).unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "web")
    );
    assert_eq!(owner.block_owner_deletion, Some(true));

    let pods = env.active_pods("web").await;
    assert_eq!(pods.len(), 3);
    for p in &pods {
        assert_eq!(p.labels().get("pod-template-hash"), Some(&hash));
        assert!(
            p.name_any().starts_with(&format!("web-{hash}-")),
            "{}",
            p.name_any()
        );
        assert!(p.spec.as_ref().unwrap().node_name.is_some(), "scheduled");
        assert!(api::pod::is_ready(p), "ready");
        assert_eq!(
            api::pod::controller_of(&p.metadata).unwrap().name,
            rs.name_any()
        );
    }

    let d = env
        .wait_deployment("conditions settle", |d| {
            has_condition(d, "Progressing", "True", "NewReplicaSetAvailable")
        })
        .await;
    assert!(has_condition(
        &d,
        "Available",
        "True",
        "MinimumReplicasAvailable"
    ));
    assert_eq!(d.annotations().get(REVISION).map(String::as_str), Some("1"));
    let s = d.status.clone().unwrap();
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3))
    );
    assert_eq!(s.unavailable_replicas, None);
    assert_eq!(s.observed_generation, d.metadata.generation);

    // kubectl's own tables agree.
    let row = env
        .kubectl(&["get", "deployment", "web", "--no-headers"])
        .await;
    assert_eq!(
        row.split_whitespace().take(4).collect::<Vec<_>>(),
        ["web", "3/3", "3", "3"]
    );
    let names = env
        .kubectl(&["get", "rs", "-l", "app=web", "-o", "name"])
        .await;
    assert_eq!(names.trim(), format!("replicaset.apps/web-{hash}"));
    env.stop().await;
}

/// From v1, a `stuck` template freezes the rollout where the resolved budgets run out (old at
/// `replicas - maxUnavailable`, new at `maxSurge + maxUnavailable`), then a good v3 rolls over
/// both: all under the invariant watcher.
async fn rolling_update_stays_within_bounds_and_rolls_over(
    replicas: i32,
    surge: Value,
    unavailable: Value,
    max_surge: i32,
    max_unavailable: i32,
) {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        replicas,
        "nginx:1",
        rolling(surge, unavailable),
    ))
    .await;
    env.rollout_status("web").await;
    let watcher = env
        .watch(rolling_rule(replicas, max_surge, max_unavailable))
        .await;

    env.set_image("web", "nginx:stuck").await;
    env.wait_rs("1", replicas - max_unavailable).await;
    env.wait_rs("2", max_surge + max_unavailable).await;

    // Rollover: v3 while v2 is half rolled.
    env.set_image("web", "nginx:3").await;
    env.rollout_status("web").await;
    assert_eq!(
        env.sizes("web").await,
        revs(&[("1", 0), ("2", 0), ("3", replicas)])
    );
    let pods = env.active_pods("web").await;
    assert!(pods.iter().all(|p| pod_image(p) == "nginx:3"));
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert!(
        watcher.events_seen() > 2 * replicas as usize,
        "the watcher saw the rollout"
    );
    assert!(
        watcher.max_pods_seen() > replicas,
        "the surge was used: {}",
        watcher.max_pods_seen()
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_with_numbers_stays_within_bounds_and_rolls_over_a_half_rolled_set() {
    // The upstream example: 10 replicas, surge 3, unavailable 2 -> old 8, new 5.
    rolling_update_stays_within_bounds_and_rolls_over(10, json!(3), json!(2), 3, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_with_percentages_resolves_fenceposts_and_stays_within_bounds() {
    // 30% of 7 = 2.1: surge rounds up to 3, unavailable down to 2 -> old 5, new 5.
    rolling_update_stays_within_bounds_and_rolls_over(7, json!("30%"), json!("30%"), 3, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_quick_image_changes_end_on_the_last_template_alone() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        6,
        "nginx:1",
        rolling(json!(2), json!(1)),
    ))
    .await;
    env.rollout_status("web").await;
    let watcher = env.watch(rolling_rule(6, 2, 1)).await;
    // However far v2 got when v3 arrived (if the controller saw it at all), every older set
    // ends at 0.
    env.set_image("web", "nginx:2").await;
    env.set_image("web", "nginx:3").await;
    env.rollout_status("web").await;
    let rss = env.replica_sets("web").await;
    let (last, older) = rss.split_last().unwrap();
    assert_eq!((rs_image(last), size(last)), ("nginx:3".to_string(), 6));
    assert!(
        older.iter().all(|r| size(r) == 0),
        "{:?}",
        env.sizes("web").await
    );
    assert!((2..=3).contains(&rss.len()));
    assert_eq!(watcher.violations(), Vec::<String>::new());
    env.stop().await;
}

/// Issue 43's scenario: 6 replicas, `maxSurge: 2, maxUnavailable: 0`, the image set twice back
/// to back, round after round (a CI pipeline pushing two commits in a minute). Every pod and
/// ReplicaSet event is checked: never more than 8 pods. Before the fix, and on upstream, a
/// round could reach 10 (new 6, previous 2, oldest 2). `ROLLWRIGHT_ROUNDS=200` runs the
/// issue's count on purpose; CI runs a few.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_quick_image_changes_round_after_round_never_exceed_max_surge() {
    let rounds: usize = std::env::var("ROLLWRIGHT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        6,
        "nginx:0",
        rolling(json!(2), json!(0)),
    ))
    .await;
    env.rollout_status("web").await;
    let watcher = env.watch(rolling_rule(6, 2, 0)).await;
    for round in 1..=rounds {
        env.set_image("web", &format!("nginx:{round}a")).await;
        env.set_image("web", &format!("nginx:{round}b")).await;
        env.rollout_status("web").await;
        assert_eq!(
            watcher.violations(),
            Vec::<String>::new(),
            "round {round} of {rounds}"
        );
    }
    let pods = env.active_pods("web").await;
    assert_eq!(pods.len(), 6);
    assert!(
        pods.iter()
            .all(|p| pod_image(p) == format!("nginx:{rounds}b"))
    );
    eprintln!("most pods at once: {} (allowed 8)", watcher.max_pods_seen());
    assert!(watcher.max_pods_seen() > 6, "the surge was used");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_starts_no_new_pod_while_an_old_one_exists() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        4,
        "nginx:1",
        json!({"type": "Recreate"}),
    ))
    .await;
    env.rollout_status("web").await;
    let watcher = env.watch(Rule::Recreate).await;
    env.set_image("web", "nginx:2").await;
    env.rollout_status("web").await;
    assert_eq!(env.sizes("web").await, revs(&[("1", 0), ("2", 4)]));
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert!(watcher.events_seen() >= 8, "the watcher saw the rollout");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_history_shows_change_causes_and_undo_revives_old_replica_sets() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        2,
        "nginx:1",
        rolling(json!(1), json!(0)),
    ))
    .await;
    env.rollout_status("web").await;
    // As upstream documents it: annotate after each change; the controller copies the cause to
    // the new ReplicaSet only.
    for (rev, image, cause) in [
        ("1", None, "deploy v1"),
        ("2", Some("nginx:2"), "upgrade to v2"),
        ("3", Some("nginx:3"), "upgrade to v3"),
    ] {
        if let Some(image) = image {
            env.set_image("web", image).await;
        }
        env.kubectl(&[
            "annotate",
            "deployment/web",
            "--overwrite",
            &format!("{CHANGE_CAUSE}={cause}"),
        ])
        .await;
        env.rollout_status("web").await;
        embedded::wait_until(&env.rs_api(), "cause copied", TIMEOUT, |rs: &ReplicaSet| {
            revision(rs) == rev
                && rs.annotations().get(CHANGE_CAUSE).map(String::as_str) == Some(cause)
        })
        .await
        .unwrap();
    }
    let out = env.kubectl(&["rollout", "history", "deployment/web"]).await;
    assert_eq!(
        history(&out),
        rows(&[
            ("1", "deploy v1"),
            ("2", "upgrade to v2"),
            ("3", "upgrade to v3")
        ]),
        "{out}"
    );
    let out = env
        .kubectl(&["rollout", "history", "deployment/web", "--revision=2"])
        .await;
    assert!(out.contains("nginx:2") && !out.contains("nginx:3"), "{out}");

    // Undo goes to the previous revision: its ReplicaSet becomes the new one as revision 4.
    let v2 = env
        .replica_sets("web")
        .await
        .into_iter()
        .find(|r| revision(r) == "2")
        .unwrap();
    let out = env.kubectl(&["rollout", "undo", "deployment/web"]).await;
    assert!(out.contains("rolled back"), "{out}");
    env.rollout_status("web").await;
    let rss = env.replica_sets("web").await;
    let revived = rss.iter().find(|r| r.name_any() == v2.name_any()).unwrap();
    assert_eq!(revision(revived), "4");
    assert_eq!(
        revived
            .annotations()
            .get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("2")
    );
    assert_eq!(size(revived), 2);
    assert_eq!(rss.len(), 3, "no new replica set for an old template");
    let d = env
        .wait_deployment("revision 4", |d| {
            d.annotations().get(REVISION).map(String::as_str) == Some("4")
        })
        .await;
    assert_eq!(
        d.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:2")
    );

    // To a named revision: v1 becomes revision 5.
    let out = env
        .kubectl(&["rollout", "undo", "deployment/web", "--to-revision=1"])
        .await;
    assert!(out.contains("rolled back"), "{out}");
    env.rollout_status("web").await;
    let rss = env.replica_sets("web").await;
    assert_eq!(
        rss.iter()
            .map(|r| (revision(r), size(r), rs_image(r)))
            .collect::<Vec<_>>(),
        vec![
            ("3".to_string(), 0, "nginx:3".to_string()),
            ("4".to_string(), 0, "nginx:2".to_string()),
            ("5".to_string(), 2, "nginx:1".to_string()),
        ]
    );
    assert_eq!(
        rss[2]
            .annotations()
            .get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("1")
    );
    // kubectl carried each revision's change cause back onto the Deployment.
    let out = env.kubectl(&["rollout", "history", "deployment/web"]).await;
    assert_eq!(
        history(&out),
        rows(&[
            ("3", "upgrade to v3"),
            ("4", "upgrade to v2"),
            ("5", "deploy v1")
        ]),
        "{out}"
    );
    // Undoing to the revision that runs is a no-op.
    let out = env
        .kubectl(&["rollout", "undo", "deployment/web", "--to-revision=5"])
        .await;
    assert!(out.contains("skipped rollback"), "{out}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_to_the_running_template_restarts_no_pod() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        4,
        "nginx:1",
        rolling(json!(1), json!(1)),
    ))
    .await;
    env.rollout_status("web").await;
    // A bad v2 stalls with three v1 pods still running.
    env.set_image("web", "nginx:stuck").await;
    env.wait_rs("1", 3).await;
    env.wait_rs("2", 2).await;
    let v1_before: BTreeSet<String> = uids(
        &env.active_pods("web")
            .await
            .into_iter()
            .filter(|p| pod_image(p) == "nginx:1")
            .collect::<Vec<_>>(),
    );
    assert_eq!(v1_before.len(), 3);
    let watcher = env.watch(rolling_rule(4, 1, 1)).await;

    let out = env.kubectl(&["rollout", "undo", "deployment/web"]).await;
    assert!(out.contains("rolled back"), "{out}");
    env.rollout_status("web").await;
    let rss = env.replica_sets("web").await;
    assert_eq!(
        rss.iter()
            .map(|r| (revision(r), size(r), rs_image(r)))
            .collect::<Vec<_>>(),
        vec![
            ("2".to_string(), 0, "nginx:stuck".to_string()),
            ("3".to_string(), 4, "nginx:1".to_string()),
        ]
    );
    let after = env.active_pods("web").await;
    assert!(after.iter().all(|p| pod_image(p) == "nginx:1"));
    let after = uids(&after);
    assert!(v1_before.is_subset(&after), "v1 pods were restarted");
    assert_eq!(after.len(), 4, "only the missing pod was created");
    assert_eq!(watcher.violations(), Vec::<String>::new());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_deployment_scales_proportionally_but_rolls_only_when_resumed() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        4,
        "nginx:1",
        rolling(json!(1), json!(1)),
    ))
    .await;
    env.rollout_status("web").await;
    env.set_image("web", "nginx:stuck").await;
    env.wait_rs("1", 3).await;
    env.wait_rs("2", 2).await;

    let out = env.kubectl(&["rollout", "pause", "deployment/web"]).await;
    assert!(out.contains("paused"), "{out}");
    env.wait_deployment("paused condition", |d| {
        has_condition(d, "Progressing", "Unknown", "DeploymentPaused")
    })
    .await;
    // A new template while paused: nothing rolls.
    env.set_image("web", "nginx:3").await;
    env.wait_observed("web").await;
    assert_eq!(env.sizes("web").await, revs(&[("1", 3), ("2", 2)]));

    // Scaling while paused is proportional: 8 + surge 1 = 9 allowed, 4 more spread 3:2 by
    // size (3*9/5 = 5.4 -> 5, 2*9/5 = 3.6 -> 4).
    env.kubectl(&["scale", "deployment/web", "--replicas=8"])
        .await;
    env.wait_rs("1", 5).await;
    env.wait_rs("2", 4).await;
    // The status follows the ReplicaSets' (9 pods, 5 of them available; 8 updated to nothing).
    env.wait_deployment("paused status", |d| {
        let s = d.status.clone().unwrap_or_default();
        s.observed_generation == d.metadata.generation
            && (s.replicas, s.available_replicas, s.updated_replicas) == (Some(9), Some(5), None)
    })
    .await;
    assert_eq!(
        env.replica_sets("web").await.len(),
        2,
        "no new replica set while paused"
    );

    let watcher = env.watch(rolling_rule(8, 1, 1)).await;
    let out = env.kubectl(&["rollout", "resume", "deployment/web"]).await;
    assert!(out.contains("resumed"), "{out}");
    env.rollout_status("web").await;
    assert_eq!(
        env.sizes("web").await,
        revs(&[("1", 0), ("2", 0), ("3", 8)])
    );
    assert_eq!(watcher.violations(), Vec::<String>::new());
    let d = env.wait_observed("web").await;
    assert!(!has_condition(
        &d,
        "Progressing",
        "Unknown",
        "DeploymentPaused"
    ));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_restart_replaces_every_pod() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        4,
        "nginx:1",
        rolling(json!(1), json!(1)),
    ))
    .await;
    env.rollout_status("web").await;
    let before = uids(&env.active_pods("web").await);
    let watcher = env.watch(rolling_rule(4, 1, 1)).await;
    let out = env.kubectl(&["rollout", "restart", "deployment/web"]).await;
    assert!(out.contains("restarted"), "{out}");
    env.rollout_status("web").await;
    assert_eq!(env.sizes("web").await, revs(&[("1", 0), ("2", 4)]));
    let pods = env.active_pods("web").await;
    assert_eq!(pods.len(), 4);
    for p in &pods {
        assert!(
            p.annotations()
                .contains_key("kubectl.kubernetes.io/restartedAt"),
            "restartedAt on {}",
            p.name_any()
        );
    }
    assert!(uids(&pods).is_disjoint(&before), "every pod was replaced");
    assert_eq!(watcher.violations(), Vec::<String>::new());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_mid_rollout_spreads_proportionally_as_in_the_upstream_example() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        10,
        "nginx:1",
        rolling(json!(3), json!(2)),
    ))
    .await;
    env.rollout_status("web").await;
    env.set_image("web", "nginx:stuck").await;
    env.wait_rs("1", 8).await;
    env.wait_rs("2", 5).await;
    // 15 + 3 = 18 allowed: 5 more, 3 to the old ReplicaSet and 2 to the new one.
    env.kubectl(&["scale", "deployment/web", "--replicas=15"])
        .await;
    env.wait_rs("1", 11).await;
    env.wait_rs("2", 7).await;
    let watcher = env.watch(rolling_rule(15, 3, 2)).await;
    env.set_image("web", "nginx:3").await;
    env.rollout_status("web").await;
    assert_eq!(
        env.sizes("web").await,
        revs(&[("1", 0), ("2", 0), ("3", 15)])
    );
    assert_eq!(watcher.violations(), Vec::<String>::new());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_image_exceeds_the_progress_deadline_and_a_fixed_image_completes() {
    let env = Env::start().await;
    env.apply(&deployment(
        "web",
        3,
        "nginx:1",
        rolling(json!(1), json!(1)),
    ))
    .await;
    env.rollout_status("web").await;
    // A short deadline only for the bad rollout.
    env.kubectl(&[
        "patch",
        "deployment/web",
        "--type=merge",
        "-p",
        r#"{"spec":{"progressDeadlineSeconds":2}}"#,
    ])
    .await;
    let watcher = env.watch(rolling_rule(3, 1, 1)).await;
    env.set_image("web", "nginx:broken").await;
    let err = env
        .c
        .kubectl_fails(
            &["rollout", "status", "deployment/web", "--timeout=45s"],
            None,
        )
        .await;
    assert!(
        err.contains("error: deployment \"web\" exceeded its progress deadline"),
        "{err}"
    );
    let d = env.deployments().get("web").await.unwrap();
    let (status, reason, message) = condition(&d, "Progressing").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ProgressDeadlineExceeded")
    );
    assert!(
        message.starts_with("ReplicaSet \"web-")
            && message.ends_with("\" has timed out progressing."),
        "{message}"
    );
    // Stalled within maxUnavailable: two v1 pods serve, the two new ones cannot pull.
    env.wait_rs("1", 2).await;
    env.wait_rs("2", 2).await;
    let pods = env.active_pods("web").await;
    assert_eq!(
        pods.iter().filter(|p| api::pod::is_ready(p)).count(),
        2,
        "two old pods stay available"
    );
    for p in pods.iter().filter(|p| pod_image(p) == "nginx:broken") {
        let waiting = p
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone());
        assert!(
            matches!(
                waiting.as_deref(),
                Some("ErrImagePull" | "ImagePullBackOff")
            ),
            "{waiting:?}"
        );
    }

    // Fixing the image completes the rollout (with the default deadline back).
    env.kubectl(&[
        "patch",
        "deployment/web",
        "--type=merge",
        "-p",
        r#"{"spec":{"progressDeadlineSeconds":600}}"#,
    ])
    .await;
    env.set_image("web", "nginx:2").await;
    env.rollout_status("web").await;
    env.wait_deployment("progressing again", |d| {
        has_condition(d, "Progressing", "True", "NewReplicaSetAvailable")
    })
    .await;
    assert_eq!(
        env.sizes("web").await,
        revs(&[("1", 0), ("2", 0), ("3", 3)])
    );
    assert_eq!(watcher.violations(), Vec::<String>::new());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_ready_seconds_delays_availability() {
    const MIN_READY: i32 = 3;
    let env = Env::start().await;
    // Every status the Deployment goes through, checked against its pods' ready times.
    let deployments = env.deployments();
    let pods = env.pod_api();
    let checker = tokio::spawn(async move {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let mut events = watcher(deployments, watcher::Config::default())
            .applied_objects()
            .boxed();
        let mut saw_ready_not_available = false;
        let mut too_early = Vec::new();
        while let Some(Ok(d)) = events.next().await {
            let s = d.status.clone().unwrap_or_default();
            let (ready, available) = (
                s.ready_replicas.unwrap_or(0),
                s.available_replicas.unwrap_or(0),
            );
            // Ready times are whole seconds, rounded down: this count can only be too high.
            let now = jiff::Timestamp::now();
            let could_be = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
                .items
                .iter()
                .filter(|p| api::pod::is_available(p, MIN_READY, now))
                .count() as i32;
            if available > could_be {
                too_early.push(format!(
                    "{available} available, at most {could_be} could be"
                ));
            }
            saw_ready_not_available |= ready == 3 && available < 3;
            if available == 3 {
                break;
            }
        }
        (saw_ready_not_available, too_early)
    });
    let mut d = deployment("web", 3, "nginx:1", rolling(json!(1), json!(0)));
    d["spec"]["minReadySeconds"] = json!(MIN_READY);
    env.apply(&d).await;
    env.rollout_status("web").await;
    let (saw_ready_not_available, too_early) = tokio::time::timeout(TIMEOUT, checker)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(too_early, Vec::<String>::new());
    assert!(
        saw_ready_not_available,
        "pods were ready before they were available"
    );
    let now = jiff::Timestamp::now();
    assert!(
        env.active_pods("web")
            .await
            .iter()
            .all(|p| api::pod::is_available(p, MIN_READY, now))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_history_limit_deletes_the_oldest_replica_sets_first() {
    let env = Env::start().await;
    let mut d = deployment("web", 2, "nginx:1", rolling(json!(1), json!(0)));
    d["spec"]["revisionHistoryLimit"] = json!(1);
    env.apply(&d).await;
    env.rollout_status("web").await;
    let mut by_revision = Vec::new();
    for image in ["nginx:2", "nginx:3", "nginx:4"] {
        by_revision.push(env.replica_sets("web").await.last().cloned().unwrap());
        env.set_image("web", image).await;
        env.rollout_status("web").await;
    }
    // After v3 and v4 the oldest old set went each time: revisions 1, then 2.
    for rs in &by_revision[..2] {
        tokio::time::timeout(
            TIMEOUT,
            await_condition(env.rs_api(), &rs.name_any(), is_deleted(&rs.uid().unwrap())),
        )
        .await
        .unwrap()
        .unwrap();
    }
    assert_eq!(env.sizes("web").await, revs(&[("3", 0), ("4", 2)]));
    let out = env.kubectl(&["rollout", "history", "deployment/web"]).await;
    assert_eq!(
        history(&out).into_iter().map(|r| r.0).collect::<Vec<_>>(),
        ["3", "4"],
        "{out}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_replica_sets_are_adopted_by_a_recreated_deployment_which_finishes() {
    let mut env = Env::start().await;
    let v1 = deployment("web", 4, "nginx:1", rolling(json!(1), json!(1)));
    env.apply(&v1).await;
    env.rollout_status("web").await;
    // Without a scheduler the new pods stay Pending: the rollout stops at old 3, new 2.
    env.stop_scheduler().await;
    env.set_image("web", "nginx:2").await;
    env.wait_rs("1", 3).await;
    env.wait_rs("2", 2).await;

    // kubectl waits until the Deployment is gone, its ReplicaSets released.
    env.kubectl(&["delete", "deployment", "web", "--cascade=orphan"])
        .await;
    let rss = env.replica_sets("web").await;
    assert_eq!(
        rss.iter()
            .map(|r| (revision(r), size(r)))
            .collect::<Vec<_>>(),
        revs(&[("1", 3), ("2", 2)]),
        "both replica sets left as they were"
    );
    for rs in &rss {
        assert!(
            api::pod::controller_of(&rs.metadata).is_none(),
            "{} released",
            rs.name_any()
        );
    }
    assert_eq!(env.active_pods("web").await.len(), 5, "no pod deleted");

    // The same Deployment again (v2) adopts both and finishes once pods can be scheduled.
    let mut v2 = v1.clone();
    v2["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    env.apply(&v2).await;
    env.start_scheduler();
    env.rollout_status("web").await;
    let uid = env.deployments().get("web").await.unwrap().uid();
    let rss = env.replica_sets("web").await;
    assert_eq!(
        rss.iter()
            .map(|r| (revision(r), size(r)))
            .collect::<Vec<_>>(),
        revs(&[("1", 0), ("2", 4)]),
        "no third replica set"
    );
    for rs in &rss {
        assert_eq!(
            api::pod::controller_of(&rs.metadata).map(|r| r.uid.clone()),
            uid,
            "{} adopted",
            rs.name_any()
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_finishes_with_its_invariants_after_the_controllers_crash() {
    let mut env = Env::start().await;
    env.apply(&deployment(
        "web",
        10,
        "nginx:1",
        rolling(json!(2), json!(2)),
    ))
    .await;
    env.rollout_status("web").await;
    let watcher = env.watch(rolling_rule(10, 2, 2)).await;
    env.stop_scheduler().await;
    env.set_image("web", "nginx:2").await;
    let new = env.wait_rs("2", 4).await;
    env.wait_rs("1", 8).await;

    // The controllers die mid-rollout; while they are gone the new pods get ready.
    env.stop_controllers().await;
    env.start_scheduler();
    let hash = new.labels().get("pod-template-hash").cloned().unwrap();
    let mut ready = HashSet::new();
    embedded::wait_until(&env.pod_api(), "new pods ready", TIMEOUT, |p: &Pod| {
        if p.labels().get("pod-template-hash") == Some(&hash) && api::pod::is_ready(p) {
            ready.insert(p.name_any());
        }
        ready.len() == 4
    })
    .await
    .unwrap();

    // New controllers on the same server finish the rollout.
    env.start_controllers();
    env.rollout_status("web").await;
    assert_eq!(env.sizes("web").await, revs(&[("1", 0), ("2", 10)]));
    assert_eq!(env.active_pods("web").await.len(), 10);
    assert_eq!(watcher.violations(), Vec::<String>::new());
    env.stop().await;
}
