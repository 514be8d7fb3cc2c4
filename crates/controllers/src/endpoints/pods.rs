//! What a Service makes of its pods, shared by the endpoints and endpointslice controllers as
//! upstream shares `pkg/controller/util/endpoint` and `endpointslice/util`: which pods a Service
//! selects, which of them belong in its endpoints, the address and ports each offers.

use informer::{Change, Key, Shared, Store, key};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use std::collections::BTreeSet;

/// The Service's selector, if it has one that can select pods. Services without a selector
/// get their endpoints out of band (the user writes them); ExternalName Services get none
/// (upstream issue 105986).
pub fn selector(service: &Service) -> Option<&std::collections::BTreeMap<String, String>> {
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    spec.selector.as_ref().filter(|s| !s.is_empty())
}

/// Whether `service` selects `pod` (same namespace, every selector label matches).
pub fn selects(service: &Service, pod: &Pod) -> bool {
    let Some(selector) = selector(service) else {
        return false;
    };
    if service.namespace() != pod.namespace() {
        return false;
    }
    let labels = pod.metadata.labels.as_ref();
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The keys of the Services of `pod`'s namespace that select it, for the pod's event handlers.
pub fn services_of(services: &Store<Service>, pod: &Pod) -> BTreeSet<Key> {
    let namespace = pod.namespace().unwrap_or_default();
    services
        .in_namespace(&namespace)
        .iter()
        .filter(|s| selects(s, pod))
        .map(|s| key(&namespace, &s.name_any()))
        .collect()
}

/// The Services a pod's change concerns: those that select it now or selected it before (a
/// relist of the same version concerns none).
pub fn services_affected(services: &Store<Service>, change: &Change<Pod>) -> BTreeSet<Key> {
    if change.is_resync() {
        return BTreeSet::new();
    }
    let mut keys = services_of(services, change.object());
    if let Change::Updated { old, .. } = change {
        keys.extend(services_of(services, old));
    }
    keys
}

/// The pods of the Service's namespace it selects.
pub fn selected(service: &Service, pods: &Store<Pod>) -> Vec<Shared<Pod>> {
    let namespace = service.namespace().unwrap_or_default();
    let mut pods: Vec<Shared<Pod>> = pods
        .in_namespace(&namespace)
        .into_iter()
        .filter(|p| selects(service, p))
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// Whether a pod belongs in a Service's endpoints at all (upstream's
/// `ShouldPodBeInEndpoints`): not terminal, has an IP, and not being deleted unless
/// `include_terminating`.
pub fn should_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    if matches!(api::pod::phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    if ipv4(pod).is_none() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// The pod's IPv4 address (`status.podIP`, else the first IPv4 of `status.podIPs`): the
/// address family of every Service here (single-stack IPv4, as the service range).
pub fn ipv4(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?;
    let is_v4 = |ip: &str| ip.parse::<std::net::Ipv4Addr>().is_ok();
    status.pod_ip.as_deref().filter(|ip| is_v4(ip)).or_else(|| {
        status
            .pod_ips
            .iter()
            .flatten()
            .map(|p| p.ip.as_str())
            .find(|ip| is_v4(ip))
    })
}

/// Whether an endpoint carries the pod's hostname (upstream's `ShouldSetHostname`): the pod
/// names a hostname and its `subdomain` is this Service, as a StatefulSet's pods name their
/// governing headless Service.
pub fn hostname<'p>(pod: &'p Pod, service: &Service) -> Option<&'p str> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == Some(service.name_any().as_str())
        && service.namespace() == pod.namespace())
    .then_some(hostname)
}

/// The pod port a Service port reaches (upstream's `podutil.FindPort`): a named `targetPort`
/// is looked up among the containers' (and restartable init containers') named ports of the
/// same protocol; a number is used as is; no `targetPort` means the Service's own port.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match &port.target_port {
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
        Some(IntOrString::Int(n)) if *n > 0 => Some(*n),
        _ => Some(port.port),
    }
}

/// Whether the Service is headless (`clusterIP: None`).
pub fn is_headless(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// The reference from an endpoint to its pod.
pub fn target_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.namespace(),
        name: Some(pod.name_any()),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn port(v: serde_json::Value) -> ServicePort {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn ports_resolve_by_name_protocol_and_number() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a", "ports": [
                {"name": "http", "containerPort": 8080},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}],
            "initContainers": [{"name": "side", "restartPolicy": "Always",
                "ports": [{"name": "metrics", "containerPort": 9090}]},
                {"name": "init", "ports": [{"name": "setup", "containerPort": 1}]}]}}));
        let find = |v| find_port(&p, &port(v));
        assert_eq!(find(json!({"port": 80, "targetPort": "http"})), Some(8080));
        assert_eq!(
            find(json!({"port": 53, "targetPort": "dns", "protocol": "UDP"})),
            Some(53)
        );
        assert_eq!(find(json!({"port": 53, "targetPort": "dns"})), None);
        assert_eq!(
            find(json!({"port": 1, "targetPort": "metrics"})),
            Some(9090)
        );
        assert_eq!(find(json!({"port": 1, "targetPort": "setup"})), None);
        assert_eq!(find(json!({"port": 80, "targetPort": 9376})), Some(9376));
        assert_eq!(find(json!({"port": 80})), Some(80));
    }

    #[test]
    fn terminal_addressless_and_deleting_pods_are_left_out() {
        let running = pod(json!({"metadata": {"name": "p"},
            "status": {"phase": "Running", "podIP": "10.244.0.5"}}));
        assert!(should_be_in_endpoints(&running, false));
        let no_ip = pod(json!({"metadata": {"name": "p"}, "status": {"phase": "Running"}}));
        assert!(!should_be_in_endpoints(&no_ip, true));
        let done = pod(json!({"metadata": {"name": "p"},
            "status": {"phase": "Succeeded", "podIP": "10.244.0.5"}}));
        assert!(!should_be_in_endpoints(&done, true));
        let deleting = pod(json!({"metadata": {"name": "p",
            "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "status": {"phase": "Running", "podIP": "10.244.0.5"}}));
        assert!(!should_be_in_endpoints(&deleting, false));
        assert!(should_be_in_endpoints(&deleting, true));
        let v6_first = pod(
            json!({"metadata": {"name": "p"}, "status": {"podIP": "fd00::1",
            "podIPs": [{"ip": "fd00::1"}, {"ip": "10.0.0.1"}]}}),
        );
        assert_eq!(ipv4(&v6_first), Some("10.0.0.1"));
    }

    #[test]
    fn selectors_hostnames_and_headless() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "d"},
            "spec": {"selector": {"app": "web"}, "clusterIP": "None"}}))
        .unwrap();
        let member = pod(json!({"metadata": {"name": "web-0", "namespace": "d",
            "labels": {"app": "web", "x": "y"}},
            "spec": {"containers": [], "hostname": "web-0", "subdomain": "web"}}));
        let other_ns = pod(json!({"metadata": {"name": "web-0", "namespace": "e",
            "labels": {"app": "web"}}}));
        assert!(selects(&svc, &member));
        assert!(!selects(&svc, &other_ns));
        assert_eq!(hostname(&member, &svc), Some("web-0"));
        assert!(is_headless(&svc));
        let external: Service = serde_json::from_value(json!({"metadata": {"name": "x"},
            "spec": {"type": "ExternalName", "selector": {"app": "web"}}}))
        .unwrap();
        assert!(selector(&external).is_none());
        let empty: Service =
            serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {"selector": {}}}))
                .unwrap();
        assert!(selector(&empty).is_none());
    }
}
