//! The controllers and the scheduler as processes of their own against a separately started API
//! server, as they run beside a real cluster's control plane: rollouts of a Deployment and a
//! DaemonSet; and two controller processes on one cluster, the leader killed mid-rollout, the
//! other taking over and finishing the rollout within its invariants.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use common::{
    KUBECTL,
    process::{client, spawn_apiserver, spawn_part},
};
use controllers::invariants::{InvariantWatcher, Rule};
use k8s_openapi::api::{apps::v1::ReplicaSet, coordination::v1::Lease};
use kube::Api;
use serde_json::json;
use std::{path::Path, time::Duration};

/// Runs kubectl against the cluster whose kubeconfig is `dir/kubeconfig`, expecting success.
async fn kubectl(dir: &Path, args: &[&str], stdin: Option<String>) -> String {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(KUBECTL)
        .args(args)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("HOME", dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(input) = stdin {
        pipe.write_all(input.as_bytes()).await.unwrap();
    }
    drop(pipe);
    let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("kubectl finishes")
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The holder of `kube-system/NAME` once there is one.
async fn holder(leases: &Api<Lease>, name: &str) -> Lease {
    embedded::wait_until(leases, "a leader", Duration::from_secs(60), |l: &Lease| {
        l.metadata.name.as_deref() == Some(name)
            && l.spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                .is_some_and(|h| !h.is_empty())
    })
    .await
    .unwrap()
}

fn holder_pid(lease: &Lease) -> u32 {
    let identity = lease
        .spec
        .as_ref()
        .unwrap()
        .holder_identity
        .clone()
        .unwrap();
    identity.rsplit('_').next().unwrap().parse().unwrap()
}

fn daemonset(image: &str) -> String {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "labels": {"app": "agent"}},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": image}]},
            },
        },
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_scheduler_and_sharded_nodes_as_processes_roll_out_a_deployment_and_a_daemonset()
 {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let _apiserver = spawn_apiserver(d, &[]).await;
    let kubeconfig = d.join("kubeconfig");
    // Two simulators split the nodes between them by name, as several `rollwright nodes` would
    // share a large cluster; each shard must own some of the four for the test to mean anything.
    let shards: Vec<nodesim::Shard> = ["0/2", "1/2"].iter().map(|s| s.parse().unwrap()).collect();
    for shard in &shards {
        assert!((0..4).any(|i| shard.owns(&format!("node-{i}"))), "{shard}");
    }
    let _nodes: Vec<_> = shards
        .iter()
        .map(|shard| {
            let shard = shard.to_string();
            spawn_part(
                &["nodes", "--count", "4", "--shard", &shard],
                &kubeconfig,
                None,
            )
        })
        .collect();
    let scheduler = spawn_part(&["scheduler", "--secure-port=0"], &kubeconfig, None);
    let controllers = spawn_part(&["controllers", "--secure-port=0"], &kubeconfig, None);

    kubectl(
        d,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1",
            "--replicas=3",
        ],
        None,
    )
    .await;
    kubectl(
        d,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
        None,
    )
    .await;
    kubectl(
        d,
        &["set", "image", "deployment/web", "nginx=nginx:2"],
        None,
    )
    .await;
    kubectl(
        d,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
        None,
    )
    .await;

    kubectl(d, &["apply", "-f", "-"], Some(daemonset("agent:1"))).await;
    kubectl(
        d,
        &["rollout", "status", "daemonset/agent", "--timeout=120s"],
        None,
    )
    .await;
    kubectl(
        d,
        &["set", "image", "daemonset/agent", "agent=agent:2"],
        None,
    )
    .await;
    kubectl(
        d,
        &["rollout", "status", "daemonset/agent", "--timeout=120s"],
        None,
    )
    .await;
    let pods = kubectl(
        d,
        &[
            "get",
            "pods",
            "-l",
            "app=agent",
            "-o",
            "jsonpath={.items[*].spec.containers[0].image}",
        ],
        None,
    )
    .await;
    // A daemon pod on each of the four nodes ran and became ready, whichever shard drives it.
    assert_eq!(
        pods.split_whitespace().filter(|i| *i == "agent:2").count(),
        4,
        "{pods}"
    );

    // Each process took its Lease.
    let leases: Api<Lease> = Api::namespaced(client(d).await, "kube-system");
    let lease = holder(&leases, "rollwright-controllers").await;
    assert_eq!(Some(holder_pid(&lease)), controllers.id());
    let lease = holder(&leases, "rollwright-scheduler").await;
    assert_eq!(Some(holder_pid(&lease)), scheduler.id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leading_controllers_mid_rollout_hands_over_within_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let _apiserver = spawn_apiserver(d, &[]).await;
    let kubeconfig = d.join("kubeconfig");
    let _nodes = spawn_part(&["nodes", "--count", "3"], &kubeconfig, None);
    let _scheduler = spawn_part(&["scheduler", "--secure-port=0"], &kubeconfig, None);
    let mut a = spawn_part(
        &["controllers", "--secure-port=0"],
        &kubeconfig,
        Some(d.join("controllers-a.log")),
    );
    let mut b = spawn_part(
        &["controllers", "--secure-port=0"],
        &kubeconfig,
        Some(d.join("controllers-b.log")),
    );
    let client = client(d).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");

    let web = |image: &str| {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 6,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": image}]},
                },
            },
        })
        .to_string()
    };
    kubectl(d, &["apply", "-f", "-"], Some(web("nginx:1"))).await;
    kubectl(
        d,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
        None,
    )
    .await;
    let first = holder(&leases, "rollwright-controllers").await;
    let transitions = first.spec.as_ref().unwrap().lease_transitions.unwrap_or(0);
    let leader_pid = holder_pid(&first);
    let (leader, standby) = if a.id() == Some(leader_pid) {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    assert_eq!(leader.id(), Some(leader_pid), "the leader is one of ours");
    let standby_pid = standby.id().unwrap();

    let watcher = InvariantWatcher::start(
        client.clone(),
        "default",
        "app=web",
        Rule::Rolling {
            max_pods: 7,
            min_available: 6,
            min_ready_seconds: 0,
        },
    )
    .await;
    kubectl(d, &["apply", "-f", "-"], Some(web("nginx:2"))).await;
    // Mid-rollout: the new ReplicaSet has pods, the old one still has most of its own.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    embedded::wait_until(
        &replica_sets,
        "the rollout under way",
        Duration::from_secs(60),
        |rs: &ReplicaSet| {
            let spec = rs.spec.as_ref().unwrap();
            let image = spec
                .template
                .as_ref()
                .and_then(|t| t.spec.as_ref())
                .map(|s| s.containers[0].image.clone());
            image == Some(Some("nginx:2".into())) && spec.replicas.unwrap_or(0) >= 1
        },
    )
    .await
    .unwrap();
    leader.start_kill().unwrap();
    leader.wait().await.unwrap();

    kubectl(
        d,
        &["rollout", "status", "deployment/web", "--timeout=150s"],
        None,
    )
    .await;
    let lease = leases.get("rollwright-controllers").await.unwrap();
    assert_eq!(holder_pid(&lease), standby_pid, "the standby took over");
    assert!(lease.spec.unwrap().lease_transitions.unwrap_or(0) > transitions);
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert!(watcher.events_seen() > 6, "the watcher saw the rollout");
}
