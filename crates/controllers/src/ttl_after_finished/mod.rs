//! The TTL-after-finished controller, as upstream's `pkg/controller/ttlafterfinished`: deletes a
//! finished Job (`Complete` or `Failed`) `ttlSecondsAfterFinished` after it finished, with its
//! pods (foreground deletion). The wait until then is a requeue: time alone changes it.

use crate::{
    job::status::true_condition,
    runtime::{Action, Controller, WorkQueue},
};
use informer::{Informer, Informers, Key, Shared, Subscription, split_key};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::{
    Api, Client,
    api::{DeleteParams, Preconditions, PropagationPolicy},
};
use std::{sync::Arc, time::Duration};

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the controller runs (upstream's `--concurrent-ttl-after-finished-syncs` is 5).
pub type Config = crate::runtime::Config;

/// The TTL-after-finished controller: the shared cache's Jobs and its queue of Job keys.
pub struct TtlAfterFinishedController {
    client: Client,
    jobs: Informer<Job>,
    queue: WorkQueue<Key>,
}

/// When a finished Job with a TTL expires (upstream's `getFinishAndExpireTime`): `None` if it has
/// no TTL or has not finished.
pub fn expires_at(job: &Job) -> Option<Timestamp> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let status = job.status.as_ref()?;
    let finished =
        true_condition(status, "Complete").or_else(|| true_condition(status, "Failed"))?;
    let at = finished.last_transition_time.as_ref()?.0;
    Some(at + SignedDuration::from_secs(i64::from(ttl)))
}

impl Controller for TtlAfterFinishedController {
    const NAME: &'static str = "ttl-after-finished";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let this = Arc::clone(self);
        vec![self.jobs.subscribe(move |c| {
            let job = c.object();
            if job.metadata.deletion_timestamp.is_none() && expires_at(job).is_some() {
                this.queue.add(job.key());
            }
        })]
    }

    async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        match self.jobs.get(&key) {
            Some(job) => self.sync(&key, job).await,
            None => Ok(Action::await_change()),
        }
    }
}

impl TtlAfterFinishedController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            queue: config.queue(),
            jobs: informers.get(),
        })
    }

    async fn sync(&self, key: &str, cached: Shared<Job>) -> Result<Action, Error> {
        if cached.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let Some(at) = expires_at(&cached) else {
            return Ok(Action::await_change());
        };
        let now = clock::now();
        if at > now {
            return Ok(Action::requeue(
                now.duration_until(at).unsigned_abs() + Duration::from_millis(10),
            ));
        }
        // The cache may be behind (the TTL changed, the Job was recreated): decide on a fresh
        // read, and delete only that very object.
        let (ns, name) = split_key(key);
        let api: Api<Job> = Api::namespaced(self.client.clone(), ns);
        let Some(fresh) = api.get_opt(name).await? else {
            return Ok(Action::await_change());
        };
        match expires_at(&fresh) {
            Some(at) if at <= now => {}
            Some(at) => {
                return Ok(Action::requeue(
                    now.duration_until(at).unsigned_abs() + Duration::from_millis(10),
                ));
            }
            None => return Ok(Action::await_change()),
        }
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: fresh.metadata.resource_version.clone(),
            }),
            ..Default::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => Ok(Action::await_change()),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                // Gone, or changed since the read: the change queues it again.
                Ok(Action::await_change())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finished_jobs_with_a_ttl_expire() {
        let job = |ttl: Option<i32>, condition: Option<&str>| -> Job {
            let conditions: Vec<_> = condition
                .map(|c| json!({"type": c, "status": "True", "lastTransitionTime": "2026-01-01T10:00:00Z"}))
                .into_iter()
                .collect();
            serde_json::from_value(json!({
                "metadata": {"name": "j"},
                "spec": {"ttlSecondsAfterFinished": ttl, "template": {}},
                "status": {"conditions": conditions}
            }))
            .unwrap()
        };
        let at: Timestamp = "2026-01-01T10:01:40Z".parse().unwrap();
        assert_eq!(expires_at(&job(Some(100), Some("Complete"))), Some(at));
        assert_eq!(expires_at(&job(Some(100), Some("Failed"))), Some(at));
        assert_eq!(
            expires_at(&job(Some(100), Some("SuccessCriteriaMet"))),
            None
        );
        assert_eq!(expires_at(&job(None, Some("Complete"))), None);
    }
}
