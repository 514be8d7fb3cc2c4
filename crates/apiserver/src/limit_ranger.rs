//! Upstream's LimitRanger admission plugin (`plugin/pkg/admission/limitranger`), for new pods:
//! the namespace's LimitRanges fill each container's missing requests and limits from their
//! `Container` items' defaults (noting what they set in the `kubernetes.io/limit-ranger`
//! annotation), then the pod must respect every item's min, max and max limit/request ratio, per
//! container and, for `Pod` items, summed over its containers; otherwise 403 with upstream's
//! messages.

use api::quota::resources::Amount;
use serde_json::{Map, Value, json};

use crate::{
    error::{ApiError, ApiResult},
    server::ApiServer,
};

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Defaults and checks a new pod in namespace `ns`; `requested` names it in messages.
pub(crate) fn admit_pod(
    server: &ApiServer,
    ns: &str,
    requested: &str,
    pod: &mut Value,
) -> ApiResult<()> {
    let Some(def) = server.registry().find("", "v1", "limitranges") else {
        return Ok(());
    };
    let ranges: Vec<Value> = server
        .cache
        .list(&def, Some(ns))
        .0
        .iter()
        .map(|e| e.value())
        .collect();
    if ranges.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = ranges
        .iter()
        .flat_map(|r| {
            r.pointer("/spec/limits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .collect();
    set_defaults(&items, pod);
    let errors = check(&items, pod);
    if errors.is_empty() {
        return Ok(());
    }
    let why = if errors.len() == 1 {
        errors.join("")
    } else {
        format!("[{}]", errors.join(", "))
    };
    Err(ApiError::forbidden(format!(
        "pods \"{requested}\" is forbidden: {why}"
    )))
}

/// The default requests and limits of the `Container` items (a later item's value wins, as
/// upstream's loop over items overwrites).
fn defaults(items: &[&Value]) -> (Map<String, Value>, Map<String, Value>) {
    let mut requests = Map::new();
    let mut limits = Map::new();
    for item in items.iter().filter(|i| i["type"] == "Container") {
        for (into, key) in [(&mut requests, "defaultRequest"), (&mut limits, "default")] {
            for (k, v) in item
                .get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    (requests, limits)
}

fn set_defaults(items: &[&Value], pod: &mut Value) {
    let (requests, limits) = defaults(items);
    if requests.is_empty() && limits.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for list in ["containers", "initContainers"] {
        let Some(cs) = pod
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in cs.iter_mut() {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            let resources = c
                .as_object_mut()
                .map(|m| m.entry("resources").or_insert_with(|| json!({})));
            let Some(Value::Object(resources)) = resources else {
                continue;
            };
            let mut set = |key: &str, from: &Map<String, Value>| -> Vec<String> {
                let target = resources.entry(key).or_insert_with(|| json!({}));
                let Value::Object(target) = target else {
                    return Vec::new();
                };
                let mut added = Vec::new();
                for (k, v) in from {
                    if !target.contains_key(k) {
                        target.insert(k.clone(), v.clone());
                        added.push(k.clone());
                    }
                }
                added
            };
            let set_limits = set("limits", &limits);
            let set_requests = set("requests", &requests);
            // Upstream's wording: "cpu, memory request for container web; cpu limit for ...".
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {} {name}",
                    set_requests.join(", "),
                    if list == "containers" {
                        "container"
                    } else {
                        "init container"
                    }
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!(
                    "{} limit for {} {name}",
                    set_limits.join(", "),
                    if list == "containers" {
                        "container"
                    } else {
                        "init container"
                    }
                ));
            }
        }
    }
    if !notes.is_empty()
        && let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Value::Object(a) = annotations {
            a.insert(
                ANNOTATION.into(),
                json!(format!("LimitRanger plugin set: {}", notes.join("; "))),
            );
        }
    }
}

/// A quantity of the object, printed as upstream's `Quantity.String()` prints it in messages.
fn quantity(v: Option<&Value>) -> Option<Amount> {
    Amount::parse(v?.as_str()?).ok()
}

/// One container's (or a pod's summed) requests and limits of a resource.
#[derive(Default)]
struct Usage {
    request: Option<Amount>,
    limit: Option<Amount>,
}

fn container_usage(c: &Value, resource: &str) -> Usage {
    Usage {
        request: quantity(c.pointer(&format!("/resources/requests/{resource}"))),
        limit: quantity(c.pointer(&format!("/resources/limits/{resource}"))),
    }
}

/// A pod's usage as upstream's `podRequests`/`podLimits` add it up: the containers' sum, or the
/// largest init container when that is more. A resource some container leaves unset has no sum.
fn pod_usage(pod: &Value, resource: &str) -> Usage {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let inits = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let sum = |pick: fn(Usage) -> Option<Amount>| -> Option<Amount> {
        let mut total = Amount::zero();
        for c in containers {
            total = total.plus(pick(container_usage(c, resource))?);
        }
        for c in inits {
            if let Some(q) = pick(container_usage(c, resource)) {
                total = total.max(q);
            }
        }
        Some(total)
    };
    Usage {
        request: sum(|u| u.request),
        limit: sum(|u| u.limit),
    }
}

fn check(items: &[&Value], pod: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for item in items {
        let kind = item["type"].as_str().unwrap_or_default();
        if !matches!(kind, "Container" | "Pod") {
            continue;
        }
        let resources: std::collections::BTreeSet<&String> = ["min", "max", "maxLimitRequestRatio"]
            .iter()
            .flat_map(|k| {
                item.get(*k)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
            })
            .map(|(k, _)| k)
            .collect();
        for resource in resources {
            let subjects: Vec<Usage> = if kind == "Container" {
                ["containers", "initContainers"]
                    .iter()
                    .flat_map(|l| {
                        pod.pointer(&format!("/spec/{l}"))
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                    })
                    .map(|c| container_usage(c, resource))
                    .collect()
            } else {
                vec![pod_usage(pod, resource)]
            };
            for usage in &subjects {
                bounds(item, kind, resource, usage, &mut errors);
            }
        }
    }
    errors
}

/// Upstream's `minConstraint`, `maxConstraint` and `limitRequestRatioConstraint`.
fn bounds(item: &Value, kind: &str, resource: &str, u: &Usage, errors: &mut Vec<String>) {
    if let Some(min) = quantity(item.pointer(&format!("/min/{resource}"))) {
        match u.request {
            None => errors.push(format!(
                "minimum {resource} usage per {kind} is {min}.  No request is specified"
            )),
            Some(r) if r.value < min.value => errors.push(format!(
                "minimum {resource} usage per {kind} is {min}, but request is {r}"
            )),
            _ => {}
        }
        if let Some(l) = u.limit
            && l.value < min.value
        {
            errors.push(format!(
                "minimum {resource} usage per {kind} is {min}, but limit is {l}"
            ));
        }
    }
    if let Some(max) = quantity(item.pointer(&format!("/max/{resource}"))) {
        match u.limit {
            None => errors.push(format!(
                "maximum {resource} usage per {kind} is {max}.  No limit is specified"
            )),
            Some(l) if l.value > max.value => errors.push(format!(
                "maximum {resource} usage per {kind} is {max}, but limit is {l}"
            )),
            _ => {}
        }
        if let Some(r) = u.request
            && r.value > max.value
        {
            errors.push(format!(
                "maximum {resource} usage per {kind} is {max}, but request is {r}"
            ));
        }
    }
    if let Some(ratio) = quantity(item.pointer(&format!("/maxLimitRequestRatio/{resource}"))) {
        match (
            u.request.filter(|r| !r.value.is_zero()),
            u.limit.filter(|l| !l.value.is_zero()),
        ) {
            (None, _) => errors.push(format!(
                "{resource} max limit to request ratio per {kind} is {ratio}, but no request is specified or request is 0"
            )),
            (_, None) => errors.push(format!(
                "{resource} max limit to request ratio per {kind} is {ratio}, but no limit is specified or limit is 0"
            )),
            (Some(r), Some(l)) => {
                let provided = l.value.milli_value() as f64 / r.value.milli_value() as f64;
                if provided * 1000.0 > ratio.value.milli_value() as f64 {
                    errors.push(format!(
                        "{resource} max limit to request ratio per {kind} is {ratio}, but provided ratio is {provided:.6}"
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;

    fn item() -> Value {
        json!({"type": "Container",
            "min": {"cpu": "100m", "memory": "100Mi"}, "max": {"cpu": "500m", "memory": "500Mi"},
            "default": {"cpu": "500m", "memory": "500Mi"},
            "defaultRequest": {"cpu": "100m", "memory": "200Mi"}})
    }

    #[test]
    fn defaults_fill_what_the_container_leaves_unset_and_are_noted() {
        let it = item();
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a"},
            {"name": "b", "resources": {"requests": {"cpu": "300m"}}},
        ]}});
        set_defaults(&[&it], &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"requests": {"cpu": "100m", "memory": "200Mi"},
                   "limits": {"cpu": "500m", "memory": "500Mi"}})
        );
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["requests"],
            json!({"cpu": "300m", "memory": "200Mi"})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; memory request for container b; cpu, memory limit for container b"
        );
        assert!(check(&[&it], &pod).is_empty());
    }

    #[test]
    fn bounds_are_checked_per_container_and_per_pod() {
        let it = item();
        let small = json!({"spec": {"containers": [{"name": "a", "resources": {
            "requests": {"cpu": "50m", "memory": "100Mi"}, "limits": {"cpu": "500m", "memory": "500Mi"}}}]}});
        assert_eq!(
            check(&[&it], &small),
            ["minimum cpu usage per Container is 100m, but request is 50m"]
        );
        let pod_item = json!({"type": "Pod", "max": {"cpu": "600m"}});
        let two = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "400m"}}},
            {"name": "b", "resources": {"limits": {"cpu": "400m"}}}]}});
        assert_eq!(
            check(&[&pod_item], &two),
            ["maximum cpu usage per Pod is 600m, but limit is 800m"]
        );
    }
}
