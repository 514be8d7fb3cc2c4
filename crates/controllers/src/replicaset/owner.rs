//! What the replica controller needs of the kind it keeps pods for. Upstream runs its ReplicaSet
//! controller on ReplicationControllers too, through a conversion adapter that treats an RC as
//! an older version of a ReplicaSet (`pkg/controller/replication`); [`ReplicaOwner`] is that
//! adapter, so both kinds share every line of the sync, the event handlers and the expectations,
//! and differ only in how their spec and status are read and written.

use api::selector::{LabelSelector, SelectorError};
use informer::Object;
use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        apps::v1::{ReplicaSet, ReplicaSetStatus},
        core::v1::PodTemplateSpec,
    },
};
use kube::Resource;
use serde::Serialize;

/// A kind whose objects keep `replicas` pods matching a selector: ReplicaSets, and
/// ReplicationControllers (in `crate::replicationcontroller`).
pub trait ReplicaOwner:
    Object + Resource<DynamicType = (), Scope = NamespaceResourceScope> + Serialize
{
    /// The controller's name, as `--controllers` takes it (upstream's).
    const CONTROLLER: &'static str;
    /// The source of the events it records (upstream's component name).
    const COMPONENT: &'static str;

    /// `spec.replicas` (the server defaults it to 1; 1 if it is unset all the same).
    fn replicas(&self) -> i32;

    /// `spec.minReadySeconds`.
    fn min_ready_seconds(&self) -> i32;

    /// The pods it selects. An empty selector selects nothing here (validation forbids it).
    fn selector(&self) -> Result<LabelSelector, SelectorError>;

    /// The template its pods are made from.
    fn template(&self) -> Option<&PodTemplateSpec>;

    /// Its status in the ReplicaSet's form, which the status computation works on.
    fn replica_status(&self) -> Option<ReplicaSetStatus>;

    /// Sets its status from the ReplicaSet's form.
    fn set_replica_status(&mut self, status: ReplicaSetStatus);
}

impl ReplicaOwner for ReplicaSet {
    const CONTROLLER: &'static str = "replicaset";
    const COMPONENT: &'static str = "replicaset-controller";

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn selector(&self) -> Result<LabelSelector, SelectorError> {
        match &self.spec {
            Some(spec) => LabelSelector::from_label_selector(&spec.selector),
            None => Ok(LabelSelector::default()),
        }
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }

    fn replica_status(&self) -> Option<ReplicaSetStatus> {
        self.status.clone()
    }

    fn set_replica_status(&mut self, status: ReplicaSetStatus) {
        self.status = Some(status);
    }
}
