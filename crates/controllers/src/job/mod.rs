//! The Job controller, as upstream's `pkg/controller/job` (1.3x): runs pods until `completions`
//! succeeded (at most `parallelism` at a time), fails the Job past `backoffLimit`, past
//! `activeDeadlineSeconds` or on a pod failure policy's `FailJob`, and honours `suspend` and the
//! Indexed completion mode.
//!
//! - Every pod it creates carries the [`TRACKING_FINALIZER`]: a finished pod is first recorded in
//!   `status.uncountedTerminatedPods`, then its finalizer is removed, then it moves into
//!   `succeeded`/`failed` (and `completedIndexes`), so no pod is counted twice or lost, even
//!   across a restart of the controller (upstream's `trackJobStatusAndRemoveFinalizers`).
//! - A Job ends in two steps, as upstream 1.31+: `SuccessCriteriaMet` or `FailureTarget` first
//!   (remaining pods are deleted), then `Complete` or `Failed` once no pod of it is left running.
//! - Pods whose Job is gone lose the finalizer through their own queue key ([`JobKey::Orphan`]).
//! - Time alone changes two things: the active deadline and the back-off before replacing a
//!   failed pod (10s doubling to 6 minutes, upstream's); both are requeues.

pub mod failure_policy;
pub mod indexes;
pub mod status;
mod sync;

use crate::{
    runtime::{Action, Controller, WorkQueue},
    util::expectations::Expectations,
    util::pod_control::{PodChange, PodControl, Target},
};
use api::{
    pod::{controller_of, controller_ref},
    selector::LabelSelector,
};
use events::Recorder;
use informer::{Change, Informer, Informers, Key, Shared, Subscription, key, split_key};
use jiff::Timestamp;
use k8s_openapi::{
    api::{
        batch::v1::{Job, JobStatus},
        core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use status::TRACKING_FINALIZER;
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::time::Instant;

/// How long a sync waits for the cache to show the controller's own status write before it
/// trusts the cache anyway (a lost watch event stalls a Job no longer than this).
const STATUS_WRITE_TTL: Duration = Duration::from_secs(30);

/// The event source name, as upstream's.
pub const COMPONENT: &str = "job-controller";

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the Job controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How it runs: concurrent syncs (upstream's `--concurrent-job-syncs`, 5); retry delays of
    /// failed syncs.
    pub run: crate::runtime::Config<5>,
    /// Most pods created by one sync (upstream's `MaxPodCreateDeletePerSync`, 500).
    pub burst: usize,
    /// The first wait before replacing a failed pod; doubles per failure (upstream: 10s).
    pub pod_backoff: Duration,
    /// The longest such wait (upstream: 6 minutes).
    pub pod_backoff_max: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            run: Default::default(),
            burst: 500,
            pod_backoff: Duration::from_secs(10),
            pod_backoff_max: Duration::from_secs(360),
        }
    }
}

/// The controller's own status writes not yet shown by the cache (upstream relies on a fresh
/// read instead): a sync on an older copy would count finished pods again, or create pods for
/// completions already reached. Guarded by one lock with the last version the cache showed, so a
/// watch event that beats the write's response is not missed.
#[derive(Debug, Default)]
struct StatusWrites {
    pending: HashMap<Key, (String, Instant)>,
    seen: HashMap<Key, String>,
}

impl StatusWrites {
    /// The cache showed `rv` of the Job under `key`.
    fn observed(&mut self, key: &str, rv: Option<&str>) {
        let Some(rv) = rv else { return };
        if self.pending.get(key).is_some_and(|(p, _)| p == rv) {
            self.pending.remove(key);
        }
        self.seen.insert(key.to_string(), rv.to_string());
    }

    /// The controller wrote `rv`.
    fn wrote(&mut self, key: Key, rv: String) {
        if self.seen.get(&key) != Some(&rv) {
            self.pending.insert(key, (rv, Instant::now()));
        }
    }

    /// The Job is gone.
    fn forget(&mut self, key: &str) {
        self.pending.remove(key);
        self.seen.remove(key);
    }

    /// How much longer a sync of the cached version `cached_rv` waits for the last write; `None`
    /// once the cache shows it (or the wait expired: a lost event stalls a Job no longer).
    fn pending(&mut self, key: &str, cached_rv: Option<&str>) -> Option<Duration> {
        let (rv, at) = self.pending.get(key)?;
        let left = STATUS_WRITE_TTL.saturating_sub(at.elapsed());
        if cached_rv == Some(rv.as_str()) || left.is_zero() {
            self.pending.remove(key);
            return None;
        }
        Some(left)
    }
}

/// What the controller's queue holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum JobKey {
    /// A Job's `namespace/name`.
    Job(Key),
    /// A pod with the tracking finalizer whose Job is gone: the finalizer comes off.
    Orphan(Key),
}

/// The Job controller: the shared cache's Jobs and pods, its queue, its expectations, and the
/// pods whose finalizer it removed but whose update the cache has not shown yet (upstream's
/// finalizer expectations), which must not be counted again.
pub struct JobController {
    client: Client,
    config: Config,
    jobs: Informer<Job>,
    pods: Informer<Pod>,
    expectations: Expectations,
    finalizers_removed: Mutex<HashSet<String>>,
    status_writes: Mutex<StatusWrites>,
    recorder: Recorder,
    queue: WorkQueue<JobKey>,
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl Controller for JobController {
    const NAME: &'static str = "job";
    type Key = JobKey;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<JobKey> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_job = Arc::clone(self);
        let on_pod = Arc::clone(self);
        vec![
            self.jobs.subscribe(move |c| on_job.job_changed(c)),
            self.pods.subscribe(move |c| on_pod.pod_changed(c)),
        ]
    }

    async fn reconcile(self: &Arc<Self>, key: JobKey) -> Result<Action, Error> {
        match key {
            JobKey::Job(k) => match self.jobs.get(&k) {
                Some(job) => self.sync(job).await,
                None => {
                    self.expectations.forget(&k);
                    Ok(Action::await_change())
                }
            },
            JobKey::Orphan(k) => self.release_orphan(&k).await,
        }
    }
}

impl JobController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), COMPONENT, None),
            queue: config.run.queue(),
            jobs: informers.get(),
            pods: informers.get(),
            expectations: Expectations::default(),
            finalizers_removed: Mutex::new(HashSet::new()),
            status_writes: Mutex::new(StatusWrites::default()),
            client,
            config,
        })
    }

    fn writes(&self) -> std::sync::MutexGuard<'_, StatusWrites> {
        self.status_writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn removed(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.finalizers_removed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    // ---- event handlers ----

    fn job_changed(&self, change: &Change<Job>) {
        let k = change.object().key();
        self.writes()
            .observed(&k, change.object().metadata.resource_version.as_deref());
        if let Change::Deleted(job) = change {
            self.expectations.forget(&k);
            self.writes().forget(&k);
            // Its pods may still carry the finalizer.
            let uid = job.metadata.uid.clone().unwrap_or_default();
            for pod in self.pods.store().controlled_by(&uid) {
                if status::tracked(&pod) {
                    self.queue.add(JobKey::Orphan(pod.key()));
                }
            }
            return;
        }
        self.queue.add(JobKey::Job(k));
    }

    /// The Job a pod's controller reference names, if the cache holds it with that uid.
    fn resolve(&self, pod: &Pod) -> Option<Key> {
        let r = controller_of(&pod.metadata)?;
        if r.kind != "Job" {
            return None;
        }
        let k = key(&pod.namespace().unwrap_or_default(), &r.name);
        let job = self.jobs.get(&k)?;
        (job.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(k)
    }

    /// The unfinished Jobs in a pod's namespace whose selector matches its labels.
    fn matching_jobs(&self, pod: &Pod) -> Vec<Key> {
        let ns = pod.namespace().unwrap_or_default();
        self.jobs
            .store()
            .in_namespace(&ns)
            .into_iter()
            .filter(|job| {
                let finished = job.status.as_ref().is_some_and(status::is_finished);
                let selector = job
                    .spec
                    .as_ref()
                    .and_then(|s| s.selector.clone())
                    .and_then(|s| LabelSelector::from_label_selector(&s).ok());
                !finished
                    && selector.is_some_and(|s| {
                        !s.is_empty() && s.matches_labels(pod.metadata.labels.as_ref())
                    })
            })
            .map(|job| job.key())
            .collect()
    }

    fn pod_changed(&self, change: &Change<Pod>) {
        let pod = change.object();
        if !status::tracked(pod) {
            self.removed()
                .remove(pod.metadata.uid.as_deref().unwrap_or_default());
        }
        let job = self.resolve(pod);
        if job.is_none() && status::tracked(pod) && !matches!(change, Change::Deleted(_)) {
            // An orphan with the finalizer (upstream's add/update/deletePod): no controller at
            // all, as the garbage collector leaves the pods of a Job deleted with `Orphan`, or a
            // Job that is gone. Nothing else would remove the finalizer, and the pod could never
            // be deleted, nor its namespace. A pod another kind controls is left alone.
            let orphan = controller_of(&pod.metadata).is_none_or(|r| r.kind == "Job");
            if orphan {
                self.queue.add(JobKey::Orphan(pod.key()));
            }
        }
        if job.is_none() && controller_of(&pod.metadata).is_none() {
            // An orphan: the Jobs whose selector matches it may adopt it (upstream's
            // getPodJobs on an orphan's add and label change).
            for k in self.matching_jobs(pod) {
                self.queue.add(JobKey::Job(k));
            }
            return;
        }
        if job.is_none() {
            return;
        }
        let Some(k) = job else { return };
        match change {
            Change::Added(p) if !p.facts().deleting => self.expectations.creation_observed(&k),
            Change::Added(p) | Change::Deleted(p) => {
                self.expectations.deletion_observed(&k, &p.key())
            }
            Change::Updated { new, .. } => {
                if change.is_resync() {
                    return;
                }
                if new.facts().deleting {
                    self.expectations.deletion_observed(&k, &new.key());
                }
            }
        }
        self.queue.add(JobKey::Job(k));
    }

    // ---- syncs ----

    /// Removes the finalizer of a pod no unfinished Job controls (upstream's `syncOrphanPod`):
    /// one with no controller, or whose Job is gone or finished. A pod adopted meanwhile by a
    /// running Job keeps it; that Job counts the pod and removes it.
    async fn release_orphan(&self, pod_key: &str) -> Result<Action, Error> {
        let Some(pod) = self.pods.get(pod_key) else {
            return Ok(Action::await_change());
        };
        let running_job = self
            .resolve(&pod)
            .and_then(|k| self.jobs.get(&k))
            .is_some_and(|j| {
                !status::is_finished(j.status.as_ref().unwrap_or(&JobStatus::default()))
            });
        if !status::tracked(&pod) || running_job {
            return Ok(Action::await_change());
        }
        let (ns, _) = split_key(pod_key);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        self.remove_finalizer(&api, &pod).await?;
        Ok(Action::await_change())
    }

    /// Patches the tracking finalizer off `pod` (gone is as good as done).
    async fn remove_finalizer(&self, api: &Api<Pod>, pod: &Pod) -> Result<(), kube::Error> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        self.removed().insert(uid.clone());
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
            "uid": uid,
        }});
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => {
                self.removed().remove(&uid);
                Err(e)
            }
        }
    }

    async fn write_status(
        &self,
        api: &Api<Job>,
        name: &str,
        mut job: Job,
        status: JobStatus,
    ) -> Result<Job, kube::Error> {
        job.status = Some(status);
        let written = api
            .replace_status(name, &PostParams::default(), &job)
            .await?;
        if let Some(rv) = &written.metadata.resource_version {
            self.writes()
                .wrote(key(api_namespace(&written), name), rv.clone());
        }
        Ok(written)
    }

    /// Deletes `victims`.
    async fn delete_pods(
        &self,
        job: &Job,
        job_key: &str,
        victims: &[&Shared<Pod>],
    ) -> Result<(), kube::Error> {
        let changes = victims
            .iter()
            .map(|p| PodChange::Delete(Target::of(p)))
            .collect();
        self.pod_control(job, job_key)
            .change(changes, false)
            .await
            .into_result()
    }

    fn pod_control<'a>(&'a self, job: &Job, job_key: &'a str) -> PodControl<'a> {
        PodControl::new(
            &self.client,
            &self.recorder,
            job,
            job_key,
            &self.expectations,
        )
    }
}

fn api_namespace(job: &Job) -> &str {
    job.metadata.namespace.as_deref().unwrap_or_default()
}

/// When a pod's last container ended (for the failure back-off).
fn finished_at(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max()
        .or_else(|| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0)
        })
}

/// A pod for `job` from its template (upstream's `GetPodFromTemplate` plus the Job's additions:
/// the tracking finalizer and, for Indexed Jobs, the completion index as annotation, label,
/// hostname and `JOB_COMPLETION_INDEX` variable).
pub fn pod_for(job: &Job, index: Option<i32>) -> Pod {
    let name = job.name_any();
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut finalizers = tmeta.finalizers.unwrap_or_default();
    finalizers.push(TRACKING_FINALIZER.into());
    let mut meta = ObjectMeta {
        generate_name: Some(match index {
            Some(i) => format!("{name}-{i}-"),
            None => format!("{name}-"),
        }),
        namespace: job.namespace(),
        labels: tmeta.labels,
        annotations: tmeta.annotations,
        finalizers: Some(finalizers),
        owner_references: Some(vec![controller_ref("batch/v1", "Job", &job.metadata)]),
        ..Default::default()
    };
    let mut spec = template.spec.unwrap_or_default();
    if let Some(i) = index {
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(indexes::COMPLETION_INDEX.into(), i.to_string());
        meta.labels
            .get_or_insert_with(Default::default)
            .insert(indexes::COMPLETION_INDEX.into(), i.to_string());
        if spec.hostname.is_none() {
            spec.hostname = Some(format!("{name}-{i}"));
        }
        let env = EnvVar {
            name: "JOB_COMPLETION_INDEX".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.annotations['{}']", indexes::COMPLETION_INDEX),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            let vars = c.env.get_or_insert_with(Vec::new);
            if !vars.iter().any(|v| v.name == env.name) {
                vars.push(env.clone());
            }
        }
    }
    Pod {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn syncs_wait_for_the_cache_to_show_their_own_status_writes() {
        let mut w = StatusWrites::default();
        w.wrote("ns/j".into(), "5".into());
        assert!(w.pending("ns/j", Some("4")).is_some(), "older copy");
        w.observed("ns/j", Some("5"));
        assert_eq!(w.pending("ns/j", Some("4")), None, "the event arrived");
        // The event beats the write's response.
        w.observed("ns/j", Some("7"));
        w.wrote("ns/j".into(), "7".into());
        assert_eq!(w.pending("ns/j", Some("6")), None);
        // The cache shows it at sync time.
        w.wrote("ns/j".into(), "9".into());
        assert_eq!(w.pending("ns/j", Some("9")), None);
    }

    #[test]
    fn indexed_pods_carry_their_index() {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": "work", "namespace": "ns", "uid": "u-1"},
            "spec": {"completionMode": "Indexed", "template": {
                "metadata": {"labels": {"job-name": "work"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .unwrap();
        let pod = pod_for(&job, Some(3));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("work-3-"));
        assert_eq!(
            pod.metadata.annotations.as_ref().unwrap()[indexes::COMPLETION_INDEX],
            "3"
        );
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()[indexes::COMPLETION_INDEX],
            "3"
        );
        assert_eq!(pod.metadata.labels.as_ref().unwrap()["job-name"], "work");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("work-3"));
        assert_eq!(
            spec.containers[0].env.as_ref().unwrap()[0].name,
            "JOB_COMPLETION_INDEX"
        );
        assert_eq!(
            pod.metadata.finalizers.as_deref(),
            Some(&[TRACKING_FINALIZER.to_string()][..])
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
        assert_eq!(indexes::index_of(&pod), Some(3));

        let plain = pod_for(&job, None);
        assert_eq!(plain.metadata.generate_name.as_deref(), Some("work-"));
        assert!(plain.spec.unwrap().hostname.is_none());
    }
}
