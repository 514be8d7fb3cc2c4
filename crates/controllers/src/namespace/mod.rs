//! The namespace controller, as upstream's `pkg/controller/namespace`: a deleted namespace is
//! Terminating until this controller has deleted everything in it and removed its `kubernetes`
//! finalizer from `spec.finalizers` through the `namespaces/{name}/finalize` subresource, the
//! only write upstream's API server lets change them; the API server then removes it.
//!
//! Every namespaced kind the API serves is emptied, found through discovery (kinds added at run
//! time included), never from a fixed list. Progress is reported as upstream's conditions
//! (`NamespaceDeletionDiscoveryFailure`, `NamespaceDeletionContentFailure`,
//! `NamespaceContentRemaining`, `NamespaceFinalizersRemaining`). Everything the controller knows
//! is in the API, so a restart mid-way carries on where it stopped.

use crate::runtime::{Action, Controller, WorkQueue};
use informer::{Change, Informer, Informers, Key, Subscription};
use k8s_openapi::{
    api::core::v1::{Namespace, NamespaceCondition},
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, PostParams},
    discovery::{Discovery, Scope, verbs},
};
use serde_json::{Value, json};
use std::{collections::BTreeMap, sync::Arc, time::Duration};

/// The finalizer of `spec.finalizers` this controller owns.
pub const FINALIZER: &str = "kubernetes";

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the namespace controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// How it runs: concurrent syncs (upstream's `--concurrent-namespace-syncs`, 10); retry delays
    /// of failed syncs.
    pub run: crate::runtime::Config<10>,
    /// How long to wait before looking again at content that is going away on its own (pods in
    /// their grace period, objects with finalizers); upstream estimates it from the pods' grace.
    pub recheck: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            run: Default::default(),
            recheck: Duration::from_secs(1),
        }
    }
}

/// The namespace controller: the shared cache's namespaces and a queue of namespace names.
pub struct NamespaceController {
    client: Client,
    config: Config,
    namespaces: Informer<Namespace>,
    queue: WorkQueue<Key>,
}

/// What one pass over a namespace's content found.
#[derive(Default)]
struct Content {
    /// Kinds discovery could not list, with why.
    discovery_failures: Vec<String>,
    /// Deletions that failed, with why.
    failures: Vec<String>,
    /// Objects left, per resource.
    remaining: BTreeMap<String, usize>,
    /// Finalizers still held by objects left, with how many objects hold each.
    finalizers: BTreeMap<String, usize>,
}

impl Controller for NamespaceController {
    const NAME: &'static str = "namespace";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let this = Arc::clone(self);
        vec![self.namespaces.subscribe(move |c: &Change<Namespace>| {
            if !matches!(c, Change::Deleted(_)) && c.object().metadata.deletion_timestamp.is_some()
            {
                this.queue.add(c.object().name_any());
            }
        })]
    }

    async fn reconcile(self: &Arc<Self>, name: Key) -> Result<Action, Error> {
        let Some(ns) = self.namespaces.get(&name) else {
            return Ok(Action::await_change());
        };
        let holds = ns
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.as_ref())
            .is_some_and(|f| f.iter().any(|f| f == FINALIZER));
        if ns.metadata.deletion_timestamp.is_none() || !holds {
            return Ok(Action::await_change());
        }
        let content = self.delete_content(&name).await?;
        self.report(&ns, &content).await?;
        if content.remaining.is_empty()
            && content.failures.is_empty()
            && content.discovery_failures.is_empty()
        {
            self.finalize(&ns).await?;
            return Ok(Action::await_change());
        }
        Ok(Action::requeue(self.config.recheck))
    }
}

impl NamespaceController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            queue: config.run.queue(),
            namespaces: informers.get(),
            config,
        })
    }

    /// Deletes everything in `namespace`, kind by kind as discovery lists them; says what is left.
    async fn delete_content(&self, namespace: &str) -> Result<Content, Error> {
        let mut content = Content::default();
        let discovery = match Discovery::new(self.client.clone()).run().await {
            Ok(d) => d,
            Err(e) => {
                content.discovery_failures.push(e.to_string());
                return Ok(content);
            }
        };
        for group in discovery.groups() {
            // One version per kind: the same objects are served in every version.
            for (resource, caps) in group.recommended_resources() {
                if caps.scope != Scope::Namespaced
                    || !caps.supports_operation(verbs::LIST)
                    || !caps.supports_operation(verbs::DELETE)
                {
                    continue;
                }
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), namespace, &resource);
                let list = match api.list(&ListParams::default()).await {
                    Ok(l) => l,
                    Err(e) => {
                        content
                            .discovery_failures
                            .push(format!("{}: {e}", resource.plural));
                        continue;
                    }
                };
                let what = if resource.group.is_empty() {
                    resource.plural.clone()
                } else {
                    format!("{}.{}", resource.plural, resource.group)
                };
                for obj in list.items {
                    *content.remaining.entry(what.clone()).or_default() += 1;
                    for f in obj.metadata.finalizers.iter().flatten() {
                        *content.finalizers.entry(f.clone()).or_default() += 1;
                    }
                    if obj.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    match api
                        .delete(&obj.name_any(), &DeleteParams::background())
                        .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => content
                            .failures
                            .push(format!("{what} {}: {e}", obj.name_any())),
                    }
                }
            }
        }
        Ok(content)
    }

    /// Writes upstream's deletion conditions to the namespace's status.
    async fn report(&self, ns: &Namespace, content: &Content) -> Result<(), Error> {
        let remaining = content
            .remaining
            .iter()
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect::<Vec<_>>()
            .join(", ");
        let finalizers = content
            .finalizers
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect::<Vec<_>>()
            .join(", ");
        let conditions = [
            condition(
                "NamespaceDeletionDiscoveryFailure",
                &content.discovery_failures,
                ("DiscoveryFailed", "Discovery failed for some groups"),
                (
                    "ResourcesDiscovered",
                    "All resources successfully discovered",
                ),
            ),
            condition(
                "NamespaceDeletionContentFailure",
                &content.failures,
                (
                    "ContentDeletionFailed",
                    "Failed to delete all resource types",
                ),
                (
                    "ContentDeleted",
                    "All content successfully deleted, may be waiting on finalization",
                ),
            ),
            condition(
                "NamespaceContentRemaining",
                &[remaining]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>(),
                ("SomeResourcesRemain", "Some resources are remaining"),
                ("ContentRemoved", "All content successfully removed"),
            ),
            condition(
                "NamespaceFinalizersRemaining",
                &[finalizers]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>(),
                (
                    "SomeFinalizersRemain",
                    "Some content in the namespace has finalizers remaining",
                ),
                (
                    "ContentHasNoFinalizers",
                    "All content-preserving finalizers finished",
                ),
            ),
        ];
        let old = ns
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let merged: Vec<NamespaceCondition> = conditions
            .into_iter()
            .map(|mut c| {
                // The transition time moves only when the status does.
                if let Some(prev) = old.iter().find(|o| o.type_ == c.type_)
                    && prev.status == c.status
                {
                    c.last_transition_time = prev.last_transition_time.clone();
                }
                c
            })
            .collect();
        let same = |a: &NamespaceCondition, b: &NamespaceCondition| {
            a.type_ == b.type_
                && a.status == b.status
                && a.reason == b.reason
                && a.message == b.message
        };
        if merged.len() == old.len() && merged.iter().zip(&old).all(|(a, b)| same(a, b)) {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.client.clone());
        // UpdateStatus, retried on a conflict with the namespace read again (upstream's
        // retryOnConflictError around updateNamespaceStatusFunc): the role grants `update` on
        // `namespaces/status`, not `patch`.
        let merged = json!(merged);
        let set = |v: &mut Value| v["status"]["conditions"] = merged.clone();
        match crate::util::update::status(&api, ns, set).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the `kubernetes` finalizer; with no other finalizer left the API server deletes
    /// the namespace.
    async fn finalize(&self, ns: &Namespace) -> Result<(), Error> {
        let mut next = Namespace::clone(ns);
        if let Some(spec) = next.spec.as_mut() {
            spec.finalizers = Some(
                spec.finalizers
                    .iter()
                    .flatten()
                    .filter(|f| *f != FINALIZER)
                    .cloned()
                    .collect(),
            );
        }
        let api: Api<Namespace> = Api::all(self.client.clone());
        match api
            .replace_subresource("finalize", &ns.name_any(), &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// A deletion condition: True with `bad`'s reason and the problems when there are any, else
/// False with `good`'s.
fn condition(
    type_: &str,
    problems: &[String],
    bad: (&str, &str),
    good: (&str, &str),
) -> NamespaceCondition {
    let (status, reason, message) = if problems.is_empty() {
        ("False", good.0, good.1.to_string())
    } else {
        ("True", bad.0, format!("{}: {}", bad.1, problems.join("; ")))
    };
    NamespaceCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_transition_time: Some(Time(clock::now())),
    }
}
