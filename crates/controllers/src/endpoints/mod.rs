//! The endpoints controller, as upstream's `pkg/controller/endpoint`: every Service with a
//! selector has an Endpoints object of the same name listing the addresses of the pods it
//! selects, ready ones under `addresses` and the others under `notReadyAddresses` (all under
//! `addresses` with `publishNotReadyAddresses`), with their ports resolved per pod (a named
//! `targetPort` may be a different number in every pod).
//!
//! Endpoints it writes carry the label `endpoints.kubernetes.io/managed-by:
//! endpoint-controller` (upstream marks them so since KEP-4974); Endpoints without it that
//! belong to no selecting Service (written by hand, or leader-election records) are left
//! alone, and only labelled ones are deleted with their Service or found orphaned at start.
//!
//! The queue holds Service keys; a Service's change, a change of a pod it selects (before or
//! after the change) and a change of its Endpoints queue it.

pub mod pods;
pub mod subsets;

use crate::runtime::{Action, Controller, WorkQueue};
use informer::{Change, Informer, Informers, Key, Subscription, split_key};
use k8s_openapi::{
    api::core::v1::{EndpointAddress, EndpointPort, Endpoints, Pod, Service},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams},
};
use std::{collections::BTreeMap, sync::Arc};
use subsets::Offer;

/// The label marking Endpoints this controller manages.
pub const MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
/// Its value.
pub const CONTROLLER_NAME: &str = "endpoint-controller";
/// The label upstream puts on the endpoints of a headless Service.
pub const HEADLESS: &str = "service.kubernetes.io/headless";
/// Set when [`subsets::MAX_ADDRESSES`] cut the addresses.
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// Leader-election records kept in Endpoints; never deleted as orphans (upstream's rule).
const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the endpoints controller runs (upstream's `--concurrent-endpoint-syncs` is 5).
pub type Config = crate::runtime::Config;

/// The endpoints controller: the shared cache's Services, pods and Endpoints, and a queue of
/// Service keys.
pub struct EndpointsController {
    client: Client,
    services: Informer<Service>,
    pods: Informer<Pod>,
    endpoints: Informer<Endpoints>,
    queue: WorkQueue<Key>,
}

impl Controller for EndpointsController {
    const NAME: &'static str = "endpoint";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_svc = Arc::clone(self);
        let on_pod = Arc::clone(self);
        let on_ep = Arc::clone(self);
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
            self.endpoints.subscribe(move |c: &Change<Endpoints>| {
                // A write by hand or a deletion: the Service's sync puts it right. At the
                // first listing, orphans left by a stop while their Service was deleted.
                if !c.is_resync() {
                    on_ep.queue.add(c.object().key());
                }
            }),
        ]
    }

    async fn reconcile(self: &Arc<Self>, service_key: Key) -> Result<Action, Error> {
        let (namespace, name) = split_key(&service_key);
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), namespace);
        let current = self.endpoints.get(&service_key);
        let Some(service) = self.services.get(&service_key) else {
            // The Service is gone: so are the Endpoints this controller wrote for it.
            if let Some(ep) = current
                && is_managed(&ep)
            {
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            return Ok(Action::await_change());
        };
        if pods::selector(&service).is_none() {
            // Endpoints of a Service without a selector are the user's.
            return Ok(Action::await_change());
        }
        let selected = pods::selected(&service, self.pods.store());
        let want = desired(&service, selected.iter().map(|p| &***p));
        if let Some(ep) = &current
            && up_to_date(ep, &want)
        {
            return Ok(Action::await_change());
        }
        let result = match current {
            None => api.create(&PostParams::default(), &want).await,
            Some(ep) => {
                // The stored object with new subsets, labels and capacity mark (its other
                // metadata, e.g. the user's annotations, stays).
                let mut next = ep.object().clone();
                next.metadata.annotations = merge_annotations(ep.annotations(), &want);
                next.metadata.labels = want.metadata.labels;
                next.subsets = want.subsets;
                api.replace(name, &PostParams::default(), &next).await
            }
        };
        match result {
            Ok(_) => Ok(Action::await_change()),
            // The cache is behind (a create racing one, or a stale version): the watch event
            // that follows queues the Service again.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Action::await_change()),
            // Forbidden: the namespace is terminating; its deletion removes everything.
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(Action::await_change()),
            Err(e) => Err(e.into()),
        }
    }
}

impl EndpointsController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            queue: config.queue(),
            services: informers.get(),
            pods: informers.get(),
            endpoints: informers.get(),
        })
    }
}

/// Whether this controller wrote `ep` (and it is no leader-election record).
fn is_managed(ep: &Endpoints) -> bool {
    ep.labels().get(MANAGED_BY).map(String::as_str) == Some(CONTROLLER_NAME)
        && !ep.annotations().contains_key(LEADER_ANNOTATION)
}

/// The Endpoints `service` should have, given the pods it selects.
pub fn desired<'p>(service: &Service, pods: impl IntoIterator<Item = &'p Pod>) -> Endpoints {
    let spec = service.spec.clone().unwrap_or_default();
    let publish = spec.publish_not_ready_addresses.unwrap_or(false);
    let service_ports = spec.ports.unwrap_or_default();
    let headless = pods::is_headless(service);
    let mut offers = Vec::new();
    for pod in pods {
        if !pods::should_be_in_endpoints(pod, publish) {
            continue;
        }
        let Some(ip) = pods::ipv4(pod) else {
            continue;
        };
        let address = EndpointAddress {
            ip: ip.to_string(),
            hostname: pods::hostname(pod, service).map(str::to_string),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            target_ref: Some(pods::target_ref(pod)),
        };
        let ready = publish || api::pod::is_ready(pod);
        if service_ports.is_empty() {
            // A headless Service may have no ports: its addresses are listed without any.
            if headless {
                offers.push(Offer {
                    address,
                    ready,
                    ports: None,
                });
            }
            continue;
        }
        let ports: Vec<EndpointPort> = service_ports
            .iter()
            .filter_map(|sp| {
                pods::find_port(pod, sp).map(|port| EndpointPort {
                    name: sp.name.clone().filter(|n| !n.is_empty()),
                    port,
                    protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        // Every port resolved is offered by this address; unresolved ones are skipped
        // (upstream logs "Failed to find port for service").
        for port in ports {
            offers.push(Offer {
                address: address.clone(),
                ready,
                ports: Some(vec![port]),
            });
        }
    }
    let mut subsets = subsets::pack(&offers);
    let truncated = subsets::truncate(&mut subsets);
    let mut labels: BTreeMap<String, String> = service.labels().clone();
    labels.insert(MANAGED_BY.into(), CONTROLLER_NAME.into());
    if headless {
        labels.insert(HEADLESS.into(), String::new());
    } else {
        labels.remove(HEADLESS);
    }
    let annotations =
        truncated.then(|| BTreeMap::from([(OVER_CAPACITY.into(), "truncated".into())]));
    Endpoints {
        metadata: ObjectMeta {
            name: Some(service.name_any()),
            namespace: service.namespace(),
            labels: Some(labels),
            annotations,
            ..Default::default()
        },
        subsets: (!subsets.is_empty()).then_some(subsets),
    }
}

/// Whether `current` already says what `want` says (subsets, labels, the capacity mark).
fn up_to_date(current: &Endpoints, want: &Endpoints) -> bool {
    current.subsets.clone().unwrap_or_default() == want.subsets.clone().unwrap_or_default()
        && current.labels() == want.labels()
        && current.annotations().get(OVER_CAPACITY) == want.annotations().get(OVER_CAPACITY)
}

/// The annotations of an update: the existing ones (the user's), the capacity mark as `want`
/// says.
fn merge_annotations(
    existing: &BTreeMap<String, String>,
    want: &Endpoints,
) -> Option<BTreeMap<String, String>> {
    let mut out = existing.clone();
    match want.annotations().get(OVER_CAPACITY) {
        Some(v) => {
            out.insert(OVER_CAPACITY.into(), v.clone());
        }
        None => {
            out.remove(OVER_CAPACITY);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d",
            "labels": {"app": "web"}}, "spec": spec}))
        .unwrap()
    }

    fn pod(name: &str, ip: &str, ready: bool, port: i32) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "d", "uid": format!("uid-{name}"),
                "labels": {"app": "web"}},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c",
                "ports": [{"name": "http", "containerPort": port}]}]},
            "status": {"phase": "Running", "podIP": ip, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .unwrap()
    }

    #[test]
    fn ready_and_not_ready_pods_with_named_ports() {
        let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.9",
            "ports": [{"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"}]}));
        let pods = [
            pod("a", "10.244.0.2", true, 8080),
            pod("b", "10.244.0.3", false, 8080),
        ];
        let ep = desired(&svc, &pods);
        assert_eq!(ep.labels().get(MANAGED_BY).unwrap(), CONTROLLER_NAME);
        assert!(!ep.labels().contains_key(HEADLESS));
        let subsets = ep.subsets.unwrap();
        assert_eq!(subsets.len(), 1);
        let ready = subsets[0].addresses.as_ref().unwrap();
        assert_eq!(ready[0].ip, "10.244.0.2");
        assert_eq!(ready[0].node_name.as_deref(), Some("node-0"));
        let target = ready[0].target_ref.as_ref().unwrap();
        assert_eq!(
            (
                target.kind.as_deref(),
                target.name.as_deref(),
                target.uid.as_deref()
            ),
            (Some("Pod"), Some("a"), Some("uid-a"))
        );
        assert_eq!(
            subsets[0].not_ready_addresses.as_ref().unwrap()[0].ip,
            "10.244.0.3"
        );
        let port = &subsets[0].ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("web"), 8080));
    }

    #[test]
    fn publish_not_ready_lists_every_pod_as_ready_also_terminating_ones() {
        let svc = service(
            json!({"selector": {"app": "web"}, "publishNotReadyAddresses": true,
            "ports": [{"port": 80, "targetPort": 80}]}),
        );
        let mut deleting = pod("c", "10.244.0.4", true, 80);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2024-01-01T00:00:00Z".parse().unwrap(),
            ));
        let pods = [pod("b", "10.244.0.3", false, 80), deleting.clone()];
        let subsets = desired(&svc, &pods).subsets.unwrap();
        assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), 2);
        assert!(subsets[0].not_ready_addresses.is_none());
        // Without publishing, a terminating pod is gone from the endpoints.
        let plain = service(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}));
        assert!(desired(&plain, &[deleting]).subsets.is_none());
    }

    #[test]
    fn headless_services_list_hostnames_and_need_no_ports() {
        let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "None"}));
        let mut p = pod("web-0", "10.244.0.7", true, 80);
        let spec = p.spec.as_mut().unwrap();
        spec.hostname = Some("web-0".into());
        spec.subdomain = Some("web".into());
        let ep = desired(&svc, &[p]);
        assert_eq!(ep.labels().get(HEADLESS).map(String::as_str), Some(""));
        let subsets = ep.subsets.unwrap();
        let a = &subsets[0].addresses.as_ref().unwrap()[0];
        assert_eq!(a.hostname.as_deref(), Some("web-0"));
        assert!(subsets[0].ports.is_none());
        // A non-headless Service without ports lists nothing.
        let no_ports = service(json!({"selector": {"app": "web"}}));
        let p = pod("web-1", "10.244.0.8", true, 80);
        assert!(desired(&no_ports, &[p]).subsets.is_none());
    }

    #[test]
    fn an_unchanged_cluster_writes_nothing() {
        let svc = service(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}));
        let pods = [pod("a", "10.244.0.2", true, 80)];
        let mut current = desired(&svc, &pods);
        current.metadata.annotations = Some(BTreeMap::from([("user".into(), "x".into())]));
        assert!(up_to_date(&current, &desired(&svc, &pods)));
        assert!(!up_to_date(&current, &desired(&svc, &[])));
        let merged = merge_annotations(current.annotations(), &desired(&svc, &pods)).unwrap();
        assert_eq!(merged.get("user").map(String::as_str), Some("x"));
    }
}
