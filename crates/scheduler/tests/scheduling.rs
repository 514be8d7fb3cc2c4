//! End-to-end behaviour of the scheduler against an in-process API server.

// Tests may unwrap: a failure is the assertion.
#![allow(clippy::unwrap_used)]

use embedded::{Embedded, wait_until};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::{
    api::core::v1::{
        Affinity, Container, Event, Node, NodeAffinity, NodeCondition, NodeSelector,
        NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus, Pod, PodSpec,
        ResourceRequirements, Taint, Toleration,
    },
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::OwnerReference},
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use scheduler::SchedulerConfig;
use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

const WAIT: Duration = Duration::from_secs(20);

fn fast_config() -> SchedulerConfig {
    SchedulerConfig {
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        ..Default::default()
    }
}

async fn cluster() -> (Embedded, Client) {
    let e = Embedded::memory().await.unwrap();
    let client = e.client();
    tokio::spawn(scheduler::run(
        informer::Informers::new(client.clone()),
        fast_config(),
        std::future::pending::<()>(),
    ));
    (e, client)
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

#[derive(Default)]
struct NodeShape {
    cpu: &'static str,
    labels: &'static [(&'static str, &'static str)],
    taints: Vec<Taint>,
    unschedulable: bool,
}

fn node(name: &str, shape: NodeShape) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    let mut labels: BTreeMap<String, String> = shape
        .labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.insert("kubernetes.io/hostname".into(), name.into());
    n.metadata.labels = Some(labels);
    n.spec = Some(NodeSpec {
        taints: (!shape.taints.is_empty()).then_some(shape.taints),
        unschedulable: shape.unschedulable.then_some(true),
        ..Default::default()
    });
    let resources = quantities(&[
        ("cpu", if shape.cpu.is_empty() { "8" } else { shape.cpu }),
        ("memory", "32Gi"),
        ("pods", "110"),
    ]);
    n.status = Some(NodeStatus {
        capacity: Some(resources.clone()),
        allocatable: Some(resources),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    n
}

async fn add_node(client: &Client, name: &str, shape: NodeShape) {
    let nodes: Api<Node> = Api::all(client.clone());
    let n = node(name, shape);
    let status = serde_json::json!({"status": n.status});
    nodes.create(&PostParams::default(), &n).await.unwrap();
    // Whatever the server keeps of a created node's status, make sure it is there.
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: (!value.is_empty()).then(|| value.into()),
        effect: effect.into(),
        time_added: None,
    }
}

fn pod(name: &str, cpu: Option<&str>, edit: impl FnOnce(&mut PodSpec)) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    let mut spec = PodSpec {
        containers: vec![Container {
            name: "app".into(),
            image: Some("nginx".into()),
            resources: cpu.map(|c| ResourceRequirements {
                requests: Some(quantities(&[("cpu", c)])),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    edit(&mut spec);
    p.spec = Some(spec);
    p
}

async fn create(client: &Client, p: Pod) {
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
}

fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

async fn bound_to(client: &Client, name: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p = wait_until(&pods, &format!("{name} bound"), WAIT, |p| {
        p.metadata.name.as_deref() == Some(name) && node_of(p).is_some()
    })
    .await
    .unwrap();
    node_of(&p).unwrap_or_default().to_string()
}

fn unschedulable_message(p: &Pod) -> Option<&str> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?;
    (c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
        .then(|| c.message.as_deref().unwrap_or(""))
}

async fn unschedulable(client: &Client, name: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p = wait_until(&pods, &format!("{name} unschedulable"), WAIT, |p| {
        p.metadata.name.as_deref() == Some(name) && unschedulable_message(p).is_some()
    })
    .await
    .unwrap();
    assert_eq!(node_of(&p), None, "an unschedulable pod stays unbound");
    unschedulable_message(&p).unwrap_or_default().to_string()
}

async fn event(client: &Client, pod: &str, reason: &str) -> Event {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    wait_until(&events, &format!("{reason} event for {pod}"), WAIT, |e| {
        e.involved_object.name.as_deref() == Some(pod) && e.reason.as_deref() == Some(reason)
    })
    .await
    .unwrap()
}

/// Watches all pods until `done` holds for the whole set.
async fn wait_for_pods(
    client: &Client,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut(&HashMap<String, Pod>) -> bool,
) -> HashMap<String, Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut seen = HashMap::new();
    let mut stream = watcher(pods, watcher::Config::default())
        .applied_objects()
        .boxed();
    let result = tokio::time::timeout(timeout, async {
        while let Some(p) = stream.try_next().await.unwrap() {
            seen.insert(p.metadata.name.clone().unwrap_or_default(), p);
            if done(&seen) {
                return;
            }
        }
    })
    .await;
    assert!(result.is_ok(), "timed out waiting for {what}");
    seen
}

fn per_node(pods: &HashMap<String, Pod>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for p in pods.values() {
        if let Some(n) = node_of(p) {
            *counts.entry(n.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

fn name_in(node: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node.into()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_pod_is_bound_and_gets_the_scheduled_event() {
    let (_e, client) = cluster().await;
    add_node(&client, "node-0", NodeShape::default()).await;
    create(&client, pod("web", Some("100m"), |_| {})).await;
    assert_eq!(bound_to(&client, "web").await, "node-0");
    let e = event(&client, "web", "Scheduled").await;
    assert_eq!(
        e.message.as_deref(),
        Some("Successfully assigned default/web to node-0")
    );
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(
        e.source.and_then(|s| s.component).as_deref(),
        Some("default-scheduler")
    );
}

#[tokio::test]
async fn a_pod_that_fits_nowhere_waits_then_schedules_on_a_new_node() {
    let (_e, client) = cluster().await;
    add_node(
        &client,
        "node-0",
        NodeShape {
            cpu: "1",
            ..Default::default()
        },
    )
    .await;
    add_node(
        &client,
        "node-1",
        NodeShape {
            cpu: "1",
            ..Default::default()
        },
    )
    .await;
    create(&client, pod("big", Some("2"), |_| {})).await;
    let want = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod..";
    assert_eq!(unschedulable(&client, "big").await, want);
    let e = event(&client, "big", "FailedScheduling").await;
    assert_eq!(
        (e.type_.as_deref(), e.message.as_deref()),
        (Some("Warning"), Some(want))
    );
    add_node(
        &client,
        "node-big",
        NodeShape {
            cpu: "4",
            ..Default::default()
        },
    )
    .await;
    assert_eq!(bound_to(&client, "big").await, "node-big");
}

#[tokio::test]
async fn node_selector_and_affinity_choose_nodes() {
    let (_e, client) = cluster().await;
    add_node(
        &client,
        "a",
        NodeShape {
            labels: &[("zone", "a")],
            ..Default::default()
        },
    )
    .await;
    add_node(
        &client,
        "b",
        NodeShape {
            labels: &[("zone", "b"), ("disk", "ssd")],
            ..Default::default()
        },
    )
    .await;
    add_node(
        &client,
        "c",
        NodeShape {
            labels: &[("zone", "c")],
            ..Default::default()
        },
    )
    .await;
    create(
        &client,
        pod("by-selector", None, |s| {
            s.node_selector = Some([("disk".to_string(), "ssd".to_string())].into())
        }),
    )
    .await;
    create(
        &client,
        pod("by-expression", None, |s| {
            s.affinity = Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "zone".into(),
                                operator: "NotIn".into(),
                                values: Some(vec!["a".into(), "b".into()]),
                            }]),
                            ..Default::default()
                        }],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
        }),
    )
    .await;
    create(
        &client,
        pod("by-name-field", None, |s| s.affinity = Some(name_in("a"))),
    )
    .await;
    create(
        &client,
        pod("nowhere", None, |s| {
            s.node_selector = Some([("zone".to_string(), "z".to_string())].into())
        }),
    )
    .await;
    create(
        &client,
        pod("pinned-to-full", Some("100"), |s| {
            s.affinity = Some(name_in("b"))
        }),
    )
    .await;
    assert_eq!(bound_to(&client, "by-selector").await, "b");
    assert_eq!(bound_to(&client, "by-expression").await, "c");
    assert_eq!(bound_to(&client, "by-name-field").await, "a");
    assert_eq!(
        unschedulable(&client, "nowhere").await,
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    );
    assert_eq!(
        unschedulable(&client, "pinned-to-full").await,
        "0/3 nodes are available: 1 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
}

#[tokio::test]
async fn taints_and_tolerations_choose_nodes() {
    let (_e, client) = cluster().await;
    add_node(
        &client,
        "gpu",
        NodeShape {
            taints: vec![taint("dedicated", "gpu", "NoSchedule")],
            ..Default::default()
        },
    )
    .await;
    add_node(
        &client,
        "drain",
        NodeShape {
            taints: vec![taint("maintenance", "", "NoExecute")],
            ..Default::default()
        },
    )
    .await;
    let tol = |key: &str, op: &str, value: &str, effect: &str| {
        let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
        Toleration {
            key: s(key),
            operator: s(op),
            value: s(value),
            effect: s(effect),
            toleration_seconds: None,
        }
    };
    create(
        &client,
        pod("tolerates-gpu", None, |s| {
            s.tolerations = Some(vec![tol("dedicated", "Equal", "gpu", "NoSchedule")])
        }),
    )
    .await;
    create(
        &client,
        pod("tolerates-drain", None, |s| {
            s.tolerations = Some(vec![tol("maintenance", "Exists", "", "NoExecute")])
        }),
    )
    .await;
    create(
        &client,
        pod("tolerates-all", None, |s| {
            s.tolerations = Some(vec![tol("", "Exists", "", "")])
        }),
    )
    .await;
    create(&client, pod("plain", None, |_| {})).await;
    assert_eq!(bound_to(&client, "tolerates-gpu").await, "gpu");
    assert_eq!(bound_to(&client, "tolerates-drain").await, "drain");
    assert!(["gpu", "drain"].contains(&bound_to(&client, "tolerates-all").await.as_str()));
    assert_eq!(
        unschedulable(&client, "plain").await,
        "0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated taint {maintenance: }. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    );
    add_node(
        &client,
        "soft",
        NodeShape {
            taints: vec![taint("spot", "", "PreferNoSchedule")],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        bound_to(&client, "plain").await,
        "soft",
        "PreferNoSchedule does not filter"
    );
}

#[tokio::test]
async fn cordoned_nodes_get_no_new_pods() {
    let (_e, client) = cluster().await;
    add_node(
        &client,
        "cordoned",
        NodeShape {
            unschedulable: true,
            ..Default::default()
        },
    )
    .await;
    add_node(&client, "open", NodeShape::default()).await;
    for i in 0..4 {
        create(&client, pod(&format!("p{i}"), None, |_| {})).await;
    }
    let pods = wait_for_pods(&client, "4 bound pods", WAIT, |m| {
        m.values().filter(|p| node_of(p).is_some()).count() == 4
    })
    .await;
    assert_eq!(per_node(&pods), BTreeMap::from([("open".to_string(), 4)]));
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            "open",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    create(&client, pod("late", None, |_| {})).await;
    assert_eq!(
        unschedulable(&client, "late").await,
        "0/2 nodes are available: 2 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    );
    nodes
        .patch(
            "cordoned",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": false}})),
        )
        .await
        .unwrap();
    assert_eq!(
        bound_to(&client, "late").await,
        "cordoned",
        "uncordoning retries waiting pods"
    );
}

#[tokio::test]
async fn accounting_prevents_overcommit_and_freed_room_is_reused() {
    let (_e, client) = cluster().await;
    for i in 0..4 {
        add_node(
            &client,
            &format!("node-{i}"),
            NodeShape {
                cpu: "2",
                ..Default::default()
            },
        )
        .await;
    }
    stream::iter(0..10)
        .for_each_concurrent(10, |i| {
            let client = client.clone();
            async move { create(&client, pod(&format!("p{i}"), Some("1"), |_| {})).await }
        })
        .await;
    let pods = wait_for_pods(&client, "8 bound and 2 unschedulable", WAIT, |m| {
        m.len() == 10
            && m.values().filter(|p| node_of(p).is_some()).count() == 8
            && m.values()
                .filter(|p| unschedulable_message(p).is_some())
                .count()
                == 2
    })
    .await;
    assert!(
        per_node(&pods).values().all(|n| *n == 2),
        "{:?}",
        per_node(&pods)
    );
    let waiting: Vec<&Pod> = pods.values().filter(|p| node_of(p).is_none()).collect();
    for p in &waiting {
        assert_eq!(
            unschedulable_message(p),
            Some(
                "0/4 nodes are available: 4 Insufficient cpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.."
            )
        );
    }
    let (victim, freed) = pods
        .iter()
        .find_map(|(n, p)| node_of(p).map(|node| (n.clone(), node.to_string())))
        .unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.delete(
        &victim,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let waiting: Vec<String> = waiting
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let pods = wait_for_pods(&client, "a waiting pod takes the freed room", WAIT, |m| {
        m.len() == 9
            && waiting
                .iter()
                .any(|w| m.get(w).and_then(node_of) == Some(freed.as_str()))
    })
    .await;
    let moved: Vec<&String> = waiting
        .iter()
        .filter(|w| pods.get(*w).and_then(node_of).is_some())
        .collect();
    let on_freed = pods
        .iter()
        .filter(|(n, p)| **n != victim && node_of(p) == Some(freed.as_str()))
        .count();
    assert_eq!(on_freed, 2, "the freed node is full again, not overfull");
    assert_eq!(
        moved.len(),
        1,
        "exactly one waiting pod fits in the freed room"
    );
}

#[tokio::test]
async fn pods_of_one_replicaset_spread_over_equal_nodes() {
    let (_e, client) = cluster().await;
    // One node is much bigger: least-allocated alone would put every pod there.
    add_node(
        &client,
        "big",
        NodeShape {
            cpu: "64",
            ..Default::default()
        },
    )
    .await;
    add_node(&client, "n1", NodeShape::default()).await;
    add_node(&client, "n2", NodeShape::default()).await;
    for i in 0..9 {
        let mut p = pod(&format!("web-{i}"), Some("100m"), |_| {});
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        create(&client, p).await;
    }
    let pods = wait_for_pods(&client, "9 bound pods", WAIT, |m| {
        m.values().filter(|p| node_of(p).is_some()).count() == 9
    })
    .await;
    assert_eq!(per_node(&pods).into_values().collect::<Vec<_>>(), [3, 3, 3]);
}

/// Throughput: 10,000 pending pods over 5,000 nodes. Run with
/// `cargo test -p scheduler --release --test scheduling -- --ignored --nocapture bench_`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; run explicitly"]
async fn bench_binds_10000_pods_over_5000_nodes() {
    const NODES: usize = 5_000;
    const PODS: usize = 10_000;
    let e = Embedded::memory().await.unwrap();
    let client = e.client();
    let started = std::time::Instant::now();
    stream::iter(0..NODES)
        .for_each_concurrent(64, |i| {
            let client = client.clone();
            async move {
                let nodes: Api<Node> = Api::all(client);
                nodes
                    .create(
                        &PostParams::default(),
                        &node(&format!("node-{i}"), NodeShape::default()),
                    )
                    .await
                    .unwrap();
            }
        })
        .await;
    stream::iter(0..PODS)
        .for_each_concurrent(64, |i| {
            let client = client.clone();
            async move { create(&client, pod(&format!("p-{i}"), Some("100m"), |_| {})).await }
        })
        .await;
    eprintln!(
        "setup: {NODES} nodes and {PODS} pods in {:?}",
        started.elapsed()
    );
    let started = std::time::Instant::now();
    tokio::spawn(scheduler::run(
        informer::Informers::new(client.clone()),
        SchedulerConfig::default(),
        std::future::pending::<()>(),
    ));
    let pods = wait_for_pods(&client, "all pods bound", Duration::from_secs(600), |m| {
        m.len() == PODS && m.values().all(|p| node_of(p).is_some())
    })
    .await;
    let elapsed = started.elapsed();
    let max_per_node = per_node(&pods).into_values().max().unwrap_or(0);
    eprintln!(
        "bound {PODS} pods over {NODES} nodes in {elapsed:?}: {:.0} pods/s; at most {max_per_node} pods on a node",
        PODS as f64 / elapsed.as_secs_f64()
    );
    assert!(max_per_node <= 110);
}
