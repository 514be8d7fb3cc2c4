//! One sync of a Job, in the steps of upstream's `syncJob` (`pkg/controller/job/job_controller.go`):
//!
//! 1. [`JobController::sync`]: a finished Job only releases its pods' finalizers; otherwise its
//!    pods are claimed (`getPodsForJob`).
//! 2. [`JobController::record_finished`]: newly finished pods go into
//!    `status.uncountedTerminatedPods`, judged by the pod failure policy on the way
//!    (`trackJobStatusAndRemoveFinalizers`, first half).
//! 3. [`JobController::count_released`]: their finalizers come off, then they move into
//!    `succeeded`/`failed` and `completedIndexes` (its second half).
//! 4. [`Standing::of`]: active, terminating and finished pods, restarts, the deadline.
//! 5. [`JobController::decide`]: the Job ends (back-off limit, deadline, failure policy,
//!    completions), is suspended, or its pods are managed ([`JobController::manage`],
//!    `manageJob`, which waits out the failure back-off).
//! 6. [`JobController::update_status`]: the status is written when it changed.

use super::{
    Error, JobController,
    failure_policy::{self, Verdict as PodVerdict},
    finished_at, indexes, pod_for,
    status::{self, Ended, Tally, Verdict, reasons},
};
use crate::{runtime::Action, util::ownership};
use api::{pod::controller_ref, selector::LabelSelector};
use events::EventType;
use futures::future::join_all;
use informer::{Shared, split_key};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::{
        batch::v1::{Job, JobSpec, JobStatus, UncountedTerminatedPods},
        core::v1::Pod,
    },
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::Api;
use std::{
    collections::{BTreeSet, HashSet},
    time::Duration,
};

/// A Job as one sync works on it: the last copy written, its spec, and the status being built.
struct Run<'a> {
    key: &'a str,
    name: &'a str,
    jobs_api: Api<Job>,
    pods_api: Api<Pod>,
    job: Job,
    spec: JobSpec,
    status: JobStatus,
    now: Timestamp,
    indexed: bool,
    completions: i32,
}

/// Finished pods recorded in `status.uncountedTerminatedPods` and not counted yet (their uids),
/// and the reason and message of a `FailureTarget` the Job has or is given.
struct Uncounted {
    succeeded: Vec<String>,
    failed: Vec<String>,
    failure_target: Option<(String, String)>,
}

impl Uncounted {
    fn is_empty(&self) -> bool {
        self.succeeded.is_empty() && self.failed.is_empty()
    }

    fn contains(&self, uid: &str) -> bool {
        self.succeeded.iter().chain(&self.failed).any(|u| u == uid)
    }
}

/// Where the Job's pods stand once the finished ones are recorded (step 4).
struct Standing<'p> {
    active: Vec<&'p Shared<Pod>>,
    terminating: i32,
    /// Succeeded pods counted or about to be (Indexed: completed indexes and pending ones).
    succeeded: i32,
    failed: i32,
    restarts: i32,
    suspended: bool,
    deadline: Option<Timestamp>,
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

impl JobController {
    /// Syncs one Job: tracks its finished pods, decides whether it has ended, creates or deletes
    /// pods, and writes its status.
    pub(super) async fn sync(&self, cached: Shared<Job>) -> Result<Action, Error> {
        let job_key = cached.key();
        let pending = self
            .writes()
            .pending(&job_key, cached.metadata.resource_version.as_deref());
        if let Some(left) = pending {
            // The event that shows the write queues the Job again.
            return Ok(Action::requeue(left));
        }
        let (ns, name) = split_key(&job_key);
        let job = Job::clone(&cached);
        let spec = job.spec.clone().unwrap_or_default();
        let mut run = Run {
            key: &job_key,
            name,
            jobs_api: Api::namespaced(self.client.clone(), ns),
            pods_api: Api::namespaced(self.client.clone(), ns),
            status: job.status.clone().unwrap_or_default(),
            now: clock::now(),
            indexed: spec.completion_mode.as_deref() == Some("Indexed"),
            completions: spec.completions.unwrap_or(0),
            spec,
            job,
        };

        let uid = run.job.metadata.uid.clone().unwrap_or_default();
        let mut candidates = self.pods.store().controlled_by(&uid);
        if run.job.metadata.deletion_timestamp.is_none() {
            // Orphans its selector matches are adopted (upstream's getPodsForJob claims them).
            candidates.extend(self.pods.store().orphans(ns));
        }
        if status::is_finished(&run.status) {
            // Nothing more to count; pods that still carry the finalizer lose it.
            for pod in candidates.iter().filter(|p| status::tracked(p)) {
                self.remove_finalizer(&run.pods_api, pod).await?;
            }
            return Ok(Action::await_change());
        }
        let needs_sync = self.expectations.satisfied(&job_key);
        let Some(pods) = self.claim(&run, candidates).await? else {
            return Ok(Action::await_change());
        };

        let (mut uncounted, ignored) = self.record_finished(&mut run, &pods).await?;
        let (completed, first_error) = self
            .count_released(&mut run, &pods, &mut uncounted, ignored)
            .await;
        let standing = Standing::of(&run, &pods, &uncounted, &completed);
        let mut requeue = self
            .decide(
                &mut run, &pods, &standing, &uncounted, &completed, needs_sync,
            )
            .await?;
        self.update_status(run, &standing).await?;
        if let Some(e) = first_error {
            return Err(e.into());
        }
        if !needs_sync && let Some(after) = self.expectations.expires_in(&job_key) {
            requeue = requeue.min(Action::requeue(after));
        }
        Ok(requeue)
    }

    /// The pods the Job owns, adopting matching orphans and releasing pods it no longer
    /// matches (upstream's `getPodsForJob`); `None` for a Job whose selector is invalid.
    async fn claim(
        &self,
        run: &Run<'_>,
        candidates: Vec<Shared<Pod>>,
    ) -> Result<Option<Vec<Shared<Pod>>>, Error> {
        let selector = match LabelSelector::from_label_selector(
            &run.spec.selector.clone().unwrap_or_default(),
        ) {
            Ok(s) => s,
            Err(error) => {
                tracing::warn!(job = %run.key, %error, "invalid selector");
                return Ok(None);
            }
        };
        let job = &run.job;
        let controller = controller_ref("batch/v1", "Job", &job.metadata);
        let pods = ownership::claim(
            &run.pods_api,
            &controller,
            job.metadata.deletion_timestamp.is_some(),
            candidates,
            |p| !selector.is_empty() && selector.matches_labels(p.metadata.labels.as_ref()),
            // Upstream's RecheckDeletionTimestamp: adopt only for the same, live Job.
            || async {
                let fresh = run.jobs_api.get(run.name).await?;
                Ok(fresh.metadata.uid == job.metadata.uid
                    && fresh.metadata.deletion_timestamp.is_none())
            },
        )
        .await?;
        Ok(Some(pods))
    }

    /// Records newly finished pods as uncounted, before their finalizer goes, and writes that
    /// status at once; a failed pod the pod failure policy says `FailJob` for sets
    /// `FailureTarget`. Returns the uncounted pods, with the pods the policy ignores (their
    /// finalizer comes off, but they are not counted) in `ignored`.
    async fn record_finished(
        &self,
        run: &mut Run<'_>,
        pods: &[Shared<Pod>],
    ) -> Result<(Uncounted, Vec<Shared<Pod>>), Error> {
        let only_replace_failed = run.spec.pod_replacement_policy.as_deref() == Some("Failed");
        let recorded = run
            .status
            .uncounted_terminated_pods
            .clone()
            .unwrap_or_default();
        let mut uncounted = Uncounted {
            succeeded: recorded.succeeded.clone().unwrap_or_default(),
            failed: recorded.failed.clone().unwrap_or_default(),
            failure_target: status::true_condition(&run.status, "FailureTarget").map(|c| {
                (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            }),
        };
        let removed = self.removed().clone();
        let mut ignored: Vec<Shared<Pod>> = Vec::new();
        for pod in pods {
            let puid = uid(pod);
            if !status::tracked(pod) || removed.contains(&puid) || uncounted.contains(&puid) {
                continue;
            }
            match status::ended(pod, only_replace_failed) {
                Some(Ended::Succeeded) => uncounted.succeeded.push(puid),
                Some(Ended::Failed) => {
                    match failure_policy::judge(run.spec.pod_failure_policy.as_ref(), pod) {
                        PodVerdict::Ignore => {
                            ignored.push(pod.clone());
                            continue;
                        }
                        PodVerdict::FailJob(message) if uncounted.failure_target.is_none() => {
                            uncounted.failure_target =
                                Some((reasons::POD_FAILURE_POLICY.into(), message));
                        }
                        _ => {}
                    }
                    uncounted.failed.push(puid);
                }
                None => {}
            }
        }
        let changed = uncounted.succeeded.len() != recorded.succeeded.as_ref().map_or(0, Vec::len)
            || uncounted.failed.len() != recorded.failed.as_ref().map_or(0, Vec::len);
        if changed {
            run.status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
                succeeded: Some(uncounted.succeeded.clone()),
                failed: Some(uncounted.failed.clone()),
            });
            if let Some((reason, message)) = &uncounted.failure_target {
                status::set_condition(
                    &mut run.status,
                    "FailureTarget",
                    true,
                    reason,
                    message,
                    run.now,
                );
            }
            let job = std::mem::take(&mut run.job);
            run.job = self
                .write_status(&run.jobs_api, run.name, job, run.status.clone())
                .await?;
        }
        Ok((uncounted, ignored))
    }
}

impl JobController {
    /// Removes the finalizer of every uncounted (and ignored) pod, then counts the released ones
    /// into `succeeded`/`failed` (Indexed: `completedIndexes`); a pod whose finalizer could not
    /// be removed stays uncounted. Returns the completed indexes and the first removal error,
    /// which fails the sync once its status is written.
    async fn count_released(
        &self,
        run: &mut Run<'_>,
        pods: &[Shared<Pod>],
        uncounted: &mut Uncounted,
        mut to_release: Vec<Shared<Pod>>,
    ) -> (BTreeSet<i32>, Option<kube::Error>) {
        to_release.extend(
            pods.iter()
                .filter(|p| status::tracked(p) && uncounted.contains(&uid(p)))
                .cloned(),
        );
        let results = join_all(
            to_release
                .iter()
                .map(|p| async { (uid(p), self.remove_finalizer(&run.pods_api, p).await) }),
        )
        .await;
        let mut first_error = None;
        let mut still_held: HashSet<String> = HashSet::new();
        for (puid, r) in results {
            if let Err(e) = r {
                still_held.insert(puid);
                first_error.get_or_insert(e);
            }
        }
        let st = &mut run.status;
        let mut completed = indexes::parse(
            st.completed_indexes.as_deref().unwrap_or_default(),
            run.completions,
        );
        if !uncounted.is_empty() {
            let index_by_uid = |puid: &str| {
                pods.iter()
                    .find(|p| p.metadata.uid.as_deref() == Some(puid))
                    .and_then(|p| indexes::index_of(p))
            };
            let (ok_now, ok_left): (Vec<String>, Vec<String>) = uncounted
                .succeeded
                .iter()
                .cloned()
                .partition(|u| !still_held.contains(u));
            let (failed_now, failed_left): (Vec<String>, Vec<String>) = uncounted
                .failed
                .iter()
                .cloned()
                .partition(|u| !still_held.contains(u));
            st.failed = Some(st.failed.unwrap_or(0) + failed_now.len() as i32);
            if run.indexed {
                completed.extend(ok_now.iter().filter_map(|u| index_by_uid(u)));
                st.succeeded = Some(completed.len() as i32);
            } else {
                st.succeeded = Some(st.succeeded.unwrap_or(0) + ok_now.len() as i32);
            }
            uncounted.succeeded = ok_left;
            uncounted.failed = failed_left;
            st.uncounted_terminated_pods = Some(UncountedTerminatedPods {
                succeeded: Some(uncounted.succeeded.clone()),
                failed: Some(uncounted.failed.clone()),
            });
        }
        if run.indexed {
            st.completed_indexes = Some(indexes::format(&completed));
        }
        (completed, first_error)
    }
}

impl<'p> Standing<'p> {
    /// Where the Job's `pods` stand, counting the still uncounted finished ones.
    fn of(
        run: &Run<'_>,
        pods: &'p [Shared<Pod>],
        uncounted: &Uncounted,
        completed: &BTreeSet<i32>,
    ) -> Self {
        let st = &run.status;
        let active: Vec<&Shared<Pod>> = pods.iter().filter(|p| p.facts().active).collect();
        let terminating = pods
            .iter()
            .filter(|p| p.facts().deleting && !p.facts().terminal)
            .count() as i32;
        let restarts = active
            .iter()
            .filter_map(|p| p.status.as_ref())
            .flat_map(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
            })
            .map(|c| c.restart_count)
            .sum();
        let succeeded = if run.indexed {
            let pending: BTreeSet<i32> = pods
                .iter()
                .filter(|p| uncounted.succeeded.contains(&uid(p)))
                .filter_map(|p| indexes::index_of(p))
                .collect();
            completed.union(&pending).count() as i32
        } else {
            st.succeeded.unwrap_or(0) + uncounted.succeeded.len() as i32
        };
        let suspended = run.spec.suspend == Some(true);
        let deadline = (!suspended)
            .then(|| {
                let start = st.start_time.as_ref()?.0;
                let secs = run.spec.active_deadline_seconds?;
                Some(start + SignedDuration::from_secs(secs))
            })
            .flatten();
        Self {
            active,
            terminating,
            succeeded,
            failed: st.failed.unwrap_or(0) + uncounted.failed.len() as i32,
            restarts,
            suspended,
            deadline,
        }
    }

    fn tally(&self) -> Tally {
        Tally {
            succeeded: self.succeeded,
            failed: self.failed,
            active: self.active.len() as i32,
            restarts: self.restarts,
        }
    }
}

impl JobController {
    /// Decides what the Job does now (upstream's `syncJob` after tracking): ends (the pod
    /// failure policy's `FailJob`, the back-off limit, the deadline, or completions reached:
    /// `FailureTarget`/`SuccessCriteriaMet` first, `Failed`/`Complete` once no pod runs), stops
    /// its pods while suspended, or manages its pods. Returns when to sync again.
    async fn decide(
        &self,
        run: &mut Run<'_>,
        pods: &[Shared<Pod>],
        standing: &Standing<'_>,
        uncounted: &Uncounted,
        completed: &BTreeSet<i32>,
        needs_sync: bool,
    ) -> Result<Action, Error> {
        let now = run.now;
        let verdict = status::verdict(
            &run.spec,
            standing.tally(),
            uncounted.failure_target.clone(),
            standing.deadline.is_some_and(|d| d <= now),
        );
        let reference = events::reference(&run.job);
        let st = &mut run.status;
        let mut requeue = Action::await_change();
        match &verdict {
            Some(v) => {
                let interim = match v {
                    Verdict::Succeed => status::set_condition(
                        st,
                        "SuccessCriteriaMet",
                        true,
                        reasons::COMPLETIONS_REACHED,
                        reasons::COMPLETIONS_MESSAGE,
                        now,
                    ),
                    Verdict::Fail(reason, message) => {
                        status::set_condition(st, "FailureTarget", true, reason, message, now)
                    }
                };
                if interim && let Verdict::Fail(reason, message) = v {
                    self.recorder
                        .record(&reference, EventType::Warning, reason, message.clone());
                }
                // Whatever still runs is no longer needed.
                self.delete_pods(&run.job, run.key, &standing.active)
                    .await?;
                let gone =
                    standing.active.is_empty() && standing.terminating == 0 && uncounted.is_empty();
                if gone {
                    match v {
                        Verdict::Succeed => {
                            status::set_condition(
                                st,
                                "Complete",
                                true,
                                reasons::COMPLETIONS_REACHED,
                                reasons::COMPLETIONS_MESSAGE,
                                now,
                            );
                            st.completion_time = Some(Time(now));
                            self.recorder.record(
                                &reference,
                                EventType::Normal,
                                "Completed",
                                "Job completed".to_string(),
                            );
                        }
                        Verdict::Fail(reason, message) => {
                            status::set_condition(st, "Failed", true, reason, message, now);
                        }
                    }
                }
            }
            None if run.job.metadata.deletion_timestamp.is_some() || !needs_sync => {}
            None if standing.suspended => {
                if status::set_condition(
                    st,
                    "Suspended",
                    true,
                    "JobSuspended",
                    "Job suspended",
                    now,
                ) {
                    self.recorder.record(
                        &reference,
                        EventType::Normal,
                        "Suspended",
                        "Job suspended".to_string(),
                    );
                }
                st.start_time = None;
                self.delete_pods(&run.job, run.key, &standing.active)
                    .await?;
            }
            None => {
                if status::true_condition(st, "Suspended").is_some() {
                    status::set_condition(st, "Suspended", false, "JobResumed", "Job resumed", now);
                    self.recorder.record(
                        &reference,
                        EventType::Normal,
                        "Resumed",
                        "Job resumed".to_string(),
                    );
                }
                if st.start_time.is_none() {
                    st.start_time = Some(Time(now));
                    if let Some(secs) = run.spec.active_deadline_seconds {
                        requeue =
                            requeue.min(Action::requeue(Duration::from_secs(secs.max(0) as u64)));
                    }
                }
                if let Some(d) = standing.deadline {
                    requeue = requeue.min(Action::requeue(
                        now.duration_until(d).unsigned_abs() + Duration::from_millis(10),
                    ));
                }
                let action = self.manage(run, pods, standing, completed).await?;
                requeue = requeue.min(action);
            }
        }
        Ok(requeue)
    }

    /// Writes the status built by the sync, with its pod counts, when it differs from the Job's.
    async fn update_status(&self, run: Run<'_>, standing: &Standing<'_>) -> Result<(), Error> {
        // `active`, `succeeded` and `failed` are `omitempty` integers in upstream's types: a zero
        // is not written, so the status read back from any API server equals the one computed.
        fn counted(n: i32) -> Option<i32> {
            (n != 0).then_some(n)
        }
        let mut st = run.status;
        st.active = counted(standing.active.len() as i32);
        st.ready = Some(
            standing
                .active
                .iter()
                .filter(|p| p.facts().is_ready())
                .count() as i32,
        );
        st.terminating = Some(standing.terminating);
        st.succeeded = st.succeeded.and_then(counted);
        st.failed = st.failed.and_then(counted);
        if run.job.status.as_ref() != Some(&st) {
            self.write_status(&run.jobs_api, run.name, run.job, st)
                .await?;
        }
        Ok(())
    }

    /// Creates pods up to the number wanted (after the failure back-off), or deletes the excess
    /// (upstream's `manageJob`).
    async fn manage(
        &self,
        run: &Run<'_>,
        pods: &[Shared<Pod>],
        standing: &Standing<'_>,
        completed: &BTreeSet<i32>,
    ) -> Result<Action, kube::Error> {
        let (job, job_key, now) = (&run.job, run.key, run.now);
        let (indexed, completions) = (run.indexed, run.completions);
        let active = &standing.active;
        let want = status::want_active(&run.spec, standing.succeeded, active.len() as i32);
        let have = active.len() as i32;

        // Indexed: pods of completed, out-of-range or duplicate indexes go first.
        let mut excess: Vec<&Shared<Pod>> = Vec::new();
        let mut held = BTreeSet::new();
        if indexed {
            for p in active {
                match indexes::index_of(p) {
                    Some(i) if i < completions && !completed.contains(&i) && held.insert(i) => {}
                    _ => excess.push(p),
                }
            }
        }
        let kept = have - excess.len() as i32;
        if kept > want {
            let mut rest: Vec<&Shared<Pod>> = active
                .iter()
                .copied()
                .filter(|p| !excess.iter().any(|e| e.key() == p.key()))
                .collect();
            // Upstream deletes not-ready and younger pods first.
            rest.sort_by_key(|p| {
                (
                    p.facts().is_ready(),
                    std::cmp::Reverse(p.metadata.creation_timestamp.clone().map(|t| t.0)),
                )
            });
            excess.extend(rest.into_iter().take((kept - want) as usize));
        }
        if !excess.is_empty() {
            self.delete_pods(job, job_key, &excess).await?;
            return Ok(Action::await_change());
        }
        let only_replace_failed = run.spec.pod_replacement_policy.as_deref() == Some("Failed");
        let occupied = kept
            + if only_replace_failed {
                standing.terminating
            } else {
                0
            };
        let diff = (want - occupied).max(0) as usize;
        if diff == 0 {
            return Ok(Action::await_change());
        }
        // Back-off after failures, counted from the newest failed pod's end.
        let failed = standing.failed;
        if failed > 0
            && let Some(last) = pods
                .iter()
                .filter(|p| api::pod::phase(p) == "Failed")
                .filter_map(|p| finished_at(p))
                .max()
        {
            let wait = self
                .config
                .pod_backoff
                .saturating_mul(1u32 << (failed - 1).clamp(0, 16))
                .min(self.config.pod_backoff_max);
            let ready_at = last + SignedDuration::try_from(wait).unwrap_or(SignedDuration::ZERO);
            if ready_at > now {
                return Ok(Action::requeue(
                    now.duration_until(ready_at).unsigned_abs() + Duration::from_millis(10),
                ));
            }
        }
        let diff = diff.min(self.config.burst);
        let new_indexes: Vec<Option<i32>> = if indexed {
            indexes::to_create(completions, completed, &held, diff)
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None; diff]
        };
        if new_indexes.is_empty() {
            return Ok(Action::await_change());
        }
        let pods = new_indexes
            .iter()
            .map(|index| pod_for(job, *index))
            .collect();
        self.pod_control(job, job_key)
            .create_pods(pods, 1)
            .await
            .into_result()?;
        Ok(Action::await_change())
    }
}
