//! apiregistration.k8s.io/v1 APIServices (upstream's `ValidateAPIService`): the name is
//! `<version>.<group>`, priorities are in range, and a service reference is complete.

use super::{field, int_field, meta, names, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// An APIService on create or update.
pub fn validate_api_service(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::path_segment_name);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let group = str_field(spec, "group").unwrap_or_default();
    let version = str_field(spec, "version").unwrap_or_default();
    let name = field(obj, "metadata")
        .and_then(|m| str_field(m, "name"))
        .unwrap_or_default();
    let expected = if group.is_empty() {
        version.to_string()
    } else {
        format!("{version}.{group}")
    };
    if name != expected {
        errs.push(FieldError::invalid(
            Path::new("metadata").child("name"),
            Value::from(name),
            format!("must be `spec.version+\".\"+spec.group`: {expected:?}"),
        ));
    }
    if version.is_empty() {
        errs.push(FieldError::required(path.child("version"), ""));
    } else {
        for msg in names::dns1123_label(version) {
            errs.push(FieldError::invalid(
                path.child("version"),
                Value::from(version),
                msg,
            ));
        }
    }
    if !group.is_empty() {
        for msg in names::dns1123_subdomain(group) {
            errs.push(FieldError::invalid(
                path.child("group"),
                Value::from(group),
                msg,
            ));
        }
    }
    for (key, hi) in [("groupPriorityMinimum", 20_000), ("versionPriority", 1_000)] {
        match int_field(&mut errs, spec, key, &path) {
            Some(n) if n < 1 || n > hi => errs.push(FieldError::invalid(
                path.child(key),
                Value::from(n),
                format!("{key} must be positive and less than {}", hi + 1),
            )),
            Some(_) => {}
            None => errs.push(FieldError::invalid(
                path.child(key),
                Value::from(0),
                format!("{key} must be positive and less than {}", hi + 1),
            )),
        }
    }
    if let Some(service) = field(spec, "service") {
        let sp = path.child("service");
        for key in ["namespace", "name"] {
            if str_field(service, key).is_none_or(str::is_empty) {
                errs.push(FieldError::required(sp.child(key), ""));
            }
        }
        if field(spec, "insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true)
            && field(spec, "caBundle").is_some()
        {
            errs.push(FieldError::invalid(
                path.child("insecureSkipTLSVerify"),
                Value::from(true),
                "may not be true if caBundle is present",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_name_joins_version_and_group_and_priorities_are_in_range() {
        let ok = json!({"metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"group": "wardle.example.com", "version": "v1alpha1",
                "groupPriorityMinimum": 2000, "versionPriority": 200,
                "service": {"namespace": "ns", "name": "api"}}});
        assert!(
            validate_api_service(&ok).is_empty(),
            "{:?}",
            validate_api_service(&ok)
        );
        let mut bad = ok.clone();
        bad["metadata"]["name"] = json!("wardle");
        bad["spec"]["versionPriority"] = json!(0);
        bad["spec"]["service"] = json!({"namespace": "ns"});
        assert_eq!(validate_api_service(&bad).len(), 3);
    }
}
