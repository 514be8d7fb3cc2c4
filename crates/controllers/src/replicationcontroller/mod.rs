//! The ReplicationController controller (upstream's replication manager,
//! `pkg/controller/replication`): upstream runs its ReplicaSet controller on RCs through a
//! conversion adapter, treating an RC as an older version of a ReplicaSet. Here the adapter is
//! [`ReplicaOwner`] for [`ReplicationController`], and the controller is the ReplicaSet
//! controller's [`ReplicaManager`] over RCs: the same adoption and release by controller
//! reference, expectations, slow-start creation, deletion ranking, status and events.
//!
//! What differs is only the reading: the selector is a plain map of labels (its `matchLabels`),
//! `spec.replicas` defaults to 1, the status carries `replicas`, `fullyLabeledReplicas`,
//! `readyReplicas`, `availableReplicas`, `observedGeneration` and the `ReplicaFailure`
//! condition, and events come from `replication-controller`, as upstream's.

use crate::replicaset::{ReplicaManager, ReplicaOwner};
use api::selector::{LabelSelector, SelectorError};
use k8s_openapi::{
    api::{
        apps::v1::{ReplicaSetCondition, ReplicaSetStatus},
        core::v1::{
            PodTemplateSpec, ReplicationController, ReplicationControllerCondition,
            ReplicationControllerStatus,
        },
    },
    apimachinery::pkg::apis::meta::v1 as meta,
};

/// How the controller runs: the ReplicaSet controller's settings (upstream's
/// `--concurrent-rc-syncs`, 5, and a burst of 500).
pub use crate::replicaset::Config;

/// The ReplicationController controller.
pub type ReplicationManager = ReplicaManager<ReplicationController>;

impl ReplicaOwner for ReplicationController {
    const CONTROLLER: &'static str = "replicationcontroller";
    const COMPONENT: &'static str = "replication-controller";

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
        // Upstream's conversion: the map becomes `matchLabels`.
        LabelSelector::from_label_selector(&meta::LabelSelector {
            match_labels: self.spec.as_ref().and_then(|s| s.selector.clone()),
            match_expressions: None,
        })
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }

    fn replica_status(&self) -> Option<ReplicaSetStatus> {
        self.status.as_ref().map(to_replica_set_status)
    }

    fn set_replica_status(&mut self, status: ReplicaSetStatus) {
        self.status = Some(from_replica_set_status(status));
    }
}

/// An RC's status in the ReplicaSet's form (upstream's `Convert_v1_ReplicationControllerStatus_To_apps_ReplicaSetStatus`).
fn to_replica_set_status(s: &ReplicationControllerStatus) -> ReplicaSetStatus {
    ReplicaSetStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        conditions: s.conditions.as_ref().map(|cs| {
            cs.iter()
                .map(|c| ReplicaSetCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                })
                .collect()
        }),
        terminating_replicas: None,
    }
}

/// The RC status of a ReplicaSet-form status (`terminatingReplicas` has no RC field).
fn from_replica_set_status(s: ReplicaSetStatus) -> ReplicationControllerStatus {
    ReplicationControllerStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        conditions: s.conditions.map(|cs| {
            cs.into_iter()
                .map(|c| ReplicationControllerCondition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                    last_transition_time: c.last_transition_time,
                })
                .collect()
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rc(v: serde_json::Value) -> ReplicationController {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_spec_reads_as_a_replica_sets() {
        let full = rc(json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": 3, "minReadySeconds": 4, "selector": {"app": "web"},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}}}},
        }));
        assert_eq!((full.replicas(), full.min_ready_seconds()), (3, 4));
        let sel = full.selector().unwrap();
        assert_eq!(sel.to_string(), "app=web");
        let labels = |l: &[(&str, &str)]| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(sel.matches_labels(Some(&labels(&[("app", "web"), ("x", "y")]))));
        assert!(!sel.matches_labels(Some(&labels(&[("app", "db")]))));
        assert!(full.template().is_some());

        // Unset: one replica, and a selector that the controller treats as selecting nothing.
        let bare = rc(json!({"metadata": {"name": "bare"}, "spec": {}}));
        assert_eq!((bare.replicas(), bare.min_ready_seconds()), (1, 0));
        assert!(bare.selector().unwrap().is_empty());
        assert!(bare.template().is_none() && bare.replica_status().is_none());
    }

    #[test]
    fn the_status_round_trips_through_the_replica_set_form() {
        let mut obj = rc(json!({
            "metadata": {"name": "web"},
            "status": {"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 1,
                       "availableReplicas": 1, "observedGeneration": 3,
                       "conditions": [{"type": "ReplicaFailure", "status": "True",
                                       "reason": "FailedCreate", "message": "quota",
                                       "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
        }));
        let before = obj.status.clone();
        let as_rs = obj.replica_status().unwrap();
        assert_eq!(
            (
                as_rs.replicas,
                as_rs.ready_replicas,
                as_rs.observed_generation
            ),
            (2, Some(1), Some(3))
        );
        let cond = &as_rs.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (cond.type_.as_str(), cond.reason.as_deref()),
            ("ReplicaFailure", Some("FailedCreate"))
        );
        obj.set_replica_status(as_rs);
        assert_eq!(obj.status, before);
    }
}
