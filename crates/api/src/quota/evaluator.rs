//! What an object uses of a quota (upstream's `pkg/quota/v1/evaluator/core` and the generic
//! object-count evaluator): pods (compute resources and scopes), services (node ports, load
//! balancers), persistent volume claims (storage, per storage class) and object counts
//! (`count/<resource>.<group>`, and the legacy names `configmaps`, `secrets`,
//! `replicationcontrollers`, `resourcequotas`).
//!
//! The admission plugin and the controller both ask these functions, so a create is charged
//! exactly what the controller later counts for the same object.

use super::resources::{Amount, ResourceList, add};
use crate::validation::quota::{is_extended_resource_name, is_native_resource};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, Pod, PodAffinityTerm, ResourceQuota,
    ScopedResourceSelectorRequirement, Service,
};
use std::collections::{BTreeMap, BTreeSet};

/// A resource by API group and plural name (`("apps", "replicasets")`; the core group is `""`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// The API group.
    pub group: String,
    /// The plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// A group resource.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }

    /// Its object-count quota name: `count/pods`, `count/replicasets.apps`.
    pub fn count_name(&self) -> String {
        if self.group.is_empty() {
            format!("count/{}", self.resource)
        } else {
            format!("count/{}.{}", self.resource, self.group)
        }
    }

    /// The name core kinds were counted by before `count/` existed, still honoured.
    pub fn legacy_alias(&self) -> Option<&'static str> {
        if !self.group.is_empty() {
            return None;
        }
        match self.resource.as_str() {
            "configmaps" => Some("configmaps"),
            "resourcequotas" => Some("resourcequotas"),
            "replicationcontrollers" => Some("replicationcontrollers"),
            "secrets" => Some("secrets"),
            _ => None,
        }
    }
}

/// The suffix of quota names per storage class: `gold.storageclass.storage.k8s.io/requests.storage`.
pub const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// The pod resources quota tracks by name (upstream's `podResources`).
const POD_RESOURCES: [&str; 11] = [
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];

/// Resources a pod must request explicitly when a quota limits them (upstream's
/// `validationSet`, a compatibility requirement it keeps to exactly these six).
const MUST_SPECIFY: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

const SERVICE_RESOURCES: [&str; 4] = [
    "count/services",
    "services",
    "services.nodeports",
    "services.loadbalancers",
];

const CLAIM_RESOURCES: [&str; 2] = ["persistentvolumeclaims", "requests.storage"];

/// How usage of one resource is measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evaluator {
    /// Pods: compute resources, pod counts, scopes.
    Pods,
    /// Services: counts, node ports, load balancers.
    Services,
    /// Persistent volume claims: counts and storage, also per storage class.
    Claims,
    /// Any other resource: how many objects exist.
    Count(GroupResource),
}

/// An object being measured, typed where its evaluator reads it.
#[derive(Clone, Copy, Debug)]
pub enum Object<'a> {
    /// A pod.
    Pod(&'a Pod),
    /// A service.
    Service(&'a Service),
    /// A claim.
    Claim(&'a PersistentVolumeClaim),
    /// Anything only counted.
    Counted,
}

impl Evaluator {
    /// The evaluator of a resource (an object count for any resource without a special one).
    pub fn for_resource(gr: &GroupResource) -> Self {
        match (gr.group.as_str(), gr.resource.as_str()) {
            ("", "pods") => Self::Pods,
            ("", "services") => Self::Services,
            ("", "persistentvolumeclaims") => Self::Claims,
            _ => Self::Count(gr.clone()),
        }
    }

    /// The evaluator accounting the quota resource `name`, if any: which objects the controller
    /// must watch for it.
    pub fn tracking(name: &str) -> Option<Self> {
        for e in [Self::Pods, Self::Services, Self::Claims] {
            if e.matches_resource(name) {
                return Some(e);
            }
        }
        let gr = match name {
            "configmaps" | "resourcequotas" | "replicationcontrollers" | "secrets" => {
                GroupResource::new("", name)
            }
            _ => {
                let rest = name.strip_prefix("count/")?;
                let (resource, group) = rest.split_once('.').unwrap_or((rest, ""));
                if resource.is_empty() {
                    return None;
                }
                GroupResource::new(group, resource)
            }
        };
        Some(Self::for_resource(&gr))
    }

    /// The resource it measures.
    pub fn group_resource(&self) -> GroupResource {
        match self {
            Self::Pods => GroupResource::new("", "pods"),
            Self::Services => GroupResource::new("", "services"),
            Self::Claims => GroupResource::new("", "persistentvolumeclaims"),
            Self::Count(gr) => gr.clone(),
        }
    }

    /// Whether it accounts the quota resource `name`.
    pub fn matches_resource(&self, name: &str) -> bool {
        match self {
            Self::Pods => {
                POD_RESOURCES.contains(&name)
                    || name.starts_with("hugepages-")
                    || name.starts_with("requests.hugepages-")
                    || (!is_native_resource(name) && name.starts_with("requests."))
            }
            Self::Services => SERVICE_RESOURCES.contains(&name),
            Self::Claims => {
                name == "count/persistentvolumeclaims"
                    || CLAIM_RESOURCES.contains(&name)
                    || CLAIM_RESOURCES
                        .iter()
                        .any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
            }
            Self::Count(gr) => name == gr.count_name() || gr.legacy_alias() == Some(name),
        }
    }

    /// The names among `names` it accounts (upstream's `MatchingResources`).
    pub fn matching_resources<'a>(
        &self,
        names: impl IntoIterator<Item = &'a String>,
    ) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| self.matches_resource(n))
            .cloned()
            .collect()
    }

    /// Whether an update can change what an object uses (services change type, claims grow;
    /// pods cannot resize in place here, and counts only change on create).
    pub fn handles_update(&self) -> bool {
        matches!(self, Self::Services | Self::Claims)
    }

    /// What `object` uses (upstream's `Usage`); `now` decides whether a pod stuck terminating
    /// still counts.
    pub fn usage(&self, object: Object<'_>, now: Timestamp) -> ResourceList {
        match (self, object) {
            (Self::Pods, Object::Pod(p)) => pod_usage(p, now),
            (Self::Services, Object::Service(s)) => service_usage(s),
            (Self::Claims, Object::Claim(c)) => claim_usage(c),
            (e, _) => {
                let gr = e.group_resource();
                let mut out = ResourceList::from([(gr.count_name(), Amount::count(1))]);
                if let Some(alias) = gr.legacy_alias() {
                    out.insert(alias.to_string(), Amount::count(1));
                }
                out
            }
        }
    }

    /// Whether `object` falls under one scope selector term; only pods have scopes.
    pub fn matches_scope(
        &self,
        selector: &ScopedResourceSelectorRequirement,
        object: Object<'_>,
    ) -> bool {
        match object {
            Object::Pod(p) => pod_matches_scope(selector, p),
            _ => false,
        }
    }

    /// Whether `quota` covers `object`: it limits (in `status.hard`) a resource this evaluator
    /// accounts, and the object falls under every scope of the quota (upstream's `Matches`).
    pub fn matches(&self, quota: &ResourceQuota, object: Object<'_>) -> bool {
        let hard = quota.status.as_ref().and_then(|s| s.hard.as_ref());
        let limits_one = hard.is_some_and(|h| h.keys().any(|k| self.matches_resource(k)));
        limits_one
            && scope_selectors(quota)
                .iter()
                .all(|s| self.matches_scope(s, object))
    }

    /// Upstream's `Constraints`: a pod must request what its quota limits among cpu and memory.
    pub fn constraints(&self, required: &[String], object: Object<'_>) -> Result<(), String> {
        match object {
            Object::Pod(p) if *self == Self::Pods => pod_constraints(required, p),
            _ => Ok(()),
        }
    }
}

/// The quota's scopes and scope selector terms, as one list (scopes become `Exists` terms).
pub fn scope_selectors(quota: &ResourceQuota) -> Vec<ScopedResourceSelectorRequirement> {
    let spec = quota.spec.as_ref();
    let mut out: Vec<ScopedResourceSelectorRequirement> = spec
        .and_then(|s| s.scopes.as_ref())
        .into_iter()
        .flatten()
        .map(|scope| ScopedResourceSelectorRequirement {
            scope_name: scope.clone(),
            operator: "Exists".into(),
            values: None,
        })
        .collect();
    out.extend(
        spec.and_then(|s| s.scope_selector.as_ref())
            .and_then(|s| s.match_expressions.clone())
            .into_iter()
            .flatten(),
    );
    out
}

/// Whether a pod counts its compute resources: not terminal, and not past its deletion grace
/// period (upstream's `QuotaV1Pod`: a pod stuck terminating on a lost node should not block
/// replacements). The time it stops counting is [`pod_stops_counting_at`].
pub fn pod_counts_compute(pod: &Pod, now: Timestamp) -> bool {
    if matches!(crate::pod::phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    pod_stops_counting_at(pod).is_none_or(|at| now <= at)
}

/// When a pod being deleted stops counting its compute resources (its deletion time plus its
/// grace period).
pub fn pod_stops_counting_at(pod: &Pod) -> Option<Timestamp> {
    let at = pod.metadata.deletion_timestamp.as_ref()?.0;
    let grace = pod.metadata.deletion_grace_period_seconds?;
    at.checked_add(SignedDuration::from_secs(grace)).ok()
}

/// What a pod uses (upstream's `PodUsageFunc`): `count/pods` always, compute resources unless it
/// is terminal.
pub fn pod_usage(pod: &Pod, now: Timestamp) -> ResourceList {
    let count = ResourceList::from([("count/pods".to_string(), Amount::count(1))]);
    if !pod_counts_compute(pod, now) {
        return count;
    }
    let (requests, limits) = pod_requests_and_limits(pod);
    add(&count, &compute_usage(&requests, &limits))
}

/// One container's or a whole pod's quota resources from its requests and limits (upstream's
/// `podComputeUsageHelper`).
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::from([("pods".to_string(), Amount::count(1))]);
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r.to_string(), *q);
            out.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), *q);
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            out.insert(name.clone(), *q);
            out.insert(format!("requests.{name}"), *q);
        }
        if is_extended_resource_name(name) {
            out.insert(format!("requests.{name}"), *q);
        }
    }
    out
}

fn container_list(c: &Container, limits: bool) -> ResourceList {
    let r = c.resources.as_ref();
    super::resources::from_wire(r.and_then(|r| {
        if limits {
            r.limits.as_ref()
        } else {
            r.requests.as_ref()
        }
    }))
}

fn max_into(into: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        let m = into.get(k).map_or(*v, |have| have.max(*v));
        into.insert(k.clone(), m);
    }
}

/// Upstream's `PodRequests` or `PodLimits`: the containers together, sidecars (restartable init
/// containers) included, or the largest init step if larger; then the overhead (for limits,
/// only on resources that have a limit).
fn pod_total(pod: &Pod, limits: bool) -> ResourceList {
    let Some(spec) = pod.spec.as_ref() else {
        return ResourceList::new();
    };
    let mut total = ResourceList::new();
    for c in &spec.containers {
        total = add(&total, &container_list(c, limits));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let own = container_list(c, limits);
        let step = if c.restart_policy.as_deref() == Some("Always") {
            total = add(&total, &own);
            sidecars = add(&sidecars, &own);
            sidecars.clone()
        } else {
            add(&own, &sidecars)
        };
        max_into(&mut init_peak, &step);
    }
    max_into(&mut total, &init_peak);
    let overhead = super::resources::from_wire(spec.overhead.as_ref());
    for (k, v) in overhead {
        match total.get(&k) {
            Some(have) if limits && !have.value.is_zero() => {
                total.insert(k, have.plus(v));
            }
            Some(have) if !limits => {
                total.insert(k, have.plus(v));
            }
            None if !limits => {
                total.insert(k, v);
            }
            _ => {}
        }
    }
    total
}

fn pod_requests_and_limits(pod: &Pod) -> (ResourceList, ResourceList) {
    (pod_total(pod, false), pod_total(pod, true))
}

/// Whether a pod's QoS class is BestEffort: no container requests or limits any CPU or memory.
pub fn is_best_effort(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    !spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| {
            [false, true].into_iter().any(|limits| {
                let list = container_list(c, limits);
                ["cpu", "memory"].iter().any(|r| {
                    list.get(*r)
                        .is_some_and(|q| !q.value.is_zero() && !q.value.is_negative())
                })
            })
        })
}

/// Whether a pod is Terminating in quota's sense: it has an active deadline.
pub fn is_terminating_scope(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .is_some_and(|d| d >= 0)
}

fn cross_namespace(term: &PodAffinityTerm) -> bool {
    term.namespaces.as_ref().is_some_and(|n| !n.is_empty()) || term.namespace_selector.is_some()
}

/// Whether a pod's (anti-)affinity names other namespaces.
pub fn uses_cross_namespace_affinity(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return false;
    };
    let terms =
        |required: Option<&Vec<PodAffinityTerm>>,
         preferred: Option<&Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>| {
            required.into_iter().flatten().any(cross_namespace)
                || preferred
                    .into_iter()
                    .flatten()
                    .any(|w| cross_namespace(&w.pod_affinity_term))
        };
    affinity.pod_affinity.as_ref().is_some_and(|a| {
        terms(
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    }) || affinity.pod_anti_affinity.as_ref().is_some_and(|a| {
        terms(
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    })
}

/// Whether a pod falls under one scope term (upstream's `podMatchesScopeFunc`).
pub fn pod_matches_scope(selector: &ScopedResourceSelectorRequirement, pod: &Pod) -> bool {
    match selector.scope_name.as_str() {
        "Terminating" => is_terminating_scope(pod),
        "NotTerminating" => !is_terminating_scope(pod),
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "CrossNamespacePodAffinity" => uses_cross_namespace_affinity(pod),
        "PriorityClass" => {
            let class = pod
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_deref())
                .filter(|c| !c.is_empty());
            let values = selector.values.as_deref().unwrap_or_default();
            match selector.operator.as_str() {
                "Exists" => class.is_some(),
                "DoesNotExist" => class.is_none(),
                "In" => class.is_some_and(|c| values.iter().any(|v| v == c)),
                "NotIn" => class.is_none_or(|c| !values.iter().any(|v| v == c)),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Upstream's pod `Constraints`: when a quota limits cpu or memory (requests or limits), every
/// container must state them: `must specify limits.cpu for: a,b; requests.memory for: a`.
pub fn pod_constraints(required: &[String], pod: &Pod) -> Result<(), String> {
    let required: BTreeSet<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| MUST_SPECIFY.contains(r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let usage = compute_usage(&container_list(c, false), &container_list(c, true));
        for r in &required {
            if !usage.contains_key(*r) {
                missing.entry(r).or_default().insert(c.name.clone());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// The type a service is charged as (`NodePort`, `LoadBalancer`, or nothing special).
pub fn service_quota_type(svc: &Service) -> &str {
    svc.spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .filter(|t| matches!(*t, "NodePort" | "LoadBalancer"))
        .unwrap_or_default()
}

/// What a service uses (upstream's service `Usage`).
pub fn service_usage(svc: &Service) -> ResourceList {
    let spec = svc.spec.as_ref();
    let ports = spec.and_then(|s| s.ports.as_ref()).map_or(0, Vec::len);
    let ports = i64::try_from(ports).unwrap_or(i64::MAX);
    let mut out = ResourceList::from([
        ("count/services".to_string(), Amount::count(1)),
        ("services".to_string(), Amount::count(1)),
        ("services.loadbalancers".to_string(), Amount::zero()),
        ("services.nodeports".to_string(), Amount::zero()),
    ]);
    match service_quota_type(svc) {
        "NodePort" => {
            out.insert("services.nodeports".into(), Amount::count(ports));
        }
        "LoadBalancer" => {
            let node_ports =
                if spec.and_then(|s| s.allocate_load_balancer_node_ports) == Some(false) {
                    let explicit = spec
                        .and_then(|s| s.ports.as_ref())
                        .into_iter()
                        .flatten()
                        .filter(|p| p.node_port.is_some_and(|n| n != 0))
                        .count();
                    i64::try_from(explicit).unwrap_or(i64::MAX)
                } else {
                    ports
                };
            out.insert("services.nodeports".into(), Amount::count(node_ports));
            out.insert("services.loadbalancers".into(), Amount::count(1));
        }
        _ => {}
    }
    out
}

/// A claim's storage class: the beta annotation first, then `spec.storageClassName`.
pub fn claim_class(pvc: &PersistentVolumeClaim) -> Option<&str> {
    pvc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
        .map(String::as_str)
        .or_else(|| {
            pvc.spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
        })
        .filter(|c| !c.is_empty())
}

/// What a claim uses (upstream's claim `Usage`): the claim, its requested storage rounded up to
/// whole bytes, each also under its storage class.
pub fn claim_usage(pvc: &PersistentVolumeClaim) -> ResourceList {
    let mut out = ResourceList::from([
        ("persistentvolumeclaims".to_string(), Amount::count(1)),
        ("count/persistentvolumeclaims".to_string(), Amount::count(1)),
    ]);
    let class = claim_class(pvc);
    if let Some(class) = class {
        out.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            Amount::count(1),
        );
    }
    let storage = pvc
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| Amount::parse(&q.0).ok());
    if let Some(mut storage) = storage {
        // Whole bytes, as upstream rounds (a quota's value must be an integer).
        let whole = storage.value.value();
        if whole.checked_mul(1000).is_some() {
            let rounded = crate::quantity::Quantity::from_milli(whole * 1000);
            if rounded != storage.value {
                storage.value = rounded;
            }
        }
        out.insert("requests.storage".into(), storage);
        if let Some(class) = class {
            out.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                storage,
            );
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn names(list: &ResourceList) -> Vec<(&str, String)> {
        list.iter()
            .map(|(k, v)| (k.as_str(), v.to_string()))
            .collect()
    }

    #[test]
    fn pod_usage_as_upstream() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "i", "resources": {
                "requests": {"cpu": "500m", "memory": "252Mi", "ephemeral-storage": "30Gi", "example.com/dongle": "2"},
                "limits": {"example.com/dongle": "2"}}},
            {"name": "b", "image": "i", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1"}}}
        ]}}));
        let now = clock::now();
        assert_eq!(
            names(&pod_usage(&p, now)),
            vec![
                ("count/pods", "1".into()),
                ("cpu", "750m".into()),
                ("ephemeral-storage", "30Gi".into()),
                ("limits.cpu", "1".into()),
                ("memory", "252Mi".into()),
                ("pods", "1".into()),
                ("requests.cpu", "750m".into()),
                ("requests.ephemeral-storage", "30Gi".into()),
                ("requests.example.com/dongle", "2".into()),
                ("requests.memory", "252Mi".into()),
            ]
        );
        let mut done = p.clone();
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        assert_eq!(
            names(&pod_usage(&done, now)),
            vec![("count/pods", "1".into())]
        );
        // Stuck terminating past its grace period: no longer charged.
        let mut stuck = p.clone();
        stuck.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                now - SignedDuration::from_secs(60),
            ));
        stuck.metadata.deletion_grace_period_seconds = Some(30);
        assert_eq!(pod_usage(&stuck, now).len(), 1);
        stuck.metadata.deletion_grace_period_seconds = Some(120);
        assert!(pod_usage(&stuck, now).len() > 1);
    }

    #[test]
    fn init_containers_and_sidecars() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [
                {"name": "big", "image": "i", "resources": {"requests": {"cpu": "2"}}},
                {"name": "side", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}
            ],
            "containers": [{"name": "a", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
            "overhead": {"cpu": "10m"}}}));
        let u = pod_usage(&p, clock::now());
        assert_eq!(u["requests.cpu"].to_string(), "2010m");
    }

    #[test]
    fn scopes() {
        let best = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "i"}]}}),
        );
        let burst = pod(
            json!({"metadata": {"name": "p"}, "spec": {"activeDeadlineSeconds": 10, "priorityClassName": "gold",
            "containers": [{"name": "a", "image": "i", "resources": {"requests": {"memory": "1Mi"}}}]}}),
        );
        let term =
            |scope: &str, op: &str, values: Option<Vec<&str>>| ScopedResourceSelectorRequirement {
                scope_name: scope.into(),
                operator: op.into(),
                values: values.map(|v| v.into_iter().map(String::from).collect()),
            };
        assert!(pod_matches_scope(
            &term("BestEffort", "Exists", None),
            &best
        ));
        assert!(!pod_matches_scope(
            &term("BestEffort", "Exists", None),
            &burst
        ));
        assert!(pod_matches_scope(
            &term("NotBestEffort", "Exists", None),
            &burst
        ));
        assert!(pod_matches_scope(
            &term("NotTerminating", "Exists", None),
            &best
        ));
        assert!(pod_matches_scope(
            &term("Terminating", "Exists", None),
            &burst
        ));
        assert!(pod_matches_scope(
            &term("PriorityClass", "In", Some(vec!["gold"])),
            &burst
        ));
        assert!(!pod_matches_scope(
            &term("PriorityClass", "In", Some(vec!["gold"])),
            &best
        ));
        assert!(pod_matches_scope(
            &term("PriorityClass", "NotIn", Some(vec!["gold"])),
            &best
        ));
        assert!(pod_matches_scope(
            &term("PriorityClass", "DoesNotExist", None),
            &best
        ));
    }

    #[test]
    fn constraints_name_the_containers() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "i", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "image": "i"}]}}));
        let err = pod_constraints(&["cpu".into(), "memory".into(), "pods".into()], &p).unwrap_err();
        assert_eq!(err, "must specify cpu for: b; memory for: a,b");
        assert!(pod_constraints(&["pods".into()], &p).is_ok());
    }

    #[test]
    fn services_and_claims() {
        let lb: Service = serde_json::from_value(
            json!({"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": true, "ports": [{"port": 80}]}}),
        )
        .unwrap();
        let u = service_usage(&lb);
        assert_eq!(u["services.nodeports"].to_string(), "1");
        assert_eq!(u["services.loadbalancers"].to_string(), "1");
        let pvc: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {
            "storageClassName": "gold", "resources": {"requests": {"storage": "1Gi"}}}}))
            .unwrap();
        let u = claim_usage(&pvc);
        assert_eq!(
            u["gold.storageclass.storage.k8s.io/requests.storage"].to_string(),
            "1Gi"
        );
        assert_eq!(
            u["gold.storageclass.storage.k8s.io/persistentvolumeclaims"].to_string(),
            "1"
        );
        assert_eq!(u["requests.storage"].to_string(), "1Gi");
    }

    #[test]
    fn which_evaluator_tracks_a_name() {
        let t = |n: &str| Evaluator::tracking(n).map(|e| e.group_resource());
        assert_eq!(t("requests.cpu"), Some(GroupResource::new("", "pods")));
        assert_eq!(
            t("requests.example.com/dongle"),
            Some(GroupResource::new("", "pods"))
        );
        assert_eq!(
            t("requests.storage"),
            Some(GroupResource::new("", "persistentvolumeclaims"))
        );
        assert_eq!(
            t("gold.storageclass.storage.k8s.io/requests.storage"),
            Some(GroupResource::new("", "persistentvolumeclaims"))
        );
        assert_eq!(
            t("services.nodeports"),
            Some(GroupResource::new("", "services"))
        );
        assert_eq!(t("secrets"), Some(GroupResource::new("", "secrets")));
        assert_eq!(
            t("count/replicasets.apps"),
            Some(GroupResource::new("apps", "replicasets"))
        );
        assert_eq!(
            t("count/widgets.example.com"),
            Some(GroupResource::new("example.com", "widgets"))
        );
        assert_eq!(t("count/pods"), Some(GroupResource::new("", "pods")));
        assert_eq!(t("example.com/dongle"), None);
        let secrets = Evaluator::for_resource(&GroupResource::new("", "secrets"));
        assert_eq!(
            names(&secrets.usage(Object::Counted, clock::now())),
            vec![("count/secrets", "1".into()), ("secrets", "1".into())]
        );
    }
}
