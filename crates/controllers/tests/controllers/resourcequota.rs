//! The resource quota controller against an in-process API server (whose quota admission
//! charges creates): a quota's status shows its limits and what its namespace holds, objects
//! that existed before it included; deletions lower the usage; scopes select the pods a quota
//! counts as upstream's; a status someone else wrote is put back.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use api::quota::resources::Amount;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
    core::{ApiResource, GroupVersionKind},
    runtime::wait::await_condition,
};
use serde_json::{Value, json};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["resourcequota"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

/// Creates any object from its JSON in namespace `ns`.
async fn create(client: &Client, ns: &str, obj: Value) {
    let (group, version) = match obj["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            obj["apiVersion"].as_str().unwrap().to_string(),
        ),
    };
    let kind = obj["kind"].as_str().unwrap();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, kind));
    let api: Api<DynamicObject> = if ns.is_empty() {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), ns, &ar)
    };
    let o: DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap();
}

async fn delete(client: &Client, ns: &str, api_version: &str, kind: &str, name: &str) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

fn amount(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Amount {
    Amount::parse(&q.0).unwrap()
}

/// Whether the quota's status shows its spec and `want` as the usage of those resources.
fn shows(q: &ResourceQuota, want: &[(&str, &str)]) -> bool {
    let Some(status) = q.status.as_ref() else {
        return false;
    };
    let spec_hard = q.spec.as_ref().and_then(|s| s.hard.as_ref());
    let hard_ok = match (spec_hard, status.hard.as_ref()) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| amount(v) == amount(w)))
        }
        _ => false,
    };
    let used = status.used.clone().unwrap_or_default();
    hard_ok
        && want.iter().all(|(k, v)| {
            used.get(*k)
                .is_some_and(|u| amount(u) == Amount::parse(v).unwrap())
        })
}

/// Waits until quota `name` shows `want`.
async fn wait_for(client: &Client, ns: &str, name: &str, want: &[(&str, &str)]) {
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    let owned: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cond = move |q: Option<&ResourceQuota>| {
        let want: Vec<(&str, &str)> = owned
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        q.is_some_and(|q| shows(q, &want))
    };
    if tokio::time::timeout(TIMEOUT, await_condition(api.clone(), name, cond))
        .await
        .is_err()
    {
        let q = api.get(name).await.unwrap();
        panic!("quota {name} never showed {want:?}; status: {:?}", q.status);
    }
}

async fn namespace(client: &Client, name: &str) {
    create(
        client,
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
}

fn quota(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec})
}

fn pod(name: &str, resources: Value, extra: Value) -> Value {
    let mut spec =
        json!({"containers": [{"name": "c", "image": "busybox:1.36", "resources": resources}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn status_shows_what_the_namespace_holds_and_follows_deletions() {
    let (_server, client) = start().await;
    let ns = "counted";
    namespace(&client, ns).await;
    // There before the quota: counted by the first recount.
    create(
        &client,
        ns,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before"}}),
    )
    .await;
    create(
        &client,
        ns,
        quota(
            "q",
            json!({"hard": {
                "pods": "5", "cpu": "1", "memory": "1Gi", "configmaps": "10", "secrets": "10",
                "services": "10", "services.nodeports": "2", "count/replicasets.apps": "5",
                "resourcequotas": "1", "persistentvolumeclaims": "3", "requests.storage": "10Gi",
                "count/widgets.example.com": "1"}}),
        ),
    )
    .await;
    let empty = [
        ("pods", "0"),
        ("cpu", "0"),
        ("memory", "0"),
        ("configmaps", "1"),
        ("secrets", "0"),
        ("services", "0"),
        ("services.nodeports", "0"),
        ("count/replicasets.apps", "0"),
        ("resourcequotas", "1"),
        ("persistentvolumeclaims", "0"),
        ("requests.storage", "0"),
    ];
    wait_for(&client, ns, "q", &empty).await;
    // A resource the server does not serve is not counted.
    let q: ResourceQuota = Api::namespaced(client.clone(), ns).get("q").await.unwrap();
    assert!(
        !q.status
            .unwrap()
            .used
            .unwrap()
            .contains_key("count/widgets.example.com")
    );

    create(
        &client,
        ns,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
    )
    .await;
    create(
        &client,
        ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
    )
    .await;
    create(
        &client,
        ns,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "np"},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
    )
    .await;
    create(
        &client,
        ns,
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
    )
    .await;
    create(
        &client,
        ns,
        pod(
            "p",
            json!({"requests": {"cpu": "250m", "memory": "64Mi"}}),
            json!({}),
        ),
    )
    .await;
    create(
        &client,
        ns,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    wait_for(
        &client,
        ns,
        "q",
        &[
            ("pods", "1"),
            ("cpu", "250m"),
            ("memory", "64Mi"),
            ("configmaps", "2"),
            ("secrets", "1"),
            ("services", "1"),
            ("services.nodeports", "1"),
            ("count/replicasets.apps", "1"),
            ("resourcequotas", "1"),
            ("persistentvolumeclaims", "1"),
            ("requests.storage", "1Gi"),
        ],
    )
    .await;

    for (api_version, kind, name) in [
        ("v1", "ConfigMap", "before"),
        ("v1", "ConfigMap", "cm"),
        ("v1", "Secret", "s"),
        ("v1", "Service", "np"),
        ("apps/v1", "ReplicaSet", "rs"),
        ("v1", "Pod", "p"),
        ("v1", "PersistentVolumeClaim", "c"),
    ] {
        delete(&client, ns, api_version, kind, name).await;
    }
    let mut released = empty;
    released[3] = ("configmaps", "0");
    wait_for(&client, ns, "q", &released).await;
}

#[tokio::test]
async fn scopes_select_the_pods_a_quota_counts() {
    let (_server, client) = start().await;
    let ns = "scoped";
    namespace(&client, ns).await;
    for (name, scope) in [
        ("best-effort", "BestEffort"),
        ("not-best-effort", "NotBestEffort"),
        ("terminating", "Terminating"),
        ("not-terminating", "NotTerminating"),
    ] {
        create(
            &client,
            ns,
            quota(name, json!({"hard": {"pods": "5"}, "scopes": [scope]})),
        )
        .await;
        wait_for(&client, ns, name, &[("pods", "0")]).await;
    }
    create(&client, ns, pod("plain", json!({}), json!({}))).await;
    create(
        &client,
        ns,
        pod(
            "bounded",
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}),
            json!({"activeDeadlineSeconds": 3600}),
        ),
    )
    .await;
    for (name, pods) in [
        ("best-effort", "1"),
        ("not-best-effort", "1"),
        ("terminating", "1"),
        ("not-terminating", "1"),
    ] {
        wait_for(&client, ns, name, &[("pods", pods)]).await;
    }
    delete(&client, ns, "v1", "Pod", "plain").await;
    wait_for(&client, ns, "best-effort", &[("pods", "0")]).await;
    wait_for(&client, ns, "not-terminating", &[("pods", "0")]).await;
    // A pod that finished no longer counts.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    pods.patch_status(
        "bounded",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    wait_for(&client, ns, "not-best-effort", &[("pods", "0")]).await;
    wait_for(&client, ns, "terminating", &[("pods", "0")]).await;
}

#[tokio::test]
async fn a_status_written_by_someone_else_is_put_back() {
    let (_server, client) = start().await;
    let ns = "rewritten";
    namespace(&client, ns).await;
    create(
        &client,
        ns,
        quota("q", json!({"hard": {"cpu": "1", "memory": "1Gi"}})),
    )
    .await;
    wait_for(&client, ns, "q", &[("cpu", "0"), ("memory", "0")]).await;
    let api: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    api.patch_status(
        "q",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"hard": {"cpu": "2", "memory": "2Gi"}}})),
    )
    .await
    .unwrap();
    wait_for(&client, ns, "q", &[("cpu", "0"), ("memory", "0")]).await;
    let q = api.get("q").await.unwrap();
    assert_eq!(q.status.unwrap().hard.unwrap()["cpu"].0, "1");
}
