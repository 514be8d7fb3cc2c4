//! The ServiceAccount token controller against an in-process API server: a token Secret gets a
//! token signed for its ServiceAccount, the CA bundle, its namespace and the ServiceAccount's uid;
//! token Secrets of missing or deleted ServiceAccounts are deleted; Secrets of other types are
//! left alone.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use controllers::{
    root_ca::RootCa,
    serviceaccount_token::{CA_KEY, NAME_ANNOTATION, NAMESPACE_KEY, TOKEN_KEY, UID_ANNOTATION},
};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
    runtime::wait::await_condition,
};
use serde_json::json;
use std::{sync::Arc, time::Duration};

const TIMEOUT: Duration = Duration::from_secs(30);
const CA: &str = "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n";

async fn start() -> (embedded::Embedded, Client, Arc<satoken::Key>) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let key = Arc::new(satoken::Key::generate().unwrap());
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["serviceaccount-token"]),
        root_ca: controllers::root_ca::Config {
            bundle: Some(RootCa::from_pem(CA).unwrap()),
            ..Default::default()
        },
        serviceaccount_token: controllers::serviceaccount_token::Config {
            key: Some(key.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client, key)
}

async fn create_account(client: &Client, name: &str) -> String {
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &sa)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

async fn create_secret(client: &Client, name: &str, account: &str, type_: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {NAME_ANNOTATION: account}},
        "type": type_,
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// Waits until the Secret `name` satisfies `cond` (`None`: it is gone).
async fn wait_for(
    client: &Client,
    name: &str,
    what: &str,
    cond: impl Fn(Option<&Secret>) -> bool,
) -> Option<Secret> {
    let api: Api<Secret> = Api::namespaced(client.clone(), "default");
    tokio::time::timeout(TIMEOUT, await_condition(api, name, cond))
        .await
        .unwrap_or_else(|_| panic!("secret {name}: {what}"))
        .unwrap()
}

fn data(s: &Secret, k: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(k))
        .map(|b| String::from_utf8(b.0.clone()).unwrap())
}

#[tokio::test]
async fn a_token_secret_is_filled_for_its_service_account() {
    let (_server, client, key) = start().await;
    let uid = create_account(&client, "robot").await;
    create_secret(
        &client,
        "robot-token",
        "robot",
        "kubernetes.io/service-account-token",
    )
    .await;
    let secret = wait_for(&client, "robot-token", "filled", |s| {
        s.is_some_and(|s| data(s, TOKEN_KEY).is_some())
    })
    .await
    .unwrap();
    assert_eq!(data(&secret, CA_KEY).as_deref(), Some(CA));
    assert_eq!(data(&secret, NAMESPACE_KEY).as_deref(), Some("default"));
    let annotations = secret.metadata.annotations.clone().unwrap();
    assert_eq!(annotations[UID_ANNOTATION], uid);
    let token = data(&secret, TOKEN_KEY).unwrap();
    let claims: satoken::LegacyClaims = key.verify(&token).unwrap();
    assert_eq!(
        claims,
        satoken::LegacyClaims::new(
            "default",
            &satoken::ObjectRef::new("robot", uid),
            "robot-token"
        )
    );

    // Deleting the ServiceAccount deletes its token.
    Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .delete("robot", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&client, "robot-token", "deleted with its account", |s| {
        s.is_none()
    })
    .await;
}

#[tokio::test]
async fn a_token_secret_of_no_service_account_is_deleted() {
    let (_server, client, _key) = start().await;
    // A Secret of another type naming the same nobody is not this controller's.
    create_secret(&client, "opaque", "nobody", "Opaque").await;
    create_secret(
        &client,
        "orphan",
        "nobody",
        "kubernetes.io/service-account-token",
    )
    .await;
    wait_for(&client, "orphan", "deleted", |s| s.is_none()).await;
    let opaque = Api::<Secret>::namespaced(client.clone(), "default")
        .get("opaque")
        .await
        .unwrap();
    assert_eq!(data(&opaque, TOKEN_KEY), None);
}
