//! policy/v1 PodDisruptionBudgets (upstream's `ValidatePodDisruptionBudgetSpec`).

use super::{apps, field, label_selector, meta, names};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// A PodDisruptionBudget: `minAvailable` or `maxUnavailable` (not both), each a non-negative
/// number or a percentage up to 100%, and a valid selector.
pub fn validate_pod_disruption_budget(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let (min, max) = (field(spec, "minAvailable"), field(spec, "maxUnavailable"));
    if min.is_some() && max.is_some() {
        errs.push(FieldError::invalid(
            &path,
            spec.clone(),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (key, v) in [("minAvailable", min), ("maxUnavailable", max)] {
        if let Some(v) = v {
            let p = path.child(key);
            let checked = apps::int_or_percent(&mut errs, Some(v), &p);
            if checked.raw < 0 {
                errs.push(FieldError::invalid(
                    &p,
                    v.clone(),
                    "must be greater than or equal to 0",
                ));
            }
            apps::not_more_than_100_percent(&mut errs, &checked, Some(v), &p);
        }
    }
    errs.extend(label_selector::validate(
        field(spec, "selector"),
        &path.child("selector"),
    ));
    if let Some(policy) = field(spec, "unhealthyPodEvictionPolicy").and_then(Value::as_str) {
        errs.extend(super::pod::one_of(
            path.child("unhealthyPodEvictionPolicy"),
            policy,
            &["IfHealthyBudget", "AlwaysAllow"],
        ));
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_of_min_and_max() {
        let pdb = |spec: Value| json!({"metadata": {"name": "p", "namespace": "d"}, "spec": spec});
        assert!(
            validate_pod_disruption_budget(&pdb(
                json!({"maxUnavailable": 1, "selector": {"matchLabels": {"a": "b"}}})
            ))
            .is_empty()
        );
        let both = validate_pod_disruption_budget(&pdb(
            json!({"maxUnavailable": 1, "minAvailable": "50%"}),
        ));
        assert_eq!(both.len(), 1);
        assert!(
            both[0]
                .to_string()
                .ends_with("minAvailable and maxUnavailable cannot be both set")
        );
        let over = validate_pod_disruption_budget(&pdb(json!({"minAvailable": "150%"})));
        assert_eq!(
            over[0].to_string(),
            "spec.minAvailable: Invalid value: 150%: must not be greater than 100%"
        );
    }
}
