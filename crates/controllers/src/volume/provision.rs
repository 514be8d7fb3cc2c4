//! The simulated provisioner: one PersistentVolume per claim of a class whose provisioner is
//! [`SIMULATED_PROVISIONER`], sized by the claim's request and, for `WaitForFirstConsumer`
//! classes, pinned to the node the scheduler chose for the first pod using the claim (as kind's
//! local-path provisioner pins its host-path volumes).

use super::class::{SIMULATED_PROVISIONER, reclaim_policy};
use k8s_openapi::{
    api::{
        core::v1::{
            HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
            ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
            VolumeNodeAffinity,
        },
        storage::v1::StorageClass,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

/// The annotation naming who provisioned a volume.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The node label a pinned volume's affinity selects on.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The name of the volume provisioned for a claim: `pvc-<claim uid>`, as upstream.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or(""))
}

/// A reference to `claim`, as a volume's `claimRef` holds it.
pub fn claim_ref(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        name: claim.metadata.name.clone(),
        namespace: claim.metadata.namespace.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The volume for `claim` of `class`, pre-bound to the claim, on `node` if the class waits for
/// its first consumer.
pub fn new_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
) -> PersistentVolume {
    let name = volume_name(claim);
    let spec = claim.spec.clone().unwrap_or_default();
    let capacity = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| [("storage".to_string(), q.clone())].into());
    let node_affinity = node.map(|n| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: HOSTNAME_LABEL.into(),
                    operator: "In".into(),
                    values: Some(vec![n.to_string()]),
                }]),
                match_fields: None,
            }],
        }),
    });
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            annotations: Some(
                [(
                    PROVISIONED_BY.to_string(),
                    SIMULATED_PROVISIONER.to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes.clone(),
            capacity,
            claim_ref: Some(claim_ref(claim)),
            persistent_volume_reclaim_policy: Some(reclaim_policy(class).to_string()),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: Some(spec.volume_mode.unwrap_or_else(|| "Filesystem".into())),
            mount_options: class.mount_options.clone(),
            node_affinity,
            host_path: Some(HostPathVolumeSource {
                path: format!("/var/lib/rollwright/volumes/{name}"),
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// The node a volume is pinned to by a `kubernetes.io/hostname In [node]` affinity, if any.
pub fn pinned_node(volume: &PersistentVolume) -> Option<&str> {
    let terms = &volume
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    let [req] = term.match_expressions.as_deref()? else {
        return None;
    };
    match (
        req.key.as_str(),
        req.operator.as_str(),
        req.values.as_deref(),
    ) {
        (HOSTNAME_LABEL, "In", Some([node])) => Some(node),
        _ => None,
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
        api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements},
        apimachinery::pkg::api::resource::Quantity,
    };

    fn claim() -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("www-web-0".into()),
                namespace: Some("default".into()),
                uid: Some("abc".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity("1Gi".into()))].into()),
                    ..Default::default()
                }),
                storage_class_name: Some("standard".into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn class() -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some("standard".into()),
                ..Default::default()
            },
            provisioner: SIMULATED_PROVISIONER.into(),
            volume_binding_mode: Some("WaitForFirstConsumer".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_volume_sized_bound_and_pinned_for_its_claim() {
        let v = new_volume(&claim(), &class(), Some("node-2"));
        assert_eq!(v.metadata.name.as_deref(), Some("pvc-abc"));
        assert_eq!(
            v.metadata.annotations.as_ref().unwrap()[PROVISIONED_BY],
            SIMULATED_PROVISIONER
        );
        let spec = v.spec.as_ref().unwrap();
        assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "1Gi");
        assert_eq!(
            spec.access_modes.as_deref(),
            Some(&["ReadWriteOnce".to_string()][..])
        );
        let r = spec.claim_ref.as_ref().unwrap();
        assert_eq!(
            (r.name.as_deref(), r.namespace.as_deref(), r.uid.as_deref()),
            (Some("www-web-0"), Some("default"), Some("abc"))
        );
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Delete")
        );
        assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
        assert_eq!(pinned_node(&v), Some("node-2"));
        assert_eq!(pinned_node(&new_volume(&claim(), &class(), None)), None);
    }
}
