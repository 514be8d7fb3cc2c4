//! The StatefulSet controller, as upstream's `pkg/controller/statefulset`: pods with a stable
//! identity (`<set>-<ordinal>`) and stable storage (a claim per template and ordinal), created
//! and deleted in order or in parallel, rolled from the highest ordinal down to the partition
//! within `maxUnavailable` (seed 003), in place when only images change (seed 004), with the
//! template history in ControllerRevisions ([`crate::history`]).
//!
//! Structure, like the Deployment's:
//! - this file dispatches: it reads the set ([`Set`]) and turns one sync's decisions into API
//!   calls;
//! - [`pods`]: identity and the order of creation and deletion (the scaling pass);
//! - [`update`]: the rolling update (partition, maxUnavailable, in-place);
//! - [`status`]: the counts and revisions in `status`;
//! - [`volumes`]: claims from `volumeClaimTemplates` and their retention policy.
//!
//! Beyond upstream: in-place updates, pausing a rollout ([`PAUSED`]), and replacing a pod stuck
//! not ready on an old revision once the template moves on (upstream #67250).

pub mod pods;
pub mod status;
pub mod update;
pub mod volumes;

use crate::owner_index::{Key, key_of};
use api::selector::LabelSelector;
use k8s_openapi::api::apps::v1::StatefulSet;
use pods::Ordinals;
use serde_json::Value;

/// `"true"` pauses the set's rolling update on a real cluster, whose API lacks rollwright's
/// `spec.updateStrategy.rollingUpdate.paused`: no pod of an old revision is replaced while
/// paused; missing ordinals are still created.
pub const PAUSED: &str = "rollwright.io/paused";
/// `InPlaceIfPossible` here (or in `spec.updateStrategy.rollingUpdate.podUpdatePolicy`) lets a
/// rolling update that changes only images patch pods instead of recreating them.
pub use crate::daemonset::POD_UPDATE_POLICY;

/// A StatefulSet as the controller keeps it: the typed object plus what is derived from it once
/// per change.
#[derive(Clone, Debug)]
pub struct Set {
    /// The object.
    pub sts: StatefulSet,
    /// Its selector, parsed.
    pub selector: LabelSelector,
    /// Whether image-only updates patch pods in place.
    pub in_place: bool,
    /// Whether its rolling update is paused.
    pub paused: bool,
}

impl Set {
    /// Reads a StatefulSet from its JSON, keeping the rollwright fields the typed API lacks.
    pub fn from_json(value: Value) -> Result<Self, String> {
        let rolling = value.pointer("/spec/updateStrategy/rollingUpdate");
        let annotation = |name: &str| {
            value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
        };
        let policy = rolling
            .and_then(|r| r.get("podUpdatePolicy"))
            .and_then(Value::as_str);
        // The API server defaults the field to `Recreate`, so either saying InPlaceIfPossible
        // opts in.
        let in_place = [policy, annotation(POD_UPDATE_POLICY)].contains(&Some("InPlaceIfPossible"));
        let paused = rolling
            .and_then(|r| r.get("paused"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
            || annotation(PAUSED) == Some("true");
        let sts: StatefulSet = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let selector = LabelSelector::from_label_selector(
            &sts.spec
                .as_ref()
                .map(|s| s.selector.clone())
                .unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Self {
            sts,
            selector,
            in_place,
            paused,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> Key {
        key_of(&self.sts)
    }

    /// The set's name.
    pub fn name(&self) -> &str {
        self.sts.metadata.name.as_deref().unwrap_or("")
    }

    /// The set's uid.
    pub fn uid(&self) -> &str {
        self.sts.metadata.uid.as_deref().unwrap_or("")
    }

    /// The ordinals it keeps.
    pub fn ordinals(&self) -> Ordinals {
        let spec = self.sts.spec.as_ref();
        Ordinals {
            start: spec
                .and_then(|s| s.ordinals.as_ref())
                .and_then(|o| o.start)
                .unwrap_or(0)
                .max(0),
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1).max(0),
        }
    }

    /// `OrderedReady` (the default) rather than `Parallel`.
    pub fn ordered(&self) -> bool {
        self.sts
            .spec
            .as_ref()
            .and_then(|s| s.pod_management_policy.as_deref())
            != Some("Parallel")
    }

    /// `RollingUpdate` (the default) rather than `OnDelete`.
    pub fn rolling(&self) -> bool {
        self.sts
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate")
    }

    /// The lowest ordinal a rolling update may replace: `start + partition`.
    pub fn partition_ordinal(&self) -> i32 {
        let partition = self
            .sts
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0)
            .max(0);
        self.ordinals().start.saturating_add(partition)
    }

    /// `maxUnavailable` resolved against `replicas` ([`update::max_unavailable`]).
    pub fn max_unavailable(&self) -> Result<i32, api::intstr::IntOrPercentError> {
        let value = self
            .sts
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.max_unavailable.as_ref())
            .and_then(|v| serde_json::to_value(v).ok());
        update::max_unavailable(value.as_ref(), self.ordinals().replicas)
    }

    /// `minReadySeconds`.
    pub fn min_ready_seconds(&self) -> i32 {
        self.sts
            .spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    /// Whether a rolling update may replace pods of old revisions now.
    pub fn replaces_old_pods(&self) -> bool {
        self.rolling() && !self.paused
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(spec: Value, annotations: Value) -> Set {
        let mut full = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "annotations": annotations},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "serviceName": "web",
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut full["spec"], spec) {
            base.extend(extra);
        }
        Set::from_json(full).unwrap()
    }

    #[test]
    fn reads_policy_strategy_and_the_rollwright_switches() {
        let plain = set(json!({}), json!({}));
        assert!(plain.ordered() && plain.rolling() && !plain.in_place && !plain.paused);
        assert_eq!(
            plain.ordinals(),
            Ordinals {
                start: 0,
                replicas: 1
            }
        );
        assert_eq!(plain.partition_ordinal(), 0);
        assert_eq!(plain.max_unavailable().unwrap(), 1);

        let s = set(
            json!({"replicas": 10, "podManagementPolicy": "Parallel", "ordinals": {"start": 5},
                   "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                       "partition": 3, "maxUnavailable": "25%", "podUpdatePolicy": "InPlaceIfPossible", "paused": true}}}),
            json!({}),
        );
        assert!(!s.ordered() && s.in_place && s.paused && !s.replaces_old_pods());
        assert_eq!(
            s.ordinals(),
            Ordinals {
                start: 5,
                replicas: 10
            }
        );
        assert_eq!(s.partition_ordinal(), 8);
        assert_eq!(s.max_unavailable().unwrap(), 2);

        let annotated = set(
            json!({"updateStrategy": {"type": "OnDelete"}}),
            json!({PAUSED: "true", POD_UPDATE_POLICY: "InPlaceIfPossible"}),
        );
        assert!(annotated.paused && annotated.in_place && !annotated.rolling());
        let defaulted = set(
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "Recreate"}}}),
            json!({POD_UPDATE_POLICY: "InPlaceIfPossible"}),
        );
        assert!(defaulted.in_place);
    }
}
