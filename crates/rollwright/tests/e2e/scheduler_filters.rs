//! The scheduler's default filters end to end (issue 21), with real `kubectl` against a whole
//! in-process cluster: two node-exporter-shaped DaemonSets on `hostPort: 9100` (upstream's
//! NodePorts leaves the second's pods Pending until the port is free), and a node full of pods
//! (NodeResourcesFit's `Too many pods`). The expected messages are kube-scheduler v1.28.4's for
//! the same objects, checked against it.

use crate::common;

use common::Cluster;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, ResourceExt};
use nodesim::{NodeSim, distribution::Distribution};
use std::{collections::BTreeMap, time::Duration};

/// How long a watch waits for a state a working cluster reaches in seconds.
const TIMEOUT: Duration = Duration::from_secs(120);

/// kube-scheduler v1.28.4's message for a DaemonSet pod whose node has its host port taken by a
/// pod of the same priority.
const PORTS_MESSAGE: &str = "0/3 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..";

/// kube-scheduler v1.28.4's message for a pod on a one-node cluster whose node runs its maximum
/// number of pods.
const TOO_MANY_PODS_MESSAGE: &str = "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..";

/// A cluster of `nodes` simulated nodes holding at most `max_pods` pods each, fast pod start-up,
/// the scheduler and the controllers.
async fn cluster(nodes: usize, max_pods: u32) -> Cluster {
    let c = Cluster::start_with(rollwright::components::Components {
        nodes: Some(NodeSim {
            nodes,
            max_pods,
            start_delay: Distribution::Fixed(Duration::from_millis(50)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(50)),
            grace_scale: 0.01,
            backoff_scale: 0.01,
            ..Default::default()
        }),
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
        profile: None,
    })
    .await;
    let api: Api<Node> = Api::all(c.client().await);
    let mut seen = std::collections::BTreeSet::new();
    embedded::wait_until(&api, &format!("{nodes} nodes"), TIMEOUT, |n: &Node| {
        seen.insert(n.name_any());
        seen.len() >= nodes
    })
    .await
    .unwrap();
    c
}

/// Waits until the pods of namespace `default` labelled `selector` satisfy `pred`, checked on
/// every pod event after the initial list; returns them by name.
async fn wait_pods(
    c: &Cluster,
    selector: &str,
    what: &str,
    mut pred: impl FnMut(&BTreeMap<String, Pod>) -> bool,
) -> BTreeMap<String, Pod> {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let api: Api<Pod> = Api::namespaced(c.client().await, "default");
    let mut events = watcher(api, watcher::Config::default().labels(selector)).boxed();
    let mut pods = BTreeMap::new();
    let mut synced = false;
    let done = tokio::time::timeout(TIMEOUT, async {
        while let Some(event) = events.next().await {
            match event.unwrap() {
                watcher::Event::Init => pods.clear(),
                watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                    pods.insert(p.name_any(), p);
                }
                watcher::Event::Delete(p) => {
                    pods.remove(&p.name_any());
                }
                watcher::Event::InitDone => synced = true,
            }
            if synced && pred(&pods) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(done, Ok(true)),
        "timed out waiting for {what}: {:#?}",
        pods.values()
            .map(|p| (p.name_any(), node_of(p), unschedulable_message(p)))
            .collect::<Vec<_>>()
    );
    pods
}

fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

/// The pod's `PodScheduled=False` message, if it has one.
fn unschedulable_message(p: &Pod) -> Option<&str> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
        .message
        .as_deref()
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
