//! The registry of kinds: everything the API server knows about each kind, in one place.
//!
//! Upstream keeps each kind's rules in `pkg/registry/<group>/<kind>/strategy.go` and its
//! printing in one printer function; here each kind is one [`Kind`] value: its names and scope,
//! subresources, [`Strategy`] (defaulting, validation, what a write to the main resource and to
//! `status` may change, when `metadata.generation` moves, immutable fields, values the server
//! assigns), selectable fields, table columns ([`crate::table::Printer`]), OpenAPI schema and
//! where its objects are stored. Discovery, routing, OpenAPI, tables, the watch cache and
//! admission all read the [`Registry`]; none of them names a kind.
//!
//! # Adding a kind
//!
//! A stored kind with upstream's default behaviour is one entry in its group's `kinds()` list
//! (`core/mod.rs`, `apps/mod.rs`, `batch.rs`, ...):
//!
//! ```ignore
//! Kind::of::<k8s_openapi::api::core::v1::ConfigMap>().short_names(&["cm"]),
//! ```
//!
//! `Kind::of` takes the group, version, kind, plural and scope from the `k8s-openapi` type, and
//! with them the OpenAPI schema and the shape check. Add what differs from the defaults with the
//! builder methods: `.subresources(&[Status])`, `.strategy(Rules::new().defaults(..).validate(..))`
//! or a strategy type of its own (in a file named after the kind, like `apps/deployment.rs`),
//! `.printer(..)` for `kubectl get` columns, `.selectable_fields(..)`. A group seen for the first
//! time needs its module listed in [`builtin`]. Kinds added at run time (CustomResourceDefinitions)
//! go through [`Registry::register`] and are served at once.

mod admissionregistration;
pub mod apiextensions;
pub(crate) mod apiregistration;
mod apps;
mod authentication;
mod authorization;
mod autoscaling;
mod batch;
mod certificates;
pub(crate) mod componentstatus;
pub mod conversion;
mod coordination;
mod core;
mod custom;
mod discovery;
mod events;
mod flowcontrol;
pub(crate) mod kind;
mod networking;
mod node;
mod policy;
mod rbac;
mod scheduling;
mod storage;
pub mod strategy;

pub use core::service::{KUBERNETES_SERVICE_IP, SERVICE_CIDR, kubernetes_service};

pub use conversion::Conversion;
pub use kind::{Kind, Schema, Storage, Subresource};
pub use strategy::{Cluster, DefaultStrategy, Generation, Reset, Rules, Strategy};

use std::sync::{
    Arc, LazyLock, RwLock,
    atomic::{AtomicU64, Ordering},
};

/// The served kinds. Cheap to read; kinds can be added and removed while serving.
pub struct Registry {
    id: u64,
    kinds: RwLock<Arc<Vec<Arc<Kind>>>>,
    revision: AtomicU64,
}

/// Tells registries apart (for documents cached per registry).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Every built-in kind, in discovery order (core first, then groups as upstream lists them).
pub fn builtin() -> Vec<Kind> {
    let mut kinds = Vec::new();
    kinds.extend(core::kinds());
    kinds.extend(componentstatus::kinds());
    kinds.extend(apps::kinds());
    kinds.extend(events::kinds());
    kinds.extend(authentication::kinds());
    kinds.extend(authorization::kinds());
    kinds.extend(autoscaling::kinds());
    kinds.extend(batch::kinds());
    kinds.extend(certificates::kinds());
    kinds.extend(networking::kinds());
    kinds.extend(policy::kinds());
    kinds.extend(rbac::kinds());
    kinds.extend(storage::kinds());
    kinds.extend(admissionregistration::kinds());
    kinds.extend(apiextensions::kinds());
    kinds.extend(scheduling::kinds());
    kinds.extend(coordination::kinds());
    kinds.extend(discovery::kinds());
    kinds.extend(node::kinds());
    kinds.extend(flowcontrol::kinds());
    kinds.extend(apiregistration::kinds());
    kinds
}

/// The objects the API server itself creates when missing, as upstream's does: the system
/// PriorityClasses. (The system namespaces come first; the `kubernetes` Service needs the
/// serving port and is created by whoever binds it, see [`kubernetes_service`].)
pub fn bootstrap_objects() -> Vec<serde_json::Value> {
    scheduling::system_classes()
}

/// The built-in kinds as built once per process, for what is the same in every registry (the
/// OpenAPI component schemas). A registry builds its own: strategies may hold state (a Service
/// allocator's reservations) that belongs to one server.
static BUILTIN: LazyLock<Vec<Arc<Kind>>> =
    LazyLock::new(|| builtin().into_iter().map(Arc::new).collect());

/// The built-in kinds (a shared copy; see [`BUILTIN`]).
pub fn builtin_kinds() -> &'static [Arc<Kind>] {
    &BUILTIN
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry of the built-in kinds.
    pub fn new() -> Self {
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            kinds: RwLock::new(Arc::new(builtin().into_iter().map(Arc::new).collect())),
            revision: AtomicU64::new(1),
        }
    }

    /// This registry's identity, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Every kind, in discovery order.
    pub fn kinds(&self) -> Arc<Vec<Arc<Kind>>> {
        self.kinds.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A number that changes whenever a kind is added or removed (for caches of documents built
    /// from the registry).
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::Acquire)
    }

    /// Adds a kind, replacing one with the same group, version and plural; returns it.
    pub fn register(&self, kind: Kind) -> Arc<Kind> {
        let kind = Arc::new(kind);
        let mut guard = self.kinds.write().unwrap_or_else(|e| e.into_inner());
        let mut next: Vec<Arc<Kind>> = guard
            .iter()
            .filter(|k| {
                !(k.group == kind.group && k.version == kind.version && k.plural == kind.plural)
            })
            .cloned()
            .collect();
        next.push(kind.clone());
        *guard = Arc::new(next);
        self.revision.fetch_add(1, Ordering::AcqRel);
        kind
    }

    /// Removes every version of the resource `plural` in `group` (a deleted CustomResourceDefinition).
    pub fn remove(&self, group: &str, plural: &str) {
        let mut guard = self.kinds.write().unwrap_or_else(|e| e.into_inner());
        let next: Vec<Arc<Kind>> = guard
            .iter()
            .filter(|k| !(k.group == group && k.plural == plural))
            .cloned()
            .collect();
        *guard = Arc::new(next);
        self.revision.fetch_add(1, Ordering::AcqRel);
    }

    /// The kind served at `group`/`version` as `plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Kind>> {
        self.kinds()
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
            .cloned()
    }

    /// The kind named `kind` in `group`, in its first-listed (preferred) version.
    pub fn find_kind(&self, group: &str, kind: &str) -> Option<Arc<Kind>> {
        self.kinds()
            .iter()
            .find(|k| k.group == group && k.kind == kind)
            .cloned()
    }

    /// The kind whose objects are stored under `group`/`plural` (not a view).
    pub fn owner(&self, group: &str, plural: &str) -> Option<Arc<Kind>> {
        self.kinds()
            .iter()
            .find(|k| matches!(k.storage, Storage::Own) && k.group == group && k.plural == plural)
            .cloned()
    }

    /// The kind that stores what `kind` serves: itself, or the owner of the objects it views.
    pub fn storage_of(&self, kind: &Arc<Kind>) -> Arc<Kind> {
        match &kind.storage {
            Storage::Own | Storage::Nowhere => kind.clone(),
            Storage::View { group, plural, .. } => {
                self.owner(group, plural).unwrap_or_else(|| kind.clone())
            }
        }
    }

    /// The group/versions served, in discovery order (core first).
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for k in self.kinds().iter() {
            if !out.iter().any(|(g, v)| *g == k.group && *v == k.version) {
                out.push((k.group.clone(), k.version.clone()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
