//! apiextensions.k8s.io/v1 CustomResourceDefinitions: validated, Established at once, and their
//! kinds added to the registry the moment they are written (and removed with them).

use api::field::FieldError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::{Generation, Kind, Registry, Reset, Strategy, Subresource, custom};
use crate::object;

/// The apiextensions.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<CustomResourceDefinition>()
            .short_names(&["crd", "crds"])
            .categories(&["api-extensions"])
            .subresources(&[Subresource::Status])
            .strategy(DefinitionStrategy),
    ]
}

/// Whether `def` is the CustomResourceDefinition kind.
pub fn is_definition(def: &Kind) -> bool {
    def.is("apiextensions.k8s.io", "CustomResourceDefinition")
}

/// Serves what `crd` defines (replacing what an earlier version of it defined); a definition
/// being deleted serves nothing.
pub fn register(registry: &Registry, crd: &Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    registry.remove(group, plural);
    if object::is_deleting(crd) {
        return;
    }
    for kind in custom::kinds_of(crd) {
        registry.register(kind);
    }
}

/// Serves the definitions already stored (at start, before the watch cache fills, so that the
/// custom resources stored with them are recognized).
pub async fn register_stored(
    registry: &Registry,
    store: &dyn store::Store,
) -> Result<(), store::StoreError> {
    let (items, _) = store
        .list("/registry/apiextensions.k8s.io/customresourcedefinitions/")
        .await?;
    for kv in items {
        if let Ok(crd) = serde_json::from_slice::<Value>(&kv.value) {
            register(registry, &crd);
        }
    }
    Ok(())
}

/// Stops serving what `crd` defined.
pub fn unregister(registry: &Registry, crd: &Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    registry.remove(group, plural);
}

/// Upstream's `pkg/registry/customresourcedefinition/strategy.go`, plus the naming and
/// establishing controllers' verdicts, given at once.
struct DefinitionStrategy;

impl Strategy for DefinitionStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = established(obj, &Value::Null);
    }

    fn defaults(&self, obj: &mut Value) {
        if !obj["spec"].is_object() {
            return;
        }
        let spec = &mut obj["spec"];
        if spec.get("conversion").is_none_or(Value::is_null) {
            spec["conversion"] = json!({"strategy": "None"});
        }
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if !kind.is_empty() {
                names
                    .entry("singular")
                    .or_insert_with(|| json!(kind.to_lowercase()));
                names
                    .entry("listKind")
                    .or_insert_with(|| json!(format!("{kind}List")));
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_definition(obj)
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }

    fn status_resets(&self) -> &'static [Reset] {
        // "Status updates are for only for updating status, not objectmeta."
        &[
            Reset::Spec,
            Reset::Labels,
            Reset::Annotations,
            Reset::OwnerReferences,
        ]
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        new["status"] = established(new, &old["status"]);
    }
}

/// The status of an accepted definition, from its status before (`Null` for a new one): its
/// names accepted, Established, the storage version added to the stored ones. The conditions are
/// set as upstream's naming and establishing controllers set them (`SetCRDCondition`): a
/// condition keeps its `lastTransitionTime` unless its status changes, so a write that changes
/// nothing about them (a label, a repeated apply) leaves the status as it was.
fn established(crd: &Value, before: &Value) -> Value {
    let mut stored_versions: Vec<Value> = before["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
        if v["storage"].as_bool() == Some(true) && !stored_versions.contains(&v["name"]) {
            stored_versions.push(v["name"].clone());
        }
    }
    let mut conditions: Vec<Value> = before["conditions"].as_array().cloned().unwrap_or_default();
    let now = object::now_rfc3339();
    set_condition(
        &mut conditions,
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
               "message": "no conflicts found"}),
        &now,
    );
    set_condition(
        &mut conditions,
        json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
               "message": "the initial names have been accepted"}),
        &now,
    );
    json!({
        "acceptedNames": crd["spec"]["names"],
        "conditions": conditions,
        "storedVersions": stored_versions,
    })
}

/// Upstream's `SetCRDCondition`: a new condition is appended with the time `now`; an existing one
/// takes the new status, reason and message, and `now` as its `lastTransitionTime` only if its
/// status changed (or it had no time).
fn set_condition(conditions: &mut Vec<Value>, new: Value, now: &str) {
    let existing = conditions
        .iter_mut()
        .find(|c| c["type"] == new["type"] && c.is_object());
    let time = existing
        .as_ref()
        .and_then(|c| {
            c.get("lastTransitionTime")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty() && c["status"] == new["status"])
        })
        .unwrap_or(now)
        .to_string();
    // In upstream's field order.
    let condition = json!({
        "type": new["type"], "status": new["status"], "lastTransitionTime": time,
        "reason": new["reason"], "message": new["message"],
    });
    match existing {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

/// The rules clients trip over (upstream's `ValidateCustomResourceDefinition`): the name is
/// `<plural>.<group>`, names are set, exactly one storage version, a known scope.
fn validate_definition(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let name = object::name(obj);
    // Upstream's name rule for definitions: a DNS subdomain, and `<plural>.<group>`.
    let mut name_errors = api::validation::meta::name_is_dns_subdomain(name, false);
    if name != format!("{plural}.{group}") {
        name_errors.push("must be spec.names.plural+\".\"+spec.group".to_string());
    }
    // An empty name is reported as missing, not as malformed.
    if !name.is_empty() {
        for msg in name_errors {
            errs.push(FieldError::invalid("metadata.name", json!(name), msg));
        }
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid(
            "spec.group",
            json!(group),
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if spec["names"]["kind"].as_str().is_none_or(str::is_empty) {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    match spec["scope"].as_str().unwrap_or_default() {
        "Namespaced" | "Cluster" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            json!(other),
            &["Cluster", "Namespaced"],
        )),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions.clone()),
            "must have exactly one version marked as storage version",
        ));
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `SetCRDCondition`'s table: a new condition gets the time now, a changed status moves the
    /// time, an unchanged one keeps it while reason and message follow, a missing time is set.
    #[test]
    fn a_condition_time_moves_only_with_its_status() {
        let cond = |status: &str, reason: &str, time: Option<&str>| {
            let mut c = json!({"type": "Established", "status": status, "reason": reason,
                "message": "m"});
            if let Some(t) = time {
                c["lastTransitionTime"] = json!(t);
            }
            c
        };
        let (then, now) = ("2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z");
        for (before, new, want) in [
            (None, cond("True", "A", None), now),
            (
                Some(cond("True", "A", Some(then))),
                cond("True", "B", None),
                then,
            ),
            (
                Some(cond("False", "A", Some(then))),
                cond("True", "A", None),
                now,
            ),
            (Some(cond("True", "A", None)), cond("True", "A", None), now),
            (
                Some(cond("True", "A", Some(""))),
                cond("True", "A", None),
                now,
            ),
        ] {
            let mut conditions: Vec<Value> = before.clone().into_iter().collect();
            conditions.insert(0, json!({"type": "Other", "status": "True"}));
            set_condition(&mut conditions, new.clone(), now);
            assert_eq!(conditions.len(), 2, "{before:?}");
            assert_eq!(conditions[0]["type"], "Other");
            assert_eq!(conditions[1]["lastTransitionTime"], want, "{before:?}");
            assert_eq!(conditions[1]["reason"], new["reason"]);
            assert_eq!(conditions[1]["status"], new["status"]);
        }
    }

    #[test]
    fn definitions_are_established_and_register_their_kinds() {
        let mut crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
            "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        DefinitionStrategy.prepare_for_create(&mut crd);
        DefinitionStrategy.defaults(&mut crd);
        assert!(DefinitionStrategy.validate(&crd).is_empty());
        assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        let registry = Registry::new();
        register(&registry, &crd);
        assert!(registry.find("example.com", "v1", "widgets").is_some());
        unregister(&registry, &crd);
        assert!(registry.find("example.com", "v1", "widgets").is_none());
        let mut wrong = crd.clone();
        wrong["metadata"]["name"] = json!("widget");
        assert_eq!(
            DefinitionStrategy.validate(&wrong)[0].to_string(),
            "metadata.name: Invalid value: \"widget\": must be spec.names.plural+\".\"+spec.group"
        );
    }
}
