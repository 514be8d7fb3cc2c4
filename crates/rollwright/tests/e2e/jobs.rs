//! Jobs and CronJobs end to end, with real kubectl against a control plane whose simulated
//! kubelets run Job pods to completion (the fault profile's `runFor`): completions with bounded
//! parallelism, a back-off limit, the Indexed mode, a CronJob on a scaled clock with history
//! limits, and `kubectl create job --from=cronjob/...`.

use crate::common;

use common::Cluster;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::{
    batch::v1::{CronJob, Job},
    core::v1::Pod,
};
use kube::{Api, api::ListParams, runtime::watcher};
use rollwright::components::{Components, ControllerSettings};
use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Fast pods: they start in a moment and run for a second.
const PROFILE: &str = "startDelay: 100ms\nreadinessDelay: 100ms\nrunFor: 1s\n";

/// A whole cluster (3 simulated nodes, scheduler, controllers with `settings`) whose Job pods
/// run for a second; the profile's directory lives as long as the cluster.
async fn cluster(settings: ControllerSettings) -> (Cluster, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = dir.path().join("profile.yaml");
    std::fs::write(&profile, PROFILE).expect("profile written");
    let c = Cluster::start_with(Components {
        nodes: Some(nodesim::NodeSim {
            nodes: 3,
            ..Default::default()
        }),
        profile: Some(profile),
        scheduler: Some(Default::default()),
        controllers: Some(settings),
    })
    .await;
    (c, dir)
}

/// Controller settings whose failed-pod back-off is short (upstream's 10s doubling would make
/// the back-off limit test wait a minute).
fn quick_backoff() -> ControllerSettings {
    let mut s = ControllerSettings::default();
    s.job.pod_backoff = Duration::from_millis(100);
    s
}

/// `kubectl wait --for=condition=<condition> job/<name>`; on a time-out the test fails with the
/// Job and its pods as they are.
async fn wait_for(c: &Cluster, condition: &str, name: &str) {
    let out = c
        .kubectl_raw(
            &[
                "wait",
                &format!("--for=condition={condition}"),
                &format!("job/{name}"),
                "--timeout=45s",
            ],
            None,
        )
        .await;
    if !out.status.success() {
        let job = c.kubectl(&["get", "job", name, "-o", "yaml"]).await;
        let pods = c
            .kubectl(&[
                "get",
                "pods",
                "-l",
                &format!("job-name={name}"),
                "-o",
                "yaml",
            ])
            .await;
        panic!(
            "job/{name} never met {condition}: {}\n{job}\n{pods}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn job_yaml(name: &str, spec: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n{spec}  template:\n    metadata:\n      annotations: {{{annotations}}}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: work\n        image: busybox:1.36\n        command: [\"sh\", \"-c\", \"echo done\"]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_completes_five_pods_at_most_two_at_a_time() {
    let (c, _dir) = cluster(quick_backoff()).await;
    let pods: Api<Pod> = Api::namespaced(c.client().await, "default");
    // The watcher has listed before the Job exists, so it sees every pod of it.
    let mut stream = watcher(
        pods,
        watcher::Config::default().labels("batch.kubernetes.io/job-name=pi"),
    )
    .boxed();
    while let Some(event) = stream.try_next().await.expect("watch") {
        if matches!(event, watcher::Event::InitDone) {
            break;
        }
    }
    let watch = tokio::spawn(async move {
        // Pod uid -> whether it is running (not finished, not being deleted).
        let mut running: BTreeMap<String, bool> = BTreeMap::new();
        let mut most = 0;
        let mut seen = BTreeSet::new();
        while let Ok(Some(event)) = stream.try_next().await {
            let (pod, gone) = match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => (p, false),
                watcher::Event::Delete(p) => (p, true),
                _ => continue,
            };
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            seen.insert(uid.clone());
            let phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            let active = !gone
                && pod.metadata.deletion_timestamp.is_none()
                && phase != "Succeeded"
                && phase != "Failed";
            running.insert(uid, active);
            most = most.max(running.values().filter(|a| **a).count());
            if seen.len() >= 5 && running.values().all(|a| !*a) {
                break;
            }
        }
        (most, seen.len())
    });
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &job_yaml("pi", "  completions: 5\n  parallelism: 2\n", ""),
    )
    .await;
    wait_for(&c, "complete", "pi").await;
    let (most, created) = tokio::time::timeout(TIMEOUT, watch)
        .await
        .expect("the watcher saw every pod finish")
        .expect("watcher task");
    assert_eq!(created, 5, "exactly five pods ran");
    assert!(most <= 2, "{most} pods ran at once; parallelism is 2");
    assert_eq!(most, 2, "parallelism was used");

    let job = c.kubectl_json(&["get", "job", "pi", "-o", "json"]).await;
    let status = &job["status"];
    assert_eq!(status["succeeded"], 5);
    // A zero count is absent, as upstream's omitempty integers serialize.
    assert_eq!(status.get("active"), None);
    assert!(status["completionTime"].is_string());
    let types: Vec<&str> = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "True")
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["SuccessCriteriaMet", "Complete"]);
    let selector = &job["spec"]["selector"]["matchLabels"];
    assert_eq!(
        selector["batch.kubernetes.io/controller-uid"],
        job["metadata"]["uid"]
    );
    let pods = c
        .kubectl_json(&["get", "pods", "-l", "job-name=pi", "-o", "json"])
        .await;
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    for p in items {
        assert_eq!(p["status"]["phase"], "Succeeded");
        let labels = &p["metadata"]["labels"];
        for l in [
            "batch.kubernetes.io/controller-uid",
            "batch.kubernetes.io/job-name",
            "controller-uid",
            "job-name",
        ] {
            assert!(labels[l].is_string(), "pod label {l}");
        }
        assert!(
            p["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty()),
            "the tracking finalizer is gone once counted"
        );
        let terminated = &p["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(terminated["reason"], "Completed");
        assert_eq!(terminated["exitCode"], 0);
    }
    // kubectl prints a STATUS column from 1.29 on; the condition says it to any version.
    let out = c.kubectl(&["get", "job", "pi"]).await;
    assert!(out.contains("5/5"), "{out}");
    let complete = c
        .kubectl(&[
            "get",
            "job",
            "pi",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Complete\")].status}",
        ])
        .await;
    assert_eq!(complete.trim(), "True");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_stops_at_its_backoff_limit() {
    let (c, _dir) = cluster(quick_backoff()).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &job_yaml(
            "broken",
            "  backoffLimit: 2\n",
            "rollwright.io/exit-code: \"3\"",
        ),
    )
    .await;
    wait_for(&c, "failed", "broken").await;
    let job = c
        .kubectl_json(&["get", "job", "broken", "-o", "json"])
        .await;
    let status = &job["status"];
    assert_eq!(
        status["failed"], 3,
        "backoffLimit 2: the third failure ends it"
    );
    // A zero count is absent, as upstream's omitempty integers serialize.
    assert_eq!(status.get("active"), None);
    let failed = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Failed")
        .expect("a Failed condition")
        .clone();
    assert_eq!(failed["reason"], "BackoffLimitExceeded");
    assert_eq!(
        failed["message"],
        "Job has reached the specified backoff limit"
    );
    let pods = c
        .kubectl_json(&["get", "pods", "-l", "job-name=broken", "-o", "json"])
        .await;
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "no pod after the limit");
    for p in items {
        assert_eq!(p["status"]["phase"], "Failed");
        let terminated = &p["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(
            (&terminated["exitCode"], &terminated["reason"]),
            (&3.into(), &"Error".into())
        );
    }
    common::wait_event(
        c.client().await,
        "default",
        Some("broken"),
        "BackoffLimitExceeded",
        "",
    )
    .await;
    let events = c
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=broken",
        ])
        .await;
    assert!(events.contains("BackoffLimitExceeded"), "{events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_runs_each_index_once() {
    let (c, _dir) = cluster(quick_backoff()).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &job_yaml(
            "shards",
            "  completions: 4\n  parallelism: 2\n  completionMode: Indexed\n",
            "",
        ),
    )
    .await;
    c.kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/shards",
        "--timeout=45s",
    ])
    .await;
    let job = c
        .kubectl_json(&["get", "job", "shards", "-o", "json"])
        .await;
    assert_eq!(job["status"]["completedIndexes"], "0-3");
    assert_eq!(job["status"]["succeeded"], 4);
    let pods = c
        .kubectl_json(&["get", "pods", "-l", "job-name=shards", "-o", "json"])
        .await;
    let mut indexes: Vec<String> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let i = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(
                p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"],
                i.as_str()
            );
            assert_eq!(p["spec"]["hostname"], format!("shards-{i}"));
            assert!(
                p["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("shards-{i}-"))
            );
            i
        })
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2", "3"]);
}

/// A CronJob every minute on a clock where a minute passes in a second: Jobs named after their
/// scheduled minute appear, `lastScheduleTime` and `lastSuccessfulTime` follow, and the history
/// limit deletes the oldest finished Job. `kubectl create job --from=cronjob/...` makes a Job from
/// its template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_fires_on_a_scaled_clock_and_keeps_its_history() {
    let mut settings = quick_backoff();
    settings.cronjob.clock = controllers::cronjob::Clock::scaled(60.0);
    let (c, _dir) = cluster(settings).await;
    let jobs: Api<Job> = Api::namespaced(c.client().await, "default");
    let mut stream = watcher(jobs.clone(), watcher::Config::default()).boxed();
    while let Some(event) = stream.try_next().await.expect("watch") {
        if matches!(event, watcher::Event::InitDone) {
            break;
        }
    }
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: tick\nspec:\n  schedule: \"* * * * *\"\n  concurrencyPolicy: Forbid\n  successfulJobsHistoryLimit: 1\n  jobTemplate:\n    metadata:\n      labels:\n        from: tick\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: work\n            image: busybox:1.36\n",
    )
    .await;
    // Until a Job of the CronJob was deleted by the history limit after another completed.
    let history = tokio::time::timeout(TIMEOUT, async {
        let mut created: Vec<String> = Vec::new();
        let mut deleted: Vec<String> = Vec::new();
        while let Ok(Some(event)) = stream.try_next().await {
            match event {
                watcher::Event::Apply(j) => {
                    let name = j.metadata.name.clone().unwrap_or_default();
                    if name.starts_with("tick-") && !created.contains(&name) {
                        created.push(name);
                    }
                }
                watcher::Event::Delete(j) => {
                    deleted.push(j.metadata.name.clone().unwrap_or_default());
                    if !deleted.is_empty() && created.len() >= 3 {
                        return (created, deleted);
                    }
                }
                _ => {}
            }
        }
        panic!("the watch ended");
    })
    .await;
    let (created, deleted) = history.expect("three Jobs were created and an old one was pruned");
    let first = Api::<Job>::get_opt(&jobs, &created[0]).await.expect("get");
    assert!(
        deleted.contains(&created[0]) || first.is_none(),
        "the oldest goes first: {created:?} {deleted:?}"
    );
    for name in &created {
        let minutes: i64 = name
            .strip_prefix("tick-")
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("{name} is named after its scheduled minute"));
        assert!(minutes > 0);
    }
    let cj: CronJob = Api::namespaced(c.client().await, "default")
        .get("tick")
        .await
        .expect("the CronJob");
    let status = cj.status.expect("status");
    assert!(status.last_schedule_time.is_some());
    assert!(status.last_successful_time.is_some());
    let listed = jobs
        .list(&ListParams::default().labels("from=tick"))
        .await
        .expect("list");
    for j in &listed.items {
        let annotations = j.metadata.annotations.clone().unwrap_or_default();
        assert!(
            annotations.contains_key("batch.kubernetes.io/cronjob-scheduled-timestamp"),
            "{:?}",
            j.metadata.name
        );
        let owner = &j.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("CronJob", "tick")
        );
    }
    // Suspended, no more scheduled Jobs; a larger history keeps the manual Job, which may start
    // in the same second as the last scheduled one (ties sort by name, as upstream's).
    c.kubectl(&[
        "patch",
        "cronjob",
        "tick",
        "-p",
        r#"{"spec":{"suspend":true,"successfulJobsHistoryLimit":5}}"#,
    ])
    .await;
    c.kubectl(&["create", "job", "manual", "--from=cronjob/tick"])
        .await;
    c.kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/manual",
        "--timeout=45s",
    ])
    .await;
    let manual = c
        .kubectl_json(&["get", "job", "manual", "-o", "json"])
        .await;
    assert_eq!(
        manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    assert_eq!(manual["metadata"]["labels"]["from"], "tick");
}
