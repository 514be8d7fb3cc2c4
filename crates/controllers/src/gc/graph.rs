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

impl Identity {
    /// Whether `reference` names this object by all its coordinates (upstream's
    /// `ownerReferenceMatchesCoordinates`: uid, name, kind and apiVersion).
    pub fn matches(&self, reference: &OwnerReference) -> bool {
        self.uid == reference.uid
            && self.name == reference.name
            && self.kind == reference.kind
            && self.api_version == reference.api_version
    }

    /// The identity `reference` gives its owner, as seen from a dependent in `namespace`.
    pub fn of_reference(reference: &OwnerReference, namespace: Option<String>) -> Self {
        Identity {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace,
            name: reference.name.clone(),
            uid: reference.uid.clone(),
        }
    }
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
            identity: Identity::of_reference(owner, namespace),
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
    /// Record upstream's `OwnerRefInvalidNamespace` warning on `dependent`: its reference to
    /// `owner` cannot be right, the owner lives in another namespace.
    ReportInvalidNamespace {
        /// The object with the reference.
        dependent: Uid,
        /// The owner's uid.
        owner: Uid,
    },
}

/// What the graph knows about an owner reference's target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// Seen by a watch where the reference says; `deleting_dependents` if it waits for its
    /// dependents.
    Present {
        /// The owner is in a foreground deletion.
        deleting_dependents: bool,
    },
    /// That uid was deleted (it can never come back), or nothing answers to the reference's
    /// coordinates.
    Gone,
    /// Not seen where the reference says: only a live lookup can tell.
    Unknown,
}

/// How many deleted uids are remembered (upstream's `absentOwnerCache` holds 500; deleted uids
/// are cheap and a cascade over a 10,000-pod ReplicaSet asks about the same owner each time).
const GONE_CAPACITY: usize = 65_536;

/// A bounded set that forgets its oldest members.
#[derive(Debug)]
struct Remembered<T> {
    set: HashSet<T>,
    order: VecDeque<T>,
}

impl<T> Default for Remembered<T> {
    fn default() -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
        }
    }
}

impl<T: Clone + Eq + std::hash::Hash> Remembered<T> {
    fn insert(&mut self, value: T) {
        if self.set.insert(value.clone()) {
            self.order.push_back(value);
            if self.order.len() > GONE_CAPACITY
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    fn contains(&self, value: &T) -> bool {
        self.set.contains(value)
    }
}

/// The ownership graph.
#[derive(Default, Debug)]
pub struct Graph {
    nodes: HashMap<Uid, Node>,
    /// Uids whose deletion a watch showed.
    gone: Remembered<Uid>,
    /// Owner coordinates a lookup found nothing at (upstream's `absentOwnerCache`): the
    /// namespace is the dependent's, or none for a cluster-scoped kind. Only the coordinates
    /// are absent, not the uid: a reference naming the wrong namespace says nothing of the
    /// owner its uid belongs to.
    absent: Remembered<Identity>,
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

    /// What the graph knows of the owner `reference` names, from a dependent in `namespace`
    /// (where a namespaced owner must be).
    pub fn owner_state(&self, reference: &OwnerReference, namespace: Option<&str>) -> OwnerState {
        let uid = &reference.uid;
        match self.nodes.get(uid) {
            Some(n)
                if n.observed
                    && n.identity.matches(reference)
                    && (n.identity.namespace.is_none()
                        || n.identity.namespace.as_deref() == namespace) =>
            {
                OwnerState::Present {
                    deleting_dependents: n.deleting_dependents(),
                }
            }
            _ if self.gone.contains(uid) => OwnerState::Gone,
            _ if self.is_absent(reference, namespace) => OwnerState::Gone,
            _ => OwnerState::Unknown,
        }
    }

    /// Whether a watch showed the deletion of `uid`.
    pub fn is_gone(&self, uid: &str) -> bool {
        self.gone.contains(&uid.to_string())
    }

    fn is_absent(&self, reference: &OwnerReference, namespace: Option<&str>) -> bool {
        self.absent
            .contains(&Identity::of_reference(reference, None))
            || namespace.is_some_and(|ns| {
                self.absent
                    .contains(&Identity::of_reference(reference, Some(ns.to_string())))
            })
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
                Some(virtual_node) => {
                    if virtual_node.identity != obs.identity {
                        // Dependents named the owner otherwise than it turns out to be: those
                        // that do not match may be wrong (upstream's "bad child -> good parent").
                        self.check_dependents(&virtual_node.dependents, &obs.identity, &mut work);
                    }
                    (Vec::new(), false, false, virtual_node.dependents)
                }
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

        let mut suspicious = false;
        for owner in &new_owners {
            match old_owners.iter().find(|o| o.uid == owner.uid) {
                None => {
                    suspicious |=
                        self.add_dependent(owner, &uid, &namespace, !suspicious, &mut work)
                }
                Some(old) if old.block_owner_deletion != owner.block_owner_deletion => {
                    self.queue_if_waiting(&owner.uid, &mut work);
                }
                Some(_) => {}
            }
        }
        if suspicious {
            work.push(Work::AttemptToDelete(uid.clone()));
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
        self.gone.insert(uid.to_string());
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

    /// A live lookup found nothing at `identity` (whose namespace is none for a cluster-scoped
    /// kind): remember that, and look again at the dependents that name the owner so
    /// (upstream's "virtual delete event"). A virtual node that other dependents name otherwise
    /// takes one of their identities, to be verified in turn.
    pub fn confirm_absent(&mut self, identity: &Identity) -> Vec<Work> {
        self.absent.insert(identity.clone());
        let Some(node) = self.nodes.get(&identity.uid) else {
            return Vec::new();
        };
        let (matching, nonmatching) = self.partition(&node.dependents, identity);
        let mut work: Vec<Work> = matching.into_iter().map(Work::AttemptToDelete).collect();
        if !node.observed
            && node.identity == *identity
            && let Some(other) = self.alternate_identity(&nonmatching, identity)
            && let Some(node) = self.nodes.get_mut(&identity.uid)
        {
            node.identity = other;
            work.push(Work::AttemptToDelete(identity.uid.clone()));
        }
        // The (virtual) node stays while dependents reference it, so they stay linked; it goes
        // when the last reference does.
        if self
            .nodes
            .get(&identity.uid)
            .is_some_and(|n| !n.observed && n.dependents.is_empty())
        {
            self.nodes.remove(&identity.uid);
        }
        work
    }

    /// Links `dependent` (in `namespace`) to `owner`, making a virtual node for an owner not
    /// seen yet. With `check`, looks for what upstream's `addDependentToOwners` takes for a
    /// potentially invalid reference (an owner seen in another namespace, or under other
    /// coordinates) and returns whether it found one.
    fn add_dependent(
        &mut self,
        owner: &OwnerReference,
        dependent: &str,
        namespace: &Option<String>,
        check: bool,
        work: &mut Vec<Work>,
    ) -> bool {
        let known = self.nodes.contains_key(&owner.uid);
        if !known {
            // An owner nobody has seen: verify it (upstream queues virtual nodes the same way).
            work.push(Work::AttemptToDelete(owner.uid.clone()));
            self.nodes.insert(
                owner.uid.clone(),
                Node::virtual_owner(owner, namespace.clone()),
            );
        }
        let state = self.owner_state(owner, namespace.as_deref());
        let Some(node) = self.nodes.get_mut(&owner.uid) else {
            return false;
        };
        node.dependents.insert(dependent.to_string());
        if state == OwnerState::Gone || node.deleting_dependents() {
            // A reference to an owner known to be gone, or a new dependent of an owner in
            // foreground deletion: the dependent is to go.
            work.push(Work::AttemptToDelete(dependent.to_string()));
        }
        if !known || !check {
            return false;
        }
        let owner_namespace = &node.identity.namespace;
        if owner_namespace.is_some() && owner_namespace != namespace {
            if node.observed {
                // Seen in another namespace: this reference is certainly wrong. A cluster-scoped
                // owner can be named from anywhere.
                work.push(Work::ReportInvalidNamespace {
                    dependent: dependent.to_string(),
                    owner: owner.uid.clone(),
                });
            }
            return true;
        }
        if !node.identity.matches(owner) {
            return true;
        }
        // A virtual cluster-scoped-looking owner named from a namespace: it may be a namespaced
        // owner that a cluster-scoped dependent named (upstream's issue 98040).
        owner_namespace.is_none() && namespace.is_some() && !node.observed
    }

    /// Queues each of `dependents` that names `owner` otherwise than it is, reporting those
    /// that name it in another namespace.
    fn check_dependents(&self, dependents: &HashSet<Uid>, owner: &Identity, work: &mut Vec<Work>) {
        let (_, nonmatching) = self.partition(dependents, owner);
        for dep in nonmatching {
            let wrong_namespace = owner.namespace.is_some()
                && self
                    .nodes
                    .get(&dep)
                    .is_some_and(|d| d.identity.namespace != owner.namespace);
            if wrong_namespace {
                work.push(Work::ReportInvalidNamespace {
                    dependent: dep.clone(),
                    owner: owner.uid.clone(),
                });
            }
            work.push(Work::AttemptToDelete(dep));
        }
    }

    /// Splits `dependents` into those that name `owner` by its coordinates (and, for a
    /// namespaced owner, from its namespace), and those that name its uid otherwise (upstream's
    /// `partitionDependents`; a dependent can be in both).
    fn partition(&self, dependents: &HashSet<Uid>, owner: &Identity) -> (Vec<Uid>, Vec<Uid>) {
        let (mut matching, mut nonmatching) = (Vec::new(), Vec::new());
        for dep in dependents.iter().filter_map(|d| self.nodes.get(d)) {
            let uid = dep.identity.uid.clone();
            if owner.namespace.is_some() && dep.identity.namespace != owner.namespace {
                nonmatching.push(uid);
                continue;
            }
            let refs = dep.owners.iter().filter(|r| r.uid == owner.uid);
            let (mut hit, mut miss) = (false, false);
            for r in refs {
                if owner.matches(r) {
                    hit = true;
                } else {
                    miss = true;
                }
            }
            if hit {
                matching.push(uid.clone());
            }
            if miss {
                nonmatching.push(uid);
            }
        }
        (matching, nonmatching)
    }

    /// Another identity the `dependents` give `absent`'s uid, not known to be absent itself
    /// (the least, so the choice does not depend on hashing order).
    fn alternate_identity(&self, dependents: &[Uid], absent: &Identity) -> Option<Identity> {
        dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .flat_map(|dep| {
                dep.owners.iter().filter(|r| r.uid == absent.uid).map(|r| {
                    let same_kind = r.api_version == absent.api_version && r.kind == absent.kind;
                    // A kind verified cluster-scoped is looked up without a namespace.
                    let namespace = if absent.namespace.is_none() && same_kind {
                        None
                    } else {
                        dep.identity.namespace.clone()
                    };
                    Identity::of_reference(r, namespace)
                })
            })
            .filter(|id| id != absent && !self.absent.contains(id))
            .min_by(|a, b| {
                (&a.kind, &a.api_version, &a.namespace, &a.name).cmp(&(
                    &b.kind,
                    &b.api_version,
                    &b.namespace,
                    &b.name,
                ))
            })
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reference to the object `obj(uid, ..)` makes.
    fn owner(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: format!("o-{uid}"),
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
        assert_eq!(
            g.owner_state(&owner("rs", true), Some("default")),
            OwnerState::Unknown
        );
        // A second dependent does not queue the owner again.
        assert_eq!(
            g.upsert(obj("q", vec![owner("rs", true)], false, &[])),
            vec![]
        );
        // The owner shows up: the virtual node becomes real and keeps its dependents.
        assert_eq!(g.upsert(obj("rs", vec![], false, &[])), vec![]);
        assert_eq!(
            g.owner_state(&owner("rs", true), Some("default")),
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
        assert_eq!(
            g.owner_state(&owner("rs", false), Some("default")),
            OwnerState::Gone
        );
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
            g.owner_state(&owner("d", true), Some("default")),
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
        let rs = g.get("rs").unwrap().identity.clone();
        assert_eq!(g.confirm_absent(&rs), vec![del("p")]);
        assert_eq!(
            g.owner_state(&owner("rs", false), Some("default")),
            OwnerState::Gone
        );
        // A later reference to the same gone owner is garbage at once.
        let work = g.upsert(obj("q", vec![owner("rs", false)], false, &[]));
        assert_eq!(work, vec![del("q")]);
    }

    /// Upstream's `TestConflictingData` objects: `(apiVersion, kind, namespace, name, uid)`.
    fn object(id: (&str, &str, &str, &str, &str), owners: &[OwnerReference]) -> Observed {
        let (api_version, kind, namespace, name, uid) = id;
        Observed {
            identity: Identity {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: Some(namespace.to_string()).filter(|n| !n.is_empty()),
                name: name.into(),
                uid: uid.into(),
            },
            owners: owners.to_vec(),
            deleting: false,
            finalizers: Vec::new(),
            resource_version: None,
        }
    }

    fn reference_to(id: (&str, &str, &str, &str, &str)) -> OwnerReference {
        let (api_version, kind, _, name, uid) = id;
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            ..Default::default()
        }
    }

    const POD1_NS1: (&str, &str, &str, &str, &str) = ("v1", "Pod", "ns1", "podname1", "poduid1");
    const POD2_NS2: (&str, &str, &str, &str, &str) = ("v1", "Pod", "ns2", "podname2", "poduid2");
    const NODE1: (&str, &str, &str, &str, &str) = ("v1", "Node", "", "nodename", "nodeuid1");

    fn report(dependent: &str, owner: &str) -> Work {
        Work::ReportInvalidNamespace {
            dependent: dependent.into(),
            owner: owner.into(),
        }
    }

    #[test]
    fn a_child_naming_an_owner_in_another_namespace_is_reported_and_queued_child_first() {
        let mut g = Graph::new();
        let to_pod2 = reference_to(POD2_NS2);
        // The virtual owner takes the child's namespace.
        assert_eq!(
            g.upsert(object(POD1_NS1, std::slice::from_ref(&to_pod2))),
            vec![del("poduid2")]
        );
        assert_eq!(
            g.get("poduid2").unwrap().identity.namespace.as_deref(),
            Some("ns1")
        );
        // The owner shows up in ns2: the child is wrong.
        assert_eq!(
            sorted(g.upsert(object(POD2_NS2, &[]))),
            vec![del("poduid1"), report("poduid1", "poduid2")]
        );
        // The owner seen in ns2 is no answer for a reference from ns1.
        assert_eq!(g.owner_state(&to_pod2, Some("ns1")), OwnerState::Unknown);
        assert_eq!(
            g.owner_state(&to_pod2, Some("ns2")),
            OwnerState::Present {
                deleting_dependents: false
            }
        );
        // Looked up in ns1 and absent: only the coordinates in ns1 are absent.
        let mut in_ns1 = g.get("poduid2").unwrap().identity.clone();
        in_ns1.namespace = Some("ns1".into());
        assert_eq!(g.confirm_absent(&in_ns1), vec![del("poduid1")]);
        assert_eq!(g.owner_state(&to_pod2, Some("ns1")), OwnerState::Gone);
        assert!(!g.is_gone("poduid2"));
        assert!(matches!(
            g.owner_state(&to_pod2, Some("ns2")),
            OwnerState::Present { .. }
        ));
    }

    #[test]
    fn a_child_naming_an_owner_in_another_namespace_is_reported_and_queued_owner_first() {
        let mut g = Graph::new();
        assert_eq!(g.upsert(object(POD2_NS2, &[])), vec![]);
        assert_eq!(
            sorted(g.upsert(object(POD1_NS1, &[reference_to(POD2_NS2)]))),
            vec![del("poduid1"), report("poduid1", "poduid2")]
        );
    }

    #[test]
    fn a_cluster_scoped_child_naming_a_namespaced_owner_is_reported() {
        let to_pod1 = reference_to(POD1_NS1);
        // Child first: the virtual owner has no namespace.
        let mut g = Graph::new();
        assert_eq!(
            g.upsert(object(NODE1, std::slice::from_ref(&to_pod1))),
            vec![del("poduid1")]
        );
        assert_eq!(g.get("poduid1").unwrap().identity.namespace, None);
        assert_eq!(
            sorted(g.upsert(object(POD1_NS1, &[]))),
            vec![del("nodeuid1"), report("nodeuid1", "poduid1")]
        );
        assert_eq!(g.owner_state(&to_pod1, None), OwnerState::Unknown);
        // Owner first.
        let mut g = Graph::new();
        g.upsert(object(POD1_NS1, &[]));
        assert_eq!(
            sorted(g.upsert(object(NODE1, &[to_pod1]))),
            vec![del("nodeuid1"), report("nodeuid1", "poduid1")]
        );
    }

    #[test]
    fn a_namespaced_child_may_name_a_cluster_scoped_owner() {
        let mut g = Graph::new();
        let to_node = reference_to(NODE1);
        assert_eq!(
            g.upsert(object(POD1_NS1, std::slice::from_ref(&to_node))),
            vec![del("nodeuid1")]
        );
        // The virtual owner had the child's namespace; the observed one has none: no report.
        assert_eq!(g.upsert(object(NODE1, &[])), vec![]);
        assert!(matches!(
            g.owner_state(&to_node, Some("ns1")),
            OwnerState::Present { .. }
        ));
        // Nor for a child added later.
        let pod3 = ("v1", "Pod", "ns3", "podname3", "poduid3");
        assert_eq!(g.upsert(object(pod3, &[to_node])), vec![]);
    }

    #[test]
    fn a_virtual_owner_named_two_ways_is_verified_each_way() {
        // Two children name one uid with different kinds: once the first identity is absent,
        // its child is queued and the node takes the other identity to verify next.
        let mut g = Graph::new();
        let as_secret = ("v1", "Secret", "ns1", "secretname", "deploymentuid1");
        let as_deployment = (
            "apps/v1",
            "Deployment",
            "ns1",
            "deployment1",
            "deploymentuid1",
        );
        let bad = ("v1", "Pod", "ns1", "badpod", "badpoduid");
        let good = ("v1", "Pod", "ns1", "goodpod", "goodpoduid");
        g.upsert(object(bad, &[reference_to(as_secret)]));
        g.upsert(object(good, &[reference_to(as_deployment)]));
        let first = g.get("deploymentuid1").unwrap().identity.clone();
        assert_eq!(first.kind, "Secret");
        assert_eq!(
            sorted(g.confirm_absent(&first)),
            vec![del("badpoduid"), del("deploymentuid1")]
        );
        let next = g.get("deploymentuid1").unwrap().identity.clone();
        assert_eq!(
            (next.kind.as_str(), next.name.as_str()),
            ("Deployment", "deployment1")
        );
        assert_eq!(
            g.owner_state(&reference_to(as_secret), Some("ns1")),
            OwnerState::Gone
        );
        assert_eq!(
            g.owner_state(&reference_to(as_deployment), Some("ns1")),
            OwnerState::Unknown
        );
    }
}
