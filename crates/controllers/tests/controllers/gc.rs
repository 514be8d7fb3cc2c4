//! The garbage collector against an in-process API server: each cascade policy as `kubectl
//! delete --cascade=...` asks for it.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::Pod,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::{fmt::Debug, time::Duration};

const TIMEOUT: Duration = Duration::from_secs(20);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["garbagecollector"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K, block: bool) -> Value {
    json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": owner.name_any(),
        "uid": owner.uid().unwrap(),
        "controller": true,
        "blockOwnerDeletion": block,
    })
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

async fn create<K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug>(
    api: &Api<K>,
    v: Value,
) -> K {
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

async fn replicaset(client: &Client, name: &str, owners: Vec<Value>) -> ReplicaSet {
    let api: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    create(
        &api,
        json!({
            "metadata": {"name": name, "ownerReferences": owners},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}}, "template": template()},
        }),
    )
    .await
}

async fn pod(client: &Client, name: &str, owners: Vec<Value>, node: Option<&str>) -> Pod {
    let api: Api<Pod> = Api::default_namespaced(client.clone());
    let mut spec = template()["spec"].clone();
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    create(&api, json!({"metadata": {"name": name, "labels": {"app": "x"}, "ownerReferences": owners}, "spec": spec})).await
}

/// Waits (on a watch) until the object `name` with `uid` no longer exists.
async fn gone<K>(api: &Api<K>, name: &str, uid: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api.clone(), name, conditions::is_deleted(uid)),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} was not deleted"))
    .unwrap();
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let (_s, client) = start().await;
    let rs = replicaset(&client, "rs", vec![]).await;
    let p1 = pod(&client, "p1", vec![owner_ref(&rs, true)], None).await;
    let p2 = pod(&client, "p2", vec![owner_ref(&rs, false)], None).await;
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    rss.delete("rs", &DeleteParams::background()).await.unwrap();
    gone(&pods, "p1", &p1.uid().unwrap()).await;
    gone(&pods, "p2", &p2.uid().unwrap()).await;
}

#[tokio::test]
async fn a_dependent_whose_owner_never_existed_or_was_recreated_is_collected() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let ghost = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "nobody",
        "uid": "00000000-0000-4000-8000-000000000001", "controller": true});
    let p1 = pod(&client, "p1", vec![ghost], None).await;
    // An owner with the referenced name exists, but it is another object (another uid).
    replicaset(&client, "same-name", vec![]).await;
    let impostor = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "same-name",
        "uid": "00000000-0000-4000-8000-000000000002", "controller": true});
    let p2 = pod(&client, "p2", vec![impostor], None).await;
    // A dependent of a living owner stays: seen after the others are gone, it would have been
    // collected by then if the collector were wrong about it.
    let rs = replicaset(&client, "alive", vec![]).await;
    pod(&client, "kept", vec![owner_ref(&rs, true)], None).await;
    gone(&pods, "p1", &p1.uid().unwrap()).await;
    gone(&pods, "p2", &p2.uid().unwrap()).await;
    let kept = pods.get("kept").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn a_dependent_with_two_owners_survives_one_and_loses_its_reference() {
    let (_s, client) = start().await;
    let a = replicaset(&client, "a", vec![]).await;
    let b = replicaset(&client, "b", vec![]).await;
    let mut ref_b = owner_ref(&b, false);
    ref_b["controller"] = json!(false);
    pod(&client, "shared", vec![owner_ref(&a, true), ref_b], None).await;
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    rss.delete("a", &DeleteParams::background()).await.unwrap();
    let p = embedded::wait_until(&pods, "shared pod loses its reference to a", TIMEOUT, |p| {
        p.name_any() == "shared" && p.owner_references().len() == 1
    })
    .await
    .unwrap();
    assert_eq!(p.owner_references()[0].uid, b.uid().unwrap());
    assert!(p.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let (_s, client) = start().await;
    let rs = replicaset(&client, "rs", vec![]).await;
    pod(&client, "p1", vec![owner_ref(&rs, true)], None).await;
    pod(&client, "p2", vec![owner_ref(&rs, true)], None).await;
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    rss.delete("rs", &DeleteParams::orphan()).await.unwrap();
    gone(&rss, "rs", &rs.uid().unwrap()).await;
    for name in ["p1", "p2"] {
        let p = pods.get(name).await.unwrap();
        assert!(
            p.owner_references().is_empty(),
            "{name} still owned: {:?}",
            p.owner_references()
        );
        assert!(p.metadata.deletion_timestamp.is_none());
    }
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (_s, client) = start().await;
    let rs = replicaset(&client, "rs", vec![]).await;
    // Bound to a node, the pod is deleted gracefully and stays until its kubelet finishes it.
    let running = pod(
        &client,
        "running",
        vec![owner_ref(&rs, true)],
        Some("node-0"),
    )
    .await;
    let loose = pod(&client, "loose", vec![owner_ref(&rs, false)], None).await;
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    rss.delete("rs", &DeleteParams::foreground()).await.unwrap();
    embedded::wait_until(&pods, "running pod is being deleted", TIMEOUT, |p| {
        p.name_any() == "running" && p.metadata.deletion_timestamp.is_some()
    })
    .await
    .unwrap();
    gone(&pods, "loose", &loose.uid().unwrap()).await;
    // The owner waits for the blocking pod.
    let waiting = rss.get("rs").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(waiting.finalizers(), ["foregroundDeletion"]);
    // The kubelet finishes the pod; the owner goes.
    pods.delete(
        "running",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    gone(&pods, "running", &running.uid().unwrap()).await;
    gone(&rss, "rs", &rs.uid().unwrap()).await;
}

#[tokio::test]
async fn foreground_deletion_cascades_through_a_chain() {
    let (_s, client) = start().await;
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let d = create(
        &deploys,
        json!({"metadata": {"name": "d"}, "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}}, "template": template()}}),
    )
    .await;
    let rs = replicaset(&client, "d-1", vec![owner_ref(&d, true)]).await;
    let p = pod(&client, "d-1-a", vec![owner_ref(&rs, true)], None).await;
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    deploys
        .delete("d", &DeleteParams::foreground())
        .await
        .unwrap();
    gone(&pods, "d-1-a", &p.uid().unwrap()).await;
    gone(&rss, "d-1", &rs.uid().unwrap()).await;
    gone(&deploys, "d", &d.uid().unwrap()).await;
}
