//! Upstream's `VolumeZone` filter (`pkg/scheduler/framework/plugins/volumezone`): a pod whose bound
//! PersistentVolume carries zone or region labels fits only nodes with a matching label, when the
//! node has any zone or region label at all.

use crate::pod_info::PodInfo;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

/// Upstream's `ErrReasonConflict`.
pub const REASON: &str = "node(s) had no available volume zone";

/// The labels upstream compares, beta ones first.
const TOPOLOGY_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// The zone and region values the pod's bound volumes allow, per label.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumeZones(Vec<(&'static str, BTreeSet<String>)>);

impl VolumeZones {
    /// Upstream's PreFilter: reads the topology labels of the volumes bound to the pod's claims.
    /// Unbound claims of a `WaitForFirstConsumer` class are skipped; anything else missing is an
    /// unresolvable reason, in upstream's words.
    pub fn new(
        pod: &PodInfo,
        claim: impl Fn(&str, &str) -> Option<Arc<PersistentVolumeClaim>>,
        volume: impl Fn(&str) -> Option<Arc<PersistentVolume>>,
        waits_for_consumer: impl Fn(&str) -> Option<bool>,
    ) -> Result<Self, String> {
        let mut zones = Vec::new();
        for name in &pod.claims {
            if name.is_empty() {
                return Err("PersistentVolumeClaim had no name".into());
            }
            let Some(c) = claim(&pod.namespace, name) else {
                return Err(format!("persistentvolumeclaim \"{name}\" not found"));
            };
            let bound = c
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .unwrap_or("");
            if bound.is_empty() {
                let class = claim_class(&c);
                if class.is_empty() {
                    return Err("PersistentVolumeClaim had no pv name and storageClass name".into());
                }
                match waits_for_consumer(class) {
                    None => {
                        return Err(format!("storageclass.storage.k8s.io \"{class}\" not found"));
                    }
                    Some(true) => continue,
                    Some(false) => return Err("PersistentVolume had no name".into()),
                }
            }
            let Some(pv) = volume(bound) else {
                return Err(format!("persistentvolume \"{bound}\" not found"));
            };
            let labels = pv.metadata.labels.as_ref();
            for key in TOPOLOGY_LABELS {
                let Some(value) = labels.and_then(|l| l.get(key)) else {
                    continue;
                };
                // Upstream's `LabelZonesToSet`: `__` separates zones; a value with an empty zone
                // is ignored.
                let set: BTreeSet<String> =
                    value.split("__").map(|z| z.trim().to_string()).collect();
                if !set.contains("") {
                    zones.push((key, set));
                }
            }
        }
        Ok(Self(zones))
    }

    /// The filter: a node with any zone or region label must match every volume's.
    pub fn fits(&self, node_labels: &BTreeMap<String, String>) -> bool {
        if self.0.is_empty() || !TOPOLOGY_LABELS.iter().any(|k| node_labels.contains_key(*k)) {
            return true;
        }
        self.0
            .iter()
            .all(|(key, values)| node_labels.get(*key).is_some_and(|v| values.contains(v)))
    }
}

/// Upstream's `GetPersistentVolumeClaimClass`: the beta annotation wins over the field.
pub fn claim_class(c: &PersistentVolumeClaim) -> &str {
    c.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
        .map(String::as_str)
        .or(c
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref()))
        .unwrap_or("")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::testing;
    use serde_json::json;
    use std::collections::HashMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Upstream's `TestSingleZone` and `TestMultiZone` cases.
    #[test]
    fn volume_zones_as_upstream() {
        let pv = |l: &[(&str, &str)]| {
            let mut pv = PersistentVolume::default();
            pv.metadata.labels = Some(labels(l));
            Arc::new(pv)
        };
        let claim = |class: &str, volume: &str| {
            serde_json::from_value::<PersistentVolumeClaim>(json!({
                "spec": {"storageClassName": class, "volumeName": volume}
            }))
            .map(Arc::new)
            .unwrap()
        };
        let volumes: HashMap<&str, Arc<PersistentVolume>> = [
            ("pv-a", pv(&[("topology.kubernetes.io/zone", "us-west1-a")])),
            (
                "pv-ab",
                pv(&[(
                    "failure-domain.beta.kubernetes.io/zone",
                    "us-west1-a__us-west1-b",
                )]),
            ),
            ("pv-none", pv(&[])),
        ]
        .into();
        let claims: HashMap<&str, Arc<PersistentVolumeClaim>> = [
            ("a", claim("standard", "pv-a")),
            ("ab", claim("standard", "pv-ab")),
            ("none", claim("standard", "pv-none")),
            ("wffc", claim("wffc", "")),
            ("immediate", claim("standard", "")),
            ("classless", claim("", "")),
        ]
        .into();
        let zones = |claim: &str| {
            let p = testing::pod(
                "p",
                json!({}),
                0,
                json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}),
            );
            VolumeZones::new(
                &p,
                |_, n| claims.get(n).cloned(),
                |n| volumes.get(n).cloned(),
                |c| match c {
                    "wffc" => Some(true),
                    "standard" => Some(false),
                    _ => None,
                },
            )
        };
        let zone_a = labels(&[("topology.kubernetes.io/zone", "us-west1-a")]);
        let zone_c = labels(&[("topology.kubernetes.io/zone", "us-west1-c")]);
        let beta_b = labels(&[("failure-domain.beta.kubernetes.io/zone", "us-west1-b")]);
        let unlabelled = labels(&[("kubernetes.io/hostname", "n")]);
        let a = zones("a").unwrap();
        assert!(a.fits(&zone_a));
        assert!(!a.fits(&zone_c));
        assert!(
            !a.fits(&beta_b),
            "a node with only the beta label lacks the GA one"
        );
        assert!(
            a.fits(&unlabelled),
            "a node without zone labels takes any volume"
        );
        let ab = zones("ab").unwrap();
        assert!(ab.fits(&beta_b), "__ separates the zones a volume spans");
        assert!(!ab.fits(&zone_a));
        assert!(zones("none").unwrap().fits(&zone_c));
        assert_eq!(zones("wffc"), Ok(VolumeZones::default()));
        assert_eq!(
            zones("immediate"),
            Err("PersistentVolume had no name".into())
        );
        assert_eq!(
            zones("classless"),
            Err("PersistentVolumeClaim had no pv name and storageClass name".into())
        );
        assert_eq!(
            zones("gone"),
            Err("persistentvolumeclaim \"gone\" not found".into())
        );
    }
}
