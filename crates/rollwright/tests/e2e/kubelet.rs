//! Pods live as a kubelet runs them (issue 21), end to end with real kubectl against a whole
//! cluster: a readiness probe's initial delay holds `Ready=False` until it passes; a failing
//! liveness probe records upstream's `Unhealthy` and `Killing` events and raises `restartCount`;
//! a pod mounting a missing Secret stays `ContainerCreating` with `FailedMount` warnings until
//! the Secret is created; a `hostNetwork` pod's IP is its node's. Every wait is a watch (or
//! `kubectl wait`) with a deadline; times are compared only as the pod itself carries them.

use crate::common;

use common::{Cluster, DEADLINE};
use embedded::wait_until;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use nodesim::{NodeSim, distribution::Distribution};
use rollwright::components::Components;
use serde_json::Value;
use std::time::Duration;

/// A whole cluster of two quick simulated nodes whose kubelet timings (probe delays and
/// periods, back-offs) are upstream's own when `scale` is 1.
async fn cluster(scale: f64) -> Cluster {
    Cluster::start_with(Components {
        nodes: Some(NodeSim {
            nodes: 2,
            heartbeat_interval: Duration::from_millis(500),
            start_delay: Distribution::Fixed(Duration::from_millis(100)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
            grace_scale: 0.0,
            backoff_scale: scale,
            ..Default::default()
        }),
        profile: None,
        scheduler: Some(scheduler::SchedulerConfig {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
            ..Default::default()
        }),
        controllers: Some(Default::default()),
    })
    .await
}

fn seconds(t: &Value) -> i64 {
    let s = t.as_str().unwrap_or_else(|| panic!("a time: {t}"));
    s.parse::<jiff::Timestamp>().unwrap().as_second()
}

fn condition<'a>(pod: &'a Value, kind: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} condition: {pod}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readiness_probes_initial_delay_holds_ready_until_it_passes() {
    let c = cluster(1.0).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  containers:
  - name: app
    image: nginx:1.27
    readinessProbe:
      httpGet: {path: /, port: 80}
      initialDelaySeconds: 5
      periodSeconds: 1
"#,
    )
    .await;
    // Watched until the pod turns Ready. Whether the unready-but-running status is ever written
    // depends on timing: the simulated kubelet, like upstream's status manager, sends only the
    // newest status of a pod whose previous write is still in flight, so on a loaded machine it
    // can go from Pending straight to Ready. The promise is in the timestamps below.
    let mut watch = c.kubectl_spawn(&[
        "get",
        "pod",
        "slow",
        "-w",
        "-o",
        r#"jsonpath={.status.phase},{.status.containerStatuses[0].started},{.status.conditions[?(@.type=="Ready")].status}{"\n"}"#,
    ]);
    watch.until("ready", |l| l == "Running,true,True").await;
    let pod = c.kubectl_json(&["get", "pod", "slow", "-o", "json"]).await;
    let started = seconds(&pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]);
    let ready = condition(&pod, "Ready");
    assert_eq!(ready["status"], "True", "{pod}");
    // Both times are whole seconds of the same clock: a transition at or after startedAt + 5s
    // reads at least 5 more.
    let waited = seconds(&ready["lastTransitionTime"]) - started;
    assert!(
        waited >= 5,
        "Ready {waited}s after the container started, before the 5s initial delay: {pod}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_liveness_probe_kills_and_restarts_the_container() {
    let c = cluster(1.0).await;
    // No profile: the annotation asks for the fault with its defaults (fails for ever).
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: sick
  annotations: {rollwright.io/fault: livenessFailure}
spec:
  containers:
  - name: app
    image: nginx:1.27
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
      failureThreshold: 2
"#,
    )
    .await;
    let client = c.client().await;
    common::wait_event(
        client.clone(),
        "default",
        Some("sick"),
        "Unhealthy",
        "Liveness probe failed: HTTP probe failed with statuscode: 503",
    )
    .await;
    let killing = common::wait_event(
        client.clone(),
        "default",
        Some("sick"),
        "Killing",
        "Container app failed liveness probe, will be restarted",
    )
    .await;
    assert_eq!(
        killing.involved_object.field_path.as_deref(),
        Some("spec.containers{app}")
    );
    assert_eq!(killing.type_.as_deref(), Some("Normal"));
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    wait_until(&pods, "sick restarted", DEADLINE, |p| {
        p.metadata.name.as_deref() == Some("sick")
            && p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .is_some_and(|c| c.restart_count >= 1)
    })
    .await
    .unwrap();
    let pod = c.kubectl_json(&["get", "pod", "sick", "-o", "json"]).await;
    let status = &pod["status"]["containerStatuses"][0];
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 137, "{pod}");
    assert_eq!(
        status["lastState"]["terminated"]["reason"], "Error",
        "{pod}"
    );
    let events: Api<Event> = Api::default_namespaced(client);
    let unhealthy = wait_until(&events, "repeated Unhealthy", DEADLINE, |e| {
        e.involved_object.name.as_deref() == Some("sick")
            && e.reason.as_deref() == Some("Unhealthy")
            && e.count.unwrap_or(1) >= 2
    })
    .await
    .unwrap();
    assert_eq!(unhealthy.type_.as_deref(), Some("Warning"));
    let described = c.kubectl(&["describe", "pod", "sick"]).await;
    for want in [
        "Liveness:",
        "Last State:     Terminated",
        "Exit Code:    137",
        "Liveness probe failed: HTTP probe failed with statuscode: 503",
        "Container app failed liveness probe, will be restarted",
    ] {
        assert!(described.contains(want), "{want}:\n{described}");
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_holds_the_pod_in_container_creating_until_it_exists() {
    let c = cluster(1.0).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: v1
kind: Pod
metadata: {name: needs-secret}
spec:
  containers:
  - name: app
    image: nginx:1.27
    volumeMounts:
    - {name: creds, mountPath: /etc/creds}
    - {name: extra, mountPath: /etc/extra}
  volumes:
  - name: creds
    secret: {secretName: db-password}
  - name: extra
    configMap: {name: not-there, optional: true}
"#,
    )
    .await;
    let client = c.client().await;
    let message = r#"MountVolume.SetUp failed for volume "creds" : secret "db-password" not found"#;
    let failed = common::wait_event(
        client.clone(),
        "default",
        Some("needs-secret"),
        "FailedMount",
        message,
    )
    .await;
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert_eq!(failed.message.as_deref(), Some(message));
    // Tried again (500ms, then 1s later), the recorder folding the repeats into a count.
    let events: Api<Event> = Api::default_namespaced(client.clone());
    wait_until(&events, "a repeated FailedMount", DEADLINE, |e| {
        e.involved_object.name.as_deref() == Some("needs-secret")
            && e.reason.as_deref() == Some("FailedMount")
            && e.count.unwrap_or(1) >= 2
    })
    .await
    .unwrap();
    let table = c
        .kubectl(&["get", "pod", "needs-secret", "--no-headers"])
        .await;
    let cells: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(cells[1..3], ["0/1", "ContainerCreating"], "{table}");
    let pod = c
        .kubectl_json(&["get", "pod", "needs-secret", "-o", "json"])
        .await;
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating",
        "{pod}"
    );
    assert!(pod["status"].get("podIP").is_none(), "no sandbox: {pod}");
    c.kubectl(&[
        "create",
        "secret",
        "generic",
        "db-password",
        "--from-literal=password=hunter2",
    ])
    .await;
    c.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "pod/needs-secret",
        "--timeout=30s",
    ])
    .await;
    let pod = c
        .kubectl_json(&["get", "pod", "needs-secret", "-o", "json"])
        .await;
    assert_eq!(pod["status"]["phase"], "Running", "{pod}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_network_pods_ip_is_its_nodes() {
    let c = cluster(0.01).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: v1
kind: Pod
metadata: {name: exporter}
spec:
  hostNetwork: true
  containers:
  - name: app
    image: nginx:1.27
    ports: [{containerPort: 9100, hostPort: 9100}]
---
apiVersion: v1
kind: Pod
metadata: {name: ordinary}
spec:
  containers:
  - {name: app, image: nginx:1.27}
"#,
    )
    .await;
    c.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "pod/exporter",
        "pod/ordinary",
        "--timeout=30s",
    ])
    .await;
    let pod = c
        .kubectl_json(&["get", "pod", "exporter", "-o", "json"])
        .await;
    let node = pod["spec"]["nodeName"].as_str().unwrap();
    let internal = c
        .kubectl(&[
            "get",
            "node",
            node,
            "-o",
            r#"jsonpath={.status.addresses[?(@.type=="InternalIP")].address}"#,
        ])
        .await;
    let status = &pod["status"];
    assert_eq!(status["hostIP"], internal.as_str(), "{pod}");
    assert_eq!(status["podIP"], internal.as_str(), "{pod}");
    assert_eq!(status["podIPs"][0]["ip"], internal.as_str(), "{pod}");
    // `kubectl get -o wide` shows the node's address as the pod's.
    let wide = c
        .kubectl(&["get", "pod", "exporter", "-o", "wide", "--no-headers"])
        .await;
    assert_eq!(
        wide.split_whitespace().nth(5),
        Some(internal.as_str()),
        "{wide}"
    );
    // Others keep a pod-network IP.
    let ordinary = c
        .kubectl_json(&["get", "pod", "ordinary", "-o", "json"])
        .await;
    assert_ne!(ordinary["status"]["podIP"], ordinary["status"]["hostIP"]);
    c.stop().await;
}
