//! The cluster's small controllers end to end, with real kubectl against a control plane started
//! by the test: every namespace's `default` ServiceAccount and the ServiceAccount admission of
//! pods.

mod common;

use common::Cluster;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::{Api, runtime::wait::await_condition};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// A control plane running its controllers (no nodes: the pods stay Pending).
async fn with_controllers() -> Cluster {
    Cluster::start_with(rollwright::components::Components {
        controllers: Some(Default::default()),
        ..Default::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_as_their_namespaces_default_service_account() {
    let c = with_controllers().await;
    c.kubectl(&["create", "namespace", "team-a"]).await;
    // Created right after its namespace: admission waits briefly for the default account.
    c.kubectl(&["run", "web", "-n", "team-a", "--image=nginx"])
        .await;
    let client = c.client().await;
    let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), "team-a");
    tokio::time::timeout(
        TIMEOUT,
        await_condition(sa, "default", |s: Option<&ServiceAccount>| s.is_some()),
    )
    .await
    .expect("team-a has a default ServiceAccount")
    .expect("watch");
    let out = c
        .kubectl(&["get", "serviceaccounts", "-n", "team-a", "-o", "name"])
        .await;
    assert_eq!(out.trim(), "serviceaccount/default");
    let pod = Api::<Pod>::namespaced(client, "team-a")
        .get("web")
        .await
        .expect("the pod exists");
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    assert_eq!(spec.service_account.as_deref(), Some("default"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_naming_a_missing_service_account_is_refused() {
    let c = with_controllers().await;
    let manifest = r#"{"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bot"},
        "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "nginx"}]}}"#;
    let out = c.kubectl_raw(&["create", "-f", "-"], Some(manifest)).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            r#"pods "bot" is forbidden: error looking up service account default/robot: serviceaccount "robot" not found"#
        ),
        "{stderr}"
    );
    c.kubectl(&["create", "serviceaccount", "robot"]).await;
    c.kubectl_raw(&["create", "-f", "-"], Some(manifest)).await;
    c.kubectl(&["get", "pod", "bot"]).await;
}
