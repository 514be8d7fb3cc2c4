//! Defaults and validation of stored policies and bindings, as upstream's
//! `pkg/apis/admissionregistration/v1beta1/defaults.go` and `validation/validation.go` (the
//! checks a client meets most; expressions are parsed, not type-checked).

use api::field::FieldError;
use serde_json::{Value, json};

use super::expression::compile_error;

fn default_match_resources(mr: &mut Value) {
    let Some(mr) = mr.as_object_mut() else { return };
    mr.entry("matchPolicy")
        .or_insert_with(|| json!("Equivalent"));
    mr.entry("namespaceSelector").or_insert_with(|| json!({}));
    mr.entry("objectSelector").or_insert_with(|| json!({}));
}

/// A ValidatingAdmissionPolicy's defaults: `failurePolicy: Fail`, and `matchConstraints`'
/// match policy and selectors.
pub(crate) fn default_policy(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("failurePolicy").or_insert_with(|| json!("Fail"));
    if let Some(mr) = spec.get_mut("matchConstraints") {
        default_match_resources(mr);
    }
}

/// A binding's defaults: `matchResources`' match policy and selectors.
pub(crate) fn default_binding(obj: &mut Value) {
    if let Some(mr) = obj.pointer_mut("/spec/matchResources") {
        default_match_resources(mr);
    }
}

fn entries<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// An expression that must be there and parse.
fn expression(errs: &mut Vec<FieldError>, path: String, source: &str) {
    if source.trim().is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if let Some(why) = compile_error(source) {
        errs.push(FieldError::invalid(
            path,
            json!(source),
            format!("compilation failed: {why}"),
        ));
    }
}

/// A ValidatingAdmissionPolicy's validation.
pub(crate) fn validate_policy(obj: &Value) -> Vec<FieldError> {
    let mut errs = api::validation::meta::validate_cluster_scoped(obj);
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match spec.get("failurePolicy").and_then(Value::as_str) {
        None => errs.push(FieldError::required("spec.failurePolicy", "")),
        Some("Fail" | "Ignore") => {}
        Some(other) => errs.push(FieldError::not_supported(
            "spec.failurePolicy",
            json!(other),
            &["Fail", "Ignore"],
        )),
    }
    match spec.get("matchConstraints") {
        None | Some(Value::Null) => errs.push(FieldError::required("spec.matchConstraints", "")),
        Some(mc) if entries(mc, "resourceRules").is_empty() => errs.push(FieldError::required(
            "spec.matchConstraints.resourceRules",
            "",
        )),
        Some(_) => {}
    }
    let validations = entries(spec, "validations");
    let audit_annotations = entries(spec, "auditAnnotations");
    if validations.is_empty() && audit_annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", why));
        errs.push(FieldError::required("spec.auditAnnotations", why));
    }
    for (i, v) in validations.iter().enumerate() {
        let path = format!("spec.validations[{i}]");
        expression(
            &mut errs,
            format!("{path}.expression"),
            text(v, "expression"),
        );
        let message = text(v, "messageExpression");
        if !message.is_empty() {
            expression(&mut errs, format!("{path}.messageExpression"), message);
        }
        if let Some(reason) = v.get("reason").and_then(Value::as_str) {
            let supported = [
                "Unauthorized",
                "Forbidden",
                "Invalid",
                "RequestEntityTooLarge",
            ];
            if !supported.contains(&reason) {
                errs.push(FieldError::not_supported(
                    format!("{path}.reason"),
                    json!(reason),
                    &supported,
                ));
            }
        }
    }
    for (i, a) in audit_annotations.iter().enumerate() {
        expression(
            &mut errs,
            format!("spec.auditAnnotations[{i}].valueExpression"),
            text(a, "valueExpression"),
        );
    }
    for (list, what) in [
        ("matchConditions", "expression"),
        ("variables", "expression"),
    ] {
        for (i, c) in entries(spec, list).iter().enumerate() {
            expression(&mut errs, format!("spec.{list}[{i}].{what}"), text(c, what));
        }
    }
    errs
}

/// A ValidatingAdmissionPolicyBinding's validation.
pub(crate) fn validate_binding(obj: &Value) -> Vec<FieldError> {
    let mut errs = api::validation::meta::validate_cluster_scoped(obj);
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if text(spec, "policyName").is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    }
    let actions = entries(spec, "validationActions");
    if actions.is_empty() {
        errs.push(FieldError::required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let a = a.as_str().unwrap_or_default();
        let path = format!("spec.validationActions[{i}]");
        if !["Deny", "Warn", "Audit"].contains(&a) {
            errs.push(FieldError::not_supported(
                path,
                json!(a),
                &["Audit", "Deny", "Warn"],
            ));
        } else if seen.contains(&a) {
            errs.push(FieldError::duplicate(path, json!(a)));
        }
        seen.push(a);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        errs.push(FieldError::invalid(
            "spec.validationActions",
            json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if let Some(pr) = spec.get("paramRef").filter(|p| !p.is_null()) {
        let named = !text(pr, "name").is_empty();
        let selected = pr.get("selector").is_some_and(|s| !s.is_null());
        let exclusive = "name and selector are mutually exclusive";
        if named && selected {
            errs.push(FieldError::forbidden("spec.paramRef.name", exclusive));
            errs.push(FieldError::forbidden("spec.paramRef.selector", exclusive));
        } else if !named && !selected {
            errs.push(FieldError::required(
                "spec.paramRef",
                "one of name or selector must be specified",
            ));
        }
        match pr.get("parameterNotFoundAction").and_then(Value::as_str) {
            None | Some("") => errs.push(FieldError::required(
                "spec.paramRef.parameterNotFoundAction",
                "",
            )),
            Some("Deny" | "Allow") => {}
            Some(other) => errs.push(FieldError::not_supported(
                "spec.paramRef.parameterNotFoundAction",
                json!(other),
                &["Deny", "Allow"],
            )),
        }
    }
    errs
}
