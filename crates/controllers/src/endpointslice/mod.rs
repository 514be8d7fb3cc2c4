//! The endpointslice controller, as upstream's `pkg/controller/endpointslice`: every Service
//! with a selector has EndpointSlices (`addressType: IPv4`, at most 100 endpoints each)
//! labelled `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by:
//! endpointslice-controller.k8s.io`, owned by the Service (the garbage collector deletes them
//! with it). Each endpoint is a pod with an IP, with the conditions `ready` (serving and not
//! terminating, or the Service publishes not-ready addresses), `serving` (the pod is Ready)
//! and `terminating`; unlike the Endpoints, terminating pods stay listed so that proxies can
//! drain them. Slices written by anyone else (another `managed-by`) are never touched.
//!
//! The queue holds Service keys; a Service's change, a change of a pod it selects and a
//! change of one of its managed slices queue it. What to write is [`plan::plan`].

pub mod plan;

use crate::{
    endpoints::pods,
    runtime::{Action, Controller, WorkQueue},
};
use informer::{Change, Informer, Informers, Key, Subscription, key, split_key};
use k8s_openapi::{
    api::{
        core::v1::{Node, Pod, Service},
        discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams},
};
use std::{collections::BTreeMap, sync::Arc};

/// The label naming a slice's Service.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming a slice's manager.
pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY`].
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// The zone label of nodes, copied to endpoints.
const ZONE: &str = "topology.kubernetes.io/zone";

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the endpointslice controller runs (upstream's `--concurrent-service-endpoint-syncs` is
/// 5).
pub type Config = crate::runtime::Config;

/// The endpointslice controller: the shared cache's Services, pods, nodes and slices, and a
/// queue of Service keys.
pub struct EndpointSliceController {
    client: Client,
    services: Informer<Service>,
    pods: Informer<Pod>,
    nodes: Informer<Node>,
    slices: Informer<EndpointSlice>,
    queue: WorkQueue<Key>,
}

/// Whether this controller manages `slice`.
fn is_managed(slice: &EndpointSlice) -> bool {
    slice.labels().get(MANAGED_BY).map(String::as_str) == Some(CONTROLLER_NAME)
}

/// The key of the Service a managed slice belongs to.
fn service_of(slice: &EndpointSlice) -> Option<Key> {
    if !is_managed(slice) {
        return None;
    }
    let name = slice.labels().get(SERVICE_NAME)?;
    Some(key(&slice.namespace().unwrap_or_default(), name))
}

impl Controller for EndpointSliceController {
    const NAME: &'static str = "endpointslice";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_svc = Arc::clone(self);
        let on_pod = Arc::clone(self);
        let on_slice = Arc::clone(self);
        vec![
            self.services.subscribe(move |c: &Change<Service>| {
                if !c.is_resync() {
                    on_svc.queue.add(c.object().key());
                }
            }),
            self.pods.subscribe(move |c: &Change<Pod>| {
                for k in pods::services_affected(on_pod.services.store(), c) {
                    on_pod.queue.add(k);
                }
            }),
            self.slices.subscribe(move |c: &Change<EndpointSlice>| {
                if c.is_resync() {
                    return;
                }
                if let Some(k) = service_of(c.object()) {
                    on_slice.queue.add(k);
                }
                if let Change::Updated { old, .. } = c
                    && let Some(k) = service_of(old)
                {
                    on_slice.queue.add(k);
                }
            }),
        ]
    }

    async fn reconcile(self: &Arc<Self>, service_key: Key) -> Result<Action, Error> {
        // A deleted Service's slices go with it (garbage collection of owned objects).
        let Some(service) = self.services.get(&service_key) else {
            return Ok(Action::await_change());
        };
        if pods::selector(&service).is_none() {
            return Ok(Action::await_change());
        }
        let (namespace, name) = split_key(&service_key);
        let existing: Vec<EndpointSlice> = self
            .slices
            .store()
            .in_namespace(namespace)
            .iter()
            .filter(|s| service_of(s).as_deref() == Some(service_key.as_str()))
            .map(|s| (***s).clone())
            .collect();
        let selected = pods::selected(&service, self.pods.store());
        let zone = |node: &str| {
            self.nodes
                .get(node)
                .and_then(|n| n.labels().get(ZONE).cloned())
        };
        let desired = desired(&service, selected.iter().map(|p| &***p), zone);
        let plan = plan::plan(&existing, desired, &slice_meta(&service), "IPv4");
        if plan.is_empty() {
            return Ok(Action::await_change());
        }
        tracing::debug!(service = %service_key, creates = plan.create.len(),
            updates = plan.update.len(), deletes = plan.delete.len(), "syncing endpoint slices");
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        let pp = PostParams::default();
        // Deletes first, so that a pod moving between port sets is never listed twice for
        // long; then updates, then creates.
        for slice in &plan.delete {
            match api.delete(slice, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        for slice in &plan.update {
            let slice_name = slice.name_any();
            match api.replace(&slice_name, &pp, slice).await {
                Ok(_) => {}
                // A stale cache: the watch event that follows queues the Service again.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        for slice in &plan.create {
            match api.create(&pp, slice).await {
                Ok(_) => {}
                // The namespace is terminating.
                Err(kube::Error::Api(s)) if s.code == 403 => {}
                Err(e) => return Err(e.into()),
            }
        }
        tracing::trace!(service = name, "endpoint slices synced");
        Ok(Action::await_change())
    }
}

impl EndpointSliceController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            queue: config.queue(),
            services: informers.get(),
            pods: informers.get(),
            nodes: informers.get(),
            slices: informers.get(),
        })
    }
}

/// What every slice of `service` says in its metadata (upstream's `setEndpointSliceLabels`
/// and owner reference): the Service's labels but the reserved ones, the Service's name, the
/// manager, `service.kubernetes.io/headless` for a Service without a cluster IP.
pub fn slice_meta(service: &Service) -> ObjectMeta {
    let name = service.name_any();
    let mut labels: BTreeMap<String, String> = service
        .labels()
        .iter()
        .filter(|(k, _)| k.as_str() != SERVICE_NAME && k.as_str() != MANAGED_BY)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(SERVICE_NAME.into(), name.clone());
    labels.insert(MANAGED_BY.into(), CONTROLLER_NAME.into());
    let cluster_ip = service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or("");
    if cluster_ip.is_empty() || cluster_ip == "None" {
        labels.insert(crate::endpoints::HEADLESS.into(), String::new());
    }
    ObjectMeta {
        generate_name: Some(format!("{name}-")),
        namespace: service.namespace(),
        labels: Some(labels),
        owner_references: Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            name,
            uid: service.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..Default::default()
    }
}

/// The endpoints `service` should have, grouped by the ports they resolve to (a named
/// `targetPort` may differ from pod to pod). `zone` gives a node's zone label.
pub fn desired<'p>(
    service: &Service,
    pods: impl IntoIterator<Item = &'p Pod>,
    zone: impl Fn(&str) -> Option<String>,
) -> Vec<(Vec<EndpointPort>, Vec<Endpoint>)> {
    let spec = service.spec.clone().unwrap_or_default();
    let publish = spec.publish_not_ready_addresses.unwrap_or(false);
    let service_ports = spec.ports.unwrap_or_default();
    let headless = pods::is_headless(service);
    let mut groups: Vec<(Vec<EndpointPort>, Vec<Endpoint>)> = Vec::new();
    for pod in pods {
        // Terminating pods stay, with their condition (upstream passes `true` here).
        if !pods::should_be_in_endpoints(pod, true) {
            continue;
        }
        let Some(ip) = pods::ipv4(pod) else {
            continue;
        };
        if service_ports.is_empty() && !headless {
            continue;
        }
        let ports: Vec<EndpointPort> = service_ports
            .iter()
            .filter_map(|sp| {
                pods::find_port(pod, sp).map(|port| EndpointPort {
                    name: Some(sp.name.clone().unwrap_or_default()),
                    port: Some(port),
                    protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        let serving = api::pod::is_ready(pod);
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        let endpoint = Endpoint {
            addresses: vec![ip.to_string()],
            conditions: Some(EndpointConditions {
                // Never ready while terminating, unless not-ready addresses are published.
                ready: Some(publish || (serving && !terminating)),
                serving: Some(serving),
                terminating: Some(terminating),
            }),
            hostname: pods::hostname(pod, service).map(str::to_string),
            zone: node.as_deref().and_then(&zone),
            node_name: node,
            target_ref: Some(pods::target_ref(pod)),
            ..Default::default()
        };
        match groups.iter_mut().find(|(p, _)| *p == ports) {
            Some((_, list)) => list.push(endpoint),
            None => groups.push((ports, vec![endpoint])),
        }
    }
    groups
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d",
            "uid": "svc-uid", "labels": {"app": "web", SERVICE_NAME: "spoof"}}, "spec": spec}))
        .unwrap()
    }

    fn pod(name: &str, ready: bool, deleting: bool, http: i32) -> Pod {
        let mut meta = json!({"name": name, "namespace": "d", "uid": format!("uid-{name}"),
            "labels": {"app": "web"}});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta,
            "spec": {"nodeName": "node-1", "containers": [{"name": "c",
                "ports": [{"name": "http", "containerPort": http}]}]},
            "status": {"phase": "Running", "podIP": format!("10.244.{}.1", http % 250), "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .unwrap()
    }

    fn conditions(e: &Endpoint) -> (bool, bool, bool) {
        let c = e.conditions.clone().unwrap();
        (c.ready.unwrap(), c.serving.unwrap(), c.terminating.unwrap())
    }

    #[test]
    fn conditions_follow_readiness_and_termination() {
        let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.5",
            "ports": [{"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"}]}));
        let pods = [
            pod("a", true, false, 10),
            pod("b", false, false, 10),
            pod("c", true, true, 10),
        ];
        let groups = desired(&svc, &pods, |n| (n == "node-1").then(|| "z1".to_string()));
        assert_eq!(groups.len(), 1);
        let (ports, eps) = &groups[0];
        assert_eq!(ports[0].port, Some(10));
        assert_eq!(ports[0].name.as_deref(), Some("web"));
        let got: Vec<(bool, bool, bool)> = eps.iter().map(conditions).collect();
        assert_eq!(
            got,
            [
                (true, true, false),
                (false, false, false),
                (false, true, true)
            ]
        );
        assert_eq!(eps[0].zone.as_deref(), Some("z1"));
        assert_eq!(eps[0].node_name.as_deref(), Some("node-1"));
        let publish = service(json!({"selector": {"app": "web"},
            "publishNotReadyAddresses": true, "ports": [{"port": 80}]}));
        let groups = desired(&publish, &pods, |_| None);
        assert!(groups[0].1.iter().all(|e| conditions(e).0));
    }

    #[test]
    fn named_ports_resolving_differently_group_apart() {
        let svc = service(json!({"selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": "http"}]}));
        let pods = [pod("a", true, false, 8080), pod("b", true, false, 9090)];
        let groups = desired(&svc, &pods, |_| None);
        assert_eq!(groups.len(), 2);
    }

    #[test]
    fn slices_are_labelled_and_owned_by_their_service() {
        let meta = slice_meta(&service(json!({"clusterIP": "None"})));
        let labels = meta.labels.unwrap();
        assert_eq!(labels[SERVICE_NAME], "web");
        assert_eq!(labels[MANAGED_BY], CONTROLLER_NAME);
        assert_eq!(labels["app"], "web");
        assert!(labels.contains_key(crate::endpoints::HEADLESS));
        let owner = &meta.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Service", "svc-uid", Some(true))
        );
        assert_eq!(meta.generate_name.as_deref(), Some("web-"));
    }
}
