//! ResourceQuota validation (upstream's `ValidateResourceQuota`, `ValidateResourceQuotaUpdate`
//! and `ValidateResourceQuotaStatusUpdate`) and the resource-name rules quota shares with
//! container resources (native, extended, standard, integer names).

use super::{field, meta, names};
use crate::{
    field::{FieldError, Path},
    quantity::Quantity,
};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

const NEGATIVE: &str = "must be greater than or equal to 0";
const NOT_INTEGER: &str = "must be an integer";
const NOT_QUOTA_RESOURCE: &str = "must be a standard resource for quota";

/// Resources quota knows by their short names (upstream's `standardQuotaResources`).
const STANDARD_QUOTA: [&str; 19] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// Resources measured in whole numbers (upstream's `integerResources`).
const INTEGER: [&str; 9] = [
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

const SCOPES: [&str; 6] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// Scopes that only pods' count and compute resources may be limited under.
const POD_COMPUTE: [&str; 6] = [
    "cpu",
    "memory",
    "limits.cpu",
    "limits.memory",
    "requests.cpu",
    "requests.memory",
];

/// Whether a resource name is in the `kubernetes.io` namespace (unprefixed names are).
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Whether a name is an extended resource (`example.com/dongle`): prefixed outside
/// `kubernetes.io`, not `requests.`, and a qualified name once prefixed with `requests.`.
pub fn is_extended_resource_name(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && names::qualified_name(&format!("requests.{name}")).is_empty()
}

fn is_huge_pages_quota(name: &str) -> bool {
    name.starts_with("hugepages-") || name.starts_with("requests.hugepages-")
}

/// Whether quota knows `name` by its short name.
pub fn is_standard_quota_resource_name(name: &str) -> bool {
    STANDARD_QUOTA.contains(&name) || is_huge_pages_quota(name)
}

fn is_standard_resource_name(name: &str) -> bool {
    STANDARD_QUOTA.contains(&name) || name == "storage" || is_huge_pages_quota(name)
}

/// Whether `name` is counted in whole units.
pub fn is_integer_resource_name(name: &str) -> bool {
    INTEGER.contains(&name) || is_extended_resource_name(name)
}

/// Whether a scope may limit `resource` (upstream's `IsResourceQuotaScopeValidForResource`).
fn scope_valid_for(scope: &str, resource: &str) -> bool {
    match scope {
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => resource == "pods" || POD_COMPUTE.contains(&resource),
        "BestEffort" => resource == "pods",
        _ => true,
    }
}

/// A resource name a quota may name (upstream's `ValidateResourceQuotaResourceName`).
fn validate_resource_name(name: &str, path: &Path) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = names::qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path.clone(), Value::from(name), m))
        .collect();
    if !name.contains('/') {
        if errs.is_empty() && !is_standard_resource_name(name) {
            errs.push(FieldError::invalid(
                path.clone(),
                Value::from(name),
                "must be a standard resource type or fully qualified",
            ));
        }
        if !is_standard_quota_resource_name(name) {
            errs.push(FieldError::invalid(
                path.clone(),
                Value::from(name),
                NOT_QUOTA_RESOURCE,
            ));
        }
    }
    errs
}

/// A quantity a quota may hold for `name`: not negative, whole for counted resources.
fn validate_amount(name: &str, value: &Value, path: &Path) -> Vec<FieldError> {
    let text = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string);
    let q = match Quantity::parse(&text) {
        Ok(q) => q,
        Err(e) => {
            return vec![FieldError::invalid(
                path.clone(),
                value.clone(),
                e.to_string(),
            )];
        }
    };
    let mut errs = Vec::new();
    if q.is_negative() {
        errs.push(FieldError::invalid(
            path.clone(),
            Value::from(text.clone()),
            NEGATIVE,
        ));
    }
    if is_integer_resource_name(name) && q.milli_value() % 1000 != 0 {
        errs.push(FieldError::invalid(
            path.clone(),
            Value::from(text),
            NOT_INTEGER,
        ));
    }
    errs
}

/// Every entry of a resource list (`spec.hard`, `status.hard`, `status.used`).
fn validate_list(list: Option<&Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(map) = list.and_then(Value::as_object) {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        for (name, value) in entries {
            let p = path.key(name);
            errs.extend(validate_resource_name(name, &p));
            errs.extend(validate_amount(name, value, &p));
        }
    }
    errs
}

fn hard_names(spec: &Value) -> BTreeSet<String> {
    field(spec, "hard")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The conflicting pairs a quota may not combine.
fn conflicting(scopes: &BTreeSet<&str>) -> bool {
    (scopes.contains("BestEffort") && scopes.contains("NotBestEffort"))
        || (scopes.contains("Terminating") && scopes.contains("NotTerminating"))
}

/// `spec.scopes` (upstream's `validateResourceQuotaScopes`).
fn validate_scopes(spec: &Value, path: &Path) -> Vec<FieldError> {
    let scopes = strings(field(spec, "scopes"));
    if scopes.is_empty() {
        return Vec::new();
    }
    let list = field(spec, "scopes").cloned().unwrap_or(Value::Null);
    let p = path.child("scopes");
    let hard = hard_names(spec);
    let mut errs = Vec::new();
    for scope in &scopes {
        if !SCOPES.contains(scope) {
            errs.push(FieldError::invalid(
                p.clone(),
                list.clone(),
                "unsupported scope",
            ));
        }
        for k in &hard {
            if is_standard_quota_resource_name(k) && !scope_valid_for(scope, k) {
                errs.push(FieldError::invalid(
                    p.clone(),
                    list.clone(),
                    "unsupported scope applied to resource",
                ));
            }
        }
    }
    if conflicting(&scopes.iter().copied().collect()) {
        errs.push(FieldError::invalid(p, list, "conflicting scopes"));
    }
    errs
}

/// `spec.scopeSelector` (upstream's `validateScopedResourceSelectorRequirement`).
fn validate_scope_selector(spec: &Value, path: &Path) -> Vec<FieldError> {
    let Some(selector) = field(spec, "scopeSelector") else {
        return Vec::new();
    };
    let p = path.child("scopeSelector").child("matchExpressions");
    let hard = hard_names(spec);
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    let empty = Vec::new();
    let terms = field(selector, "matchExpressions")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    for term in terms {
        let scope = term
            .get("scopeName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let op = term
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let values = strings(term.get("values"));
        if !SCOPES.contains(&scope) {
            errs.push(FieldError::invalid(
                p.child("scopeName"),
                Value::from(scope),
                "unsupported scope",
            ));
        }
        for k in &hard {
            if is_standard_quota_resource_name(k) && !scope_valid_for(scope, k) {
                errs.push(FieldError::invalid(
                    p.clone(),
                    selector.clone(),
                    "unsupported scope applied to resource",
                ));
            }
        }
        if matches!(
            scope,
            "BestEffort"
                | "NotBestEffort"
                | "Terminating"
                | "NotTerminating"
                | "CrossNamespacePodAffinity"
        ) && op != "Exists"
        {
            errs.push(FieldError::invalid(
                p.child("operator"),
                Value::from(op),
                "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
            ));
        }
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                p.child("values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::invalid(
                p.child("values"),
                term.get("values").cloned().unwrap_or(Value::Null),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => errs.push(FieldError::invalid(
                p.child("operator"),
                Value::from(op),
                "not a valid selector operator",
            )),
        }
        seen.insert(scope);
    }
    if conflicting(&seen) {
        errs.push(FieldError::invalid(
            p,
            field(spec, "scopes").cloned().unwrap_or(Value::Null),
            "conflicting scopes",
        ));
    }
    errs
}

fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let spec = field(obj, "spec").unwrap_or(&empty);
    let path = Path::new("spec");
    let mut errs = validate_list(field(spec, "hard"), &path.child("hard"));
    errs.extend(validate_scopes(spec, &path));
    errs.extend(validate_scope_selector(spec, &path));
    errs
}

fn validate_status(obj: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let status = field(obj, "status").unwrap_or(&empty);
    let path = Path::new("status");
    let mut errs = validate_list(field(status, "hard"), &path.child("hard"));
    errs.extend(validate_list(field(status, "used"), &path.child("used")));
    errs
}

/// A new ResourceQuota: its name, `spec.hard` names and amounts, scopes and scope selector.
pub fn validate_resource_quota(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    errs.extend(validate_spec(obj));
    errs.extend(validate_status(obj));
    errs
}

/// An update of a ResourceQuota: as on create, and its scopes may not change.
pub fn validate_resource_quota_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(new, true, names::name_is_dns_subdomain);
    errs.extend(validate_spec(new));
    let scopes = |o: &Value| -> BTreeSet<String> {
        strings(o.pointer("/spec/scopes"))
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    if scopes(new) != scopes(old) {
        errs.push(FieldError::invalid(
            "spec.scopes",
            new.pointer("/spec/scopes").cloned().unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}

/// A write of a ResourceQuota's status: `status.hard` and `status.used` names and amounts.
pub fn validate_resource_quota_status_update(new: &Value, _old: &Value) -> Vec<FieldError> {
    validate_status(new)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn hard_names_and_amounts() {
        let ok = json!({"metadata": {"name": "q", "namespace": "d"}, "spec": {"hard": {
            "pods": "5", "cpu": "1", "memory": "500Mi", "count/replicasets.apps": "5",
            "requests.example.com/dongle": "3", "gold.storageclass.storage.k8s.io/requests.storage": "10Gi",
            "hugepages-2Mi": "1Gi"}}});
        assert_eq!(
            messages(&validate_resource_quota(&ok)),
            Vec::<String>::new()
        );
        let bad = json!({"metadata": {"name": "q", "namespace": "d"}, "spec": {"hard": {
            "pods": "1500m", "cpu": "-1", "foo": "1"}}});
        assert_eq!(
            messages(&validate_resource_quota(&bad)),
            vec![
                "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.hard[foo]: Invalid value: \"foo\": must be a standard resource type or fully qualified",
                "spec.hard[foo]: Invalid value: \"foo\": must be a standard resource for quota",
                "spec.hard[pods]: Invalid value: \"1500m\": must be an integer",
            ]
        );
    }

    #[test]
    fn scopes_and_selectors() {
        let q = |spec: Value| json!({"metadata": {"name": "q", "namespace": "d"}, "spec": spec});
        assert!(
            validate_resource_quota(&q(json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]})))
                .is_empty()
        );
        let errs =
            validate_resource_quota(&q(json!({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]})));
        assert!(
            messages(&errs)[0].contains("unsupported scope applied to resource"),
            "{errs:?}"
        );
        let errs = validate_resource_quota(&q(
            json!({"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]}),
        ));
        assert!(
            messages(&errs)
                .iter()
                .any(|m| m.contains("conflicting scopes")),
            "{errs:?}"
        );
        let errs = validate_resource_quota(&q(
            json!({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In"}]}}),
        ));
        assert_eq!(
            messages(&errs),
            vec![
                "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"
            ]
        );
        let old = q(json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]}));
        let new = q(json!({"hard": {"pods": "1"}}));
        assert!(
            messages(&validate_resource_quota_update(&new, &old))[0].contains("field is immutable")
        );
    }

    #[test]
    fn resource_name_kinds() {
        assert!(is_extended_resource_name("example.com/dongle"));
        assert!(!is_extended_resource_name("requests.example.com/dongle"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name("kubernetes.io/foo"));
        assert!(is_integer_resource_name("example.com/dongle"));
        assert!(!is_integer_resource_name("requests.example.com/dongle"));
    }
}
