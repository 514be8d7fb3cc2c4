//! Two API servers on one etcd serve one cluster: real kubectl talks to each; every write is seen
//! through the other at once (a consistent read waits for the other server's write to reach its
//! cache), watches on one carry the other's writes, resourceVersions mean the same on both, and
//! compare-and-swap holds across them; and they keep etcd's history compacted between them.

use crate::common;

use common::{Cluster, etcd::start_etcd};
use rollwright::control_plane::Options;
use serde_json::Value;
use std::time::Duration;

/// `kubectl get deployment NAME -o json` on one server.
async fn deployment(c: &Cluster, name: &str) -> Value {
    c.kubectl_json(&["get", "deployment", name, "-o", "json"])
        .await
}

fn image(obj: &Value) -> &str {
    obj["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .expect("image")
}

fn rv(obj: &Value) -> &str {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_api_servers_on_one_etcd_serve_one_cluster() {
    let Some(etcd) = start_etcd(1).await else {
        return;
    };
    let a = Cluster::start_on_etcd(&etcd, Default::default(), None).await;
    let b = Cluster::start_on_etcd(&etcd, Default::default(), Some(&a)).await;
    assert_ne!(a.cp().addr, b.cp().addr);

    // No controllers run: the Deployments are plain objects here.
    a.kubectl(&["create", "deployment", "before", "--image=app:v0"])
        .await;
    let columns =
        "custom-columns=NAME:.metadata.name,IMAGE:.spec.template.spec.containers[0].image";
    let mut watch_a = a.kubectl_spawn(&["get", "deployments", "-w", "-o", columns]);
    let mut watch_b = b.kubectl_spawn(&["get", "deployments", "-w", "-o", columns]);
    // Both watches have listed before anything else is written.
    watch_a
        .until("the list on a", |l| l.starts_with("before"))
        .await;
    watch_b
        .until("the list on b", |l| l.starts_with("before"))
        .await;

    // Written on a: b reads it at once, with the same resourceVersion.
    let out = a
        .kubectl(&["create", "deployment", "shared", "--image=app:v1"])
        .await;
    assert_eq!(out.trim(), "deployment.apps/shared created");
    let on_a = deployment(&a, "shared").await;
    let on_b = deployment(&b, "shared").await;
    assert_eq!(image(&on_b), "app:v1");
    assert_eq!(rv(&on_a), rv(&on_b));
    watch_b
        .until("a's create on b's watch", |l| {
            l.starts_with("shared") && l.ends_with("v1")
        })
        .await;

    // Written on b: a reads it and a's watch carries it.
    b.kubectl(&["set", "image", "deployment/shared", "app=app:v2"])
        .await;
    assert_eq!(image(&deployment(&a, "shared").await), "app:v2");
    watch_a
        .until("b's patch on a's watch", |l| {
            l.starts_with("shared") && l.ends_with("v2")
        })
        .await;

    // A replace on a with the resourceVersion of v1 conflicts with b's write.
    let mut stale = on_a.clone();
    stale["spec"]["replicas"] = Value::from(7);
    let out = a
        .kubectl_raw(&["replace", "-f", "-"], Some(&stale.to_string()))
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("the object has been modified"),
        "stale replace: {stderr}"
    );

    // A list at a resourceVersion one server handed out is served by the other.
    let latest = deployment(&b, "shared").await;
    let path = format!(
        "/apis/apps/v1/namespaces/default/deployments?resourceVersion={}&resourceVersionMatch=NotOlderThan",
        rv(&latest)
    );
    for server in [&a, &b] {
        let list = server.kubectl_json(&["get", "--raw", &path]).await;
        let items = list["items"].as_array().expect("items");
        assert!(
            items
                .iter()
                .any(|d| d["metadata"]["name"] == "shared" && image(d) == "app:v2"),
            "{list}"
        );
    }

    // Deleted on b: gone on a.
    b.kubectl(&["delete", "deployment", "shared"]).await;
    let err = a
        .kubectl_fails(&["get", "deployment", "shared"], None)
        .await;
    assert!(err.contains("NotFound"), "{err}");

    a.stop().await;
    b.stop().await;
}

/// Two API servers compacting every second, as upstream's do every five minutes: etcd loses the
/// old version of an object, and both servers go on answering consistent reads of an otherwise
/// idle cluster at once (the compactors' own writes are revisions their caches must see).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_servers_on_one_etcd_compact_its_history() {
    let Some(etcd) = start_etcd(1).await else {
        return;
    };
    let options = || Options {
        etcd_compaction_interval: Duration::from_secs(1),
        ..Default::default()
    };
    let a = Cluster::start_on_etcd_with(&etcd, options(), None).await;
    let b = Cluster::start_on_etcd_with(&etcd, options(), Some(&a)).await;

    a.kubectl(&["create", "configmap", "c", "--from-literal=v=1"])
        .await;
    let old = a
        .kubectl_json(&["get", "configmap", "c", "-o", "json"])
        .await;
    let old_rv: i64 = rv(&old).parse().expect("numeric resourceVersion");
    b.kubectl(&["patch", "configmap", "c", "-p", r#"{"data":{"v":"2"}}"#])
        .await;

    // etcd tells no one of a compaction: ask until the old version is gone.
    let key = "/registry/core/configmaps/default/c";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while etcd
        .has_history_at(key, old_rv)
        .await
        .expect("etcd answers")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "etcd was not compacted within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    for server in [&a, &b] {
        let now = server
            .kubectl_json(&["get", "configmap", "c", "-o", "json"])
            .await;
        assert_eq!(now["data"]["v"], "2");
        let listed = server.kubectl(&["get", "configmaps", "-o", "name"]).await;
        assert!(listed.contains("configmap/c"), "{listed}");
    }
    b.kubectl(&["create", "configmap", "after", "--from-literal=v=1"])
        .await;
    assert_eq!(
        a.kubectl_json(&["get", "configmap", "after", "-o", "json"])
            .await["data"]["v"],
        "1"
    );

    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn etcd_store_without_servers_is_refused_with_the_fix() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rollwright"))
        .args(["apiserver", "--store", "etcd", "--port", "0"])
        .output()
        .await
        .expect("rollwright runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--etcd-servers"), "{stderr}");
}
