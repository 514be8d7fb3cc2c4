//! The pod garbage collector against an in-process API server, with Nodes and Pods made by hand
//! (no simulated kubelets): orphans of a deleted node, the terminated-pods threshold, unscheduled
//! terminating pods.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start(threshold: usize) -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["podgc"]),
        pod_gc: controllers::pod_gc::Config {
            period: Duration::from_millis(50),
            quarantine: Duration::from_millis(200),
            terminated_pod_threshold: threshold,
            ..Default::default()
        },
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

async fn create_node(client: &Client, name: &str) {
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

async fn create_pod(client: &Client, name: &str, node: Option<&str>, finalizer: bool) -> Pod {
    let mut pod = json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    if finalizer {
        pod["metadata"]["finalizers"] = json!(["example.com/hold"]);
    }
    let pod: Pod = serde_json::from_value(pod).unwrap();
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
}

async fn set_phase(client: &Client, name: &str, phase: &str) {
    Api::<Pod>::namespaced(client.clone(), "default")
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": phase}})),
        )
        .await
        .unwrap();
}

async fn wait_gone(pods: &Api<Pod>, pod: &Pod) {
    let name = pod.name_any();
    let uid = pod.uid().unwrap();
    tokio::time::timeout(
        TIMEOUT,
        await_condition(pods.clone(), &name, conditions::is_deleted(&uid)),
    )
    .await
    .unwrap_or_else(|_| panic!("pod {name} was not deleted"))
    .unwrap();
}

fn has_condition(pod: &Pod, type_: &str, reason: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == type_ && c.status == "True" && c.reason.as_deref() == Some(reason)
            })
        })
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

#[tokio::test]
async fn pods_of_a_deleted_node_are_failed_and_force_deleted() {
    let (_server, client) = start(0).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create_node(&client, "doomed").await;
    create_node(&client, "alive").await;
    let orphan = create_pod(&client, "orphan", Some("doomed"), false).await;
    // A finalizer keeps this one around after its deletion, to show what was written first.
    create_pod(&client, "held", Some("doomed"), true).await;
    create_pod(&client, "survivor", Some("alive"), false).await;
    set_phase(&client, "orphan", "Running").await;
    set_phase(&client, "held", "Running").await;

    Api::<Node>::all(client.clone())
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();

    wait_gone(&pods, &orphan).await;
    let held = embedded::wait_until(&pods, "held pod failed and deleted", TIMEOUT, |p| {
        p.name_any() == "held" && p.metadata.deletion_timestamp.is_some()
    })
    .await
    .unwrap();
    assert_eq!(phase(&held), Some("Failed"));
    assert!(
        has_condition(&held, "DisruptionTarget", "DeletionByPodGC"),
        "{:?}",
        held.status
    );
    let condition = held
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
        .unwrap();
    assert_eq!(
        condition.message.as_deref(),
        Some("PodGC: node no longer exists")
    );
    assert_eq!(
        held.metadata.deletion_grace_period_seconds,
        Some(0),
        "force-deleted"
    );

    // Judged in the same passes as the orphans: a pod on a live node stays untouched.
    let survivor = pods.get("survivor").await.unwrap();
    assert!(survivor.metadata.deletion_timestamp.is_none());
    assert_ne!(phase(&survivor), Some("Failed"));
}

#[tokio::test]
async fn terminated_pods_beyond_the_threshold_go_oldest_first() {
    let (_server, client) = start(2).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create_node(&client, "n1").await;
    let mut created = Vec::new();
    for name in ["t1", "t2", "t3", "t4"] {
        created.push(create_pod(&client, name, Some("n1"), false).await);
    }
    create_pod(&client, "running", Some("n1"), false).await;
    set_phase(&client, "running", "Running").await;
    for (name, phase) in [
        ("t1", "Succeeded"),
        ("t2", "Failed"),
        ("t3", "Succeeded"),
        ("t4", "Failed"),
    ] {
        set_phase(&client, name, phase).await;
    }

    wait_gone(&pods, &created[0]).await;
    wait_gone(&pods, &created[1]).await;
    // Two terminated pods are left, which is the threshold: nothing more goes.
    let mut left: Vec<String> = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    left.sort();
    assert_eq!(left, vec!["running", "t3", "t4"]);
}

#[tokio::test]
async fn unscheduled_terminating_pods_are_failed_and_force_deleted() {
    let (_server, client) = start(0).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create_pod(&client, "stuck", None, true).await;
    pods.delete("stuck", &DeleteParams::default())
        .await
        .unwrap();
    let stuck = embedded::wait_until(&pods, "stuck pod failed", TIMEOUT, |p| {
        p.name_any() == "stuck" && phase(p) == Some("Failed")
    })
    .await
    .unwrap();
    assert!(stuck.metadata.deletion_timestamp.is_some());
    // Not an orphan: no DisruptionTarget condition.
    assert!(!has_condition(
        &stuck,
        "DisruptionTarget",
        "DeletionByPodGC"
    ));
}
