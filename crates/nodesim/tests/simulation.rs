//! End-to-end behaviour of the simulated kubelets against the in-process API server.

#![allow(clippy::unwrap_used)] // tests may unwrap

use embedded::{Embedded, wait_until};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Event, Node, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use nodesim::{NodeSim, Profile, bench::bind, distribution::Distribution, node::Pressure, ops};
use serde_json::json;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

struct Sim {
    client: Client,
    _server: Embedded,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn fast(nodes: usize) -> NodeSim {
    NodeSim {
        nodes,
        heartbeat_interval: Duration::from_millis(50),
        start_delay: Distribution::Fixed(Duration::from_millis(10)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(10)),
        grace_scale: 0.01,
        backoff_scale: 0.002,
        ..NodeSim::default()
    }
}

async fn start(cfg: NodeSim, profile: Profile) -> Sim {
    let server = Embedded::memory().await.unwrap();
    let client = server.client();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let c = client.clone();
    tokio::spawn(async move {
        nodesim::run(c, cfg, profile, async move {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    Sim {
        client,
        _server: server,
        _stop: tx,
    }
}

fn condition<'a>(
    conds: Option<&'a Vec<k8s_openapi::api::core::v1::PodCondition>>,
    kind: &str,
) -> Option<&'a str> {
    conds?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.as_str())
}

fn pod_ready(p: &Pod) -> bool {
    condition(
        p.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "Ready",
    ) == Some("True")
}

async fn create_bound(
    client: &Client,
    name: &str,
    node: &str,
    spec: serde_json::Value,
    annotations: serde_json::Value,
) -> Pod {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    bind(client, "default", name, node).await.unwrap();
    created
}

fn nginx() -> serde_json::Value {
    json!({"containers": [{"name": "app", "image": "nginx:1.27"}]})
}

async fn wait_pod(client: &Client, name: &str, what: &str, pred: impl Fn(&Pod) -> bool) -> Pod {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let name = name.to_string();
    wait_until(&pods, what, T, |p| p.name_any() == name && pred(p))
        .await
        .unwrap()
}

async fn wait_event(client: &Client, object: &str, reason: &str, message_part: &str) -> Event {
    let events: Api<Event> = Api::default_namespaced(client.clone());
    wait_until(&events, &format!("{reason} event on {object}"), T, |e| {
        e.involved_object.name.as_deref() == Some(object)
            && e.reason.as_deref() == Some(reason)
            && e.message
                .as_deref()
                .is_some_and(|m| m.contains(message_part))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn nodes_register_with_labels_capacity_and_conditions_and_leases_renew() {
    let sim = start(fast(3), Profile::default()).await;
    let nodes: Api<Node> = Api::all(sim.client.clone());
    let node = wait_until(&nodes, "node-2 Ready", T, |n| {
        n.name_any() == "node-2"
            && n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await
    .unwrap();
    let labels = node.labels();
    assert_eq!(labels["kubernetes.io/hostname"], "node-2");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone-c");
    assert_eq!(labels["rollwright.io/simulated"], "true");
    let status = node.status.unwrap();
    let cap = status.capacity.unwrap();
    assert_eq!(cap["cpu"].0, "8");
    assert_eq!(cap["memory"].0, "32Gi");
    assert_eq!(cap["pods"].0, "110");
    assert_eq!(status.allocatable.unwrap()["pods"].0, "110");
    let conds = status.conditions.unwrap();
    for (kind, want) in [
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
        ("Ready", "True"),
    ] {
        let c = conds.iter().find(|c| c.type_ == kind).unwrap();
        assert_eq!(c.status, want, "{kind}");
        assert!(c.last_transition_time.is_some() && c.last_heartbeat_time.is_some());
    }
    let info = status.node_info.unwrap();
    assert_eq!(info.kubelet_version, "v1.32.4");
    assert_eq!(info.operating_system, "linux");
    assert_eq!(info.architecture, "amd64");
    assert!(info.container_runtime_version.starts_with("containerd://"));
    let addrs = status.addresses.unwrap();
    assert!(
        addrs
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address.starts_with("10."))
    );
    assert!(
        addrs
            .iter()
            .any(|a| a.type_ == "Hostname" && a.address == "node-2")
    );

    let leases: Api<Lease> = Api::namespaced(sim.client.clone(), "kube-node-lease");
    let first = wait_until(&leases, "lease of node-0", T, |l| l.name_any() == "node-0")
        .await
        .unwrap();
    let spec = first.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("node-0"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    assert_eq!(first.owner_references()[0].kind, "Node");
    let renewed_at = spec.renew_time.unwrap();
    wait_until(&leases, "node-0 renews", T, |l| {
        l.name_any() == "node-0"
            && l.spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .is_some_and(|t| t.0 > renewed_at.0)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_bound_pod_runs_and_becomes_ready_with_events() {
    let sim = start(fast(2), Profile::default()).await;
    create_bound(&sim.client, "web", "node-1", nginx(), json!({})).await;
    let pod = wait_pod(&sim.client, "web", "web Ready", pod_ready).await;
    let status = pod.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let conds = status.conditions.unwrap();
    for kind in [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        let c = conds
            .iter()
            .find(|c| c.type_ == kind)
            .unwrap_or_else(|| panic!("{kind}"));
        assert_eq!(c.status, "True", "{kind}");
        assert!(c.last_transition_time.is_some(), "{kind}");
    }
    assert!(
        status.pod_ip.as_deref().unwrap().starts_with("10.64.1."),
        "from node-1's /24"
    );
    assert_eq!(status.host_ip.as_deref(), Some("10.0.0.3"));
    assert!(status.start_time.is_some());
    let cs = &status.container_statuses.unwrap()[0];
    assert_eq!(cs.name, "app");
    assert_eq!(cs.image, "docker.io/library/nginx:1.27");
    assert!(cs.image_id.starts_with("docker.io/library/nginx@sha256:"));
    assert!(
        cs.container_id
            .as_deref()
            .unwrap()
            .starts_with("containerd://")
    );
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
    assert_eq!(cs.restart_count, 0);
    assert!(
        cs.state
            .as_ref()
            .unwrap()
            .running
            .as_ref()
            .unwrap()
            .started_at
            .is_some()
    );

    wait_event(
        &sim.client,
        "web",
        "Pulling",
        "Pulling image \"nginx:1.27\"",
    )
    .await;
    wait_event(
        &sim.client,
        "web",
        "Pulled",
        "Successfully pulled image \"nginx:1.27\" in",
    )
    .await;
    wait_event(&sim.client, "web", "Created", "Created container: app").await;
    let started = wait_event(&sim.client, "web", "Started", "Started container app").await;
    assert_eq!(started.source.unwrap().host.as_deref(), Some("node-1"));
    assert_eq!(
        started.involved_object.field_path.as_deref(),
        Some("spec.containers{app}")
    );

    // A second pod of the same image on the same node finds it present.
    create_bound(&sim.client, "web2", "node-1", nginx(), json!({})).await;
    wait_event(
        &sim.client,
        "web2",
        "Pulled",
        "Container image \"nginx:1.27\" already present on machine",
    )
    .await;
}

#[tokio::test]
async fn init_containers_complete_before_containers_start() {
    let sim = start(fast(1), Profile::default()).await;
    let spec = json!({
        "initContainers": [{"name": "setup", "image": "busybox:1.36"}],
        "containers": [{"name": "app", "image": "nginx:1.27"}],
    });
    create_bound(&sim.client, "with-init", "node-0", spec, json!({})).await;
    let pod = wait_pod(&sim.client, "with-init", "with-init Ready", pod_ready).await;
    let status = pod.status.unwrap();
    let init = &status.init_container_statuses.unwrap()[0];
    let term = init.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (0, Some("Completed"))
    );
    let app = &status.container_statuses.unwrap()[0];
    let app_started = app
        .state
        .as_ref()
        .unwrap()
        .running
        .as_ref()
        .unwrap()
        .started_at
        .as_ref()
        .unwrap();
    assert!(term.finished_at.as_ref().unwrap().0 <= app_started.0);
}

const FAULTS: &str = r#"
seed: 1
rules:
  - name: broken
    match: {image: "*broken*"}
    fault: imagePullFailure
  - name: crash
    match: {labels: "never=match"}
    fault: {crashLoop: {after: 10ms, exitCode: 2}}
  - name: failing
    match: {namespace: nowhere}
    fault: {failAfter: {after: 20ms, reason: Evicted, message: "The node was low on resource: memory."}}
"#;

#[tokio::test]
async fn faults_show_up_as_upstream_statuses() {
    let sim = start(fast(2), Profile::from_yaml(FAULTS).unwrap()).await;
    let c = &sim.client;
    create_bound(
        c,
        "pull",
        "node-0",
        json!({"containers": [{"name": "app", "image": "nginx:broken"}]}),
        json!({}),
    )
    .await;
    create_bound(
        c,
        "crash",
        "node-0",
        nginx(),
        json!({"rollwright.io/fault": "crash"}),
    )
    .await;
    create_bound(
        c,
        "never",
        "node-1",
        nginx(),
        json!({"rollwright.io/fault": "neverReady"}),
    )
    .await;
    create_bound(
        c,
        "fail",
        "node-1",
        nginx(),
        json!({"rollwright.io/fault": "failing"}),
    )
    .await;
    let mut once = nginx();
    once["restartPolicy"] = json!("Never");
    create_bound(
        c,
        "once",
        "node-1",
        once,
        json!({"rollwright.io/fault": "crash"}),
    )
    .await;

    let waiting = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs[0].state.as_ref()?.waiting.as_ref()?.reason.clone())
    };
    let pull = wait_pod(c, "pull", "ImagePullBackOff", |p| {
        waiting(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(
        pull.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    wait_event(c, "pull", "Failed", "Error: ErrImagePull").await;
    wait_event(c, "pull", "Failed", "Failed to pull image \"nginx:broken\"").await;
    wait_event(c, "pull", "Failed", "Error: ImagePullBackOff").await;

    let crash = wait_pod(c, "crash", "CrashLoopBackOff with restarts", |p| {
        waiting(p).as_deref() == Some("CrashLoopBackOff")
            && p.status
                .as_ref()
                .unwrap()
                .container_statuses
                .as_ref()
                .unwrap()[0]
                .restart_count
                >= 2
    })
    .await;
    let status = crash.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let cs = &status.container_statuses.unwrap()[0];
    assert_eq!(
        cs.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        2
    );
    assert!(!cs.ready);
    wait_event(
        c,
        "crash",
        "BackOff",
        "Back-off restarting failed container app in pod crash_default(",
    )
    .await;

    wait_event(c, "never", "Unhealthy", "Readiness probe failed: ").await;
    let never = wait_pod(c, "never", "never running", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs[0].state.as_ref().unwrap().running.is_some())
    })
    .await;
    assert!(!pod_ready(&never));
    let ready = never
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [app]")
    );

    let fail = wait_pod(c, "fail", "fail Failed", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
    })
    .await;
    let status = fail.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert_eq!(
        status.message.as_deref(),
        Some("The node was low on resource: memory.")
    );

    let once = wait_pod(c, "once", "once Failed", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
    })
    .await;
    let cs = &once.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(cs.restart_count, 0, "restartPolicy Never");
    assert_eq!(
        cs.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        2
    );
}

#[tokio::test]
async fn graceful_deletion_kills_then_deletes() {
    let sim = start(fast(1), Profile::default()).await;
    let created = create_bound(&sim.client, "doomed", "node-0", nginx(), json!({})).await;
    wait_pod(&sim.client, "doomed", "doomed Ready", pod_ready).await;
    let pods: Api<Pod> = Api::default_namespaced(sim.client.clone());
    let after = pods
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        after
            .left()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
        "graceful: still there, terminating"
    );
    wait_event(&sim.client, "doomed", "Killing", "Stopping container app").await;
    let uid = created.uid().unwrap();
    tokio::time::timeout(
        T,
        await_condition(pods.clone(), "doomed", conditions::is_deleted(&uid)),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(pods.get_opt("doomed").await.unwrap().is_none());
}

#[tokio::test]
async fn an_image_change_restarts_the_container_in_place() {
    let sim = start(fast(1), Profile::default()).await;
    create_bound(&sim.client, "inplace", "node-0", nginx(), json!({})).await;
    wait_pod(&sim.client, "inplace", "Ready", pod_ready).await;
    let pods: Api<Pod> = Api::default_namespaced(sim.client.clone());
    let patch = json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}});
    pods.patch("inplace", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let pod = wait_pod(&sim.client, "inplace", "restarted and Ready", |p| {
        let cs = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        pod_ready(p)
            && cs.is_some_and(|cs| cs[0].restart_count == 1 && cs[0].image.ends_with("nginx:1.28"))
    })
    .await;
    let cs = &pod.status.unwrap().container_statuses.unwrap()[0];
    assert!(cs.image_id.starts_with("docker.io/library/nginx@sha256:"));
    assert!(cs.last_state.as_ref().unwrap().terminated.is_some());
    assert!(cs.ready);
    wait_event(
        &sim.client,
        "inplace",
        "Killing",
        "Container app definition changed, will be restarted",
    )
    .await;
}

#[tokio::test]
async fn stopping_heartbeats_stops_lease_renewals_until_started() {
    let sim = start(fast(3), Profile::default()).await;
    let c = &sim.client;
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-node-lease");
    let renew = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.renew_time.clone())
            .map(|t| t.0)
    };
    for n in ["node-0", "node-1"] {
        wait_until(&leases, "lease", T, |l| l.name_any() == n)
            .await
            .unwrap();
    }
    ops::stop(c, "node-0").await.unwrap();
    // Let renewals that were already queued for node-0 land: node-1 renews twice meanwhile.
    let mut last = None;
    for _ in 0..2 {
        let l = wait_until(&leases, "node-1 renewal", T, |l| {
            l.name_any() == "node-1" && renew(l) > last
        })
        .await
        .unwrap();
        last = renew(&l);
    }
    let frozen = leases.get("node-0").await.unwrap();
    for _ in 0..5 {
        let l = wait_until(&leases, "node-1 renewal", T, |l| {
            l.name_any() == "node-1" && renew(l) > last
        })
        .await
        .unwrap();
        last = renew(&l);
    }
    let still = leases.get("node-0").await.unwrap();
    assert_eq!(
        still.resource_version(),
        frozen.resource_version(),
        "a stopped node's lease is not renewed"
    );

    ops::start(c, "node-0").await.unwrap();
    let before = renew(&still);
    wait_until(&leases, "node-0 renews again", T, |l| {
        l.name_any() == "node-0" && renew(l) > before
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn nodes_added_at_run_time_are_simulated_and_report_pressure() {
    let sim = start(fast(1), Profile::default()).await;
    let c = &sim.client;
    let nodes: Api<Node> = Api::all(c.clone());
    wait_until(&nodes, "node-0", T, |n| n.name_any() == "node-0")
        .await
        .unwrap();
    let added = ops::add(c, &fast(0), 2).await.unwrap();
    let mut added_sorted = added.clone();
    added_sorted.sort();
    assert_eq!(
        added_sorted,
        vec!["node-1".to_string(), "node-2".to_string()]
    );
    let has = |n: &Node, kind: &str, status: &str| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == status))
    };
    wait_until(&nodes, "node-2 Ready", T, |n| {
        n.name_any() == "node-2" && has(n, "Ready", "True")
    })
    .await
    .unwrap();
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-node-lease");
    wait_until(&leases, "node-2's lease", T, |l| l.name_any() == "node-2")
        .await
        .unwrap();
    // A network plugin's condition, which the kubelet does not own: its reports merge
    // conditions by type, as upstream's kubelet patches, so this one stays.
    let network = json!({"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated", "message": "routes created"}]}});
    nodes
        .patch_status(
            "node-2",
            &PatchParams::default(),
            &Patch::Strategic(&network),
        )
        .await
        .unwrap();

    ops::set_pressure(
        c,
        "node-2",
        Pressure {
            memory: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let n = wait_until(&nodes, "memory pressure", T, |n| {
        n.name_any() == "node-2" && has(n, "MemoryPressure", "True")
    })
    .await
    .unwrap();
    assert!(has(&n, "DiskPressure", "False") && has(&n, "Ready", "True"));
    assert!(has(&n, "NetworkUnavailable", "False"), "{:?}", n.status);
    let info = n.status.as_ref().and_then(|s| s.node_info.as_ref());
    assert!(
        info.is_some_and(|i| !i.kubelet_version.is_empty()),
        "{info:?}"
    );
    ops::set_pressure(c, "node-2", Pressure::default())
        .await
        .unwrap();
    wait_until(&nodes, "pressure gone", T, |n| {
        n.name_any() == "node-2" && has(n, "MemoryPressure", "False")
    })
    .await
    .unwrap();

    ops::remove(c, "node-1").await.unwrap();
    assert!(nodes.get_opt("node-1").await.unwrap().is_none());
    assert!(leases.get_opt("node-1").await.unwrap().is_none());
}

/// The scale measurement: `cargo test -p nodesim --release -- --ignored --nocapture scale`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn scale() {
    let server = Embedded::memory().await.unwrap();
    let nodes = std::env::var("NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let pods = std::env::var("PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let events = std::env::var("EVENTS").map(|v| v != "0").unwrap_or(true);
    let report = nodesim::bench::run(server.client(), nodes, pods, events)
        .await
        .unwrap();
    println!("{report}");
}

#[tokio::test]
async fn a_stopped_node_reports_nothing_about_its_pods_until_started() {
    let sim = start(fast(2), Profile::default()).await;
    let c = &sim.client;
    let nodes: Api<Node> = Api::all(c.clone());
    wait_until(&nodes, "node-1", T, |n| n.name_any() == "node-1")
        .await
        .unwrap();
    ops::stop(c, "node-0").await.unwrap();
    // The simulation has seen the stop once node-1 has renewed twice since.
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-node-lease");
    let renew = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.renew_time.clone())
            .map(|t| t.0)
    };
    let mut last = None;
    for _ in 0..2 {
        let l = wait_until(&leases, "node-1 renewal", T, |l| {
            l.name_any() == "node-1" && renew(l) > last
        })
        .await
        .unwrap();
        last = renew(&l);
    }
    create_bound(c, "on-dead", "node-0", nginx(), json!({})).await;
    create_bound(c, "on-live", "node-1", nginx(), json!({})).await;
    wait_pod(c, "on-live", "on-live Ready", pod_ready).await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let dead = pods.get("on-dead").await.unwrap();
    assert!(
        dead.status.and_then(|s| s.container_statuses).is_none(),
        "a dead kubelet posts no pod status"
    );
    ops::start(c, "node-0").await.unwrap();
    wait_pod(
        c,
        "on-dead",
        "on-dead Ready once the kubelet is back",
        pod_ready,
    )
    .await;
}

/// Waits for `n` more renewals of `node`'s lease: a clock that the simulation's own loop drives,
/// so once it ticks the simulation has handled what was sent before.
async fn renewals(client: &Client, node: &str, n: usize) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renew = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.renew_time.clone())
            .map(|t| t.0)
    };
    let mut last = leases.get_opt(node).await.unwrap().and_then(|l| renew(&l));
    for _ in 0..n {
        let l = wait_until(&leases, &format!("{node} renewal"), T, |l| {
            l.name_any() == node && renew(l) > last
        })
        .await
        .unwrap();
        last = renew(&l);
    }
}

/// What the node lifecycle controller writes for a pod on a silent node: `Ready` False as of
/// now, every other condition and `Ready`'s reason left as they are.
async fn mark_not_ready(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let patch = json!({"status": {"conditions": [{
        "type": "Ready", "status": "False",
        "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
    }]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
}

fn not_ready(p: &Pod) -> bool {
    condition(
        p.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "Ready",
    ) == Some("False")
}

async fn start_counted(cfg: NodeSim) -> (Sim, std::sync::Arc<nodesim::Stats>) {
    let server = Embedded::memory().await.unwrap();
    let client = server.client();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let stats = std::sync::Arc::new(nodesim::Stats::default());
    let (c, s) = (client.clone(), stats.clone());
    tokio::spawn(async move {
        nodesim::run_with_stats(
            c,
            cfg,
            Profile::default(),
            async move {
                let _ = rx.await;
            },
            s,
        )
        .await
        .unwrap();
    });
    let sim = Sim {
        client,
        _server: server,
        _stop: tx,
    };
    (sim, stats)
}

#[tokio::test]
async fn a_kubelet_that_comes_back_reposts_its_pods_over_the_controllers_not_ready() {
    let sim = start(fast(2), Profile::default()).await;
    let c = &sim.client;
    let nodes: Api<Node> = Api::all(c.clone());
    wait_until(&nodes, "node-1", T, |n| n.name_any() == "node-1")
        .await
        .unwrap();
    create_bound(c, "p", "node-0", nginx(), json!({})).await;
    wait_pod(c, "p", "p Ready", pod_ready).await;
    ops::stop(c, "node-0").await.unwrap();
    renewals(c, "node-1", 2).await;

    mark_not_ready(c, "p").await;
    // A dead kubelet does not argue.
    renewals(c, "node-1", 3).await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    assert!(not_ready(&pods.get("p").await.unwrap()));

    ops::start(c, "node-0").await.unwrap();
    let back = wait_pod(c, "p", "p Ready once the kubelet is back", pod_ready).await;
    let conditions = back.status.unwrap().conditions.unwrap();
    for kind in [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "PodScheduled",
    ] {
        assert_eq!(
            condition(Some(&conditions), kind),
            Some("True"),
            "{kind} in {conditions:?}"
        );
    }
}

#[tokio::test]
async fn someone_elses_not_ready_on_a_running_node_is_written_back_once_per_interval() {
    let (sim, stats) = start_counted(NodeSim {
        status_resync_interval: Duration::from_secs(3600),
        ..fast(1)
    })
    .await;
    let c = &sim.client;
    create_bound(c, "p", "node-0", nginx(), json!({})).await;
    wait_pod(c, "p", "p Ready", pod_ready).await;

    mark_not_ready(c, "p").await;
    wait_pod(c, "p", "p Ready again", pod_ready).await;
    assert_eq!(nodesim::Stats::get(&stats.status_resyncs), 1);

    // A writer that insists: written back no sooner than the interval after the last time.
    mark_not_ready(c, "p").await;
    renewals(c, "node-0", 3).await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    assert!(not_ready(&pods.get("p").await.unwrap()));
    assert_eq!(nodesim::Stats::get(&stats.status_resyncs), 1);
}

#[tokio::test]
async fn a_deferred_write_back_lands_after_the_interval() {
    let (sim, stats) = start_counted(NodeSim {
        status_resync_interval: Duration::from_millis(200),
        ..fast(1)
    })
    .await;
    let c = &sim.client;
    create_bound(c, "p", "node-0", nginx(), json!({})).await;
    wait_pod(c, "p", "p Ready", pod_ready).await;
    for round in 1..=2 {
        mark_not_ready(c, "p").await;
        wait_pod(c, "p", &format!("p Ready again ({round})"), pod_ready).await;
    }
    assert_eq!(nodesim::Stats::get(&stats.status_resyncs), 2);
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn terminated(p: &Pod) -> k8s_openapi::api::core::v1::ContainerStateTerminated {
    p.status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap()
}

fn job_container(command: serde_json::Value) -> serde_json::Value {
    json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36", "command": command}]})
}

/// Run-to-completion containers run as their command says: `sleep 300` keeps running past the
/// point where a container whose command says nothing (the profile's 3 seconds) has finished,
/// `exit 1` fails with code 1, `sleep 1; exit 0` succeeds after a second.
#[tokio::test]
async fn job_containers_honour_their_commands() {
    let sim = start(fast(1), Profile::default()).await;
    let c = &sim.client;
    create_bound(
        c,
        "sleeper",
        "node-0",
        job_container(json!(["sleep", "300"])),
        json!({}),
    )
    .await;
    wait_pod(c, "sleeper", "sleeper Running", |p| phase(p) == "Running").await;
    // Started after the sleeper, with the same default run time the sleeper had before.
    let mut plain = job_container(json!(null));
    plain["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("command");
    create_bound(c, "plain", "node-0", plain, json!({})).await;
    create_bound(
        c,
        "fails",
        "node-0",
        job_container(json!(["/bin/sh", "-c", "exit 1"])),
        json!({}),
    )
    .await;
    create_bound(
        c,
        "succeeds",
        "node-0",
        job_container(json!(["/bin/sh", "-c", "sleep 1; exit 0"])),
        json!({}),
    )
    .await;

    let failed = wait_pod(c, "fails", "fails Failed", |p| phase(p) == "Failed").await;
    let t = terminated(&failed);
    assert_eq!((t.exit_code, t.reason.as_deref()), (1, Some("Error")));

    let done = wait_pod(c, "succeeds", "succeeds Succeeded", |p| {
        phase(p) == "Succeeded"
    })
    .await;
    let t = terminated(&done);
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    let ran = t.finished_at.unwrap().0.as_second() - t.started_at.unwrap().0.as_second();
    assert!(ran >= 1, "ran {ran}s");

    wait_pod(c, "plain", "plain Succeeded", |p| phase(p) == "Succeeded").await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let sleeper = pods.get("sleeper").await.unwrap();
    assert_eq!(phase(&sleeper), "Running", "sleep 300 still runs");
    let cs = &sleeper.status.unwrap().container_statuses.unwrap()[0];
    assert!(cs.state.as_ref().unwrap().running.is_some());
}

/// A CronJob of upstream's e2e fixture (Jobs of one `sleep 300` pod, `restartPolicy:
/// OnFailure`) every minute on a clock where a minute passes in 4 seconds, with the CronJob and
/// Job controllers: the pods run on, so with `Replace` exactly one Job is left undeleted at any
/// moment (the running one is deleted before the next starts) and with `Allow` several are active
/// at once. Had the pods ended after the profile's 3 seconds, each Job would finish within its
/// minute: `Allow` would never have two active, and `Replace` would leave the finished Job
/// beside the next (upstream's spec counts every Job not being deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjobs_of_sleeping_jobs_replace_and_overlap() {
    use futures::StreamExt;
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    use kube::runtime::{WatchStreamExt, watcher};
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::{Arc, Mutex};

    let sim = start(fast(1), Profile::default()).await;
    let c = &sim.client;
    let mut settings = controllers::Settings {
        enabled: controllers::Selection::only(["cronjob", "job"]),
        ..Default::default()
    };
    settings.cronjob.clock = controllers::cronjob::Clock::scaled(15.0);
    let informers = informer::Informers::new(c.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());

    // Every moment (Job watch event) at which more than one "replace" Job was not being deleted.
    let too_many: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let (tm, sn) = (Arc::clone(&too_many), Arc::clone(&seen));
    let jobs: Api<Job> = Api::default_namespaced(c.clone());
    tokio::spawn(async move {
        let mut alive: BTreeMap<String, bool> = BTreeMap::new();
        let mut events = watcher(jobs, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(Ok(ev)) = events.next().await {
            match ev {
                watcher::Event::Apply(j) | watcher::Event::InitApply(j) => {
                    if j.name_any().starts_with("replace-") {
                        alive.insert(j.name_any(), j.metadata.deletion_timestamp.is_none());
                    }
                }
                watcher::Event::Delete(j) => {
                    alive.remove(&j.name_any());
                }
                _ => continue,
            }
            sn.lock().unwrap().extend(alive.keys().cloned());
            let undeleted: Vec<String> = alive
                .iter()
                .filter(|(_, a)| **a)
                .map(|(n, _)| n.clone())
                .collect();
            if undeleted.len() > 1 {
                tm.lock().unwrap().push(undeleted);
            }
        }
    });

    let cron_jobs: Api<CronJob> = Api::default_namespaced(c.clone());
    for (name, policy) in [("replace", "Replace"), ("allow", "Allow")] {
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "schedule": "*/1 * * * ?",
                "concurrencyPolicy": policy,
                "jobTemplate": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 1,
                    "template": {"spec": {
                        "restartPolicy": "OnFailure",
                        "nodeName": "node-0",
                        "containers": [{"name": "c", "image": "busybox:1.36",
                                        "command": ["sleep", "300"]}]
                    }}}}
            }
        }))
        .unwrap();
        cron_jobs.create(&PostParams::default(), &cj).await.unwrap();
    }
    let active = |cj: &CronJob| -> Vec<String> {
        cj.status
            .as_ref()
            .and_then(|s| s.active.as_ref())
            .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
            .unwrap_or_default()
    };
    let long = Duration::from_secs(60);
    let allow = wait_until(&cron_jobs, "allow: two jobs active", long, |cj| {
        cj.name_any() == "allow" && active(cj).len() >= 2
    })
    .await
    .unwrap();
    let jobs: Api<Job> = Api::default_namespaced(c.clone());
    for name in active(&allow) {
        let job = jobs.get(&name).await.unwrap();
        let status = job.status.unwrap_or_default();
        assert!(
            status.conditions.unwrap_or_default().is_empty(),
            "{name} runs"
        );
    }
    let s = Arc::clone(&seen);
    let replace = wait_until(&cron_jobs, "replace: the third job active", long, |cj| {
        let seen = s.lock().unwrap();
        cj.name_any() == "replace" && seen.len() >= 3 && active(cj).len() == 1
    })
    .await
    .unwrap();
    // The active Job is the one left (unless the next minute came meanwhile).
    let left: Vec<String> = jobs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|j| j.name_any().starts_with("replace-"))
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .map(|j| j.name_any())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0] >= active(&replace)[0],
        "{left:?} {:?}",
        active(&replace)
    );
    assert!(
        too_many.lock().unwrap().is_empty(),
        "more than one replace job undeleted: {:?}",
        too_many.lock().unwrap()
    );
}

/// The kubelet's status writes keep the conditions it does not own: an evicted Job pod ends
/// `Failed` with the API server's `DisruptionTarget` condition still there, which a Job's pod
/// failure policy (`onPodConditions: DisruptionTarget`) relies on (upstream's spec "Using a pod
/// failure policy to not count some failures towards the backoffLimit").
#[tokio::test]
async fn an_evicted_pod_keeps_its_disruption_target_condition() {
    use kube::api::EvictParams;
    let sim = start(fast(1), Profile::default()).await;
    let c = &sim.client;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let mut spec = job_container(json!(["sleep", "1000000"]));
    spec["terminationGracePeriodSeconds"] = json!(1);
    let pod: Pod = serde_json::from_value(json!({
        // The finalizer keeps the pod around after the kubelet's final status and delete.
        "metadata": {"name": "evicted", "finalizers": ["rollwright.io/test-keep"]},
        "spec": spec,
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    bind(c, "default", "evicted", "node-0").await.unwrap();
    wait_pod(c, "evicted", "evicted Running", |p| phase(p) == "Running").await;
    pods.evict("evicted", &EvictParams::default())
        .await
        .unwrap();
    let done = wait_pod(c, "evicted", "evicted Failed", |p| phase(p) == "Failed").await;
    let conds = done.status.as_ref().unwrap().conditions.clone().unwrap();
    let target = conds
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap_or_else(|| panic!("DisruptionTarget kept: {conds:?}"));
    assert_eq!(target.status, "True");
    assert_eq!(target.reason.as_deref(), Some("EvictionByEvictionAPI"));
    assert_eq!(terminated(&done).exit_code, 137);
    let unblock = json!({"metadata": {"finalizers": null}});
    pods.patch("evicted", &PatchParams::default(), &Patch::Merge(&unblock))
        .await
        .unwrap();
}

/// The simulated kubelet asks for each projected ServiceAccount token of a pod it starts, bound
/// to the pod: the token authenticates as the pod's ServiceAccount until the pod is deleted.
#[tokio::test]
async fn a_started_pods_projected_token_is_valid_until_the_pod_is_deleted() {
    use k8s_openapi::api::{
        authentication::v1::{TokenReview, TokenReviewSpec},
        core::v1::ServiceAccount,
    };
    let key = std::sync::Arc::new(satoken::Key::generate().unwrap());
    let server = apiserver::ApiServer::start(
        std::sync::Arc::new(store::memory::MemoryStore::new()),
        apiserver::ServerOptions {
            service_account_key: Some(key),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let c = embedded::client_for(&server);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let stats = std::sync::Arc::new(nodesim::Stats::default());
    let (client, s) = (c.clone(), stats.clone());
    tokio::spawn(async move {
        nodesim::run_with_stats(
            client,
            fast(1),
            Profile::default(),
            async move {
                let _ = rx.await;
            },
            s,
        )
        .await
        .unwrap();
    });
    let _stop = tx;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    Api::<ServiceAccount>::default_namespaced(c.clone())
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    let spec = json!({
        "serviceAccountName": "robot",
        "containers": [{"name": "app", "image": "nginx:1.27"}],
        "volumes": [{"name": "token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
    });
    let pod = create_bound(&c, "p", "node-0", spec, json!({})).await;
    let uid = pod.uid().unwrap();
    let held = tokio::time::timeout(
        T,
        stats
            .tokens
            .wait_for(&uid, |t| t.contains_key("token/token")),
    )
    .await
    .expect("the kubelet holds the pod's token");
    let token = held["token/token"].clone();

    let reviews: Api<TokenReview> = Api::all(c.clone());
    let review = |token: String| {
        let reviews = reviews.clone();
        async move {
            let r = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token),
                    audiences: None,
                },
                ..Default::default()
            };
            reviews
                .create(&PostParams::default(), &r)
                .await
                .unwrap()
                .status
                .unwrap()
        }
    };
    let status = review(token.clone()).await;
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    let user = status.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:robot")
    );
    assert_eq!(
        user.extra.unwrap()["authentication.kubernetes.io/pod-uid"],
        vec![uid.clone()]
    );

    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(T, await_condition(pods, "p", conditions::is_deleted(&uid)))
        .await
        .expect("p deleted")
        .unwrap();
    let status = review(token).await;
    assert_eq!(status.authenticated, None, "{status:?}");
    assert_eq!(
        status.error.as_deref(),
        Some("service account token has been invalidated")
    );
    tokio::time::timeout(T, stats.tokens.wait_for(&uid, |t| t.is_empty()))
        .await
        .expect("the kubelet drops a deleted pod's tokens");
}
