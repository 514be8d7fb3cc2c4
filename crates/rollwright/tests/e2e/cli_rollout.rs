//! `rollwright rollout ...` end to end (issue 12): the CLI binary against a whole in-process
//! cluster (API server, simulated nodes under a fault profile, scheduler, controllers).
//!
//! Mid-rollout states are made deterministic, never timed: stopping the scheduler freezes a
//! rollout with its new pods Pending until the scheduler starts again; an image matching the
//! profile's `*:broken` rule never pulls.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

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

/// Waits (on a watch) until a pod running `image` reports that its image does not pull, and
/// returns its name: the state the CLI's failure message names, reached however slow the machine.
async fn wait_for_failing_pull(rig: &Rig, image: &str) -> String {
    use futures::{StreamExt, TryStreamExt};
    use kube::runtime::{WatchStreamExt, watcher};
    let pods: Api<Pod> = Api::namespaced(rig.client.clone(), "default");
    let wanted = image.to_owned();
    let failing = watcher(pods, watcher::Config::default())
        .applied_objects()
        .try_filter(move |p| {
            let pulls_fail = p.spec.as_ref().is_some_and(|s| {
                s.containers
                    .iter()
                    .any(|c| c.image.as_deref() == Some(wanted.as_str()))
            }) && api::pod::fails_to_pull(p);
            std::future::ready(pulls_fail)
        })
        .boxed();
    let found = tokio::time::timeout(Duration::from_secs(45), failing.into_future()).await;
    match found {
        Ok((Some(Ok(p)), _)) => p.name_any(),
        other => panic!(
            "no pod of {image:?} failed to pull in time: {:?}",
            other.map(|(p, _)| p)
        ),
    }
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
    rig.c
        .rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    // The short deadline only once the first rollout is done: on a loaded machine, starting two
    // pods can itself take longer than 2 s.
    rig.kubectl(&[
        "patch",
        "deploy/web",
        "-p",
        r#"{"spec":{"progressDeadlineSeconds":2}}"#,
    ])
    .await;
    rig.kubectl(&["set", "image", "deploy/web", "nginx=nginx:broken"])
        .await;
    wait_for_failing_pull(&rig, "nginx:broken").await;
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
    // However slow the machine, the new pod exists and fails before the 3 s wait starts.
    wait_for_failing_pull(&rig, "agent:broken").await;
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

/// Waits (on a watch) until the object `name` satisfies `cond`.
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, cond: impl Fn(&K) -> bool)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let found = tokio::time::timeout(
        Duration::from_secs(45),
        kube::runtime::wait::await_condition(api.clone(), name, move |o: Option<&K>| {
            o.is_some_and(&cond)
        }),
    )
    .await;
    assert!(matches!(found, Ok(Ok(_))), "{name}: no {what} in time");
}

/// The image of a pod's first container.
fn image(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_diff_undo_restart_and_change_causes() {
    let rig = cluster().await;
    let c = &rig.c;
    rig.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
    ])
    .await;
    c.rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    assert_eq!(
        c.rollwright(&["set", "image", "deploy/web", "nginx=nginx:1.28"])
            .await,
        "deployment.apps/web image updated\n"
    );
    c.rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    let history = c.rollwright(&["rollout", "history", "deploy/web"]).await;
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines[0], "deployment.apps/web", "{history}");
    assert!(
        lines[1].starts_with("REVISION") && lines[1].ends_with("CHANGE-CAUSE"),
        "{history}"
    );
    assert!(
        lines[2].starts_with("1 ") && lines[2].ends_with("<none>"),
        "{history}"
    );
    assert!(
        lines[3].starts_with("2 (current)")
            && lines[3].ends_with("set image nginx=nginx:1.28 by rollwright"),
        "{history}"
    );
    // Both new pods are on revision 2, none on revision 1.
    let cells: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(cells[2], "2", "{history}");

    let diff = c
        .rollwright(&["rollout", "history", "deploy/web", "--diff", "1", "2"])
        .await;
    assert!(diff.starts_with("--- revision 1 (no change cause)\n+++ revision 2 (set image nginx=nginx:1.28 by rollwright)\n@@ "), "{diff}");
    let changed: Vec<&str> = diff
        .lines()
        .skip(2)
        .filter(|l| l.starts_with('-') || l.starts_with('+'))
        .collect();
    assert_eq!(changed.len(), 2, "{diff}");
    assert!(
        changed[0].starts_with('-') && changed[0].ends_with("image: nginx:1.27"),
        "{diff}"
    );
    assert!(
        changed[1].starts_with('+') && changed[1].ends_with("image: nginx:1.28"),
        "{diff}"
    );
    let shown = c
        .rollwright(&["rollout", "history", "deploy/web", "--revision", "2"])
        .await;
    assert!(
        shown.starts_with("deployment.apps/web with revision #2\n"),
        "{shown}"
    );
    assert!(shown.contains("image: nginx:1.28"), "{shown}");

    // Undo brings revision 1's template back as revision 3, and says so.
    assert_eq!(
        c.rollwright(&["rollout", "undo", "deploy/web"]).await,
        "deployment.apps/web rolled back to revision 1\n"
    );
    c.rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    let history = c.rollwright(&["rollout", "history", "deploy/web"]).await;
    let last = history.lines().last().unwrap();
    assert!(
        last.starts_with("3 (current)")
            && last.ends_with("rollout undo to revision 1 by rollwright"),
        "{history}"
    );
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(rig.client.clone(), "default");
    let d = deployments.get("web").await.unwrap();
    let images: Vec<String> = d
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers
        .iter()
        .filter_map(|c| c.image.clone())
        .collect();
    assert_eq!(images, vec!["nginx:1.27"]);
    // Undoing to where it is now is skipped.
    assert_eq!(
        c.rollwright(&["rollout", "undo", "deploy/web", "--to-revision", "3"])
            .await,
        "deployment.apps/web skipped rollback (current template already matches revision 3)\n"
    );

    // Restart makes a new revision with its own cause.
    assert_eq!(
        c.rollwright(&["rollout", "restart", "deploy/web"]).await,
        "deployment.apps/web restarted\n"
    );
    c.rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    let history = c.rollwright(&["rollout", "history", "deploy/web"]).await;
    let last = history.lines().last().unwrap();
    assert!(
        last.starts_with("4 (current)") && last.ends_with("rollout restart by rollwright"),
        "{history}"
    );

    // DaemonSets: the cause is recorded on their ControllerRevisions, undo restores the patch.
    rig.apply(&daemonset("agent", "agent:1")).await;
    c.rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    c.rollwright(&["set", "image", "ds/agent", "agent=agent:2"])
        .await;
    c.rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    let history = c.rollwright(&["rollout", "history", "ds/agent"]).await;
    assert!(
        history
            .lines()
            .last()
            .unwrap()
            .ends_with("set image agent=agent:2 by rollwright"),
        "{history}"
    );
    let diff = c
        .rollwright(&["rollout", "history", "ds/agent", "--diff", "1", "2"])
        .await;
    assert!(
        diff.contains("\n+") && diff.contains("image: agent:2"),
        "{diff}"
    );
    assert_eq!(
        c.rollwright(&["rollout", "undo", "ds/agent"]).await,
        "daemonset.apps/agent rolled back to revision 1\n"
    );
    c.rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    let history = c.rollwright(&["rollout", "history", "ds/agent"]).await;
    assert!(
        history.lines().last().unwrap().starts_with("3 (current)"),
        "{history}"
    );
    let pods: Api<Pod> = Api::namespaced(rig.client.clone(), "default");
    let agents = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap();
    assert!(agents.items.iter().all(|p| image(p) == "agent:1"));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_daemonset_rollout_replaces_nothing_but_serves_new_nodes() {
    use k8s_openapi::api::apps::v1::DaemonSet;
    let rig = cluster().await;
    let c = &rig.c;
    rig.apply(&daemonset("agent", "agent:1")).await;
    c.rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    let pods: Api<Pod> = Api::namespaced(rig.client.clone(), "default");
    let uids = |list: &[Pod]| {
        let mut u: Vec<String> = list.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        u.sort();
        u
    };
    let before = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items;
    assert_eq!(before.len(), 3);

    let paused = c.rollwright(&["rollout", "pause", "ds/agent"]).await;
    assert!(
        paused.starts_with("daemonset.apps/agent paused ("),
        "{paused}"
    );
    let (_, err) = c
        .rollwright_fails(&["rollout", "pause", "ds/agent"], None)
        .await;
    assert_eq!(err, "error: daemonsets.apps \"agent\" is already paused\n");
    c.rollwright(&["set", "image", "ds/agent", "agent=agent:2"])
        .await;
    // Once the controller has seen the new template, nothing has been replaced.
    let daemonsets: Api<DaemonSet> = Api::namespaced(rig.client.clone(), "default");
    wait_for(&daemonsets, "agent", "observed new generation", |ds| {
        ds.status.as_ref().and_then(|s| s.observed_generation) == ds.metadata.generation
    })
    .await;
    let now = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items;
    assert_eq!(uids(&now), uids(&before), "a pod was replaced while paused");
    let line = c
        .rollwright(&["rollout", "status", "ds/agent", "--watch=false"])
        .await;
    assert!(
        line.contains("rollout paused with 3 pods on older revisions (resume it with `rollwright rollout resume ds/agent`)"),
        "{line}"
    );

    // A node added while paused gets its daemon pod, of the new revision.
    assert_eq!(c.rollwright(&["nodes", "add"]).await, "added node-3\n");
    wait_for(
        &daemonsets,
        "agent",
        "four pods, one updated and available",
        |ds| {
            ds.status.as_ref().is_some_and(|s| {
                s.desired_number_scheduled == 4
                    && s.number_available == Some(4)
                    && s.updated_number_scheduled == Some(1)
            })
        },
    )
    .await;
    let now = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items;
    let on_new_node: Vec<&Pod> = now
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("node-3"))
        .collect();
    assert_eq!(on_new_node.len(), 1);
    assert_eq!(image(on_new_node[0]), "agent:2");
    let old: Vec<Pod> = now.into_iter().filter(|p| image(p) == "agent:1").collect();
    assert_eq!(uids(&old), uids(&before), "a pod was replaced while paused");

    // Resumed, the rollout finishes.
    let resumed = c.rollwright(&["rollout", "resume", "ds/agent"]).await;
    assert!(
        resumed.starts_with("daemonset.apps/agent resumed"),
        "{resumed}"
    );
    c.rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    let now = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items;
    assert_eq!(now.len(), 4);
    assert!(now.iter().all(|p| image(p) == "agent:2"));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_statefulset_rollout_replaces_nothing_but_creates_missing_ordinals() {
    let rig = cluster().await;
    let c = &rig.c;
    rig.apply(&json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db", "replicas": 3,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "db", "image": "db:1"}]}}
        }
    }))
    .await;
    c.rollwright(&["rollout", "status", "sts/db", "--timeout", "60s"])
        .await;
    let pods: Api<Pod> = Api::namespaced(rig.client.clone(), "default");
    let uids = |list: &[Pod]| {
        let mut u: Vec<String> = list.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        u.sort();
        u
    };
    let before = pods
        .list(&ListParams::default().labels("app=db"))
        .await
        .unwrap()
        .items;
    assert_eq!(before.len(), 3);
    let paused = c.rollwright(&["rollout", "pause", "sts/db"]).await;
    assert!(
        paused.starts_with("statefulset.apps/db paused ("),
        "{paused}"
    );
    c.rollwright(&["set", "image", "sts/db", "db=db:2"]).await;
    let sets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(rig.client.clone(), "default");
    wait_for(&sets, "db", "observed new generation", |s| {
        s.status.as_ref().and_then(|s| s.observed_generation) == s.metadata.generation
    })
    .await;
    // A missing ordinal is still created while paused.
    c.rollwright(&["scale", "sts/db", "--replicas", "4"]).await;
    wait_for(&sets, "db", "four ready pods", |s| {
        s.status
            .as_ref()
            .is_some_and(|s| s.ready_replicas == Some(4))
    })
    .await;
    let now = pods
        .list(&ListParams::default().labels("app=db"))
        .await
        .unwrap()
        .items;
    let old: Vec<Pod> = now.into_iter().filter(|p| image(p) == "db:1").collect();
    assert_eq!(uids(&old), uids(&before), "a pod was replaced while paused");
    c.rollwright(&["rollout", "resume", "sts/db"]).await;
    c.rollwright(&["rollout", "status", "sts/db", "--timeout", "60s"])
        .await;
    let now = pods
        .list(&ListParams::default().labels("app=db"))
        .await
        .unwrap()
        .items;
    assert_eq!(now.len(), 4);
    assert!(now.iter().all(|p| image(p) == "db:2"));
    rig.stop().await;
}
