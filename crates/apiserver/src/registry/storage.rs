//! storage.k8s.io/v1: StorageClasses (the default one, `standard`, is created by the control
//! plane), and the CSI objects kube-scheduler and kube-controller-manager watch (CSINodes,
//! CSIDrivers, CSIStorageCapacities, VolumeAttachments), stored as given.

use jiff::Timestamp;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use serde_json::{Value, json};

use super::{Kind, Rules, Subresource};
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, get, name_cell, plain, s,
};

/// The storage.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<StorageClass>()
            .short_names(&["sc"])
            .strategy(
                Rules::new()
                    .defaults(api::defaults::storage_class)
                    .validate(api::validation::storage::validate_storage_class)
                    .immutable(api::validation::storage::validate_storage_class_update),
            )
            .printer(Printer::Columns {
                columns: storage_class_columns,
                row: storage_class_row,
            }),
        Kind::of::<CSIDriver>()
            .strategy(
                Rules::new()
                    .defaults(csi_driver_defaults)
                    .validate(api::validation::meta::validate_cluster_scoped),
            )
            .printer(Printer::Columns {
                columns: csi_driver_columns,
                row: csi_driver_row,
            }),
        Kind::of::<CSINode>()
            .strategy(Rules::new().validate(api::validation::meta::validate_cluster_scoped))
            .printer(Printer::Columns {
                columns: || {
                    vec![
                        NAME,
                        col(
                            "Drivers",
                            "integer",
                            0,
                            Desc::Field("io.k8s.api.storage.v1.CSINodeSpec", "drivers"),
                        ),
                        AGE,
                    ]
                },
                row: |obj, now| {
                    plain(vec![
                        name_cell(obj),
                        json!(arr(obj, &["spec", "drivers"]).len()),
                        age_cell(obj, now),
                    ])
                },
            }),
        Kind::of::<CSIStorageCapacity>()
            .strategy(Rules::new().validate(api::validation::meta::validate_namespaced))
            .printer(Printer::Columns {
                columns: || {
                    use Desc::Field;
                    const CAP: &str = "io.k8s.api.storage.v1.CSIStorageCapacity";
                    vec![
                        NAME,
                        col(
                            "StorageClassName",
                            "string",
                            0,
                            Field(CAP, "storageClassName"),
                        ),
                        col("Capacity", "string", 0, Field(CAP, "capacity")),
                    ]
                },
                row: |obj, _| {
                    plain(vec![
                        name_cell(obj),
                        json!(s(obj, &["storageClassName"])),
                        json!(s(obj, &["capacity"])),
                    ])
                },
            }),
        Kind::of::<VolumeAttachment>()
            .subresources(&[Subresource::Status])
            .strategy(Rules::new().validate(api::validation::meta::validate_cluster_scoped))
            .printer(Printer::Columns {
                columns: volume_attachment_columns,
                row: volume_attachment_row,
            }),
    ]
}

/// Upstream's `SetDefaults_CSIDriver`.
fn csi_driver_defaults(obj: &mut Value) {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    for (key, value) in [
        ("attachRequired", json!(true)),
        ("podInfoOnMount", json!(false)),
        ("storageCapacity", json!(false)),
        ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
        ("requiresRepublish", json!(false)),
        ("seLinuxMount", json!(false)),
    ] {
        if spec.get(key).is_none_or(Value::is_null) {
            spec[key] = value;
        }
    }
    if spec
        .get("volumeLifecycleModes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec["volumeLifecycleModes"] = json!(["Persistent"]);
    }
}

fn csi_driver_columns() -> Vec<Column> {
    use Desc::Field;
    const SPEC: &str = "io.k8s.api.storage.v1.CSIDriverSpec";
    vec![
        NAME,
        col(
            "AttachRequired",
            "boolean",
            0,
            Field(SPEC, "attachRequired"),
        ),
        col(
            "PodInfoOnMount",
            "boolean",
            0,
            Field(SPEC, "podInfoOnMount"),
        ),
        col(
            "StorageCapacity",
            "boolean",
            0,
            Field(SPEC, "storageCapacity"),
        ),
        col("TokenRequests", "string", 0, Field(SPEC, "tokenRequests")),
        col(
            "RequiresRepublish",
            "boolean",
            0,
            Field(SPEC, "requiresRepublish"),
        ),
        col("Modes", "string", 0, Field(SPEC, "volumeLifecycleModes")),
        AGE,
    ]
}

/// Upstream's `printCSIDriver` (unset booleans print as upstream's defaults).
fn csi_driver_row(obj: &Value, now: Timestamp) -> Row {
    let flag = |k: &str, default: bool| {
        json!(
            get(obj, &["spec", k])
                .and_then(Value::as_bool)
                .unwrap_or(default)
        )
    };
    let tokens: Vec<&str> = arr(obj, &["spec", "tokenRequests"])
        .iter()
        .map(|t| s(t, &["audience"]))
        .collect();
    let modes: Vec<&str> = arr(obj, &["spec", "volumeLifecycleModes"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    plain(vec![
        name_cell(obj),
        flag("attachRequired", true),
        flag("podInfoOnMount", false),
        flag("storageCapacity", false),
        json!(if tokens.is_empty() {
            "<unset>".to_string()
        } else {
            tokens.join(",")
        }),
        flag("requiresRepublish", false),
        json!(if modes.is_empty() {
            "<none>".to_string()
        } else {
            modes.join(",")
        }),
        age_cell(obj, now),
    ])
}

fn volume_attachment_columns() -> Vec<Column> {
    use Desc::{Field, Text};
    const SPEC: &str = "io.k8s.api.storage.v1.VolumeAttachmentSpec";
    vec![
        NAME,
        col("Attacher", "string", 0, Field(SPEC, "attacher")),
        col(
            "PV",
            "string",
            0,
            Text("Name of the persistent volume to attach."),
        ),
        col("Node", "string", 0, Field(SPEC, "nodeName")),
        col(
            "Attached",
            "boolean",
            0,
            Field("io.k8s.api.storage.v1.VolumeAttachmentStatus", "attached"),
        ),
        AGE,
    ]
}

fn volume_attachment_row(obj: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(obj),
        json!(s(obj, &["spec", "attacher"])),
        json!(s(obj, &["spec", "source", "persistentVolumeName"])),
        json!(s(obj, &["spec", "nodeName"])),
        json!(
            get(obj, &["status", "attached"])
                .and_then(Value::as_bool)
                .unwrap_or(false)
        ),
        age_cell(obj, now),
    ])
}

fn storage_class_columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Provisioner",
            "string",
            0,
            Field("io.k8s.api.storage.v1.StorageClass", "provisioner"),
        ),
        col(
            "ReclaimPolicy",
            "string",
            0,
            Field("io.k8s.api.storage.v1.StorageClass", "reclaimPolicy"),
        ),
        col(
            "VolumeBindingMode",
            "string",
            0,
            Field("io.k8s.api.storage.v1.StorageClass", "volumeBindingMode"),
        ),
        col(
            "AllowVolumeExpansion",
            "string",
            0,
            Field("io.k8s.api.storage.v1.StorageClass", "allowVolumeExpansion"),
        ),
        AGE,
    ]
}

/// The annotation that marks the cluster's default StorageClass.
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

fn storage_class_row(sc: &Value, now: Timestamp) -> Row {
    let age = age_cell(sc, now);
    let mut name = s(sc, &["metadata", "name"]).to_string();
    if s(sc, &["metadata", "annotations", DEFAULT_CLASS]) == "true" {
        name.push_str(" (default)");
    }
    let or = |v: &str, default: &str| {
        if v.is_empty() {
            default.to_string()
        } else {
            v.to_string()
        }
    };
    plain(vec![
        json!(name),
        json!(s(sc, &["provisioner"])),
        json!(or(s(sc, &["reclaimPolicy"]), "Delete")),
        json!(or(s(sc, &["volumeBindingMode"]), "Immediate")),
        json!(
            get(sc, &["allowVolumeExpansion"])
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .to_string()
        ),
        age,
    ])
}
