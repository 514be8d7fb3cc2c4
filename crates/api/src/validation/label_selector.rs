//! Label selectors as validation needs them: syntax checks with upstream's messages, and a small
//! matcher to tell whether a workload's selector selects its own template.
//!
//! Kept local rather than shared with `crate::selector` so that validation has no dependency on
//! the query-side selector machinery; it only needs `matchLabels`/`matchExpressions` semantics.

use super::{field, items, meta, names, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// A selector reduced to what matching needs.
#[derive(Debug, PartialEq)]
pub(super) enum Selector {
    /// An absent selector selects nothing (upstream `labels.Nothing()`).
    Nothing,
    /// All requirements must hold; none at all selects everything.
    All(Vec<Requirement>),
}

#[derive(Debug, PartialEq)]
pub(super) struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

#[derive(Debug, PartialEq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    /// Turns a `metav1.LabelSelector` into requirements, failing where upstream's
    /// `LabelSelectorAsSelector` fails (bad operator, values that contradict it, bad keys or values).
    pub(super) fn parse(v: Option<&Value>) -> Result<Self, ()> {
        let Some(v) = v else {
            return Ok(Selector::Nothing);
        };
        let mut reqs = Vec::new();
        if let Some(labels) = field(v, "matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value.as_str().ok_or(())?;
                if !names::qualified_name(key).is_empty() || !names::label_value(value).is_empty() {
                    return Err(());
                }
                reqs.push(Requirement {
                    key: key.clone(),
                    op: Op::In,
                    values: vec![value.to_string()],
                });
            }
        }
        for expr in items(v, "matchExpressions") {
            let key = str_field(expr, "key").unwrap_or_default().to_string();
            let values: Vec<String> = items(expr, "values")
                .iter()
                .map(|x| x.as_str().map(str::to_string).ok_or(()))
                .collect::<Result<_, _>>()?;
            let op = match str_field(expr, "operator") {
                Some("In") => Op::In,
                Some("NotIn") => Op::NotIn,
                Some("Exists") => Op::Exists,
                Some("DoesNotExist") => Op::DoesNotExist,
                _ => return Err(()),
            };
            let needs_values = matches!(op, Op::In | Op::NotIn);
            if needs_values == values.is_empty()
                || !names::qualified_name(&key).is_empty()
                || values.iter().any(|x| !names::label_value(x).is_empty())
            {
                return Err(());
            }
            reqs.push(Requirement { key, op, values });
        }
        Ok(Selector::All(reqs))
    }

    /// Whether the selector has no requirements (and so selects everything).
    pub(super) fn is_empty(&self) -> bool {
        matches!(self, Selector::All(reqs) if reqs.is_empty())
    }

    /// Whether a label map (`metadata.labels`, possibly absent) is selected.
    pub(super) fn matches(&self, labels: Option<&Value>) -> bool {
        let Selector::All(reqs) = self else {
            return false;
        };
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        reqs.iter().all(|r| match r.op {
            Op::In => label(&r.key).is_some_and(|v| r.values.iter().any(|x| x == v)),
            Op::NotIn => label(&r.key).is_none_or(|v| !r.values.iter().any(|x| x == v)),
            Op::Exists => label(&r.key).is_some(),
            Op::DoesNotExist => label(&r.key).is_none(),
        })
    }
}

/// Upstream's `ValidateLabelSelector` (strict: label values in expressions are checked too).
pub(super) fn validate(v: Option<&Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(v) = v else { return errs };
    errs.extend(meta::validate_labels(
        field(v, "matchLabels"),
        &path.child("matchLabels"),
    ));
    for (i, expr) in items(v, "matchExpressions").iter().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let values = items(expr, "values");
        match str_field(expr, "operator") {
            Some("In" | "NotIn") => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            Some("Exists" | "DoesNotExist") => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(
                p.child("operator"),
                field(expr, "operator")
                    .cloned()
                    .unwrap_or(Value::String(String::new())),
                "not a valid selector operator",
            )),
        }
        errs.extend(meta::validate_label_name(
            str_field(expr, "key").unwrap_or_default(),
            &p.child("key"),
        ));
        for (j, value) in values.iter().enumerate() {
            for msg in names::label_value(value.as_str().unwrap_or_default()) {
                errs.push(FieldError::invalid(
                    p.child("values").index(j),
                    value.clone(),
                    msg,
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_labels_and_expressions() {
        let labels = json!({"app": "web", "tier": "front"});
        let cases: Vec<(Option<Value>, bool)> = vec![
            (None, false),
            (Some(json!({})), true),
            (Some(json!({"matchLabels": {"app": "web"}})), true),
            (Some(json!({"matchLabels": {"app": "db"}})), false),
            (
                Some(
                    json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
                ),
                true,
            ),
            (
                Some(
                    json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                ),
                false,
            ),
            (
                Some(
                    json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
                ),
                true,
            ),
            (
                Some(json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]})),
                true,
            ),
            (
                Some(json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})),
                false,
            ),
        ];
        for (selector, want) in cases {
            let parsed = Selector::parse(selector.as_ref()).unwrap();
            assert_eq!(parsed.matches(Some(&labels)), want, "{selector:?}");
        }
    }

    #[test]
    fn rejects_what_upstream_cannot_convert() {
        for bad in [
            json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchLabels": {"-a": "x"}}),
        ] {
            assert!(Selector::parse(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn validates_with_upstream_paths() {
        let errs = validate(
            Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Bad"}]}),
            ),
            &Path::new("spec").child("selector"),
        );
        let got: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            vec![
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[1].operator: Invalid value: \"Bad\": not a valid selector operator",
            ]
        );
    }
}
