//! PersistentVolumeClaims: status writes reset `spec`; the spec is fixed once created except
//! its requests and its binding to a volume.

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::{Value, json};

use crate::{
    registry::{Kind, Strategy, Subresource},
    table::{
        AGE, Column, Desc, NAME, Printer, Row, access_modes, age_cell, arr, col, get, name_cell,
        plain, s,
    },
};

/// The persistentvolumeclaims kind.
pub(super) fn kind() -> Kind {
    Kind::of::<PersistentVolumeClaim>()
        .short_names(&["pvc"])
        .subresources(&[Subresource::Status])
        // Upstream keeps `name` beside `metadata.name` "for backward compatibility".
        .selectable_fields(&["name"])
        .strategy(ClaimStrategy)
        .printer(Printer::Columns { columns, row })
}

/// Upstream's `pkg/registry/core/persistentvolumeclaim/strategy.go`.
struct ClaimStrategy;

impl Strategy for ClaimStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending"});
    }

    fn defaults(&self, obj: &mut Value) {
        api::defaults::persistent_volume_claim(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::core_kinds::validate_persistent_volume_claim(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = api::validation::core_kinds::validate_persistent_volume_claim(new);
        errs.extend(api::validation::core_kinds::validate_persistent_volume_claim_update(new, old));
        errs
    }
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Status",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "phase"),
        ),
        col(
            "Volume",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeClaimSpec", "volumeName"),
        ),
        col(
            "Capacity",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "capacity"),
        ),
        col(
            "Access Modes",
            "string",
            0,
            Field(
                "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
                "accessModes",
            ),
        ),
        col("StorageClass", "string", 0, Text("StorageClass of the pvc")),
        col(
            "VolumeAttributesClass",
            "string",
            0,
            Text("VolumeAttributesClass of the pvc"),
        ),
        AGE,
        col(
            "VolumeMode",
            "string",
            1,
            Field("io.k8s.api.core.v1.PersistentVolumeClaimSpec", "volumeMode"),
        ),
    ]
}

/// Upstream's `printPersistentVolumeClaim`.
fn row(pvc: &Value, now: Timestamp) -> Row {
    plain(cells(pvc, name_cell(pvc), age_cell(pvc, now)))
}

fn cells(pvc: &Value, name: Value, age: Value) -> Vec<Value> {
    let deleting = get(pvc, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null());
    let phase = if deleting {
        "Terminating"
    } else {
        s(pvc, &["status", "phase"])
    };
    let volume = s(pvc, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let cap = get(pvc, &["status", "capacity", "storage"])
            .and_then(Value::as_str)
            .unwrap_or("0")
            .to_string();
        (cap, access_modes(arr(pvc, &["status", "accessModes"])))
    };
    let class = get(
        pvc,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .and_then(Value::as_str)
    .unwrap_or_else(|| s(pvc, &["spec", "storageClassName"]));
    let or_unset = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| "<unset>".into())
    };
    vec![
        name,
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(or_unset(get(pvc, &["spec", "volumeAttributesClassName"]))),
        age,
        json!(or_unset(get(pvc, &["spec", "volumeMode"]))),
    ]
}
