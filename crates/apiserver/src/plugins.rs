//! Admission plugins (upstream's `k8s.io/apiserver/pkg/admission`): the one [`Plugin`] trait
//! every plugin implements, and the [`Review`] of a write each one sees. The ordered list they
//! run in is [`crate::admission_chain`].
//!
//! Each plugin sees a [`Review`] (upstream's `admission.Attributes`): who writes, what, and the
//! object before and after. A new plugin implements [`Plugin`] where its logic lives and takes
//! its place in [`crate::admission_chain::CHAIN`]; nothing else calls it.

use crate::{error::ApiResult, registry::Kind, state::ApiServer};
use authz::UserInfo;
use serde_json::Value;

/// What a write does (upstream's `admission.Operation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    /// A new object.
    Create,
    /// A changed object (PUT, PATCH, apply).
    Update,
    /// An object going away.
    Delete,
}

impl Operation {
    /// The name AdmissionReview and webhook rules use.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

/// One write as the admission plugins see it.
pub(crate) struct Review<'a> {
    /// Who writes.
    pub user: &'a UserInfo,
    /// What the write does.
    pub operation: Operation,
    /// The kind as stored.
    pub kind: &'a Kind,
    /// The kind and version the client wrote (differs from `kind` for an older version).
    pub view: &'a Kind,
    /// The object's namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<&'a str>,
    /// The object's name (may be empty on create with `generateName`).
    pub name: &'a str,
    /// The subresource written (`status`, `scale`...), `None` for the main resource.
    pub subresource: Option<&'a str>,
    /// The stored object an update or delete starts from.
    pub old: Option<&'a Value>,
    /// Whether the write is a dry run (webhooks with side effects refuse those).
    pub dry_run: bool,
    /// What validating plugins spent on this write (ResourceQuota's charges): kept once the
    /// object is stored ([`Reserved::keep`]), given back when the write fails and it is dropped.
    pub reserved: Reserved,
    /// Set by a plugin whose mutating phase changed the object although it could not say so
    /// before the write began (a mutating webhook configured while the write was under way):
    /// the chain then prepares and validates the object again, whatever intake decided.
    pub mutated: std::sync::atomic::AtomicBool,
}

impl Review<'_> {
    /// A plugin changed the object (see [`Review::mutated`]).
    pub(crate) fn mark_mutated(&self) {
        self.mutated
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn was_mutated(&self) -> bool {
        self.mutated.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Something a plugin spent on a write before it is stored (upstream's ResourceQuota charges
/// `status.used` in its validating phase): dropped without [`Reservation::keep`], it is given
/// back, so that a write that then fails (the object exists already, the store refuses) costs
/// nothing.
pub(crate) trait Reservation: Send {
    /// The write was stored: the reservation stands.
    fn keep(self: Box<Self>);
}

/// The reservations of one write (see [`Review::reserved`]).
#[derive(Default)]
pub(crate) struct Reserved(std::sync::Mutex<Vec<Box<dyn Reservation>>>);

impl Reserved {
    /// Adds what a plugin spent.
    pub(crate) fn push(&self, r: Box<dyn Reservation>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(r);
    }

    /// The write was stored: every reservation stands.
    pub(crate) fn keep(&self) {
        let held = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        held.into_iter().for_each(|r| r.keep());
    }
}

/// One admission plugin (upstream's `admission.Interface`): it says which writes it handles,
/// may change the object in the mutating phase, and may refuse it in the validating phase.
/// Every write (create, update, patch, apply, delete) reaches every plugin through the one
/// chain ([`crate::admission_chain`]), so that no verb can skip one.
#[async_trait::async_trait]
pub(crate) trait Plugin: Send + Sync {
    /// Upstream's name for the plugin (`--enable-admission-plugins`).
    fn name(&self) -> &'static str;

    /// Whether the plugin acts on this write: its kinds, operations and subresources.
    fn handles(&self, review: &Review<'_>) -> bool;

    /// Whether the mutating phase may change this write's object. Only then does the chain keep
    /// a copy to see what changed (and run the kind's strategy again on it): most writes, a
    /// kubelet's status report or an Event, meet no plugin that changes anything, and copying
    /// every written object cost more than the rest of admission. A plugin whose `admit` can
    /// change the object says so here; every debug build (the test suite) checks that one that
    /// said no changed nothing.
    fn may_mutate(&self, _server: &ApiServer, _review: &Review<'_>) -> bool {
        false
    }

    /// The mutating phase (upstream's `MutationInterface.Admit`): defaults or refuses.
    async fn admit(
        &self,
        _server: &ApiServer,
        _review: &Review<'_>,
        _obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        Ok(Vec::new())
    }

    /// The validating phase (upstream's `ValidationInterface.Validate`): refuses, never changes.
    async fn validate(
        &self,
        _server: &ApiServer,
        _review: &Review<'_>,
        _obj: &Value,
    ) -> ApiResult<Vec<String>> {
        Ok(Vec::new())
    }
}

/// Whether `review` creates a Pod (the main resource): what the pod-defaulting plugins handle.
pub(crate) fn creates_pod(review: &Review<'_>) -> bool {
    review.operation == Operation::Create
        && review.subresource.is_none()
        && review.kind.is("", "Pod")
}

/// Whether `review` creates a subresource whose object is not of the kind: a pod's `eviction`
/// (an Eviction) or a ServiceAccount's `token` (a TokenRequest). NodeRestriction judges these;
/// the webhooks and policies, which describe the object as of `review.kind`, are not sent them
/// yet (upstream sends them with the subresource's own kind).
pub(crate) fn creates_subresource(review: &Review<'_>) -> bool {
    review.operation == Operation::Create && review.subresource.is_some()
}

/// A plugin that defaults or checks new pods alone, synchronously (LimitRanger, Priority,
/// RuntimeClass): its name and what it does to the pod.
pub(crate) struct PodDefaulting {
    pub name: &'static str,
    pub admit: fn(&ApiServer, &Review<'_>, &mut Value) -> ApiResult<()>,
}

#[async_trait::async_trait]
impl Plugin for PodDefaulting {
    fn name(&self) -> &'static str {
        self.name
    }

    fn handles(&self, review: &Review<'_>) -> bool {
        creates_pod(review)
    }

    fn may_mutate(&self, _server: &ApiServer, _review: &Review<'_>) -> bool {
        true
    }

    async fn admit(
        &self,
        server: &ApiServer,
        review: &Review<'_>,
        obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        (self.admit)(server, review, obj).map(|()| Vec::new())
    }
}
