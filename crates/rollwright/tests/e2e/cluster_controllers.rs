//! The cluster's small controllers end to end, with real kubectl against a control plane started
//! by the test: every namespace's `default` ServiceAccount and the ServiceAccount admission of
//! pods; namespace deletion by the namespace controller, also across a restart mid-way.

use crate::common;

use common::Cluster;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::{
    Api,
    api::{Patch, PatchParams},
    runtime::wait::await_condition,
};
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

/// The namespace's condition `type_` as (status, reason).
fn condition(ns: &Namespace, type_: &str) -> Option<(String, String)> {
    ns.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_empties_and_goes_also_across_a_restart() {
    let c = with_controllers().await;
    c.kubectl(&["create", "namespace", "shop"]).await;
    c.kubectl(&["create", "deployment", "web", "-n", "shop", "--image=nginx"])
        .await;
    c.kubectl(&["create", "serviceaccount", "held", "-n", "shop"])
        .await;
    let client = c.client().await;
    let held: Api<ServiceAccount> = Api::namespaced(client.clone(), "shop");
    held.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": ["example.com/hold"]}})),
    )
    .await
    .expect("finalizer added");
    c.kubectl(&["delete", "namespace", "shop", "--wait=false"])
        .await;
    // The held ServiceAccount keeps the namespace Terminating, with upstream's conditions.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = tokio::time::timeout(
        TIMEOUT,
        await_condition(namespaces.clone(), "shop", |ns: Option<&Namespace>| {
            ns.and_then(|ns| condition(ns, "NamespaceFinalizersRemaining"))
                .is_some_and(|(s, _)| s == "True")
        }),
    )
    .await
    .expect("the namespace reports its remaining finalizers")
    .expect("watch")
    .expect("the namespace");
    assert_eq!(
        ns.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    assert_eq!(
        condition(&ns, "NamespaceContentRemaining").map(|c| c.1),
        Some("SomeResourcesRemain".to_string())
    );
    assert_eq!(
        condition(&ns, "NamespaceDeletionDiscoveryFailure").map(|c| c.1),
        Some("ResourcesDiscovered".to_string())
    );
    let left = c
        .kubectl(&[
            "get",
            "deployments,replicasets,pods",
            "-n",
            "shop",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(left.trim(), "", "content left behind: {left}");

    // Restart the controllers mid-way (on rollwright's own server, the whole control plane);
    // the new namespace controller finishes the deletion.
    let c = c
        .restart_with(rollwright::components::Components {
            controllers: Some(Default::default()),
            ..Default::default()
        })
        .await;
    c.kubectl(&["get", "namespace", "shop"]).await;
    c.kubectl(&[
        "patch",
        "serviceaccount",
        "held",
        "-n",
        "shop",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    c.kubectl(&["wait", "--for=delete", "namespace/shop", "--timeout=30s"])
        .await;
    let out = c.kubectl_raw(&["get", "namespace", "shop"], None).await;
    assert!(!out.status.success());
    c.stop().await;
}
