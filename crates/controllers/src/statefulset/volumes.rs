//! The claims a StatefulSet's pods mount: one PersistentVolumeClaim `<claim>-<set>-<ordinal>`
//! per `volumeClaimTemplates` entry, created before the pod and kept across its replacements,
//! and their fate under `persistentVolumeClaimRetentionPolicy` (upstream's
//! `getPersistentVolumeClaims`, `isClaimOwnerUpToDate` and `updateClaimOwnerRefForSetAndPod`).
//!
//! The policy is carried out by ownership, so that the garbage collector does the deleting:
//!
//! | whenScaled | whenDeleted | claim of a kept ordinal | claim of a condemned ordinal |
//! | --- | --- | --- | --- |
//! | Retain | Retain | no owner | no owner |
//! | Retain | Delete | the set | the set |
//! | Delete | Retain | no owner | its pod |
//! | Delete | Delete | the set | its pod |
//!
//! Both references are controller references, as upstream sets them since 1.32; a claim another
//! controller controls is left alone.

use api::pod::controller_ref;
use k8s_openapi::{
    api::{
        apps::v1::StatefulSet,
        core::v1::{PersistentVolumeClaim, Pod},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};

/// The name of claim template `claim`'s claim for `ordinal` of `set`.
pub fn claim_name(claim: &str, set: &str, ordinal: i32) -> String {
    format!("{claim}-{set}-{ordinal}")
}

/// The names of the set's claim templates.
pub fn template_names(set: &StatefulSet) -> impl Iterator<Item = &str> {
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
}

/// What a retention policy says for one event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Retention {
    /// Keep the claims (the default).
    #[default]
    Retain,
    /// Delete them.
    Delete,
}

impl Retention {
    fn parse(v: Option<&str>) -> Self {
        match v {
            Some("Delete") => Retention::Delete,
            _ => Retention::Retain,
        }
    }
}

/// `spec.persistentVolumeClaimRetentionPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// When the set is scaled down (the condemned ordinals' claims).
    pub when_scaled: Retention,
    /// When the set is deleted.
    pub when_deleted: Retention,
}

impl Policy {
    /// The set's policy; absent means Retain for both.
    pub fn of(set: &StatefulSet) -> Self {
        let p = set
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
        Self {
            when_scaled: Retention::parse(p.and_then(|p| p.when_scaled.as_deref())),
            when_deleted: Retention::parse(p.and_then(|p| p.when_deleted.as_deref())),
        }
    }

    /// Which owners a claim should have: `(the set, its pod)`.
    pub fn owners(self, scaled_down: bool) -> (bool, bool) {
        let by_pod = scaled_down && self.when_scaled == Retention::Delete;
        let by_set = !by_pod && self.when_deleted == Retention::Delete;
        (by_set, by_pod)
    }
}

/// The claims `ordinal`'s pod needs, as they are created: the template with its name, the set's
/// namespace, the template's labels plus the selector's `matchLabels`, and the owners the
/// retention policy gives a kept ordinal.
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let spec = set.spec.as_ref();
    let match_labels = spec
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    let (by_set, _) = Policy::of(set).owners(false);
    spec.and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|template| {
            let template_name = template.metadata.name.as_deref()?;
            let mut labels = template.metadata.labels.clone().unwrap_or_default();
            labels.extend(match_labels.clone());
            Some(PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(template_name, set_name, ordinal)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: template.metadata.annotations.clone(),
                    owner_references: by_set.then(|| vec![set_ref(set)]),
                    ..Default::default()
                },
                spec: template.spec.clone(),
                status: None,
            })
        })
        .collect()
}

fn set_ref(set: &StatefulSet) -> OwnerReference {
    controller_ref("apps/v1", "StatefulSet", &set.metadata)
}

fn pod_ref(pod: &Pod) -> OwnerReference {
    controller_ref("v1", "Pod", &pod.metadata)
}

/// Whether `r` names `obj` by kind and name (whatever its uid).
fn names(r: &OwnerReference, api_version: &str, kind: &str, meta: &ObjectMeta) -> bool {
    r.api_version == api_version && r.kind == kind && Some(r.name.as_str()) == meta.name.as_deref()
}

/// The owner references `claim` should have under the set's policy, or `None` if it has them
/// already (or must not be touched). `scaled_down` says whether the pod's ordinal is condemned.
///
/// As upstream: a reference to an earlier set or pod of the same name (another uid) means the
/// claim is managed by a predecessor and is left alone; so is a claim some other controller
/// controls, except that our own references to it are then removed.
pub fn owner_update(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
    scaled_down: bool,
) -> Option<Vec<OwnerReference>> {
    let refs = claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default();
    let set_uid = set.metadata.uid.as_deref().unwrap_or("");
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or("");
    let is_set = |r: &OwnerReference| names(r, "apps/v1", "StatefulSet", &set.metadata);
    let is_pod = |r: &OwnerReference| names(r, "v1", "Pod", &pod.metadata);
    let stale = |r: &OwnerReference| {
        (is_set(r) && r.uid != set_uid) || (is_pod(r) && (pod_uid.is_empty() || r.uid != pod_uid))
    };
    if refs.iter().any(stale) {
        return None;
    }
    let policy = Policy::of(set);
    let retain_all =
        policy.when_scaled == Retention::Retain && policy.when_deleted == Retention::Retain;
    let ours = |r: &OwnerReference| is_set(r) || is_pod(r);
    let foreign_controller =
        !retain_all && refs.iter().any(|r| !ours(r) && r.controller == Some(true));
    let mut want: Vec<OwnerReference> = refs.iter().filter(|r| !ours(r)).cloned().collect();
    if !foreign_controller {
        let (by_set, by_pod) = policy.owners(scaled_down);
        if by_set {
            want.push(set_ref(set));
        }
        if by_pod && !pod_uid.is_empty() {
            want.push(pod_ref(pod));
        }
    }
    let same = want.len() == refs.len()
        && want.iter().all(|w| {
            refs.iter()
                .any(|r| r.uid == w.uid && r.controller == w.controller && r.kind == w.kind)
        });
    (!same).then_some(want)
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
        api::{
            apps::v1::{StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec},
            core::v1::PersistentVolumeClaimSpec,
        },
        apimachinery::pkg::apis::meta::v1::LabelSelector,
    };

    fn set(scaled: &str, deleted: &str) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("set-uid".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                selector: LabelSelector {
                    match_labels: Some([("app".to_string(), "nginx".to_string())].into()),
                    ..Default::default()
                },
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some("www".into()),
                        labels: Some([("tier".to_string(), "data".to_string())].into()),
                        ..Default::default()
                    },
                    spec: Some(PersistentVolumeClaimSpec {
                        access_modes: Some(vec!["ReadWriteOnce".into()]),
                        ..Default::default()
                    }),
                    status: None,
                }]),
                persistent_volume_claim_retention_policy: Some(
                    StatefulSetPersistentVolumeClaimRetentionPolicy {
                        when_scaled: Some(scaled.into()),
                        when_deleted: Some(deleted.into()),
                    },
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pod(uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn claim(owners: &[(&str, &str, &str, bool)]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("www-web-1".into()),
                owner_references: Some(
                    owners
                        .iter()
                        .map(|(kind, name, uid, controller)| OwnerReference {
                            api_version: if *kind == "Pod" { "v1" } else { "apps/v1" }.into(),
                            kind: kind.to_string(),
                            name: name.to_string(),
                            uid: uid.to_string(),
                            controller: Some(*controller),
                            block_owner_deletion: Some(true),
                        })
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn uids(refs: Option<Vec<OwnerReference>>) -> Option<Vec<String>> {
        refs.map(|v| v.into_iter().map(|r| r.uid).collect())
    }

    #[test]
    fn claims_are_named_labelled_and_owned_per_policy() {
        let c = claims_for(&set("Retain", "Delete"), 3);
        assert_eq!(c.len(), 1);
        let c = &c[0];
        assert_eq!(c.metadata.name.as_deref(), Some("www-web-3"));
        assert_eq!(c.metadata.namespace.as_deref(), Some("ns"));
        let labels = c.metadata.labels.clone().unwrap();
        assert_eq!(
            (labels["app"].as_str(), labels["tier"].as_str()),
            ("nginx", "data")
        );
        let owners = c.metadata.owner_references.clone().unwrap();
        assert_eq!(owners[0].uid, "set-uid");
        assert_eq!(owners[0].controller, Some(true));
        assert!(c.spec.is_some());
        assert!(
            claims_for(&set("Delete", "Retain"), 0)[0]
                .metadata
                .owner_references
                .is_none()
        );
    }

    #[test]
    fn ownership_follows_the_retention_table() {
        // (whenScaled, whenDeleted, scaled down, existing owners, want owners or None if unchanged)
        let set_ref = ("StatefulSet", "web", "set-uid", true);
        let pod_ref = ("Pod", "web-1", "pod-uid", true);
        let cases: Vec<(
            &str,
            &str,
            bool,
            Vec<(&str, &str, &str, bool)>,
            Option<Vec<&str>>,
        )> = vec![
            ("Retain", "Retain", false, vec![], None),
            ("Retain", "Retain", true, vec![set_ref], Some(vec![])),
            ("Retain", "Delete", false, vec![], Some(vec!["set-uid"])),
            ("Retain", "Delete", true, vec![set_ref], None),
            ("Delete", "Retain", false, vec![], None),
            ("Delete", "Retain", true, vec![], Some(vec!["pod-uid"])),
            ("Delete", "Retain", false, vec![pod_ref], Some(vec![])),
            ("Delete", "Delete", false, vec![set_ref], None),
            (
                "Delete",
                "Delete",
                true,
                vec![set_ref],
                Some(vec!["pod-uid"]),
            ),
            ("Delete", "Delete", true, vec![pod_ref], None),
            // A non-controller reference of ours is made a controller one.
            (
                "Retain",
                "Delete",
                false,
                vec![("StatefulSet", "web", "set-uid", false)],
                Some(vec!["set-uid"]),
            ),
            // A predecessor's reference: hands off.
            (
                "Retain",
                "Delete",
                false,
                vec![("StatefulSet", "web", "old-uid", true)],
                None,
            ),
            // Another controller: our references go, none are added.
            (
                "Retain",
                "Delete",
                false,
                vec![("Thing", "x", "x-uid", true), set_ref],
                Some(vec!["x-uid"]),
            ),
            (
                "Retain",
                "Delete",
                false,
                vec![("Thing", "x", "x-uid", true)],
                None,
            ),
            // Other owners that do not control it stay.
            (
                "Retain",
                "Delete",
                false,
                vec![("Thing", "x", "x-uid", false)],
                Some(vec!["x-uid", "set-uid"]),
            ),
        ];
        for (scaled, deleted, down, owners, want) in cases {
            let got = owner_update(
                &claim(&owners),
                &set(scaled, deleted),
                &pod("pod-uid"),
                down,
            );
            let want = want.map(|v| v.into_iter().map(str::to_string).collect::<Vec<_>>());
            assert_eq!(uids(got), want, "{scaled}/{deleted} down={down} {owners:?}");
        }
    }

    #[test]
    fn a_pod_not_yet_created_gets_no_reference() {
        let got = owner_update(&claim(&[]), &set("Delete", "Retain"), &pod(""), true);
        assert_eq!(uids(got), None);
    }
}
