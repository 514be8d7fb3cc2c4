//! The filter chain: whether one pod may go to one node, and if not, why, in upstream's words.
//!
//! Upstream runs `NodeUnschedulable`, `NodeName`, `TaintToleration`, `NodeAffinity`, `NodePorts`,
//! `NodeResourcesFit`, `VolumeRestrictions`, `NodeVolumeLimits`, `VolumeBinding` (here folded
//! into the node affinity, see [`crate::volume_binding`]), `VolumeZone`, `PodTopologySpread` and
//! `InterPodAffinity` in this order (`apis/config/v1/default_plugins.go`) and stops at the first
//! that rejects the node, so a node is counted once in the failure message, under the first
//! reason.

use crate::{
    cache::Cache,
    fit,
    inter_pod_affinity::AffinityState,
    node_info::{NodeInfo, Usage},
    node_ports,
    node_volume_limits::{self, VolumeLimits},
    pod_info::PodInfo,
    topology_spread::SpreadState,
    volume_restrictions::{self, ReadWriteOncePod},
    volume_zone::{self, VolumeZones},
};
use api::{node_affinity, taint};
use k8s_openapi::api::core::v1::Taint;

/// Why a node cannot take a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Upstream's reason strings (several only for resources).
    pub reasons: Vec<String>,
    /// Whether removing other pods could make room (upstream's `Unschedulable`, as opposed to
    /// `UnschedulableAndUnresolvable`), which decides the preemption part of the message.
    pub resolvable: bool,
}

impl Rejection {
    /// One reason that removing pods cannot cure.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self {
            reasons: vec![reason.into()],
            resolvable: false,
        }
    }

    fn from_plugin((reason, resolvable): (&str, bool)) -> Self {
        Self {
            reasons: vec![reason.to_string()],
            resolvable,
        }
    }
}

/// What the volume PreFilters found from the claims, volumes, classes and CSINodes (which the
/// cache does not hold), computed before the attempt.
#[derive(Clone, Debug, Default)]
pub struct VolumeState {
    /// `VolumeRestrictions`' `ReadWriteOncePod` claims in use.
    pub read_write_once_pod: ReadWriteOncePod,
    /// `NodeVolumeLimits`' volumes and limits, when the pod attaches any claim.
    pub limits: Option<VolumeLimits>,
    /// `VolumeZone`'s zones.
    pub zones: VolumeZones,
}

/// What the PreFilter step computed for one pod in one scheduling attempt (upstream's
/// `CycleState`): the inter-pod affinity and topology spread counts, and the volumes' state.
#[derive(Clone, Debug, Default)]
pub struct CycleState {
    /// `InterPodAffinity`'s counts.
    pub affinity: AffinityState,
    /// `PodTopologySpread`'s counts.
    pub spread: SpreadState,
    /// The volume filters' state.
    pub volumes: VolumeState,
}

impl CycleState {
    /// Counts what `pod`'s filters need from `cache`.
    pub fn new(pod: &PodInfo, cache: &Cache, volumes: VolumeState) -> Self {
        Self {
            affinity: AffinityState::new(pod, cache),
            spread: SpreadState::new(pod, cache),
            volumes,
        }
    }

    /// Takes `existing` on `node` out of the counts (`delta` -1) or puts it back (+1).
    pub fn update(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &NodeInfo,
        cache: &Cache,
        delta: i64,
    ) {
        self.affinity
            .update(pod, existing, &node.labels, cache, delta);
        self.spread.update(pod, existing, node, delta);
        self.volumes.read_write_once_pod.update(existing, delta);
        if let Some(limits) = &mut self.volumes.limits {
            limits.update(existing, &node.name, delta);
        }
    }
}

/// Runs every filter in upstream's order (`default_plugins.go`): the node's own ones, the
/// volumes' (VolumeRestrictions, NodeVolumeLimits, VolumeZone), then those over other pods.
pub fn filter_all(
    pod: &PodInfo,
    state: &CycleState,
    node: &NodeInfo,
    usage: &Usage,
    cache: &Cache,
) -> Result<(), Rejection> {
    filter(pod, node, usage)?;
    filter_volumes(pod, &state.volumes, node, usage)?;
    state
        .spread
        .filter(pod, node)
        .map_err(Rejection::from_plugin)?;
    state
        .affinity
        .filter(pod, &node.labels, cache)
        .map_err(Rejection::from_plugin)
}

/// `VolumeRestrictions`, `NodeVolumeLimits` and `VolumeZone`, in this order.
pub fn filter_volumes(
    pod: &PodInfo,
    volumes: &VolumeState,
    node: &NodeInfo,
    usage: &Usage,
) -> Result<(), Rejection> {
    let resolvable = |reason: &str| Rejection {
        reasons: vec![reason.to_string()],
        resolvable: true,
    };
    if !volume_restrictions::disks_fit(&pod.disks, &usage.disks) {
        return Err(resolvable(volume_restrictions::REASON_DISK_CONFLICT));
    }
    if volumes.read_write_once_pod.conflicts() {
        return Err(resolvable(volume_restrictions::REASON_READ_WRITE_ONCE_POD));
    }
    if volumes.limits.as_ref().is_some_and(|l| !l.fits(node)) {
        return Err(resolvable(node_volume_limits::REASON));
    }
    if !volumes.zones.fits(&node.labels) {
        return Err(Rejection::unresolvable(volume_zone::REASON));
    }
    Ok(())
}

/// `NodeUnschedulable`'s reason.
pub const REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// `NodeName`'s reason.
pub const REASON_NODE_NAME: &str = "node(s) didn't match the requested node name";
/// `NodeAffinity`'s reason for both `nodeSelector` and required affinity.
pub const REASON_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";

/// `TaintToleration`'s reason, naming the first untolerated taint.
pub fn taint_reason(taint: &Taint) -> String {
    format!(
        "node(s) had untolerated taint {{{}: {}}}",
        taint.key,
        taint.value.as_deref().unwrap_or("")
    )
}

/// Runs the filters that look only at the node and what its pods request, in upstream's order.
pub fn filter(pod: &PodInfo, node: &NodeInfo, usage: &Usage) -> Result<(), Rejection> {
    if node.unschedulable {
        let cordon = Taint {
            key: taint::UNSCHEDULABLE_TAINT_KEY.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        if !taint::tolerated(&pod.tolerations, &cordon) {
            return Err(Rejection::unresolvable(REASON_UNSCHEDULABLE));
        }
    }
    if pod.node_name.as_ref().is_some_and(|n| *n != node.name) {
        return Err(Rejection::unresolvable(REASON_NODE_NAME));
    }
    if let Some(t) =
        taint::first_untolerated(&node.taints, &pod.tolerations, taint::FILTERING_EFFECTS)
    {
        return Err(Rejection::unresolvable(taint_reason(t)));
    }
    let affinity_ok = node_affinity::node_selector_matches(&pod.node_selector, &node.labels)
        && pod.required_terms.as_deref().is_none_or(|terms| {
            node_affinity::required_terms_match(terms, &node.name, &node.labels)
        });
    if !affinity_ok {
        return Err(Rejection::unresolvable(REASON_AFFINITY));
    }
    if !node_ports::fits(&pod.host_ports, &usage.ports) {
        return Err(Rejection {
            reasons: vec![node_ports::REASON.to_string()],
            resolvable: true,
        });
    }
    let lacking = fit::insufficient(&pod.requests, &node.allocatable, node.allowed_pods, usage);
    if !lacking.is_empty() {
        return Err(Rejection {
            reasons: lacking,
            resolvable: true,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{host_ports::HostPort, resources::Resources};
    use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Toleration};

    fn node() -> NodeInfo {
        NodeInfo {
            name: "node-1".into(),
            labels: [("zone".to_string(), "a".to_string())].into(),
            allocatable: Resources {
                milli_cpu: 1000,
                memory: 1 << 30,
                ..Default::default()
            },
            allowed_pods: 10,
            ..Default::default()
        }
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn exists(key: &str) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }
    }

    fn reasons(r: Result<(), Rejection>) -> Vec<String> {
        r.err().map(|r| r.reasons).unwrap_or_default()
    }

    #[test]
    fn first_failing_filter_names_the_node() {
        type Edit = fn(&mut PodInfo, &mut NodeInfo);
        let cases: Vec<(&str, Edit, &[&str])> = vec![
            ("plain pod fits", |_, _| {}, &[]),
            (
                "cordoned",
                |_, n| n.unschedulable = true,
                &[REASON_UNSCHEDULABLE],
            ),
            (
                "cordoned, tolerated",
                |p, n| {
                    n.unschedulable = true;
                    p.tolerations = vec![exists("node.kubernetes.io/unschedulable")];
                },
                &[],
            ),
            (
                "other node requested",
                |p, _| p.node_name = Some("node-2".into()),
                &[REASON_NODE_NAME],
            ),
            (
                "this node requested",
                |p, _| p.node_name = Some("node-1".into()),
                &[],
            ),
            (
                "untolerated taint",
                |_, n| n.taints = vec![taint("node.kubernetes.io/unreachable", "", "NoExecute")],
                &["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"],
            ),
            (
                "taint with a value",
                |_, n| n.taints = vec![taint("dedicated", "gpu", "NoSchedule")],
                &["node(s) had untolerated taint {dedicated: gpu}"],
            ),
            (
                "prefer-no-schedule does not filter",
                |_, n| n.taints = vec![taint("soft", "", "PreferNoSchedule")],
                &[],
            ),
            (
                "tolerated taint",
                |p, n| {
                    n.taints = vec![taint("dedicated", "gpu", "NoSchedule")];
                    p.tolerations = vec![exists("dedicated")];
                },
                &[],
            ),
            (
                "node selector mismatch",
                |p, _| p.node_selector = [("zone".to_string(), "b".to_string())].into(),
                &[REASON_AFFINITY],
            ),
            (
                "affinity mismatch",
                |p, _| {
                    p.required_terms = Some(vec![NodeSelectorTerm {
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".into(),
                            operator: "In".into(),
                            values: Some(vec!["node-2".into()]),
                        }]),
                        ..Default::default()
                    }])
                },
                &[REASON_AFFINITY],
            ),
            (
                "too big",
                |p, _| p.requests.milli_cpu = 2000,
                &["Insufficient cpu"],
            ),
            (
                "host port taken",
                |p, _| p.host_ports = vec![HostPort::new("", "", 9100)],
                &["node(s) didn't have free ports for the requested pod ports"],
            ),
            (
                "host port free on another ip",
                |p, _| p.host_ports = vec![HostPort::new("10.0.0.2", "", 9100)],
                &[],
            ),
            (
                "ports are checked after affinity, before resources",
                |p, _| {
                    p.host_ports = vec![HostPort::new("", "", 9100)];
                    p.requests.milli_cpu = 2000;
                },
                &["node(s) didn't have free ports for the requested pod ports"],
            ),
            (
                "taints are checked before resources",
                |p, n| {
                    p.requests.milli_cpu = 2000;
                    n.taints = vec![taint("dedicated", "gpu", "NoSchedule")];
                },
                &["node(s) had untolerated taint {dedicated: gpu}"],
            ),
            (
                "cordon is checked before taints",
                |_, n| {
                    n.unschedulable = true;
                    n.taints = vec![taint("node.kubernetes.io/unschedulable", "", "NoSchedule")];
                },
                &[REASON_UNSCHEDULABLE],
            ),
        ];
        // The node already runs a pod holding 10.0.0.1:9100/TCP.
        let mut usage = Usage::default();
        usage.ports.add(&[HostPort::new("10.0.0.1", "TCP", 9100)]);
        for (name, edit, want) in cases {
            let (mut p, mut n) = (PodInfo::default(), node());
            edit(&mut p, &mut n);
            assert_eq!(reasons(filter(&p, &n, &usage)), want.to_vec(), "{name}");
        }
    }

    #[test]
    fn volume_filters_in_upstream_order_and_words() {
        use crate::disk::Disk;
        use k8s_openapi::api::core::v1::PersistentVolume;
        use std::sync::Arc;
        let ebs = Disk::AwsEbs { id: "vol-1".into() };
        let mut usage = Usage::default();
        usage.disks.push(ebs.clone());
        let mut p = PodInfo {
            namespace: "default".into(),
            claims: vec!["data".into()],
            ..Default::default()
        };
        let zoned: serde_json::Value = serde_json::json!({"spec": {"volumeName": "pv"}});
        let claim = Arc::new(serde_json::from_value(zoned).unwrap());
        let mut pv = PersistentVolume::default();
        pv.metadata.labels =
            Some([("topology.kubernetes.io/zone".to_string(), "b".to_string())].into());
        let pv = Arc::new(pv);
        let state = VolumeState {
            zones: VolumeZones::new(
                &p,
                |_, _| Some(Arc::clone(&claim)),
                |_| Some(Arc::clone(&pv)),
                |_| None,
            )
            .unwrap(),
            ..Default::default()
        };
        let mut n = node();
        n.labels
            .insert("topology.kubernetes.io/zone".into(), "a".into());
        assert_eq!(
            filter_volumes(&p, &state, &n, &usage),
            Err(Rejection::unresolvable(
                "node(s) had no available volume zone"
            ))
        );
        p.disks = vec![ebs];
        assert_eq!(
            filter_volumes(&p, &state, &n, &usage),
            Err(Rejection {
                reasons: vec!["node(s) had no available disk".into()],
                resolvable: true
            }),
            "disks are checked before zones"
        );
        n.labels
            .insert("topology.kubernetes.io/zone".into(), "b".into());
        p.disks.clear();
        assert_eq!(filter_volumes(&p, &state, &n, &usage), Ok(()));
    }

    #[test]
    fn only_resource_rejections_are_resolvable() {
        let mut p = PodInfo::default();
        p.requests.milli_cpu = 2000;
        assert!(filter(&p, &node(), &Usage::default()).is_err_and(|r| r.resolvable));
        let mut n = node();
        n.unschedulable = true;
        assert!(filter(&p, &n, &Usage::default()).is_err_and(|r| !r.resolvable));
    }
}
