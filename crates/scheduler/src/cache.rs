//! The scheduler's view of the cluster: every node with what its pods request, kept up to date
//! incrementally from watch events, like upstream's scheduler cache.
//!
//! A pod the scheduler has decided to place is *assumed* onto its node before the bind request
//! is sent, so the next pods in a burst already see its resources taken; the watch later
//! *confirms* it, or a failed bind *forgets* it. Pods bound to a node the cache does not know
//! (yet, or any more) are counted on a detached entry that rejoins the node when it appears.

use crate::{
    node_info::{NodeInfo, Usage},
    pod_info::PodInfo,
    resources::Resources,
};
use std::collections::HashMap;

/// A node and what is placed on it.
#[derive(Clone, Debug, Default)]
pub struct NodeEntry {
    /// The node.
    pub info: NodeInfo,
    /// What its pods use.
    pub usage: Usage,
}

/// Where a pod is counted, and what it counts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The node.
    pub node: String,
    /// Exact requests.
    pub requests: Resources,
    /// Requests with scoring defaults.
    pub non_zero: (i64, i64),
    /// Controlling owner, for spreading.
    pub owner: Option<String>,
}

impl Placement {
    /// `pod` placed on `node`.
    pub fn new(pod: &PodInfo, node: &str) -> Self {
        Self {
            node: node.to_string(),
            requests: pod.requests.clone(),
            non_zero: pod.non_zero,
            owner: pod.owner.clone(),
        }
    }
}

struct PodEntry {
    placement: Placement,
    assumed: bool,
}

/// How an update changed a node, from a pending pod's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeChange {
    /// A node appeared.
    Added,
    /// Labels, taints, cordon or allocatable changed.
    Changed,
    /// Nothing a pod could fit differently for (e.g. a heartbeat).
    Unchanged,
}

/// Nodes, and the pods counted on them.
#[derive(Default)]
pub struct Cache {
    nodes: Vec<NodeEntry>,
    index: HashMap<String, usize>,
    detached: HashMap<String, Usage>,
    pods: HashMap<String, PodEntry>,
}

impl Cache {
    /// All known nodes, in a stable order that sampling rotates through.
    pub fn nodes(&self) -> &[NodeEntry] {
        &self.nodes
    }

    /// The position of a node in [`Cache::nodes`].
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&NodeEntry> {
        self.position(name).map(|i| &self.nodes[i])
    }

    /// Adds or updates a node, keeping what its pods use.
    pub fn upsert_node(&mut self, info: NodeInfo) -> NodeChange {
        if let Some(&i) = self.index.get(&info.name) {
            if self.nodes[i].info == info {
                return NodeChange::Unchanged;
            }
            self.nodes[i].info = info;
            return NodeChange::Changed;
        }
        let usage = self.detached.remove(&info.name).unwrap_or_default();
        self.index.insert(info.name.clone(), self.nodes.len());
        self.nodes.push(NodeEntry { info, usage });
        NodeChange::Added
    }

    /// Removes a node; its pods stay counted in case it comes back before they go.
    pub fn remove_node(&mut self, name: &str) {
        let Some(i) = self.index.remove(name) else {
            return;
        };
        let entry = self.nodes.swap_remove(i);
        if let Some(moved) = self.nodes.get(i) {
            self.index.insert(moved.info.name.clone(), i);
        }
        if !entry.usage.is_empty() {
            self.detached.insert(name.to_string(), entry.usage);
        }
    }

    /// Counts `uid` on its node before it is bound.
    pub fn assume(&mut self, uid: &str, placement: Placement) {
        self.remove_pod(uid);
        self.place(&placement);
        self.pods.insert(
            uid.to_string(),
            PodEntry {
                placement,
                assumed: true,
            },
        );
    }

    /// Undoes [`Cache::assume`] after a failed bind; a pod the watch has confirmed stays.
    pub fn forget(&mut self, uid: &str) {
        if self.is_assumed(uid) {
            self.remove_pod(uid);
        }
    }

    /// Whether `uid` is assumed and not yet confirmed.
    pub fn is_assumed(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|p| p.assumed)
    }

    /// Whether `uid` is confirmed on `node`, so a status update needs no recount.
    pub fn is_confirmed_on(&self, uid: &str, node: &str) -> bool {
        self.pods
            .get(uid)
            .is_some_and(|p| !p.assumed && p.placement.node == node)
    }

    /// Confirms an assumed pod the watch shows bound to the same node; returns false when the
    /// pod is not assumed there (then call [`Cache::set_bound`]).
    pub fn confirm(&mut self, uid: &str, node: &str) -> bool {
        match self.pods.get_mut(uid) {
            Some(p) if p.placement.node == node => {
                p.assumed = false;
                true
            }
            _ => false,
        }
    }

    /// Counts a pod the watch shows bound, replacing whatever was counted for it.
    pub fn set_bound(&mut self, uid: &str, placement: Placement) {
        self.remove_pod(uid);
        self.place(&placement);
        self.pods.insert(
            uid.to_string(),
            PodEntry {
                placement,
                assumed: false,
            },
        );
    }

    /// Stops counting a pod (deleted or finished); returns whether it held anything.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(entry) = self.pods.remove(uid) else {
            return false;
        };
        let p = &entry.placement;
        match self.index.get(&p.node) {
            Some(&i) => self.nodes[i]
                .usage
                .remove(&p.requests, p.non_zero, p.owner.as_deref()),
            None => {
                if let Some(u) = self.detached.get_mut(&p.node) {
                    u.remove(&p.requests, p.non_zero, p.owner.as_deref());
                    if u.is_empty() {
                        self.detached.remove(&p.node);
                    }
                }
            }
        }
        true
    }

    fn place(&mut self, p: &Placement) {
        let usage = match self.index.get(&p.node) {
            Some(&i) => &mut self.nodes[i].usage,
            None => self.detached.entry(p.node.clone()).or_default(),
        };
        usage.add(&p.requests, p.non_zero, p.owner.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            allowed_pods: 10,
            ..Default::default()
        }
    }

    fn placement(node: &str, cpu: i64) -> Placement {
        Placement {
            node: node.into(),
            requests: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            non_zero: (cpu, 0),
            owner: Some("rs".into()),
        }
    }

    fn cpu(c: &Cache, node: &str) -> i64 {
        c.node(node)
            .map(|n| n.usage.requested.milli_cpu)
            .unwrap_or(-1)
    }

    #[test]
    fn assume_confirm_forget() {
        let mut c = Cache::default();
        c.upsert_node(node("a"));
        c.assume("p1", placement("a", 500));
        c.assume("p2", placement("a", 500));
        assert_eq!(cpu(&c, "a"), 1000, "assumed pods count at once");
        assert!(c.confirm("p1", "a"));
        c.forget("p1");
        assert_eq!(cpu(&c, "a"), 1000, "a confirmed pod is not forgotten");
        c.forget("p2");
        assert_eq!(cpu(&c, "a"), 500);
        assert!(c.remove_pod("p1"));
        assert!(!c.remove_pod("p1"));
        assert_eq!(c.node("a").map(|n| n.usage.clone()), Some(Usage::default()));
    }

    #[test]
    fn node_changes() {
        let mut c = Cache::default();
        assert_eq!(c.upsert_node(node("a")), NodeChange::Added);
        assert_eq!(c.upsert_node(node("a")), NodeChange::Unchanged);
        let mut cordoned = node("a");
        cordoned.unschedulable = true;
        assert_eq!(c.upsert_node(cordoned), NodeChange::Changed);
    }

    #[test]
    fn pods_outlive_their_node_in_the_books() {
        let mut c = Cache::default();
        c.set_bound("early", placement("b", 300));
        c.upsert_node(node("a"));
        c.upsert_node(node("b"));
        assert_eq!(
            cpu(&c, "b"),
            300,
            "a pod seen before its node counts once the node appears"
        );
        c.remove_node("a");
        assert_eq!(c.position("b"), Some(0), "removal keeps the index right");
        c.remove_node("b");
        c.upsert_node(node("b"));
        assert_eq!(cpu(&c, "b"), 300);
        c.remove_node("b");
        c.remove_pod("early");
        c.upsert_node(node("b"));
        assert_eq!(cpu(&c, "b"), 0);
    }

    #[test]
    fn rebinding_moves_the_count() {
        let mut c = Cache::default();
        c.upsert_node(node("a"));
        c.upsert_node(node("b"));
        c.assume("p", placement("a", 100));
        assert!(!c.confirm("p", "b"), "the watch shows another node");
        c.set_bound("p", placement("b", 100));
        assert_eq!((cpu(&c, "a"), cpu(&c, "b")), (0, 100));
        assert!(c.is_confirmed_on("p", "b"));
    }
}
