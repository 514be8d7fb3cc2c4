//! The ReplicaSet controller alone against an in-process API server, with a stand-in kubelet.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::support;

use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use support::*;

fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name, "tier": "fe"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }))
    .unwrap()
}

async fn pods(c: &Cluster, app: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::default_namespaced(c.client.clone());
    api.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

/// Waits until the ReplicaSet's status has caught up with `replicas` ready pods.
async fn settled(c: &Cluster, name: &str, replicas: i32) -> ReplicaSet {
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(
        &api,
        &format!("{name} at {replicas}"),
        TIMEOUT,
        |rs: &ReplicaSet| {
            let s = rs.status.clone().unwrap_or_default();
            rs.name_any() == name
                && s.observed_generation == rs.metadata.generation
                && s.replicas == replicas
                && s.available_replicas.unwrap_or(0) == replicas
        },
    )
    .await
    .unwrap()
}

async fn scale(c: &Cluster, name: &str, replicas: i32) {
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_creates_its_pods_and_reports_status() {
    let c = Cluster::replicaset_only().await;
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    api.create(&PostParams::default(), &replica_set("web", 3))
        .await
        .unwrap();
    let rs = settled(&c, "web", 3).await;
    let s = rs.status.unwrap();
    assert_eq!(
        (
            s.fully_labeled_replicas,
            s.ready_replicas,
            s.available_replicas
        ),
        (Some(3), Some(3), Some(3))
    );
    for p in pods(&c, "web").await {
        assert!(
            p.name_any().starts_with("web-") && p.name_any().len() == "web-".len() + 5,
            "{}",
            p.name_any()
        );
        let owner = api::pod::controller_of(&p.metadata).unwrap();
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.block_owner_deletion
            ),
            ("ReplicaSet", "web", Some(true))
        );
    }
    scale(&c, "web", 1).await;
    settled(&c, "web", 1).await;
    assert_eq!(pods(&c, "web").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_500_replicas_creates_exactly_500_pods_even_with_a_slow_watch() {
    // Every pod event reaches the controller's cache a millisecond late.
    let c = Cluster::replicaset_with_lag(std::time::Duration::from_millis(1)).await;
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    api.create(&PostParams::default(), &replica_set("burst", 500))
        .await
        .unwrap();
    // Pester the controller with syncs while it creates (each update queues one): without
    // expectations a sync that runs before the watch shows the new pods would create more.
    for i in 0..30 {
        let patch = json!({"metadata": {"annotations": {"poke": i.to_string()}}});
        api.patch("burst", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        tokio::task::yield_now().await;
    }
    settled(&c, "burst", 500).await;
    assert_eq!(pods(&c, "burst").await.len(), 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_adopted_and_the_least_valuable_pods_deleted_first() {
    let c = Cluster::replicaset_only().await;
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    api.create(&PostParams::default(), &replica_set("web", 3))
        .await
        .unwrap();
    settled(&c, "web", 3).await;

    // A matching orphan that never becomes ready is adopted, and as the surplus pod it is the
    // one deleted: not-ready pods go first.
    c.kubelet.block("broken");
    let pod_api: Api<Pod> = Api::default_namespaced(c.client.clone());
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "labels": {"app": "web", "tier": "fe"}},
        "spec": {"containers": [{"name": "c", "image": "broken"}]},
    }))
    .unwrap();
    let orphan = pod_api
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    kube::runtime::wait::await_condition(
        pod_api.clone(),
        "stray",
        kube::runtime::wait::conditions::is_deleted(&orphan.uid().unwrap()),
    )
    .await
    .unwrap();
    settled(&c, "web", 3).await;

    // Lower pod-deletion-cost goes first among equally healthy pods.
    let victim = pods(&c, "web").await[1].name_any();
    let cost =
        json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-10"}}});
    pod_api
        .patch(&victim, &PatchParams::default(), &Patch::Merge(&cost))
        .await
        .unwrap();
    scale(&c, "web", 2).await;
    settled(&c, "web", 2).await;
    let left: BTreeSet<String> = pods(&c, "web").await.iter().map(|p| p.name_any()).collect();
    assert!(
        !left.contains(&victim),
        "{victim} should have been deleted, left {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_stops_matching_is_released_and_replaced() {
    let c = Cluster::replicaset_only().await;
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    api.create(&PostParams::default(), &replica_set("web", 2))
        .await
        .unwrap();
    settled(&c, "web", 2).await;
    let pod_api: Api<Pod> = Api::default_namespaced(c.client.clone());
    let before: Vec<String> = pods(&c, "web").await.iter().map(|p| p.name_any()).collect();
    let leaving = before[0].clone();
    let relabel = json!({"metadata": {"labels": {"app": "debug"}}});
    pod_api
        .patch(&leaving, &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    embedded::wait_until(&pod_api, "released", TIMEOUT, |p: &Pod| {
        p.name_any() == leaving && api::pod::controller_of(&p.metadata).is_none()
    })
    .await
    .unwrap();
    // The replacement: a pod of the set that was not there before (the status may still count
    // the released pod for a moment, so "settled" alone does not say it exists yet).
    embedded::wait_until(&pod_api, "replaced", TIMEOUT, |p: &Pod| {
        p.labels().get("app").map(String::as_str) == Some("web") && !before.contains(&p.name_any())
    })
    .await
    .unwrap();
    settled(&c, "web", 2).await;
    let names: Vec<String> = pods(&c, "web").await.iter().map(|p| p.name_any()).collect();
    assert_eq!(names.len(), 2);
    assert!(!names.contains(&leaving));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fully_labeled_counts_only_pods_with_every_template_label() {
    let c = Cluster::replicaset_only().await;
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    api.create(&PostParams::default(), &replica_set("web", 2))
        .await
        .unwrap();
    settled(&c, "web", 2).await;
    let pod_api: Api<Pod> = Api::default_namespaced(c.client.clone());
    let name = pods(&c, "web").await[0].name_any();
    // Still selected (app=web) but missing the template's tier label.
    let patch: Value = json!([{"op": "remove", "path": "/metadata/labels/tier"}]);
    pod_api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
        )
        .await
        .unwrap();
    embedded::wait_until(&api, "fully labeled 1", TIMEOUT, |rs: &ReplicaSet| {
        rs.status.as_ref().and_then(|s| s.fully_labeled_replicas) == Some(1)
            && rs.status.as_ref().is_some_and(|s| s.replicas == 2)
    })
    .await
    .unwrap();
}
