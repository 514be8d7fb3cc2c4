//! The disruption controller, as upstream's `pkg/controller/disruption`: keeps every
//! PodDisruptionBudget's status (`currentHealthy`, `desiredHealthy`, `expectedPods`,
//! `disruptionsAllowed`, `disruptedPods`, `observedGeneration` and the `DisruptionAllowed`
//! condition) true to its pods, so that the API server's `pods/eviction` can decide from the
//! status alone. Percentages and `maxUnavailable` count the scale of the pods' controllers
//! (Deployment, ReplicaSet, StatefulSet, ReplicationController); an integer `minAvailable`
//! counts the pods. The arithmetic is in [`budget`].
//!
//! The queue holds budget keys; a budget's change and a change of a pod it selects queue it.
//! A recent eviction is requeued for when it stops counting (2 minutes), the one deadline.

pub mod budget;

use crate::runtime::{Action, Controller, WorkQueue};
use budget::{CountError, Figures};
use events::{EventType, Recorder};
use informer::{Change, Informer, Informers, Key, Subscription, key, split_key};
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet, StatefulSet},
    core::v1::{Pod, ReplicationController},
    policy::v1::PodDisruptionBudget,
};
use kube::{Api, Client, ResourceExt, api::PostParams};
use std::{collections::BTreeMap, sync::Arc, time::Duration};

/// Why a sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// The figures could not be computed; the budget was set to allow nothing.
    #[error("{0}")]
    Count(#[from] CountError),
}

/// How the disruption controller runs (2 workers).
pub type Config = crate::runtime::Config<2>;

/// The disruption controller: the shared cache's budgets, pods and pod controllers, and a
/// queue of budget keys.
pub struct DisruptionController {
    client: Client,
    recorder: Recorder,
    budgets: Informer<PodDisruptionBudget>,
    pods: Informer<Pod>,
    replicasets: Informer<ReplicaSet>,
    deployments: Informer<Deployment>,
    statefulsets: Informer<StatefulSet>,
    replication_controllers: Informer<ReplicationController>,
    queue: WorkQueue<Key>,
}

/// The pods `pdb` selects (policy/v1: a null selector selects none, an empty one all of the
/// namespace's pods).
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    if pdb.namespace() != pod.namespace() {
        return false;
    }
    let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    match api::selector::LabelSelector::from_label_selector(selector) {
        Ok(sel) => sel.matches_labels(pod.metadata.labels.as_ref()),
        // An invalid selector matches nothing.
        Err(_) => false,
    }
}

impl Controller for DisruptionController {
    const NAME: &'static str = "disruption";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_pdb = Arc::clone(self);
        let on_pod = Arc::clone(self);
        vec![
            self.budgets
                .subscribe(move |c: &Change<PodDisruptionBudget>| {
                    if !c.is_resync() {
                        on_pdb.queue.add(c.object().key());
                    }
                }),
            self.pods.subscribe(move |c: &Change<Pod>| {
                if c.is_resync() {
                    return;
                }
                let mut pods = vec![c.object()];
                if let Change::Updated { old, .. } = c {
                    pods.push(old);
                }
                let namespace = c.object().namespace().unwrap_or_default();
                for pdb in on_pod.budgets.store().in_namespace(&namespace) {
                    if pods.iter().any(|p| selects(&pdb, p)) {
                        on_pod.queue.add(pdb.key());
                    }
                }
            }),
        ]
    }

    async fn reconcile(self: &Arc<Self>, budget_key: Key) -> Result<Action, Error> {
        let Some(pdb) = self.budgets.get(&budget_key) else {
            return Ok(Action::await_change());
        };
        let (namespace, name) = split_key(&budget_key);
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), namespace);
        let now = clock::now();
        let reference = events::reference(&**pdb);
        let pods: Vec<_> = self
            .pods
            .store()
            .in_namespace(namespace)
            .into_iter()
            .filter(|p| selects(&pdb, p))
            .collect();
        let pods: Vec<&Pod> = pods.iter().map(|p| &***p).collect();
        let spec = pdb.spec.clone().unwrap_or_default();
        let counted = budget::expected_and_desired(&spec, pods.len(), || self.scale(&pods));
        let (expected, desired, unmanaged) = match counted {
            Ok(c) => c,
            Err(e) => {
                self.recorder.record(
                    &reference,
                    EventType::Warning,
                    "CalculateExpectedPodCountFailed",
                    format!("Failed to calculate the number of expected pods: {e}"),
                );
                let status = budget::fail_safe(&pdb, &e.to_string(), now);
                if pdb.status.as_ref() != Some(&status) {
                    let mut next = (*pdb).clone();
                    next.status = Some(status);
                    if let Err(err) = api
                        .replace_status(name, &PostParams::default(), &next)
                        .await
                    {
                        tracing::debug!(budget = %budget_key, error = %err, "fail-safe status not written");
                    }
                }
                return Err(e.into());
            }
        };
        let (disrupted, recheck) = budget::disrupted(
            &pods,
            pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()),
            now,
        );
        let figures = Figures {
            current_healthy: budget::current_healthy(&pods, &disrupted, now),
            desired_healthy: desired,
            expected_pods: expected,
            disrupted_pods: disrupted,
        };
        if let Some(status) = budget::status(&pdb, figures, now) {
            if pods.is_empty() {
                self.recorder.record(
                    &reference,
                    EventType::Normal,
                    "NoPods",
                    "No matching pods found",
                );
            }
            if !unmanaged.is_empty() {
                self.recorder.record(
                    &reference,
                    EventType::Warning,
                    "UnmanagedPods",
                    format!(
                        "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.",
                        selector_string(&pdb)
                    ),
                );
            }
            let mut next = (*pdb).clone();
            next.status = Some(status);
            match api
                .replace_status(name, &PostParams::default(), &next)
                .await
            {
                Ok(_) => {}
                // Written meanwhile (an eviction): the watch event queues the budget again.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(match recheck {
            Some(at) => {
                let wait = now.duration_until(at).unsigned_abs();
                Action::requeue(wait.max(Duration::from_millis(100)))
            }
            None => Action::await_change(),
        })
    }
}

/// The selector as upstream prints it in the UnmanagedPods event.
fn selector_string(pdb: &PodDisruptionBudget) -> String {
    pdb.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| api::selector::LabelSelector::from_label_selector(s).ok())
        .map(|s| s.to_string())
        .unwrap_or_default()
}

impl DisruptionController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            recorder: Recorder::new(informers.client().clone(), "controllermanager", None),
            queue: config.queue(),
            budgets: informers.get(),
            pods: informers.get(),
            replicasets: informers.get(),
            deployments: informers.get(),
            statefulsets: informers.get(),
            replication_controllers: informers.get(),
        })
    }

    /// The summed scale of the pods' controllers (each counted once) and the pods without a
    /// controller (upstream's `getExpectedScale`).
    fn scale(&self, pods: &[&Pod]) -> Result<(i32, Vec<String>), CountError> {
        let mut scales: BTreeMap<String, i32> = BTreeMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let Some(owner) = api::pod::controller_of(&pod.metadata) else {
                unmanaged.push(pod.name_any());
                continue;
            };
            if scales.contains_key(&owner.uid) {
                continue;
            }
            let namespace = pod.namespace().unwrap_or_default();
            let (uid, replicas) = self
                .controller_scale(
                    &namespace,
                    &owner.kind,
                    &owner.api_version,
                    &owner.name,
                    &owner.uid,
                )
                .ok_or_else(|| CountError::NoController(pod.name_any()))?;
            scales.insert(uid, replicas);
        }
        Ok((scales.values().sum(), unmanaged))
    }

    /// The UID and `spec.replicas` of the controller a pod names (a Deployment's for a
    /// ReplicaSet it owns), if the cache holds it with that UID.
    fn controller_scale(
        &self,
        namespace: &str,
        kind: &str,
        api_version: &str,
        name: &str,
        uid: &str,
    ) -> Option<(String, i32)> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let k = key(namespace, name);
        let same = |u: &Option<String>| u.as_deref() == Some(uid);
        match (group, kind) {
            ("apps" | "extensions", "ReplicaSet") => {
                let rs = self
                    .replicasets
                    .get(&k)
                    .filter(|rs| same(&rs.metadata.uid))?;
                if let Some(owner) = api::pod::controller_of(&rs.metadata)
                    && owner.kind == "Deployment"
                {
                    let d = self
                        .deployments
                        .get(&key(namespace, &owner.name))
                        .filter(|d| d.metadata.uid.as_deref() == Some(owner.uid.as_str()))?;
                    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    return Some((owner.uid.clone(), replicas));
                }
                let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                Some((uid.to_string(), replicas))
            }
            ("apps", "StatefulSet") => {
                let ss = self
                    .statefulsets
                    .get(&k)
                    .filter(|s| same(&s.metadata.uid))?;
                Some((
                    uid.to_string(),
                    ss.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                ))
            }
            ("", "ReplicationController") => {
                let rc = self
                    .replication_controllers
                    .get(&k)
                    .filter(|r| same(&r.metadata.uid))?;
                Some((
                    uid.to_string(),
                    rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                ))
            }
            _ => None,
        }
    }
}
