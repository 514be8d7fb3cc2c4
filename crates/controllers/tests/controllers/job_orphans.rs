//! Pods that carry the Job controller's tracking finalizer but belong to no Job (upstream's
//! orphan pods, `enqueueOrphanPod`/`syncOrphanPod`): the Job controller removes the finalizer,
//! since nothing else will, and a pod that keeps it can never be deleted, nor can its namespace.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use controllers::job::status::TRACKING_FINALIZER;
use k8s_openapi::api::{
    batch::v1::Job,
    core::v1::{Namespace, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The API server with the controllers an orphaning takes: the Job controller, the garbage
/// collector (it strips the Job's references from its pods) and the namespace controller.
async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["job", "garbagecollector", "namespace"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

async fn namespace(client: &Client, name: &str) -> Namespace {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap()
}

fn tracked(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

/// Waits (on a watch, up to [`TIMEOUT`]) until the pod `name` exists and satisfies `want`.
async fn pod_until(pods: &Api<Pod>, name: &str, what: &str, want: impl Fn(&Pod) -> bool) -> Pod {
    tokio::time::timeout(
        TIMEOUT,
        await_condition(pods.clone(), name, move |p: Option<&Pod>| {
            p.is_some_and(&want)
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("pod {name}: {what}"))
    .unwrap()
    .unwrap()
}

/// Waits until the namespace `ns` is gone: emptied by the namespace controller, then removed.
async fn namespace_gone(client: &Client, ns: &Namespace) {
    let api: Api<Namespace> = Api::all(client.clone());
    let (name, uid) = (ns.name_any(), ns.uid().unwrap());
    let gone = await_condition(api.clone(), &name, conditions::is_deleted(&uid));
    if tokio::time::timeout(TIMEOUT, gone).await.is_err() {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &name);
        let left: Vec<String> = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| format!("{} finalizers={:?}", p.name_any(), p.finalizers()))
            .collect();
        panic!(
            "namespace {} stays Terminating, holding {left:?}",
            ns.name_any()
        );
    }
}

#[tokio::test]
async fn a_pod_orphaned_by_its_job_loses_the_tracking_finalizer() {
    let (_server, client) = start().await;
    let ns = namespace(&client, "orphans").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "orphans");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "orphans");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "work"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}},
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let job_uid = job.uid().unwrap();

    let name = embedded::wait_until(&pods, "the Job's pod", TIMEOUT, |p: &Pod| {
        tracked(p) && p.owner_references().iter().any(|r| r.uid == job_uid)
    })
    .await
    .unwrap()
    .name_any();

    // batch/v1's default in upstream: the Job goes, its pods stay, stripped of their reference.
    jobs.delete("work", &DeleteParams::orphan()).await.unwrap();
    tokio::time::timeout(
        TIMEOUT,
        await_condition(jobs.clone(), "work", conditions::is_deleted(&job_uid)),
    )
    .await
    .expect("the garbage collector orphans the pods and releases the Job")
    .unwrap();
    pod_until(&pods, &name, "loses its reference to the Job", |p| {
        p.owner_references().is_empty()
    })
    .await;

    // It completes with no Job to count it: the finalizer must still come off.
    let status = json!({"status": {"phase": "Succeeded", "containerStatuses": [{
        "name": "main", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "",
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let released = pod_until(&pods, &name, "loses the tracking finalizer", |p| {
        !tracked(p)
    })
    .await;
    assert!(released.metadata.deletion_timestamp.is_none());

    Api::<Namespace>::all(client.clone())
        .delete("orphans", &DeleteParams::default())
        .await
        .unwrap();
    namespace_gone(&client, &ns).await;
}

#[tokio::test]
async fn a_pod_with_the_tracking_finalizer_and_no_job_loses_it() {
    let (_server, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "finalizers": [TRACKING_FINALIZER, "example.com/keep"]},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let released = pod_until(&pods, "stray", "loses the tracking finalizer", |p| {
        !tracked(p)
    })
    .await;
    assert_eq!(released.finalizers(), ["example.com/keep"]);
}

/// Upstream's conformance spec "Job should adopt matching orphans and release non-matching pods":
/// a running Job's pod stripped of its owner reference is adopted again.
#[tokio::test]
async fn a_running_job_readopts_a_matching_orphan() {
    let (_server, client) = start().await;
    namespace(&client, "adopt").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "adopt");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "adopt");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "adopt-release"},
        "spec": {"parallelism": 2, "completions": 4, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}},
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let job_uid = job.uid().unwrap();
    let name = embedded::wait_until(&pods, "the Job's pod", TIMEOUT, |p: &Pod| {
        p.owner_references().iter().any(|r| r.uid == job_uid)
    })
    .await
    .unwrap()
    .name_any();

    let strip = json!({"metadata": {"ownerReferences": null}});
    pods.patch(&name, &PatchParams::default(), &Patch::Merge(&strip))
        .await
        .unwrap();
    pod_until(&pods, &name, "is adopted again", |p| {
        p.owner_references()
            .iter()
            .any(|r| r.uid == job_uid && r.controller == Some(true))
    })
    .await;
}
