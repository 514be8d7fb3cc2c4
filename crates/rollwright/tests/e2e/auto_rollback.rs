//! Automatic rollback (issue #22) end to end: `kubectl` against a whole in-process cluster
//! (simulated nodes under a fault profile, scheduler, controllers). Images decide how pods
//! behave: `:never-ready` runs but never gets Ready, `:crash` crash-loops, `:broken` never pulls.
//!
//! Each test waits on the API objects (a watch with a deadline); nothing is timed.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{self, Rig};
use controllers::{
    autorollback::{ENABLED, ROLLED_BACK_FROM},
    invariants::{InvariantWatcher, Rule},
};
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet},
    core::v1::Pod,
};
use kube::{Api, ResourceExt, api::ListParams};
use nodesim::distribution::Distribution;
use serde_json::{Value, json};
use std::{collections::BTreeSet, time::Duration};

const PROFILE: &str = r#"
seed: 1
rules:
  - name: never-ready
    match: {image: "*:never-ready"}
    fault: neverReady
  - name: crash
    match: {image: "*:crash"}
    fault: {crashLoop: {after: 50ms}}
  - name: broken
    match: {image: "*:broken"}
    fault: imagePullFailure
"#;

/// Long enough for a 10 s progress deadline and the rollback after it.
const TIMEOUT: Duration = Duration::from_secs(90);

async fn cluster() -> Rig {
    let nodes = nodesim::NodeSim {
        nodes: 3,
        start_delay: Distribution::Fixed(Duration::from_millis(100)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
        backoff_scale: 0.05,
        ..Default::default()
    };
    let mut rig = Rig::start(nodes, PROFILE).await;
    rig.start_scheduler_and_controllers();
    rig
}

fn deployment(name: &str, image: &str, annotated: bool, deadline: i32) -> Value {
    let annotations = if annotated {
        json!({ENABLED: "true"})
    } else {
        json!({})
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}, "annotations": annotations},
        "spec": {
            "replicas": 3,
            "progressDeadlineSeconds": deadline,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    })
}

fn image_of(template: Option<&k8s_openapi::api::core::v1::PodSpec>) -> String {
    template.unwrap().containers[0].image.clone().unwrap()
}

fn d_image(d: &Deployment) -> String {
    image_of(d.spec.as_ref().unwrap().template.spec.as_ref())
}

/// The `type` condition of a workload's status, as JSON.
fn condition<K: serde::Serialize>(obj: &K, kind: &str) -> Option<Value> {
    let v = serde_json::to_value(obj).unwrap();
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

fn has_condition<K: serde::Serialize>(obj: &K, kind: &str, status: &str, reason: &str) -> bool {
    condition(obj, kind).is_some_and(|c| c["status"] == status && c["reason"] == reason)
}

async fn active_pods(client: &kube::Client, ns: &str, app: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(api::pod::is_active)
        .collect()
}

fn uids(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().map(|p| p.uid().unwrap()).collect()
}

async fn wait<K>(api: &Api<K>, what: &str, pred: impl FnMut(&K) -> bool) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    embedded::wait_until(api, what, TIMEOUT, pred)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn complete(d: &Deployment, image: &str) -> bool {
    let s = d.status.clone().unwrap_or_default();
    d_image(d) == image
        && s.observed_generation == d.metadata.generation
        && s.updated_replicas == Some(3)
        && s.replicas == Some(3)
        && s.available_replicas == Some(3)
}

/// An invariant watcher over `app`'s pods and ReplicaSets (it returns once it has listed them).
async fn watcher(client: &kube::Client, ns: &str, app: &str) -> InvariantWatcher {
    InvariantWatcher::start(
        client.clone(),
        ns,
        &format!("app={app}"),
        Rule::Rolling {
            max_pods: 4,
            min_available: 3,
            min_ready_seconds: 0,
        },
    )
    .await
}

fn revision(rs: &ReplicaSet) -> String {
    rs.annotations()
        .get("deployment.kubernetes.io/revision")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_never_ready_rollout_rolls_back_by_itself_and_the_same_template_does_not_loop() {
    let rig = cluster().await;
    let client = rig.client.clone();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    rig.apply(&deployment("web", "web:1", true, 10)).await;
    wait(&deployments, "web:1 complete", |d| complete(d, "web:1")).await;
    let before = uids(&active_pods(&client, "default", "web").await);
    assert_eq!(before.len(), 3);
    let watcher = watcher(&client, "default", "web").await;

    rig.kubectl(&["set", "image", "deployment/web", "app=web:never-ready"])
        .await;
    // The deadline passes, the controller says so, then rolls back.
    let d = wait(&deployments, "rolled back", |d| {
        has_condition(d, "RolledBack", "True", "ProgressDeadlineExceeded")
    })
    .await;
    assert_eq!(d_image(&d), "web:1");
    let message = condition(&d, "RolledBack").unwrap()["message"].clone();
    let bad_hash = d.annotations()[ROLLED_BACK_FROM].clone();
    assert_eq!(
        message,
        json!(format!(
            "rolled back from revision 2 ({bad_hash}) to revision 1 ({}): the rollout exceeded \
             its progress deadline",
            d.annotations()["rollwright.io/rolled-back-to"]
        ))
    );
    common::wait_event(
        client.clone(),
        "default",
        Some("web"),
        "RolledBack",
        "rolled back from revision 2",
    )
    .await;
    let d = wait(&deployments, "web:1 complete again", |d| {
        complete(d, "web:1")
    })
    .await;
    // As `kubectl rollout undo`: the old ReplicaSet is the newest revision again.
    assert_eq!(
        d.annotations()["deployment.kubernetes.io/revision"],
        "3",
        "{d:?}"
    );
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let all = rss
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    let mut revisions: Vec<(String, i32, String)> = all
        .items
        .iter()
        .map(|rs| {
            let image = image_of(
                rs.spec
                    .as_ref()
                    .unwrap()
                    .template
                    .as_ref()
                    .unwrap()
                    .spec
                    .as_ref(),
            );
            (
                revision(rs),
                rs.spec.as_ref().unwrap().replicas.unwrap(),
                image,
            )
        })
        .collect();
    revisions.sort();
    assert_eq!(
        revisions,
        vec![
            ("2".into(), 0, "web:never-ready".into()),
            ("3".into(), 3, "web:1".into())
        ]
    );
    let restored = all.items.iter().find(|rs| revision(rs) == "3").unwrap();
    assert_eq!(
        restored.annotations()["deployment.kubernetes.io/revision-history"],
        "1"
    );
    // Not one pod of the good revision was replaced.
    wait(&rss, "the failed revision's pods gone", |rs| {
        revision(rs) != "2" || rs.status.as_ref().is_some_and(|s| s.replicas == 0)
    })
    .await;
    assert_eq!(uids(&active_pods(&client, "default", "web").await), before);
    assert_eq!(watcher.violations(), Vec::<String>::new());
    // The CLI tells it: the revision left is marked, the rollback told under the table.
    let history = rig
        .c
        .rollwright(&["rollout", "history", "deploy/web"])
        .await;
    assert!(history.contains("\n2 (rolled back) "), "{history}");
    assert!(history.contains("\n3 (current) "), "{history}");
    assert!(
        history.contains("(ProgressDeadlineExceeded): rolled back from revision 2"),
        "{history}"
    );
    let status = rig
        .c
        .rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    assert!(status.contains("automatic rollback at "), "{status}");

    // Applying the failed template again rolls it out (a person asked), but it is not rolled
    // back from a second time: the condition says so, the template stays.
    rig.kubectl(&["set", "image", "deployment/web", "app=web:never-ready"])
        .await;
    let d = wait(&deployments, "the second failure said", |d| {
        has_condition(d, "RolledBack", "False", "RollbackSuppressed")
    })
    .await;
    assert_eq!(d_image(&d), "web:never-ready");
    assert!(has_condition(
        &d,
        "Progressing",
        "False",
        "ProgressDeadlineExceeded"
    ));
    assert_eq!(d.annotations()["deployment.kubernetes.io/revision"], "4");
    common::wait_event(
        client.clone(),
        "default",
        Some("web"),
        "RollbackSuppressed",
        "failed again",
    )
    .await;
    // The controller has nothing more to do: its next sync leaves the template alone.
    rig.kubectl(&["annotate", "deployment/web", "poke=1"]).await;
    let d = wait(&deployments, "the poke observed", |d| {
        d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
            && d.annotations().contains_key("poke")
    })
    .await;
    assert_eq!(d_image(&d), "web:never-ready");
    assert_eq!(d.annotations()["deployment.kubernetes.io/revision"], "4");
    assert_eq!(watcher.violations(), Vec::<String>::new());
    rig.stop().await;
}

#[tokio::test]
async fn a_crash_looping_rollout_is_rolled_back_before_its_deadline() {
    let rig = cluster().await;
    let client = rig.client.clone();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    // A deadline the test never reaches: the crash loop alone decides.
    rig.apply(&deployment("web", "web:1", true, 600)).await;
    wait(&deployments, "web:1 complete", |d| complete(d, "web:1")).await;
    let before = uids(&active_pods(&client, "default", "web").await);
    let watcher = watcher(&client, "default", "web").await;
    rig.kubectl(&["set", "image", "deployment/web", "app=web:crash"])
        .await;
    let d = wait(&deployments, "rolled back", |d| {
        has_condition(d, "RolledBack", "True", "CrashLoop")
    })
    .await;
    assert_eq!(d_image(&d), "web:1");
    assert!(
        !has_condition(&d, "Progressing", "False", "ProgressDeadlineExceeded"),
        "{d:?}"
    );
    common::wait_event(
        client.clone(),
        "default",
        Some("web"),
        "RolledBack",
        "1 pod(s) are crash-looping",
    )
    .await;
    wait(&deployments, "web:1 complete again", |d| {
        complete(d, "web:1")
    })
    .await;
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    wait(&rss, "the failed revision's pods gone", |rs| {
        revision(rs) != "2" || rs.status.as_ref().is_some_and(|s| s.replicas == 0)
    })
    .await;
    assert_eq!(uids(&active_pods(&client, "default", "web").await), before);
    assert_eq!(watcher.violations(), Vec::<String>::new());
    rig.stop().await;
}

#[tokio::test]
async fn a_namespace_annotation_opts_its_workloads_in() {
    let rig = cluster().await;
    let client = rig.client.clone();
    rig.kubectl(&["create", "namespace", "opted"]).await;
    rig.kubectl(&["annotate", "namespace", "opted", &format!("{ENABLED}=true")])
        .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "opted");
    let mut manifest = deployment("web", "web:1", false, 600);
    manifest["metadata"]["namespace"] = json!("opted");
    rig.apply(&manifest).await;
    wait(&deployments, "web:1 complete", |d| complete(d, "web:1")).await;
    rig.kubectl(&[
        "-n",
        "opted",
        "set",
        "image",
        "deployment/web",
        "app=web:broken",
    ])
    .await;
    let d = wait(&deployments, "rolled back", |d| {
        has_condition(d, "RolledBack", "True", "ImagePullFailure")
    })
    .await;
    assert_eq!(d_image(&d), "web:1");
    wait(&deployments, "web:1 complete again", |d| {
        complete(d, "web:1")
    })
    .await;

    // Without the opt-in, the same failure stays.
    let defaults: Api<Deployment> = Api::namespaced(client.clone(), "default");
    rig.apply(&deployment("plain", "web:1", false, 600)).await;
    wait(&defaults, "plain complete", |d| complete(d, "web:1")).await;
    rig.kubectl(&["set", "image", "deployment/plain", "app=web:broken"])
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    wait(&pods, "a plain pod failing to pull", |p| {
        p.labels().get("app").is_some_and(|a| a == "plain")
            && controllers::autorollback::pod_failure(p, 3).is_some()
    })
    .await;
    // The controller synced after the failure (a status write of its own) and left it.
    rig.kubectl(&["annotate", "deployment/plain", "poke=1"])
        .await;
    let d = wait(&defaults, "the poke observed", |d| {
        d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
            && d.annotations().contains_key("poke")
    })
    .await;
    assert_eq!(d_image(&d), "web:broken");
    assert!(condition(&d, "RolledBack").is_none());
    rig.stop().await;
}

fn daemonset(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "annotations": {ENABLED: "true"}},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"containers": [{"name": "agent", "image": image}]}},
        },
    })
}

fn statefulset(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "annotations": {ENABLED: "true"}},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "db", "image": image}]}},
        },
    })
}

/// The DaemonSet `agent` runs `image` on all three nodes, every pod available.
fn ds_done(ds: &DaemonSet, image: &str) -> bool {
    let s = ds.status.clone().unwrap_or_default();
    image_of(ds.spec.as_ref().unwrap().template.spec.as_ref()) == image
        && s.observed_generation == ds.metadata.generation
        && s.desired_number_scheduled == 3
        && s.updated_number_scheduled == Some(3)
        && s.number_available == Some(3)
}

/// The StatefulSet `db` runs `image` in all three pods, ready and current.
fn sts_done(s: &StatefulSet, image: &str) -> bool {
    let st = s.status.clone().unwrap_or_default();
    image_of(s.spec.as_ref().unwrap().template.spec.as_ref()) == image
        && st.observed_generation == s.metadata.generation
        && st.ready_replicas == Some(3)
        && st.updated_replicas == Some(3)
        && st.current_revision == st.update_revision
}

/// maxUnavailable 1, partition 0 and ordering over `db`'s pods, listed before it returns.
async fn db_watcher(client: &kube::Client) -> controllers::stateful_invariants::StatefulWatcher {
    controllers::stateful_invariants::StatefulWatcher::start(
        client.clone(),
        "default",
        "db",
        "app=db",
        controllers::stateful_invariants::Rule {
            start: 0,
            replicas: 3,
            partition: 0,
            max_unavailable: 1,
            ordered: true,
            min_ready_seconds: 0,
        },
    )
    .await
}

/// The revision numbers of the workload's ControllerRevisions by image.
async fn revisions(client: &kube::Client, app: &str) -> Vec<(i64, String)> {
    let crs: Api<ControllerRevision> = Api::namespaced(client.clone(), "default");
    let mut out: Vec<(i64, String)> = crs
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|cr| {
            let data = &cr.data.as_ref().unwrap().0;
            let image = data
                .pointer("/spec/template/spec/containers/0/image")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            (cr.revision, image)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_daemonset_rolls_back_on_an_image_pull_failure() {
    let rig = cluster().await;
    let client = rig.client.clone();
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    rig.apply(&daemonset("agent:1")).await;
    wait(&api, "agent:1 everywhere", |ds| ds_done(ds, "agent:1")).await;
    let before = uids(&active_pods(&client, "default", "agent").await);
    rig.kubectl(&["set", "image", "daemonset/agent", "agent=agent:broken"])
        .await;
    let ds = wait(&api, "rolled back", |ds| {
        has_condition(ds, "RolledBack", "True", "ImagePullFailure")
    })
    .await;
    assert_eq!(
        image_of(ds.spec.as_ref().unwrap().template.spec.as_ref()),
        "agent:1"
    );
    common::wait_event(
        client.clone(),
        "default",
        Some("agent"),
        "RolledBack",
        "rolled back from revision 2",
    )
    .await;
    wait(&api, "agent:1 everywhere again", |ds| {
        ds_done(ds, "agent:1")
    })
    .await;
    // As `kubectl rollout undo`: revision 1's ControllerRevision is renumbered 3.
    assert_eq!(
        revisions(&client, "agent").await,
        vec![(2, "agent:broken".into()), (3, "agent:1".into())]
    );
    // maxUnavailable 1: one pod was replaced by the failed revision's, the others kept.
    let after = uids(&active_pods(&client, "default", "agent").await);
    assert_eq!(after.len(), 3);
    assert_eq!(
        before.intersection(&after).count(),
        2,
        "{before:?} {after:?}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_statefulset_rolls_back_on_an_image_pull_failure() {
    let rig = cluster().await;
    let client = rig.client.clone();
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    rig.apply(&statefulset("db:1")).await;
    wait(&api, "db:1 ready", |s| sts_done(s, "db:1")).await;
    let before = uids(&active_pods(&client, "default", "db").await);
    // maxUnavailable, partition and ordering through the failed update and the rollback.
    let watcher = db_watcher(&client).await;
    rig.kubectl(&["set", "image", "statefulset/db", "db=db:broken"])
        .await;
    let s = wait(&api, "rolled back", |s| {
        has_condition(s, "RolledBack", "True", "ImagePullFailure")
    })
    .await;
    assert_eq!(
        image_of(s.spec.as_ref().unwrap().template.spec.as_ref()),
        "db:1"
    );
    wait(&api, "db:1 ready again", |s| sts_done(s, "db:1")).await;
    assert_eq!(
        revisions(&client, "db").await,
        vec![(2, "db:broken".into()), (3, "db:1".into())]
    );
    // Only db-2 (the highest ordinal, updated first) was replaced.
    let after = active_pods(&client, "default", "db").await;
    let kept: Vec<String> = after
        .iter()
        .filter(|p| before.contains(&p.uid().unwrap()))
        .map(|p| p.name_any())
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(!kept.contains(&"db-2".to_string()), "{kept:?}");
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert!(watcher.events_seen() > 0, "the watcher saw the rollout");
    rig.stop().await;
}

#[tokio::test]
async fn controllers_killed_mid_rollback_finish_it_after_restart() {
    let mut rig = cluster().await;
    let client = rig.client.clone();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    rig.apply(&deployment("web", "web:1", true, 600)).await;
    wait(&deployments, "web:1 complete", |d| complete(d, "web:1")).await;
    rig.kubectl(&["set", "image", "deployment/web", "app=web:broken"])
        .await;
    // The decision is written; the controllers die before recording or finishing it.
    wait(&deployments, "the rollback decided", |d| {
        d.annotations().contains_key(ROLLED_BACK_FROM)
    })
    .await;
    rig.stop_controllers().await;
    rig.start_controllers();
    let d = wait(&deployments, "rolled back and recorded", |d| {
        has_condition(d, "RolledBack", "True", "ImagePullFailure") && complete(d, "web:1")
    })
    .await;
    assert_eq!(d.annotations()["deployment.kubernetes.io/revision"], "3");
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    wait(&rss, "the failed revision's pods gone", |rs| {
        revision(rs) != "2" || rs.status.as_ref().is_some_and(|s| s.replicas == 0)
    })
    .await;
    rig.stop().await;
}

/// `manifest` with a 10 s progress deadline (`rollwright.io/progress-deadline-seconds`).
fn with_deadline(mut manifest: Value) -> Value {
    manifest["metadata"]["annotations"][controllers::progress::deadline::ANNOTATION] = json!("10");
    manifest
}

#[tokio::test]
async fn a_daemonset_past_its_progress_deadline_rolls_back_within_its_budget() {
    let rig = cluster().await;
    let client = rig.client.clone();
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    rig.apply(&with_deadline(daemonset("agent:1"))).await;
    wait(&api, "agent:1 everywhere", |ds| ds_done(ds, "agent:1")).await;
    let before = uids(&active_pods(&client, "default", "agent").await);
    // At most one node without an available agent (maxUnavailable 1), never two agents on one
    // node, through the failed update and the rollback: the watcher has listed before the change.
    let invariants = crate::daemonset_kubectl::Invariants::start(
        client.clone(),
        "agent",
        &["node-0", "node-1", "node-2"],
        crate::daemonset_kubectl::Limits {
            max_unavailable: 1,
            max_doubled: 0,
            surge: false,
        },
    )
    .await;
    rig.kubectl(&["set", "image", "daemonset/agent", "agent=agent:never-ready"])
        .await;
    // The pod never becomes ready, but nothing says it cannot: only the deadline decides.
    let ds = wait(&api, "rolled back", |ds| {
        has_condition(ds, "RolledBack", "True", "ProgressDeadlineExceeded")
    })
    .await;
    assert_eq!(
        image_of(ds.spec.as_ref().unwrap().template.spec.as_ref()),
        "agent:1"
    );
    common::wait_event(
        client.clone(),
        "default",
        Some("agent"),
        "RolledBack",
        "rolled back from revision 2",
    )
    .await;
    wait(&api, "agent:1 everywhere again", |ds| {
        ds_done(ds, "agent:1")
    })
    .await;
    assert_eq!(
        revisions(&client, "agent").await,
        vec![(2, "agent:never-ready".into()), (3, "agent:1".into())]
    );
    let after = uids(&active_pods(&client, "default", "agent").await);
    assert_eq!(
        before.intersection(&after).count(),
        2,
        "{before:?} {after:?}"
    );
    let seen = invariants.finish();
    assert!(seen.events > 0, "the watcher saw the rollout");
    // The deadline fired no sooner than 10 s after the failed revision appeared (both times are
    // whole seconds, so the difference of the truncated times is at least 10 too).
    let fired = common::wait_event(
        client.clone(),
        "default",
        Some("agent"),
        "ProgressDeadlineExceeded",
        "has timed out progressing",
    )
    .await;
    let fired = fired.first_timestamp.expect("the event's time").0;
    let crs: Api<ControllerRevision> = Api::namespaced(client.clone(), "default");
    let failed = crs
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|cr| cr.revision == 2)
        .expect("the failed revision");
    let created = failed.metadata.creation_timestamp.expect("created").0;
    assert!(
        fired.duration_since(created) >= jiff::SignedDuration::from_secs(10),
        "the deadline fired at {fired}, the revision was made at {created}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_statefulset_past_its_progress_deadline_rolls_back_in_order() {
    let rig = cluster().await;
    let client = rig.client.clone();
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    rig.apply(&with_deadline(statefulset("db:1"))).await;
    wait(&api, "db:1 ready", |s| sts_done(s, "db:1")).await;
    let before = uids(&active_pods(&client, "default", "db").await);
    let watcher = db_watcher(&client).await;
    rig.kubectl(&["set", "image", "statefulset/db", "db=db:never-ready"])
        .await;
    let s = wait(&api, "rolled back", |s| {
        has_condition(s, "RolledBack", "True", "ProgressDeadlineExceeded")
    })
    .await;
    assert_eq!(
        image_of(s.spec.as_ref().unwrap().template.spec.as_ref()),
        "db:1"
    );
    common::wait_event(
        client.clone(),
        "default",
        Some("db"),
        "RolledBack",
        "rolled back from revision 2",
    )
    .await;
    wait(&api, "db:1 ready again", |s| sts_done(s, "db:1")).await;
    assert_eq!(
        revisions(&client, "db").await,
        vec![(2, "db:never-ready".into()), (3, "db:1".into())]
    );
    // Only db-2, the first the update replaced, was replaced; db-0 and db-1 kept their pods.
    let kept: Vec<String> = active_pods(&client, "default", "db")
        .await
        .iter()
        .filter(|p| before.contains(&p.uid().unwrap()))
        .map(|p| p.name_any())
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(!kept.contains(&"db-2".to_string()), "{kept:?}");
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert!(watcher.events_seen() > 0, "the watcher saw the rollout");
    rig.stop().await;
}

#[tokio::test]
async fn daemonset_and_statefulset_rollbacks_finish_after_the_controllers_restart() {
    let mut rig = cluster().await;
    let client = rig.client.clone();
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    rig.apply(&daemonset("agent:1")).await;
    rig.apply(&statefulset("db:1")).await;
    wait(&daemonsets, "agent:1 everywhere", |ds| {
        ds_done(ds, "agent:1")
    })
    .await;
    wait(&statefulsets, "db:1 ready", |s| sts_done(s, "db:1")).await;
    rig.kubectl(&["set", "image", "daemonset/agent", "agent=agent:broken"])
        .await;
    rig.kubectl(&["set", "image", "statefulset/db", "db=db:broken"])
        .await;
    // Both decisions are written; then the controllers die, before finishing either rollout.
    wait(&daemonsets, "the DaemonSet's rollback decided", |ds| {
        ds.annotations().contains_key(ROLLED_BACK_FROM)
    })
    .await;
    wait(&statefulsets, "the StatefulSet's rollback decided", |s| {
        s.annotations().contains_key(ROLLED_BACK_FROM)
    })
    .await;
    rig.stop_controllers().await;
    rig.start_controllers();
    wait(
        &daemonsets,
        "the DaemonSet rolled back and recorded",
        |ds| has_condition(ds, "RolledBack", "True", "ImagePullFailure") && ds_done(ds, "agent:1"),
    )
    .await;
    wait(
        &statefulsets,
        "the StatefulSet rolled back and recorded",
        |s| has_condition(s, "RolledBack", "True", "ImagePullFailure") && sts_done(s, "db:1"),
    )
    .await;
    assert_eq!(
        revisions(&client, "agent").await,
        vec![(2, "agent:broken".into()), (3, "agent:1".into())]
    );
    assert_eq!(
        revisions(&client, "db").await,
        vec![(2, "db:broken".into()), (3, "db:1".into())]
    );
    rig.stop().await;
}
