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
    state::ApiServer,
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
    let mut errors = check(&items, pod);
    if errors.is_empty() {
        return Ok(());
    }
    // Printed as upstream's error aggregate: each message once, bracketed when several.
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.clone()));
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
        // A Container item bounds each container (init ones after), a Pod item their sums.
        let subjects: Vec<Option<&Value>> = match kind {
            "Container" => ["containers", "initContainers"]
                .iter()
                .flat_map(|l| {
                    pod.pointer(&format!("/spec/{l}"))
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                })
                .map(Some)
                .collect(),
            // `None`: the pod as a whole.
            "Pod" => vec![None],
            _ => continue,
        };
        // As upstream's `PodValidateLimitFunc`: per subject, every min, then every max, then
        // every ratio; each constraint reports its first violation.
        for subject in &subjects {
            for (key, constraint) in [
                ("min", min_constraint as Constraint),
                ("max", max_constraint),
                ("maxLimitRequestRatio", ratio_constraint),
            ] {
                for (resource, enforced) in item
                    .get(key)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let Some(enforced) = quantity(Some(enforced)) else {
                        continue;
                    };
                    let usage = match subject {
                        Some(container) => container_usage(container, resource),
                        None => pod_usage(pod, resource),
                    };
                    if let Some(e) = constraint(kind, resource, enforced, &usage) {
                        errors.push(e);
                    }
                }
            }
        }
    }
    errors
}

/// One of upstream's constraint checks: the first violation of `enforced` for `resource`.
type Constraint = fn(&str, &str, Amount, &Usage) -> Option<String>;

/// Upstream's `minConstraint`.
fn min_constraint(kind: &str, resource: &str, min: Amount, u: &Usage) -> Option<String> {
    match (u.request, u.limit) {
        (None, _) => Some(format!(
            "minimum {resource} usage per {kind} is {min}.  No request is specified"
        )),
        (Some(r), _) if r.value < min.value => Some(format!(
            "minimum {resource} usage per {kind} is {min}, but request is {r}"
        )),
        (_, Some(l)) if l.value < min.value => Some(format!(
            "minimum {resource} usage per {kind} is {min}, but limit is {l}"
        )),
        _ => None,
    }
}

/// Upstream's `maxConstraint`.
fn max_constraint(kind: &str, resource: &str, max: Amount, u: &Usage) -> Option<String> {
    match (u.limit, u.request) {
        (None, _) => Some(format!(
            "maximum {resource} usage per {kind} is {max}.  No limit is specified"
        )),
        (Some(l), _) if l.value > max.value => Some(format!(
            "maximum {resource} usage per {kind} is {max}, but limit is {l}"
        )),
        (_, Some(r)) if r.value > max.value => Some(format!(
            "maximum {resource} usage per {kind} is {max}, but request is {r}"
        )),
        _ => None,
    }
}

/// Upstream's `limitRequestRatioConstraint`.
fn ratio_constraint(kind: &str, resource: &str, ratio: Amount, u: &Usage) -> Option<String> {
    let request = u.request.filter(|r| !r.value.is_zero());
    let limit = u.limit.filter(|l| !l.value.is_zero());
    let (Some(r), Some(l)) = (request, limit) else {
        let missing = if request.is_none() {
            "request"
        } else {
            "limit"
        };
        return Some(format!(
            "{resource} max limit to request ratio per {kind} is {ratio}, but no {missing} is specified or {missing} is 0"
        ));
    };
    let provided = l.value.milli_value() as f64 / r.value.milli_value() as f64;
    (provided * 1000.0 > ratio.value.milli_value() as f64).then(|| {
        format!(
            "{resource} max limit to request ratio per {kind} is {ratio}, but provided ratio is {provided:.6}"
        )
    })
}

/// Upstream's `LimitRanger` admission plugin, for new pods.
pub(crate) const LIMIT_RANGER: crate::plugins::PodDefaulting = crate::plugins::PodDefaulting {
    name: "LimitRanger",
    admit: |server, review, pod| {
        admit_pod(
            server,
            review.namespace.unwrap_or_default(),
            review.name,
            pod,
        )
    },
};

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
