//! PersistentVolumes: cluster-scoped, phase Pending at creation, the phase transition time kept
//! by status writes as upstream's status strategy keeps it.

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::{Value, json};

use crate::{
    object,
    registry::{Kind, Strategy, Subresource},
    table::{
        AGE, Column, Desc, NAME, Printer, Row, access_modes, age_cell, arr, col, get, name_cell,
        plain, s,
    },
};

/// The persistentvolumes kind.
pub(super) fn kind() -> Kind {
    Kind::of::<PersistentVolume>()
        .short_names(&["pv"])
        .subresources(&[Subresource::Status])
        // Upstream keeps `name` beside `metadata.name` "for backward compatibility".
        .selectable_fields(&["name"])
        .strategy(VolumeStrategy)
        .printer(Printer::Columns { columns, row })
}

/// Upstream's `pkg/registry/core/persistentvolume/strategy.go`.
struct VolumeStrategy;

impl Strategy for VolumeStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] =
            json!({"phase": "Pending", "lastPhaseTransitionTime": object::now_rfc3339()});
    }

    fn defaults(&self, obj: &mut Value) {
        api::defaults::persistent_volume(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::storage::validate_persistent_volume(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = api::validation::storage::validate_persistent_volume(new);
        errs.extend(api::validation::storage::validate_persistent_volume_update(
            new, old,
        ));
        errs
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        // A phase change stamps the transition time unless the writer set a newer one; no change
        // keeps the stored one.
        let phase = |o: &Value| o.pointer("/status/phase").cloned();
        let time = |o: &Value| o.pointer("/status/lastPhaseTransitionTime").cloned();
        if !new.get("status").is_some_and(Value::is_object) {
            return;
        }
        match (phase(new) == phase(old), time(new)) {
            (true, None) => {
                if let Some(t) = time(old) {
                    new["status"]["lastPhaseTransitionTime"] = t;
                }
            }
            (false, t) if t.is_none() || t == time(old) => {
                new["status"]["lastPhaseTransitionTime"] = json!(object::now_rfc3339());
            }
            _ => {}
        }
    }
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "Capacity",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeSpec", "capacity"),
        ),
        col(
            "Access Modes",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeSpec", "accessModes"),
        ),
        col(
            "Reclaim Policy",
            "string",
            0,
            Field(
                "io.k8s.api.core.v1.PersistentVolumeSpec",
                "persistentVolumeReclaimPolicy",
            ),
        ),
        col(
            "Status",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeStatus", "phase"),
        ),
        col(
            "Claim",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeSpec", "claimRef"),
        ),
        col("StorageClass", "string", 0, Text("StorageClass of the pv")),
        col(
            "VolumeAttributesClass",
            "string",
            0,
            Text("VolumeAttributesClass of the pv"),
        ),
        col(
            "Reason",
            "string",
            0,
            Field("io.k8s.api.core.v1.PersistentVolumeStatus", "reason"),
        ),
        AGE,
        col(
            "VolumeMode",
            "string",
            1,
            Field("io.k8s.api.core.v1.PersistentVolumeSpec", "volumeMode"),
        ),
    ]
}

/// Upstream's `printPersistentVolume`.
fn row(pv: &Value, now: Timestamp) -> Row {
    plain(cells(pv, name_cell(pv), age_cell(pv, now)))
}

fn cells(pv: &Value, name: Value, age: Value) -> Vec<Value> {
    let deleting = get(pv, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null());
    let phase = if deleting {
        "Terminating"
    } else {
        s(pv, &["status", "phase"])
    };
    let claim = match get(pv, &["spec", "claimRef"]).filter(|c| c.is_object()) {
        Some(c) => format!("{}/{}", s(c, &["namespace"]), s(c, &["name"])),
        None => String::new(),
    };
    let capacity = get(pv, &["spec", "capacity", "storage"])
        .and_then(Value::as_str)
        .unwrap_or("0")
        .to_string();
    let class = get(
        pv,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .and_then(Value::as_str)
    .unwrap_or_else(|| s(pv, &["spec", "storageClassName"]));
    let or_unset = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| "<unset>".into())
    };
    vec![
        name,
        json!(capacity),
        json!(access_modes(arr(pv, &["spec", "accessModes"]))),
        json!(s(pv, &["spec", "persistentVolumeReclaimPolicy"])),
        json!(phase),
        json!(claim),
        json!(class),
        json!(or_unset(get(pv, &["spec", "volumeAttributesClassName"]))),
        json!(s(pv, &["status", "reason"])),
        age,
        json!(or_unset(get(pv, &["spec", "volumeMode"]))),
    ]
}
