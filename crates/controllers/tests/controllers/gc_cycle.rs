//! The garbage collector and a cycle of owners, as upstream's conformance spec
//! "[sig-api-machinery] Garbage collector should not be blocked by dependency circle": pod1 is
//! owned by pod3, pod2 by pod1, pod3 by pod2, every reference blocking; a foreground deletion of
//! pod1 must take all three, and the collector must go quiet rather than chase the cycle.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use controllers::{
    gc::{self, GarbageCollector},
    runtime::Controller,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::wait::{await_condition, conditions},
};
use serde_json::json;
use std::{sync::Arc, time::Duration};

/// Upstream's spec allows the collector about this long.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Work items the collector may process for the whole cascade, the pods' creation included: it
/// takes about a dozen (three deletions, three releases, each looked at again as the graph
/// changes). A collector that requeues the cycle goes through millions in the same 30 seconds.
const MAX_PASSES: u64 = 100;

/// A garbage collector on a thread and runtime of its own, stopped when dropped. Should it spin
/// (the defect this test guards against: a worker that never waits starves its runtime), it
/// starves only itself, and the test still fails at its deadline instead of hanging with it.
struct Collector(Arc<GarbageCollector>);

impl Collector {
    async fn start(client: Client) -> Self {
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let informers = informer::Informers::new(client);
                let collector = GarbageCollector::new(&informers, gc::Config::default());
                let _ = tx.send(Arc::clone(&collector));
                controllers::runtime::run(collector, informers).await;
            });
        });
        Self(rx.await.unwrap())
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.0.queue().shut_down();
    }
}

async fn pod(pods: &Api<Pod>, name: &str) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "nginx", "image": "nginx"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap()
}

/// Makes `owner` the blocking controller of the pod `name`, with the patch upstream's spec sends.
async fn owned_by(pods: &Api<Pod>, name: &str, owner: &Pod) -> Pod {
    let patch = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "v1", "kind": "Pod", "name": owner.name_any(),
        "uid": owner.uid().unwrap(), "controller": true, "blockOwnerDeletion": true,
    }]}});
    pods.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_foreground_deletion_is_not_blocked_by_a_cycle_of_owners() {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let collector = Collector::start(client.clone()).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pod(&pods, "pod1").await;
    pod(&pods, "pod2").await;
    let pod3 = pod(&pods, "pod3").await;
    let pod1 = owned_by(&pods, "pod1", &pod3).await;
    let pod2 = owned_by(&pods, "pod2", &pod1).await;
    let pod3 = owned_by(&pods, "pod3", &pod2).await;

    let foreground = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod1.uid(),
            resource_version: None,
        }),
        ..DeleteParams::foreground()
    };
    pods.delete("pod1", &foreground).await.unwrap();

    let all_gone = async {
        for p in [&pod1, &pod2, &pod3] {
            let uid = p.uid().unwrap();
            await_condition(pods.clone(), &p.name_any(), conditions::is_deleted(&uid))
                .await
                .unwrap();
        }
    };
    if tokio::time::timeout(TIMEOUT, all_gone).await.is_err() {
        let left: Vec<String> = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| format!("{} finalizers={:?}", p.name_any(), p.finalizers()))
            .collect();
        panic!(
            "the cycle was not collected within {TIMEOUT:?}: left {left:?}, after {} work items",
            collector.0.processed()
        );
    }
    let passes = collector.0.processed();
    assert!(
        passes <= MAX_PASSES,
        "the collector processed {passes} work items for a cascade of three pods"
    );
}
