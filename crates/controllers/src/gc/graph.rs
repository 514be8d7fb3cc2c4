//! The ownership graph, as upstream's `GraphBuilder`: one node per object uid with its owner
//! references and the uids of its dependents, kept current from watch events. Every change
//! returns the work it makes necessary (which node to re-examine), so the collector never
//! rescans: an owner that goes away queues its dependents, a dependent that goes away queues an
//! owner waiting for it, an owner that starts a foreground or orphan deletion queues itself.
//!
//! Pure data: no I/O, no clock; the collector applies events and feeds the work to its queue.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::{HashMap, HashSet, VecDeque};

/// An object's uid: the identity that ownership is about (names are reused, uids never are).
pub type Uid = String;

/// The finalizer the API server adds on a `Foreground` delete.
pub const FOREGROUND_DELETION: &str = "foregroundDeletion";
/// The finalizer the API server adds on an `Orphan` delete.
pub const ORPHAN: &str = "orphan";

/// Enough to address an object through the API, and to tell a recreated one from the original.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    /// `v1`, `apps/v1`, ...
    pub api_version: String,
    /// `Pod`, `ReplicaSet`, ...
    pub kind: String,
    /// The namespace (for an owner known only from a reference: the dependent's namespace,
    /// ignored when the owner's kind is cluster-scoped).
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// The uid.
    pub uid: Uid,
}

/// What a watch event says about one object: the parts of its metadata the collector reads.
#[derive(Clone, Debug)]
pub struct Observed {
    /// Who it is.
    pub identity: Identity,
    /// Its `ownerReferences`.
    pub owners: Vec<OwnerReference>,
    /// Whether it has a `deletionTimestamp`.
    pub deleting: bool,
    /// Its `finalizers`.
    pub finalizers: Vec<String>,
    /// Its `resourceVersion`, the precondition of every write the collector makes to it, so a
    /// decision taken on a stale graph fails (409) instead of acting on an object that changed.
    pub resource_version: Option<String>,
}

/// One object in the graph.
#[derive(Clone, Debug)]
pub struct Node {
    /// Who it is.
    pub identity: Identity,
    /// Its owner references (empty for a virtual node).
    pub owners: Vec<OwnerReference>,
    /// The uids of objects whose owner references point here.
    pub dependents: HashSet<Uid>,
    /// False for a *virtual* node: an owner known only from a dependent's reference, not (yet)
    /// seen by a watch. The collector verifies it with a live GET.
    pub observed: bool,
    /// Whether it has a `deletionTimestamp`.
    pub deleting: bool,
    /// Its finalizers.
    pub finalizers: Vec<String>,
    /// Its `resourceVersion`.
    pub resource_version: Option<String>,
}

impl Node {
    fn virtual_owner(owner: &OwnerReference, namespace: Option<String>) -> Self {
        Node {
            identity: Identity {
                api_version: owner.api_version.clone(),
                kind: owner.kind.clone(),
                namespace,
                name: owner.name.clone(),
                uid: owner.uid.clone(),
            },
            owners: Vec::new(),
            dependents: HashSet::new(),
            observed: false,
            deleting: false,
            finalizers: Vec::new(),
            resource_version: None,
        }
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }

    /// Being deleted in the foreground: waits for its blocking dependents to go.
    pub fn deleting_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(FOREGROUND_DELETION)
    }

    /// Being deleted with `Orphan`: its dependents lose their references to it first.
    pub fn orphaning(&self) -> bool {
        self.deleting && self.has_finalizer(ORPHAN)
    }

    /// This node's reference to `owner`, if it has one.
    pub fn reference_to(&self, owner: &str) -> Option<&OwnerReference> {
        self.owners.iter().find(|r| r.uid == owner)
    }
}

/// Work the graph asks the collector to do; the key of the collector's queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// Look at this object: delete it if its owners are gone, drop references to absent
    /// owners, or (an owner in foreground deletion) delete its dependents and release it.
    AttemptToDelete(Uid),
    /// Orphan this owner's dependents, then remove its `orphan` finalizer.
    Orphan(Uid),
}

/// What the graph knows about an owner reference's target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// Seen by a watch; `deleting_dependents` if it waits for its dependents.
    Present {
        /// The owner is in a foreground deletion.
        deleting_dependents: bool,
    },
    /// That uid was deleted: it can never come back.
    Gone,
    /// Not seen: only a live lookup can tell.
    Unknown,
}

/// How many deleted uids are remembered (upstream's `absentOwnerCache` holds 500; deleted uids
/// are cheap and a cascade over a 10,000-pod ReplicaSet asks about the same owner each time).
const GONE_CAPACITY: usize = 65_536;

/// The ownership graph.
#[derive(Default, Debug)]
pub struct Graph {
    nodes: HashMap<Uid, Node>,
    gone: HashSet<Uid>,
    gone_order: VecDeque<Uid>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node of `uid`.
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// How many nodes (observed and virtual) the graph holds.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// What the graph knows of the owner with `uid`.
    pub fn owner_state(&self, uid: &str) -> OwnerState {
        match self.nodes.get(uid) {
            Some(n) if n.observed => OwnerState::Present {
                deleting_dependents: n.deleting_dependents(),
            },
            _ if self.gone.contains(uid) => OwnerState::Gone,
            _ => OwnerState::Unknown,
        }
    }

    /// The dependents of `owner` that block its foreground deletion (`blockOwnerDeletion: true`).
    pub fn blocking_dependents(&self, owner: &str) -> Vec<&Node> {
        let Some(node) = self.nodes.get(owner) else {
            return Vec::new();
        };
        node.dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .filter(|d| {
                d.reference_to(owner)
                    .and_then(|r| r.block_owner_deletion)
                    .unwrap_or(false)
            })
            .collect()
    }

    /// The dependents of `owner`.
    pub fn dependents(&self, owner: &str) -> Vec<&Node> {
        let Some(node) = self.nodes.get(owner) else {
            return Vec::new();
        };
        node.dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .collect()
    }

    /// An object was added or changed.
    pub fn upsert(&mut self, obs: Observed) -> Vec<Work> {
        let uid = obs.identity.uid.clone();
        let mut work = Vec::new();
        let (old_owners, was_deleting_deps, was_orphaning, dependents) =
            match self.nodes.remove(&uid) {
                Some(old) if old.observed => (
                    old.owners.clone(),
                    old.deleting_dependents(),
                    old.orphaning(),
                    old.dependents,
                ),
                Some(virtual_node) => (Vec::new(), false, false, virtual_node.dependents),
                None => (Vec::new(), false, false, HashSet::new()),
            };
        let node = Node {
            identity: obs.identity,
            owners: obs.owners,
            dependents,
            observed: true,
            deleting: obs.deleting,
            finalizers: obs.finalizers,
            resource_version: obs.resource_version,
        };
        let namespace = node.identity.namespace.clone();
        let new_owners = node.owners.clone();
        let deleting_deps = node.deleting_dependents();
        let orphaning = node.orphaning();
        let dependents: Vec<Uid> = node.dependents.iter().cloned().collect();
        self.nodes.insert(uid.clone(), node);

        for owner in &new_owners {
            match old_owners.iter().find(|o| o.uid == owner.uid) {
                None => self.add_dependent(owner, &uid, namespace.clone(), &mut work),
                Some(old) if old.block_owner_deletion != owner.block_owner_deletion => {
                    self.queue_if_waiting(&owner.uid, &mut work);
                }
                Some(_) => {}
            }
        }
        for old in &old_owners {
            if !new_owners.iter().any(|o| o.uid == old.uid) {
                self.remove_dependent(&old.uid, &uid, &mut work);
            }
        }
        if orphaning && !was_orphaning {
            work.push(Work::Orphan(uid.clone()));
        }
        if deleting_deps && !was_deleting_deps {
            work.extend(dependents.into_iter().map(Work::AttemptToDelete));
            work.push(Work::AttemptToDelete(uid));
        }
        work
    }

    /// An object was deleted: its uid is gone for good.
    pub fn remove(&mut self, uid: &str) -> Vec<Work> {
        self.remember_gone(uid);
        let mut work = Vec::new();
        let Some(node) = self.nodes.remove(uid) else {
            return work;
        };
        // Its dependents may now be garbage; a virtual node keeps them linked to the absent
        // owner until each has been looked at and has dropped the reference or gone.
        work.extend(node.dependents.iter().cloned().map(Work::AttemptToDelete));
        if !node.dependents.is_empty() {
            let mut ghost = node.clone();
            ghost.observed = false;
            ghost.owners = Vec::new();
            self.nodes.insert(uid.to_string(), ghost);
        }
        for owner in &node.owners {
            self.remove_dependent(&owner.uid, uid, &mut work);
        }
        work
    }

    /// A live lookup found no object with `uid`: forget the virtual node and look at its
    /// dependents again (upstream's "virtual delete event").
    pub fn confirm_absent(&mut self, uid: &str) -> Vec<Work> {
        self.remember_gone(uid);
        match self.nodes.get(uid) {
            Some(n) if !n.observed => {
                let deps = n
                    .dependents
                    .iter()
                    .cloned()
                    .map(Work::AttemptToDelete)
                    .collect();
                // Keep the (virtual) node while dependents still reference it, so they stay
                // linked; it goes when the last reference does.
                if n.dependents.is_empty() {
                    self.nodes.remove(uid);
                }
                deps
            }
            // Observed: the watch has not delivered the deletion yet; it will.
            _ => Vec::new(),
        }
    }

    fn add_dependent(
        &mut self,
        owner: &OwnerReference,
        dependent: &str,
        namespace: Option<String>,
        work: &mut Vec<Work>,
    ) {
        let node = self.nodes.entry(owner.uid.clone()).or_insert_with(|| {
            // An owner nobody has seen: verify it (upstream queues virtual nodes the same way).
            work.push(Work::AttemptToDelete(owner.uid.clone()));
            Node::virtual_owner(owner, namespace)
        });
        node.dependents.insert(dependent.to_string());
        if !node.observed && self.gone.contains(&owner.uid) {
            // A reference to an owner already known to be gone: the dependent is garbage.
            work.push(Work::AttemptToDelete(dependent.to_string()));
        } else if node.deleting_dependents() {
            // A new dependent of an owner in foreground deletion goes too.
            work.push(Work::AttemptToDelete(dependent.to_string()));
        }
    }

    fn remove_dependent(&mut self, owner: &str, dependent: &str, work: &mut Vec<Work>) {
        let Some(node) = self.nodes.get_mut(owner) else {
            return;
        };
        node.dependents.remove(dependent);
        if node.deleting_dependents() {
            work.push(Work::AttemptToDelete(owner.to_string()));
        }
        if !node.observed && node.dependents.is_empty() {
            self.nodes.remove(owner);
        }
    }

    fn queue_if_waiting(&self, owner: &str, work: &mut Vec<Work>) {
        if self.nodes.get(owner).is_some_and(Node::deleting_dependents) {
            work.push(Work::AttemptToDelete(owner.to_string()));
        }
    }

    fn remember_gone(&mut self, uid: &str) {
        if self.gone.insert(uid.to_string()) {
            self.gone_order.push_back(uid.to_string());
            if self.gone_order.len() > GONE_CAPACITY
                && let Some(old) = self.gone_order.pop_front()
            {
                self.gone.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("rs-{uid}"),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(block),
        }
    }

    fn obj(
        uid: &str,
        owners: Vec<OwnerReference>,
        deleting: bool,
        finalizers: &[&str],
    ) -> Observed {
        Observed {
            identity: Identity {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: format!("o-{uid}"),
                uid: uid.into(),
            },
            owners,
            deleting,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
            resource_version: Some("1".into()),
        }
    }

    fn del(uid: &str) -> Work {
        Work::AttemptToDelete(uid.into())
    }

    fn sorted(mut w: Vec<Work>) -> Vec<Work> {
        w.sort();
        w.dedup();
        w
    }

    #[test]
    fn a_dependent_of_an_unseen_owner_makes_a_virtual_node_to_verify() {
        let mut g = Graph::new();
        assert_eq!(
            g.upsert(obj("p", vec![owner("rs", true)], false, &[])),
            vec![del("rs")]
        );
        let rs = g.get("rs").unwrap();
        assert!(!rs.observed);
        assert_eq!(rs.identity.namespace.as_deref(), Some("default"));
        assert_eq!(g.owner_state("rs"), OwnerState::Unknown);
        // A second dependent does not queue the owner again.
        assert_eq!(
            g.upsert(obj("q", vec![owner("rs", true)], false, &[])),
            vec![]
        );
        // The owner shows up: the virtual node becomes real and keeps its dependents.
        let mut rs_obj = obj("rs", vec![], false, &[]);
        rs_obj.identity.kind = "ReplicaSet".into();
        assert_eq!(g.upsert(rs_obj), vec![]);
        assert_eq!(
            g.owner_state("rs"),
            OwnerState::Present {
                deleting_dependents: false
            }
        );
        assert_eq!(g.dependents("rs").len(), 2);
    }

    #[test]
    fn deleting_an_owner_queues_its_dependents_and_marks_it_gone() {
        let mut g = Graph::new();
        g.upsert(obj("rs", vec![], false, &[]));
        g.upsert(obj("p", vec![owner("rs", false)], false, &[]));
        g.upsert(obj("q", vec![owner("rs", false)], false, &[]));
        assert_eq!(sorted(g.remove("rs")), vec![del("p"), del("q")]);
        assert_eq!(g.owner_state("rs"), OwnerState::Gone);
        // Dependents still reference it until they drop the reference or go.
        g.remove("p");
        assert!(g.get("rs").is_some());
        g.upsert(obj("q", vec![], false, &[]));
        assert!(
            g.get("rs").is_none(),
            "the ghost goes with its last dependent"
        );
    }

    #[test]
    fn starting_a_foreground_deletion_queues_the_owner_and_its_dependents() {
        let mut g = Graph::new();
        g.upsert(obj("d", vec![], false, &[]));
        g.upsert(obj("p", vec![owner("d", true)], false, &[]));
        let work = g.upsert(obj("d", vec![], true, &[FOREGROUND_DELETION]));
        assert_eq!(sorted(work), vec![del("d"), del("p")]);
        // The same state again is not a transition.
        assert_eq!(
            g.upsert(obj("d", vec![], true, &[FOREGROUND_DELETION])),
            vec![]
        );
        assert_eq!(
            g.owner_state("d"),
            OwnerState::Present {
                deleting_dependents: true
            }
        );
        assert_eq!(g.blocking_dependents("d").len(), 1);
        // The blocking dependent goes: the owner is looked at again.
        assert_eq!(g.remove("p"), vec![del("d")]);
        assert!(g.blocking_dependents("d").is_empty());
    }

    #[test]
    fn only_block_owner_deletion_dependents_block() {
        let mut g = Graph::new();
        g.upsert(obj("d", vec![], true, &[FOREGROUND_DELETION]));
        g.upsert(obj("a", vec![owner("d", true)], false, &[]));
        g.upsert(obj("b", vec![owner("d", false)], false, &[]));
        let blocking: Vec<&str> = g
            .blocking_dependents("d")
            .iter()
            .map(|n| n.identity.uid.as_str())
            .collect();
        assert_eq!(blocking, ["a"]);
        // Turning the flag off re-examines the owner.
        assert_eq!(
            g.upsert(obj("a", vec![owner("d", false)], false, &[])),
            vec![del("d")]
        );
    }

    #[test]
    fn a_new_dependent_of_an_owner_in_foreground_deletion_is_queued() {
        let mut g = Graph::new();
        g.upsert(obj("d", vec![], true, &[FOREGROUND_DELETION]));
        assert_eq!(
            g.upsert(obj("p", vec![owner("d", true)], false, &[])),
            vec![del("p")]
        );
    }

    #[test]
    fn starting_an_orphan_deletion_queues_orphaning_once() {
        let mut g = Graph::new();
        g.upsert(obj("d", vec![], false, &[]));
        assert_eq!(
            g.upsert(obj("d", vec![], true, &[ORPHAN])),
            vec![Work::Orphan("d".into())]
        );
        assert_eq!(g.upsert(obj("d", vec![], true, &[ORPHAN])), vec![]);
    }

    #[test]
    fn dropping_a_reference_unlinks_and_a_lone_virtual_owner_disappears() {
        let mut g = Graph::new();
        g.upsert(obj(
            "p",
            vec![owner("a", false), owner("b", false)],
            false,
            &[],
        ));
        assert_eq!(g.len(), 3);
        g.upsert(obj("p", vec![owner("a", false)], false, &[]));
        assert!(g.get("b").is_none());
        assert_eq!(g.dependents("a").len(), 1);
    }

    #[test]
    fn a_verified_absent_owner_queues_its_dependents() {
        let mut g = Graph::new();
        g.upsert(obj("p", vec![owner("rs", false)], false, &[]));
        assert_eq!(g.confirm_absent("rs"), vec![del("p")]);
        assert_eq!(g.owner_state("rs"), OwnerState::Gone);
        // A later reference to the same gone owner is garbage at once.
        let work = g.upsert(obj("q", vec![owner("rs", false)], false, &[]));
        assert_eq!(work, vec![del("q")]);
    }
}
