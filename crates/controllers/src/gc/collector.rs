//! The collector's workers: upstream's `attemptToDeleteItem` and `orphanDependents`, deciding on
//! the graph (pure [`plan`]) and writing through the API.

use super::{
    Config, Error, SharedGraph,
    graph::{FOREGROUND_DELETION, Graph, Identity, Node, ORPHAN, OwnerState, Uid, Work},
    lock,
    resources::{Kind, Served},
};
use crate::runtime::{Action, WorkQueue};
use events::{EventType, Recorder};
use informer::Informers;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{
    Api, Client,
    api::{
        DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams, Preconditions,
        PropagationPolicy,
    },
};
use serde_json::{Value, json};
use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicU64, Ordering},
    },
};
use tokio::sync::{Notify, watch};

/// What an owner reference points at, for deciding about its dependent (upstream's
/// `classifyReferences`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerVerdict {
    /// The owner exists and is not deleting its dependents.
    Solid,
    /// No object with that uid exists.
    Dangling,
    /// The owner exists and waits, in foreground deletion, for its dependents to go.
    Waiting,
    /// A cluster-scoped dependent names a namespaced owner: no lookup can answer, and upstream
    /// leaves such a dependent alone.
    Invalid,
}

/// What to do with a dependent.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Leave it.
    Nothing,
    /// It has a living owner: drop only its references to these (absent or deleting) owners.
    DropReferences(Vec<Uid>),
    /// It has no living owner: delete it with this propagation.
    Delete(PropagationPolicy),
    /// An owner waits for it while one of its own dependents waits for its dependents too: the
    /// owners may be waiting on each other in a cycle, which no deletion order can end. Make its
    /// references non-blocking ([`unblocked`]), so its owners stop waiting for it, then delete
    /// it in the foreground (upstream's `unblockOwnerReferences` step of `attemptToDeleteItem`).
    UnblockThenDelete,
}

/// Upstream's decision for a dependent that is not itself being deleted, given the verdict on
/// each of its owner references (in order) and its own dependents.
pub fn plan(node: &Node, verdicts: &[(Uid, OwnerVerdict)], dependents: &[&Node]) -> Plan {
    if verdicts.is_empty() || verdicts.iter().any(|(_, v)| *v == OwnerVerdict::Invalid) {
        return Plan::Nothing;
    }
    let of = |v: OwnerVerdict| {
        verdicts
            .iter()
            .filter(move |(_, x)| *x == v)
            .map(|(u, _)| u.clone())
    };
    let solid = of(OwnerVerdict::Solid).count();
    let waiting: Vec<Uid> = of(OwnerVerdict::Waiting).collect();
    if solid > 0 {
        // References to owners in foreground deletion go too, or those owners would wait
        // forever for a dependent that another owner keeps alive.
        let drop: Vec<Uid> = of(OwnerVerdict::Dangling).chain(waiting).collect();
        return if drop.is_empty() {
            Plan::Nothing
        } else {
            Plan::DropReferences(drop)
        };
    }
    if !waiting.is_empty() && !dependents.is_empty() {
        // Like upstream, a dependent that itself waits for its dependents is taken for a cycle
        // (it may be a plain chain deleted from both ends; unblocking then costs one patch).
        if dependents.iter().any(|d| d.deleting_dependents()) {
            return Plan::UnblockThenDelete;
        }
        // An owner waits for it: its own dependents must go first, so that it blocks the owner
        // for as long as they exist.
        return Plan::Delete(PropagationPolicy::Foreground);
    }
    let has = |f: &str| node.finalizers.iter().any(|x| x == f);
    Plan::Delete(if has(ORPHAN) {
        PropagationPolicy::Orphan
    } else if has(FOREGROUND_DELETION) {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    })
}

/// What an owner in foreground deletion does next (upstream's `processDeletingDependentsItem`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Foreground {
    /// No dependent blocks it: remove its `foregroundDeletion` finalizer.
    Release,
    /// Dependents block it: look at these ones (possibly none). A blocking dependent that is
    /// itself waiting for its dependents is left out: it is already on its way, its own changes
    /// queue it, and queueing it from here would make owners in a cycle queue each other forever.
    Delete(Vec<Uid>),
}

/// The next step of the owner `owner`, in foreground deletion, on the graph.
pub fn foreground(graph: &Graph, owner: &str) -> Foreground {
    let blocking = graph.blocking_dependents(owner);
    if blocking.is_empty() {
        return Foreground::Release;
    }
    Foreground::Delete(
        blocking
            .into_iter()
            .filter(|d| !d.deleting_dependents())
            .map(|d| d.identity.uid.clone())
            .collect(),
    )
}

/// The owner references with every blocking one made non-blocking (upstream's
/// `unblockOwnerReferencesStrategicMergePatch`); the others are kept as they are.
pub fn unblocked(owners: &[OwnerReference]) -> Vec<OwnerReference> {
    owners
        .iter()
        .cloned()
        .map(|mut r| {
            if r.block_owner_deletion == Some(true) {
                r.block_owner_deletion = Some(false);
            }
            r
        })
        .collect()
}

/// The owner references left once those to `drop` are removed.
pub fn without_references(owners: &[OwnerReference], drop: &[Uid]) -> Vec<OwnerReference> {
    owners
        .iter()
        .filter(|r| !drop.contains(&r.uid))
        .cloned()
        .collect()
}

/// The outcome of a live lookup of an owner.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Lookup {
    /// No object with that uid where the reference says (none with that name, or one with
    /// another uid); the identity looked up, without a namespace for a cluster-scoped kind.
    Absent(Identity),
    /// It exists.
    Present { deleting_dependents: bool },
    /// A namespaced kind named without a namespace (by a cluster-scoped dependent).
    InvalidScope,
}

/// The garbage collector: the graph the shared cache's events keep, its queue of work items,
/// and the client it looks owners up and deletes with.
pub struct GarbageCollector {
    pub(crate) client: Client,
    pub(crate) config: Config,
    pub(crate) informers: Informers,
    pub(crate) graph: SharedGraph,
    pub(crate) queue: WorkQueue<Work>,
    /// What discovery last found: owner references resolve against it.
    pub(crate) served: Arc<RwLock<Served>>,
    /// True once the first discovery's monitors have listed: workers wait for it, as
    /// upstream's wait for its monitors' caches.
    pub(crate) ready: watch::Sender<bool>,
    /// Poked when the served kinds may have changed (a CRD or APIService changed).
    pub(crate) rediscover: Arc<Notify>,
    /// Items that failed on a kind the server did not serve: queued again as soon as
    /// discovery changes, rather than at their back-off's pace.
    pub(crate) unresolved: Mutex<HashSet<Work>>,
    pub(crate) recorder: Recorder,
    /// Work items processed since start: a collector that goes quiet once its work is done
    /// stops counting, one that chases its own tail (a cycle of owners requeueing each other)
    /// does not, so tests and diagnostics can tell the two apart without a profiler.
    pub(crate) processed: AtomicU64,
}

impl GarbageCollector {
    /// How many work items the collector has processed since it started.
    pub fn processed(&self) -> u64 {
        self.processed.load(Ordering::Relaxed)
    }

    /// Processes one work item.
    pub(crate) async fn process(&self, work: Work) -> Result<Action, Error> {
        // Nothing is decided before the first discovery's monitors have listed.
        let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
        self.processed.fetch_add(1, Ordering::Relaxed);
        let result = match &work {
            Work::AttemptToDelete(uid) => self.attempt_to_delete(uid).await,
            Work::Orphan(uid) => self.orphan(uid).await,
            Work::ReportInvalidNamespace { dependent, owner } => {
                self.report_invalid_namespace(dependent, owner);
                Ok(())
            }
        };
        if let Err(Error::UnknownKind { .. }) = &result {
            self.unresolved
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(work);
        }
        result.map(|()| Action::await_change())
    }

    /// The kind an identity names, or upstream's REST mapping error.
    fn kind(&self, identity: &Identity) -> Result<Kind, Error> {
        let served = self.served.read().unwrap_or_else(|e| e.into_inner());
        served
            .resolve(&identity.api_version, &identity.kind)
            .cloned()
            .ok_or_else(|| Error::UnknownKind {
                api_version: identity.api_version.clone(),
                kind: identity.kind.clone(),
            })
    }

    /// The API of the object `identity` names; `None` for a namespaced kind named without a
    /// namespace.
    fn api(
        &self,
        identity: &Identity,
    ) -> Result<Option<Api<PartialObjectMeta<DynamicObject>>>, Error> {
        let kind = self.kind(identity)?;
        Ok(match (&identity.namespace, kind.namespaced) {
            (Some(ns), true) => Some(Api::namespaced_with(
                self.client.clone(),
                ns,
                &kind.resource,
            )),
            (None, true) => None,
            (_, false) => Some(Api::all_with(self.client.clone(), &kind.resource)),
        })
    }

    /// Looks an object up by name and compares uids, as upstream's `isDangling`.
    async fn lookup(&self, identity: &Identity) -> Result<Lookup, Error> {
        let Some(api) = self.api(identity)? else {
            return Ok(Lookup::InvalidScope);
        };
        let mut looked_up = identity.clone();
        if !self.kind(identity)?.namespaced {
            looked_up.namespace = None;
        }
        Ok(match api.get_metadata_opt(&identity.name).await? {
            Some(obj) if obj.metadata.uid.as_deref() == Some(identity.uid.as_str()) => {
                let deleting = obj.metadata.deletion_timestamp.is_some();
                let fg = obj
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FOREGROUND_DELETION);
                Lookup::Present {
                    deleting_dependents: deleting && fg,
                }
            }
            _ => Lookup::Absent(looked_up),
        })
    }

    fn absent(&self, identity: &Identity) {
        let work = lock(&self.graph).confirm_absent(identity);
        for w in work {
            self.queue.add(w);
        }
    }

    async fn attempt_to_delete(&self, uid: &str) -> Result<(), Error> {
        let Some(node) = lock(&self.graph).get(uid).cloned() else {
            return Ok(());
        };
        if !node.observed {
            // A virtual node: an owner only known from references. Does it exist?
            if lock(&self.graph).is_gone(uid) {
                return Ok(());
            }
            return match self.lookup(&node.identity).await? {
                Lookup::Absent(identity) => {
                    self.absent(&identity);
                    Ok(())
                }
                // Upstream looks again (with back-off) until a watch shows it, so that a node
                // added and removed while a watch was down cannot stay virtual forever.
                Lookup::Present { .. } => Err(Error::NotObserved(format!("{:?}", node.identity))),
                // A cluster-scoped dependent named a namespaced kind: no retry can help.
                Lookup::InvalidScope => Ok(()),
            };
        }
        if node.deleting_dependents() {
            return self.process_deleting_dependents(&node).await;
        }
        if node.deleting || node.owners.is_empty() {
            return Ok(());
        }
        let mut verdicts = Vec::with_capacity(node.owners.len());
        for owner in &node.owners {
            verdicts.push((owner.uid.clone(), self.verdict(owner, &node).await?));
        }
        let decision = {
            let graph = lock(&self.graph);
            plan(&node, &verdicts, &graph.dependents(uid))
        };
        match decision {
            Plan::Nothing => Ok(()),
            Plan::DropReferences(drop) => {
                let remaining = without_references(&node.owners, &drop);
                tracing::debug!(object = ?node.identity, ?drop, "removing references to absent or deleting owners");
                self.patch_metadata(&node, json!({ "ownerReferences": non_empty(&remaining) }))
                    .await
                    .map(|_| ())
            }
            Plan::Delete(policy) => {
                tracing::debug!(object = ?node.identity, ?policy, "deleting object whose owners are gone");
                self.delete(&node, policy).await
            }
            Plan::UnblockThenDelete => {
                tracing::debug!(object = ?node.identity, "an owner and a dependent both wait for their dependents; unblocking its owners to break a possible cycle, then deleting it in the foreground");
                let owners = unblocked(&node.owners);
                if owners == node.owners {
                    return self.delete(&node, PropagationPolicy::Foreground).await;
                }
                let Some(meta) = self
                    .patch_metadata(&node, json!({ "ownerReferences": owners }))
                    .await?
                else {
                    return Ok(());
                };
                // The delete is guarded by the version the patch made, not the one decided on.
                let patched = Node {
                    owners,
                    resource_version: meta.resource_version,
                    ..node
                };
                self.delete(&patched, PropagationPolicy::Foreground).await
            }
        }
    }

    /// The state of one owner: from the graph when it has seen the owner (or its deletion),
    /// else from a live lookup.
    async fn verdict(
        &self,
        owner: &OwnerReference,
        dependent: &Node,
    ) -> Result<OwnerVerdict, Error> {
        let namespace = dependent.identity.namespace.clone();
        let state = lock(&self.graph).owner_state(owner, namespace.as_deref());
        let deleting_dependents = match state {
            OwnerState::Present {
                deleting_dependents,
            } => deleting_dependents,
            OwnerState::Gone => return Ok(OwnerVerdict::Dangling),
            OwnerState::Unknown => {
                // Owner references resolve in the dependent's namespace.
                match self
                    .lookup(&Identity::of_reference(owner, namespace))
                    .await?
                {
                    Lookup::Absent(identity) => {
                        self.absent(&identity);
                        return Ok(OwnerVerdict::Dangling);
                    }
                    Lookup::Present {
                        deleting_dependents,
                    } => deleting_dependents,
                    Lookup::InvalidScope => return Ok(OwnerVerdict::Invalid),
                }
            }
        };
        Ok(if deleting_dependents {
            OwnerVerdict::Waiting
        } else {
            OwnerVerdict::Solid
        })
    }

    /// An owner in foreground deletion: once no dependent blocks it, remove its finalizer
    /// (the API server then deletes it); until then make sure each blocking dependent goes.
    async fn process_deleting_dependents(&self, owner: &Node) -> Result<(), Error> {
        let step = foreground(&lock(&self.graph), &owner.identity.uid);
        match step {
            Foreground::Release => {
                tracing::debug!(object = ?owner.identity, "no blocking dependents left; removing foregroundDeletion");
                self.remove_finalizer(owner, FOREGROUND_DELETION).await
            }
            Foreground::Delete(dependents) => {
                for dep in dependents {
                    self.queue.add(Work::AttemptToDelete(dep));
                }
                Ok(())
            }
        }
    }

    /// An owner deleted with `Orphan`: drop the references to it from every dependent, then
    /// remove its `orphan` finalizer.
    async fn orphan(&self, uid: &str) -> Result<(), Error> {
        let (owner, dependents) = {
            let g = lock(&self.graph);
            let Some(owner) = g.get(uid).filter(|n| n.observed && n.orphaning()).cloned() else {
                return Ok(());
            };
            let deps: Vec<Node> = g
                .dependents(uid)
                .into_iter()
                .filter(|d| d.observed)
                .cloned()
                .collect();
            (owner, deps)
        };
        let mut failures = Vec::new();
        for dep in &dependents {
            let remaining = without_references(&dep.owners, &[uid.to_string()]);
            if let Err(e) = self
                .patch_metadata(dep, json!({ "ownerReferences": non_empty(&remaining) }))
                .await
            {
                failures.push(e.to_string());
            }
        }
        if let Some(first) = failures.first() {
            let owner = format!("{} {}", owner.identity.kind, owner.identity.name);
            return Err(Error::Orphaning {
                owner,
                failed: failures.len(),
                first: first.clone(),
            });
        }
        self.remove_finalizer(&owner, ORPHAN).await
    }

    async fn remove_finalizer(&self, node: &Node, finalizer: &str) -> Result<(), Error> {
        let rest: Vec<&String> = node.finalizers.iter().filter(|f| *f != finalizer).collect();
        let value = if rest.is_empty() {
            Value::Null
        } else {
            json!(rest)
        };
        self.patch_metadata(node, json!({ "finalizers": value }))
            .await
            .map(|_| ())
    }

    /// A merge patch of `metadata` guarded by the object's resourceVersion; a vanished object
    /// needs no patch. Returns the patched object's metadata (whose resourceVersion guards a
    /// write that follows), `None` if it is gone or of a kind the collector cannot address.
    async fn patch_metadata(
        &self,
        node: &Node,
        mut metadata: Value,
    ) -> Result<Option<ObjectMeta>, Error> {
        let Some(api) = self.api(&node.identity)? else {
            return Ok(None);
        };
        if let (Some(rv), Some(m)) = (&node.resource_version, metadata.as_object_mut()) {
            m.insert("resourceVersion".into(), json!(rv));
        }
        let patch = json!({ "metadata": metadata });
        match api
            .patch(
                &node.identity.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(patched) => Ok(Some(patched.metadata)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete(&self, node: &Node, policy: PropagationPolicy) -> Result<(), Error> {
        let Some(api) = self.api(&node.identity)? else {
            return Ok(());
        };
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(Preconditions {
                uid: Some(node.identity.uid.clone()),
                resource_version: node.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(&node.identity.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl GarbageCollector {
    /// Upstream's `OwnerRefInvalidNamespace` warning on a dependent whose reference names an
    /// owner that lives in another namespace.
    fn report_invalid_namespace(&self, dependent: &str, owner: &str) {
        let Some(dep) = lock(&self.graph).get(dependent).cloned() else {
            return;
        };
        let Some(reference) = dep.reference_to(owner) else {
            return;
        };
        let object = ObjectReference {
            api_version: Some(dep.identity.api_version.clone()),
            kind: Some(dep.identity.kind.clone()),
            namespace: dep.identity.namespace.clone(),
            name: Some(dep.identity.name.clone()),
            uid: Some(dep.identity.uid.clone()),
            ..Default::default()
        };
        self.recorder.record(
            &object,
            EventType::Warning,
            "OwnerRefInvalidNamespace",
            invalid_namespace_message(reference, dep.identity.namespace.as_deref()),
        );
    }
}

/// Upstream's message: the reference as the collector's `objectReference` prints it, placed
/// in the dependent's namespace.
pub fn invalid_namespace_message(reference: &OwnerReference, namespace: Option<&str>) -> String {
    let ns = namespace.unwrap_or("");
    format!(
        "ownerRef [{}/{}, namespace: {ns}, name: {}, uid: {}] does not exist in namespace \"{ns}\"",
        reference.api_version, reference.kind, reference.name, reference.uid
    )
}

/// `null` (the merge patch that removes the field) for an empty list.
fn non_empty(owners: &[OwnerReference]) -> Value {
    if owners.is_empty() {
        Value::Null
    } else {
        json!(owners)
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc::graph::Observed;
    use OwnerVerdict::{Dangling, Invalid, Solid, Waiting};
    use std::collections::{HashMap, HashSet, VecDeque};

    fn node(finalizers: &[&str]) -> Node {
        Node {
            identity: Identity {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: "p".into(),
                uid: "p".into(),
            },
            owners: Vec::new(),
            dependents: HashSet::new(),
            observed: true,
            deleting: false,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
            resource_version: None,
        }
    }

    /// What the dependents of the planned node are like.
    #[derive(Clone, Copy)]
    enum Deps {
        None,
        Plain,
        DeletingDependents,
    }

    #[test]
    fn plans_follow_upstream() {
        use Deps::{DeletingDependents, Plain};
        use PropagationPolicy::{Background, Foreground, Orphan};
        let drop = |v: &[&str]| Plan::DropReferences(v.iter().map(|s| s.to_string()).collect());
        type Case<'a> = (&'a str, Vec<OwnerVerdict>, Deps, &'a [&'a str], Plan);
        let table: Vec<Case> = vec![
            ("no owners", vec![], Deps::None, &[], Plan::Nothing),
            (
                "a living owner",
                vec![Solid],
                Deps::None,
                &[],
                Plan::Nothing,
            ),
            (
                "the only owner is gone",
                vec![Dangling],
                Deps::None,
                &[],
                Plan::Delete(Background),
            ),
            (
                "all owners gone",
                vec![Dangling, Dangling],
                Plain,
                &[],
                Plan::Delete(Background),
            ),
            (
                "one of two gone",
                vec![Solid, Dangling],
                Deps::None,
                &[],
                drop(&["1"]),
            ),
            (
                "one gone, one deleting, one alive",
                vec![Dangling, Waiting, Solid],
                Deps::None,
                &[],
                drop(&["0", "1"]),
            ),
            (
                "a living owner, a dependent deleting its own",
                vec![Solid, Waiting],
                DeletingDependents,
                &[],
                drop(&["1"]),
            ),
            (
                "owner waits, no own dependents",
                vec![Waiting],
                Deps::None,
                &[],
                Plan::Delete(Background),
            ),
            (
                "owner waits, own dependents",
                vec![Waiting],
                Plain,
                &[],
                Plan::Delete(Foreground),
            ),
            (
                "owner waits, own dependent waits too (a cycle)",
                vec![Waiting],
                DeletingDependents,
                &[],
                Plan::UnblockThenDelete,
            ),
            (
                "gone owner, own dependent deleting its own",
                vec![Dangling],
                DeletingDependents,
                &[],
                Plan::Delete(Background),
            ),
            (
                "gone owner, own orphan finalizer",
                vec![Dangling],
                Plain,
                &[ORPHAN],
                Plan::Delete(Orphan),
            ),
            (
                "a namespaced owner named by a cluster-scoped dependent",
                vec![Dangling, Invalid],
                Deps::None,
                &[],
                Plan::Nothing,
            ),
            (
                "gone owner, own foreground finalizer",
                vec![Dangling],
                Plain,
                &[FOREGROUND_DELETION],
                Plan::Delete(Foreground),
            ),
        ];
        for (what, kinds, deps, finalizers, want) in table {
            let verdicts: Vec<(Uid, OwnerVerdict)> = kinds
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect();
            let dependent = match deps {
                Deps::None => None,
                Deps::Plain => Some(node(&[])),
                Deps::DeletingDependents => Some(Node {
                    deleting: true,
                    ..node(&[FOREGROUND_DELETION])
                }),
            };
            let dependents: Vec<&Node> = dependent.iter().collect();
            assert_eq!(
                plan(&node(finalizers), &verdicts, &dependents),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn invalid_namespace_messages_are_upstreams() {
        // The messages of upstream's TestConflictingData.
        let r = |kind: &str, name: &str, uid: &str| OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            ..Default::default()
        };
        assert_eq!(
            invalid_namespace_message(&r("Pod", "podname2", "poduid2"), Some("ns1")),
            r#"ownerRef [v1/Pod, namespace: ns1, name: podname2, uid: poduid2] does not exist in namespace "ns1""#
        );
        assert_eq!(
            invalid_namespace_message(&r("Pod", "podname1", "poduid1"), None),
            r#"ownerRef [v1/Pod, namespace: , name: podname1, uid: poduid1] does not exist in namespace """#
        );
    }

    #[test]
    fn dropping_references_keeps_the_others_in_order() {
        let r = |uid: &str| OwnerReference {
            uid: uid.into(),
            name: uid.into(),
            ..Default::default()
        };
        let kept = without_references(&[r("a"), r("b"), r("c")], &["b".to_string()]);
        let uids: Vec<&str> = kept.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(uids, ["a", "c"]);
    }

    fn reference(uid: &str, block: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: uid.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: block,
        }
    }

    #[test]
    fn unblocking_clears_only_blocking_references() {
        let owners = [
            reference("a", Some(true)),
            reference("b", None),
            reference("c", Some(false)),
        ];
        let blocks: Vec<Option<bool>> = unblocked(&owners)
            .iter()
            .map(|r| r.block_owner_deletion)
            .collect();
        assert_eq!(blocks, [Some(false), None, Some(false)]);
    }

    /// An API server for [`Simulation`]: the objects, as the watch would show them.
    #[derive(Default)]
    struct Objects(HashMap<Uid, Observed>);

    /// The collector's decisions ([`plan`], [`foreground`]) run on a [`Graph`] against
    /// [`Objects`], each write fed back to the graph as its watch event, with a deduplicating
    /// queue like the collector's: deterministic, so a cascade that never settles shows as a
    /// count of steps.
    #[derive(Default)]
    struct Simulation {
        graph: Graph,
        objects: Objects,
        queue: VecDeque<Work>,
        queued: HashSet<Work>,
        steps: usize,
    }

    impl Simulation {
        fn add(&mut self, work: Vec<Work>) {
            for w in work {
                if self.queued.insert(w.clone()) {
                    self.queue.push_back(w);
                }
            }
        }

        fn write(&mut self, obj: Observed) {
            let uid = obj.identity.uid.clone();
            let work = if obj.deleting && obj.finalizers.is_empty() {
                self.objects.0.remove(&uid);
                self.graph.remove(&uid)
            } else {
                self.objects.0.insert(uid, obj.clone());
                self.graph.upsert(obj)
            };
            self.add(work);
        }

        fn pod(&mut self, uid: &str, owner: &str) {
            self.write(Observed {
                identity: Identity {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    namespace: Some("default".into()),
                    name: uid.into(),
                    uid: uid.into(),
                },
                owners: vec![reference(owner, Some(true))],
                deleting: false,
                finalizers: Vec::new(),
                resource_version: None,
            });
        }

        /// A DELETE as the API server takes it: the propagation's finalizer, a timestamp.
        fn delete(&mut self, uid: &str, policy: PropagationPolicy) {
            let Some(mut obj) = self.objects.0.get(uid).cloned() else {
                return;
            };
            let finalizer = match policy {
                PropagationPolicy::Foreground => Some(FOREGROUND_DELETION),
                PropagationPolicy::Orphan => Some(ORPHAN),
                PropagationPolicy::Background => None,
            };
            if let Some(f) = finalizer.filter(|f| !obj.finalizers.iter().any(|x| x == f)) {
                obj.finalizers.push(f.to_string());
            }
            obj.deleting = true;
            self.write(obj);
        }

        fn edit(&mut self, uid: &str, change: impl FnOnce(&mut Observed)) {
            if let Some(mut obj) = self.objects.0.get(uid).cloned() {
                change(&mut obj);
                self.write(obj);
            }
        }

        /// Runs the queue dry, or until `max` steps; the steps taken.
        fn run(&mut self, max: usize) -> usize {
            while let Some(work) = self.queue.pop_front() {
                self.queued.remove(&work);
                self.steps += 1;
                if self.steps >= max {
                    break;
                }
                let Work::AttemptToDelete(uid) = work else {
                    continue;
                };
                let Some(node) = self.graph.get(&uid).filter(|n| n.observed).cloned() else {
                    continue;
                };
                if node.deleting_dependents() {
                    match foreground(&self.graph, &uid) {
                        Foreground::Release => {
                            self.edit(&uid, |o| o.finalizers.retain(|f| f != FOREGROUND_DELETION))
                        }
                        Foreground::Delete(deps) => {
                            self.add(deps.into_iter().map(Work::AttemptToDelete).collect())
                        }
                    }
                    continue;
                }
                if node.deleting {
                    continue;
                }
                let verdicts: Vec<(Uid, OwnerVerdict)> = node
                    .owners
                    .iter()
                    .map(|o| {
                        let namespace = node.identity.namespace.as_deref();
                        let verdict = match self.graph.owner_state(o, namespace) {
                            OwnerState::Present {
                                deleting_dependents: true,
                            } => Waiting,
                            OwnerState::Present { .. } => Solid,
                            OwnerState::Gone | OwnerState::Unknown => Dangling,
                        };
                        (o.uid.clone(), verdict)
                    })
                    .collect();
                let decision = plan(&node, &verdicts, &self.graph.dependents(&uid));
                match decision {
                    Plan::Nothing => {}
                    Plan::DropReferences(drop) => {
                        self.edit(&uid, |o| o.owners = without_references(&o.owners, &drop))
                    }
                    Plan::Delete(policy) => self.delete(&uid, policy),
                    Plan::UnblockThenDelete => {
                        self.edit(&uid, |o| o.owners = unblocked(&o.owners));
                        self.delete(&uid, PropagationPolicy::Foreground);
                    }
                }
            }
            self.steps
        }
    }

    #[test]
    fn a_foreground_deletion_breaks_a_cycle_of_blocking_owners() {
        // Upstream's conformance spec: pod1 owned by pod3, pod2 by pod1, pod3 by pod2.
        let mut sim = Simulation::default();
        sim.pod("pod1", "pod3");
        sim.pod("pod2", "pod1");
        sim.pod("pod3", "pod2");
        sim.run(1000);
        assert!(
            sim.objects.0.values().all(|o| !o.deleting),
            "nothing to do yet"
        );

        sim.steps = 0;
        sim.delete("pod1", PropagationPolicy::Foreground);
        let steps = sim.run(1000);
        let left: Vec<&Uid> = sim.objects.0.keys().collect();
        assert!(left.is_empty(), "left after {steps} steps: {left:?}");
        assert!(steps < 50, "{steps} steps for three pods");
        assert!(sim.queue.is_empty());
    }

    #[test]
    fn a_foreground_deletion_of_a_chain_keeps_the_dependents_first() {
        // a <- b <- c, no cycle: the cascade runs down the chain and back up, and settles.
        let mut sim = Simulation::default();
        sim.write(Observed {
            identity: Identity {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: "a".into(),
                uid: "a".into(),
            },
            owners: Vec::new(),
            deleting: false,
            finalizers: Vec::new(),
            resource_version: None,
        });
        sim.pod("b", "a");
        sim.pod("c", "b");
        sim.run(1000);
        sim.delete("a", PropagationPolicy::Foreground);
        sim.run(1000);
        assert!(sim.objects.0.is_empty());
        assert!(sim.steps < 50, "{} steps", sim.steps);
    }

    #[test]
    fn an_owner_in_foreground_deletion_does_not_queue_dependents_that_wait_too() {
        let mut g = Graph::new();
        let obs = |uid: &str, owner: Option<&str>, deleting: bool| Observed {
            identity: Identity {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: uid.into(),
                uid: uid.into(),
            },
            owners: owner
                .map(|o| reference(o, Some(true)))
                .into_iter()
                .collect(),
            deleting,
            finalizers: if deleting {
                vec![FOREGROUND_DELETION.into()]
            } else {
                Vec::new()
            },
            resource_version: None,
        };
        g.upsert(obs("o", None, true));
        assert_eq!(foreground(&g, "o"), Foreground::Release);
        g.upsert(obs("plain", Some("o"), false));
        g.upsert(obs("waiting", Some("o"), true));
        assert_eq!(
            foreground(&g, "o"),
            Foreground::Delete(vec!["plain".into()])
        );
        g.remove("plain");
        // Still blocked, but by a dependent that is on its way: nothing to queue.
        assert_eq!(foreground(&g, "o"), Foreground::Delete(Vec::new()));
    }
}
