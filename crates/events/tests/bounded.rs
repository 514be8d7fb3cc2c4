//! Recording holds a bounded number of events: an API server that does not answer makes the
//! recorder drop events past its queue, not spawn a task (and keep an event) for each.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use events::{EventType, MAX_QUEUED, Recorder};
use k8s_openapi::api::core::v1::ObjectReference;
use std::sync::Arc;
use store::{Store, faulty::FaultyStore, memory::MemoryStore};

#[tokio::test]
async fn a_stuck_api_server_does_not_grow_the_recorder() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let server = embedded::Embedded::on(store.clone() as Arc<dyn Store>)
        .await
        .unwrap();
    store.hold_writes(true);
    let recorder = Recorder::new(server.client(), "kubelet", Some("node-0".into()));
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    for i in 0..5 * MAX_QUEUED {
        let pod = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(format!("p{i}")),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{i}")),
            ..Default::default()
        };
        recorder.record(&pod, EventType::Normal, "Pulled", "Successfully pulled");
    }
    let alive = metrics.num_alive_tasks().saturating_sub(before);
    assert!(
        alive < 64,
        "{alive} tasks alive for {} recorded events",
        5 * MAX_QUEUED
    );
    store.hold_writes(false);
}
