//! Offending values printed the way upstream's messages print them.
//!
//! Upstream formats a bad value with Go's `%#v` when it is a map or struct, so kubectl users see
//! `map[string]string{"app":"x"}` or `v1.LabelSelector{MatchLabels:...}`; tools and tests match
//! on that text. These helpers render our JSON values in the same syntax, and [`invalid_repr`]
//! builds an `Invalid` error whose message carries the rendered value.

use super::{field, items, str_field};
use crate::field::{ErrorType, FieldError, Path};
use serde_json::Value;

/// An `Invalid` error whose value is shown pre-rendered (not JSON-quoted) in the message.
pub(super) fn invalid_repr(path: &Path, repr: String, detail: &str) -> FieldError {
    let detail = if detail.is_empty() {
        repr
    } else {
        format!("{repr}: {detail}")
    };
    FieldError {
        kind: ErrorType::Invalid,
        field: path.into(),
        value: None,
        detail,
    }
}

/// A Go string literal (`%q`); JSON escaping agrees with it for everything names contain.
fn quoted(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// `map[string]string{"a":"b"}` with sorted keys, or `map[string]string(nil)` when absent.
pub(super) fn string_map(v: Option<&Value>) -> String {
    let Some(map) = v.and_then(Value::as_object) else {
        return "map[string]string(nil)".to_string();
    };
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let body: Vec<String> = entries
        .into_iter()
        .map(|(k, v)| {
            format!(
                "{}:{}",
                quoted(k),
                v.as_str().map_or_else(|| v.to_string(), quoted)
            )
        })
        .collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

/// `[]string{"a", "b"}`, or `[]string(nil)` when absent.
pub(super) fn string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]string(nil)".to_string(),
        Some(list) => {
            let body: Vec<String> = list
                .iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), quoted))
                .collect();
            format!("[]string{{{}}}", body.join(", "))
        }
    }
}

/// A `metav1.LabelSelector` as `%#v` prints it.
pub(super) fn label_selector(v: &Value) -> String {
    let expressions = match field(v, "matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(_) => {
            let body: Vec<String> = items(v, "matchExpressions")
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        quoted(str_field(e, "key").unwrap_or_default()),
                        quoted(str_field(e, "operator").unwrap_or_default()),
                        string_slice(field(e, "values"))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", body.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{}}}",
        string_map(field(v, "matchLabels")),
        expressions
    )
}

/// An int-or-string as its `String()` prints it: `3` or `25%`.
pub(super) fn int_or_string(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// A strategy struct rejected as a whole (`apps.DeploymentStrategy{Type:"x", RollingUpdate:...}`).
pub(super) fn strategy(type_name: &str, rolling_type: &str, v: &Value) -> String {
    let rolling = match field(v, "rollingUpdate") {
        None => format!("(*apps.{rolling_type})(nil)"),
        Some(r) => format!("&apps.{rolling_type}{{{}}}", r),
    };
    format!(
        "apps.{type_name}{{Type:{}, RollingUpdate:{rolling}}}",
        quoted(str_field(v, "type").unwrap_or_default())
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_go_syntax() {
        assert_eq!(
            string_map(Some(&json!({"tier": "web", "app": "x"}))),
            r#"map[string]string{"app":"x", "tier":"web"}"#
        );
        assert_eq!(string_map(None), "map[string]string(nil)");
        assert_eq!(string_map(Some(&json!({}))), "map[string]string{}");
        assert_eq!(
            label_selector(&json!({"matchLabels": {"app": "nginx"}})),
            r#"v1.LabelSelector{MatchLabels:map[string]string{"app":"nginx"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
        );
        assert_eq!(
            label_selector(
                &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]})
            ),
            r#"v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"a", Operator:"In", Values:[]string{"x"}}}}"#
        );
        assert_eq!(int_or_string(&json!("25%")), "25%");
        assert_eq!(int_or_string(&json!(0)), "0");
        assert_eq!(
            strategy(
                "DeploymentStrategy",
                "RollingUpdateDeployment",
                &json!({"type": "Foo"})
            ),
            r#"apps.DeploymentStrategy{Type:"Foo", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}"#
        );
        let err = invalid_repr(&Path::new("spec"), "x".into(), "bad");
        assert_eq!(err.to_string(), "spec: Invalid value: x: bad");
    }
}
