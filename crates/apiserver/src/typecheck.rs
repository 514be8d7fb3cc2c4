//! Structural type checking: every stored object must decode as its upstream Go type would.
//!
//! Validation reads objects as JSON and checks the rules; this checks the shape (a string where
//! a map belongs, a number where a list belongs), by decoding into the `k8s-openapi` type, which
//! follows upstream's types field for field. Unknown fields are ignored here (field validation
//! handles them), so rollwright's own additions pass.

use crate::{error::ApiError, resource::ResourceDef};
use k8s_openapi::api::{apps, coordination, core, storage};
use serde::de::DeserializeOwned;
use serde_json::Value;

fn decode<T: DeserializeOwned>(v: &Value) -> Result<(), String> {
    T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())
}

/// Checks `obj` decodes as the resource's type; a 400 `BadRequest` like upstream's decoding error
/// otherwise.
pub fn check(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let result = match (def.group, def.kind) {
        ("", "Namespace") => decode::<core::v1::Namespace>(obj),
        ("", "Node") => decode::<core::v1::Node>(obj),
        ("", "Pod") => decode::<core::v1::Pod>(obj),
        ("", "Event") => decode::<core::v1::Event>(obj),
        ("", "PersistentVolumeClaim") => decode::<core::v1::PersistentVolumeClaim>(obj),
        ("", "PersistentVolume") => decode::<core::v1::PersistentVolume>(obj),
        ("storage.k8s.io", "StorageClass") => decode::<storage::v1::StorageClass>(obj),
        ("apps", "Deployment") => decode::<apps::v1::Deployment>(obj),
        ("apps", "ReplicaSet") => decode::<apps::v1::ReplicaSet>(obj),
        ("apps", "StatefulSet") => decode::<apps::v1::StatefulSet>(obj),
        ("apps", "DaemonSet") => decode::<apps::v1::DaemonSet>(obj),
        ("apps", "ControllerRevision") => decode::<apps::v1::ControllerRevision>(obj),
        ("coordination.k8s.io", "Lease") => decode::<coordination::v1::Lease>(obj),
        _ => Ok(()),
    };
    result.map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            def.kind, def.version, def.kind
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::find;
    use serde_json::json;

    #[test]
    fn rejects_wrong_shapes_and_accepts_extensions() {
        let pods = find("", "v1", "pods").unwrap();
        let ok = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert!(check(pods, &ok).is_ok());
        for bad in [
            json!({"metadata": {"name": "p", "labels": "x"}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": "x"}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": 3}]}}),
        ] {
            let err = check(pods, &bad).unwrap_err();
            assert_eq!(err.code, 400, "{bad}");
            assert!(
                err.message
                    .starts_with("Pod in version \"v1\" cannot be handled as a Pod"),
                "{}",
                err.message
            );
        }
        let ds = find("apps", "v1", "daemonsets").unwrap();
        let with_extension = json!({"metadata": {"name": "d"}, "spec": {"selector": {}, "template": {},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}});
        assert!(check(ds, &with_extension).is_ok());
    }

    #[test]
    fn numeric_quantities_are_accepted_as_upstream_does() {
        // YAML `cpu: 1` arrives as a JSON number; upstream's Quantity decodes numbers too.
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": 1.5}}}]}});
        assert!(check(pods, &pod).is_ok());
    }
}
