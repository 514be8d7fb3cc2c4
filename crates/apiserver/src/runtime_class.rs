//! Upstream's RuntimeClass admission plugin (`plugin/pkg/admission/runtimeclass`), for new pods
//! that name a `runtimeClassName`: the class must exist, its `overhead.podFixed` becomes the
//! pod's `spec.overhead` (a pod that sets another overhead, or sets one the class lacks, is
//! refused), and its `scheduling` adds node-selector terms and tolerations.

use api::quota::resources::{self, Amount, ResourceList};
use serde_json::{Map, Value, json};

use crate::{
    error::{ApiError, ApiResult},
    state::ApiServer,
};

/// Admits a new pod; `requested` names it in messages.
pub(crate) fn admit_pod(server: &ApiServer, requested: &str, pod: &mut Value) -> ApiResult<()> {
    let forbidden =
        |why: &str| ApiError::forbidden(format!("pods \"{requested}\" is forbidden: {why}"));
    let class = match pod
        .pointer("/spec/runtimeClassName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        None => None,
        Some(name) => {
            let def = server
                .registry()
                .find("node.k8s.io", "v1", "runtimeclasses")
                .ok_or_else(|| ApiError::internal("no runtimeclasses kind"))?;
            match server.cache.get(&def, None, name) {
                Some(e) => Some(e.value()),
                None => {
                    return Err(forbidden(&format!(
                        "pod rejected: RuntimeClass {name:?} not found"
                    )));
                }
            }
        }
    };
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let fixed = class
        .as_ref()
        .and_then(|c| c.pointer("/overhead/podFixed"))
        .filter(|o| !o.is_null());
    match (fixed, spec.get("overhead").filter(|o| !o.is_null())) {
        (Some(fixed), Some(given)) if !same_quantities(fixed, given) => {
            return Err(forbidden(
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
            ));
        }
        (None, Some(_)) => {
            return Err(forbidden(
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
            ));
        }
        (Some(fixed), _) => {
            spec.insert("overhead".into(), fixed.clone());
        }
        (None, None) => {}
    }
    let Some(scheduling) = class.as_ref().and_then(|c| c.get("scheduling")) else {
        return Ok(());
    };
    if let Some(Value::Object(terms)) = scheduling.get("nodeSelector") {
        let selector = spec
            .entry("nodeSelector")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(selector) = selector {
            for (k, v) in terms {
                match selector.get(k) {
                    Some(given) if given != v => {
                        return Err(forbidden(&format!(
                            "conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                            v.as_str().unwrap_or_default(),
                            given.as_str().unwrap_or_default()
                        )));
                    }
                    _ => {
                        selector.insert(k.clone(), v.clone());
                    }
                }
            }
        }
    }
    if let Some(Value::Array(add)) = scheduling.get("tolerations") {
        let list = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Value::Array(list) = list {
            for t in add {
                if !list.contains(t) {
                    list.push(t.clone());
                }
            }
        }
    }
    Ok(())
}

/// Whether two resource lists hold the same amounts (`1000m` equals `1`), as upstream's
/// semantic equality compares them.
fn same_quantities(a: &Value, b: &Value) -> bool {
    let parse = |v: &Value| -> Option<ResourceList> {
        v.as_object()?
            .iter()
            .map(|(k, q)| Some((k.clone(), Amount::parse(q.as_str()?).ok()?)))
            .collect()
    };
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => resources::equals(&x, &y),
        _ => a == b,
    }
}

/// Upstream's `RuntimeClass` admission plugin, for new pods.
pub(crate) const RUNTIME_CLASS: crate::plugins::PodDefaulting = crate::plugins::PodDefaulting {
    name: "RuntimeClass",
    admit: |server, review, pod| admit_pod(server, review.name, pod),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_amounts_in_other_units_are_the_same_overhead() {
        assert!(same_quantities(
            &json!({"cpu": "1", "memory": "1Gi"}),
            &json!({"cpu": "1000m", "memory": "1024Mi"})
        ));
        assert!(!same_quantities(&json!({"cpu": "1"}), &json!({"cpu": "2"})));
    }
}
