//! The plain data a rollout is judged on: the workload, its revisions and its pods, reduced to
//! the fields that matter (so the watch-fed cache holds 5,000 pods cheaply and the decisions are
//! tested on hand-written values), and how they are read from API objects.

use crate::cli::workload::Kind;
use jiff::Timestamp;
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, ReplicaSet},
    core::v1::{Event, Node, Pod},
};
use serde_json::Value;
use std::sync::Arc;

/// The label Deployments put on their ReplicaSets and pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The label DaemonSets and StatefulSets put on their pods and ControllerRevisions.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
/// A ReplicaSet's revision number.
pub const DEPLOYMENT_REVISION: &str = "deployment.kubernetes.io/revision";
/// What the change that made a revision was (kubectl's `--record`; rollwright always writes it).
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// On a real cluster, whose API has no `spec.updateStrategy.rollingUpdate.paused` for DaemonSets
/// and StatefulSets, the same switch as an annotation.
pub use controllers::switches::PAUSED as PAUSED_ANNOTATION;

/// A workload's spec and status, as far as a rollout is concerned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadView {
    /// Which of the three kinds.
    pub kind: Option<Kind>,
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID (revisions and pods are matched to it by controller reference).
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// Pods wanted: `spec.replicas` (Deployment, StatefulSet), `status.desiredNumberScheduled`
    /// (DaemonSet).
    pub desired: i32,
    /// Pods in total (`status.replicas`, or `currentNumberScheduled` + misscheduled).
    pub replicas: i32,
    /// Pods on the current template (`updatedReplicas`, `updatedNumberScheduled`).
    pub updated: i32,
    /// Ready pods.
    pub ready: i32,
    /// Available pods.
    pub available: i32,
    /// Rollout paused (`spec.paused`; for the others the rollwright field or annotation).
    pub paused: bool,
    /// The `Progressing` condition says `ProgressDeadlineExceeded` (a Deployment's, or a
    /// DaemonSet's or StatefulSet's under rollwright's progress-deadline annotation).
    pub deadline_exceeded: bool,
    /// Whether the update strategy is RollingUpdate (kubectl reports only those).
    pub rolling: bool,
    /// StatefulSet `rollingUpdate.partition`.
    pub partition: i32,
    /// StatefulSet `status.currentRevision`.
    pub current_revision: Option<String>,
    /// StatefulSet `status.updateRevision`.
    pub update_revision: Option<String>,
    /// `spec.minReadySeconds`.
    pub min_ready_seconds: i32,
    /// `spec.template`, to find the revision that records it.
    pub template: Value,
    /// The automatic rollback on record ([`super::rollback::Rollback::of`]).
    pub rollback: Option<super::rollback::Rollback>,
    /// What holds a paced DaemonSet or StatefulSet rollout back, as its controller last said
    /// (its `RolloutPaced` condition, [`controllers::pacing`]).
    pub paced: Option<controllers::pacing::Hold>,
    /// The disruption budget holding the rollout, as its controller last said (its
    /// `RolloutHeld` condition, [`controllers::disruption_gate`]): "waiting on pdb/NAME (N
    /// disruptions allowed)".
    pub budget_held: Option<String>,
}

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn int32(v: &Value, pointer: &str) -> i32 {
    i32::try_from(int(v, pointer)).unwrap_or(i32::MAX)
}

fn string(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether a DaemonSet or StatefulSet is paused: the rollwright field, or the annotation a real
/// cluster keeps it in.
pub fn workload_paused(obj: &Value) -> bool {
    obj.pointer("/spec/updateStrategy/rollingUpdate/paused")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        || obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(PAUSED_ANNOTATION))
            .and_then(Value::as_str)
            == Some("true")
}

impl WorkloadView {
    /// Reads a workload of `kind` from its JSON.
    pub fn from_json(kind: Kind, obj: &Value) -> WorkloadView {
        let strategy = match kind {
            Kind::Deployment => "/spec/strategy/type",
            Kind::DaemonSet | Kind::StatefulSet => "/spec/updateStrategy/type",
        };
        let rolling = string(obj, strategy).is_none_or(|t| t == "RollingUpdate");
        let replicas_spec = obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .map_or(1, |r| i32::try_from(r).unwrap_or(i32::MAX));
        let mut view = WorkloadView {
            kind: Some(kind),
            name: string(obj, "/metadata/name").unwrap_or_default(),
            namespace: string(obj, "/metadata/namespace").unwrap_or_default(),
            uid: string(obj, "/metadata/uid").unwrap_or_default(),
            generation: int(obj, "/metadata/generation"),
            observed_generation: int(obj, "/status/observedGeneration"),
            rolling,
            min_ready_seconds: int32(obj, "/spec/minReadySeconds"),
            template: obj
                .pointer("/spec/template")
                .map_or(Value::Null, normalize_template),
            ..Default::default()
        };
        // Deployments' `progressDeadlineSeconds`, and rollwright's annotation on the others,
        // set the same condition.
        view.deadline_exceeded = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded");
        match kind {
            Kind::Deployment => {
                view.desired = replicas_spec;
                view.replicas = int32(obj, "/status/replicas");
                view.updated = int32(obj, "/status/updatedReplicas");
                view.ready = int32(obj, "/status/readyReplicas");
                view.available = int32(obj, "/status/availableReplicas");
                view.paused = obj
                    .pointer("/spec/paused")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
            }
            Kind::DaemonSet => {
                view.desired = int32(obj, "/status/desiredNumberScheduled");
                view.replicas = int32(obj, "/status/currentNumberScheduled")
                    + int32(obj, "/status/numberMisscheduled");
                view.updated = int32(obj, "/status/updatedNumberScheduled");
                view.ready = int32(obj, "/status/numberReady");
                view.available = int32(obj, "/status/numberAvailable");
                view.paused = workload_paused(obj);
            }
            Kind::StatefulSet => {
                view.desired = replicas_spec;
                view.replicas = int32(obj, "/status/replicas");
                view.updated = int32(obj, "/status/updatedReplicas");
                view.ready = int32(obj, "/status/readyReplicas");
                view.available = int32(obj, "/status/availableReplicas");
                view.partition = int32(obj, "/spec/updateStrategy/rollingUpdate/partition");
                view.current_revision = string(obj, "/status/currentRevision");
                view.update_revision = string(obj, "/status/updateRevision");
                view.paused = workload_paused(obj);
            }
        }
        view.rollback = super::rollback::Rollback::of(obj);
        view.budget_held = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(controllers::disruption_gate::summary_of)
            .map(str::to_string);
        // Only DaemonSets and StatefulSets are paced; a Deployment's condition of that type
        // would be someone else's.
        if matches!(kind, Kind::DaemonSet | Kind::StatefulSet) {
            view.paced = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find_map(controllers::pacing::Hold::from_condition);
        }
        view
    }

    /// The kind (Deployment when unset, for hand-made test values).
    pub fn kind(&self) -> Kind {
        self.kind.unwrap_or(Kind::Deployment)
    }
}

/// One revision: a ReplicaSet of a Deployment, or a ControllerRevision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RevisionView {
    /// Revision number.
    pub number: i64,
    /// Object name.
    pub name: String,
    /// Object UID (a Deployment's pods name their ReplicaSet by it).
    pub uid: String,
    /// What its pods carry in their revision label (`pod-template-hash` of a ReplicaSet, the
    /// hash of a DaemonSet revision, the name of a StatefulSet revision).
    pub key: String,
    /// `kubernetes.io/change-cause`.
    pub change_cause: Option<String>,
    /// When it was created.
    pub created: Option<Timestamp>,
    /// Its pod template (without the `pod-template-hash` label a ReplicaSet adds).
    pub template: Value,
    /// The controller owning it.
    pub owner_uid: Option<String>,
}

fn created(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<Timestamp> {
    meta.creation_timestamp.as_ref().map(|t| t.0)
}

fn controller_uid(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    api::pod::controller_of(meta).map(|r| r.uid.clone())
}

fn annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

/// A pod template as the typed API writes it, so that templates read from a workload, a
/// ReplicaSet and a ControllerRevision compare equal when they say the same.
pub fn normalize_template(template: &Value) -> Value {
    serde_json::from_value::<k8s_openapi::api::core::v1::PodTemplateSpec>(template.clone())
        .ok()
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| template.clone())
}

/// A pod template without the label its ReplicaSet adds, as kubectl compares and restores it.
pub fn strip_template_hash(mut template: Value) -> Value {
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
    }
    template
}

impl RevisionView {
    /// A Deployment's revision.
    pub fn from_replica_set(rs: &ReplicaSet) -> RevisionView {
        let meta = &rs.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let key = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_TEMPLATE_HASH).cloned())
            .unwrap_or_else(|| name.rsplit('-').next().unwrap_or_default().to_string());
        let template = rs
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .and_then(|t| serde_json::to_value(t).ok())
            .map(strip_template_hash)
            .unwrap_or(Value::Null);
        RevisionView {
            number: annotation(meta, DEPLOYMENT_REVISION)
                .and_then(|r| r.parse().ok())
                .unwrap_or(0),
            name,
            uid: meta.uid.clone().unwrap_or_default(),
            key,
            change_cause: annotation(meta, CHANGE_CAUSE),
            created: created(meta),
            template,
            owner_uid: controller_uid(meta),
        }
    }

    /// A DaemonSet's or StatefulSet's revision.
    pub fn from_controller_revision(kind: Kind, cr: &ControllerRevision) -> RevisionView {
        let meta = &cr.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let key = match kind {
            Kind::StatefulSet => name.clone(),
            _ => meta
                .labels
                .as_ref()
                .and_then(|l| l.get(CONTROLLER_REVISION_HASH).cloned())
                .unwrap_or_else(|| name.rsplit('-').next().unwrap_or_default().to_string()),
        };
        let template = controllers::history::revision_template(cr)
            .map_or(Value::Null, |t| normalize_template(&t));
        RevisionView {
            number: cr.revision,
            name,
            uid: meta.uid.clone().unwrap_or_default(),
            key,
            change_cause: annotation(meta, CHANGE_CAUSE),
            created: created(meta),
            template,
            owner_uid: controller_uid(meta),
        }
    }
}

/// A pod, as far as a rollout is concerned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodView {
    /// Name.
    pub name: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Its revision label (see [`RevisionView::key`]).
    pub revision_key: Option<String>,
    /// Its controller's UID.
    pub owner_uid: Option<String>,
    /// Phase.
    pub phase: String,
    /// When its Ready condition last became True, if it is True.
    pub ready_since: Option<Timestamp>,
    /// Being deleted.
    pub terminating: bool,
    /// Why it is not running well, as `kubectl get pods` shows it: a container's waiting or
    /// terminated reason (`ImagePullBackOff`, `CrashLoopBackOff`), `Unschedulable`, or the
    /// pod's own reason (`Evicted`).
    pub reason: Option<String>,
    /// Restarts of its containers.
    pub restarts: i32,
    /// Its StatefulSet ordinal (from the name).
    pub ordinal: Option<i32>,
}

impl PodView {
    /// Reads a pod; `revision_label` is the label its controller marks revisions with.
    pub fn from_pod(pod: &Pod, revision_label: &str) -> PodView {
        let meta = &pod.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let status = pod.status.as_ref();
        let unschedulable = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False");
        let containers = status.into_iter().flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        });
        let mut restarts = 0;
        let mut container_reason = None;
        for c in containers {
            restarts += c.restart_count;
            if c.ready || container_reason.is_some() {
                continue;
            }
            let state = c.state.as_ref();
            container_reason = state
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.clone())
                .or_else(|| {
                    state
                        .and_then(|s| s.terminated.as_ref())
                        .and_then(|t| t.reason.clone())
                });
        }
        let reason = status
            .and_then(|s| s.reason.clone())
            .or(container_reason)
            .or_else(|| unschedulable.then(|| "Unschedulable".to_string()));
        PodView {
            ordinal: name.rsplit('-').next().and_then(|o| o.parse().ok()),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            revision_key: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(revision_label).cloned()),
            owner_uid: controller_uid(meta),
            phase: api::pod::phase(pod).to_string(),
            ready_since: api::pod::ready_since(pod),
            terminating: meta.deletion_timestamp.is_some(),
            reason,
            restarts,
            name,
        }
    }

    /// Whether it is ready.
    pub fn is_ready(&self) -> bool {
        self.ready_since.is_some()
    }

    /// Whether it has been ready for `min_ready_seconds` at `now`.
    pub fn is_available(&self, min_ready_seconds: i32, now: Timestamp) -> bool {
        self.ready_since.is_some_and(|since| {
            min_ready_seconds <= 0
                || since + jiff::SignedDuration::from_secs(i64::from(min_ready_seconds)) <= now
        })
    }
}

/// A node, for the DaemonSet view.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// Its Ready condition is True.
    pub ready: bool,
}

impl NodeView {
    /// Reads a node.
    pub fn from_node(node: &Node) -> NodeView {
        NodeView {
            name: node.metadata.name.clone().unwrap_or_default(),
            ready: node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
        }
    }
}

/// An event, as the watch view lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventView {
    /// When it last happened.
    pub time: Option<Timestamp>,
    /// `Normal` or `Warning`.
    pub type_: String,
    /// Reason (`SuccessfulCreate`, `BackOff`).
    pub reason: String,
    /// `Kind/name` of the object.
    pub object: String,
    /// The name of the object alone.
    pub object_name: String,
    /// Message.
    pub message: String,
    /// How often it happened.
    pub count: i32,
}

impl EventView {
    /// Reads an event.
    pub fn from_event(e: &Event) -> EventView {
        let time = e
            .last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let object_name = e.involved_object.name.clone().unwrap_or_default();
        EventView {
            time,
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            object: format!(
                "{}/{}",
                e.involved_object
                    .kind
                    .as_deref()
                    .unwrap_or("")
                    .to_lowercase(),
                object_name
            ),
            object_name,
            message: e.message.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1),
        }
    }
}

/// Everything a rollout is judged on at one moment, owned by the workload.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The workload.
    pub workload: WorkloadView,
    /// Its revisions, by ascending number.
    pub revisions: Vec<RevisionView>,
    /// Its pods.
    pub pods: Vec<Arc<PodView>>,
    /// The cluster's nodes (only when asked for).
    pub nodes: Vec<Arc<NodeView>>,
    /// Events about it, its revisions and pods, oldest first (only when asked for).
    pub events: Vec<EventView>,
}

impl Snapshot {
    /// The revision that records the workload's template now, if its controller has made it.
    pub fn current_revision(&self) -> Option<&RevisionView> {
        let w = &self.workload;
        if w.kind() == Kind::StatefulSet
            && w.observed_generation >= w.generation
            && let Some(update) = &w.update_revision
            && let Some(r) = self.revisions.iter().find(|r| &r.name == update)
        {
            return Some(r);
        }
        let template = match w.kind() {
            Kind::Deployment => strip_template_hash(w.template.clone()),
            _ => w.template.clone(),
        };
        self.revisions.iter().rev().find(|r| r.template == template)
    }

    /// The revision with key `key`.
    pub fn revision_by_key(&self, key: &str) -> Option<&RevisionView> {
        self.revisions.iter().find(|r| r.key == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_show_the_reason_kubectl_shows() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-7c9-xk2p9", "labels": {"pod-template-hash": "7c9"}},
            "spec": {"nodeName": "node-12", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "c", "image": "x",
                "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}
        }))
        .expect("pod");
        let v = PodView::from_pod(&pod, POD_TEMPLATE_HASH);
        assert_eq!(v.reason.as_deref(), Some("ImagePullBackOff"));
        assert_eq!(v.node.as_deref(), Some("node-12"));
        assert_eq!(v.revision_key.as_deref(), Some("7c9"));
        assert!(!v.is_ready());

        let unscheduled: Pod = serde_json::from_value(json!({
            "metadata": {"name": "db-3"},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }))
        .expect("pod");
        let v = PodView::from_pod(&unscheduled, CONTROLLER_REVISION_HASH);
        assert_eq!(v.reason.as_deref(), Some("Unschedulable"));
        assert_eq!(v.ordinal, Some(3));
        assert_eq!(v.node, None);
    }

    #[test]
    fn availability_counts_min_ready_seconds() {
        let since: Timestamp = "2025-01-01T00:00:00Z".parse().expect("time");
        let pod = PodView {
            ready_since: Some(since),
            ..Default::default()
        };
        let at = |s: i64| since + jiff::SignedDuration::from_secs(s);
        assert!(pod.is_available(0, at(0)));
        assert!(!pod.is_available(10, at(9)));
        assert!(pod.is_available(10, at(10)));
        assert!(!PodView::default().is_available(0, at(0)));
    }

    #[test]
    fn paused_by_field_or_annotation() {
        assert!(workload_paused(
            &json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": true}}}})
        ));
        assert!(workload_paused(
            &json!({"metadata": {"annotations": {"rollwright.io/paused": "true"}}})
        ));
        assert!(!workload_paused(&json!({"spec": {}})));
    }

    #[test]
    fn the_current_revision_records_the_template() {
        let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "b"}]}});
        let mut old = template.clone();
        old["spec"]["containers"][0]["image"] = json!("a");
        let snap = Snapshot {
            workload: WorkloadView {
                kind: Some(Kind::Deployment),
                template: template.clone(),
                ..Default::default()
            },
            revisions: vec![
                RevisionView {
                    number: 1,
                    key: "a".into(),
                    template: old,
                    ..Default::default()
                },
                RevisionView {
                    number: 2,
                    key: "b".into(),
                    template,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(snap.current_revision().map(|r| r.number), Some(2));
    }
}
