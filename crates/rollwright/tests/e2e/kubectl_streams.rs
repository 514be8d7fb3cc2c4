//! `kubectl logs`, `kubectl exec` and `kubectl get componentstatuses` against a whole cluster
//! of simulated nodes (issue 37): a pod that runs `echo hello` logs `hello`; exec answers as a
//! kubelet does for a container without the program; componentstatuses prints upstream's columns
//! with its deprecation warning.

use crate::common;

use common::Cluster;
use nodesim::{NodeSim, distribution::Distribution};
use rollwright::components::Components;
use std::time::Duration;

async fn cluster() -> Cluster {
    Cluster::start_with(Components {
        nodes: Some(NodeSim {
            nodes: 1,
            heartbeat_interval: Duration::from_millis(500),
            start_delay: Distribution::Fixed(Duration::from_millis(100)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
            grace_scale: 0.0,
            ..Default::default()
        }),
        profile: None,
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_prints_what_the_container_echoed_and_exec_finds_no_shell() {
    let c = cluster().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  restartPolicy: Never
  containers: [{name: c, image: busybox:1.36, command: [sh, -c, "echo hello"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: server}
spec:
  containers: [{name: c, image: busybox:1.36, command: [sh, -c, "echo up; sleep 3600"]}]
"#,
    )
    .await;
    c.kubectl(&[
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "pod/hello",
        "--timeout=60s",
    ])
    .await;
    assert_eq!(c.kubectl(&["logs", "hello"]).await, "hello\n");
    c.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "pod/server",
        "--timeout=60s",
    ])
    .await;
    assert_eq!(c.kubectl(&["logs", "server", "-c", "c"]).await, "up\n");
    let stderr = c.kubectl_fails(&["exec", "server", "--", "sh"], None).await;
    assert!(
        stderr.contains("exec: \"sh\": executable file not found in $PATH"),
        "{stderr}"
    );
    let stderr = c
        .kubectl_fails(&["logs", "server", "-c", "nope"], None)
        .await;
    assert!(
        stderr.contains("container nope is not valid for pod server"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_componentstatuses_prints_upstreams_columns_and_warning() {
    let c = cluster().await;
    let out = c.kubectl_raw(&["get", "componentstatuses"], None).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: v1 ComponentStatus is deprecated in v1.19+"),
        "{stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "STATUS", "MESSAGE", "ERROR"], "{stdout}");
    let mut names: Vec<&str> = rows[1..].iter().map(|r| r[0]).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["controller-manager", "etcd-0", "scheduler"],
        "{stdout}"
    );
    assert!(
        rows[1..].iter().all(|r| r[1..] == ["Healthy", "ok"]),
        "{stdout}"
    );
    // The short name too.
    assert!(
        c.kubectl(&["get", "cs", "etcd-0", "--no-headers"])
            .await
            .starts_with("etcd-0")
    );
}
