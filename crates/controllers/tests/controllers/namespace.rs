//! The namespace controller against an in-process API server: a deleted namespace stays
//! Terminating until its content is gone, then the API server removes it.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Namespace, Pod},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_deleted_namespace_is_emptied_then_removed() {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    let uid = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "team")
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();

    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    // Without the controller the namespace stays, holding its `kubernetes` finalizer.
    let held = namespaces.get("team").await.unwrap();
    assert_eq!(
        held.spec.and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_string()])
    );

    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["namespace"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    tokio::time::timeout(
        TIMEOUT,
        await_condition(namespaces, "team", conditions::is_deleted(&uid)),
    )
    .await
    .expect("the namespace is removed")
    .unwrap();
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        Api::<Deployment>::namespaced(client, "team")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
