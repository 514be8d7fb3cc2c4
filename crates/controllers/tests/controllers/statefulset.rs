//! The StatefulSet syncer against a real in-process API server, fed snapshots by hand: what a
//! cache that lags the server can show it, deterministically.

use controllers::statefulset::{
    Config, Set,
    sync::{Children, Syncer},
};
use controllers::util::owners::Owner;
use informer::Cached;
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use serde_json::{Value, json};

const NS: &str = "default";

async fn server() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    (server, client)
}

/// Creates a Parallel StatefulSet `web` of `replicas` and returns it as the controller reads it.
async fn create_set(client: &Client, replicas: i32) -> Set {
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": replicas, "serviceName": "web", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}}}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &sts).await.unwrap();
    <Set as Owner>::from_json(serde_json::to_value(created).unwrap()).unwrap()
}

/// Pod `web-<ordinal>` of `set`, as its controller would make it.
fn pod_of(set: &Set, ordinal: i32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{ordinal}"), "namespace": NS,
                     "labels": {"app": "web", "statefulset.kubernetes.io/pod-name": format!("web-{ordinal}"),
                                "apps.kubernetes.io/pod-index": ordinal.to_string()},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                          "uid": set.uid(), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"hostname": format!("web-{ordinal}"), "subdomain": "web",
                 "containers": [{"name": "nginx", "image": "nginx:1.25"}]}
    }))
    .unwrap()
}

/// A sync whose snapshot lacks a pod that exists already creates it, finds it there (409), and
/// expects nothing of the watch for it: the next sync may act. (Before, the expected creation
/// was never observed, and the set stood still for the 5-minute expectation TTL: the stall of
/// `bench statefulset` at 1,000 replicas.)
#[tokio::test]
async fn a_creation_the_server_finds_done_already_is_not_waited_for() {
    let (_server, client) = server().await;
    let set = create_set(&client, 1).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod_of(&set, 0))
        .await
        .unwrap();

    let syncer = Syncer::new(client.clone(), &Config::default());
    let _requeue = syncer.sync(&set, Children::default(), true).await.unwrap();
    assert!(
        syncer.satisfied(&set.key()),
        "the syncer waits for a creation that will never be observed"
    );
}

/// The same for a deletion of a pod the snapshot still shows but the server no longer has.
#[tokio::test]
async fn a_deletion_the_server_finds_done_already_is_not_waited_for() {
    let (_server, client) = server().await;
    let set = create_set(&client, 0).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let created = pods
        .create(&PostParams::default(), &pod_of(&set, 0))
        .await
        .unwrap();
    pods.delete("web-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();

    let syncer = Syncer::new(client.clone(), &Config::default());
    let children = Children {
        pods: vec![Cached::shared(created)],
        ..Children::default()
    };
    let _requeue = syncer.sync(&set, children, true).await.unwrap();
    assert!(
        syncer.satisfied(&set.key()),
        "the syncer waits for a deletion that will never be observed"
    );
    let left: Vec<Value> = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| serde_json::to_value(p.metadata.name).unwrap())
        .collect();
    assert!(left.is_empty(), "pods left: {left:?}");
}
