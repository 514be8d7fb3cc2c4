//! The objects a quota counts, watched (upstream's `QuotaMonitor`): pods, services and claims
//! through the shared cache's typed informers, and any other counted resource
//! (`count/<resource>.<group>`, `configmaps`, `secrets`, ...) through an informer started the
//! first time a quota counts it. When such an object goes away, or changes in a way that changes
//! what it uses, every quota of its namespace that limits its resources is queued for a
//! recount (upstream's replenishment).

use api::quota::{Evaluator, GroupResource};
use futures::future::BoxFuture;
use informer::{Change, Informer, Informers, Key, Object, Subscription, key};
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet},
    batch::v1::{CronJob, Job},
    coordination::v1::Lease,
    core::v1::{
        ConfigMap, Endpoints, ReplicationController, ResourceQuota, Secret, ServiceAccount,
    },
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Client,
    api::{ApiResource, DynamicObject},
};
use std::sync::Arc;

use crate::runtime::WorkQueue;

/// Queues the quotas of a namespace that limit what one evaluator accounts.
#[derive(Clone)]
pub(super) struct Replenish {
    pub(super) quotas: Informer<DynamicObject>,
    pub(super) queue: WorkQueue<Key>,
}

impl Replenish {
    /// Queues every quota in `namespace` whose `spec.hard` or `status.hard` names a resource
    /// `evaluator` accounts (upstream's `replenishQuota`).
    pub(super) fn namespace(&self, namespace: &str, evaluator: &Evaluator) {
        for q in self.quotas.store().in_namespace(namespace) {
            let limits = ["/spec/hard", "/status/hard"].iter().any(|p| {
                q.data
                    .pointer(p)
                    .and_then(serde_json::Value::as_object)
                    .is_some_and(|m| m.keys().any(|k| evaluator.matches_resource(k)))
            });
            if limits && let Some(name) = q.metadata.name.as_deref() {
                self.queue.add(key(namespace, name));
            }
        }
    }
}

/// A counted resource being watched: how many objects each namespace holds.
pub(super) struct Monitor {
    count: Box<dyn Fn(&str) -> usize + Send + Sync>,
    synced: Box<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>,
    _subscription: Subscription,
}

impl Monitor {
    /// How many objects `namespace` holds.
    pub(super) fn count(&self, namespace: &str) -> usize {
        (self.count)(namespace)
    }

    /// Waits until the informer has listed.
    pub(super) fn synced(&self) -> BoxFuture<'static, ()> {
        (self.synced)()
    }
}

/// A monitor on `informer`: a deletion queues the namespace's quotas that count `gr`.
fn monitor<K: Object>(informer: Informer<K>, gr: GroupResource, replenish: Replenish) -> Monitor {
    let evaluator = Evaluator::for_resource(&gr);
    let subscription = informer.subscribe(move |c: &Change<K>| {
        if let Change::Deleted(o) = c
            && let Some(ns) = o.meta().namespace.as_deref()
        {
            replenish.namespace(ns, &evaluator);
        }
    });
    let counting = informer.clone();
    Monitor {
        count: Box::new(move |ns| counting.store().in_namespace(ns).len()),
        synced: Box::new(move || {
            let i = informer.clone();
            Box::pin(async move { i.wait_synced().await })
        }),
        _subscription: subscription,
    }
}

/// Why a counted resource cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// Discovery failed.
    #[error("discovering {group:?}: {source}")]
    Discovery {
        /// The API group asked about.
        group: String,
        /// The cause.
        source: kube::Error,
    },
}

/// Starts watching `gr` on the shared cache: a typed informer for the kinds it has (shared
/// with the controllers that read them), else a dynamic one found by discovery. `None` when
/// the server does not serve the resource (a quota may name anything; upstream counts only
/// what discovery finds).
pub(super) async fn start(
    informers: &Informers,
    client: &Client,
    gr: &GroupResource,
    replenish: Replenish,
) -> Result<Option<Monitor>, MonitorError> {
    let g = gr.clone();
    let typed = match (gr.group.as_str(), gr.resource.as_str()) {
        ("apps", "replicasets") => {
            Some(monitor(informers.get::<ReplicaSet>(), g, replenish.clone()))
        }
        ("apps", "deployments") => {
            Some(monitor(informers.get::<Deployment>(), g, replenish.clone()))
        }
        ("apps", "daemonsets") => Some(monitor(informers.get::<DaemonSet>(), g, replenish.clone())),
        ("apps", "statefulsets") => Some(monitor(
            informers.get::<StatefulSet>(),
            g,
            replenish.clone(),
        )),
        ("apps", "controllerrevisions") => Some(monitor(
            informers.get::<ControllerRevision>(),
            g,
            replenish.clone(),
        )),
        ("batch", "jobs") => Some(monitor(informers.get::<Job>(), g, replenish.clone())),
        ("batch", "cronjobs") => Some(monitor(informers.get::<CronJob>(), g, replenish.clone())),
        ("", "replicationcontrollers") => Some(monitor(
            informers.get::<ReplicationController>(),
            g,
            replenish.clone(),
        )),
        ("", "serviceaccounts") => Some(monitor(
            informers.get::<ServiceAccount>(),
            g,
            replenish.clone(),
        )),
        ("", "endpoints") => Some(monitor(informers.get::<Endpoints>(), g, replenish.clone())),
        ("discovery.k8s.io", "endpointslices") => Some(monitor(
            informers.get::<EndpointSlice>(),
            g,
            replenish.clone(),
        )),
        ("policy", "poddisruptionbudgets") => Some(monitor(
            informers.get::<PodDisruptionBudget>(),
            g,
            replenish.clone(),
        )),
        ("coordination.k8s.io", "leases") => {
            Some(monitor(informers.get::<Lease>(), g, replenish.clone()))
        }
        // Dynamic in the shared cache already (the root CA publisher's ConfigMaps), so shared.
        ("", "configmaps") => Some(dynamic(
            informers,
            &ApiResource::erase::<ConfigMap>(&()),
            g,
            replenish.clone(),
        )),
        ("", "secrets") => Some(dynamic(
            informers,
            &ApiResource::erase::<Secret>(&()),
            g,
            replenish.clone(),
        )),
        ("", "resourcequotas") => Some(dynamic(
            informers,
            &ApiResource::erase::<ResourceQuota>(&()),
            g,
            replenish.clone(),
        )),
        _ => None,
    };
    if typed.is_some() {
        return Ok(typed);
    }
    let group = kube::discovery::group(client, &gr.group).await;
    let group = match group {
        Ok(group) => group,
        // A group the server does not serve: nothing to count.
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(kube::Error::Discovery(_)) => return Ok(None),
        Err(source) => {
            return Err(MonitorError::Discovery {
                group: gr.group.clone(),
                source,
            });
        }
    };
    let found = group
        .recommended_resources()
        .into_iter()
        .find(|(ar, caps)| {
            ar.plural == gr.resource
                && caps.scope == kube::discovery::Scope::Namespaced
                && ["list", "watch"].iter().all(|v| caps.supports_operation(v))
        });
    Ok(found.map(|(ar, _)| dynamic(informers, &ar, gr.clone(), replenish)))
}

fn dynamic(
    informers: &Informers,
    ar: &ApiResource,
    gr: GroupResource,
    replenish: Replenish,
) -> Monitor {
    monitor(informers.dynamic(ar), gr, replenish)
}

/// The counted resources' monitors by resource, started on demand.
pub(super) type Monitors = std::sync::Mutex<std::collections::HashMap<GroupResource, Arc<Monitor>>>;
