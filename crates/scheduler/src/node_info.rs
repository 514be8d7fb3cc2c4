//! What the scheduler needs to know about a node, and what the pods placed on it use.

use crate::{disk::Disk, host_ports::UsedPorts, pod_info::PodInfo, resources::Resources};
use k8s_openapi::api::core::v1::{Node, Taint};
use std::collections::{BTreeMap, HashMap};

/// The scheduling-relevant parts of a Node. Two infos compare equal exactly when a pod that did
/// not fit before cannot fit now for a reason on the node itself, so heartbeat-only status
/// updates do not wake the unschedulable pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `status.allocatable` without the pod count.
    pub allocatable: Resources,
    /// `status.allocatable.pods`.
    pub allowed_pods: i64,
}

impl NodeInfo {
    /// Reads a Node.
    pub fn new(node: &Node) -> Self {
        let spec = node.spec.as_ref();
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        Self {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            allocatable: allocatable.map(Resources::from_list).unwrap_or_default(),
            allowed_pods: allocatable
                .and_then(|a| a.get("pods"))
                .and_then(|q| api::quantity::Quantity::parse(&q.0).ok())
                .map(|q| q.value())
                .unwrap_or(0),
        }
    }
}

/// What the pods on one node request, kept incrementally as pods come and go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// The sum of the exact requests.
    pub requested: Resources,
    /// The sum of CPU requests with defaults, for scoring.
    pub non_zero_milli_cpu: i64,
    /// The sum of memory requests with defaults, for scoring.
    pub non_zero_memory: i64,
    /// How many pods are on the node.
    pub pods: i64,
    /// Pods per controlling owner, for spreading.
    pub owners: HashMap<String, u32>,
    /// The host ports the pods hold.
    pub ports: UsedPorts,
    /// The inline disks the pods mount (rarely any).
    pub disks: Vec<Disk>,
}

impl Usage {
    /// Counts a pod in.
    pub fn add(&mut self, pod: &PodInfo) {
        self.requested.add(&pod.requests);
        self.non_zero_milli_cpu += pod.non_zero.0;
        self.non_zero_memory += pod.non_zero.1;
        self.pods += 1;
        if let Some(o) = &pod.owner {
            *self.owners.entry(o.clone()).or_insert(0) += 1;
        }
        self.ports.add(&pod.host_ports);
        self.disks.extend(pod.disks.iter().cloned());
    }

    /// Counts a pod out.
    pub fn remove(&mut self, pod: &PodInfo) {
        self.requested.subtract(&pod.requests);
        self.non_zero_milli_cpu -= pod.non_zero.0;
        self.non_zero_memory -= pod.non_zero.1;
        self.pods -= 1;
        self.ports.remove(&pod.host_ports);
        for d in &pod.disks {
            if let Some(i) = self.disks.iter().position(|e| e == d) {
                self.disks.swap_remove(i);
            }
        }
        if let Some(o) = pod.owner.as_deref()
            && let Some(n) = self.owners.get_mut(o)
        {
            *n -= 1;
            if *n == 0 {
                self.owners.remove(o);
            }
        }
    }

    /// How many pods of `owner` are here.
    pub fn owned_by(&self, owner: &str) -> u32 {
        self.owners.get(owner).copied().unwrap_or(0)
    }

    /// Whether no pod is counted (so a node-less entry can be dropped).
    pub fn is_empty(&self) -> bool {
        self.pods == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::core::v1::{NodeSpec, NodeStatus},
        apimachinery::pkg::api::resource::Quantity,
    };

    #[test]
    fn reads_a_node() {
        let mut node = Node::default();
        node.metadata.name = Some("node-1".into());
        node.spec = Some(NodeSpec {
            unschedulable: Some(true),
            ..Default::default()
        });
        node.status = Some(NodeStatus {
            allocatable: Some(
                [("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.into())))
                    .collect(),
            ),
            ..Default::default()
        });
        let info = NodeInfo::new(&node);
        assert_eq!(info.name, "node-1");
        assert!(info.unschedulable);
        assert_eq!((info.allocatable.milli_cpu, info.allowed_pods), (8000, 110));
    }

    #[test]
    fn usage_counts_in_and_out() {
        let mut u = Usage::default();
        let pod = PodInfo {
            requests: Resources {
                milli_cpu: 500,
                ..Default::default()
            },
            non_zero: (500, 100),
            owner: Some("rs".into()),
            host_ports: vec![crate::host_ports::HostPort::new("", "", 9100)],
            ..Default::default()
        };
        u.add(&pod);
        u.add(&pod);
        assert_eq!(
            (u.requested.milli_cpu, u.pods, u.owned_by("rs")),
            (1000, 2, 2)
        );
        assert!(!u.ports.is_empty());
        u.remove(&pod);
        u.remove(&pod);
        assert_eq!(
            u,
            Usage::default(),
            "removing every pod leaves nothing behind"
        );
    }
}
