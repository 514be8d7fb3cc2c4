//! A node dies under a Deployment and comes back, with every part running as `rollwright up` runs
//! it: the node lifecycle controller marks the dead node's pod NotReady (upstream's
//! `MarkPodsNotReady`), so the Deployment counts one replica less available; when the kubelet
//! returns it re-posts its pods' status and the Deployment is whole again. Timings are shrunk
//! (500ms heartbeats, a 3s grace period); every wait is on a watch with a deadline.

// Tests may unwrap: a failure is the assertion.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Cluster, DEADLINE};
use embedded::wait_until;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Event, Node, Pod},
};
use kube::{
    Api, ResourceExt,
    api::{ListParams, PostParams},
};
use nodesim::{NodeSim, distribution::Distribution};
use rollwright::components::{Components, ControllerSettings};
use serde_json::json;
use std::{collections::BTreeSet, time::Duration};

fn components() -> Components {
    Components {
        nodes: Some(NodeSim {
            nodes: 3,
            heartbeat_interval: Duration::from_millis(500),
            start_delay: Distribution::Fixed(Duration::from_millis(100)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
            ..Default::default()
        }),
        profile: None,
        scheduler: Some(scheduler::SchedulerConfig {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
            ..Default::default()
        }),
        controllers: Some(ControllerSettings {
            node_lifecycle: controllers::node_lifecycle::Config {
                grace_period: Duration::from_secs(3),
                ..Default::default()
            },
            ..Default::default()
        }),
    }
}

fn ready(p: &Pod) -> Option<&str> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

fn available(d: &Deployment) -> i32 {
    d.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_pod_is_unavailable_until_the_node_returns() {
    let c = Cluster::start_with(components()).await;
    let client = c.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..3 {
        let name = format!("node-{i}");
        wait_until(&nodes, &format!("{name} Ready"), DEADLINE, |n| {
            n.name_any() == name
                && n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .await
        .unwrap();
    }

    // 5 of a node's 8 CPUs each: one replica per node.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "app", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "5"}},
                }]},
            },
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    wait_until(&deployments, "web 3 available", DEADLINE, |d| {
        d.name_any() == "web" && available(d) == 3
    })
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let listed = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items;
    let spread: BTreeSet<String> = listed
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(spread.len(), 3, "one replica per node: {spread:?}");
    let victim = listed
        .iter()
        .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("node-1"))
        .unwrap();
    let (victim, uid) = (victim.name_any(), victim.uid());

    // node-1's kubelet dies: after the grace period its pod is NotReady, one replica less is
    // available, and nothing replaces it (the pod tolerates the unreachable taint for 300s).
    nodesim::ops::stop(&client, "node-1").await.unwrap();
    let marked = wait_until(&pods, "the pod on node-1 NotReady", DEADLINE, |p| {
        p.name_any() == victim && ready(p) == Some("False")
    })
    .await
    .unwrap();
    assert_eq!(marked.uid(), uid);
    wait_until(&deployments, "web 2 available", DEADLINE, |d| {
        d.name_any() == "web" && available(d) == 2
    })
    .await
    .unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    wait_until(&events, "NodeNotReady on the pod", DEADLINE, |e| {
        e.involved_object.name.as_deref() == Some(victim.as_str())
            && e.reason.as_deref() == Some("NodeNotReady")
            && e.type_.as_deref() == Some("Warning")
            && e.message.as_deref() == Some("Node is not ready")
    })
    .await
    .unwrap();

    // It comes back: it re-posts its pod's status, Ready again, and the Deployment is whole.
    nodesim::ops::start(&client, "node-1").await.unwrap();
    let back = wait_until(&pods, "the pod on node-1 Ready again", DEADLINE, |p| {
        p.name_any() == victim && ready(p) == Some("True")
    })
    .await
    .unwrap();
    assert_eq!(back.uid(), uid, "the same pod, not a replacement");
    wait_until(&deployments, "web 3 available again", DEADLINE, |d| {
        d.name_any() == "web" && available(d) == 3
    })
    .await
    .unwrap();
    let count = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(count, 3);
    c.stop().await;
}
