//! Issue 3 end to end: the API server, simulated nodes, scheduler and controllers running together
//! as `rollwright up` runs them, driven by real `kubectl`, the `rollwright nodes` CLI and the
//! `kube` client. Timings are shrunk (100ms container start and readiness, 500ms heartbeats, a 3s
//! node grace period) and every wait is on a watch or `kubectl wait` with a deadline.

// Tests may unwrap: a failure is the assertion.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Cluster, DEADLINE, LineReader, pod_yaml};
use embedded::wait_until;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::{
    Api,
    api::{WatchEvent, WatchParams},
};
use nodesim::{NodeSim, distribution::Distribution};
use rollwright::components::{Components, ControllerSettings};
use serde_json::{Value, json};
use std::time::Duration;

/// Every part, with timings short enough for a test.
fn fast() -> Components {
    Components {
        nodes: Some(fast_nodes()),
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

fn fast_nodes() -> NodeSim {
    NodeSim {
        nodes: 3,
        heartbeat_interval: Duration::from_millis(500),
        start_delay: Distribution::Fixed(Duration::from_millis(100)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
        // Back-offs of 10s, 20s, ... become 100ms, 200ms, ...; messages keep upstream's values.
        backoff_scale: 0.01,
        ..Default::default()
    }
}

/// A cluster of three simulated nodes, each Ready.
async fn cluster(components: Components) -> Cluster {
    let c = Cluster::start_with(components).await;
    for i in 0..3 {
        wait_node(&c, &format!("node-{i}"), "Ready", |n| {
            condition(n, "Ready") == Some("True")
        })
        .await;
    }
    // Pod admission refuses a pod whose ServiceAccount is not there yet, and the controllers
    // make `default` a moment after start: upstream's e2e framework waits for it too
    // (WaitForDefaultServiceAccountInNamespace) before a test makes pods.
    let accounts: Api<ServiceAccount> = Api::namespaced(c.client().await, "default");
    wait_until(&accounts, "the default ServiceAccount", DEADLINE, |a| {
        a.metadata.name.as_deref() == Some("default")
    })
    .await
    .unwrap();
    c
}

fn condition<'a>(n: &'a Node, kind: &str) -> Option<&'a str> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.as_str())
}

fn pod_condition<'a>(
    p: &'a Pod,
    kind: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

fn has_taint(n: &Node, key: &str, effect: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key && t.effect == effect))
}

async fn wait_node(c: &Cluster, name: &str, what: &str, pred: impl Fn(&Node) -> bool) -> Node {
    let api: Api<Node> = Api::all(c.client().await);
    wait_until(&api, &format!("{name}: {what}"), DEADLINE, |n| {
        n.metadata.name.as_deref() == Some(name) && pred(n)
    })
    .await
    .unwrap()
}

async fn wait_pod(c: &Cluster, name: &str, what: &str, pred: impl Fn(&Pod) -> bool) -> Pod {
    let api: Api<Pod> = Api::namespaced(c.client().await, "default");
    wait_until(&api, &format!("{name}: {what}"), DEADLINE, |p| {
        p.metadata.name.as_deref() == Some(name) && pred(p)
    })
    .await
    .unwrap()
}

/// The node a pod is bound to, once it is.
async fn bound_node(c: &Cluster, pod: &str) -> String {
    let p = wait_pod(c, pod, "bound", |p| {
        p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
    })
    .await;
    p.spec.unwrap().node_name.unwrap()
}

/// The PodScheduled=False message of an unschedulable pod.
async fn unschedulable(c: &Cluster, pod: &str) -> String {
    let p = wait_pod(c, pod, "Unschedulable", |p| {
        pod_condition(p, "PodScheduled")
            .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    })
    .await;
    assert_eq!(p.spec.as_ref().unwrap().node_name, None);
    pod_condition(&p, "PodScheduled")
        .unwrap()
        .message
        .clone()
        .unwrap_or_default()
}

/// `kubectl create -f -` of a manifest.
async fn create(c: &Cluster, manifest: Value) -> String {
    c.kubectl_stdin(&["create", "-f", "-"], &manifest.to_string())
        .await
}

/// A pod manifest; `spec` is merged over one nginx container named `app`.
fn pod(name: &str, labels: Value, spec: Value) -> Value {
    let mut m = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
    });
    if let (Some(dst), Value::Object(src)) = (m["spec"].as_object_mut(), spec) {
        dst.extend(src);
    }
    m
}

async fn wait_ready(c: &Cluster, pods: &[&str]) {
    let mut args = vec!["wait", "--for=condition=Ready", "--timeout=30s"];
    let names: Vec<String> = pods.iter().map(|p| format!("pod/{p}")).collect();
    args.extend(names.iter().map(String::as_str));
    let out = c.kubectl(&args).await;
    for p in pods {
        assert!(out.contains(&format!("pod/{p} condition met")), "{out}");
    }
}

/// The value of a `kubectl describe` field (`Name:`, `Status:`, ...), first occurrence.
fn field<'a>(describe: &'a str, key: &str) -> Option<&'a str> {
    describe
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(key))
        .map(str::trim)
}

/// `kubectl get pods -w` output columns: NAME READY STATUS RESTARTS AGE.
fn cols(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// A line `kubectl get pods -w` printed (or prints within the deadline) that satisfies `want`.
async fn saw(r: &mut LineReader, what: &str, want: impl Fn(&[&str]) -> bool) -> usize {
    if let Some(i) = r.seen.iter().position(|l| want(&cols(l))) {
        return i;
    }
    r.until(what, |l| want(&cols(l))).await;
    r.seen.len() - 1
}

/// Runs the `rollwright` binary against the cluster.
async fn rollwright(c: &Cluster, args: &[&str]) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rollwright"))
        .args(args)
        .env("KUBECONFIG", c.kubeconfig())
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "rollwright {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_from_kubectl_run_and_yaml_are_scheduled_and_become_ready_with_events() {
    let c = cluster(fast()).await;
    let nodes = c.kubectl(&["get", "nodes"]).await;
    for i in 0..3 {
        let row = nodes
            .lines()
            .find(|l| l.starts_with(&format!("node-{i} ")))
            .unwrap_or_else(|| panic!("{nodes}"));
        assert_eq!(cols(row)[1], "Ready", "{nodes}");
    }

    assert_eq!(
        c.kubectl(&["run", "web", "--image=nginx:1.27"])
            .await
            .trim(),
        "pod/web created"
    );
    assert_eq!(
        c.kubectl_stdin(
            &["create", "-f", "-"],
            &pod_yaml("from-yaml", &[("app", "yaml")])
        )
        .await
        .trim(),
        "pod/from-yaml created"
    );
    wait_ready(&c, &["web", "from-yaml"]).await;

    let wide = c.kubectl(&["get", "pods", "-o", "wide"]).await;
    for name in ["web", "from-yaml"] {
        let row = wide
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{wide}"));
        let cols = cols(row);
        assert_eq!(&cols[1..4], ["1/1", "Running", "0"], "{wide}");
        assert!(cols[5].contains('.'), "an IP in {row}");
        assert!(cols[6].starts_with("node-"), "a node in {row}");
    }

    // The status a kubelet writes, through the kube client.
    let pods: Api<Pod> = Api::namespaced(c.client().await, "default");
    let web = pods.get("web").await.unwrap();
    let status = web.status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert!(status.pod_ip.is_some() && status.host_ip.is_some());
    assert!(status.start_time.is_some());
    for kind in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        let cond = pod_condition(&web, kind).unwrap_or_else(|| panic!("{kind} missing"));
        assert_eq!(cond.status, "True", "{kind}");
        assert!(cond.last_transition_time.is_some(), "{kind}");
    }
    let cs = &status.container_statuses.unwrap()[0];
    assert_eq!(
        (
            cs.name.as_str(),
            cs.image.as_str(),
            cs.ready,
            cs.started,
            cs.restart_count
        ),
        ("web", "docker.io/library/nginx:1.27", true, Some(true), 0)
    );
    assert!(!cs.image_id.is_empty());
    assert!(cs.state.as_ref().unwrap().running.is_some());

    // Each write is its writer's, named as upstream's components name themselves.
    let shown = c
        .kubectl_json(&["get", "pod", "web", "-o", "json", "--show-managed-fields"])
        .await;
    let managers: Vec<(&str, &str, &str)> = shown["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or(""),
                e["operation"].as_str().unwrap_or(""),
                e["subresource"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        managers,
        [
            ("kubectl-run", "Update", ""),
            ("kubelet", "Update", "status")
        ]
    );

    let node = bound_node(&c, "web").await;
    common::wait_event(c.client().await, "default", Some("web"), "Started", "web").await;
    let describe = c.kubectl(&["describe", "pod", "web"]).await;
    let ip = status.pod_ip.clone().unwrap();
    for (key, want) in [
        ("Name:", "web"),
        ("Status:", "Running"),
        ("IP:", ip.as_str()),
        ("Image:", "nginx:1.27"),
        ("State:", "Running"),
        ("Ready:", "True"),
        ("Restart Count:", "0"),
    ] {
        assert_eq!(field(&describe, key), Some(want), "{key} in:\n{describe}");
    }
    assert!(
        field(&describe, "Node:").is_some_and(|n| n.starts_with(&format!("{node}/"))),
        "{describe}"
    );
    for want in [
        format!("Successfully assigned default/web to {node}"),
        "Pulling image \"nginx:1.27\"".into(),
        "Successfully pulled image \"nginx:1.27\"".into(),
        "Created container: web".into(),
        "Started container web".into(),
    ] {
        assert!(
            describe.contains(&want),
            "`{want}` missing from describe:\n{describe}"
        );
    }
    let events = describe
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no events in:\n{describe}"));
    for (reason, from) in [
        ("Scheduled", "default-scheduler"),
        ("Pulling", "kubelet"),
        ("Pulled", "kubelet"),
        ("Created", "kubelet"),
        ("Started", "kubelet"),
    ] {
        let line = events
            .lines()
            .find(|l| cols(l).get(1) == Some(&reason))
            .unwrap_or_else(|| panic!("no {reason} event:\n{describe}"));
        assert_eq!(cols(line)[0], "Normal", "{line}");
        assert!(line.contains(from), "{reason} from {from}: {line}");
    }

    // `kubectl get events`: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE.
    let all = c
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=from-yaml",
        ])
        .await;
    let header = cols(all.lines().next().unwrap()).join(" ");
    assert_eq!(header, "LAST SEEN TYPE REASON OBJECT MESSAGE");
    for reason in ["Scheduled", "Pulling", "Pulled", "Created", "Started"] {
        let line = all
            .lines()
            .find(|l| cols(l).get(2) == Some(&reason))
            .unwrap_or_else(|| panic!("no {reason}:\n{all}"));
        assert_eq!(cols(line)[1], "Normal", "{line}");
        assert_eq!(cols(line)[3], "pod/from-yaml", "{line}");
    }
    assert!(
        all.contains("Successfully assigned default/from-yaml to node-"),
        "{all}"
    );
    assert!(all.contains("Started container c"), "{all}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_nowhere_stays_pending_until_a_node_makes_room() {
    let c = cluster(fast()).await;
    let resources = json!({"requests": {"cpu": "100"}});
    create(
        &c,
        pod(
            "huge",
            json!({}),
            json!({"containers": [{"name": "app", "image": "nginx:1.27", "resources": resources}]}),
        ),
    )
    .await;

    let message = unschedulable(&c, "huge").await;
    // Upstream's message, preemption's verdict included.
    assert_eq!(
        message,
        "0/3 nodes are available: 3 Insufficient cpu. \
         preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
    let row = c.kubectl(&["get", "pod", "huge", "--no-headers"]).await;
    assert_eq!(&cols(&row)[1..3], ["0/1", "Pending"]);
    let describe = c.kubectl(&["describe", "pod", "huge"]).await;
    let failed = describe
        .lines()
        .find(|l| l.contains("FailedScheduling"))
        .unwrap_or_else(|| panic!("no FailedScheduling event:\n{describe}"));
    assert!(failed.trim_start().starts_with("Warning"), "{failed}");
    assert!(failed.contains("default-scheduler"), "{failed}");
    assert!(
        failed.contains("0/3 nodes are available: 3 Insufficient cpu."),
        "{failed}"
    );

    // A node of another shape, created through the API like any node (not simulated: nodesim
    // gives its nodes its own capacity), makes room: the scheduler retries on the node event.
    let big = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "big", "labels": {"kubernetes.io/hostname": "big"}},
        "status": {
            "capacity": {"cpu": "128", "memory": "512Gi", "pods": "110"},
            "allocatable": {"cpu": "128", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
        },
    });
    assert_eq!(create(&c, big).await.trim(), "node/big created");
    assert_eq!(bound_node(&c, "huge").await, "big");

    // Full nodes: one 6-CPU pod fills each 8-CPU node, a fourth waits for `rollwright nodes add`.
    let six = json!({"containers": [{"name": "app", "image": "nginx:1.27",
                                     "resources": {"requests": {"cpu": "6"}}}],
                     "nodeSelector": {"rollwright.io/simulated": "true"}});
    for i in 0..4 {
        create(
            &c,
            pod(&format!("six-{i}"), json!({"app": "six"}), six.clone()),
        )
        .await;
    }
    let mut placed = std::collections::BTreeMap::new();
    let mut waiting = Vec::new();
    let api: Api<Pod> = Api::namespaced(c.client().await, "default");
    for i in 0..4 {
        let name = format!("six-{i}");
        let p = wait_until(&api, "six placed or unschedulable", DEADLINE, |p| {
            p.metadata.name.as_deref() == Some(name.as_str())
                && (p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
                    || pod_condition(p, "PodScheduled").is_some_and(|c| c.status == "False"))
        })
        .await
        .unwrap();
        match p.spec.unwrap().node_name {
            Some(node) => assert!(placed.insert(node, name).is_none(), "one per node"),
            None => waiting.push(name),
        }
    }
    assert_eq!(placed.len(), 3, "{placed:?}");
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        unschedulable(&c, &waiting[0]).await,
        "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 3 Insufficient cpu. \
         preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod.."
    );
    let out = rollwright(&c, &["nodes", "add"]).await;
    assert_eq!(out.trim(), "added node-3");
    assert_eq!(bound_node(&c, &waiting[0]).await, "node-3");
    wait_ready(&c, &["six-0", "six-1", "six-2", "six-3"]).await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_tolerations_cordon_affinity_and_node_selector_pick_nodes() {
    let c = cluster(fast()).await;
    // Zones go round robin: node-0 zone-a, node-1 zone-b, node-2 zone-c.
    let zones = c
        .kubectl(&[
            "get",
            "nodes",
            "-L",
            "topology.kubernetes.io/zone",
            "--no-headers",
        ])
        .await;
    for (i, zone) in ["zone-a", "zone-b", "zone-c"].iter().enumerate() {
        let row = zones
            .lines()
            .find(|l| l.starts_with(&format!("node-{i} ")))
            .unwrap();
        assert_eq!(cols(row).last(), Some(zone), "{zones}");
    }
    assert_eq!(
        c.kubectl(&["taint", "nodes", "node-0", "dedicated=x:NoSchedule"])
            .await
            .trim(),
        "node/node-0 tainted"
    );
    assert_eq!(
        c.kubectl(&["cordon", "node-1"]).await.trim(),
        "node/node-1 cordoned"
    );
    wait_node(&c, "node-1", "unschedulable", |n| {
        n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
    })
    .await;
    let nodes = c.kubectl(&["get", "nodes", "node-1", "--no-headers"]).await;
    assert_eq!(cols(&nodes)[1], "Ready,SchedulingDisabled");

    let tolerate =
        json!([{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]);
    // Only node-2 is open to a plain pod.
    for i in 0..3 {
        create(
            &c,
            pod(&format!("plain-{i}"), json!({"app": "plain"}), json!({})),
        )
        .await;
    }
    // The toleration opens node-0; a selector then picks it.
    create(
        &c,
        pod(
            "tolerant",
            json!({}),
            json!({"tolerations": tolerate, "nodeSelector": {"kubernetes.io/hostname": "node-0"}}),
        ),
    )
    .await;
    // Without the toleration, the same selector leaves nowhere.
    create(
        &c,
        pod(
            "intolerant",
            json!({}),
            json!({"nodeSelector": {"kubernetes.io/hostname": "node-0"}}),
        ),
    )
    .await;
    // Required node affinity, matchExpressions: not node-2, and node-1 is cordoned.
    let not_node_2 = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["node-2"]}]}]}}});
    create(
        &c,
        pod(
            "affine",
            json!({}),
            json!({"tolerations": tolerate, "affinity": not_node_2}),
        ),
    )
    .await;
    // matchFields metadata.name, as DaemonSet pods carry it.
    let field = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}});
    create(
        &c,
        pod(
            "by-name",
            json!({}),
            json!({"tolerations": tolerate, "affinity": field}),
        ),
    )
    .await;
    // Zone affinity to the cordoned node's zone: waits for uncordon.
    let zone_b = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}]}}});
    create(&c, pod("zone-b", json!({}), json!({"affinity": zone_b}))).await;

    for i in 0..3 {
        assert_eq!(bound_node(&c, &format!("plain-{i}")).await, "node-2");
    }
    for name in ["tolerant", "affine", "by-name"] {
        assert_eq!(bound_node(&c, name).await, "node-0", "{name}");
    }
    // Upstream stops at a node's first failing filter (NodeUnschedulable, TaintToleration,
    // NodeAffinity, in that order) and sorts the reasons.
    let nowhere = "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
                   1 node(s) had untolerated taint {dedicated: x}, 1 node(s) were unschedulable. \
                   preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling..";
    assert_eq!(unschedulable(&c, "intolerant").await, nowhere);
    assert_eq!(unschedulable(&c, "zone-b").await, nowhere);
    wait_ready(
        &c,
        &[
            "plain-0", "plain-1", "plain-2", "tolerant", "affine", "by-name",
        ],
    )
    .await;

    // Uncordoning is a node change: the waiting pod is retried and lands there.
    assert_eq!(
        c.kubectl(&["uncordon", "node-1"]).await.trim(),
        "node/node-1 uncordoned"
    );
    assert_eq!(bound_node(&c, "zone-b").await, "node-1");
    // Removing the taint opens node-0 to the pod that did not tolerate it.
    assert_eq!(
        c.kubectl(&["taint", "nodes", "node-0", "dedicated=x:NoSchedule-"])
            .await
            .trim(),
        "node/node-0 untainted"
    );
    assert_eq!(bound_node(&c, "intolerant").await, "node-0");
    wait_ready(&c, &["zone-b", "intolerant"]).await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_deletion_completes() {
    let c = cluster(fast()).await;
    c.kubectl(&["run", "web", "--image=nginx:1.27"]).await;
    wait_ready(&c, &["web"]).await;
    let pods: Api<Pod> = Api::namespaced(c.client().await, "default");
    let rv = pods
        .get("web")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = pods
        .watch(&WatchParams::default().fields("metadata.name=web"), &rv)
        .await
        .unwrap()
        .boxed();

    // kubectl waits for the object to be gone.
    assert_eq!(
        c.kubectl(&["delete", "pod", "web"]).await.trim(),
        "pod \"web\" deleted"
    );
    let err = c.kubectl_fails(&["get", "pod", "web"], None).await;
    assert!(err.contains("pods \"web\" not found"), "{err}");

    // What the watch saw: marked for deletion with upstream's 30s grace, containers stopped, gone.
    let mut terminating = None;
    let deleted = tokio::time::timeout(DEADLINE, async {
        while let Some(ev) = watch.try_next().await.unwrap() {
            match ev {
                WatchEvent::Modified(p) if p.metadata.deletion_timestamp.is_some() => {
                    terminating = Some(p)
                }
                WatchEvent::Deleted(p) => return p,
                _ => {}
            }
        }
        panic!("watch ended before the pod was deleted");
    })
    .await
    .unwrap();
    let terminating = terminating.expect("the pod was Terminating before it went");
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    let cs = &deleted.status.unwrap().container_statuses.unwrap()[0];
    assert!(
        cs.state.as_ref().unwrap().terminated.is_some(),
        "containers terminated before the pod went: {cs:?}"
    );
    common::wait_event(
        c.client().await,
        "default",
        Some("web"),
        "Killing",
        "Stopping",
    )
    .await;
    let events = c
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=web,reason=Killing",
        ])
        .await;
    assert!(events.contains("Stopping container web"), "{events}");
    c.stop().await;
}

fn replicaset(name: &str, replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}},
        },
    })
}

/// The names of the pods labelled `app=name` once there are `n` of them, all Ready.
async fn replicas_ready(c: &Cluster, name: &str, n: usize) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(c.client().await, "default");
    let mut ready = std::collections::BTreeSet::new();
    let selector = format!("app={name}");
    let stream = kube::runtime::watcher(
        pods,
        kube::runtime::watcher::Config::default().labels(&selector),
    );
    let mut stream = kube::runtime::WatchStreamExt::applied_objects(stream).boxed();
    tokio::time::timeout(DEADLINE, async {
        while ready.len() < n {
            let p: Pod = stream.try_next().await.unwrap().unwrap();
            if pod_condition(&p, "Ready").is_some_and(|c| c.status == "True") {
                ready.insert(p.metadata.name.unwrap());
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{n} ready pods of {name}"));
    ready.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cascade_policy_of_kubectl_delete() {
    let c = cluster(fast()).await;
    for name in ["bg", "fg", "orphan"] {
        create(&c, replicaset(name, 2)).await;
    }
    let mut pods = std::collections::BTreeMap::new();
    for name in ["bg", "fg", "orphan"] {
        let names = replicas_ready(&c, name, 2).await;
        let json = c
            .kubectl_json(&["get", "pods", "-l", &format!("app={name}"), "-o", "json"])
            .await;
        for p in json["items"].as_array().unwrap() {
            let owner = &p["metadata"]["ownerReferences"][0];
            assert_eq!(
                (owner["kind"].as_str(), owner["name"].as_str()),
                (Some("ReplicaSet"), Some(name))
            );
            assert_eq!(owner["blockOwnerDeletion"], true);
        }
        pods.insert(name, names);
    }

    // Background: the owner goes at once, the collector deletes its pods after.
    assert_eq!(
        c.kubectl(&["delete", "rs", "bg", "--cascade=background"])
            .await
            .trim(),
        "replicaset.apps \"bg\" deleted"
    );
    c.kubectl(&[
        "wait",
        "--for=delete",
        "pod",
        "-l",
        "app=bg",
        "--timeout=30s",
    ])
    .await;
    for p in &pods["bg"] {
        c.kubectl_fails(&["get", "pod", p], None).await;
    }

    // Foreground: the owner stays, with the foregroundDeletion finalizer, until its dependents
    // are gone; kubectl waits for all of it.
    let sets: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(c.client().await, "default");
    let rv = sets
        .get("fg")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = sets
        .watch(&WatchParams::default().fields("metadata.name=fg"), &rv)
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        c.kubectl(&["delete", "rs", "fg", "--cascade=foreground"])
            .await
            .trim(),
        "replicaset.apps \"fg\" deleted"
    );
    let out = c.kubectl(&["get", "pods", "-l", "app=fg"]).await;
    assert_eq!(out.trim(), "", "dependents are gone before the owner");
    let mut marked = false;
    tokio::time::timeout(DEADLINE, async {
        while let Some(ev) = watch.try_next().await.unwrap() {
            match ev {
                WatchEvent::Modified(rs) => {
                    marked |= rs.metadata.deletion_timestamp.is_some()
                        && rs
                            .metadata
                            .finalizers
                            .unwrap_or_default()
                            .contains(&"foregroundDeletion".to_string());
                }
                WatchEvent::Deleted(_) => return,
                _ => {}
            }
        }
    })
    .await
    .unwrap();
    assert!(
        marked,
        "the owner carried the foregroundDeletion finalizer while its pods went"
    );

    // Orphan: the owner goes, the pods stay, running, without the owner reference.
    assert_eq!(
        c.kubectl(&["delete", "rs", "orphan", "--cascade=orphan"])
            .await
            .trim(),
        "replicaset.apps \"orphan\" deleted"
    );
    c.kubectl_fails(&["get", "rs", "orphan"], None).await;
    let api: Api<Pod> = Api::namespaced(c.client().await, "default");
    for p in &pods["orphan"] {
        wait_pod(&c, p, "owner reference removed", |p| {
            p.metadata
                .owner_references
                .as_ref()
                .is_none_or(|o| o.is_empty())
        })
        .await;
        let got = api.get(p).await.unwrap();
        assert!(got.metadata.deletion_timestamp.is_none(), "{p} kept");
        assert_eq!(pod_condition(&got, "Ready").unwrap().status, "True");
    }
    let rows = c
        .kubectl(&["get", "pods", "-l", "app=orphan", "--no-headers"])
        .await;
    assert_eq!(
        rows.lines().filter(|l| cols(l)[2] == "Running").count(),
        2,
        "{rows}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_goes_unknown_is_tainted_and_evicted_then_recovers() {
    let c = cluster(fast()).await;
    let on_node_1 = json!({"kubernetes.io/hostname": "node-1"});
    let two_seconds = json!([
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
    ]);
    let forever = json!([{"operator": "Exists", "effect": "NoExecute"}]);
    create(
        &c,
        pod(
            "doomed",
            json!({}),
            json!({"nodeSelector": on_node_1, "tolerations": two_seconds}),
        ),
    )
    .await;
    create(
        &c,
        pod(
            "steadfast",
            json!({}),
            json!({"nodeSelector": on_node_1, "tolerations": forever}),
        ),
    )
    .await;
    wait_ready(&c, &["doomed", "steadfast"]).await;

    let out = rollwright(&c, &["nodes", "stop", "node-1"]).await;
    assert_eq!(out.trim(), "node-1: heartbeats stopped");
    // No lease renewal for the grace period: Unknown, as upstream's node lifecycle controller says.
    c.kubectl(&[
        "wait",
        "--for=condition=Ready=Unknown",
        "node/node-1",
        "--timeout=30s",
    ])
    .await;
    let row = c.kubectl(&["get", "node", "node-1", "--no-headers"]).await;
    assert_eq!(cols(&row)[1], "NotReady");
    let node = wait_node(&c, "node-1", "unreachable taint", |n| {
        has_taint(n, "node.kubernetes.io/unreachable", "NoExecute")
    })
    .await;
    assert!(has_taint(
        &node,
        "node.kubernetes.io/unreachable",
        "NoSchedule"
    ));
    let ready = node
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        ready.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    let describe = c.kubectl(&["describe", "node", "node-1"]).await;
    assert!(
        describe.contains("node.kubernetes.io/unreachable:NoExecute"),
        "{describe}"
    );

    // The pod tolerating it for 2s is evicted (marked for deletion; a dead kubelet cannot finish
    // it); the one tolerating it forever stays.
    let doomed = wait_pod(&c, "doomed", "evicted", |p| {
        p.metadata.deletion_timestamp.is_some()
    })
    .await;
    assert_eq!(doomed.spec.unwrap().node_name.as_deref(), Some("node-1"));
    common::wait_event(
        c.client().await,
        "default",
        Some("doomed"),
        "TaintManagerEviction",
        "Marking for deletion",
    )
    .await;
    let events = c
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=doomed,reason=TaintManagerEviction",
        ])
        .await;
    assert!(
        events.contains("Marking for deletion Pod default/doomed"),
        "{events}"
    );
    let pods: Api<Pod> = Api::namespaced(c.client().await, "default");
    assert!(
        pods.get("steadfast")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    // The scheduler keeps new pods off the tainted node.
    create(
        &c,
        pod("newcomer", json!({}), json!({"nodeSelector": on_node_1})),
    )
    .await;
    let message = unschedulable(&c, "newcomer").await;
    assert!(
        message.contains("1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }"),
        "{message}"
    );

    // Back again: heartbeats resume, Ready, untainted; the evicted pod finishes terminating.
    let out = rollwright(&c, &["nodes", "start", "node-1"]).await;
    assert_eq!(out.trim(), "node-1: heartbeats resumed");
    c.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "node/node-1",
        "--timeout=30s",
    ])
    .await;
    wait_node(&c, "node-1", "untainted", |n| {
        !has_taint(n, "node.kubernetes.io/unreachable", "NoExecute")
            && !has_taint(n, "node.kubernetes.io/unreachable", "NoSchedule")
    })
    .await;
    c.kubectl(&["wait", "--for=delete", "pod/doomed", "--timeout=30s"])
        .await;
    assert_eq!(bound_node(&c, "newcomer").await, "node-1");
    wait_ready(&c, &["steadfast", "newcomer"]).await;
    c.stop().await;
}

const PROFILE: &str = r#"
seed: 7
rules:
  - name: broken-images
    match: {image: "*broken*"}
    fault: imagePullFailure
  - name: crashy
    match: {labels: "app=crashy"}
    fault: {crashLoop: {after: 200ms, exitCode: 1}}
  - name: unready
    match: {labels: "app=unready"}
    fault: neverReady
  - name: slow
    match: {labels: "app=slow"}
    fault: {slowStart: {delay: 2s}}
  - name: failing
    match: {labels: "app=failing"}
    fault: {failAfter: {after: 300ms}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_of_the_profile_shows_in_kubectl_get_pods() {
    let profile = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(profile.path(), PROFILE).unwrap();
    let c = cluster(Components {
        profile: Some(profile.path().to_path_buf()),
        ..fast()
    })
    .await;
    let mut watch = c.kubectl_spawn(&["get", "pods", "-w"]);

    c.kubectl(&["run", "pull", "--image=registry.example/app:broken"])
        .await;
    c.kubectl(&["run", "crashy", "--image=nginx:1.27", "--labels=app=crashy"])
        .await;
    c.kubectl(&[
        "run",
        "once",
        "--image=nginx:1.27",
        "--labels=app=crashy",
        "--restart=Never",
    ])
    .await;
    c.kubectl(&[
        "run",
        "unready",
        "--image=nginx:1.27",
        "--labels=app=unready",
    ])
    .await;
    c.kubectl(&["run", "slow", "--image=nginx:1.27", "--labels=app=slow"])
        .await;
    c.kubectl(&[
        "run",
        "failing",
        "--image=nginx:1.27",
        "--labels=app=failing",
    ])
    .await;
    // Asked for by annotation rather than by a rule's match: a rule's name, and a bare fault kind.
    for (name, fault) in [("annotated", "unready"), ("by-kind", "imagePullFailure")] {
        let mut m = pod(name, json!({}), json!({}));
        m["metadata"]["annotations"] = json!({"rollwright.io/fault": fault});
        create(&c, m).await;
    }

    // Image pull failure: ErrImagePull, then ImagePullBackOff; Pending throughout.
    for status in ["ErrImagePull", "ImagePullBackOff"] {
        for pod in ["pull", "by-kind"] {
            saw(&mut watch, &format!("{pod} {status}"), |c| {
                c[0] == pod && c[1] == "0/1" && c[2] == status
            })
            .await;
        }
    }
    let pull = wait_pod(&c, "pull", "pending", |_| true).await;
    assert_eq!(pull.status.unwrap().phase.as_deref(), Some("Pending"));
    for (reason, message) in [
        ("Failed", "Failed to pull image"),
        ("Failed", "Error: ErrImagePull"),
        ("BackOff", "Back-off pulling image"),
        ("Failed", "Error: ImagePullBackOff"),
    ] {
        common::wait_event(c.client().await, "default", Some("pull"), reason, message).await;
    }
    let events = c
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=pull",
        ])
        .await;
    for want in [
        "Failed to pull image \"registry.example/app:broken\"",
        "Error: ErrImagePull",
        "Back-off pulling image \"registry.example/app:broken\"",
        "Error: ImagePullBackOff",
    ] {
        assert!(events.contains(want), "`{want}` missing:\n{events}");
    }

    // Crash loop: CrashLoopBackOff with RESTARTS climbing; with restartPolicy Never, Error/Failed.
    saw(
        &mut watch,
        "crashy in CrashLoopBackOff, restarted 3 times",
        |c| {
            c[0] == "crashy"
                && c[1] == "0/1"
                && c[2] == "CrashLoopBackOff"
                && c[3].parse::<u32>().is_ok_and(|n| n >= 3)
        },
    )
    .await;
    let describe = c.kubectl(&["describe", "pod", "crashy"]).await;
    assert!(
        describe.contains("Back-off restarting failed container crashy in pod crashy_default("),
        "{describe}"
    );
    assert!(
        describe.contains("Last State:     Terminated"),
        "{describe}"
    );
    saw(&mut watch, "once Error", |c| {
        c[0] == "once" && c[1] == "0/1" && c[2] == "Error" && c[3] == "0"
    })
    .await;
    let once = wait_pod(&c, "once", "Failed", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
    })
    .await;
    assert_eq!(
        once.status.unwrap().container_statuses.unwrap()[0].restart_count,
        0
    );

    // Never ready: Running, 0/1, and readiness probe failures.
    for pod in ["unready", "annotated"] {
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(c.client().await, "default");
        let unhealthy = wait_until(
            &events,
            &format!("Unhealthy event of {pod}"),
            DEADLINE,
            |e| {
                e.involved_object.name.as_deref() == Some(pod)
                    && e.reason.as_deref() == Some("Unhealthy")
            },
        )
        .await
        .unwrap();
        assert_eq!(unhealthy.type_.as_deref(), Some("Warning"));
        assert_eq!(
            unhealthy.message.as_deref(),
            Some("Readiness probe failed: HTTP probe failed with statuscode: 503")
        );
        saw(&mut watch, &format!("{pod} 0/1 Running"), |c| {
            c[0] == pod && c[1] == "0/1" && c[2] == "Running"
        })
        .await;
        let row = c.kubectl(&["get", "pod", pod, "--no-headers"]).await;
        assert_eq!(&cols(&row)[1..3], ["0/1", "Running"], "{row}");
        let p = wait_pod(&c, pod, "not ready", |_| true).await;
        assert_eq!(
            pod_condition(&p, "Ready").unwrap().reason.as_deref(),
            Some("ContainersNotReady")
        );
    }

    // Slow start: ContainerCreating first, Running later.
    let creating = saw(&mut watch, "slow ContainerCreating", |c| {
        c[0] == "slow" && c[2] == "ContainerCreating"
    })
    .await;
    let running = saw(&mut watch, "slow 1/1 Running", |c| {
        c[0] == "slow" && c[1] == "1/1" && c[2] == "Running"
    })
    .await;
    assert!(creating < running, "{:#?}", watch.seen);

    // Fail after a while: phase Failed, containers terminated with Error.
    saw(&mut watch, "failing Error", |c| {
        c[0] == "failing" && c[1] == "0/1" && c[2] == "Error"
    })
    .await;
    let failing = wait_pod(&c, "failing", "Failed", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
    })
    .await;
    assert_eq!(failing.status.unwrap().reason.as_deref(), Some("Error"));

    c.stop().await;
}
