//! The smaller kinds: Namespace, Node, Event, PersistentVolumeClaim (core/v1) and Lease
//! (coordination.k8s.io/v1). Only the rules that clients and our controllers can trip over.

use super::{field, items, meta, names, normalize, pod, str_field};
use crate::{
    field::{FieldError, Path},
    quantity::Quantity,
};
use serde_json::Value;

const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];
const PVC_UPDATE_FORBIDDEN: &str = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

/// A Namespace: names are DNS labels; `spec.finalizers` hold qualified or standard names.
pub fn validate_namespace(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::name_is_dns_label);
    let path = Path::new("spec").child("finalizers");
    for finalizer in items(field(obj, "spec").unwrap_or(&Value::Null), "finalizers") {
        let name = finalizer.as_str().unwrap_or_default();
        for msg in names::qualified_name(name) {
            errs.push(FieldError::invalid(&path, finalizer.clone(), msg));
        }
        if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
            errs.push(FieldError::invalid(
                &path,
                finalizer.clone(),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

/// A Node: cluster-scoped, taints well-formed and unique by key and effect.
pub fn validate_node(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::name_is_dns_subdomain);
    let path = Path::new("spec").child("taints");
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in items(field(obj, "spec").unwrap_or(&Value::Null), "taints")
        .iter()
        .enumerate()
    {
        let p = path.index(i);
        let key = str_field(taint, "key").unwrap_or_default();
        let effect = str_field(taint, "effect").unwrap_or_default();
        errs.extend(meta::validate_label_name(key, &p.child("key")));
        let value = str_field(taint, "value").unwrap_or_default();
        let msgs = names::label_value(value);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                p.child("value"),
                Value::from(value),
                msgs.join(";"),
            ));
        }
        errs.extend(pod::one_of(
            p.child("effect"),
            effect,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        ));
        if seen.contains(&(key, effect)) {
            let mut dup = FieldError::duplicate(&p, taint.clone());
            dup.detail = "taints must be unique by key and effect pair".into();
            errs.push(dup);
        } else {
            seen.push((key, effect));
        }
    }
    errs
}

/// An Event: its namespace must agree with the involved object's (cluster-scoped objects'
/// events live in `default`).
pub fn validate_event(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let namespace = field(obj, "metadata")
        .and_then(|m| str_field(m, "namespace"))
        .unwrap_or_default();
    let involved = field(obj, "involvedObject")
        .and_then(|o| str_field(o, "namespace"))
        .unwrap_or_default();
    let agrees = if involved.is_empty() {
        namespace.is_empty() || namespace == "default"
    } else {
        involved == namespace
    };
    if !agrees {
        errs.push(FieldError::invalid(
            Path::new("involvedObject").child("namespace"),
            Value::from(involved),
            "does not match event.namespace",
        ));
    }
    errs
}

/// A PersistentVolumeClaim: access modes and a positive storage request.
pub fn validate_persistent_volume_claim(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let modes = items(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            path.child("accessModes"),
            "at least 1 access mode is required",
        ));
    }
    const MODES: [&str; 4] = [
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOnce",
        "ReadWriteOncePod",
    ];
    for mode in modes {
        if !mode.as_str().is_some_and(|m| MODES.contains(&m)) {
            errs.push(FieldError::not_supported(
                path.child("accessModes"),
                mode.clone(),
                &MODES,
            ));
        }
    }
    let storage_path = path.child("resources").key("storage");
    match field(spec, "resources")
        .and_then(|r| field(r, "requests"))
        .and_then(|r| field(r, "storage"))
    {
        None => errs.push(FieldError::required(storage_path, "")),
        Some(v) => {
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            match Quantity::parse(&text) {
                Err(e) => errs.push(FieldError::invalid(storage_path, v.clone(), e.to_string())),
                Ok(q) if q.is_negative() || q.is_zero() => errs.push(FieldError::invalid(
                    storage_path,
                    v.clone(),
                    "must be greater than zero",
                )),
                Ok(_) => {}
            }
        }
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

/// A claim's spec is fixed once created, except its requests and binding to a volume.
pub fn validate_persistent_volume_claim_update(new: &Value, old: &Value) -> Vec<FieldError> {
    // A claim that names no class may be given one (upstream's retroactive default class).
    let classless = field(old, "spec")
        .and_then(|s| field(s, "storageClassName"))
        .is_none_or(Value::is_null);
    let strip = |obj: &Value, binding_allowed: bool| {
        let mut spec = normalize(field(obj, "spec").unwrap_or(&Value::Null));
        if let Some(map) = spec.as_object_mut() {
            map.remove("volumeAttributesClassName");
            if binding_allowed {
                map.remove("volumeName");
            }
            if classless {
                map.remove("storageClassName");
            }
            if let Some(resources) = map.get_mut("resources").and_then(Value::as_object_mut) {
                resources.remove("requests");
            }
        }
        spec
    };
    // Binding (setting volumeName on an unbound claim) is allowed, as upstream allows it.
    let unbound = field(old, "spec")
        .and_then(|s| str_field(s, "volumeName"))
        .unwrap_or_default()
        .is_empty();
    if strip(new, unbound) == strip(old, unbound) {
        vec![]
    } else {
        vec![FieldError::forbidden(
            Path::new("spec"),
            PVC_UPDATE_FORBIDDEN,
        )]
    }
}

/// A Lease: durations positive, transitions not negative.
pub fn validate_lease(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    if let Some(duration) = super::int_field(&mut errs, spec, "leaseDurationSeconds", &path)
        && duration <= 0
    {
        errs.push(FieldError::invalid(
            path.child("leaseDurationSeconds"),
            Value::from(duration),
            "must be greater than 0",
        ));
    }
    super::nonnegative(&mut errs, spec, "leaseTransitions", &path);
    errs
}

/// A ReplicationController: a selector (defaulted from the template) that matches its template,
/// whose pods restart Always.
pub fn validate_replication_controller(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    super::nonnegative(&mut errs, spec, "replicas", &path);
    let selector = field(spec, "selector").and_then(Value::as_object);
    if selector.is_none_or(|s| s.is_empty()) {
        errs.push(FieldError::required(path.child("selector"), ""));
    }
    let template = field(spec, "template");
    let template_path = path.child("template");
    if let (Some(selector), Some(labels)) = (
        selector,
        template
            .and_then(|t| field(t, "metadata"))
            .and_then(|m| field(m, "labels"))
            .and_then(Value::as_object),
    ) && !selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        errs.push(FieldError::invalid(
            template_path.child("metadata").child("labels"),
            Value::Object(labels.clone()),
            "`selector` does not match template `labels`",
        ));
    }
    errs.extend(pod::validate_template(template, &template_path, &[]));
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn namespaces() {
        assert!(
            validate_namespace(
                &json!({"metadata": {"name": "team-a"}, "spec": {"finalizers": ["kubernetes"]}})
            )
            .is_empty()
        );
        assert_eq!(
            strings(validate_namespace(
                &json!({"metadata": {"name": "team-a"}, "spec": {"finalizers": ["custom"]}})
            )),
            vec![
                "spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
        assert_eq!(
            validate_namespace(&json!({"metadata": {"name": "team.a"}})).len(),
            1
        );
    }

    #[test]
    fn nodes() {
        let node =
            |taints: Value| json!({"metadata": {"name": "node-1"}, "spec": {"taints": taints}});
        assert!(validate_node(&node(json!([{"key": "gpu", "effect": "NoSchedule"}]))).is_empty());
        assert_eq!(
            strings(validate_node(&node(
                json!([{"key": "gpu", "effect": "Sometimes"}])
            ))),
            vec![
                "spec.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
            ]
        );
        assert_eq!(
            strings(validate_node(&node(json!([{"key": "gpu"}])))),
            vec!["spec.taints[0].effect: Required value"]
        );
        let dup = strings(validate_node(&node(
            json!([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]),
        )));
        assert_eq!(dup.len(), 1);
        assert!(dup[0].starts_with("spec.taints[1]: Duplicate value: "));
        assert!(dup[0].ends_with(": taints must be unique by key and effect pair"));
    }

    #[test]
    fn events() {
        let event = |ns: &str, involved: Value| json!({"metadata": {"name": "e.1", "namespace": ns}, "involvedObject": involved});
        assert!(
            validate_event(&event("default", json!({"kind": "Node", "name": "n1"}))).is_empty()
        );
        assert!(
            validate_event(&event("apps", json!({"kind": "Pod", "namespace": "apps"}))).is_empty()
        );
        assert_eq!(
            strings(validate_event(&event(
                "apps",
                json!({"kind": "Pod", "namespace": "other"})
            ))),
            vec![
                "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"
            ]
        );
    }

    #[test]
    fn claims() {
        let claim =
            |spec: Value| json!({"metadata": {"name": "data", "namespace": "d"}, "spec": spec});
        let good = claim(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}),
        );
        assert!(validate_persistent_volume_claim(&good).is_empty());
        assert_eq!(
            strings(validate_persistent_volume_claim(&claim(
                json!({"resources": {"requests": {"storage": "0"}}})
            ))),
            vec![
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
            ]
        );
        assert_eq!(
            strings(validate_persistent_volume_claim(&claim(
                json!({"accessModes": ["ReadWriteOnce"]})
            ))),
            vec!["spec.resources[storage]: Required value"]
        );

        let mut resized = good.clone();
        resized["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(validate_persistent_volume_claim_update(&resized, &good).is_empty());
        let mut bound = good.clone();
        bound["spec"]["volumeName"] = json!("pv-1");
        assert!(validate_persistent_volume_claim_update(&bound, &good).is_empty());
        let mut rebound = bound.clone();
        rebound["spec"]["volumeName"] = json!("pv-2");
        assert_eq!(
            strings(validate_persistent_volume_claim_update(&rebound, &bound)),
            vec![format!("spec: Forbidden: {PVC_UPDATE_FORBIDDEN}")]
        );
        let mut classed = good.clone();
        classed["spec"]["storageClassName"] = json!("standard");
        assert!(validate_persistent_volume_claim_update(&classed, &good).is_empty());
        let mut reclassed = classed.clone();
        reclassed["spec"]["storageClassName"] = json!("fast");
        assert_eq!(
            strings(validate_persistent_volume_claim_update(
                &reclassed, &classed
            )),
            vec![format!("spec: Forbidden: {PVC_UPDATE_FORBIDDEN}")]
        );
    }

    #[test]
    fn leases() {
        let lease = |spec: Value| json!({"metadata": {"name": "kube-scheduler", "namespace": "kube-system"}, "spec": spec});
        assert!(
            validate_lease(&lease(
                json!({"leaseDurationSeconds": 15, "leaseTransitions": 0})
            ))
            .is_empty()
        );
        assert_eq!(
            strings(validate_lease(&lease(json!({"leaseDurationSeconds": 0})))),
            vec!["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
        );
        assert_eq!(
            strings(validate_lease(&lease(json!({"leaseTransitions": -1})))),
            vec!["spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"]
        );
    }
}
