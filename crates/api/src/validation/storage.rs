//! Storage kinds: PersistentVolume (core/v1) and StorageClass (storage.k8s.io/v1), upstream's
//! `ValidatePersistentVolume` and `ValidateStorageClass` for the rules a simulated cluster meets.

use super::{field, items, meta, names, normalize, pod, str_field};
use crate::{
    field::{FieldError, Path},
    quantity::Quantity,
};
use serde_json::Value;

/// Access modes a volume or claim may ask for.
pub(super) const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// The volume sources a PersistentVolume may carry; exactly one is required.
const PV_SOURCES: [&str; 22] = [
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "hostPath",
    "glusterfs",
    "nfs",
    "rbd",
    "iscsi",
    "cinder",
    "cephfs",
    "fc",
    "flocker",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

/// A storage quantity that must be positive (`ValidatePositiveQuantityValue`).
pub(super) fn positive_quantity(errs: &mut Vec<FieldError>, v: &Value, path: &Path) {
    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
    match Quantity::parse(&text) {
        Err(e) => errs.push(FieldError::invalid(path, v.clone(), e.to_string())),
        Ok(q) if q.is_negative() || q.is_zero() => errs.push(FieldError::invalid(
            path,
            v.clone(),
            "must be greater than zero",
        )),
        Ok(_) => {}
    }
}

/// Each access mode is known and there is at least one.
pub(super) fn access_modes(errs: &mut Vec<FieldError>, spec: &Value, path: &Path) {
    let modes = items(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            path.child("accessModes"),
            "at least 1 access mode is required",
        ));
    }
    for mode in modes {
        if !mode.as_str().is_some_and(|m| ACCESS_MODES.contains(&m)) {
            errs.push(FieldError::not_supported(
                path.child("accessModes"),
                mode.clone(),
                &ACCESS_MODES,
            ));
        }
    }
}

/// A PersistentVolume: capacity, access modes, one volume source, a known reclaim policy.
pub fn validate_persistent_volume(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::name_is_dns_subdomain);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    access_modes(&mut errs, spec, &path);
    let capacity = field(spec, "capacity").and_then(Value::as_object);
    match capacity {
        None => errs.push(FieldError::required(path.child("capacity"), "")),
        Some(cap) => {
            if !cap.contains_key("storage") || cap.len() > 1 {
                errs.push(FieldError::not_supported(
                    path.child("capacity"),
                    Value::Object(cap.clone()),
                    &["storage"],
                ));
            }
            for (resource, q) in cap {
                positive_quantity(&mut errs, q, &path.child("capacity").key(resource));
            }
        }
    }
    if let Some(class) = str_field(spec, "storageClassName").filter(|c| !c.is_empty()) {
        for msg in names::dns1123_subdomain(class) {
            errs.push(FieldError::invalid(
                path.child("storageClassName"),
                Value::from(class),
                msg,
            ));
        }
    }
    if let Some(policy) = str_field(spec, "persistentVolumeReclaimPolicy") {
        errs.extend(pod::one_of(
            path.child("persistentVolumeReclaimPolicy"),
            policy,
            &["Delete", "Recycle", "Retain"],
        ));
    }
    let sources: Vec<&str> = PV_SOURCES
        .iter()
        .copied()
        .filter(|s| field(spec, s).is_some())
        .collect();
    match sources.as_slice() {
        [] => errs.push(FieldError::required(&path, "must specify a volume type")),
        [one] => errs.extend(source_rules(spec, one, &path)),
        [_, extra, ..] => errs.push(FieldError::forbidden(
            path.child(extra),
            "may not specify more than 1 volume type",
        )),
    }
    if let Some(mode) = str_field(spec, "volumeMode") {
        errs.extend(pod::one_of(
            path.child("volumeMode"),
            mode,
            &["Block", "Filesystem"],
        ));
    }
    errs
}

/// The required fields of the sources a simulated cluster provisions.
fn source_rules(spec: &Value, source: &str, path: &Path) -> Vec<FieldError> {
    let src = field(spec, source).unwrap_or(&Value::Null);
    let required: &[&str] = match source {
        "hostPath" | "local" => &["path"],
        "csi" => &["driver", "volumeHandle"],
        "nfs" => &["server", "path"],
        _ => &[],
    };
    required
        .iter()
        .filter(|f| str_field(src, f).is_none_or(str::is_empty))
        .map(|f| FieldError::required(path.child(source).child(f), ""))
        .collect()
}

/// A PersistentVolume's source and volume mode never change after creation.
pub fn validate_persistent_volume_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let spec = |o: &Value| field(o, "spec").cloned().unwrap_or(Value::Null);
    let (new_spec, old_spec) = (spec(new), spec(old));
    let source = |s: &Value| -> Value {
        PV_SOURCES
            .iter()
            .filter_map(|k| field(s, k).map(|v| ((*k).to_string(), normalize(v))))
            .collect::<serde_json::Map<String, Value>>()
            .into()
    };
    let mut errs = Vec::new();
    if source(&new_spec) != source(&old_spec) {
        errs.push(FieldError::forbidden(
            "spec.persistentvolumesource",
            "spec.persistentvolumesource is immutable after creation",
        ));
    }
    if str_field(&new_spec, "volumeMode") != str_field(&old_spec, "volumeMode") {
        errs.push(FieldError::invalid(
            "spec.volumeMode",
            field(&new_spec, "volumeMode")
                .cloned()
                .unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}

/// A StorageClass: a qualified provisioner name, known reclaim policy and binding mode.
pub fn validate_storage_class(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::name_is_dns_subdomain);
    match str_field(obj, "provisioner").unwrap_or_default() {
        "" => errs.push(FieldError::required("provisioner", "")),
        p => {
            for msg in names::qualified_name(&p.to_lowercase()) {
                errs.push(FieldError::invalid("provisioner", Value::from(p), msg));
            }
        }
    }
    if let Some(params) = field(obj, "parameters").and_then(Value::as_object) {
        if params.len() > 512 {
            errs.push(FieldError::too_long("parameters", 512));
        }
        if params.keys().any(String::is_empty) {
            errs.push(FieldError::invalid(
                "parameters",
                Value::from(""),
                "field can not be empty.",
            ));
        }
    }
    if let Some(policy) = str_field(obj, "reclaimPolicy") {
        errs.extend(pod::one_of(
            Path::new("reclaimPolicy"),
            policy,
            &["Delete", "Retain"],
        ));
    }
    if let Some(mode) = str_field(obj, "volumeBindingMode") {
        errs.extend(pod::one_of(
            Path::new("volumeBindingMode"),
            mode,
            &["Immediate", "WaitForFirstConsumer"],
        ));
    }
    errs
}

/// A StorageClass's parameters, provisioner, reclaim policy and binding mode are fixed.
pub fn validate_storage_class_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let same = |k: &str| {
        normalize(field(new, k).unwrap_or(&Value::Null))
            == normalize(field(old, k).unwrap_or(&Value::Null))
    };
    if !same("parameters") {
        errs.push(FieldError::forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    if !same("provisioner") {
        errs.push(FieldError::forbidden(
            "provisioner",
            "updates to provisioner are forbidden.",
        ));
    }
    if !same("reclaimPolicy") {
        errs.push(FieldError::forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    if !same("volumeBindingMode") {
        errs.push(FieldError::invalid(
            "volumeBindingMode",
            field(new, "volumeBindingMode")
                .cloned()
                .unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn persistent_volume_rules() {
        let ok = json!({"metadata": {"name": "pv-1"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"},
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard"}});
        assert_eq!(msgs(validate_persistent_volume(&ok)), Vec::<String>::new());
        let cases = [
            (
                json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}}),
                vec!["spec: Required value: must specify a volume type"],
            ),
            (
                json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "0"}, "accessModes": ["Bad"],
                    "hostPath": {"path": "/d"}, "local": {"path": "/l"}}}),
                vec![
                    "spec.accessModes: Unsupported value: \"Bad\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                    "spec.capacity[storage]: Invalid value: \"0\": must be greater than zero",
                    "spec.local: Forbidden: may not specify more than 1 volume type",
                ],
            ),
            (
                json!({"metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"], "csi": {"driver": "d"},
                    "persistentVolumeReclaimPolicy": "Keep"}}),
                vec![
                    "spec.capacity: Required value",
                    "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\"",
                    "spec.csi.volumeHandle: Required value",
                ],
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(msgs(validate_persistent_volume(&obj)), want, "{obj}");
        }
        let mut moved = ok.clone();
        moved["spec"]["hostPath"]["path"] = json!("/other");
        assert_eq!(
            msgs(validate_persistent_volume_update(&moved, &ok)),
            vec![
                "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
            ]
        );
        let mut claimed = ok.clone();
        claimed["spec"]["claimRef"] = json!({"name": "c", "namespace": "default"});
        assert!(validate_persistent_volume_update(&claimed, &ok).is_empty());
    }

    #[test]
    fn storage_class_rules() {
        let ok = json!({"metadata": {"name": "standard"}, "provisioner": "rollwright.io/simulated",
            "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"});
        assert!(validate_storage_class(&ok).is_empty());
        let bad = json!({"metadata": {"name": "s"}, "reclaimPolicy": "Recycle", "volumeBindingMode": "Later"});
        assert_eq!(
            msgs(validate_storage_class(&bad)),
            vec![
                "provisioner: Required value",
                "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
                "volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
            ]
        );
        let mut changed = ok.clone();
        changed["provisioner"] = json!("other.io/x");
        changed["volumeBindingMode"] = json!("Immediate");
        changed["metadata"]["annotations"] =
            json!({"storageclass.kubernetes.io/is-default-class": "false"});
        assert_eq!(
            msgs(validate_storage_class_update(&changed, &ok)),
            vec![
                "provisioner: Forbidden: updates to provisioner are forbidden.",
                "volumeBindingMode: Invalid value: \"Immediate\": field is immutable",
            ]
        );
    }
}
