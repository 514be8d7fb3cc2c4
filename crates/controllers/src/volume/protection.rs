//! Storage object in-use protection (upstream's `kubernetes.io/pvc-protection` and
//! `kubernetes.io/pv-protection` finalizers, `pkg/controller/volume/pvcprotection` and
//! `pvprotection`): a claim carries its finalizer while it lives, and once deleted loses it only
//! when no pod that may still run mounts it, so deleting a claim under a running pod waits for the
//! pod; a volume likewise while it is bound. Upstream's API server adds both finalizers at
//! creation (the StorageObjectInUseProtection admission plugin), so on a real cluster these
//! controllers must be the ones to remove them, or a deleted volume stays for ever.

use k8s_openapi::{
    Metadata,
    api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

/// The finalizer that holds a claim while a pod uses it.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer that holds a volume while a claim is bound to it.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The claim names a pod mounts.
pub fn claims_of(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
}

/// Whether the pod may still use its volumes: it has not terminated (a terminating pod still
/// runs until its containers stop).
pub fn may_use_volumes(pod: &Pod) -> bool {
    !matches!(api::pod::phase(pod), "Succeeded" | "Failed")
}

/// The finalizers the claim should carry, or `None` if it has them. `in_use`: a pod of the
/// claim's namespace that [`may_use_volumes`] mounts it.
pub fn finalizers(claim: &PersistentVolumeClaim, in_use: bool) -> Option<Vec<String>> {
    protect(claim.metadata(), PVC_PROTECTION, in_use)
}

/// The finalizers the volume should carry, or `None` if it has them: upstream counts a volume in
/// use while its phase is `Bound`.
pub fn volume_finalizers(volume: &PersistentVolume) -> Option<Vec<String>> {
    let bound = volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Bound");
    protect(volume.metadata(), PV_PROTECTION, bound)
}

/// `finalizer` added to a live object, removed from a deleted one no longer `in_use`.
fn protect(meta: &ObjectMeta, finalizer: &str, in_use: bool) -> Option<Vec<String>> {
    let current = meta.finalizers.as_deref().unwrap_or_default();
    let has = current.iter().any(|f| f == finalizer);
    let deleting = meta.deletion_timestamp.is_some();
    if !deleting && !has {
        let mut f = current.to_vec();
        f.push(finalizer.into());
        return Some(f);
    }
    if deleting && has && !in_use {
        return Some(
            current
                .iter()
                .filter(|f| *f != finalizer)
                .cloned()
                .collect(),
        );
    }
    None
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn claim(finalizers: &[&str], deleting: bool) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                finalizers: Some(finalizers.iter().map(|s| s.to_string()).collect()),
                deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_finalizer_comes_and_goes() {
        let p = PVC_PROTECTION;
        // (finalizers, deleting, in use, want)
        let cases: Vec<(Vec<&str>, bool, bool, Option<Vec<&str>>)> = vec![
            (vec![], false, false, Some(vec![p])),
            (vec!["other"], false, true, Some(vec!["other", p])),
            (vec![p], false, true, None),
            (vec![p], true, true, None),
            (vec!["other", p], true, false, Some(vec!["other"])),
            (vec![], true, false, None),
        ];
        for (f, deleting, in_use, want) in cases {
            let want = want.map(|v| v.into_iter().map(str::to_string).collect::<Vec<_>>());
            assert_eq!(
                finalizers(&claim(&f, deleting), in_use),
                want,
                "{f:?} {deleting} {in_use}"
            );
        }
    }

    #[test]
    fn a_deleted_volume_keeps_its_finalizer_only_while_bound() {
        let volume = |deleting: bool, phase: &str| PersistentVolume {
            metadata: claim(&[PV_PROTECTION], deleting).metadata,
            status: Some(k8s_openapi::api::core::v1::PersistentVolumeStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(volume_finalizers(&volume(false, "Bound")), None);
        assert_eq!(volume_finalizers(&volume(true, "Bound")), None);
        assert_eq!(volume_finalizers(&volume(true, "Released")), Some(vec![]));
        let mut fresh = volume(false, "Available");
        fresh.metadata.finalizers = None;
        assert_eq!(
            volume_finalizers(&fresh),
            Some(vec![PV_PROTECTION.to_string()])
        );
    }
}
