//! A whole cluster (API server, simulated nodes, scheduler, controllers) on a 3-member etcd on
//! loopback, with etcd members killed under it: with one member down (the leader, the harder case)
//! a rollout goes on and finishes within its invariants; with two down writes fail cleanly (503
//! with a `Status` that says why) while reads from the watch cache go on; when the members return,
//! writes resume and nothing that was acknowledged is lost.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use common::{Cluster, etcd::start_etcd};
use controllers::invariants::{InvariantWatcher, Rule};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use nodesim::distribution::Distribution;
use rollwright::components::Components;
use serde_json::json;
use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

/// Creates Leases one after another until told to stop, keeping the names of those acknowledged
/// and the failures' Statuses.
struct Writer {
    stop: Arc<AtomicBool>,
    acknowledged: Arc<Mutex<Vec<String>>>,
    refused: Arc<Mutex<Vec<kube::core::Status>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    fn start(leases: Api<Lease>) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let (stop, acknowledged, refused) =
                (stop.clone(), acknowledged.clone(), refused.clone());
            async move {
                // A steady trickle of writes, bounded in rate and in time by the test's length.
                let mut tick = tokio::time::interval(Duration::from_millis(50));
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    tick.tick().await;
                    let name = format!("ack-{i}");
                    let lease: Lease =
                        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
                    match leases.create(&PostParams::default(), &lease).await {
                        Ok(_) => acknowledged.lock().unwrap().push(name),
                        Err(kube::Error::Api(status)) => refused.lock().unwrap().push(*status),
                        Err(_) => {}
                    }
                }
            }
        });
        Writer {
            stop,
            acknowledged,
            refused,
            task,
        }
    }

    async fn stop(self) -> (Vec<String>, Vec<kube::core::Status>) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        (
            self.acknowledged.lock().unwrap().clone(),
            self.refused.lock().unwrap().clone(),
        )
    }
}

fn web(image: &str) -> String {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    })
    .to_string()
}

/// `kubectl rollout status deployment/web`; if it times out, the failure shows what the cluster
/// and the etcd members were doing, so that a failure on a loaded CI machine can be understood.
async fn rollout_done(c: &Cluster, etcd: &store::etcd::member::LocalCluster) {
    let out = c
        .kubectl_raw(
            &["rollout", "status", "deployment/web", "--timeout=120s"],
            None,
        )
        .await;
    if out.status.success() {
        return;
    }
    let state = c
        .kubectl_raw(&["get", "deployment,replicasets,pods", "-o", "wide"], None)
        .await;
    let deployment = c
        .kubectl_raw(
            &["get", "deployment", "web", "-o", "jsonpath={.status}"],
            None,
        )
        .await;
    let events = c.kubectl_raw(&["get", "events"], None).await;
    let mut logs = String::new();
    for i in 0..3 {
        let log = std::fs::read_to_string(etcd.dir().join(format!("m{i}.log"))).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        logs.push_str(&format!(
            "member {i}:\n{}\n",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let text = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();
    panic!(
        "the rollout did not finish: {}\n{}\nstatus: {}\n{}\netcd:\n{logs}",
        String::from_utf8_lossy(&out.stderr),
        text(&state),
        text(&deployment),
        text(&events),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_go_on_with_one_member_down_and_writes_fail_cleanly_without_quorum() {
    let Some(mut etcd) = start_etcd(3).await else {
        return;
    };
    let nodes = nodesim::NodeSim {
        nodes: 4,
        start_delay: Distribution::Fixed(Duration::from_millis(100)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
        ..Default::default()
    };
    let components = Components {
        nodes: Some(nodes),
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
        ..Default::default()
    };
    let c = Cluster::start_on_etcd(&etcd, components, None).await;
    let client = embedded::client_for(&c.cp().server);
    c.kubectl_stdin(&["apply", "-f", "-"], &web("nginx:1"))
        .await;
    c.kubectl(&["rollout", "status", "deployment/web", "--timeout=90s"])
        .await;
    let writer = Writer::start(Api::namespaced(client.clone(), "default"));

    // One member down, the leader: the rollout goes on and keeps its promises.
    let watcher = InvariantWatcher::start(
        client.clone(),
        "default",
        "app=web",
        Rule::Rolling {
            max_pods: 7,
            min_available: 5,
            min_ready_seconds: 0,
        },
    )
    .await;
    let leader = etcd.leader().await.expect("etcd has a leader");
    c.kubectl(&["set", "image", "deployment/web", "app=nginx:2"])
        .await;
    etcd.kill(leader);
    rollout_done(&c, &etcd).await;
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert!(watcher.events_seen() > 6, "the watcher saw the rollout");

    // Two down: no quorum. Writes fail with 503 and say why; reads are served from the cache.
    let second = (leader + 1) % 3;
    etcd.kill(second);
    let err = c
        .kubectl_fails(&["scale", "deployment/web", "--replicas=3"], None)
        .await;
    assert!(
        err.contains("ServiceUnavailable") && err.contains("the storage backend is unavailable"),
        "{err}"
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "no-quorum"}})).unwrap();
    match leases.create(&PostParams::default(), &lease).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (503, "ServiceUnavailable")
            );
        }
        other => panic!("a write without quorum: {other:?}"),
    }
    let deployment = c
        .kubectl_json(&["get", "deployment", "web", "-o", "json"])
        .await;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    let pods = c
        .kubectl(&["get", "pods", "-l", "app=web", "-o", "name"])
        .await;
    // The six of the new template (an old one may still be finishing its graceful deletion).
    assert!(pods.lines().count() >= 6, "{pods}");

    // The members return: writes resume, and every acknowledged write is there.
    etcd.start_member(leader).unwrap();
    etcd.start_member(second).unwrap();
    etcd.ready(&etcd.client_urls()).await.unwrap();
    c.kubectl(&["scale", "deployment/web", "--replicas=3"])
        .await;
    rollout_done(&c, &etcd).await;
    let (acknowledged, refused) = writer.stop().await;
    let present: std::collections::HashSet<String> = leases
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|l| l.metadata.name)
        .collect();
    for name in &acknowledged {
        assert!(present.contains(name), "acknowledged lease {name} was lost");
    }
    for status in &refused {
        assert_eq!(status.code, 503, "{status:?}");
    }
    assert!(!acknowledged.is_empty());
    c.stop().await;
}
