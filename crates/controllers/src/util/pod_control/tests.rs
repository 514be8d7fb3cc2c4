#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use super::*;
use crate::util::expectations::{Expectations, PodExpectations};
use k8s_openapi::api::{
    apps::v1::{ReplicaSet, StatefulSet},
    core::v1::{Event, Namespace},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams},
};
use serde_json::json;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(20);
const KEY: &str = "default/web";

fn owner<K: serde::de::DeserializeOwned>(ns: &str) -> K {
    serde_json::from_value(json!({"metadata": {"name": "web", "namespace": ns, "uid": "u-web"}}))
        .unwrap()
}

fn pod(name: Option<&str>) -> Pod {
    let mut meta = json!({"generateName": "web-", "labels": {"app": "web"}});
    if let Some(n) = name {
        meta = json!({"name": n, "labels": {"app": "web"}});
    }
    serde_json::from_value(json!({
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
    }))
    .unwrap()
}

/// A pod the server refuses (no containers).
fn bad_pod() -> Pod {
    serde_json::from_value(
        json!({"metadata": {"generateName": "web-"}, "spec": {"containers": []}}),
    )
    .unwrap()
}

async fn server() -> (embedded::Embedded, Client, Recorder) {
    let e = embedded::Embedded::memory().await.unwrap();
    let client = e.client();
    let recorder = Recorder::new(client.clone(), "test-controller", None);
    (e, client, recorder)
}

/// Waits for the event with `reason` on the owner and returns its message.
async fn event(client: &Client, ns: &str, reason: &str) -> String {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let found = embedded::wait_until(&api, reason, DEADLINE, |e| {
        e.reason.as_deref() == Some(reason) && e.involved_object.name.as_deref() == Some("web")
    })
    .await
    .unwrap();
    found.message.unwrap_or_default()
}

async fn pod_names(client: &Client, ns: &str) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items.iter().map(ResourceExt::name_any).collect()
}

#[derive(Debug)]
enum Failed {
    Api,
    Prepare(usize),
}

impl From<kube::Error> for Failed {
    fn from(_: kube::Error) -> Self {
        Failed::Api
    }
}

#[tokio::test]
async fn a_failed_batch_stops_the_creations_and_what_will_not_be_seen_is_not_expected() {
    let (_e, client, recorder) = server().await;
    let expectations = Expectations::default();
    let rs: ReplicaSet = owner("default");
    let control = PodControl::new(&client, &recorder, &rs, KEY, &expectations);
    // Batches 1, 2, 4 (items 3-6, of which the 5th fails to prepare), then stop: 3 skipped.
    let writes = control
        .create((0..10).collect(), 1, |i| async move {
            if i == 4 {
                Err(Failed::Prepare(i))
            } else {
                Ok(pod(None))
            }
        })
        .await;
    assert_eq!((writes.written, writes.moot, writes.skipped), (6, 0, 3));
    assert!(
        matches!(writes.errors[..], [Failed::Prepare(4)]),
        "{:?}",
        writes.errors
    );
    assert_eq!(pod_names(&client, "default").await.len(), 6);
    // Only the six pods made are still expected.
    for _ in 0..5 {
        expectations.creation_observed(KEY);
    }
    assert!(!expectations.satisfied(KEY));
    expectations.creation_observed(KEY);
    assert!(expectations.satisfied(KEY));
    let message = event(&client, "default", "SuccessfulCreate").await;
    assert!(message.starts_with("Created pod: web-"), "{message}");
}

#[tokio::test]
async fn a_refused_creation_is_an_event_an_error_and_no_expectation() {
    let (_e, client, recorder) = server().await;
    let expectations = Expectations::default();
    let rs: ReplicaSet = owner("default");
    let control = PodControl::new(&client, &recorder, &rs, KEY, &expectations);
    // The second batch (two refused pods) fails; the rest are skipped.
    let pods = vec![pod(None), bad_pod(), bad_pod(), pod(None), pod(None)];
    let writes = control.create_pods(pods, 1).await;
    assert_eq!((writes.written, writes.skipped), (1, 2));
    assert_eq!(writes.errors.len(), 2);
    assert!(
        api_error::is_status(&writes.errors[0], 422),
        "{:?}",
        writes.errors
    );
    expectations.creation_observed(KEY);
    assert!(expectations.satisfied(KEY));
    let message = event(&client, "default", "FailedCreate").await;
    assert!(message.starts_with("Error creating: "), "{message}");
    assert!(
        !message.contains("Status {"),
        "the status message, not a dump: {message}"
    );
}

#[tokio::test]
async fn creations_in_a_namespace_being_deleted_are_moot() {
    let (_e, client, recorder) = server().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    // No namespace controller runs here: the namespace stays Terminating.
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let expectations = Expectations::default();
    let rs: ReplicaSet = owner("doomed");
    let control = PodControl::new(&client, &recorder, &rs, "doomed/web", &expectations);
    let writes = control.create_pods(vec![pod(None); 3], 1).await;
    assert_eq!((writes.written, writes.moot, writes.skipped), (0, 3, 0));
    assert!(writes.errors.is_empty(), "{:?}", writes.errors);
    assert!(expectations.satisfied("doomed/web"));
}

#[tokio::test]
async fn a_delete_of_a_pod_gone_already_is_moot_and_not_expected() {
    let (_e, client, recorder) = server().await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &pod(Some("real")))
        .await
        .unwrap();
    let expectations = Expectations::default();
    let rs: ReplicaSet = owner("default");
    let control = PodControl::new(&client, &recorder, &rs, KEY, &expectations);
    let changes = vec![
        PodChange::Delete(Target::named("real")),
        PodChange::Delete(Target::named("ghost")),
    ];
    let writes = control.change(changes, false).await;
    assert_eq!((writes.written, writes.moot), (1, 1));
    assert!(writes.errors.is_empty(), "{:?}", writes.errors);
    // The ghost's deletion is not waited for; the real one's is.
    assert!(!expectations.satisfied(KEY));
    expectations.deletion_observed(KEY, "default/real");
    assert!(expectations.satisfied(KEY));
    assert_eq!(
        event(&client, "default", "SuccessfulDelete").await,
        "Deleted pod: real"
    );
}

#[tokio::test]
async fn a_stateful_set_deletes_by_uid_and_words_its_events_as_upstream() {
    let (_e, client, recorder) = server().await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let web0 = api
        .create(&PostParams::default(), &pod(Some("web-0")))
        .await
        .unwrap();
    api.create(&PostParams::default(), &pod(Some("web-1")))
        .await
        .unwrap();
    let expectations = PodExpectations::new(crate::util::expectations::EXPECTATIONS_TTL);
    let sts: StatefulSet = owner("default");
    let control = PodControl::new(&client, &recorder, &sts, KEY, &expectations).for_stateful_set();
    // web-1 as a stale cache saw it: another pod of that name (uid) since.
    let mut stale = pod(Some("web-1"));
    stale.metadata.uid = Some("an-older-uid".into());
    let patch = json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
    let changes = vec![
        PodChange::InPlace(Target::of(&web0), patch),
        PodChange::Delete(Target::of(&stale)),
    ];
    let writes = control.change(changes, true).await;
    assert_eq!((writes.written, writes.moot), (1, 1));
    assert!(writes.errors.is_empty(), "{:?}", writes.errors);
    assert_eq!(pod_names(&client, "default").await, ["web-0", "web-1"]);
    // The in-place update is awaited, the moot delete is not.
    assert!(!expectations.satisfied(KEY));
    expectations.in_place_observed(KEY, "default/web-0");
    assert!(expectations.satisfied(KEY));
    assert_eq!(
        event(&client, "default", "SuccessfulUpdatePodInPlace").await,
        "update Pod web-0 in StatefulSet web in place successful"
    );
    // A pod of that name existing already is the cache lagging: moot, not a failure.
    let writes = control.create_pods(vec![pod(Some("web-0"))], 1).await;
    assert_eq!((writes.written, writes.moot), (0, 1));
    assert!(expectations.satisfied(KEY));
}
