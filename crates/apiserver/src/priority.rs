//! Upstream's Priority admission plugin (`plugin/pkg/admission/priority`), for pods: a new pod's
//! `spec.priority` (and `spec.preemptionPolicy`) come from its `priorityClassName`, or from the
//! global default PriorityClass when it names none (0 without one). The scheduler orders its
//! queue and preempts by that number, so it must be the server's, never the client's.

use crate::{
    error::{ApiError, ApiResult},
    state::ApiServer,
};
use serde_json::{Value, json};

/// What a PriorityClass gives the pods that name it.
struct Class {
    name: String,
    value: i64,
    preemption_policy: Option<String>,
}

impl Class {
    fn from_value(v: &Value) -> Self {
        Self {
            name: v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            value: v["value"].as_i64().unwrap_or(0),
            preemption_policy: v["preemptionPolicy"].as_str().map(str::to_string),
        }
    }
}

/// Sets `spec.priority`, `spec.priorityClassName` and `spec.preemptionPolicy` of a new pod;
/// `requested` is the pod's name or `generateName`, for the messages.
pub(crate) fn admit_pod(server: &ApiServer, requested: &str, pod: &mut Value) -> ApiResult<()> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let forbidden =
        |why: String| ApiError::forbidden(format!("pods \"{requested}\" is forbidden: {why}"));
    let def = server
        .registry()
        .find("scheduling.k8s.io", "v1", "priorityclasses")
        .ok_or_else(|| ApiError::internal("no priorityclasses kind"))?;
    let named = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let class = match named {
        Some(name) => match server.cache.get(&def, None, &name) {
            Some(entry) => Some(Class::from_value(&entry.value())),
            None => {
                return Err(forbidden(format!(
                    "no PriorityClass with name {name} was found"
                )));
            }
        },
        // The global default; of several (a race), the lowest, as upstream's
        // `getDefaultPriorityClass`.
        None => server
            .cache
            .list(&def, None)
            .0
            .iter()
            .map(|e| e.value())
            .filter(|v| v["globalDefault"].as_bool() == Some(true))
            .map(|v| Class::from_value(&v))
            .min_by_key(|c| c.value),
    };
    let priority = class.as_ref().map_or(0, |c| c.value);
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(forbidden(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        )));
    }
    spec.insert("priority".into(), json!(priority));
    let Some(class) = class else {
        // No class and no default one: upstream's `getDefaultPriority` gives 0 and
        // PreemptLowerPriority.
        return set_policy(spec, "PreemptLowerPriority", &forbidden);
    };
    spec.insert("priorityClassName".into(), json!(class.name));
    match class.preemption_policy {
        Some(policy) => set_policy(spec, &policy, &forbidden),
        None => Ok(()),
    }
}

/// Sets the pod's `preemptionPolicy`, refusing one the pod gave otherwise.
fn set_policy(
    spec: &mut serde_json::Map<String, Value>,
    policy: &str,
    forbidden: &dyn Fn(String) -> ApiError,
) -> ApiResult<()> {
    if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str)
        && given != policy
    {
        return Err(forbidden(format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
        )));
    }
    spec.insert("preemptionPolicy".into(), json!(policy));
    Ok(())
}

/// Upstream's `Priority` admission plugin, for new pods.
pub(crate) const PRIORITY: crate::plugins::PodDefaulting = crate::plugins::PodDefaulting {
    name: "Priority",
    admit: |server, review, pod| admit_pod(server, review.name, pod),
};
