//! The Job and TTL-after-finished controllers against an in-process API server with no kubelet:
//! the test plays the kubelet by writing pod phases, so it decides when and how pods end.
//! Suspension, the active deadline, the pod failure policy and the TTL after finishing. Pods
//! never bound to a node are deleted at once by the API server.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::{batch::v1::Job, core::v1::Pod};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::{wait::await_condition, watcher},
};
use serde_json::{Value, json};
use std::{collections::BTreeMap, time::Duration};

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["job", "ttl-after-finished"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

async fn create_job(client: &Client, name: &str, spec: Value) -> Job {
    let mut spec = spec;
    spec["template"] = json!({"spec": {"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox"}]}});
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap();
    Api::<Job>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &job)
        .await
        .unwrap()
}

/// Waits until the Job satisfies `want`.
async fn job_until(client: &Client, name: &str, what: &str, want: impl Fn(&Job) -> bool) -> Job {
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, name, move |j: Option<&Job>| j.is_some_and(&want)),
    )
    .await
    .unwrap_or_else(|_| panic!("job/{name}: {what}"))
    .unwrap()
    .unwrap()
}

fn condition(job: &Job, type_: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

async fn pods_of(client: &Client, job: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .unwrap()
        .items
}

/// Waits on a watch until the Job has exactly `n` active pods (not finished, not being deleted).
async fn active_pods(client: &Client, job: &str, n: usize) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let config = watcher::Config::default().labels(&format!("job-name={job}"));
    let mut stream = watcher(api, config).boxed();
    let found = tokio::time::timeout(TIMEOUT, async {
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        let mut listed = false;
        while let Some(event) = stream.try_next().await.unwrap() {
            match event {
                watcher::Event::Init => pods.clear(),
                watcher::Event::InitDone => listed = true,
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    pods.insert(p.metadata.uid.clone().unwrap(), p);
                }
                watcher::Event::Delete(p) => {
                    pods.remove(&p.metadata.uid.clone().unwrap());
                }
            }
            let active: Vec<Pod> = pods
                .values()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && !matches!(
                            p.status.as_ref().and_then(|s| s.phase.as_deref()),
                            Some("Succeeded" | "Failed")
                        )
                })
                .cloned()
                .collect();
            if listed && active.len() == n {
                return active;
            }
        }
        panic!("the watch ended");
    })
    .await;
    found.unwrap_or_else(|_| panic!("job/{job} never had {n} active pods"))
}

/// Ends a pod as a kubelet would: phase and the container's terminated state.
async fn end_pod(client: &Client, pod: &Pod, phase: &str, exit_code: i32) {
    let status = json!({"status": {"phase": phase, "containerStatuses": [{
        "name": "main", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "",
        "state": {"terminated": {"exitCode": exit_code,
            "reason": if exit_code == 0 { "Completed" } else { "Error" },
            "finishedAt": jiff::Timestamp::now().to_string()}}}]}});
    Api::<Pod>::namespaced(client.clone(), "default")
        .patch_status(
            pod.metadata.name.as_deref().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_suspended_job_runs_nothing_until_resumed() {
    let (_server, client) = start().await;
    create_job(
        &client,
        "later",
        json!({"suspend": true, "parallelism": 2, "completions": 2}),
    )
    .await;
    let job = job_until(&client, "later", "Suspended", |j| {
        condition(j, "Suspended").is_some_and(|(s, _)| s == "True")
    })
    .await;
    assert_eq!(condition(&job, "Suspended").unwrap().1, "JobSuspended");
    assert!(job.status.unwrap().start_time.is_none());
    assert!(pods_of(&client, "later").await.is_empty());

    Api::<Job>::namespaced(client.clone(), "default")
        .patch(
            "later",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"suspend": false}})),
        )
        .await
        .unwrap();
    let job = job_until(&client, "later", "resumed", |j| {
        condition(j, "Suspended").is_some_and(|(s, _)| s == "False")
    })
    .await;
    assert_eq!(condition(&job, "Suspended").unwrap().1, "JobResumed");
    let pods = active_pods(&client, "later", 2).await;
    for p in &pods {
        assert_eq!(
            p.metadata.finalizers.as_deref(),
            Some(&["batch.kubernetes.io/job-tracking".to_string()][..])
        );
    }
    for p in &pods {
        end_pod(&client, p, "Succeeded", 0).await;
    }
    let job = job_until(&client, "later", "Complete", |j| {
        condition(j, "Complete").is_some_and(|(s, _)| s == "True")
    })
    .await;
    assert_eq!(job.status.unwrap().succeeded, Some(2));
}

#[tokio::test]
async fn a_job_past_its_deadline_fails() {
    let (_server, client) = start().await;
    create_job(&client, "slow", json!({"activeDeadlineSeconds": 1})).await;
    // The deadline passes with the pod running: FailureTarget, the pod deleted (never bound, it
    // goes at once), counted as failed, then Failed. (Not waiting to see the pod active first:
    // it may live less than the second a watch takes to list; `failed: 1` below says it ran.)
    let job = job_until(&client, "slow", "Failed", |j| {
        condition(j, "Failed").is_some_and(|(s, _)| s == "True")
    })
    .await;
    assert_eq!(condition(&job, "Failed").unwrap().1, "DeadlineExceeded");
    assert_eq!(
        condition(&job, "FailureTarget").unwrap(),
        ("True".into(), "DeadlineExceeded".into())
    );
    let status = job.status.unwrap();
    // No pod is active: upstream's omitempty `active` is absent rather than 0.
    assert_eq!((status.failed, status.active), (Some(1), None));
}

#[tokio::test]
async fn the_pod_failure_policy_fails_or_ignores() {
    let (_server, client) = start().await;
    create_job(
        &client,
        "picky",
        json!({"backoffLimit": 6, "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [7]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        ]}}),
    )
    .await;
    let first = active_pods(&client, "picky", 1).await;
    end_pod(&client, &first[0], "Failed", 7).await;
    // Ignored: replaced, and not counted.
    let second = active_pods(&client, "picky", 1).await;
    assert_ne!(second[0].metadata.uid, first[0].metadata.uid);
    end_pod(&client, &second[0], "Failed", 42).await;
    let job = job_until(&client, "picky", "Failed", |j| {
        condition(j, "Failed").is_some_and(|(s, _)| s == "True")
    })
    .await;
    let status = job.status.clone().unwrap();
    let failed = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(failed.reason.as_deref(), Some("PodFailurePolicy"));
    assert!(
        failed
            .message
            .unwrap()
            .ends_with("failed with exit code 42 matching FailJob rule at index 1"),
    );
    assert_eq!(status.failed, Some(1), "the ignored failure is not counted");
}

#[tokio::test]
async fn a_finished_job_is_deleted_after_its_ttl() {
    let (_server, client) = start().await;
    create_job(&client, "brief", json!({"ttlSecondsAfterFinished": 0})).await;
    let pods = active_pods(&client, "brief", 1).await;
    end_pod(&client, &pods[0], "Succeeded", 0).await;
    // Foreground deletion: the Job is marked deleted (the garbage collector, not running here,
    // would remove it after its pods).
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, "brief", |j: Option<&Job>| {
            j.is_none_or(|j| j.metadata.deletion_timestamp.is_some())
        }),
    )
    .await
    .expect("the TTL controller deletes the finished Job")
    .unwrap();
}
