//! The serviceaccount controller against an in-process API server: every namespace, existing
//! or new, gets its `default` ServiceAccount, and gets it back when it is deleted.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
    runtime::wait::await_condition,
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["serviceaccount"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

/// Waits until `namespace/default` exists; returns its uid.
async fn default_account(client: &Client, namespace: &str) -> String {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let sa = tokio::time::timeout(
        TIMEOUT,
        await_condition(api, "default", |sa: Option<&ServiceAccount>| sa.is_some()),
    )
    .await
    .unwrap_or_else(|_| panic!("no default ServiceAccount in {namespace}"))
    .unwrap()
    .unwrap();
    sa.metadata.uid.unwrap()
}

#[tokio::test]
async fn every_namespace_gets_its_default_service_account() {
    let (_server, client) = start().await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        default_account(&client, ns).await;
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    default_account(&client, "team-a").await;
}

#[tokio::test]
async fn a_deleted_default_service_account_is_recreated() {
    let (_server, client) = start().await;
    let first = default_account(&client, "default").await;
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    api.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    let recreated = tokio::time::timeout(
        TIMEOUT,
        await_condition(api, "default", |sa: Option<&ServiceAccount>| {
            sa.is_some_and(|sa| sa.metadata.uid.as_deref() != Some(first.as_str()))
        }),
    )
    .await
    .expect("the default ServiceAccount comes back")
    .unwrap();
    assert!(recreated.is_some());
}
