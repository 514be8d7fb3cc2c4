//! core/v1 LimitRange defaults (upstream's `SetDefaults_LimitRangeItem`): a Container item's
//! default limit falls back to its max, its default request to the default limit, then to its
//! min, so that the LimitRanger admission fills what the item implies.

use serde_json::{Map, Value};

/// Defaults each `Container` item of `spec.limits`.
pub fn limit_range(obj: &mut Value) {
    let Some(items) = obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in items {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let max = resources(item, "max");
        let min = resources(item, "min");
        let mut default = resources(item, "default");
        fill(&mut default, &max);
        let mut default_request = resources(item, "defaultRequest");
        fill(&mut default_request, &default);
        fill(&mut default_request, &min);
        item.insert("default".into(), Value::Object(default));
        item.insert("defaultRequest".into(), Value::Object(default_request));
    }
}

fn resources(item: &Map<String, Value>, key: &str) -> Map<String, Value> {
    item.get(key)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Adds the entries of `from` that `into` lacks.
fn fill(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        into.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_items_default_from_max_default_and_min() {
        let mut lr = json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}, "min": {"cpu": "100m"},
             "default": {"memory": "500Mi"}},
            {"type": "Pod", "max": {"cpu": "2"}},
        ]}});
        limit_range(&mut lr);
        let c = &lr["spec"]["limits"][0];
        assert_eq!(c["default"], json!({"cpu": "1", "memory": "500Mi"}));
        assert_eq!(c["defaultRequest"], json!({"cpu": "1", "memory": "500Mi"}));
        assert!(lr["spec"]["limits"][1].get("default").is_none());
    }
}
