//! node.k8s.io/v1 RuntimeClasses (upstream's `ValidateRuntimeClass`): a handler that names a CRI
//! runtime configuration, so a DNS label, and never changes.

use super::{field, meta, names, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// A RuntimeClass on create.
pub fn validate_runtime_class(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::name_is_dns_subdomain);
    match str_field(obj, "handler") {
        None | Some("") => errs.push(FieldError::required(Path::new("handler"), "")),
        Some(h) => {
            for msg in names::dns1123_label(h) {
                errs.push(FieldError::invalid(
                    Path::new("handler"),
                    Value::from(h),
                    msg,
                ));
            }
        }
    }
    if let Some(overhead) = field(obj, "overhead").and_then(|o| field(o, "podFixed"))
        && !overhead.is_object()
    {
        errs.push(FieldError::invalid(
            Path::new("overhead").child("podFixed"),
            overhead.clone(),
            "must be a map of resource names to quantities",
        ));
    }
    errs
}

/// What a RuntimeClass update may not change (the create checks run as well): the handler.
pub fn validate_runtime_class_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if field(new, "handler") != field(old, "handler") {
        errs.push(FieldError::invalid(
            Path::new("handler"),
            field(new, "handler").cloned().unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::messages;
    use serde_json::json;

    #[test]
    fn the_handler_is_a_required_immutable_dns_label() {
        let ok = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
        assert!(validate_runtime_class(&ok).is_empty());
        assert_eq!(
            messages(validate_runtime_class(&json!({"metadata": {"name": "x"}}))),
            ["handler: Required value"]
        );
        assert!(
            !validate_runtime_class(&json!({"metadata": {"name": "x"}, "handler": "Bad_Handler"}))
                .is_empty()
        );
        let changed = json!({"metadata": {"name": "gvisor"}, "handler": "kata"});
        assert_eq!(
            messages(validate_runtime_class_update(&changed, &ok)),
            ["handler: Invalid value: \"kata\": field is immutable"]
        );
    }
}
