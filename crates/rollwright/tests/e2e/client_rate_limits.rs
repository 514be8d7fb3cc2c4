//! The client-side rate limit of `rollwright controllers` as a process against a cluster: its
//! ReplicaSet controller creates pods no faster than `--kube-api-qps` allows, shows the waits in
//! `/metrics` (with its work queue's) and logs client-go's "Waited for ... due to client-side throttling"; and the
//! scheduler's status endpoint answers.

use crate::common::{self, Cluster};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn curl(port: u16, path: &str) -> String {
    let url = format!("https://127.0.0.1:{port}{path}");
    let out = tokio::process::Command::new("curl")
        .args(["-sk", "--max-time", "10", &url])
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of the first series of `metrics` whose line starts with `series`.
fn value(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicaset_controller_creates_pods_no_faster_than_its_client_limit() {
    // The API server alone: the only controller is the process below.
    let c = Cluster::start().await;
    let (port, scheduler_port) = (free_port(), free_port());
    let log = c.dir.path().join("controllers.log");
    let _controllers = tokio::process::Command::new(common::ROLLWRIGHT)
        .args([
            "controllers",
            "--controllers=replicaset",
            "--leader-elect=false",
            // 10 requests a second, one at once: 31 creates take at least 3 s.
            "--kube-api-qps=10",
            "--kube-api-burst=1",
            &format!("--secure-port={port}"),
            "--kubeconfig",
        ])
        .arg(c.kubeconfig())
        .env("RUST_LOG", "info,restclient=debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let _scheduler = tokio::process::Command::new(common::ROLLWRIGHT)
        .args([
            "scheduler",
            "--leader-elect=false",
            &format!("--secure-port={scheduler_port}"),
            "--kubeconfig",
        ])
        .arg(c.kubeconfig())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Ready once it serves.
    let deadline = Instant::now() + common::DEADLINE;
    while curl(port, "/readyz").await != "ok" {
        assert!(
            Instant::now() < deadline,
            "the status endpoint never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let replicas = 31;
    let rs = format!(
        r#"apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: paced
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: paced
  template:
    metadata:
      labels:
        app: paced
    spec:
      containers:
      - name: app
        image: nginx:1.27
"#
    );
    let started = Instant::now();
    c.kubectl_stdin(&["apply", "-f", "-"], &rs).await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(c.admin_client(), "default");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = pods
            .list(&kube::api::ListParams::default().labels("app=paced"))
            .await
            .unwrap()
            .items
            .len();
        if n == replicas {
            break;
        }
        assert!(Instant::now() < deadline, "{n} of {replicas} pods");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    // One token at once, then one every 100 ms: the 31st create cannot go before 3 s.
    assert!(
        took >= Duration::from_millis(3000),
        "{replicas} pods in {took:?}"
    );

    let metrics = curl(port, "/metrics").await;
    let waits = value(
        &metrics,
        "rest_client_rate_limiter_duration_seconds_sum{verb=\"POST\"",
    );
    assert!(waits >= 2.5, "POSTs waited {waits} s:\n{metrics}");
    // The controller's work queue reports under its name, as upstream's.
    assert!(
        value(&metrics, "workqueue_adds_total{name=\"replicaset\"}") >= 1.0,
        "{metrics}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("due to client-side throttling, not priority and fairness, request: POST:"),
        "{logged}"
    );

    // The scheduler serves its own endpoint.
    assert_eq!(curl(scheduler_port, "/healthz").await, "ok");
    assert!(
        curl(scheduler_port, "/metrics")
            .await
            .contains("rest_client_requests_total")
    );
    c.stop().await;
}
