//! The root CA certificate publisher against an in-process API server: every namespace gets
//! `kube-root-ca.crt` with the bundle, gets it back when it is deleted or changed, and a
//! terminating namespace is not given one; without a bundle the controller does not run.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use controllers::root_ca::{CA_KEY, CONFIG_MAP, DESCRIPTION, DESCRIPTION_ANNOTATION, RootCa};
use informer::{Change, Informers};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, PostParams},
    runtime::wait::await_condition,
};
use serde_json::json;
use std::{collections::BTreeMap, time::Duration};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A bundle of one (synthetic) certificate: the controller publishes it verbatim.
fn bundle() -> RootCa {
    RootCa::from_pem("-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n").unwrap()
}

fn settings(bundle: Option<RootCa>) -> controllers::Settings {
    controllers::Settings {
        enabled: controllers::Selection::only(["root-ca-cert-publisher"]),
        root_ca: controllers::root_ca::Config {
            bundle,
            // One worker, as upstream runs it: a terminating namespace's key queued before a
            // sentinel's is synced before it.
            run: controllers::runtime::Config {
                workers: 1,
                ..Default::default()
            },
        },
        ..Default::default()
    }
}

async fn start() -> (embedded::Embedded, Client, Informers) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let informers = Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings(Some(bundle()))).unwrap());
    (server, client, informers)
}

async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

fn is_published(cm: &ConfigMap) -> bool {
    let want = BTreeMap::from([(CA_KEY.to_string(), bundle().pem().to_string())]);
    cm.data.as_ref() == Some(&want)
        && cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
            .map(String::as_str)
            == Some(DESCRIPTION)
}

/// Waits until `namespace`'s ConfigMap satisfies `cond`; returns it.
async fn wait_for(
    client: &Client,
    namespace: &str,
    what: &str,
    cond: impl Fn(&ConfigMap) -> bool,
) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, CONFIG_MAP, move |cm: Option<&ConfigMap>| {
            cm.is_some_and(&cond)
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("{namespace}/{CONFIG_MAP}: {what}"))
    .unwrap()
    .unwrap()
}

async fn published(client: &Client, namespace: &str) -> ConfigMap {
    wait_for(client, namespace, "published", is_published).await
}

#[tokio::test]
async fn every_namespace_gets_the_bundle() {
    let (_server, client, _informers) = start().await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        published(&client, ns).await;
    }
    create_namespace(&client, "team-a").await;
    let cm = published(&client, "team-a").await;
    assert_eq!(cm.binary_data, None);
}

#[tokio::test]
async fn a_deleted_config_map_comes_back() {
    let (_server, client, _informers) = start().await;
    let first = published(&client, "default").await.metadata.uid.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.delete(CONFIG_MAP, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&client, "default", "recreated", |cm| {
        is_published(cm) && cm.metadata.uid.as_deref() != Some(first.as_str())
    })
    .await;
}

#[tokio::test]
async fn changed_data_and_a_dropped_description_are_restored() {
    let (_server, client, _informers) = start().await;
    let mut cm = published(&client, "default").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    // Someone else's data: replaced by exactly the bundle; their label and annotation stay.
    cm.data = Some(BTreeMap::from([
        (CA_KEY.to_string(), "tampered".to_string()),
        ("extra".to_string(), "x".to_string()),
    ]));
    cm.metadata.labels = Some(BTreeMap::from([("mine".into(), "yes".into())]));
    cm.metadata
        .annotations
        .get_or_insert_default()
        .insert("other".into(), "kept".into());
    let changed = api
        .replace(CONFIG_MAP, &PostParams::default(), &cm)
        .await
        .unwrap();
    let changed_rv = changed.metadata.resource_version.clone();
    let restored = wait_for(&client, "default", "data restored", |cm| {
        is_published(cm) && cm.metadata.resource_version != changed_rv
    })
    .await;
    assert_eq!(
        restored
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get("mine")
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(
        restored
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .get("other")
            .map(String::as_str),
        Some("kept")
    );

    // The description dropped: set again.
    let mut cm = restored;
    cm.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(DESCRIPTION_ANNOTATION);
    let changed = api
        .replace(CONFIG_MAP, &PostParams::default(), &cm)
        .await
        .unwrap();
    let changed_rv = changed.metadata.resource_version.clone();
    wait_for(&client, "default", "description restored", |cm| {
        is_published(cm) && cm.metadata.resource_version != changed_rv
    })
    .await;
}

#[tokio::test]
async fn a_terminating_namespace_is_not_given_one() {
    let (_server, client, informers) = start().await;
    create_namespace(&client, "leaving").await;
    published(&client, "leaving").await;

    // Without the namespace controller, the deleted namespace stays Terminating.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("leaving", &DeleteParams::default())
        .await
        .unwrap();
    let ns = namespaces.get("leaving").await.unwrap();
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );

    // Learn when the controller's cache (shared with this test) sees the ConfigMap go: its
    // handler has queued the namespace by then.
    let (seen_tx, mut seen) = tokio::sync::watch::channel(false);
    let _sub = informers
        .dynamic(&ApiResource::erase::<ConfigMap>(&()))
        .subscribe(move |c: &Change<DynamicObject>| {
            if let Change::Deleted(cm) = c
                && cm.metadata.namespace.as_deref() == Some("leaving")
            {
                seen_tx.send_replace(true);
            }
        });
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "leaving");
    api.delete(CONFIG_MAP, &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(TIMEOUT, seen.wait_for(|s| *s))
        .await
        .expect("the cache sees the deletion")
        .unwrap();

    // A namespace queued after it: once its ConfigMap exists, the single worker has synced the
    // terminating one.
    create_namespace(&client, "sentinel").await;
    published(&client, "sentinel").await;
    assert!(api.get_opt(CONFIG_MAP).await.unwrap().is_none());
}

#[tokio::test]
async fn without_a_bundle_the_publisher_does_not_run() {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let informers = Informers::new(client.clone());
    // The controllers' future ends: the publisher's supervisor returns at once.
    tokio::time::timeout(
        TIMEOUT,
        controllers::run(&informers, &settings(None)).unwrap(),
    )
    .await
    .expect("the publisher does not start");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(api.get_opt(CONFIG_MAP).await.unwrap().is_none());
}
