//! The volume controller against an in-process API server: a claim that names its class by the
//! `volume.beta.kubernetes.io/storage-class` annotation keeps it (upstream's DefaultStorageClass
//! admission and retroactive defaulting both leave such a claim alone, since
//! `PersistentVolumeClaimHasClass` reads the annotation first) and is provisioned and bound with
//! that class; a claim whose class someone else provisions is marked for that provisioner with
//! upstream's `ExternalProvisioning` event.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::{
    core::v1::{Event, PersistentVolume, PersistentVolumeClaim},
    storage::v1::StorageClass,
};
use kube::{
    Api, Client,
    api::PostParams,
    runtime::{WatchStreamExt, wait::await_condition, watcher},
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let informers = informer::Informers::new(client.clone());
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["persistentvolume-binder"]),
        ..Default::default()
    };
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

async fn class(client: &Client, name: &str, provisioner: &str, default: bool) {
    let sc: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations":
            {"storageclass.kubernetes.io/is-default-class": default.to_string()}},
        "provisioner": provisioner,
        "volumeBindingMode": "Immediate",
    }))
    .unwrap();
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &sc)
        .await
        .unwrap();
}

async fn claim_by_annotation(client: &Client, name: &str, class: &str) {
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name,
            "annotations": {"volume.beta.kubernetes.io/storage-class": class}},
        "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pvc)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_naming_its_class_by_the_beta_annotation_keeps_and_binds_with_it() {
    let (_server, client) = start().await;
    class(
        &client,
        "standard",
        controllers::volume::class::SIMULATED_PROVISIONER,
        true,
    )
    .await;
    class(
        &client,
        "fast",
        controllers::volume::class::SIMULATED_PROVISIONER,
        false,
    )
    .await;
    claim_by_annotation(&client, "data", "fast").await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), "default");
    let bound = tokio::time::timeout(
        TIMEOUT,
        await_condition(
            claims.clone(),
            "data",
            |c: Option<&PersistentVolumeClaim>| {
                c.and_then(|c| c.status.as_ref())
                    .and_then(|s| s.phase.as_deref())
                    == Some("Bound")
            },
        ),
    )
    .await
    .expect("the claim binds")
    .unwrap()
    .unwrap();
    let spec = bound.spec.unwrap();
    assert_eq!(
        spec.storage_class_name, None,
        "the default class was stamped"
    );
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(spec.volume_name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        volume.spec.unwrap().storage_class_name.as_deref(),
        Some("fast")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_an_external_provisioner_is_marked_for_it_with_an_event() {
    let (_server, client) = start().await;
    class(&client, "ebs", "ebs.csi.aws.com", false).await;
    claim_by_annotation(&client, "data", "ebs").await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), "default");
    let marked = tokio::time::timeout(
        TIMEOUT,
        await_condition(
            claims.clone(),
            "data",
            |c: Option<&PersistentVolumeClaim>| {
                c.and_then(|c| c.metadata.annotations.as_ref())
                    .is_some_and(|a| a.contains_key("volume.kubernetes.io/storage-provisioner"))
            },
        ),
    )
    .await
    .expect("the claim is marked for its provisioner")
    .unwrap()
    .unwrap();
    let annotations = marked.metadata.annotations.unwrap();
    for key in [
        "volume.kubernetes.io/storage-provisioner",
        "volume.beta.kubernetes.io/storage-provisioner",
    ] {
        assert_eq!(annotations[key], "ebs.csi.aws.com");
    }
    let events = Api::<Event>::namespaced(client.clone(), "default");
    let want = "waiting for a volume to be created, either by external provisioner \"ebs.csi.aws.com\" or manually created by system administrator";
    let stream = watcher(events, watcher::Config::default()).applied_objects();
    let found = tokio::time::timeout(
        TIMEOUT,
        stream
            .try_filter(|e: &Event| {
                futures::future::ready(e.reason.as_deref() == Some("ExternalProvisioning"))
            })
            .boxed()
            .try_next(),
    )
    .await
    .expect("an ExternalProvisioning event")
    .unwrap()
    .expect("the watch goes on");
    assert_eq!(found.type_.as_deref(), Some("Normal"));
    assert_eq!(found.message.as_deref(), Some(want));
    assert_eq!(found.involved_object.name.as_deref(), Some("data"));
}
