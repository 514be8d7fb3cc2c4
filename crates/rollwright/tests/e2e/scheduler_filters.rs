//! The scheduler's default filters end to end (issue 21), with real `kubectl` against a whole
//! in-process cluster: two node-exporter-shaped DaemonSets on `hostPort: 9100` (upstream's
//! NodePorts leaves the second's pods Pending until the port is free), and a node full of pods
//! (NodeResourcesFit's `Too many pods`). The expected messages are kube-scheduler v1.28.4's for
//! the same objects, checked against it.

use crate::{common, scheduling};

use common::Cluster;
use kube::ResourceExt;
use nodesim::NodeSim;
use scheduling::{node_of, unschedulable_message, wait_pods};

/// kube-scheduler v1.28.4's message for a DaemonSet pod whose node has its host port taken by a
/// pod of the same priority.
const PORTS_MESSAGE: &str = "0/3 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..";

/// kube-scheduler v1.28.4's message for a pod on a one-node cluster whose node runs its maximum
/// number of pods.
const TOO_MANY_PODS_MESSAGE: &str = "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..";

/// A cluster of `nodes` simulated nodes holding at most `max_pods` pods each, fast pod start-up,
/// the scheduler and the controllers.
async fn cluster(nodes: usize, max_pods: u32) -> Cluster {
    scheduling::cluster_of(NodeSim {
        nodes,
        max_pods,
        ..scheduling::fast_nodes()
    })
    .await
}

/// A DaemonSet shaped like prometheus' node-exporter, serving on host port 9100.
fn node_exporter(name: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
  labels: {{app.kubernetes.io/name: {name}}}
spec:
  selector:
    matchLabels: {{app.kubernetes.io/name: {name}}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {name}}}
    spec:
      containers:
      - name: node-exporter
        image: quay.io/prometheus/node-exporter:v1.7.0
        args: ["--web.listen-address=0.0.0.0:9100"]
        ports:
        - {{name: metrics, containerPort: 9100, hostPort: 9100, protocol: TCP}}
        resources:
          requests: {{cpu: 10m, memory: 20Mi}}
      tolerations:
      - operator: Exists
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemonset_on_the_same_host_port_stays_pending() {
    let c = cluster(3, 110).await;
    let out = c
        .kubectl_stdin(&["apply", "-f", "-"], &node_exporter("node-exporter"))
        .await;
    assert!(
        out.contains("daemonset.apps/node-exporter created"),
        "{out}"
    );
    wait_pods(
        &c,
        "app.kubernetes.io/name=node-exporter",
        "a node-exporter pod bound on each node",
        |pods| pods.len() == 3 && pods.values().all(|p| node_of(p).is_some()),
    )
    .await;

    c.kubectl_stdin(&["apply", "-f", "-"], &node_exporter("node-exporter-2"))
        .await;
    let pending = wait_pods(
        &c,
        "app.kubernetes.io/name=node-exporter-2",
        "every node-exporter-2 pod unschedulable for its port",
        |pods| {
            pods.len() == 3
                && pods.values().all(|p| {
                    node_of(p).is_none() && unschedulable_message(p) == Some(PORTS_MESSAGE)
                })
        },
    )
    .await;
    for name in pending.keys() {
        common::wait_event(
            c.client().await,
            "default",
            Some(name),
            "FailedScheduling",
            PORTS_MESSAGE,
        )
        .await;
    }
    let listed = c
        .kubectl(&[
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=node-exporter-2",
            "--no-headers",
        ])
        .await;
    assert_eq!(listed.matches("Pending").count(), 3, "{listed}");

    // The port is released with the pods that held it: the second DaemonSet's pods take it.
    c.kubectl(&["delete", "daemonset", "node-exporter", "--wait=false"])
        .await;
    wait_pods(
        &c,
        "app.kubernetes.io/name=node-exporter-2",
        "a node-exporter-2 pod bound on each node once the port is free",
        |pods| pods.len() == 3 && pods.values().all(|p| node_of(p).is_some()),
    )
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_full_of_pods_takes_no_more() {
    let c = cluster(1, 2).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &common::deployment_yaml("crowd", 3, "nginx:1.27"),
    )
    .await;
    let pods = wait_pods(&c, "app=crowd", "two pods bound, one too many", |pods| {
        pods.len() == 3
            && pods.values().filter(|p| node_of(p).is_some()).count() == 2
            && pods
                .values()
                .any(|p| unschedulable_message(p) == Some(TOO_MANY_PODS_MESSAGE))
    })
    .await;
    let pending = pods
        .values()
        .find(|p| node_of(p).is_none())
        .unwrap()
        .name_any();
    common::wait_event(
        c.client().await,
        "default",
        Some(&pending),
        "FailedScheduling",
        TOO_MANY_PODS_MESSAGE,
    )
    .await;
    c.stop().await;
}
