//! The one place workload controllers write pods, as upstream's `RealPodControl` and
//! `slowStartBatch` (`pkg/controller/controller_utils.go`): create in slow-start batches, delete,
//! patch in place; record each write's event on the owner ([`wording`]); and keep the owner's
//! expectations honest: a sync first expects what it is about to write, and every write the
//! watch will never show (it failed, was skipped after a failed batch, or was moot: the pod was
//! gone already, the namespace is being torn down) is lowered at once, so the next sync is not
//! held back waiting for it.
//!
//! The ReplicaSet and ReplicationController, DaemonSet, StatefulSet and Job controllers all
//! write through it; what differs between them is the wording of their events, whether a delete
//! names the pod's uid (the StatefulSet's, so a stale cache never deletes a replacement) and how
//! large the first batch of creations is.

pub mod slow_start;
pub mod wording;

use crate::{
    util::api_error,
    util::expectations::{Expectations, PodExpectations},
};
use events::Recorder;
use informer::key as make_key;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::{
    Client, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    core::Request,
};
use serde_json::Value;
use std::future::Future;
use wording::{Wording, Write};

pub use slow_start::{Batches, slow_start};

/// What a write that did not fail did: whether the watch will show it. A moot write (the pod
/// exists already, is gone, changed since, or its namespace refuses new content) will never be
/// observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server changed the pod; its watch event will follow.
    Written,
    /// Nothing changed.
    Moot,
}

/// The expectations of an owner, as its pod writes raise and lower them. The controllers that
/// only create and delete keep [`Expectations`]; those that also patch in place keep
/// [`PodExpectations`], whose in-place record is apart from the deletions.
pub trait Expect: Sync {
    /// The owner `key` is about to create `count` pods.
    fn expect_creations(&self, key: &str, count: usize);
    /// `count` creations will never be observed.
    fn lower_creations(&self, key: &str, count: usize);
    /// The owner is about to delete the pods with these keys.
    fn expect_deletions(&self, key: &str, pods: Vec<String>);
    /// The deletion of `pod` will never be observed (or was).
    fn deletion_observed(&self, key: &str, pod: &str);
    /// The owner is about to patch these pods in place.
    fn expect_in_place(&self, key: &str, pods: Vec<String>);
    /// The in-place patch of `pod` will never be observed (or was).
    fn in_place_observed(&self, key: &str, pod: &str);
}

impl Expect for Expectations {
    fn expect_creations(&self, key: &str, count: usize) {
        Expectations::expect_creations(self, key, count);
    }
    fn lower_creations(&self, key: &str, count: usize) {
        Expectations::lower_creations(self, key, count);
    }
    fn expect_deletions(&self, key: &str, pods: Vec<String>) {
        Expectations::expect_deletions(self, key, pods);
    }
    fn deletion_observed(&self, key: &str, pod: &str) {
        Expectations::deletion_observed(self, key, pod);
    }
    // One record for all: a pod patched in place is tracked like one being deleted.
    fn expect_in_place(&self, key: &str, pods: Vec<String>) {
        self.add_deletions(key, pods);
    }
    fn in_place_observed(&self, key: &str, pod: &str) {
        Expectations::deletion_observed(self, key, pod);
    }
}

impl Expect for PodExpectations {
    fn expect_creations(&self, key: &str, count: usize) {
        PodExpectations::expect_creations(self, key, count);
    }
    fn lower_creations(&self, key: &str, count: usize) {
        PodExpectations::lower_creations(self, key, count);
    }
    fn expect_deletions(&self, key: &str, pods: Vec<String>) {
        PodExpectations::expect_deletions(self, key, pods);
    }
    fn deletion_observed(&self, key: &str, pod: &str) {
        PodExpectations::deletion_observed(self, key, pod);
    }
    fn expect_in_place(&self, key: &str, pods: Vec<String>) {
        PodExpectations::expect_in_place(self, key, pods);
    }
    fn in_place_observed(&self, key: &str, pod: &str) {
        PodExpectations::in_place_observed(self, key, pod);
    }
}

/// A pod to delete or patch: its name, and its uid for a delete that must not hit a pod of the
/// same name created since.
#[derive(Clone, Debug)]
pub struct Target {
    name: String,
    uid: Option<String>,
}

impl Target {
    /// The pod as the cache showed it.
    pub fn of(pod: &Pod) -> Self {
        Self {
            name: pod.name_any(),
            uid: pod.metadata.uid.clone(),
        }
    }

    /// A pod known by name only.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            uid: None,
        }
    }
}

/// A delete or in-place patch of one pod.
#[derive(Clone, Debug)]
pub enum PodChange {
    /// Delete the pod.
    Delete(Target),
    /// Patch the pod in place with this strategic merge patch.
    InPlace(Target, Value),
}

impl PodChange {
    fn target(&self) -> &Target {
        match self {
            PodChange::Delete(t) | PodChange::InPlace(t, _) => t,
        }
    }
}

/// What a run of writes did.
#[derive(Debug)]
pub struct Writes<E> {
    /// Writes the watch will show.
    pub written: usize,
    /// Writes that changed nothing.
    pub moot: usize,
    /// Creations not attempted because an earlier batch failed.
    pub skipped: usize,
    /// The failures.
    pub errors: Vec<E>,
}

impl<E> Default for Writes<E> {
    fn default() -> Self {
        Self {
            written: 0,
            moot: 0,
            skipped: 0,
            errors: Vec::new(),
        }
    }
}

impl<E> Writes<E> {
    /// The first failure, if any.
    pub fn into_result(self) -> Result<(), E> {
        match self.errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The pod writes of one owner in one sync.
pub struct PodControl<'a> {
    client: Client,
    /// The owner's namespace's pods.
    pods: Request,
    recorder: &'a Recorder,
    owner: ObjectReference,
    namespace: String,
    /// The owner's key in `expectations`.
    key: &'a str,
    expectations: &'a dyn Expect,
    wording: Wording,
    delete_by_uid: bool,
}

impl<'a> PodControl<'a> {
    /// Writes for `owner` (whose expectations are `expectations[key]`) through `client`,
    /// recording events with `recorder` in upstream's `RealPodControl` words.
    pub fn new<K: Resource<DynamicType = ()>>(
        client: &Client,
        recorder: &'a Recorder,
        owner: &K,
        key: &'a str,
        expectations: &'a dyn Expect,
    ) -> Self {
        let namespace = owner.namespace().unwrap_or_default();
        Self {
            client: client.clone(),
            pods: Request::new(Pod::url_path(&(), Some(&namespace))),
            recorder,
            owner: events::reference(owner),
            namespace,
            key,
            expectations,
            wording: Wording::Pods,
            delete_by_uid: false,
        }
    }

    /// The StatefulSet's way: its own event words, and deletes that name the pod's uid.
    pub fn for_stateful_set(mut self) -> Self {
        let name = self.owner.name.clone().unwrap_or_default();
        self.wording = Wording::StatefulSet(name);
        self.delete_by_uid = true;
        self
    }

    fn record(&self, write: Write, pod: &str, result: Result<(), &kube::Error>) {
        let message = result.map_err(api_error::message);
        let shown = message.as_ref().map(|_| ()).map_err(String::as_str);
        let (kind, reason, message) = self.wording.event(write, pod, shown);
        self.recorder.record(&self.owner, kind, reason, message);
    }

    /// Creates one pod per item, in slow-start batches starting at `first_batch`, after
    /// `prepare` has turned the item into the pod (and done what must precede it, such as a
    /// StatefulSet's claims; its failure counts as the creation's). The creations are expected
    /// first; the failed, skipped and moot ones are lowered again.
    pub async fn create<I, E, F, Fut>(
        &self,
        items: Vec<I>,
        first_batch: usize,
        prepare: F,
    ) -> Writes<E>
    where
        F: Fn(I) -> Fut,
        Fut: Future<Output = Result<Pod, E>>,
        E: From<kube::Error>,
    {
        if items.is_empty() {
            return Writes::default();
        }
        let count = items.len();
        self.expectations.expect_creations(self.key, count);
        let run = slow_start(items, first_batch, |item| {
            let pod = prepare(item);
            async move { Ok::<_, E>(self.create_one(&pod.await?).await?) }
        })
        .await;
        let written = run.done.iter().filter(|o| **o == Outcome::Written).count();
        let writes = Writes {
            written,
            moot: run.done.len() - written,
            skipped: run.skipped,
            errors: run.errors,
        };
        self.expectations.lower_creations(self.key, count - written);
        writes
    }

    /// [`PodControl::create`] of pods made beforehand.
    pub async fn create_pods(&self, pods: Vec<Pod>, first_batch: usize) -> Writes<kube::Error> {
        let ready = |pod| std::future::ready(Ok::<_, kube::Error>(pod));
        self.create(pods, first_batch, ready).await
    }

    /// Creates `pod`. A namespace being torn down refuses every creation: moot, and said
    /// nowhere, as upstream. A pod of a fixed name that exists already is the cache lagging.
    async fn create_one(&self, pod: &Pod) -> Result<Outcome, kube::Error> {
        let created = match serde_json::to_vec(pod) {
            Ok(body) => match self.pods.create(&PostParams::default(), body) {
                Ok(request) => self.client.request::<Written>(request).await,
                Err(e) => Err(kube::Error::BuildRequest(e)),
            },
            Err(e) => Err(kube::Error::SerdeError(e)),
        };
        match created {
            Ok(created) => {
                self.record(Write::Create, &created.metadata.name, Ok(()));
                Ok(Outcome::Written)
            }
            Err(e) if api_error::is_namespace_terminating(&e) => Ok(Outcome::Moot),
            Err(e) if pod.metadata.name.is_some() && api_error::is_status(&e, 409) => {
                Ok(Outcome::Moot)
            }
            Err(e) => {
                self.record(Write::Create, &pod.name_any(), Err(&e));
                Err(e)
            }
        }
    }

    /// Deletes and patches pods, all at once or, `in_order`, one after the other; each is
    /// expected first, and lowered again if it failed or was moot (the pod gone, or for a delete
    /// by uid, replaced).
    pub async fn change(&self, changes: Vec<PodChange>, in_order: bool) -> Writes<kube::Error> {
        let pod_key = |c: &PodChange| make_key(&self.namespace, &c.target().name);
        let deletes: Vec<String> = changes
            .iter()
            .filter(|c| matches!(c, PodChange::Delete(_)))
            .map(pod_key)
            .collect();
        let patches: Vec<String> = changes
            .iter()
            .filter(|c| matches!(c, PodChange::InPlace(..)))
            .map(pod_key)
            .collect();
        if !deletes.is_empty() {
            self.expectations.expect_deletions(self.key, deletes);
        }
        if !patches.is_empty() {
            self.expectations.expect_in_place(self.key, patches);
        }
        let results = if in_order {
            let mut results = Vec::with_capacity(changes.len());
            for c in &changes {
                results.push(self.change_one(c).await);
            }
            results
        } else {
            futures::future::join_all(changes.iter().map(|c| self.change_one(c))).await
        };
        let mut writes = Writes::default();
        for (c, result) in changes.iter().zip(results) {
            match result {
                Ok(Outcome::Written) => {
                    writes.written += 1;
                    continue;
                }
                Ok(Outcome::Moot) => writes.moot += 1,
                Err(e) => writes.errors.push(e),
            }
            match c {
                PodChange::Delete(_) => self.expectations.deletion_observed(self.key, &pod_key(c)),
                PodChange::InPlace(..) => {
                    self.expectations.in_place_observed(self.key, &pod_key(c))
                }
            }
        }
        writes
    }

    async fn change_one(&self, change: &PodChange) -> Result<Outcome, kube::Error> {
        let name = &change.target().name;
        let (write, result) = match change {
            PodChange::Delete(target) => {
                let params = DeleteParams {
                    preconditions: self
                        .delete_by_uid
                        .then(|| target.uid.clone())
                        .flatten()
                        .map(|uid| Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }),
                    ..Default::default()
                };
                let request = self.pods.delete(name, &params);
                (Write::Delete, self.send(request).await)
            }
            PodChange::InPlace(_, patch) => {
                let params = PatchParams::default();
                let request = self.pods.patch(name, &params, &Patch::Strategic(patch));
                (Write::InPlace, self.send(request).await)
            }
        };
        match result {
            Ok(()) => {
                self.record(write, name, Ok(()));
                Ok(Outcome::Written)
            }
            // Gone already, or (by uid, or a patch racing an update) not the pod we meant.
            Err(e) if api_error::is_status(&e, 404) || api_error::is_status(&e, 409) => {
                Ok(Outcome::Moot)
            }
            Err(e) => {
                self.record(write, name, Err(&e));
                Err(e)
            }
        }
    }
}

impl PodControl<'_> {
    /// Sends a write whose answer only matters as success or failure.
    async fn send(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<(), kube::Error> {
        let request = request.map_err(kube::Error::BuildRequest)?;
        self.client.request_text(request).await.map(drop)
    }
}

/// What a create's answer is read for: the pod's name (generated, for most). The rest of the
/// pod is skipped rather than decoded into a typed `Pod`, managedFields and all: the watch brings
/// the pod to the informer anyway, as decoded there once for every controller.
#[derive(serde::Deserialize)]
struct Written {
    metadata: WrittenMeta,
}

#[derive(serde::Deserialize)]
struct WrittenMeta {
    #[serde(default)]
    name: String,
}

#[cfg(test)]
mod tests;
