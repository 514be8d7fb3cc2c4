//! `rollwright rollout ...` end to end (issue 12): the CLI binary against a whole in-process
//! cluster (API server, simulated nodes under a fault profile, scheduler, controllers).
//!
//! Mid-rollout states are made deterministic, never timed: stopping the scheduler freezes a
//! rollout with its new pods Pending until the scheduler starts again; an image matching the
//! profile's `*:broken` rule never pulls.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod common;

use common::Rig;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, api::ListParams};
use nodesim::distribution::Distribution;
use serde_json::json;
use std::time::Duration;

/// Images ending in `:broken` fail to pull.
const PROFILE: &str = r#"
seed: 1
rules:
  - name: broken
    match: {image: "*:broken"}
    fault: imagePullFailure
"#;

/// Three simulated nodes whose pods start after 100ms and get ready 100ms later, with the
/// scheduler and controllers.
async fn cluster() -> Rig {
    let nodes = nodesim::NodeSim {
        nodes: 3,
        start_delay: Distribution::Fixed(Duration::from_millis(100)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
        ..Default::default()
    };
    let mut rig = Rig::start(nodes, PROFILE).await;
    rig.start_scheduler_and_controllers();
    rig
}

fn daemonset(name: &str, image: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "agent", "image": image}]}
            }
        }
    })
}

/// Names of the pods running `image`.
async fn pods_with_image(rig: &Rig, image: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(rig.client.clone(), "default");
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.spec.as_ref().is_some_and(|s| {
                s.containers
                    .iter()
                    .any(|c| c.image.as_deref() == Some(image))
            })
        })
        .map(|p| p.name_any())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_status_line_by_line() {
    let mut rig = cluster().await;
    rig.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=3",
    ])
    .await;
    let out = rig
        .c
        .rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    assert_eq!(
        out.lines().last(),
        Some("deployment \"web\" successfully rolled out"),
        "{out}"
    );

    // With the scheduler stopped, the new revision's first pod stays Pending: the status names it.
    rig.stop_scheduler().await;
    rig.kubectl(&["set", "image", "deploy/web", "nginx=nginx:1.28"])
        .await;
    let mut status =
        rig.c
            .rollwright_spawn(&["rollout", "status", "deployment/web", "--timeout", "60s"]);
    let pending = status
        .until("the pending pod of revision 2", |l| {
            l.contains("waiting for 1 pod of revision 2 to become available: web-")
                && l.contains("Pending, not scheduled")
        })
        .await;
    assert!(
        pending.starts_with("deployment \"web\" revision 2: 1/3 updated, 0/3 ready, 0/3 available; revision 1: 3 pods"),
        "{pending}"
    );
    rig.start_scheduler();
    status
        .until("the end of the rollout", |l| {
            l == "deployment \"web\" successfully rolled out"
        })
        .await;
    assert!(status.exit_status().await.success());
    // Every line is one state, printed once.
    let mut seen = status.seen.clone();
    seen.dedup();
    assert_eq!(seen, status.seen);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_status_line_by_line() {
    let mut rig = cluster().await;
    rig.apply(&daemonset("agent", "agent:1")).await;
    let out = rig
        .c
        .rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    assert_eq!(
        out.lines().last(),
        Some("daemon set \"agent\" successfully rolled out"),
        "{out}"
    );
    rig.stop_scheduler().await;
    rig.kubectl(&["set", "image", "ds/agent", "agent=agent:2"])
        .await;
    let mut status = rig.c.rollwright_spawn(&[
        "rollout",
        "status",
        "daemonset",
        "agent",
        "--timeout",
        "60s",
    ]);
    status
        .until("the pending pod of revision 2", |l| {
            l.starts_with("daemon set \"agent\" revision 2: 1/3 updated, 0/3 ready")
                && l.contains("waiting for 1 pod of revision 2 to become available: agent-")
                && l.contains("Pending, not scheduled")
        })
        .await;
    rig.start_scheduler();
    status
        .until("the end of the rollout", |l| {
            l == "daemon set \"agent\" successfully rolled out"
        })
        .await;
    assert!(status.exit_status().await.success());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_rollout_names_the_failing_pod_and_fails() {
    let rig = cluster().await;
    rig.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
    ])
    .await;
    rig.kubectl(&[
        "patch",
        "deploy/web",
        "-p",
        r#"{"spec":{"progressDeadlineSeconds":2}}"#,
    ])
    .await;
    rig.c
        .rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    rig.kubectl(&["set", "image", "deploy/web", "nginx=nginx:broken"])
        .await;
    // The progress deadline passes: the command fails, naming the pod that cannot pull.
    let (_, err) = rig
        .c
        .rollwright_fails(&["rollout", "status", "deploy/web"], None)
        .await;
    let broken = pods_with_image(&rig, "nginx:broken").await;
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        err.starts_with("error: deployment \"web\" exceeded its progress deadline: waiting for 1 pod of revision 2 to become available: "),
        "{err}"
    );
    assert!(err.contains(&format!("{} ", broken[0])), "{err}");
    assert!(
        err.contains("ErrImagePull on node-") || err.contains("ImagePullBackOff on node-"),
        "{err}"
    );

    // A DaemonSet has no deadline of its own: --timeout ends the wait.
    rig.apply(&daemonset("agent", "agent:1")).await;
    rig.c
        .rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    rig.kubectl(&["set", "image", "ds/agent", "agent=agent:broken"])
        .await;
    let (_, err) = rig
        .c
        .rollwright_fails(&["rollout", "status", "ds/agent", "--timeout", "3s"], None)
        .await;
    let broken = pods_with_image(&rig, "agent:broken").await;
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        err.starts_with("error: timed out after 3s waiting for daemonset.apps/agent to roll out: waiting for 1 pod of revision 2 to become available: "),
        "{err}"
    );
    assert!(err.contains(&broken[0]), "{err}");
    rig.stop().await;
}
