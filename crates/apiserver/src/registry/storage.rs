//! storage.k8s.io/v1: StorageClasses.

use jiff::Timestamp;
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use super::{Kind, Rules};
use crate::table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, col, get, plain, s};

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
    ]
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
