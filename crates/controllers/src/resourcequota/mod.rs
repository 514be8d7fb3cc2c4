//! The resource quota controller, as upstream's `pkg/controller/resourcequota` (`--controllers`
//! name `resourcequota`): every ResourceQuota's `status.hard` is its `spec.hard`, and its
//! `status.used` what its namespace holds of each limited resource, counted by the evaluators
//! the API server's quota admission charges with ([`api::quota::Evaluator`]).
//!
//! When it recounts, as upstream's:
//! - a quota that appears, whose `spec.hard` changes, or whose status does not show its spec or
//!   lacks the usage of a limited resource (someone wrote the status; a new limit);
//! - when an object it counts goes away, or a pod becomes terminal, a service changes type or a
//!   claim changes what it asks for ([`monitor`]): the quotas of that namespace that limit its
//!   resources. Creations are not recounted: admission charged them already, and a recount
//!   from a cache that does not yet hold a just-admitted object would take its charge back;
//! - every [`Config::resync`] (upstream's `--resource-quota-sync-period`), which also corrects a
//!   charge for an object that was then not stored.
//!
//! A recount sums the objects in the quota's namespace that fall under its scopes, keeps the
//! usage of resources no evaluator counts as it was, and writes the status with
//! compare-and-swap on the quota's resourceVersion (a conflict, say with admission charging a
//! create, is retried on the newer version).

mod monitor;

pub use monitor::MonitorError;

use crate::runtime::{Action, Controller, WorkQueue};
use api::quota::{
    Evaluator, GroupResource, Object, ResourceList,
    evaluator::{claim_class, pod_counts_compute, pod_stops_counting_at, service_quota_type},
    resources::{Amount, add, equals, from_wire, mask, to_wire},
    scope_selectors,
};
use informer::{Change, Informer, Informers, Key, Subscription, split_key};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, Pod, ResourceQuota, ResourceQuotaStatus, Service,
};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, PostParams},
};
use monitor::{Monitor, Monitors, Replenish};
use serde_json::Value;
use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

/// How long a recount waits for a newly watched resource's first list.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a recount failed (it is retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed (a conflict included: the quota changed since the cache's version).
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// A counted resource could not be watched.
    #[error("{0}")]
    Monitor(#[from] MonitorError),
    /// A counted resource's first list did not finish in time.
    #[error("the cache of {0} has not listed yet")]
    NotSynced(String),
    /// The cached quota does not decode.
    #[error("decoding ResourceQuota {0}: {1}")]
    Decode(String, serde_json::Error),
}

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How it runs: concurrent recounts (upstream's `--concurrent-resource-quota-syncs`, 5); retry
    /// delays of failed recounts.
    pub run: crate::runtime::Config<5>,
    /// How often every quota is recounted in full (upstream's `--resource-quota-sync-period`,
    /// 5 minutes).
    pub resync: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            run: Default::default(),
            resync: Duration::from_secs(300),
        }
    }
}

/// The quota controller: the shared cache's quotas, pods, services and claims, the monitors of
/// other counted resources, and a queue of quota keys.
pub struct ResourceQuotaController {
    client: Client,
    informers: Informers,
    quotas: Informer<DynamicObject>,
    pods: Informer<Pod>,
    services: Informer<Service>,
    claims: Informer<PersistentVolumeClaim>,
    monitors: Monitors,
    queue: WorkQueue<Key>,
    resync: Duration,
}

impl Controller for ResourceQuotaController {
    const NAME: &'static str = "resourcequota";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let queue = self.queue.clone();
        let on_quota = move |c: &Change<DynamicObject>| {
            let (old, new) = match c {
                Change::Added(q) => (None, q),
                Change::Updated { old, new } => (Some(old), new),
                Change::Deleted(_) => return,
            };
            if needs_recount(old.map(|o| &o.data), &new.data)
                && let (Some(ns), Some(name)) = (
                    new.metadata.namespace.as_deref(),
                    new.metadata.name.as_deref(),
                )
            {
                queue.add(informer::key(ns, name));
            }
        };
        let replenish = self.replenish();
        let on_pod = {
            let replenish = replenish.clone();
            move |c: &Change<Pod>| {
                let now = clock::now();
                let gone = match c {
                    Change::Deleted(_) => true,
                    // Upstream's update filter: a pod stops counting when it becomes terminal.
                    Change::Updated { old, new } => {
                        pod_counts_compute(old, now) && !pod_counts_compute(new, now)
                    }
                    Change::Added(_) => false,
                };
                if gone && let Some(ns) = c.object().metadata.namespace.as_deref() {
                    replenish.namespace(ns, &Evaluator::Pods);
                }
            }
        };
        let on_service = {
            let replenish = replenish.clone();
            move |c: &Change<Service>| {
                let changed = match c {
                    Change::Deleted(_) => true,
                    Change::Updated { old, new } => {
                        service_quota_type(old) != service_quota_type(new)
                            || old.spec.as_ref().map(|s| &s.ports)
                                != new.spec.as_ref().map(|s| &s.ports)
                    }
                    Change::Added(_) => false,
                };
                if changed && let Some(ns) = c.object().metadata.namespace.as_deref() {
                    replenish.namespace(ns, &Evaluator::Services);
                }
            }
        };
        let on_claim = move |c: &Change<PersistentVolumeClaim>| {
            let changed = match c {
                Change::Deleted(_) => true,
                Change::Updated { old, new } => {
                    let storage = |p: &PersistentVolumeClaim| {
                        p.spec
                            .as_ref()
                            .and_then(|s| s.resources.as_ref())
                            .and_then(|r| r.requests.as_ref())
                            .and_then(|r| r.get("storage"))
                            .cloned()
                    };
                    storage(old) != storage(new) || claim_class(old) != claim_class(new)
                }
                Change::Added(_) => false,
            };
            if changed && let Some(ns) = c.object().metadata.namespace.as_deref() {
                replenish.namespace(ns, &Evaluator::Claims);
            }
        };
        vec![
            self.quotas.subscribe(on_quota),
            self.pods.subscribe(on_pod),
            self.services.subscribe(on_service),
            self.claims.subscribe(on_claim),
        ]
    }

    async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Action, Error> {
        let Some(cached) = self.quotas.get(&key) else {
            return Ok(Action::await_change());
        };
        let value =
            serde_json::to_value(cached.object()).map_err(|e| Error::Decode(key.to_string(), e))?;
        let quota: ResourceQuota =
            serde_json::from_value(value).map_err(|e| Error::Decode(key.to_string(), e))?;
        let (ns, name) = split_key(&key);
        let now = clock::now();
        let (used, next_change) = self.usage(ns, &quota, now).await?;
        let hard = from_wire(quota.spec.as_ref().and_then(|s| s.hard.as_ref()));
        let status = quota.status.as_ref();
        let old_hard = status.and_then(|s| s.hard.as_ref());
        let old_used = status.and_then(|s| s.used.as_ref());
        let mut action = Action::requeue(self.resync);
        if let Some(at) = next_change {
            action.requeue_by(
                Duration::try_from(now.duration_until(at)).unwrap_or_default()
                    + Duration::from_secs(1),
            );
        }
        let dirty = old_hard.is_none()
            || old_used.is_none()
            || !equals(&hard, &from_wire(old_hard))
            || !equals(&used, &from_wire(old_used));
        if !dirty {
            return Ok(action);
        }
        let mut next = quota.clone();
        next.status = Some(ResourceQuotaStatus {
            hard: Some(to_wire(&hard)),
            used: Some(to_wire(&used)),
        });
        let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), ns);
        match api
            .replace_status(name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => {
                tracing::debug!(namespace = ns, quota = name, used = %api::quota::resources::pretty(&used), "quota status updated");
                Ok(action)
            }
            // Deleted meanwhile.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether a quota's change calls for a recount (upstream's `addQuota` and its update filter,
/// plus a status that no longer shows the spec: someone else wrote it).
fn needs_recount(old: Option<&Value>, new: &Value) -> bool {
    let list = |v: &Value, p: &str| -> ResourceList {
        v.pointer(p)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, q)| {
                        // A number is a quantity too (`pods: 5` in YAML).
                        let text = q.as_str().map_or_else(|| q.to_string(), str::to_string);
                        Some((k.clone(), Amount::parse(&text).ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let hard = list(new, "/spec/hard");
    let Some(old) = old else {
        return true;
    };
    if !equals(&list(old, "/spec/hard"), &hard) || !equals(&list(new, "/status/hard"), &hard) {
        return true;
    }
    let used = list(new, "/status/used");
    hard.keys()
        .any(|k| Evaluator::tracking(k).is_some() && !used.contains_key(k))
}

impl ResourceQuotaController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            informers: informers.clone(),
            quotas: informers.dynamic(&ApiResource::erase::<ResourceQuota>(&())),
            pods: informers.get(),
            services: informers.get(),
            claims: informers.get(),
            monitors: Mutex::new(HashMap::new()),
            queue: config.run.queue(),
            resync: config.resync,
        })
    }

    fn replenish(&self) -> Replenish {
        Replenish {
            quotas: self.quotas.clone(),
            queue: self.queue.clone(),
        }
    }

    /// The monitor of a counted resource, started on first use and waited for until it has
    /// listed; `None` when the server does not serve the resource.
    async fn monitor(&self, gr: &GroupResource) -> Result<Option<Arc<Monitor>>, Error> {
        let existing = self
            .monitors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(gr)
            .cloned();
        let monitor = match existing {
            Some(m) => m,
            None => {
                let Some(started) =
                    monitor::start(&self.informers, &self.client, gr, self.replenish()).await?
                else {
                    tracing::debug!(group = %gr.group, resource = %gr.resource, "quota limits a resource the server does not serve; not counted");
                    return Ok(None);
                };
                let mut monitors = self.monitors.lock().unwrap_or_else(|e| e.into_inner());
                Arc::clone(
                    monitors
                        .entry(gr.clone())
                        .or_insert_with(|| Arc::new(started)),
                )
            }
        };
        tokio::time::timeout(SYNC_TIMEOUT, monitor.synced())
            .await
            .map_err(|_| Error::NotSynced(gr.count_name()))?;
        Ok(Some(monitor))
    }

    /// What the namespace holds of each resource `quota` limits (in `spec.hard`), the usage of
    /// resources no evaluator counts kept from its status (upstream's `CalculateUsage` merged
    /// into the old usage); and when, if ever, that changes by time alone (a terminating pod
    /// past its grace period stops counting).
    async fn usage(
        &self,
        ns: &str,
        quota: &ResourceQuota,
        now: Timestamp,
    ) -> Result<(ResourceList, Option<Timestamp>), Error> {
        let hard = from_wire(quota.spec.as_ref().and_then(|s| s.hard.as_ref()));
        let selectors = scope_selectors(quota);
        let mut by_evaluator: BTreeMap<GroupResource, (Evaluator, Vec<String>)> = BTreeMap::new();
        for name in hard.keys() {
            if let Some(e) = Evaluator::tracking(name) {
                by_evaluator
                    .entry(e.group_resource())
                    .or_insert_with(|| (e, Vec::new()))
                    .1
                    .push(name.clone());
            }
        }
        let mut computed = ResourceList::new();
        let mut next_change: Option<Timestamp> = None;
        for (gr, (evaluator, names)) in &by_evaluator {
            let mut sum: ResourceList = names.iter().map(|n| (n.clone(), Amount::zero())).collect();
            let mut charge = |object: Object<'_>| {
                if selectors.iter().all(|s| evaluator.matches_scope(s, object)) {
                    sum = add(&sum, &mask(&evaluator.usage(object, now), names.iter()));
                }
            };
            match evaluator {
                Evaluator::Pods => {
                    for p in self.pods.store().in_namespace(ns) {
                        charge(Object::Pod(&p));
                        if let Some(at) = pod_stops_counting_at(&p).filter(|at| *at > now) {
                            next_change = Some(next_change.map_or(at, |n| n.min(at)));
                        }
                    }
                }
                Evaluator::Services => {
                    for s in self.services.store().in_namespace(ns) {
                        charge(Object::Service(&s));
                    }
                }
                Evaluator::Claims => {
                    for c in self.claims.store().in_namespace(ns) {
                        charge(Object::Claim(&c));
                    }
                }
                Evaluator::Count(_) => {
                    let Some(monitor) = self.monitor(gr).await? else {
                        continue;
                    };
                    // Counted objects have no scopes: a scoped quota counts none of them.
                    if selectors.is_empty() {
                        let n = i64::try_from(monitor.count(ns)).unwrap_or(i64::MAX);
                        for name in names {
                            sum.insert(name.clone(), Amount::count(n));
                        }
                    }
                }
            }
            computed.extend(sum);
        }
        let old_used = from_wire(quota.status.as_ref().and_then(|s| s.used.as_ref()));
        let mut used = mask(&old_used, hard.keys());
        used.extend(computed);
        Ok((used, next_change))
    }
}
