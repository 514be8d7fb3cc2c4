//! The CronJob controller against an in-process API server, on a clock where a minute passes in
//! a second. No Job controller runs: a Job stays running until the test marks it finished, so
//! the test decides what is active. What upstream's conformance specs check: `Replace` leaves at
//! most one Job undeleted at any moment and lists the newest as active, `Allow` lists several
//! running side by side, `Forbid` skips start times while one runs (`JobAlreadyActive`), a Job
//! deleted from under the CronJob leaves the active list with `MissingJob`, a finished one with
//! `SawCompletedJob`, and none of this raises `UnexpectedJob` or a spurious `MissingJob`.

use k8s_openapi::api::{
    batch::v1::{CronJob, Job},
    core::v1::Event,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy},
    runtime::{WatchStreamExt, wait::await_condition, watcher},
};
use serde_json::json;
use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
    time::Duration,
};

const TIMEOUT: Duration = Duration::from_secs(60);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let mut settings = controllers::Settings {
        enabled: controllers::Selection::only(["cronjob"]),
        ..Default::default()
    };
    settings.cronjob.clock = controllers::cronjob::Clock::scaled(60.0);
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

/// A CronJob every minute whose Jobs sleep for 300 seconds, as upstream's e2e fixture.
async fn create_cron_job(client: &Client, name: &str, policy: &str) {
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "schedule": "*/1 * * * ?",
            "concurrencyPolicy": policy,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "300"]}]
            }}}}
        }
    }))
    .unwrap();
    Api::<CronJob>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cj)
        .await
        .unwrap();
}

fn active(cj: &CronJob) -> Vec<String> {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

async fn cron_job_until(
    client: &Client,
    name: &str,
    what: &str,
    want: impl Fn(&CronJob) -> bool,
) -> CronJob {
    let api: Api<CronJob> = Api::namespaced(client.clone(), "default");
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api, name, move |c: Option<&CronJob>| c.is_some_and(&want)),
    )
    .await
    .unwrap_or_else(|_| panic!("cronjob/{name}: {what}"))
    .unwrap()
    .unwrap()
}

async fn wait_event(client: &Client, object: &str, reason: &str) -> Event {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    embedded::wait_until(&api, &format!("{reason} on {object}"), TIMEOUT, |e| {
        e.involved_object.name.as_deref() == Some(object) && e.reason.as_deref() == Some(reason)
    })
    .await
    .unwrap()
}

async fn reasons(client: &Client, object: &str) -> BTreeMap<String, i32> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut out = BTreeMap::new();
    for e in api.list(&ListParams::default()).await.unwrap().items {
        if e.involved_object.name.as_deref() == Some(object) {
            *out.entry(e.reason.unwrap_or_default()).or_default() += e.count.unwrap_or(1);
        }
    }
    out
}

fn assert_no_unexpected(reasons: &BTreeMap<String, i32>) {
    for r in ["UnexpectedJob", "MissingJob"] {
        assert!(!reasons.contains_key(r), "{r} in {reasons:?}");
    }
}

/// Every Job seen, and every moment (watch event) at which more than one was not being deleted.
#[derive(Default)]
struct Watched {
    seen: BTreeSet<String>,
    too_many: Vec<Vec<String>>,
}

fn watch_jobs(client: &Client) -> Arc<Mutex<Watched>> {
    let watched = Arc::new(Mutex::new(Watched::default()));
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    let w = Arc::clone(&watched);
    tokio::spawn(async move {
        use futures::StreamExt;
        let mut alive: BTreeMap<String, bool> = BTreeMap::new();
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(Ok(ev)) = events.next().await {
            match ev {
                watcher::Event::Apply(j) | watcher::Event::InitApply(j) => {
                    let deleting = j.metadata.deletion_timestamp.is_some();
                    alive.insert(j.name_any(), !deleting);
                }
                watcher::Event::Delete(j) => {
                    alive.remove(&j.name_any());
                }
                _ => continue,
            }
            let undeleted: Vec<String> = alive
                .iter()
                .filter(|(_, a)| **a)
                .map(|(n, _)| n.clone())
                .collect();
            let mut w = w.lock().unwrap();
            w.seen.extend(alive.keys().cloned());
            if undeleted.len() > 1 {
                w.too_many.push(undeleted);
            }
        }
    });
    watched
}

#[tokio::test]
async fn replace_deletes_the_running_job_before_starting_the_next() {
    let (_server, client) = start().await;
    let watched = watch_jobs(&client);
    create_cron_job(&client, "replace", "Replace").await;
    let w = Arc::clone(&watched);
    let cj = cron_job_until(&client, "replace", "the third job active", move |cj| {
        w.lock().unwrap().seen.len() >= 3 && active(cj).len() == 1
    })
    .await;
    let too_many = watched.lock().unwrap().too_many.clone();
    assert!(
        too_many.is_empty(),
        "more than one job undeleted: {too_many:?}"
    );
    let jobs = Api::<Job>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let left: Vec<String> = jobs
        .items
        .iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .map(|j| j.name_any())
        .collect();
    // The active job is the one left (or the next minute's, should it have come meanwhile).
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0] >= active(&cj)[0], "{left:?} {:?}", active(&cj));
    wait_event(&client, "replace", "SuccessfulDelete").await;
    assert_no_unexpected(&reasons(&client, "replace").await);
}

#[tokio::test]
async fn allow_lists_jobs_running_side_by_side() {
    let (_server, client) = start().await;
    create_cron_job(&client, "allow", "Allow").await;
    let cj = cron_job_until(&client, "allow", "two jobs active", |cj| {
        active(cj).len() >= 2
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    for name in active(&cj) {
        let job = jobs.get(&name).await.unwrap();
        assert!(job.metadata.deletion_timestamp.is_none(), "{name}");
    }
    assert_no_unexpected(&reasons(&client, "allow").await);
}

#[tokio::test]
async fn forbid_skips_while_a_job_runs_and_deleted_or_finished_jobs_leave_the_list() {
    let (_server, client) = start().await;
    create_cron_job(&client, "forbid", "Forbid").await;
    let cj = cron_job_until(&client, "forbid", "a job active", |cj| {
        active(cj).len() == 1
    })
    .await;
    let first = active(&cj).remove(0);
    wait_event(&client, "forbid", "JobAlreadyActive").await;
    let cj = Api::<CronJob>::namespaced(client.clone(), "default")
        .get("forbid")
        .await
        .unwrap();
    assert_eq!(
        active(&cj),
        std::slice::from_ref(&first),
        "no second job while it runs"
    );

    // Deleted from under the CronJob: it leaves the list, with MissingJob.
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    jobs.delete(&first, &background).await.unwrap();
    let gone = first.clone();
    cron_job_until(&client, "forbid", "the deleted job not active", move |cj| {
        !active(cj).contains(&gone)
    })
    .await;
    wait_event(&client, "forbid", "MissingJob").await;

    // The next one runs; finished, it leaves the list with SawCompletedJob.
    let cj = cron_job_until(&client, "forbid", "the next job active", |cj| {
        active(cj).len() == 1
    })
    .await;
    let second = active(&cj).remove(0);
    assert_ne!(second, first);
    let now = jiff::Timestamp::now().to_string();
    let done = json!({"status": {
        "startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now}
        ]
    }});
    jobs.patch_status(&second, &PatchParams::default(), &Patch::Merge(&done))
        .await
        .unwrap();
    let finished = second.clone();
    let cj = cron_job_until(
        &client,
        "forbid",
        "the finished job not active",
        move |cj| !active(cj).contains(&finished),
    )
    .await;
    assert!(cj.status.unwrap().last_successful_time.is_some());
    wait_event(&client, "forbid", "SawCompletedJob").await;
    let reasons = reasons(&client, "forbid").await;
    assert!(!reasons.contains_key("UnexpectedJob"), "{reasons:?}");
    assert_eq!(reasons.get("MissingJob"), Some(&1), "{reasons:?}");
}
