//! Recording against a real (in-process) API server: repeats aggregate into one Event with a
//! count, as upstream's recorder does, and different messages stay apart.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use events::{EventType, Recorder};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, ListParams};

fn pod_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some("default".into()),
        uid: Some(format!("uid-{name}")),
        ..Default::default()
    }
}

/// The Events recorded on pod `name` in `default`.
async fn events_on(client: kube::Client, name: &str) -> kube::core::ObjectList<Event> {
    let events: Api<Event> = Api::namespaced(client, "default");
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
}

/// An API server, a client of it, and node-0's kubelet recorder writing through that client.
async fn kubelet_on_node_0() -> (embedded::Embedded, kube::Client, Recorder) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let recorder = Recorder::new(client.clone(), "kubelet", Some("node-0".into()));
    (server, client, recorder)
}

#[tokio::test]
async fn repeats_are_counted_on_one_event() {
    let (_server, client, recorder) = kubelet_on_node_0().await;
    let web = pod_ref("web");
    for _ in 0..3 {
        assert!(
            recorder
                .publish(
                    &web,
                    EventType::Warning,
                    "BackOff",
                    "Back-off restarting failed container"
                )
                .await
                .unwrap()
        );
    }
    recorder
        .publish(
            &web,
            EventType::Normal,
            "Pulled",
            "Successfully pulled image",
        )
        .await
        .unwrap();

    let list = events_on(client, "web").await;
    assert_eq!(
        list.items.len(),
        2,
        "one event per distinct reason and message"
    );
    let backoff = list
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("BackOff"))
        .unwrap();
    assert_eq!(backoff.count, Some(3));
    assert_eq!(backoff.type_.as_deref(), Some("Warning"));
    assert_eq!(
        backoff.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("kubelet")
    );
    assert_eq!(
        backoff.source.as_ref().and_then(|s| s.host.as_deref()),
        Some("node-0")
    );
    assert!(backoff.first_timestamp <= backoff.last_timestamp);
    let pulled = list
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("Pulled"))
        .unwrap();
    assert_eq!(pulled.count, Some(1));
}

#[tokio::test]
async fn the_spam_filter_caps_what_one_object_can_write() {
    let server = embedded::Embedded::memory().await.unwrap();
    let recorder = Recorder::new(server.client(), "kubelet", None);
    let noisy = pod_ref("noisy");
    let mut written = 0;
    for i in 0..40 {
        if recorder
            .publish(&noisy, EventType::Normal, "Tick", &format!("tick {i}"))
            .await
            .unwrap()
        {
            written += 1;
        }
    }
    assert_eq!(
        written, 25,
        "a burst of 25, then nothing until the bucket refills"
    );
    assert!(
        recorder
            .publish(&pod_ref("quiet"), EventType::Normal, "Tick", "tick")
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn ten_similar_messages_combine_into_one_event_that_counts_the_rest() {
    let (_server, client, recorder) = kubelet_on_node_0().await;
    let web = pod_ref("web");
    for i in 0..12 {
        recorder
            .publish(
                &web,
                EventType::Warning,
                "Failed",
                &format!("Error: container c{i} failed"),
            )
            .await
            .unwrap();
    }
    let list = events_on(client, "web").await;
    assert_eq!(list.items.len(), 10, "nine alone, then one combined");
    let combined: Vec<&Event> = list
        .items
        .iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("(combined from similar events): "))
        })
        .collect();
    assert_eq!(combined.len(), 1);
    assert_eq!(
        combined[0].message.as_deref(),
        Some("(combined from similar events): Error: container c11 failed"),
        "the combined event carries the latest message"
    );
    assert_eq!(combined[0].count, Some(3));
}

/// A controller's recorder has no host: upstream's `generateEvent` sets `reportingController`
/// to the source's component and `reportingInstance` to its host, which is empty, so that
/// `kubectl get events -o wide` prints the SOURCE as `replicaset-controller`, not
/// `replicaset-controller, replicaset-controller`.
#[tokio::test]
async fn a_controller_event_names_no_instance() {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let recorder = Recorder::new(client.clone(), "replicaset-controller", None);
    recorder
        .publish(
            &pod_ref("rs"),
            EventType::Normal,
            "SuccessfulCreate",
            "Created pod: rs-1",
        )
        .await
        .unwrap();
    let list = events_on(client, "rs").await;
    let event = &list.items[0];
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("replicaset-controller")
    );
    assert_eq!(event.reporting_instance.as_deref().unwrap_or(""), "");
    let source = event.source.as_ref().unwrap();
    assert_eq!(source.component.as_deref(), Some("replicaset-controller"));
    assert_eq!(source.host, None);
}
