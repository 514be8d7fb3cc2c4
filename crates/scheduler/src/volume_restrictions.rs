//! Upstream's `VolumeRestrictions` filter (`pkg/scheduler/framework/plugins/volumerestrictions`):
//! a node where another pod mounts the same GCE PD, AWS EBS volume, iSCSI IQN or RBD image (unless
//! both mount it read-only, EBS never) has `no available disk`; and a pod whose
//! `ReadWriteOncePod` claim any other pod already uses fits nowhere.
//!
//! The inline disks of the pods on a node are kept in its [`crate::node_info::Usage`], so the
//! check looks only at that node's disks and only for pods that mount such a disk themselves.
//! Claims in use are counted cluster-wide in the [`crate::cache::Cache`], as upstream's
//! `IsPVCUsedByPods`.

use crate::{cache::Cache, disk::Disk, pod_info::PodInfo};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use std::{collections::BTreeSet, sync::Arc};

/// Upstream's `ErrReasonDiskConflict`.
pub const REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Upstream's `ErrReasonReadWriteOncePodConflict`.
pub const REASON_READ_WRITE_ONCE_POD: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

/// `VolumeRestrictions`' disk check: none of the pod's disks may conflict with one on the node.
pub fn disks_fit(want: &[Disk], on_node: &[Disk]) -> bool {
    want.iter().all(|d| !on_node.iter().any(|e| d.conflicts(e)))
}

/// What the PreFilter found about the pod's `ReadWriteOncePod` claims: which they are and how
/// many uses of them by other pods exist, updated as preemption takes pods away.
#[derive(Clone, Debug, Default)]
pub struct ReadWriteOncePod {
    namespace: String,
    claims: BTreeSet<String>,
    in_use: i64,
}

impl ReadWriteOncePod {
    /// Finds the pod's claims with the `ReadWriteOncePod` access mode and counts the other pods
    /// that use them. `claim` looks a claim up by namespace and name; a missing claim is the
    /// PreFilter's `persistentvolumeclaim "<name>" not found`.
    pub fn new(
        pod: &PodInfo,
        cache: &Cache,
        claim: impl Fn(&str, &str) -> Option<Arc<PersistentVolumeClaim>>,
    ) -> Result<Self, String> {
        let mut claims = BTreeSet::new();
        for name in &pod.claims {
            let Some(c) = claim(&pod.namespace, name) else {
                return Err(format!("persistentvolumeclaim \"{name}\" not found"));
            };
            let once = c
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.as_ref())
                .is_some_and(|m| m.iter().any(|m| m == "ReadWriteOncePod"));
            if once {
                claims.insert(name.clone());
            }
        }
        let in_use = claims
            .iter()
            .filter(|c| cache.claim_in_use(&pod.namespace, c))
            .count() as i64;
        Ok(Self {
            namespace: pod.namespace.clone(),
            claims,
            in_use,
        })
    }

    /// Takes `existing` out of the count (`delta` -1) or puts it back (+1).
    pub fn update(&mut self, existing: &PodInfo, delta: i64) {
        if self.claims.is_empty() || existing.namespace != self.namespace {
            return;
        }
        let uses = existing
            .claims
            .iter()
            .filter(|c| self.claims.contains(*c))
            .count() as i64;
        self.in_use += delta * uses;
    }

    /// Whether another pod holds one of the claims.
    pub fn conflicts(&self) -> bool {
        self.in_use > 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::{disk::disks, testing};
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodSpec};
    use serde_json::json;
    use std::collections::HashMap;

    fn spec(volumes: serde_json::Value) -> PodSpec {
        serde_json::from_value(json!({"containers": [], "volumes": volumes})).unwrap()
    }

    /// Upstream's `TestGCEDiskConflicts`, `TestAWSDiskConflicts`, `TestRBDDiskConflicts` and
    /// `TestISCSIDiskConflicts`.
    #[test]
    fn disk_conflicts_as_upstream() {
        let gce = |name: &str, ro: bool| json!({"name": "v", "gcePersistentDisk": {"pdName": name, "readOnly": ro}});
        let ebs = |id: &str| json!({"name": "v", "awsElasticBlockStore": {"volumeID": id}});
        let iscsi = |iqn: &str, ro: bool| json!({"name": "v", "iscsi": {"targetPortal": "p", "iqn": iqn, "lun": 0, "readOnly": ro}});
        let rbd = |mons: &[&str], image: &str| json!({"name": "v", "rbd": {"monitors": mons, "pool": "foo", "image": image}});
        let cases = [
            ("gce same", gce("foo", false), gce("foo", false), false),
            ("gce other", gce("foo", false), gce("bar", false), true),
            (
                "gce both read-only",
                gce("foo", true),
                gce("foo", true),
                true,
            ),
            (
                "gce one read-only",
                gce("foo", true),
                gce("foo", false),
                false,
            ),
            ("ebs same", ebs("foo"), ebs("foo"), false),
            ("ebs other", ebs("foo"), ebs("bar"), true),
            ("iscsi same", iscsi("a", false), iscsi("a", false), false),
            ("iscsi read-only", iscsi("a", true), iscsi("a", true), true),
            (
                "rbd overlapping monitors",
                rbd(&["a", "b"], "i"),
                rbd(&["b", "c"], "i"),
                false,
            ),
            (
                "rbd disjoint monitors",
                rbd(&["a"], "i"),
                rbd(&["c"], "i"),
                true,
            ),
            ("rbd other image", rbd(&["a"], "i"), rbd(&["a"], "j"), true),
            ("different kinds", gce("foo", false), ebs("foo"), true),
        ];
        for (name, want, existing, fits) in cases {
            let (want, existing) = (disks(&spec(json!([want]))), disks(&spec(json!([existing]))));
            assert_eq!(disks_fit(&want, &existing), fits, "{name}");
        }
    }

    #[test]
    fn read_write_once_pod_claims_are_taken_cluster_wide() {
        let claim = |modes: &[&str]| {
            Arc::new(PersistentVolumeClaim {
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let claims: HashMap<&str, Arc<PersistentVolumeClaim>> = [
            ("once", claim(&["ReadWriteOncePod"])),
            ("shared", claim(&["ReadWriteOnce"])),
        ]
        .into();
        let lookup = |_: &str, n: &str| claims.get(n).cloned();
        let mount = |name: &str, claim: &str| {
            testing::pod(
                name,
                json!({}),
                100,
                json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}),
            )
        };
        let holder = mount("holder", "once");
        let sharer = mount("sharer", "shared");
        let c = testing::cache(
            vec![testing::node("a", "z"), testing::node("b", "z")],
            &[(&holder, "a"), (&sharer, "a")],
        );
        let mut second = ReadWriteOncePod::new(&mount("second", "once"), &c, lookup).unwrap();
        assert!(second.conflicts());
        second.update(&holder, -1);
        assert!(!second.conflicts(), "preempting the holder frees the claim");
        let shared = ReadWriteOncePod::new(&mount("third", "shared"), &c, lookup).unwrap();
        assert!(!shared.conflicts());
        assert_eq!(
            ReadWriteOncePod::new(&mount("lost", "missing"), &c, lookup).err(),
            Some("persistentvolumeclaim \"missing\" not found".to_string())
        );
    }
}
