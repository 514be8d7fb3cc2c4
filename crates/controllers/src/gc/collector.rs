//! The collector's workers: upstream's `attemptToDeleteItem` and `orphanDependents`, deciding on
//! the graph (pure [`plan`]) and writing through the API.

use super::{
    Config, Error, SharedGraph,
    graph::{FOREGROUND_DELETION, Identity, Node, ORPHAN, OwnerState, Uid, Work},
    lock,
    resources::{Kind, resolve},
};
use crate::runtime::{Action, WorkQueue};
use informer::Informers;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{
    Api, Client,
    api::{
        DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams, Preconditions,
        PropagationPolicy,
    },
};
use serde_json::{Value, json};

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
}

/// Upstream's decision for a dependent that is not itself being deleted, given the verdict on
/// each of its owner references (in order) and whether it has dependents of its own.
pub fn plan(node: &Node, verdicts: &[(Uid, OwnerVerdict)], has_dependents: bool) -> Plan {
    if verdicts.is_empty() {
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
    if !waiting.is_empty() && has_dependents {
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

/// The owner references left once those to `drop` are removed.
pub fn without_references(owners: &[OwnerReference], drop: &[Uid]) -> Vec<OwnerReference> {
    owners
        .iter()
        .filter(|r| !drop.contains(&r.uid))
        .cloned()
        .collect()
}

/// The outcome of a live lookup of an owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lookup {
    /// No object with that uid (none with that name, or one with another uid).
    Absent,
    /// It exists.
    Present { deleting_dependents: bool },
    /// Its kind is not one the collector knows: it cannot be checked, so it counts as present.
    Unresolvable,
}

/// The garbage collector: the graph the shared cache's events keep, its queue of work items,
/// and the client it looks owners up and deletes with.
pub struct GarbageCollector {
    pub(crate) client: Client,
    pub(crate) config: Config,
    pub(crate) informers: Informers,
    pub(crate) graph: SharedGraph,
    pub(crate) queue: WorkQueue<Work>,
}

impl GarbageCollector {
    /// Processes one work item.
    pub(crate) async fn process(&self, work: Work) -> Result<Action, Error> {
        match work {
            Work::AttemptToDelete(uid) => self.attempt_to_delete(&uid).await,
            Work::Orphan(uid) => self.orphan(&uid).await,
        }
        .map(|()| Action::await_change())
    }

    fn api(&self, identity: &Identity) -> Option<(Api<PartialObjectMeta<DynamicObject>>, &Kind)> {
        let kind = resolve(&self.config.kinds, &identity.api_version, &identity.kind)?;
        let api = match (&identity.namespace, kind.namespaced) {
            (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            (None, true) => return None,
            (_, false) => Api::all_with(self.client.clone(), &kind.resource),
        };
        Some((api, kind))
    }

    /// Looks an object up by name and compares uids, as upstream's `isDangling`.
    async fn lookup(&self, identity: &Identity) -> Result<Lookup, Error> {
        let Some((api, _)) = self.api(identity) else {
            return Ok(Lookup::Unresolvable);
        };
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
            _ => Lookup::Absent,
        })
    }

    fn absent(&self, uid: &str) {
        let work = lock(&self.graph).confirm_absent(uid);
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
            if lock(&self.graph).owner_state(uid) == OwnerState::Gone
                || self.lookup(&node.identity).await? == Lookup::Absent
            {
                self.absent(uid);
            }
            return Ok(());
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
        let has_dependents = !lock(&self.graph).dependents(uid).is_empty();
        match plan(&node, &verdicts, has_dependents) {
            Plan::Nothing => Ok(()),
            Plan::DropReferences(drop) => {
                let remaining = without_references(&node.owners, &drop);
                tracing::debug!(object = ?node.identity, ?drop, "removing references to absent or deleting owners");
                self.patch_metadata(&node, json!({ "ownerReferences": non_empty(&remaining) }))
                    .await
            }
            Plan::Delete(policy) => {
                tracing::debug!(object = ?node.identity, ?policy, "deleting object whose owners are gone");
                self.delete(&node, policy).await
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
        let state = lock(&self.graph).owner_state(&owner.uid);
        let deleting_dependents = match state {
            OwnerState::Present {
                deleting_dependents,
            } => deleting_dependents,
            OwnerState::Gone => return Ok(OwnerVerdict::Dangling),
            OwnerState::Unknown => {
                let identity = Identity {
                    api_version: owner.api_version.clone(),
                    kind: owner.kind.clone(),
                    namespace: dependent.identity.namespace.clone(),
                    name: owner.name.clone(),
                    uid: owner.uid.clone(),
                };
                match self.lookup(&identity).await? {
                    Lookup::Absent => {
                        self.absent(&owner.uid);
                        return Ok(OwnerVerdict::Dangling);
                    }
                    Lookup::Present {
                        deleting_dependents,
                    } => deleting_dependents,
                    Lookup::Unresolvable => false,
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
        let blocking: Vec<(Uid, bool)> = lock(&self.graph)
            .blocking_dependents(&owner.identity.uid)
            .into_iter()
            .map(|d| {
                (
                    d.identity.uid.clone(),
                    d.deleting && !d.deleting_dependents(),
                )
            })
            .collect();
        if blocking.is_empty() {
            tracing::debug!(object = ?owner.identity, "no blocking dependents left; removing foregroundDeletion");
            return self.remove_finalizer(owner, FOREGROUND_DELETION).await;
        }
        for (dep, already_going) in blocking {
            if !already_going {
                self.queue.add(Work::AttemptToDelete(dep));
            }
        }
        Ok(())
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
    }

    /// A merge patch of `metadata` guarded by the object's resourceVersion; a vanished object
    /// needs no patch.
    async fn patch_metadata(&self, node: &Node, mut metadata: Value) -> Result<(), Error> {
        let Some((api, _)) = self.api(&node.identity) else {
            return Ok(());
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
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete(&self, node: &Node, policy: PropagationPolicy) -> Result<(), Error> {
        let Some((api, _)) = self.api(&node.identity) else {
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
    use OwnerVerdict::{Dangling, Solid, Waiting};
    use std::collections::HashSet;

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

    #[test]
    fn plans_follow_upstream() {
        use PropagationPolicy::{Background, Foreground, Orphan};
        let drop = |v: &[&str]| Plan::DropReferences(v.iter().map(|s| s.to_string()).collect());
        type Case<'a> = (&'a str, Vec<OwnerVerdict>, bool, &'a [&'a str], Plan);
        let table: Vec<Case> = vec![
            ("no owners", vec![], false, &[], Plan::Nothing),
            ("a living owner", vec![Solid], false, &[], Plan::Nothing),
            (
                "the only owner is gone",
                vec![Dangling],
                false,
                &[],
                Plan::Delete(Background),
            ),
            (
                "all owners gone",
                vec![Dangling, Dangling],
                true,
                &[],
                Plan::Delete(Background),
            ),
            (
                "one of two gone",
                vec![Solid, Dangling],
                false,
                &[],
                drop(&["1"]),
            ),
            (
                "one gone, one deleting, one alive",
                vec![Dangling, Waiting, Solid],
                false,
                &[],
                drop(&["0", "1"]),
            ),
            (
                "owner waits, no own dependents",
                vec![Waiting],
                false,
                &[],
                Plan::Delete(Background),
            ),
            (
                "owner waits, own dependents",
                vec![Waiting],
                true,
                &[],
                Plan::Delete(Foreground),
            ),
            (
                "gone owner, own orphan finalizer",
                vec![Dangling],
                true,
                &[ORPHAN],
                Plan::Delete(Orphan),
            ),
            (
                "gone owner, own foreground finalizer",
                vec![Dangling],
                true,
                &[FOREGROUND_DELETION],
                Plan::Delete(Foreground),
            ),
        ];
        for (what, kinds, has_dependents, finalizers, want) in table {
            let verdicts: Vec<(Uid, OwnerVerdict)> = kinds
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect();
            assert_eq!(
                plan(&node(finalizers), &verdicts, has_dependents),
                want,
                "{what}"
            );
        }
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
}
