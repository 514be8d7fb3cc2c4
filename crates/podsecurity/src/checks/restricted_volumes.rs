//! `restrictedVolumes` (upstream's `check_restrictedVolumes.go`): at the restricted level,
//! volumes may only be configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim,
//! projected or secret; it replaces the baseline hostPath check.

use super::{Check, Versioned, host_path_volumes};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const CHECK: Check = Check {
    id: "restrictedVolumes",
    level: Level::Restricted,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[host_path_volumes::ID],
    }],
};

const ALLOWED: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The restricted sources in the order upstream tests them (the first one set names the type).
const RESTRICTED: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for v in spec["volumes"].as_array().into_iter().flatten() {
        let has = |source: &&str| pod::set(&v[*source]).is_some();
        if ALLOWED.iter().any(has) {
            continue;
        }
        bad.push(pod::name(v));
        types.insert(RESTRICTED.iter().copied().find(has).unwrap_or("unknown"));
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "restricted volume types",
            format!(
                "{} {} {} {} {}",
                pluralize("volume", "volumes", bad.len()),
                join_quote(&bad),
                pluralize("uses", "use", bad.len()),
                pluralize(
                    "restricted volume type",
                    "restricted volume types",
                    types.len()
                ),
                join_quote(&types)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn only_the_allowed_volume_types() {
        let mut volumes: Vec<_> = super::ALLOWED
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"name": format!("a{}", i + 1), *t: {}}))
            .collect();
        volumes.extend(
            super::RESTRICTED
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"name": format!("b{}", i + 1), *t: {}})),
        );
        volumes.push(json!({"name": "c1"}));
        let pod = json!({"spec": {"volumes": volumes}});
        assert_violation(
            "restrictedVolumes",
            0,
            &pod,
            "restricted volume types",
            concat!(
                r#"volumes "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15", "b16", "b17", "b18", "b19", "b20", "b21", "c1""#,
                r#" use restricted volume types "#,
                r#""awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", "#,
                r#""hostPath", "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume""#,
            ),
        );
        let one = json!({"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}});
        assert_violation(
            "restrictedVolumes",
            0,
            &one,
            "restricted volume types",
            r#"volume "h" uses restricted volume type "hostPath""#,
        );
    }
}
