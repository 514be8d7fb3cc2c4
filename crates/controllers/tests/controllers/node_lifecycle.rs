//! The node lifecycle controller against an in-process API server, with Nodes and Leases made by
//! hand (no simulated kubelets): silent nodes, condition taints, taint-based eviction.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use controllers::node_lifecycle::{health, readiness};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Event, Node, NodeCondition, Pod, Taint},
    },
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start(grace: Duration) -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    spawn_node_lifecycle(
        &client,
        controllers::node_lifecycle::Config {
            grace_period: grace,
            ..Default::default()
        },
    );
    (server, client)
}

/// Runs the node lifecycle controller alone on a shared cache of `client`.
fn spawn_node_lifecycle(client: &Client, config: controllers::node_lifecycle::Config) {
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["nodelifecycle"]),
        node_lifecycle: config,
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
}

fn conditions(pairs: &[(&str, &str)]) -> Value {
    let now = Timestamp::now().to_string();
    json!(pairs
        .iter()
        .map(|(t, s)| json!({"type": t, "status": s, "reason": "Test", "lastHeartbeatTime": now, "lastTransitionTime": now}))
        .collect::<Vec<_>>())
}

async fn set_conditions(client: &Client, name: &str, pairs: &[(&str, &str)]) {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"status": {"conditions": conditions(pairs)}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Renews the node's lease; returns the renewal's time.
async fn renew(client: &Client, name: &str) -> Timestamp {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let now = Timestamp::now();
    let patch = json!({"spec": {"renewTime": MicroTime(now)}});
    leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    now
}

/// A node that is Ready with a freshly renewed lease.
async fn node(client: &Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let obj: Node = serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &obj).await.unwrap();
    set_conditions(
        client,
        name,
        &[
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
        ],
    )
    .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": MicroTime(Timestamp::now())},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
}

async fn pod(client: &Client, name: &str, node: &str, tolerations: Value) -> Pod {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let obj: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "tolerations": tolerations, "containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &obj).await.unwrap()
}

fn taint_keys(node: &Node) -> Vec<String> {
    let mut keys: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    keys.sort();
    keys
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

async fn wait_taints(client: &Client, name: &str, want: &[&str]) -> Node {
    let nodes: Api<Node> = Api::all(client.clone());
    embedded::wait_until(&nodes, &format!("{name} tainted {want:?}"), TIMEOUT, |n| {
        n.name_any() == name && taint_keys(n) == want
    })
    .await
    .unwrap()
}

async fn wait_evicted(client: &Client, name: &str) -> Pod {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    embedded::wait_until(&pods, &format!("{name} evicted"), TIMEOUT, |p| {
        p.name_any() == name && p.metadata.deletion_timestamp.is_some()
    })
    .await
    .unwrap()
}

async fn is_deleting(client: &Client, name: &str) -> bool {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.get(name)
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some()
}

fn unreachable_toleration(seconds: Option<i64>) -> Value {
    let mut t = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"});
    if let Some(s) = seconds {
        t["tolerationSeconds"] = json!(s);
    }
    t
}

#[tokio::test]
async fn a_silent_node_goes_unknown_is_tainted_and_evicts_by_toleration() {
    let (_s, client) = start(Duration::from_secs(3)).await;
    node(&client, "n1").await;
    pod(
        &client,
        "short",
        "n1",
        json!([unreachable_toleration(Some(1))]),
    )
    .await;
    // Like a DaemonSet pod: tolerates unreachable for good.
    pod(
        &client,
        "forever",
        "n1",
        json!([unreachable_toleration(None)]),
    )
    .await;
    // Gets the API server's default 300s.
    pod(&client, "defaulted", "n1", json!([])).await;

    let unknown = wait_unknown(&client, "n1").await;
    for c in unknown.status.unwrap().conditions.unwrap() {
        assert_eq!(c.status, "Unknown", "{c:?}");
        assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
    }

    let tainted = wait_taints(
        &client,
        "n1",
        &[
            "node.kubernetes.io/unreachable:NoExecute",
            "node.kubernetes.io/unreachable:NoSchedule",
        ],
    )
    .await;
    for t in taints(&tainted) {
        assert_eq!(t.time_added.is_some(), t.effect == "NoExecute", "{t:?}");
    }

    let evicted = wait_evicted(&client, "short").await;
    let disruption = evicted
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget");
    assert_eq!(
        disruption.and_then(|c| c.reason).as_deref(),
        Some("DeletionByTaintManager")
    );
    let events: Api<Event> = Api::default_namespaced(client.clone());
    embedded::wait_until(&events, "TaintManagerEviction event", TIMEOUT, |e| {
        e.reason.as_deref() == Some("TaintManagerEviction")
            && e.message.as_deref() == Some("Marking for deletion Pod default/short")
            && e.involved_object.name.as_deref() == Some("short")
    })
    .await
    .unwrap();
    assert!(!is_deleting(&client, "forever").await);
    assert!(!is_deleting(&client, "defaulted").await);

    // The kubelet comes back: lease renewed, Ready again. The taints go.
    renew(&client, "n1").await;
    set_conditions(
        &client,
        "n1",
        &[
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
        ],
    )
    .await;
    wait_taints(&client, "n1", &[]).await;
}

/// Waits until node `name` is `Ready=Unknown`.
async fn wait_unknown(client: &Client, name: &str) -> Node {
    let nodes: Api<Node> = Api::all(client.clone());
    embedded::wait_until(&nodes, &format!("{name} Ready=Unknown"), TIMEOUT, |n| {
        n.name_any() == name && readiness::node_ready(n) == Some("Unknown")
    })
    .await
    .unwrap()
}

/// The Ready condition of node `name` as the server has it now.
async fn ready_condition(client: &Client, name: &str) -> NodeCondition {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(name).await.unwrap();
    health::condition(&node, "Ready").unwrap().clone()
}

/// Renewals queue nothing for a live node (its requeue at the old expiry reads them), so this
/// is what proves they are read: a node renewing for three grace periods stays Ready (nothing
/// else posts its status here, so an `Unknown` would have stayed), and once it stops it goes
/// Unknown a grace period after its last renewal, not before.
#[tokio::test]
async fn renewals_keep_a_node_ready_and_the_last_one_sets_when_it_goes_unknown() {
    let grace = Duration::from_secs(3);
    let (_s, client) = start(grace).await;
    node(&client, "n1").await;
    let renewing = tokio::time::Instant::now();
    let mut every = tokio::time::interval(Duration::from_millis(300));
    let mut last = Timestamp::now();
    while renewing.elapsed() < grace * 3 {
        every.tick().await;
        last = renew(&client, "n1").await;
    }
    let ready = ready_condition(&client, "n1").await;
    assert_eq!(ready.status, "True", "{ready:?}");

    wait_unknown(&client, "n1").await;
    let went = ready_condition(&client, "n1")
        .await
        .last_transition_time
        .unwrap()
        .0;
    // Condition times are whole seconds.
    let earliest = last + SignedDuration::try_from(grace).unwrap() - SignedDuration::from_secs(1);
    assert!(
        went >= earliest,
        "Unknown at {went}, before the grace period after the last renewal ({last}) ran out"
    );
}

#[tokio::test]
async fn pods_that_do_not_tolerate_a_noexecute_taint_are_evicted_at_once() {
    let (_s, client) = start(Duration::from_secs(300)).await;
    node(&client, "n2").await;
    pod(&client, "plain", "n2", json!([])).await;
    pod(
        &client,
        "tolerant",
        "n2",
        json!([{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}]),
    )
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    // As `kubectl taint nodes n2 example.com/maintenance=now:NoExecute` writes it.
    let patch = json!({"spec": {"taints": [{"key": "example.com/maintenance", "value": "now", "effect": "NoExecute", "timeAdded": Timestamp::now().to_string()}]}});
    nodes
        .patch("n2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_evicted(&client, "plain").await;
    assert!(!is_deleting(&client, "tolerant").await);
    // A user's taint is not the controller's to remove.
    assert_eq!(
        taint_keys(&nodes.get("n2").await.unwrap()),
        ["example.com/maintenance:NoExecute"]
    );
}

#[tokio::test]
async fn conditions_and_cordoning_become_taints_and_clear() {
    let (_s, client) = start(Duration::from_secs(300)).await;
    node(&client, "n3").await;
    set_conditions(
        &client,
        "n3",
        &[
            ("Ready", "True"),
            ("MemoryPressure", "True"),
            ("DiskPressure", "True"),
            ("PIDPressure", "False"),
        ],
    )
    .await;
    wait_taints(
        &client,
        "n3",
        &[
            "node.kubernetes.io/disk-pressure:NoSchedule",
            "node.kubernetes.io/memory-pressure:NoSchedule",
        ],
    )
    .await;

    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            "n3",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    wait_taints(
        &client,
        "n3",
        &[
            "node.kubernetes.io/disk-pressure:NoSchedule",
            "node.kubernetes.io/memory-pressure:NoSchedule",
            "node.kubernetes.io/unschedulable:NoSchedule",
        ],
    )
    .await;

    set_conditions(
        &client,
        "n3",
        &[
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "True"),
        ],
    )
    .await;
    nodes
        .patch(
            "n3",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": null}})),
        )
        .await
        .unwrap();
    wait_taints(
        &client,
        "n3",
        &["node.kubernetes.io/pid-pressure:NoSchedule"],
    )
    .await;
}

#[tokio::test]
async fn a_not_ready_node_gets_the_not_ready_taints() {
    let (_s, client) = start(Duration::from_secs(300)).await;
    node(&client, "n4").await;
    set_conditions(
        &client,
        "n4",
        &[
            ("Ready", "False"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
        ],
    )
    .await;
    let tainted = wait_taints(
        &client,
        "n4",
        &[
            "node.kubernetes.io/not-ready:NoExecute",
            "node.kubernetes.io/not-ready:NoSchedule",
        ],
    )
    .await;
    assert!(
        taints(&tainted)
            .iter()
            .any(|t| t.effect == "NoExecute" && t.time_added.is_some())
    );
    set_conditions(
        &client,
        "n4",
        &[
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
        ],
    )
    .await;
    wait_taints(&client, "n4", &[]).await;
}

/// The pod's `Ready` status, if it has the condition.
fn pod_ready(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// What a kubelet posts for a running pod: Ready (with a reason the marking must keep) and the
/// other conditions.
async fn set_pod_status(client: &Client, name: &str, phase: &str, ready: &str) -> Pod {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let then = "2020-01-01T00:00:00Z";
    let patch = json!({"status": {"phase": phase, "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": then},
        {"type": "Initialized", "status": "True", "lastTransitionTime": then},
        {"type": "ContainersReady", "status": ready, "lastTransitionTime": then},
        {"type": "Ready", "status": ready, "reason": "KubeletSaid", "lastTransitionTime": then},
    ]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap()
}

async fn wait_event(client: &Client, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
    let events: Api<Event> = Api::all(client.clone());
    embedded::wait_until(&events, what, TIMEOUT, pred)
        .await
        .unwrap()
}

#[tokio::test]
async fn pods_on_a_silent_node_are_marked_not_ready_once() {
    let (_s, client) = start(Duration::from_secs(2)).await;
    node(&client, "n5").await;
    for name in ["serving", "starting", "done"] {
        pod(&client, name, "n5", json!([])).await;
    }
    set_pod_status(&client, "serving", "Running", "True").await;
    set_pod_status(&client, "starting", "Running", "False").await;
    // Unusual but possible: a finished pod still saying Ready. Not the controller's to touch.
    set_pod_status(&client, "done", "Succeeded", "True").await;
    let done_before = Api::<Pod>::default_namespaced(client.clone())
        .get("done")
        .await
        .unwrap();

    // No renewals: after the grace period the node is Unknown and its Ready pod is not.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let marked = embedded::wait_until(&pods, "serving Ready=False", TIMEOUT, |p| {
        p.name_any() == "serving" && pod_ready(p).as_deref() == Some("False")
    })
    .await
    .unwrap();
    let conditions = marked.status.unwrap().conditions.unwrap();
    let by = |t: &str| conditions.iter().find(|c| c.type_ == t).unwrap();
    // Only Ready changed: its reason stays, its transition time is now.
    assert_eq!(by("Ready").reason.as_deref(), Some("KubeletSaid"));
    assert!(
        by("Ready").last_transition_time.as_ref().unwrap().0
            > "2021-01-01T00:00:00Z".parse().unwrap()
    );
    assert_eq!(by("ContainersReady").status, "True");
    assert_eq!(by("PodScheduled").status, "True");
    assert_eq!(conditions.len(), 4);

    let nodes: Api<Node> = Api::all(client.clone());
    let n5 = nodes.get("n5").await.unwrap();
    assert_eq!(
        n5.status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .status,
        "Unknown"
    );
    let warning = wait_event(&client, "NodeNotReady on the pod", |e| {
        e.involved_object.name.as_deref() == Some("serving")
            && e.reason.as_deref() == Some("NodeNotReady")
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(warning.message.as_deref(), Some("Node is not ready"));
    assert_eq!(warning.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!(
        warning.source.and_then(|s| s.component).as_deref(),
        Some("node-controller")
    );
    let node_event = wait_event(&client, "NodeNotReady on the node", |e| {
        e.involved_object.kind.as_deref() == Some("Node")
            && e.involved_object.name.as_deref() == Some("n5")
            && e.reason.as_deref() == Some("NodeNotReady")
    })
    .await;
    assert_eq!(node_event.type_.as_deref(), Some("Normal"));
    assert_eq!(
        node_event.message.as_deref(),
        Some("Node n5 status is now: NodeNotReady")
    );

    // A pass picks its pods before writing any, so once `serving` is marked the others were
    // passed over: not Ready, or finished, they are left alone.
    let starting = pods.get("starting").await.unwrap();
    assert_eq!(pod_ready(&starting).as_deref(), Some("False"));
    let done = pods.get("done").await.unwrap();
    assert_eq!(done.resource_version(), done_before.resource_version());
    let events: Api<Event> = Api::all(client.clone());
    let warned: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("NodeNotReady"))
        .filter_map(|e| e.involved_object.name)
        .collect();
    assert!(
        !warned.iter().any(|n| n == "starting" || n == "done"),
        "{warned:?}"
    );

    // The kubelet comes back and says Ready again: nothing marks it NotReady a second time.
    renew(&client, "n5").await;
    set_conditions(
        &client,
        "n5",
        &[
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
        ],
    )
    .await;
    set_pod_status(&client, "serving", "Running", "True").await;
    wait_taints(&client, "n5", &[]).await;
    assert_eq!(
        pod_ready(&pods.get("serving").await.unwrap()).as_deref(),
        Some("True")
    );
}

#[tokio::test]
async fn a_ready_pod_found_on_a_node_that_is_already_unknown_is_marked() {
    // The controller starts after the node went Unknown (it sees no transition): the pod is
    // marked as it is first seen, as upstream's pod handler does.
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    node(&client, "n6").await;
    let long_ago = "2020-01-01T00:00:00Z";
    let nodes: Api<Node> = Api::all(client.clone());
    let unknown: Vec<Value> = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]
        .iter()
        .map(|t| json!({"type": t, "status": "Unknown", "reason": "NodeStatusUnknown", "lastHeartbeatTime": long_ago, "lastTransitionTime": long_ago}))
        .collect();
    let patch = json!({"status": {"conditions": unknown}});
    nodes
        .patch_status("n6", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    leases
        .patch(
            "n6",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"renewTime": "2020-01-01T00:00:00.000000Z"}})),
        )
        .await
        .unwrap();
    pod(&client, "stranded", "n6", json!([])).await;
    set_pod_status(&client, "stranded", "Running", "True").await;

    spawn_node_lifecycle(
        &client,
        controllers::node_lifecycle::Config {
            grace_period: Duration::from_secs(300),
            ..Default::default()
        },
    );
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    embedded::wait_until(&pods, "stranded Ready=False", TIMEOUT, |p| {
        p.name_any() == "stranded" && pod_ready(p).as_deref() == Some("False")
    })
    .await
    .unwrap();
    wait_event(&client, "NodeNotReady on the pod", |e| {
        e.involved_object.name.as_deref() == Some("stranded")
            && e.reason.as_deref() == Some("NodeNotReady")
            && e.message.as_deref() == Some("Node is not ready")
    })
    .await;
}
