//! The scheduler's view of the cluster: every node with the pods placed on it and what they
//! request, kept up to date incrementally from watch events, like upstream's scheduler cache.
//!
//! A pod the scheduler has decided to place is *assumed* onto its node before the bind request
//! is sent, so the next pods in a burst already see its resources taken; the watch later
//! *confirms* it, or a failed bind *forgets* it. Pods bound to a node the cache does not know
//! (yet, or any more) are counted on a detached entry that rejoins the node when it appears.
//!
//! Two indexes keep inter-pod affinity and topology spreading from scanning every pod: pods by
//! label (`key=value`), so a selector with an exact value looks only at the pods carrying it; and
//! pods with affinity terms by a `key=value` their terms require, so finding the existing pods
//! whose terms may select an incoming pod looks only at the incoming pod's labels.

use crate::{
    node_info::{NodeInfo, Usage},
    pod_info::PodInfo,
};
use api::selector::LabelSelector;
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

/// A node and what is placed on it.
#[derive(Clone, Debug, Default)]
pub struct NodeEntry {
    /// The node.
    pub info: NodeInfo,
    /// What its pods use.
    pub usage: Usage,
    /// Its pods (bound or assumed).
    pub pods: Vec<Arc<PodInfo>>,
}

impl NodeEntry {
    fn add(&mut self, pod: &Arc<PodInfo>) {
        self.usage.add(pod);
        self.pods.push(Arc::clone(pod));
    }

    fn remove(&mut self, pod: &PodInfo) {
        self.usage.remove(pod);
        if let Some(i) = self.pods.iter().position(|p| p.uid == pod.uid) {
            self.pods.swap_remove(i);
        }
    }
}

/// Where a pod is counted, and the pod.
#[derive(Clone, Debug)]
pub struct Placement {
    /// The node.
    pub node: String,
    /// The pod as the scheduler reads it.
    pub pod: Arc<PodInfo>,
}

impl Placement {
    /// `pod` placed on `node`.
    pub fn new(pod: &PodInfo, node: &str) -> Self {
        Self {
            node: node.to_string(),
            pod: Arc::new(pod.clone()),
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

/// uids by label key, then value.
type LabelIndex = HashMap<String, HashMap<String, HashSet<String>>>;

fn index_add(index: &mut LabelIndex, key: &str, value: &str, uid: &str) {
    index
        .entry(key.to_string())
        .or_default()
        .entry(value.to_string())
        .or_default()
        .insert(uid.to_string());
}

fn index_remove(index: &mut LabelIndex, key: &str, value: &str, uid: &str) {
    if let Some(values) = index.get_mut(key) {
        if let Some(uids) = values.get_mut(value) {
            uids.remove(uid);
            if uids.is_empty() {
                values.remove(value);
            }
        }
        if values.is_empty() {
            index.remove(key);
        }
    }
}

fn index_get<'a>(index: &'a LabelIndex, key: &str, value: &str) -> Option<&'a HashSet<String>> {
    index.get(key).and_then(|v| v.get(value))
}

/// Nodes, the pods counted on them, namespaces' labels and nominations.
#[derive(Default)]
pub struct Cache {
    nodes: Vec<NodeEntry>,
    index: HashMap<String, usize>,
    detached: HashMap<String, NodeEntry>,
    pods: HashMap<String, PodEntry>,
    by_label: LabelIndex,
    terms_by_label: LabelIndex,
    terms_unindexed: HashSet<String>,
    namespaces: HashMap<String, BTreeMap<String, String>>,
    nominated: HashMap<String, (String, Arc<PodInfo>)>,
    claims_in_use: HashMap<(String, String), u32>,
    with_claims: HashSet<String>,
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

    /// The known node a pod is counted on.
    pub fn node_of(&self, uid: &str) -> Option<&NodeEntry> {
        self.node(&self.pods.get(uid)?.placement.node)
    }

    /// A counted pod.
    pub fn pod(&self, uid: &str) -> Option<&Arc<PodInfo>> {
        self.pods.get(uid).map(|p| &p.placement.pod)
    }

    /// The labels of a namespace (none when unknown).
    pub fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)
    }

    /// Records a namespace's labels (for `namespaceSelector`); returns whether they changed.
    pub fn set_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) -> bool {
        self.namespaces.insert(name.to_string(), labels.clone()) != Some(labels)
    }

    /// Forgets a deleted namespace.
    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }

    /// The counted pods `selector` may select, with their (known) nodes: those carrying the
    /// rarest of its exact `key=value` requirements, or every pod when it has none. A `None`
    /// (nil) selector selects nothing. Callers still match each pod fully.
    pub fn candidates(&self, selector: Option<&LabelSelector>) -> Vec<(&PodInfo, &NodeInfo)> {
        let Some(selector) = selector else {
            return Vec::new();
        };
        let mut smallest: Option<&HashSet<String>> = None;
        for (k, v) in selector.exact_values() {
            match index_get(&self.by_label, k, v) {
                None => return Vec::new(),
                Some(set) if smallest.is_none_or(|s| set.len() < s.len()) => smallest = Some(set),
                Some(_) => {}
            }
        }
        match smallest {
            Some(uids) => uids.iter().filter_map(|u| self.with_node(u)).collect(),
            None => self.pods.keys().filter_map(|u| self.with_node(u)).collect(),
        }
    }

    /// Whether a counted pod mounts the claim (upstream's `IsPVCUsedByPods`).
    pub fn claim_in_use(&self, namespace: &str, name: &str) -> bool {
        self.claims_in_use
            .contains_key(&(namespace.to_string(), name.to_string()))
    }

    /// The counted pods that mount claims (or generic ephemeral volumes), with their known
    /// nodes' names.
    pub fn pods_with_claims(&self) -> Vec<(&PodInfo, &str)> {
        self.with_claims
            .iter()
            .filter_map(|u| self.with_node(u))
            .map(|(p, n)| (p, n.name.as_str()))
            .collect()
    }

    /// The counted pods with affinity terms that may select a pod with `labels`, with their
    /// (known) nodes.
    pub fn pods_with_terms_for(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Vec<(&PodInfo, &NodeInfo)> {
        let mut uids: HashSet<&str> = self.terms_unindexed.iter().map(String::as_str).collect();
        for (k, v) in labels {
            if let Some(set) = index_get(&self.terms_by_label, k, v) {
                uids.extend(set.iter().map(String::as_str));
            }
        }
        uids.into_iter().filter_map(|u| self.with_node(u)).collect()
    }

    fn with_node(&self, uid: &str) -> Option<(&PodInfo, &NodeInfo)> {
        let entry = self.pods.get(uid)?;
        let node = self.node(&entry.placement.node)?;
        Some((&entry.placement.pod, &node.info))
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
        let mut entry = self.detached.remove(&info.name).unwrap_or_default();
        entry.info = info;
        self.index.insert(entry.info.name.clone(), self.nodes.len());
        self.nodes.push(entry);
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
            self.detached.insert(name.to_string(), entry);
        }
    }

    /// Counts `uid` on its node before it is bound.
    pub fn assume(&mut self, uid: &str, placement: Placement) {
        self.insert(uid, placement, true);
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

    /// Whether `uid` is confirmed on `node` as `terminating` or not, so a status update needs
    /// no recount.
    pub fn is_confirmed_on(&self, uid: &str, node: &str, terminating: bool) -> bool {
        self.pods.get(uid).is_some_and(|p| {
            !p.assumed && p.placement.node == node && p.placement.pod.terminating == terminating
        })
    }

    /// Confirms an assumed pod the watch shows bound to the same node; returns false when the
    /// pod is not assumed there (then call [`Cache::set_bound`]).
    pub fn confirm(&mut self, uid: &str, node: &str) -> bool {
        match self.pods.get_mut(uid) {
            Some(p) if p.assumed && p.placement.node == node => {
                p.assumed = false;
                true
            }
            _ => false,
        }
    }

    /// Counts a pod the watch shows bound, replacing whatever was counted for it.
    pub fn set_bound(&mut self, uid: &str, placement: Placement) {
        self.insert(uid, placement, false);
    }

    fn insert(&mut self, uid: &str, placement: Placement, assumed: bool) {
        self.remove_pod(uid);
        self.nominated.remove(uid);
        let pod = &placement.pod;
        match self.index.get(&placement.node) {
            Some(&i) => self.nodes[i].add(pod),
            None => self
                .detached
                .entry(placement.node.clone())
                .or_default()
                .add(pod),
        }
        for (k, v) in &pod.labels {
            index_add(&mut self.by_label, k, v, uid);
        }
        let mut indexed = false;
        for term in pod.affinity.all_terms() {
            match term.index_key() {
                Some((k, v)) => index_add(&mut self.terms_by_label, k, v, uid),
                None => indexed = true,
            }
        }
        if indexed {
            self.terms_unindexed.insert(uid.to_string());
        }
        for c in &pod.claims {
            *self
                .claims_in_use
                .entry((pod.namespace.clone(), c.clone()))
                .or_insert(0) += 1;
        }
        if !pod.claims.is_empty() || !pod.ephemeral_claims.is_empty() {
            self.with_claims.insert(uid.to_string());
        }
        self.pods
            .insert(uid.to_string(), PodEntry { placement, assumed });
    }

    /// Stops counting a pod (deleted or finished); returns whether it held anything.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        self.nominated.remove(uid);
        let Some(entry) = self.pods.remove(uid) else {
            return false;
        };
        let p = &entry.placement;
        match self.index.get(&p.node) {
            Some(&i) => self.nodes[i].remove(&p.pod),
            None => {
                if let Some(e) = self.detached.get_mut(&p.node) {
                    e.remove(&p.pod);
                    if e.usage.is_empty() {
                        self.detached.remove(&p.node);
                    }
                }
            }
        }
        for (k, v) in &p.pod.labels {
            index_remove(&mut self.by_label, k, v, uid);
        }
        for term in p.pod.affinity.all_terms() {
            if let Some((k, v)) = term.index_key() {
                index_remove(&mut self.terms_by_label, k, v, uid);
            }
        }
        self.terms_unindexed.remove(uid);
        self.with_claims.remove(uid);
        for c in &p.pod.claims {
            let key = (p.pod.namespace.clone(), c.clone());
            if let Some(n) = self.claims_in_use.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.claims_in_use.remove(&key);
                }
            }
        }
        true
    }

    /// Records that `pod` is to run on `node` once its preemption victims are gone, so pods of
    /// lower priority do not take the room meanwhile (upstream's nominator).
    pub fn nominate(&mut self, pod: &PodInfo, node: &str) {
        self.nominated
            .insert(pod.uid.clone(), (node.to_string(), Arc::new(pod.clone())));
    }

    /// Drops a nomination (the pod was bound, deleted or fits elsewhere).
    pub fn clear_nomination(&mut self, uid: &str) {
        self.nominated.remove(uid);
    }

    /// The pods nominated to `node` that a pod of `priority` must leave room for: those of at
    /// least its priority, itself excluded.
    pub fn nominated_on(&self, node: &str, priority: i32, uid: &str) -> Vec<&Arc<PodInfo>> {
        self.nominated
            .iter()
            .filter(|(u, (n, p))| *u != uid && n == node && p.priority >= priority)
            .map(|(_, (_, p))| p)
            .collect()
    }

    /// Whether any pod is nominated anywhere (the common case is none).
    pub fn has_nominations(&self) -> bool {
        !self.nominated.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;

    fn node(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            allowed_pods: 10,
            ..Default::default()
        }
    }

    fn placement(node: &str, cpu: i64) -> Placement {
        let pod = PodInfo {
            requests: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            non_zero: (cpu, 0),
            owner: Some("rs".into()),
            ..Default::default()
        };
        Placement::new(&pod, node)
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
        assert!(c.is_confirmed_on("p", "b", false));
    }
}
