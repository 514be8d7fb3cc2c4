//! What the scheduler needs to know about a pod, read once per scheduling attempt so that filtering
//! thousands of nodes does not re-parse the pod's quantities or walk its spec each time.

use crate::{
    disk::{self, Disk},
    host_ports::{self, HostPort},
    pod_affinity::PodAffinity,
    resources::{Resources, pod_non_zero_requests, pod_requests},
    spread_constraint::SpreadConstraint,
};
use k8s_openapi::api::core::v1::{NodeSelectorTerm, Pod, PodSpec, Toleration};
use std::collections::BTreeMap;

/// The scheduler name a pod gets when it names none (the API server defaults it too).
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// A pod as the filters and scores see it.
#[derive(Clone, Debug, Default)]
pub struct PodInfo {
    /// `namespace/name`, for messages and logs.
    pub key: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`, which other pods' affinity terms and spread constraints select on.
    pub labels: BTreeMap<String, String>,
    /// Whether the pod is being deleted (spreading does not count it; preemption waits for it).
    pub terminating: bool,
    /// `metadata.creationTimestamp`, which breaks ties between preemption victims.
    pub created: Option<jiff::Timestamp>,
    /// Inter-pod affinity and anti-affinity terms.
    pub affinity: PodAffinity,
    /// `topologySpreadConstraints`.
    pub spread: Vec<SpreadConstraint>,
    /// `status.nominatedNodeName`: where an earlier preemption made room for the pod.
    pub nominated_node: Option<String>,
    /// The pod's UID, which keys the scheduler's accounting.
    pub uid: String,
    /// `spec.nodeName`, when the pod asks for one node.
    pub node_name: Option<String>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The terms of `requiredDuringSchedulingIgnoredDuringExecution`, when the pod has them.
    pub required_terms: Option<Vec<NodeSelectorTerm>>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// The inline disks it mounts that `VolumeRestrictions` checks.
    pub disks: Vec<Disk>,
    /// The claims of its `persistentVolumeClaim` volumes.
    pub claims: Vec<String>,
    /// The claims of its generic ephemeral volumes (`<pod>-<volume>`).
    pub ephemeral_claims: Vec<String>,
    /// The host ports its containers ask for.
    pub host_ports: Vec<HostPort>,
    /// Exact requests, for the resource filter.
    pub requests: Resources,
    /// CPU (millicores) and memory (bytes) with upstream's defaults for unset requests, for scoring.
    pub non_zero: (i64, i64),
    /// UID of the controlling owner, whose pods are spread across nodes.
    pub owner: Option<String>,
    /// `spec.priority`, which orders the queue.
    pub priority: i32,
    /// `spec.preemptionPolicy: Never`, which changes the failure message.
    pub preempt_never: bool,
}

impl PodInfo {
    /// Reads the parts of `pod` the scheduler decides on.
    pub fn new(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let labels = meta.labels.clone().unwrap_or_default();
        Self {
            affinity: PodAffinity::new(spec.affinity.as_ref(), &namespace, &labels),
            spread: spec
                .topology_spread_constraints
                .iter()
                .flatten()
                .map(|c| SpreadConstraint::new(c, &labels))
                .collect(),
            name: meta.name.clone().unwrap_or_default(),
            terminating: meta.deletion_timestamp.is_some(),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            nominated_node: pod
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.clone())
                .filter(|n| !n.is_empty()),
            namespace,
            labels,
            key: format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or("")
            ),
            uid: meta.uid.clone().unwrap_or_default(),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            required_terms: spec
                .affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|na| {
                    na.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(|s| s.node_selector_terms.clone()),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            disks: disk::disks(&spec),
            claims: claims(&spec),
            ephemeral_claims: spec
                .volumes
                .iter()
                .flatten()
                .filter(|v| v.ephemeral.is_some())
                .map(|v| format!("{}-{}", meta.name.as_deref().unwrap_or(""), v.name))
                .collect(),
            host_ports: host_ports::requested(&spec),
            requests: pod_requests(&spec),
            non_zero: pod_non_zero_requests(&spec),
            owner: owner_of(pod),
            priority: spec.priority.unwrap_or(0),
            preempt_never: spec.preemption_policy.as_deref() == Some("Never"),
        }
    }
}

/// The controlling owner's UID: pods of one ReplicaSet, StatefulSet or Job spread together.
pub fn owner_of(pod: &Pod) -> Option<String> {
    api::pod::controller_of(&pod.metadata).map(|o| o.uid.clone())
}

/// The names of the claims a pod mounts through `persistentVolumeClaim` volumes (upstream's
/// `PVCRefCounts` count only those, not generic ephemeral volumes).
fn claims(spec: &PodSpec) -> Vec<String> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect()
}

/// Whether this scheduler should place `pod` now: unbound, not terminating, not finished, ours,
/// and with no scheduling gates left (upstream keeps gated pods out of the active queue).
pub fn wants_scheduling(pod: &Pod, scheduler_name: &str) -> bool {
    let Some(spec) = &pod.spec else { return false };
    let ours = match spec.scheduler_name.as_deref() {
        None | Some("") => scheduler_name == DEFAULT_SCHEDULER_NAME,
        Some(name) => name == scheduler_name,
    };
    ours && spec.node_name.as_deref().is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
        && !is_terminal(pod)
        && spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
}

/// `Succeeded` or `Failed`: such pods hold no resources on their node.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::core::v1::{PodSchedulingGate, PodSpec, PodStatus},
        apimachinery::pkg::apis::meta::v1::{OwnerReference, Time},
    };

    fn pod(f: impl FnOnce(&mut Pod)) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("default".into());
        p.spec = Some(PodSpec::default());
        f(&mut p);
        p
    }

    fn spec(p: &mut Pod) -> &mut PodSpec {
        p.spec.get_or_insert_with(Default::default)
    }

    #[test]
    fn which_pods_are_scheduled() {
        let cases: Vec<(&str, Pod, bool)> = vec![
            ("pending, no scheduler name", pod(|_| {}), true),
            (
                "default scheduler named",
                pod(|p| spec(p).scheduler_name = Some("default-scheduler".into())),
                true,
            ),
            (
                "another scheduler",
                pod(|p| spec(p).scheduler_name = Some("volcano".into())),
                false,
            ),
            (
                "already bound",
                pod(|p| spec(p).node_name = Some("node-1".into())),
                false,
            ),
            (
                "terminating",
                pod(|p| p.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH))),
                false,
            ),
            (
                "finished",
                pod(|p| {
                    p.status = Some(PodStatus {
                        phase: Some("Failed".into()),
                        ..Default::default()
                    })
                }),
                false,
            ),
            (
                "gated",
                pod(|p| {
                    spec(p).scheduling_gates = Some(vec![PodSchedulingGate {
                        name: "wait".into(),
                    }])
                }),
                false,
            ),
            ("no spec", Pod::default(), false),
        ];
        for (name, p, want) in cases {
            assert_eq!(wants_scheduling(&p, DEFAULT_SCHEDULER_NAME), want, "{name}");
        }
    }

    #[test]
    fn reads_owner_and_priority() {
        let p = pod(|p| {
            p.metadata.uid = Some("u1".into());
            p.metadata.owner_references = Some(vec![
                OwnerReference {
                    uid: "not-controller".into(),
                    ..Default::default()
                },
                OwnerReference {
                    uid: "rs-1".into(),
                    controller: Some(true),
                    ..Default::default()
                },
            ]);
            spec(p).priority = Some(7);
            spec(p).preemption_policy = Some("Never".into());
        });
        let info = PodInfo::new(&p);
        assert_eq!(info.owner.as_deref(), Some("rs-1"));
        assert_eq!((info.priority, info.preempt_never), (7, true));
        assert_eq!(
            (info.key.as_str(), info.uid.as_str()),
            ("default/web", "u1")
        );
    }
}
