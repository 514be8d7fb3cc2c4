//! The scheduler end to end (issue 10): real `kubectl` against a whole in-process cluster —
//! API server, simulated nodes, scheduler and controllers — for inter-pod anti-affinity (the
//! ZooKeeper tutorial applied unchanged, and a StatefulSet with one replica more than there are
//! nodes), topology spread over zones, and preemption by PriorityClass. Every wait is a watch
//! with a deadline.

use crate::common;

use common::Cluster;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, ResourceExt};
use nodesim::{NodeSim, distribution::Distribution};
use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

/// How long a watch waits for a state a working cluster reaches in seconds.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Upstream's message for a pod whose required anti-affinity every one of three nodes refuses.
const ANTI_AFFINITY_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..";

/// A cluster of `nodes` simulated nodes with `cpu` CPUs each (zones `zone-a`, `zone-b`,
/// `zone-c` round robin), fast pod start-up, the scheduler and the controllers.
async fn cluster(nodes: usize, cpu: &str) -> Cluster {
    cluster_of(NodeSim {
        nodes,
        cpu: cpu.into(),
        ..fast_nodes()
    })
    .await
}

/// Simulated nodes whose pods start and become ready at once.
pub(crate) fn fast_nodes() -> NodeSim {
    NodeSim {
        start_delay: Distribution::Fixed(Duration::from_millis(50)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(50)),
        grace_scale: 0.01,
        backoff_scale: 0.01,
        ..Default::default()
    }
}

/// A cluster of `sim`'s nodes, the scheduler and the controllers, once every node registered.
pub(crate) async fn cluster_of(sim: NodeSim) -> Cluster {
    let nodes = sim.nodes;
    let c = Cluster::start_with(rollwright::components::Components {
        nodes: Some(sim),
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
        profile: None,
    })
    .await;
    let api: Api<Node> = Api::all(c.client().await);
    let mut seen = BTreeSet::new();
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
pub(crate) async fn wait_pods(
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
        pods.values().map(summary).collect::<Vec<_>>()
    );
    pods
}

pub(crate) fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

/// The pod's `PodScheduled=False` message, if it has one.
pub(crate) fn unschedulable_message(p: &Pod) -> Option<&str> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
        .message
        .as_deref()
}

fn summary(p: &Pod) -> String {
    format!(
        "{} on {:?}: {:?}",
        p.name_any(),
        node_of(p),
        unschedulable_message(p)
    )
}

/// Waits for an event on `pod` with `reason` and `message`.
async fn wait_event(c: &Cluster, pod: &str, reason: &str, message: &str) {
    common::wait_event(c.client().await, "default", Some(pod), reason, message).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_tutorial_puts_its_servers_on_three_nodes() {
    let c = cluster(3, "8").await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realworld/zookeeper.yaml");
    let out = c.kubectl(&["apply", "-f", &path.to_string_lossy()]).await;
    assert!(out.contains("statefulset.apps/zk created"), "{out}");
    let pods = wait_pods(&c, "app.kubernetes.io/name=zk", "3 zk pods bound", |pods| {
        pods.len() == 3 && pods.values().all(|p| node_of(p).is_some())
    })
    .await;
    let nodes: BTreeSet<&str> = pods.values().filter_map(node_of).collect();
    assert_eq!(nodes.len(), 3, "one ZooKeeper server per node: {pods:#?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_anti_affinity_leaves_the_replica_beyond_the_nodes_pending() {
    let c = cluster(3, "8").await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: quorum}
spec:
  replicas: 4
  podManagementPolicy: Parallel
  serviceName: quorum
  selector: {matchLabels: {app: quorum}}
  template:
    metadata: {labels: {app: quorum}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: quorum}}
            topologyKey: kubernetes.io/hostname
      containers:
      - {name: app, image: "nginx:1.27"}
"#,
    )
    .await;
    let pods = wait_pods(&c, "app=quorum", "3 bound, 1 unschedulable", |pods| {
        pods.len() == 4
            && pods.values().filter(|p| node_of(p).is_some()).count() == 3
            && pods
                .values()
                .any(|p| unschedulable_message(p) == Some(ANTI_AFFINITY_MESSAGE))
    })
    .await;
    let nodes: BTreeSet<&str> = pods.values().filter_map(node_of).collect();
    assert_eq!(nodes.len(), 3, "{pods:#?}");
    let pending = pods
        .values()
        .find(|p| node_of(p).is_none())
        .unwrap()
        .name_any();
    wait_event(&c, &pending, "FailedScheduling", ANTI_AFFINITY_MESSAGE).await;
    let described = c.kubectl(&["describe", "pod", &pending]).await;
    assert!(described.contains("FailedScheduling"), "{described}");
    let status = c.kubectl(&["get", "pod", &pending, "--no-headers"]).await;
    assert!(status.contains("Pending"), "{status}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_spread_balances_zones() {
    // Four nodes: zone-a holds two of them, so spreading by node alone would crowd it.
    let c = cluster(4, "8").await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: zonal}
spec:
  replicas: 6
  selector: {matchLabels: {app: zonal}}
  template:
    metadata: {labels: {app: zonal}}
    spec:
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
        labelSelector: {matchLabels: {app: zonal}}
      containers:
      - {name: app, image: "nginx:1.27"}
"#,
    )
    .await;
    let pods = wait_pods(&c, "app=zonal", "6 pods bound", |pods| {
        pods.len() == 6 && pods.values().all(|p| node_of(p).is_some())
    })
    .await;
    let nodes: Api<Node> = Api::all(c.client().await);
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for p in pods.values() {
        let node = nodes.get(node_of(p).unwrap()).await.unwrap();
        let zone = node.labels()["topology.kubernetes.io/zone"].clone();
        *per_zone.entry(zone).or_default() += 1;
    }
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "{per_zone:?}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_priority_pod_preempts_a_low_priority_one() {
    // Three nodes of one CPU each, each filled by a low-priority pod of 800m.
    let c = cluster(3, "1").await;
    let pod = |name: &str, class: &str| {
        format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{tier: {class}}}}}
spec:
  priorityClassName: {class}
  containers:
  - name: app
    image: "nginx:1.27"
    resources: {{requests: {{cpu: 800m}}}}
"#
        )
    };
    let mut manifest = String::from(
        r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: patient}
value: 1000
preemptionPolicy: Never
"#,
    );
    for i in 0..3 {
        manifest.push_str("---");
        manifest.push_str(&pod(&format!("low-{i}"), "low"));
    }
    c.kubectl_stdin(&["apply", "-f", "-"], &manifest).await;
    wait_pods(&c, "tier=low", "3 low pods bound", |pods| {
        pods.len() == 3 && pods.values().all(|p| node_of(p).is_some())
    })
    .await;
    let priority = c
        .kubectl(&["get", "pod", "low-0", "-o", "jsonpath={.spec.priority}"])
        .await;
    assert_eq!(priority.trim(), "100", "admission sets the class's value");

    // preemptionPolicy: Never waits instead.
    c.kubectl_stdin(&["apply", "-f", "-"], &pod("waiter", "patient"))
        .await;
    let waiter = wait_pods(&c, "tier=patient", "waiter unschedulable", |pods| {
        pods.values().any(|p| unschedulable_message(p).is_some())
    })
    .await;
    assert_eq!(
        unschedulable_message(&waiter["waiter"]),
        Some(
            "0/3 nodes are available: 3 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.."
        )
    );
    c.kubectl(&["delete", "pod", "waiter", "--wait=false"])
        .await;

    c.kubectl_stdin(&["apply", "-f", "-"], &pod("urgent", "high"))
        .await;
    let urgent = wait_pods(&c, "tier=high", "urgent bound", |pods| {
        pods.values().any(|p| node_of(p).is_some())
    })
    .await;
    let node = node_of(&urgent["urgent"]).unwrap().to_string();
    let low = wait_pods(&c, "tier=low", "one low pod gone", |pods| pods.len() == 2).await;
    assert!(
        low.values().all(|p| node_of(p) != Some(node.as_str())),
        "the victim was the low pod on {node}: {low:#?}"
    );
    let victim = (0..3)
        .map(|i| format!("low-{i}"))
        .find(|n| !low.contains_key(n))
        .unwrap();
    let uid = urgent["urgent"].uid().unwrap();
    wait_event(
        &c,
        &victim,
        "Preempted",
        &format!("Preempted by pod {uid} on node {node}"),
    )
    .await;
    wait_event(
        &c,
        "urgent",
        "FailedScheduling",
        "0/3 nodes are available: 3 Insufficient cpu.",
    )
    .await;
    c.stop().await;
}
