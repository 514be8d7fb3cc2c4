//! `rollwright snapshot` against a running cluster: the guestbook tutorial applied unchanged, its
//! pods' measured timing, `-n`, Secrets never read, and a user who may not list everything.

use crate::{access::user_kubeconfig, common::Cluster, endpoints};
use serde_json::Value;

fn names(snapshot: &Value, key: &str) -> Vec<String> {
    let mut names: Vec<String> = snapshot["objects"][key]
        .as_array()
        .unwrap_or_else(|| panic!("objects.{key} is a list"))
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// The guestbook tutorial, unchanged, in namespace `shop`, rolled out.
pub(crate) async fn guestbook_in_shop(c: &Cluster) {
    c.kubectl(&["create", "namespace", "shop"]).await;
    c.kubectl(&[
        "apply",
        "-n",
        "shop",
        "-f",
        &endpoints::realworld("guestbook.yaml"),
    ])
    .await;
    for deployment in ["frontend", "redis-leader"] {
        c.kubectl(&[
            "rollout",
            "status",
            "-n",
            "shop",
            &format!("deployment/{deployment}"),
            "--timeout=90s",
        ])
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_holds_the_cluster_and_its_measured_timing_but_no_secret() {
    let c = Cluster::start_with(endpoints::components()).await;
    guestbook_in_shop(&c).await;
    c.kubectl(&[
        "create",
        "secret",
        "generic",
        "db",
        "-n",
        "shop",
        "--from-literal=password=never-in-a-snapshot",
    ])
    .await;
    c.kubectl(&[
        "create",
        "deployment",
        "other",
        "--image=nginx",
        "-n",
        "default",
    ])
    .await;

    let file = c.dir.path().join("cluster.json");
    let path = file.to_string_lossy().into_owned();
    c.rollwright(&["snapshot", "-n", "shop", "-o", &path]).await;
    let text = std::fs::read_to_string(&file).expect("snapshot written");
    assert!(!text.contains("never-in-a-snapshot"), "secret data leaked");
    let snapshot: Value = serde_json::from_str(&text).expect("snapshot is JSON");
    assert_eq!(snapshot["kind"], "ClusterSnapshot");
    assert_eq!(names(&snapshot, "nodes").len(), 3);
    assert_eq!(names(&snapshot, "namespaces"), ["shop"]);
    assert_eq!(
        names(&snapshot, "deployments"),
        ["frontend", "redis-leader"]
    );
    let pods = snapshot["objects"]["pods"].as_array().expect("pods");
    // frontend 3, redis-leader 1.
    assert_eq!(pods.len(), 4, "{pods:?}");
    assert!(
        pods.iter()
            .all(|p| p["kind"] == "Pod" && p["metadata"]["managedFields"].is_null())
    );
    // Every pod ran and became Ready, so each has both figures, ready no sooner than started.
    for pod in pods {
        let key = format!("shop/{}", pod["metadata"]["name"].as_str().expect("name"));
        let timing = &snapshot["timings"][&key];
        let started = timing["startedAfterSeconds"].as_f64();
        let ready = timing["readyAfterSeconds"].as_f64();
        assert!(
            matches!((started, ready), (Some(s), Some(r)) if s >= 0.0 && r >= s),
            "{key}: {timing}"
        );
    }
    assert_eq!(names(&snapshot, "replicaSets").len(), 2);
    assert_eq!(snapshot["unreadable"], serde_json::json!([]));

    // Without -n: every namespace, the other deployment included.
    let all: Value =
        serde_json::from_str(&c.rollwright(&["snapshot"]).await).expect("snapshot on stdout");
    assert!(names(&all, "deployments").contains(&"other".to_string()));
    assert!(names(&all, "namespaces").contains(&"kube-system".to_string()));

    // A user who may read workloads but not budgets or storage: those are noted, not guessed.
    c.kubectl(&[
        "create", "clusterrole", "reader", "--verb=list",
        "--resource=nodes,namespaces,pods,deployments,replicasets,daemonsets,statefulsets,controllerrevisions,jobs,priorityclasses,resourcequotas",
    ])
    .await;
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        "reader",
        "--clusterrole=reader",
        "--user=ana",
    ])
    .await;
    let kubeconfig = user_kubeconfig(&c, "ana", &[]).await;
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    let limited: Value = serde_json::from_str(
        &c.rollwright(&["snapshot", "--kubeconfig", &kubeconfig, "-n", "shop"])
            .await,
    )
    .expect("snapshot on stdout");
    assert_eq!(names(&limited, "deployments").len(), 2);
    let unreadable: Vec<(String, String)> = limited["unreadable"]
        .as_array()
        .expect("unreadable")
        .iter()
        .map(|u| {
            (
                u["resource"].as_str().unwrap_or_default().to_string(),
                u["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let resources: Vec<&str> = unreadable.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        resources,
        [
            "poddisruptionbudgets.policy",
            "persistentvolumeclaims",
            "persistentvolumes",
            "storageclasses.storage.k8s.io"
        ]
    );
    assert!(
        unreadable[0].1.contains(
            r#"User "ana" cannot list resource "poddisruptionbudgets" in API group "policy" in the namespace "shop""#
        ),
        "{unreadable:?}"
    );
    c.stop().await;
}
