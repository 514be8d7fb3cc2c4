//! Binding claims and volumes both ways, as upstream's PersistentVolume controller
//! (`pkg/controller/volume/persistentvolume`): a claim is bound when its `spec.volumeName` names
//! a volume whose `claimRef` names the claim (by uid); then both report phase `Bound`. A volume
//! whose claim is gone is `Released`, and deleted if its reclaim policy says `Delete`.
//!
//! The decisions are pure ([`claim_step`], [`volume_step`]); the controller applies them one
//! write at a time and lets the resulting watch events bring it back.

use super::class::{SIMULATED_PROVISIONER, waits_for_first_consumer};
use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::StorageClass,
};

/// Set on a claim once it is bound.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a claim the controller (not the user) bound.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The provisioner a claim waits for.
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// Its beta spelling, still written upstream.
pub const STORAGE_PROVISIONER_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The node the scheduler chose for the first pod of a `WaitForFirstConsumer` claim.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The class a claim names the pre-1.6 way; upstream still reads it before `storageClassName`.
pub const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// What a claim needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimStep {
    /// Nothing.
    Nothing,
    /// It names no class: give it the default one (upstream's retroactive default class).
    SetClass(String),
    /// Provision its volume, pinned to this node if any.
    Provision(Option<String>),
    /// A volume claims it: point `spec.volumeName` at it.
    Bind(String),
    /// It is bound: report phase `Bound` with the volume's capacity.
    MarkBound,
    /// Its bound volume is gone: report phase `Lost`.
    MarkLost,
    /// Its class's provisioner is not rollwright's: mark the claim for that provisioner and say
    /// so (upstream's `provisionClaimOperationExternal`).
    AwaitExternal(String),
    /// It waits: for a pod to use it, or for a class rollwright does not have.
    Wait(&'static str),
}

fn phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn annotation<'a>(claim: &'a PersistentVolumeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The class `claim` asks for, as upstream's `GetPersistentVolumeClaimClass` and
/// `PersistentVolumeClaimHasClass` read it: the beta annotation first (even empty), then
/// `spec.storageClassName`; `None` when it names none, which is when the default class applies.
pub fn claim_class(claim: &PersistentVolumeClaim) -> Option<&str> {
    annotation(claim, BETA_STORAGE_CLASS).or_else(|| {
        claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref())
    })
}

/// Whether `volume`'s `claimRef` names `claim` (by uid when the reference has one).
pub fn claims(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.name == claim.metadata.name
        && r.namespace == claim.metadata.namespace
        && r.uid
            .as_deref()
            .is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref())
}

/// The next step for `claim`. `class` is the class it names (if it exists), `default` the
/// default class's name, `volume` the volume it names in `spec.volumeName` or, if none, one
/// whose `claimRef` names it.
pub fn claim_step(
    claim: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
    default: Option<&str>,
    volume: Option<&PersistentVolume>,
) -> ClaimStep {
    if claim.metadata.deletion_timestamp.is_some() {
        return ClaimStep::Nothing;
    }
    let spec = claim.spec.as_ref();
    let bound_to = spec
        .and_then(|s| s.volume_name.as_deref())
        .filter(|n| !n.is_empty());
    if let Some(name) = bound_to {
        return match volume.filter(|v| v.metadata.name.as_deref() == Some(name)) {
            Some(v) if claims(v, claim) => {
                if phase(claim) == "Bound" {
                    ClaimStep::Nothing
                } else {
                    ClaimStep::MarkBound
                }
            }
            // Pre-bound by the user to a volume not (yet) claiming it: the volume side binds.
            Some(_) => ClaimStep::Wait("VolumeMismatch"),
            None if annotation(claim, BIND_COMPLETED).is_some() => {
                if phase(claim) == "Lost" {
                    ClaimStep::Nothing
                } else {
                    ClaimStep::MarkLost
                }
            }
            None => ClaimStep::Wait("VolumeMissing"),
        };
    }
    if let Some(v) = volume.filter(|v| claims(v, claim)) {
        return ClaimStep::Bind(v.metadata.name.clone().unwrap_or_default());
    }
    let Some(class_name) = claim_class(claim) else {
        return match default {
            Some(d) => ClaimStep::SetClass(d.to_string()),
            None => ClaimStep::Wait("NoDefaultClass"),
        };
    };
    if class_name.is_empty() {
        // `""` asks for a volume of no class: only a pre-made one can satisfy it.
        return ClaimStep::Wait("FailedBinding");
    }
    let Some(class) = class else {
        return ClaimStep::Wait("ProvisioningFailed");
    };
    // Upstream's syncUnboundClaim waits for the first consumer before it looks at who
    // provisions, whoever that is.
    let node = annotation(claim, SELECTED_NODE);
    let delayed = waits_for_first_consumer(class);
    if delayed && node.is_none() {
        return ClaimStep::Wait("WaitForFirstConsumer");
    }
    if class.provisioner != SIMULATED_PROVISIONER {
        return ClaimStep::AwaitExternal(class.provisioner.clone());
    }
    ClaimStep::Provision(node.filter(|_| delayed).map(str::to_string))
}

/// What a volume needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeStep {
    /// Nothing.
    Nothing,
    /// Report this phase.
    MarkPhase(&'static str),
    /// Take the claim that names it in `spec.volumeName` (a pre-bound claim).
    ClaimBy(usize),
    /// Its claim is gone and its reclaim policy is `Delete`.
    Delete,
}

/// The next step for `volume`. `claim` is the claim its `claimRef` names, if that exists
/// (whatever its uid); `waiting` the claims that name it in `spec.volumeName` while it has no
/// claim (their index is returned by [`VolumeStep::ClaimBy`]).
pub fn volume_step(
    volume: &PersistentVolume,
    claim: Option<&PersistentVolumeClaim>,
    waiting: &[&PersistentVolumeClaim],
) -> VolumeStep {
    if volume.metadata.deletion_timestamp.is_some() {
        return VolumeStep::Nothing;
    }
    let spec = volume.spec.as_ref();
    let current = volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    let mark = |p: &'static str| {
        if current == p {
            VolumeStep::Nothing
        } else {
            VolumeStep::MarkPhase(p)
        }
    };
    let Some(_) = spec.and_then(|s| s.claim_ref.as_ref()) else {
        if let Some(i) = waiting
            .iter()
            .position(|c| c.metadata.deletion_timestamp.is_none())
        {
            return VolumeStep::ClaimBy(i);
        }
        return mark("Available");
    };
    match claim.filter(|c| claims(volume, c)) {
        Some(c) => {
            let name = volume.metadata.name.as_deref();
            if c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == name {
                mark("Bound")
            } else {
                mark("Available")
            }
        }
        // As upstream's binder: a volume whose claim is gone is Released first, then reclaimed,
        // so the pv-protection finalizer (held while Bound) lets the deleted volume go.
        None if !matches!(current, "Released" | "Failed") => VolumeStep::MarkPhase("Released"),
        None => {
            let policy = spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
            if policy == Some("Delete") && current == "Released" {
                VolumeStep::Delete
            } else {
                VolumeStep::Nothing
            }
        }
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
    use k8s_openapi::{
        api::core::v1::{
            ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
            PersistentVolumeSpec, PersistentVolumeStatus,
        },
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    };

    fn claim(
        class: Option<&str>,
        volume: Option<&str>,
        phase: &str,
        annotations: &[(&str, &str)],
    ) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("ns".into()),
                uid: Some("c1".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: class.map(str::to_string),
                volume_name: volume.map(str::to_string),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    fn class(provisioner: &str, wffc: bool) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some("standard".into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            volume_binding_mode: Some(
                if wffc {
                    "WaitForFirstConsumer"
                } else {
                    "Immediate"
                }
                .into(),
            ),
            ..Default::default()
        }
    }

    fn volume(claim_uid: Option<&str>, policy: &str, phase: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pvc-c1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                claim_ref: claim_uid.map(|u| ObjectReference {
                    name: Some("data".into()),
                    namespace: Some("ns".into()),
                    uid: Some(u.into()),
                    ..Default::default()
                }),
                persistent_volume_reclaim_policy: Some(policy.into()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn claims_get_a_class_a_volume_and_a_phase() {
        use ClaimStep::*;
        let ours = class(SIMULATED_PROVISIONER, true);
        let immediate = class(SIMULATED_PROVISIONER, false);
        let external = class("ebs.csi.aws.com", false);
        let external_wffc = class("ebs.csi.aws.com", true);
        let v = volume(Some("c1"), "Delete", "Available");
        let other = volume(Some("c2"), "Delete", "Bound");
        let node = [(SELECTED_NODE, "node-1")];
        let done = [(BIND_COMPLETED, "yes")];
        let cases: Vec<(
            &str,
            PersistentVolumeClaim,
            Option<&StorageClass>,
            Option<&str>,
            Option<&PersistentVolume>,
            ClaimStep,
        )> = vec![
            (
                "no class: the default",
                claim(None, None, "Pending", &[]),
                None,
                Some("standard"),
                None,
                SetClass("standard".into()),
            ),
            (
                "no class, no default: wait",
                claim(None, None, "Pending", &[]),
                None,
                None,
                None,
                Wait("NoDefaultClass"),
            ),
            (
                "empty class: only a pre-made volume",
                claim(Some(""), None, "Pending", &[]),
                None,
                Some("standard"),
                None,
                Wait("FailedBinding"),
            ),
            (
                "WaitForFirstConsumer without a pod: wait",
                claim(Some("standard"), None, "Pending", &[]),
                Some(&ours),
                None,
                None,
                Wait("WaitForFirstConsumer"),
            ),
            (
                "WaitForFirstConsumer with a node: provision there",
                claim(Some("standard"), None, "Pending", &node),
                Some(&ours),
                None,
                None,
                Provision(Some("node-1".into())),
            ),
            (
                "Immediate: provision at once",
                claim(Some("standard"), None, "Pending", &[]),
                Some(&immediate),
                None,
                None,
                Provision(None),
            ),
            (
                "someone else's provisioner",
                claim(Some("standard"), None, "Pending", &[]),
                Some(&external),
                None,
                None,
                AwaitExternal("ebs.csi.aws.com".into()),
            ),
            (
                "someone else's provisioner, WaitForFirstConsumer: the consumer first",
                claim(Some("standard"), None, "Pending", &[]),
                Some(&external_wffc),
                None,
                None,
                Wait("WaitForFirstConsumer"),
            ),
            (
                "the class by the beta annotation: no default, provisioned with it",
                claim(None, None, "Pending", &[(BETA_STORAGE_CLASS, "standard")]),
                Some(&immediate),
                Some("other"),
                None,
                Provision(None),
            ),
            (
                "the beta annotation before storageClassName",
                claim(
                    Some("other"),
                    None,
                    "Pending",
                    &[(BETA_STORAGE_CLASS, "standard")],
                ),
                Some(&immediate),
                None,
                None,
                Provision(None),
            ),
            (
                "an empty beta annotation: no class, and no default either",
                claim(None, None, "Pending", &[(BETA_STORAGE_CLASS, "")]),
                None,
                Some("standard"),
                None,
                Wait("FailedBinding"),
            ),
            (
                "an unknown class",
                claim(Some("fast"), None, "Pending", &[]),
                None,
                None,
                None,
                Wait("ProvisioningFailed"),
            ),
            (
                "a volume claims it: bind",
                claim(Some("standard"), None, "Pending", &node),
                Some(&ours),
                None,
                Some(&v),
                Bind("pvc-c1".into()),
            ),
            (
                "a volume claiming another: provision",
                claim(Some("standard"), None, "Pending", &node),
                Some(&ours),
                None,
                Some(&other),
                Provision(Some("node-1".into())),
            ),
            (
                "bound both ways: mark Bound",
                claim(Some("standard"), Some("pvc-c1"), "Pending", &done),
                Some(&ours),
                None,
                Some(&v),
                MarkBound,
            ),
            (
                "already Bound",
                claim(Some("standard"), Some("pvc-c1"), "Bound", &done),
                Some(&ours),
                None,
                Some(&v),
                Nothing,
            ),
            (
                "its volume is gone: Lost",
                claim(Some("standard"), Some("pvc-c1"), "Bound", &done),
                Some(&ours),
                None,
                None,
                MarkLost,
            ),
            (
                "pre-bound by the user, volume not there yet",
                claim(Some(""), Some("pvc-c1"), "Pending", &[]),
                None,
                None,
                None,
                Wait("VolumeMissing"),
            ),
        ];
        for (name, c, cl, default, vol, want) in cases {
            assert_eq!(claim_step(&c, cl, default, vol), want, "{name}");
        }
        let mut deleting = claim(None, None, "Pending", &[]);
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(claim_step(&deleting, None, Some("standard"), None), Nothing);
    }

    #[test]
    fn volumes_follow_their_claims() {
        use VolumeStep::*;
        let bound = claim(Some("standard"), Some("pvc-c1"), "Bound", &[]);
        let unbound = claim(Some("standard"), None, "Pending", &[]);
        let mut recreated = bound.clone();
        recreated.metadata.uid = Some("c9".into());
        let cases: Vec<(
            &str,
            PersistentVolume,
            Option<&PersistentVolumeClaim>,
            VolumeStep,
        )> = vec![
            (
                "claim bound to it: Bound",
                volume(Some("c1"), "Delete", "Pending"),
                Some(&bound),
                MarkPhase("Bound"),
            ),
            (
                "already Bound",
                volume(Some("c1"), "Delete", "Bound"),
                Some(&bound),
                Nothing,
            ),
            (
                "claim not yet pointing at it",
                volume(Some("c1"), "Delete", "Pending"),
                Some(&unbound),
                MarkPhase("Available"),
            ),
            (
                "claim gone: Released first, whatever the policy",
                volume(Some("c1"), "Delete", "Bound"),
                None,
                MarkPhase("Released"),
            ),
            (
                "claim gone, Released, Delete: delete",
                volume(Some("c1"), "Delete", "Released"),
                None,
                Delete,
            ),
            (
                "claim gone, Released, Retain: kept",
                volume(Some("c1"), "Retain", "Released"),
                None,
                Nothing,
            ),
            (
                "claim gone, Retain: Released",
                volume(Some("c1"), "Retain", "Bound"),
                None,
                MarkPhase("Released"),
            ),
            (
                "claim recreated under the same name: released",
                volume(Some("c1"), "Retain", "Bound"),
                Some(&recreated),
                MarkPhase("Released"),
            ),
            (
                "no claim: Available",
                volume(None, "Retain", "Pending"),
                None,
                MarkPhase("Available"),
            ),
        ];
        for (name, v, c, want) in cases {
            assert_eq!(volume_step(&v, c, &[]), want, "{name}");
        }
        let prebound = claim(Some(""), Some("pvc-c1"), "Pending", &[]);
        assert_eq!(
            volume_step(&volume(None, "Retain", "Available"), None, &[&prebound]),
            ClaimBy(0)
        );
    }
}
