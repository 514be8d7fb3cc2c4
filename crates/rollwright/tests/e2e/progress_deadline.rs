//! A progress deadline for DaemonSets and StatefulSets (issue 22), and the same promises kept by
//! the Deployment's own deadline: the annotation
//! `rollwright.io/progress-deadline-seconds` gives them a `Progressing` condition with the
//! Deployment's semantics, which `rollwright rollout status` reports as `kubectl rollout status`
//! reports a Deployment's.
//!
//! The clock is read off the objects, never the test's wall clock: a rollout starts when its
//! ControllerRevision is created, and times out at the condition's `lastTransitionTime`; both
//! are the server's. Images ending in `:never-ready` run but never get ready.

use crate::common::{self, DEADLINE, Rig};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet},
    core::v1::Pod,
};
use kube::{Api, api::ListParams};
use nodesim::distribution::Distribution;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use std::{fmt::Debug, time::Duration};

const PROFILE: &str = r#"
seed: 1
rules:
  - name: never-ready
    match: {image: "*:never-ready"}
    fault: neverReady
"#;

const ANNOTATION: &str = "rollwright.io/progress-deadline-seconds";

/// Two simulated nodes whose pods start after 100ms and get ready 100ms later.
async fn cluster() -> Rig {
    let nodes = nodesim::NodeSim {
        nodes: 2,
        start_delay: Distribution::Fixed(Duration::from_millis(100)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
        ..Default::default()
    };
    let mut rig = Rig::start(nodes, PROFILE).await;
    rig.start_scheduler_and_controllers();
    rig
}

/// A DaemonSet, StatefulSet or Deployment named `web` of two pods, its container `app`.
trait Workload:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + 'static
{
    /// `kubectl`'s short name.
    const SHORT: &'static str;
    /// `kubectl rollout status`' name for the kind.
    const SPOKEN: &'static str;
    /// Where its status counts pods of the update revision.
    const UPDATED: &'static str;

    fn manifest(deadline: &str) -> Value;
}

impl Workload for DaemonSet {
    const SHORT: &'static str = "ds";
    const SPOKEN: &'static str = "daemon set";
    const UPDATED: &'static str = "/status/updatedNumberScheduled";

    fn manifest(deadline: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "web", "annotations": {ANNOTATION: deadline}},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "app", "image": "app:1"}]}}
            }
        })
    }
}

impl Workload for Deployment {
    const SHORT: &'static str = "deploy";
    const SPOKEN: &'static str = "deployment";
    const UPDATED: &'static str = "/status/updatedReplicas";

    /// The Deployment's own field, not the annotation: its deadline is upstream's.
    fn manifest(deadline: &str) -> Value {
        let seconds: i64 = deadline
            .parse()
            .expect("a Deployment's deadline is a number");
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "progressDeadlineSeconds": seconds,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "app", "image": "app:1"}]}}
            }
        })
    }
}

impl Workload for StatefulSet {
    const SHORT: &'static str = "sts";
    const SPOKEN: &'static str = "statefulset";
    const UPDATED: &'static str = "/status/updatedReplicas";

    fn manifest(deadline: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "annotations": {ANNOTATION: deadline}},
            "spec": {
                "replicas": 2,
                "serviceName": "web",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "app", "image": "app:1"}]}}
            }
        })
    }
}

/// The `Progressing` condition as (status, reason, message, lastTransitionTime).
#[derive(Clone, Debug, PartialEq)]
struct Progressing {
    status: String,
    reason: String,
    message: String,
    since: Timestamp,
}

fn progressing<K: Serialize>(obj: &K) -> Option<Progressing> {
    let v = serde_json::to_value(obj).ok()?;
    let c = v
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Progressing")?;
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some(Progressing {
        status: text("status"),
        reason: text("reason"),
        message: text("message"),
        since: c["lastTransitionTime"].as_str()?.parse().ok()?,
    })
}

fn has_reason<K: Serialize>(obj: &K, reason: &str) -> bool {
    progressing(obj).is_some_and(|c| c.reason == reason)
}

/// Waits until the `Progressing` condition has `reason`, within `timeout`; returns every
/// distinct condition the watch saw on the way, the last one with `reason`.
async fn wait_reason<K: Workload>(
    api: &Api<K>,
    reason: &str,
    timeout: Duration,
) -> Result<Vec<Progressing>, embedded::Error> {
    let mut seen: Vec<Progressing> = Vec::new();
    embedded::wait_until(api, &format!("Progressing {reason}"), timeout, |o| {
        let c = progressing(o);
        if let Some(c) = &c
            && seen.last() != Some(c)
        {
            seen.push(c.clone());
        }
        c.is_some_and(|c| c.reason == reason)
    })
    .await?;
    Ok(seen)
}

/// Creates the workload with `deadline` and waits for its rollout to complete.
async fn rolled_out<K: Workload>(rig: &Rig, deadline: &str) -> Api<K> {
    rig.apply(&K::manifest(deadline)).await;
    let api: Api<K> = Api::namespaced(rig.client.clone(), "default");
    wait_reason(&api, "NewControllerRevisionAvailable", DEADLINE)
        .await
        .unwrap();
    api
}

/// When the rollout of the template with `image` started: its ControllerRevision's creation.
async fn started(rig: &Rig, image: &str) -> Timestamp {
    let revisions: Api<ControllerRevision> = Api::namespaced(rig.client.clone(), "default");
    let all = revisions.list(&ListParams::default()).await.unwrap().items;
    let revision = all
        .iter()
        .find(|r| serde_json::to_string(&r.data).unwrap().contains(image))
        .unwrap_or_else(|| panic!("a revision with {image} in {all:?}"));
    revision.metadata.creation_timestamp.as_ref().unwrap().0
}

async fn set_image<K: Workload>(rig: &Rig, image: &str) {
    rig.kubectl(&[
        "set",
        "image",
        &format!("{}/web", K::SHORT),
        &format!("app={image}"),
    ])
    .await;
}

fn at_least(later: Timestamp, earlier: Timestamp, seconds: i64) -> bool {
    later.duration_since(earlier) >= SignedDuration::from_secs(seconds)
}

async fn times_out_after_the_deadline<K: Workload>() {
    let rig = cluster().await;
    let api = rolled_out::<K>(&rig, "10").await;
    set_image::<K>(&rig, "app:never-ready").await;
    let seen = wait_reason(
        &api,
        "ProgressDeadlineExceeded",
        DEADLINE + Duration::from_secs(10),
    )
    .await
    .unwrap();
    let start = started(&rig, "app:never-ready").await;
    let timed_out = seen.last().unwrap();
    assert_eq!(timed_out.status, "False");
    assert!(
        timed_out.message.starts_with("ControllerRevision \"web-")
            && timed_out.message.ends_with("\" has timed out progressing."),
        "{timed_out:?}"
    );
    assert!(
        at_least(timed_out.since, start, 10),
        "timed out at {} for a rollout started at {start}: {seen:?}",
        timed_out.since
    );
    // The rollout made progress (a pod of the new revision) before it stalled, and that
    // progress was on the new revision's clock.
    assert!(
        seen.iter()
            .any(|c| c.reason == "ControllerRevisionUpdated" && c.since >= start),
        "{seen:?}"
    );
    common::wait_event(
        rig.client.clone(),
        "default",
        Some("web"),
        "ProgressDeadlineExceeded",
        &timed_out.message,
    )
    .await;

    // `rollout status` fails with kubectl's words for a Deployment, and the pod it waited on.
    let workload = format!("{}/web", K::SHORT);
    let (_, err) = rig
        .c
        .rollwright_fails(&["rollout", "status", &workload, "--timeout", "30s"], None)
        .await;
    let pods: Api<Pod> = Api::namespaced(rig.client.clone(), "default");
    let stuck: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| {
            serde_json::to_string(&p.spec)
                .unwrap()
                .contains("app:never-ready")
        })
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(stuck.len(), 1, "{stuck:?}");
    assert!(
        err.contains(&format!(
            "{} \"web\" exceeded its progress deadline",
            K::SPOKEN
        )) && err.contains(&stuck[0]),
        "{err}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_times_out_after_its_deadline_and_not_before() {
    times_out_after_the_deadline::<DaemonSet>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_times_out_after_its_deadline_and_not_before() {
    times_out_after_the_deadline::<StatefulSet>().await;
}

async fn a_paused_rollout_never_times_out<K: Workload>(paused: &str) {
    const DEADLINE_SECONDS: u64 = 3;
    let rig = cluster().await;
    let api = rolled_out::<K>(&rig, &DEADLINE_SECONDS.to_string()).await;
    let workload = format!("{}/web", K::SHORT);
    rig.kubectl(&["annotate", &workload, "rollwright.io/paused=true"])
        .await;
    set_image::<K>(&rig, "app:never-ready").await;
    wait_reason(&api, paused, DEADLINE).await.unwrap();
    // Well past the deadline, it has not timed out.
    let waited = Duration::from_secs(DEADLINE_SECONDS + 5);
    let err = wait_reason(&api, "ProgressDeadlineExceeded", waited)
        .await
        .unwrap_err();
    assert!(matches!(err, embedded::Error::Timeout(..)), "{err}");
    let c = progressing(&api.get("web").await.unwrap()).unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("Unknown", paused));
    // Resumed, its clock starts over.
    rig.kubectl(&["annotate", &workload, "rollwright.io/paused-"])
        .await;
    let seen = wait_reason(&api, "ProgressDeadlineExceeded", DEADLINE)
        .await
        .unwrap();
    let resumed = seen
        .iter()
        .find(|c| c.reason.ends_with("Resumed"))
        .unwrap_or_else(|| panic!("resumed in {seen:?}"));
    assert!(
        at_least(seen.last().unwrap().since, resumed.since, 3),
        "{seen:?}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_daemonset_rollout_never_times_out() {
    a_paused_rollout_never_times_out::<DaemonSet>("DaemonSetPaused").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_statefulset_rollout_never_times_out() {
    a_paused_rollout_never_times_out::<StatefulSet>("StatefulSetPaused").await;
}

/// The clock is in the status: controllers stopped mid-rollout and started again after the
/// deadline time the rollout out from the stored condition, without starting it over.
async fn a_restart_keeps_the_clock<K: Workload>() {
    let mut rig = cluster().await;
    let api = rolled_out::<K>(&rig, "10").await;
    set_image::<K>(&rig, "app:never-ready").await;
    // The new revision's pod exists (and will never be ready): the last progress.
    let before = embedded::wait_until(&api, "the progress recorded", DEADLINE, |o| {
        let v = serde_json::to_value(o).unwrap();
        has_reason(o, "ControllerRevisionUpdated")
            && v.pointer(K::UPDATED).and_then(Value::as_i64) == Some(1)
            && v.pointer("/status/observedGeneration") == v.pointer("/metadata/generation")
    })
    .await
    .unwrap();
    let clock = progressing(&before).unwrap();
    rig.stop_controllers().await;
    // Past the deadline with no controller running, nothing can change it.
    let err = wait_reason(&api, "ProgressDeadlineExceeded", Duration::from_secs(12))
        .await
        .unwrap_err();
    assert!(matches!(err, embedded::Error::Timeout(..)), "{err}");
    rig.start_controllers();
    let seen = wait_reason(&api, "ProgressDeadlineExceeded", DEADLINE)
        .await
        .unwrap();
    // The new controllers went straight from the stored condition to the timeout: no restart
    // of the clock in between.
    let after: Vec<&Progressing> = seen.iter().filter(|c| c.since > clock.since).collect();
    assert_eq!(after.len(), 1, "{clock:?} then {seen:?}");
    assert!(at_least(after[0].since, clock.since, 10), "{seen:?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_keeps_its_clock_across_a_controller_restart() {
    a_restart_keeps_the_clock::<DaemonSet>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_keeps_its_clock_across_a_controller_restart() {
    a_restart_keeps_the_clock::<StatefulSet>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_deadline_is_ignored_with_a_warning() {
    let rig = cluster().await;
    rig.apply(&DaemonSet::manifest("soon")).await;
    common::wait_event(
        rig.client.clone(),
        "default",
        Some("web"),
        "InvalidProgressDeadline",
        "ignoring annotation rollwright.io/progress-deadline-seconds=\"soon\": the progress deadline must be a positive whole number of seconds",
    )
    .await;
    let api: Api<DaemonSet> = Api::namespaced(rig.client.clone(), "default");
    let ds = embedded::wait_until(&api, "rolled out", DEADLINE, |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.desired_number_scheduled == 2 && s.number_available == Some(2))
    })
    .await
    .unwrap();
    assert_eq!(progressing(&ds), None);
    rig.stop().await;
}

/// The same promises for a Deployment, whose deadline is upstream's (`progressDeadlineSeconds`),
/// read the same way: the rollout starts when its new ReplicaSet is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_times_out_after_its_deadline_and_not_before() {
    let rig = cluster().await;
    rig.apply(&Deployment::manifest("10")).await;
    let api: Api<Deployment> = Api::namespaced(rig.client.clone(), "default");
    wait_reason(&api, "NewReplicaSetAvailable", DEADLINE)
        .await
        .unwrap();
    set_image::<Deployment>(&rig, "app:never-ready").await;
    let seen = wait_reason(
        &api,
        "ProgressDeadlineExceeded",
        DEADLINE + Duration::from_secs(10),
    )
    .await
    .unwrap();
    let replica_sets: Api<ReplicaSet> = Api::namespaced(rig.client.clone(), "default");
    let start = replica_sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .find(|rs| {
            serde_json::to_string(&rs.spec)
                .unwrap()
                .contains("app:never-ready")
        })
        .and_then(|rs| rs.metadata.creation_timestamp.clone())
        .expect("the new ReplicaSet")
        .0;
    let timed_out = seen.last().unwrap();
    assert_eq!(timed_out.status, "False");
    assert!(
        timed_out.message.starts_with("ReplicaSet \"web-")
            && timed_out.message.ends_with("\" has timed out progressing."),
        "{timed_out:?}"
    );
    assert!(
        at_least(timed_out.since, start, 10),
        "timed out at {} for a rollout started at {start}: {seen:?}",
        timed_out.since
    );
    let (_, err) = rig
        .c
        .rollwright_fails(
            &["rollout", "status", "deploy/web", "--timeout", "30s"],
            None,
        )
        .await;
    assert!(
        err.contains("deployment \"web\" exceeded its progress deadline"),
        "{err}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_deployment_rollout_never_times_out() {
    const DEADLINE_SECONDS: u64 = 3;
    let rig = cluster().await;
    rig.apply(&Deployment::manifest(&DEADLINE_SECONDS.to_string()))
        .await;
    let api: Api<Deployment> = Api::namespaced(rig.client.clone(), "default");
    wait_reason(&api, "NewReplicaSetAvailable", DEADLINE)
        .await
        .unwrap();
    rig.kubectl(&["rollout", "pause", "deployment/web"]).await;
    set_image::<Deployment>(&rig, "app:never-ready").await;
    wait_reason(&api, "DeploymentPaused", DEADLINE)
        .await
        .unwrap();
    // Well past the deadline, it has not timed out.
    let err = wait_reason(
        &api,
        "ProgressDeadlineExceeded",
        Duration::from_secs(DEADLINE_SECONDS + 5),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, embedded::Error::Timeout(..)), "{err}");
    // Resumed, it rolls out the never-ready template and times out on a clock started anew.
    // The resume's moment is taken here, in the whole seconds conditions keep: the transient
    // `DeploymentResumed` condition may be overwritten before a watch started after the resume
    // lists (CI once saw only the conditions after it).
    let resumed = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    rig.kubectl(&["rollout", "resume", "deployment/web"]).await;
    let seen = wait_reason(&api, "ProgressDeadlineExceeded", DEADLINE)
        .await
        .unwrap();
    assert!(
        at_least(seen.last().unwrap().since, resumed, 3),
        "resumed at {resumed}: {seen:?}"
    );
    rig.stop().await;
}
