//! The ReplicationController controller against an in-process API server, with the garbage
//! collector and a stand-in kubelet: what upstream's conformance specs for RCs ask of it
//! (replicas and status, `/scale`, adoption, release, cascading deletion).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::support::{Cluster, TIMEOUT, spawn_controllers};
use k8s_openapi::api::core::v1::{Event, Pod, ReplicationController};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use serde_json::json;
use std::time::Duration;

/// The RC controller and the garbage collector (which knows RCs as owners from discovery), and a kubelet
/// that makes every pod ready.
async fn start() -> Cluster {
    let mut c = Cluster::replicaset_only().await;
    // Only the RC controller keeps pods here.
    c.kill_controllers();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["replicationcontroller", "garbagecollector"]),
        ..Default::default()
    };
    c.controllers
        .push(spawn_controllers(&c.client, &settings, Duration::ZERO));
    c
}

/// An RC `name` with `replicas` pods labelled `app: name, tier: fe`, selecting `app: name`.
fn rc(name: &str, replicas: i32) -> ReplicationController {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"app": name},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "fe"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }))
    .unwrap()
}

fn rcs(c: &Cluster) -> Api<ReplicationController> {
    Api::default_namespaced(c.client.clone())
}

fn pod_api(c: &Cluster) -> Api<Pod> {
    Api::default_namespaced(c.client.clone())
}

async fn pods(c: &Cluster, app: &str) -> Vec<Pod> {
    pod_api(c)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

/// Waits until the RC's status has caught up with `replicas` available pods.
async fn settled(c: &Cluster, name: &str, replicas: i32) -> ReplicationController {
    embedded::wait_until(
        &rcs(c),
        &format!("{name} at {replicas}"),
        TIMEOUT,
        |rc: &ReplicationController| {
            let s = rc.status.clone().unwrap_or_default();
            rc.name_any() == name
                && s.observed_generation == rc.metadata.generation
                && s.replicas == replicas
                && s.ready_replicas.unwrap_or(0) == replicas
                && s.available_replicas.unwrap_or(0) == replicas
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rc_creates_its_replicas_and_reports_them_ready_and_available() {
    let c = start().await;
    // Defaulting: no selector given, so the template's labels select, and label the RC.
    let mut web = rc("web", 3);
    web.spec.as_mut().unwrap().selector = None;
    let created = rcs(&c).create(&PostParams::default(), &web).await.unwrap();
    let spec = created.spec.clone().unwrap();
    assert_eq!(
        spec.selector.unwrap().get("tier").map(String::as_str),
        Some("fe")
    );
    assert_eq!(created.labels().get("app").map(String::as_str), Some("web"));

    let done = settled(&c, "web", 3).await;
    let s = done.status.unwrap();
    assert_eq!(
        (s.fully_labeled_replicas, s.conditions),
        (Some(3), None),
        "status"
    );
    let found = pods(&c, "web").await;
    assert_eq!(found.len(), 3);
    for p in &found {
        assert!(p.name_any().starts_with("web-"), "{}", p.name_any());
        let owner = api::pod::controller_of(&p.metadata).unwrap();
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.block_owner_deletion
            ),
            (
                "v1",
                "ReplicationController",
                "web",
                created.uid().unwrap().as_str(),
                Some(true)
            )
        );
    }

    // Events as upstream's replication manager records them.
    let events: Api<Event> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(&events, "SuccessfulCreate", TIMEOUT, |e: &Event| {
        e.reason.as_deref() == Some("SuccessfulCreate")
            && e.involved_object.kind.as_deref() == Some("ReplicationController")
            && e.involved_object.name.as_deref() == Some("web")
            && e.source.as_ref().and_then(|s| s.component.as_deref())
                == Some("replication-controller")
    })
    .await
    .unwrap();

    // A spec change moves the generation; the status observes it.
    rcs(&c)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let one = settled(&c, "web", 1).await;
    assert_eq!(one.metadata.generation, Some(2));
    // The status counts active pods; the deleted ones may take a moment to be gone.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while pods(&c, "web").await.len() != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "pods never went to 1"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rc_scales_through_its_scale_subresource() {
    let c = start().await;
    rcs(&c)
        .create(&PostParams::default(), &rc("web", 1))
        .await
        .unwrap();
    settled(&c, "web", 1).await;

    let scale = rcs(&c).get_scale("web").await.unwrap();
    let status = scale.status.unwrap();
    assert_eq!(
        (
            scale.spec.unwrap().replicas,
            status.replicas,
            status.selector.as_deref()
        ),
        (Some(1), 1, Some("app=web"))
    );

    // An unconditional update, as upstream's "should get and update a ReplicationController
    // scale" sends it.
    let update = json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3},
    });
    rcs(&c)
        .replace_scale(
            "web",
            &PostParams::default(),
            &serde_json::from_value(update).unwrap(),
        )
        .await
        .unwrap();
    settled(&c, "web", 3).await;
    assert_eq!(pods(&c, "web").await.len(), 3);

    // A strategic merge patch, as the lifecycle spec sends it.
    rcs(&c)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(&json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let rc = settled(&c, "web", 2).await;
    assert_eq!(rc.spec.unwrap().replicas, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rc_adopts_a_matching_orphan_instead_of_creating_a_pod() {
    let c = start().await;
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "pod-adoption", "labels": {"app": "web", "tier": "fe"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap();
    let orphan = pod_api(&c)
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    let created = rcs(&c)
        .create(&PostParams::default(), &rc("web", 1))
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    embedded::wait_until(&pod_api(&c), "adopted", TIMEOUT, |p: &Pod| {
        p.name_any() == "pod-adoption"
            && api::pod::controller_of(&p.metadata).is_some_and(|r| r.uid == uid)
    })
    .await
    .unwrap();
    settled(&c, "web", 1).await;
    let names: Vec<String> = pods(&c, "web").await.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, vec!["pod-adoption".to_string()]);
    assert_eq!(
        pod_api(&c).get("pod-adoption").await.unwrap().uid(),
        orphan.uid()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rc_releases_a_pod_that_stops_matching_and_replaces_it() {
    let c = start().await;
    rcs(&c)
        .create(&PostParams::default(), &rc("web", 1))
        .await
        .unwrap();
    settled(&c, "web", 1).await;
    let leaving = pods(&c, "web").await[0].name_any();
    let relabel = json!({"metadata": {"labels": {"app": "not-matching"}}});
    pod_api(&c)
        .patch(&leaving, &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    let released = embedded::wait_until(&pod_api(&c), "released", TIMEOUT, |p: &Pod| {
        p.name_any() == leaving && api::pod::controller_of(&p.metadata).is_none()
    })
    .await
    .unwrap();
    assert!(
        released.owner_references().is_empty(),
        "{:?}",
        released.owner_references()
    );
    embedded::wait_until(&pod_api(&c), "replaced", TIMEOUT, |p: &Pod| {
        p.labels().get("app").map(String::as_str) == Some("web") && p.name_any() != leaving
    })
    .await
    .unwrap();
    settled(&c, "web", 1).await;
    let names: Vec<String> = pods(&c, "web").await.iter().map(|p| p.name_any()).collect();
    assert_eq!(names.len(), 1);
    assert_ne!(names[0], leaving);
    // The released pod is left alone.
    assert!(pod_api(&c).get_opt(&leaving).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_rc_in_the_background_deletes_its_pods() {
    let c = start().await;
    let created = rcs(&c)
        .create(&PostParams::default(), &rc("web", 2))
        .await
        .unwrap();
    settled(&c, "web", 2).await;
    let before = pods(&c, "web").await;
    assert_eq!(before.len(), 2);
    rcs(&c)
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    let rc_gone = await_condition(rcs(&c), "web", conditions::is_deleted(&uid));
    tokio::time::timeout(TIMEOUT, rc_gone)
        .await
        .expect("the RC is deleted")
        .unwrap();
    for p in before {
        let (name, uid) = (p.name_any(), p.uid().unwrap());
        let wait = await_condition(pod_api(&c), &name, conditions::is_deleted(&uid));
        tokio::time::timeout(TIMEOUT, wait)
            .await
            .expect("the garbage collector deletes the RC's pods")
            .unwrap();
    }
    assert!(pods(&c, "web").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_rc_without_a_propagation_policy_orphans_its_pods() {
    let c = start().await;
    let created = rcs(&c)
        .create(&PostParams::default(), &rc("web", 2))
        .await
        .unwrap();
    settled(&c, "web", 2).await;
    // core/v1 RCs orphan by default, as upstream's rcStrategy.DefaultGarbageCollectionPolicy.
    rcs(&c)
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    let rc_gone = await_condition(rcs(&c), "web", conditions::is_deleted(&uid));
    tokio::time::timeout(TIMEOUT, rc_gone)
        .await
        .expect("the RC is deleted once its pods are orphaned")
        .unwrap();
    let left = pods(&c, "web").await;
    assert_eq!(left.len(), 2);
    for p in left {
        assert!(p.metadata.deletion_timestamp.is_none(), "{}", p.name_any());
        assert!(
            p.owner_references().iter().all(|r| r.uid != uid),
            "{:?}",
            p.owner_references()
        );
    }
}
