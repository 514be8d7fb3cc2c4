//! The resources the server serves, each described once.
//!
//! Routing, discovery, OpenAPI, tables and admission are all driven by this table: adding a
//! resource means adding a [`ResourceDef`] here (and its columns in `table`, its defaults and
//! validation in `api`), never copying handlers.

/// A subresource a resource offers besides its main endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// `/status`: writes only `status`; the main resource ignores `status`.
    Status,
    /// `/scale`: an `autoscaling/v1` `Scale` over `spec.replicas`.
    Scale,
    /// `pods/binding`: assigns a pod to a node (create only).
    Binding,
    /// `pods/eviction`: a policy/v1 `Eviction` that deletes the pod (create only).
    Eviction,
}

impl Subresource {
    /// The path segment, e.g. `status`.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
        }
    }
}

/// One served resource.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group; empty for core.
    pub group: &'static str,
    /// Version, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `Deployment`.
    pub kind: &'static str,
    /// Plural resource name used in URLs, e.g. `deployments`.
    pub plural: &'static str,
    /// Singular name, e.g. `deployment`.
    pub singular: &'static str,
    /// Short names kubectl accepts, e.g. `deploy`.
    pub short_names: &'static [&'static str],
    /// Categories, e.g. `all`.
    pub categories: &'static [&'static str],
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Subresources served.
    pub subresources: &'static [Subresource],
    /// Whether a spec change bumps `metadata.generation` (workloads do; pods, nodes and the rest
    /// only start at 1).
    pub tracks_generation: bool,
    /// Whether deletion is graceful (pods): it sets `deletionTimestamp` first.
    pub graceful_delete: bool,
}

impl ResourceDef {
    /// `apps/v1` or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `DeploymentList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether `sub` is served.
    pub fn has(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// The resource as upstream names it in messages: `deployments.apps`, or `pods` for core.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The kind as upstream names it in messages: `Deployment.apps`, or `Pod` for core.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The store prefix of all objects of this resource: `/registry/{group}/{plural}/`.
    pub fn key_prefix(&self) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        format!("/registry/{group}/{}/", self.plural)
    }

    /// The store key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/{name}", self.key_prefix()),
            _ => format!("{}{name}", self.key_prefix()),
        }
    }
}

use Subresource::{Binding, Eviction, Scale, Status};

/// Every resource the server serves.
pub static RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        categories: &[],
        namespaced: false,
        subresources: &[Status],
        tracks_generation: false,
        graceful_delete: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        categories: &[],
        namespaced: false,
        subresources: &[Status],
        tracks_generation: false,
        graceful_delete: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        categories: &["all"],
        namespaced: true,
        subresources: &[Status, Binding, Eviction],
        tracks_generation: false,
        graceful_delete: true,
    },
    ResourceDef {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        categories: &[],
        namespaced: true,
        subresources: &[],
        tracks_generation: false,
        graceful_delete: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        short_names: &["pvc"],
        categories: &[],
        namespaced: true,
        subresources: &[Status],
        tracks_generation: false,
        graceful_delete: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        short_names: &["pv"],
        categories: &[],
        namespaced: false,
        subresources: &[Status],
        tracks_generation: false,
        graceful_delete: false,
    },
    ResourceDef {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        categories: &["all"],
        namespaced: true,
        subresources: &[Status, Scale],
        tracks_generation: true,
        graceful_delete: false,
    },
    ResourceDef {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        short_names: &["rs"],
        categories: &["all"],
        namespaced: true,
        subresources: &[Status, Scale],
        tracks_generation: true,
        graceful_delete: false,
    },
    ResourceDef {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        short_names: &["sts"],
        categories: &["all"],
        namespaced: true,
        subresources: &[Status, Scale],
        tracks_generation: true,
        graceful_delete: false,
    },
    ResourceDef {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        short_names: &["ds"],
        categories: &["all"],
        namespaced: true,
        subresources: &[Status],
        tracks_generation: true,
        graceful_delete: false,
    },
    ResourceDef {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        short_names: &[],
        categories: &[],
        namespaced: true,
        subresources: &[],
        tracks_generation: false,
        graceful_delete: false,
    },
    ResourceDef {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        short_names: &[],
        categories: &[],
        namespaced: true,
        subresources: &[],
        tracks_generation: false,
        graceful_delete: false,
    },
    ResourceDef {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        short_names: &["sc"],
        categories: &[],
        namespaced: false,
        subresources: &[],
        tracks_generation: false,
        graceful_delete: false,
    },
];

/// Looks a resource up by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Looks a resource up by group and kind.
pub fn find_kind(group: &str, kind: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.kind == kind)
}

/// The group/versions served, in discovery order (core first).
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}
