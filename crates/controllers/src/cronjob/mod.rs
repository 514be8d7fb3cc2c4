//! The CronJob controller, as upstream's `pkg/controller/cronjob` (v2): creates a Job at each
//! scheduled time, honouring `concurrencyPolicy` (Allow, Forbid, Replace),
//! `startingDeadlineSeconds` and `suspend`, keeps `status.active`, `lastScheduleTime` and
//! `lastSuccessfulTime`, and deletes finished Jobs beyond the history limits.
//!
//! - Jobs are named `<cronjob>-<scheduled time in minutes since the epoch>`, so a retried or
//!   restarted sync finds the Job it already made instead of making another, and carry the
//!   `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation.
//! - `status.active` is kept as upstream keeps it: a Job enters it when this controller starts it
//!   and leaves it when it finishes (`SawCompletedJob`), when this controller deletes it
//!   (`Replace`, history limits) or when the server no longer has it (`MissingJob`). Before
//!   calling a Job unexpected or missing the controller reads the CronJob and the Job from the
//!   server, since the cache may not have caught up with its own writes. `Replace` deletes the
//!   running Jobs (background propagation) before it creates the next, so at most one is left
//!   undeleted; `Allow` lets them run side by side; `Forbid` skips a start time while one runs.
//! - Only the most recent missed start time is started (upstream's behaviour after downtime).
//! - The controller reads time from its [`Clock`]; the requeue for the next start time is the
//!   one thing time alone changes, converted to real time by the clock.

pub mod clock;
pub mod schedule;

pub use clock::Clock;

use crate::{
    job::status::{is_finished, true_condition},
    runtime::{Action, Controller, WorkQueue},
};
use api::pod::{controller_of, controller_ref};
use events::{EventType, Recorder};
use informer::{Change, Informer, Informers, Key, Shared, Subscription, key, split_key};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::{
        batch::v1::{CronJob, CronJobStatus, Job},
        core::v1::ObjectReference,
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams, PropagationPolicy},
};
use schedule::{Schedule, ScheduleError, TOO_MANY_MISSED};
use std::{sync::Arc, time::Duration};

/// The event source name, as upstream's.
pub const COMPONENT: &str = "cronjob-controller";

/// The annotation with a Job's scheduled time (RFC 3339, in the CronJob's time zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Upstream requeues a little after the next start time, so the sync lands past it.
const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the CronJob controller runs.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// How it runs: concurrent syncs (upstream's `--concurrent-cron-job-syncs`, 5); retry delays of
    /// failed syncs.
    pub run: crate::runtime::Config<5>,
    /// The time it schedules by ([`Clock::Real`] but in tests).
    pub clock: Clock,
}

/// The CronJob controller: the shared cache's CronJobs and Jobs and its queue of CronJob keys.
pub struct CronJobController {
    client: Client,
    config: Config,
    cron_jobs: Informer<CronJob>,
    jobs: Informer<Job>,
    recorder: Recorder,
    queue: WorkQueue<Key>,
}

impl Controller for CronJobController {
    const NAME: &'static str = "cronjob";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_cj = Arc::clone(self);
        let on_job = Arc::clone(self);
        vec![
            self.cron_jobs
                .subscribe(move |c| on_cj.queue.add(c.object().key())),
            self.jobs.subscribe(move |c| on_job.job_changed(c)),
        ]
    }

    async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        match self.cron_jobs.get(&key) {
            Some(cj) => self.sync(cj).await,
            None => Ok(Action::await_change()),
        }
    }
}

/// A Job's finish: `Complete` or `Failed`, and when.
fn finished(job: &Job) -> Option<(&'static str, Option<Timestamp>)> {
    let status = job.status.as_ref()?;
    if let Some(c) = true_condition(status, "Complete") {
        let at = status
            .completion_time
            .as_ref()
            .or(c.last_transition_time.as_ref());
        return Some(("Complete", at.map(|t| t.0)));
    }
    true_condition(status, "Failed")
        .map(|c| ("Failed", c.last_transition_time.as_ref().map(|t| t.0)))
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// Whether `job` runs and is not being deleted (one this controller replaced may linger).
fn running(job: &Job) -> bool {
    finished(job).is_none() && job.metadata.deletion_timestamp.is_none()
}

/// Whether the CronJob's `status.active` lists `job`.
fn listed(cj: &CronJob, job: &Job) -> bool {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .is_some_and(|a| a.iter().any(|r| r.uid == job.metadata.uid))
}

/// When a Job started, for ordering the history (upstream's `byJobStartTime`).
fn started(job: &Job) -> Option<Timestamp> {
    job.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(job.metadata.creation_timestamp.as_ref())
        .map(|t| t.0)
}

/// The Jobs beyond `limit` among `finished`, oldest first (upstream's `removeOldestJobs`).
pub fn over_limit(mut finished: Vec<Shared<Job>>, limit: Option<i32>) -> Vec<Shared<Job>> {
    let Some(limit) = limit else {
        return Vec::new();
    };
    let limit = limit.max(0) as usize;
    if finished.len() <= limit {
        return Vec::new();
    }
    finished.sort_by_key(|j| (started(j), j.metadata.name.clone()));
    let excess = finished.len() - limit;
    finished.truncate(excess);
    finished
}

/// `at` in RFC 3339 in the schedule's zone, as Go's `time.RFC3339` prints it (`Z` for UTC).
fn rfc3339(at: Timestamp, schedule: &Schedule) -> String {
    let zoned = at.to_zoned(schedule.time_zone().clone());
    let text = zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string();
    match text.strip_suffix("+00:00") {
        Some(utc) => format!("{utc}Z"),
        None => text,
    }
}

/// The Job a CronJob starts for `scheduled` (upstream's `getJobFromTemplate2`).
pub fn job_for(cj: &CronJob, scheduled: Timestamp, schedule: &Schedule) -> Job {
    let template = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIMESTAMP.into(), rfc3339(scheduled, schedule));
    Job {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{}",
                cj.name_any(),
                scheduled.as_second().div_euclid(60)
            )),
            namespace: cj.namespace(),
            labels: tmeta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref("batch/v1", "CronJob", &cj.metadata)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

impl CronJobController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), COMPONENT, None),
            queue: config.run.queue(),
            cron_jobs: informers.get(),
            jobs: informers.get(),
            client,
            config,
        })
    }

    fn job_changed(&self, change: &Change<Job>) {
        if change.is_resync() {
            return;
        }
        let job = change.object();
        if let Some(r) = controller_of(&job.metadata).filter(|r| r.kind == "CronJob") {
            self.queue
                .add(key(&job.namespace().unwrap_or_default(), &r.name));
        }
    }

    async fn sync(&self, cached: Shared<CronJob>) -> Result<Action, Error> {
        let cj_key = cached.key();
        let (ns, name) = split_key(&cj_key);
        let cron_jobs: Api<CronJob> = Api::namespaced(self.client.clone(), ns);
        let jobs_api: Api<Job> = Api::namespaced(self.client.clone(), ns);
        let mut cj = CronJob::clone(&cached);
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let children = self.jobs.store().controlled_by(&uid);

        // The cache's CronJob may lag this controller's own status writes: a running child it
        // does not list is most often one just made, and a listed Job the cache no longer holds
        // one just replaced. Read the CronJob afresh before calling either unexpected or missing
        // (upstream re-reads in the first case).
        let unlisted = children.iter().any(|j| running(j) && !listed(&cj, j));
        let vanished = cj
            .status
            .as_ref()
            .and_then(|s| s.active.as_ref())
            .is_some_and(|a| {
                a.iter()
                    .any(|r| !children.iter().any(|j| j.metadata.uid == r.uid))
            });
        if unlisted || vanished {
            match cron_jobs.get(name).await {
                Ok(fresh) if fresh.metadata.uid == cj.metadata.uid => cj = fresh,
                Ok(_) => return Ok(Action::await_change()),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
                Err(e) => return Err(e.into()),
            }
        }
        let spec = cj.spec.clone().unwrap_or_default();
        let reference = events::reference(&cj);
        let mut st = cj.status.clone().unwrap_or_default();
        // `status.active` is the list of the Jobs this controller started and has not seen
        // finish or vanish (upstream's bookkeeping): a Job leaves it when it finishes, when this
        // controller deletes it, or when it is gone from the server.
        let mut active: Vec<ObjectReference> = st.active.clone().unwrap_or_default();
        for job in &children {
            let listed = active.iter().any(|r| r.uid == job.metadata.uid);
            match finished(job) {
                None if !listed && running(job) => {
                    self.recorder.record(
                        &reference,
                        EventType::Warning,
                        "UnexpectedJob",
                        format!(
                            "Saw a job that the controller did not create or forgot: {}",
                            job.name_any()
                        ),
                    );
                    // Unlike upstream, a running Job this CronJob controls counts as active
                    // (one made by a sync whose status write was lost, or adopted).
                    active.push(job_ref(job));
                }
                None => {}
                Some((kind, at)) => {
                    if listed {
                        active.retain(|r| r.uid != job.metadata.uid);
                        self.recorder.record(
                            &reference,
                            EventType::Normal,
                            "SawCompletedJob",
                            format!("Saw completed job: {}, status: {kind}", job.name_any()),
                        );
                    }
                    if kind == "Complete"
                        && let Some(at) = at
                        && st.last_successful_time.as_ref().is_none_or(|t| t.0 < at)
                    {
                        st.last_successful_time = Some(Time(at));
                    }
                }
            }
        }
        // Listed Jobs the cache does not hold: gone, or too new for the cache. Ask the server.
        let unseen: Vec<ObjectReference> = active
            .iter()
            .filter(|r| !children.iter().any(|j| j.metadata.uid == r.uid))
            .cloned()
            .collect();
        for r in unseen {
            let job_name = r.name.clone().unwrap_or_default();
            let gone = match jobs_api.get(&job_name).await {
                Ok(found) => found.metadata.uid != r.uid,
                Err(kube::Error::Api(s)) if s.code == 404 => true,
                Err(e) => return Err(e.into()),
            };
            if gone {
                self.recorder.record(
                    &reference,
                    EventType::Normal,
                    "MissingJob",
                    format!("Active job went missing: {job_name}"),
                );
                active.retain(|a| a.uid != r.uid);
            }
        }

        // History limits.
        let by_kind = |want: &str| {
            children
                .iter()
                .filter(|j| j.metadata.deletion_timestamp.is_none())
                .filter(|j| finished(j).is_some_and(|(k, _)| k == want))
                .cloned()
                .collect::<Vec<_>>()
        };
        let mut doomed = over_limit(by_kind("Complete"), spec.successful_jobs_history_limit);
        doomed.extend(over_limit(
            by_kind("Failed"),
            spec.failed_jobs_history_limit,
        ));
        for job in doomed {
            self.delete_job(&jobs_api, &reference, &job.name_any())
                .await?;
            active.retain(|r| r.uid != job.metadata.uid);
        }

        let mut requeue = Action::await_change();
        if cj.metadata.deletion_timestamp.is_none() && spec.suspend != Some(true) {
            requeue = self
                .schedule(&cj, &children, &jobs_api, &reference, &mut st, &mut active)
                .await?;
        }

        active.sort_by(|a, b| a.name.cmp(&b.name));
        st.active = (!active.is_empty()).then_some(active);
        if cj.status.as_ref().unwrap_or(&CronJobStatus::default()) != &st {
            let mut updated = cj.clone();
            updated.status = Some(st);
            cron_jobs
                .replace_status(name, &PostParams::default(), &updated)
                .await?;
        }
        Ok(requeue)
    }

    /// Starts the Job of the most recent missed start time if the policies allow, and returns
    /// the requeue for the next start time.
    async fn schedule(
        &self,
        cj: &CronJob,
        children: &[Shared<Job>],
        jobs_api: &Api<Job>,
        reference: &ObjectReference,
        st: &mut CronJobStatus,
        active: &mut Vec<ObjectReference>,
    ) -> Result<Action, Error> {
        let spec = cj.spec.clone().unwrap_or_default();
        let clock = &self.config.clock;
        let schedule = match Schedule::parse(&spec.schedule, spec.time_zone.as_deref()) {
            Ok(s) => s,
            Err(e) => {
                let reason = match e {
                    ScheduleError::Unparseable { .. } => "UnparseableSchedule",
                    ScheduleError::UnknownTimeZone(_) => "UnknownTimeZone",
                };
                self.recorder
                    .record(reference, EventType::Warning, reason, e.to_string());
                // Only an edit of the CronJob can help.
                return Ok(Action::await_change());
            }
        };
        let now = clock.now();
        let next_in = |after: Timestamp| match schedule.next_after(after) {
            Some(next) => {
                Action::requeue(clock.real(now.duration_until(next)) + NEXT_SCHEDULE_DELTA)
            }
            None => Action::await_change(),
        };
        let created = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
        let mut earliest = st.last_schedule_time.as_ref().map_or(created, |t| t.0);
        if let Some(secs) = spec.starting_deadline_seconds {
            let window_start = now - SignedDuration::from_secs(secs);
            if window_start > earliest {
                earliest = window_start;
            }
        }
        let (scheduled, missed) = schedule.most_recent(earliest, now);
        let Some(scheduled) = scheduled else {
            return Ok(next_in(now));
        };
        if missed > TOO_MANY_MISSED {
            self.recorder.record(
                reference,
                EventType::Warning,
                "TooManyMissedTimes",
                format!("too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"),
            );
        }
        let stamp = rfc3339(scheduled, &schedule);
        if let Some(secs) = spec.starting_deadline_seconds
            && scheduled + SignedDuration::from_secs(secs) < now
        {
            self.recorder.record(
                reference,
                EventType::Warning,
                "MissSchedule",
                format!("Missed scheduled time to start a job: {stamp}"),
            );
            return Ok(next_in(now));
        }
        let job = job_for(cj, scheduled, &schedule);
        let job_name = job.name_any();
        // This start time was handled already: its Job exists (the status saying so may not
        // have reached the cache). Deleting or creating again would replace the Job just made.
        if active
            .iter()
            .any(|r| r.name.as_deref() == Some(job_name.as_str()))
            || children.iter().any(|j| j.name_any() == job_name)
        {
            st.last_schedule_time = Some(Time(scheduled));
            return Ok(next_in(now));
        }
        match spec.concurrency_policy.as_deref() {
            Some("Forbid") if !active.is_empty() => {
                // Upstream waits for the running Job and tries again at the next start time.
                self.recorder.record(
                    reference,
                    EventType::Normal,
                    "JobAlreadyActive",
                    "Not starting job because prior execution is running and concurrency policy is Forbid",
                );
                return Ok(next_in(now));
            }
            Some("Replace") => {
                // The running Jobs go first (in the background: their pods follow), so at most
                // one Job of the CronJob is left undeleted at any time.
                for r in std::mem::take(active) {
                    if let Some(name) = &r.name {
                        self.delete_job(jobs_api, reference, name).await?;
                    }
                }
            }
            _ => {}
        }
        match jobs_api.create(&PostParams::default(), &job).await {
            Ok(made) => {
                self.recorder.record(
                    reference,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created job {job_name}"),
                );
                active.push(job_ref(&made));
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Made by an earlier sync whose status write did not land: it is ours if it
                // names us as controller.
                let existing = jobs_api.get(&job_name).await?;
                let ours = controller_of(&existing.metadata)
                    .is_some_and(|r| Some(&r.uid) == cj.metadata.uid.as_ref());
                if !ours {
                    self.recorder.record(
                        reference,
                        EventType::Warning,
                        "FailedCreate",
                        format!(
                            "Error creating job: job {job_name} already exists and is not ours"
                        ),
                    );
                    return Ok(next_in(now));
                }
                if !is_finished(existing.status.as_ref().unwrap_or(&Default::default()))
                    && !active.iter().any(|r| r.uid == existing.metadata.uid)
                {
                    active.push(job_ref(&existing));
                }
            }
            Err(e) => {
                self.recorder.record(
                    reference,
                    EventType::Warning,
                    "FailedCreate",
                    format!(
                        "Error creating job: {}",
                        crate::util::api_error::message(&e)
                    ),
                );
                return Err(e.into());
            }
        }
        st.last_schedule_time = Some(Time(scheduled));
        Ok(next_in(now))
    }

    async fn delete_job(
        &self,
        api: &Api<Job>,
        reference: &ObjectReference,
        name: &str,
    ) -> Result<(), kube::Error> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => {
                self.recorder.record(
                    reference,
                    EventType::Normal,
                    "SuccessfulDelete",
                    format!("Deleted job {name}"),
                );
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use informer::Cached;
    use serde_json::json;

    fn job(name: &str, started_at: i64) -> Shared<Job> {
        let at = Timestamp::from_second(started_at).unwrap();
        Cached::shared(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "status": {"startTime": at.to_string()}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn the_oldest_jobs_go_beyond_the_limit() {
        let jobs = vec![job("c", 300), job("a", 100), job("b", 200)];
        let names = |v: Vec<Shared<Job>>| v.iter().map(|j| j.name_any()).collect::<Vec<_>>();
        assert_eq!(names(over_limit(jobs.clone(), Some(1))), ["a", "b"]);
        assert_eq!(
            names(over_limit(jobs.clone(), Some(3))),
            Vec::<String>::new()
        );
        assert_eq!(names(over_limit(jobs.clone(), Some(0))), ["a", "b", "c"]);
        assert_eq!(names(over_limit(jobs, None)), Vec::<String>::new());
    }

    #[test]
    fn jobs_are_named_after_their_scheduled_minute() {
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "tick", "namespace": "ns", "uid": "u-1"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"template": {"spec": {"containers": []}}}}}
        }))
        .unwrap();
        let at: Timestamp = "2026-01-01T10:03:00Z".parse().unwrap();
        let utc = Schedule::parse("* * * * *", None).unwrap();
        let j = job_for(&cj, at, &utc);
        assert_eq!(
            j.metadata.name.as_deref(),
            Some(format!("tick-{}", at.as_second() / 60).as_str())
        );
        assert_eq!(
            j.metadata.annotations.as_ref().unwrap()[SCHEDULED_TIMESTAMP],
            "2026-01-01T10:03:00Z"
        );
        assert_eq!(j.metadata.labels.as_ref().unwrap()["a"], "b");
        let owner = &j.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("CronJob", Some(true))
        );
        let tokyo = Schedule::parse("* * * * *", Some("Asia/Tokyo")).unwrap();
        assert_eq!(
            job_for(&cj, at, &tokyo).metadata.annotations.unwrap()[SCHEDULED_TIMESTAMP],
            "2026-01-01T19:03:00+09:00"
        );
    }
}
