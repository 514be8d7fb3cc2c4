//! Client-side apply's patch, as kubectl computes it (`CreateThreeWayMergePatch`): from the
//! last applied configuration (`original`), the manifest being applied (`modified`) and the
//! live object (`current`), a patch that sets what the manifest says where the live object
//! differs, deletes what an earlier apply set and this one no longer does, and leaves alone
//! everything else (server defaults, other writers' fields).
//!
//! Lists follow the strategic merge schema of the built-in kinds ([`api::smp::Builtin`]):
//! merge-keyed lists (containers by `name`, ports by `containerPort`, ...) are patched item by
//! item, with `$patch: delete` for items dropped from the manifest and `$setElementOrder` to
//! keep the manifest's order; other lists are replaced when the manifest's differs from the
//! live one. For kinds without a strategic schema (custom resources) every list is replaced and
//! the patch is sent as a JSON merge patch.

use api::smp::{Builtin, ListStrategy, MergeSchema};
use serde_json::{Map, Value};

/// Whether `current` already says everything `modified` says (server-added fields aside).
pub fn covers(modified: &Value, current: &Value) -> bool {
    match (modified, current) {
        (Value::Object(m), Value::Object(c)) => m.iter().all(|(k, v)| {
            c.get(k).is_some_and(|cv| covers(v, cv)) || (v.is_null() && !c.contains_key(k))
        }),
        (Value::Array(m), Value::Array(c)) => {
            m.len() == c.len() && m.iter().zip(c).all(|(a, b)| covers(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// The patch; `strategic` uses the built-in list strategies (else every list is replaced).
/// `None` when nothing needs to change.
pub fn patch(
    original: Option<&Value>,
    modified: &Value,
    current: &Value,
    strategic: bool,
) -> Option<Value> {
    let mut path = Vec::new();
    diff_map(original, modified, current, strategic, &mut path).map(Value::Object)
}

fn as_map(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object)
}

fn diff_map(
    original: Option<&Value>,
    modified: &Value,
    current: &Value,
    strategic: bool,
    path: &mut Vec<String>,
) -> Option<Map<String, Value>> {
    let empty = Map::new();
    let m = modified.as_object().unwrap_or(&empty);
    let c = current.as_object().unwrap_or(&empty);
    let o = as_map(original);
    let mut out = Map::new();
    for (k, mv) in m {
        let cv = c.get(k);
        let ov = o.and_then(|o| o.get(k));
        path.push(k.clone());
        match (mv, cv) {
            (Value::Object(_), Some(cv @ Value::Object(_))) => {
                if let Some(p) = diff_map(ov, mv, cv, strategic, path) {
                    out.insert(k.clone(), Value::Object(p));
                }
            }
            (Value::Array(ml), Some(Value::Array(cl))) => {
                let names: Vec<&str> = path.iter().map(String::as_str).collect();
                let strategy = match Builtin.list_strategy(&names) {
                    // An item without its key cannot be merged: the list is replaced.
                    ListStrategy::Merge { key }
                        if strategic && ml.iter().all(|i| i.get(key).is_some()) =>
                    {
                        ListStrategy::Merge { key }
                    }
                    _ => ListStrategy::Replace,
                };
                match strategy {
                    ListStrategy::Merge { key } => {
                        let ol = ov.and_then(Value::as_array);
                        if let Some((items, order)) =
                            diff_keyed_list(ol, ml, cl, key, strategic, path)
                        {
                            out.insert(k.clone(), Value::Array(items));
                            out.insert(format!("$setElementOrder/{k}"), Value::Array(order));
                        }
                    }
                    ListStrategy::Replace | ListStrategy::SetMerge => {
                        if !covers(mv, &Value::Array(cl.clone())) {
                            out.insert(k.clone(), mv.clone());
                        }
                    }
                }
            }
            (_, Some(cv)) if covers(mv, cv) => {}
            (Value::Null, None) => {}
            _ => {
                out.insert(k.clone(), mv.clone());
            }
        }
        path.pop();
    }
    // What the last apply set and this one does not: delete it.
    if let Some(o) = o {
        for k in o.keys() {
            if !m.contains_key(k) && c.contains_key(k) {
                out.insert(k.clone(), Value::Null);
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A merge-keyed list's patch items and element order, if anything changed.
fn diff_keyed_list(
    original: Option<&Vec<Value>>,
    modified: &[Value],
    current: &[Value],
    key: &str,
    strategic: bool,
    path: &mut Vec<String>,
) -> Option<(Vec<Value>, Vec<Value>)> {
    let key_of = |v: &Value| v.get(key).cloned();
    let find = |list: &[Value], k: &Value| list.iter().find(|i| i.get(key) == Some(k)).cloned();
    let mut items = Vec::new();
    for mi in modified {
        let Some(k) = key_of(mi) else {
            continue;
        };
        match find(current, &k) {
            Some(ci) => {
                let oi = original.and_then(|o| find(o, &k));
                if let Some(mut p) = diff_map(oi.as_ref(), mi, &ci, strategic, path) {
                    p.insert(key.to_string(), k.clone());
                    items.push(Value::Object(p));
                }
            }
            None => items.push(mi.clone()),
        }
    }
    for oi in original.into_iter().flatten() {
        if let Some(k) = key_of(oi)
            && !modified.iter().any(|mi| mi.get(key) == Some(&k))
            && find(current, &k).is_some()
        {
            let mut del = Map::new();
            del.insert(key.to_string(), k);
            del.insert("$patch".into(), Value::String("delete".into()));
            items.push(Value::Object(del));
        }
    }
    if items.is_empty() {
        return None;
    }
    let order = modified.iter().filter_map(key_of).map(|k| {
        let mut m = Map::new();
        m.insert(key.to_string(), k);
        Value::Object(m)
    });
    Some((items, order.collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(image: &str, replicas: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": image}]}}}})
    }

    /// The live object: the manifest plus what the server added.
    fn live(image: &str, replicas: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "uid": "u", "resourceVersion": "7"},
            "spec": {"replicas": replicas, "progressDeadlineSeconds": 600,
                "template": {"spec": {"containers": [{"name": "web", "image": image,
                    "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log"}],
                    "restartPolicy": "Always"}}},
            "status": {"replicas": replicas}})
    }

    #[test]
    fn unchanged_when_the_live_object_says_it_all() {
        let m = deployment("nginx:1.27", 3);
        assert_eq!(patch(Some(&m), &m, &live("nginx:1.27", 3), true), None);
    }

    #[test]
    fn changes_merge_into_containers_by_name() {
        let o = deployment("nginx:1.27", 3);
        let m = deployment("nginx:1.28", 3);
        assert_eq!(
            patch(Some(&o), &m, &live("nginx:1.27", 3), true),
            Some(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "web", "image": "nginx:1.28"}],
                "$setElementOrder/containers": [{"name": "web"}]}}}}))
        );
    }

    #[test]
    fn fields_dropped_from_the_manifest_are_deleted_others_kept() {
        let mut o = deployment("nginx:1.27", 3);
        o["metadata"]["labels"]["tier"] = json!("front");
        let mut current = live("nginx:1.27", 3);
        current["metadata"]["labels"]["tier"] = json!("front");
        current["metadata"]["labels"]["added-by-someone"] = json!("x");
        let m = deployment("nginx:1.27", 3);
        assert_eq!(
            patch(Some(&o), &m, &current, true),
            Some(json!({"metadata": {"labels": {"tier": null}}}))
        );
        // Without a last applied configuration, nothing is deleted.
        assert_eq!(patch(None, &m, &current, true), None);
    }

    #[test]
    fn removed_containers_get_a_delete_directive() {
        let mut o = deployment("a:1", 1);
        o["spec"]["template"]["spec"]["containers"] =
            json!([{"name": "web", "image": "a:1"}, {"name": "side", "image": "s:1"}]);
        let mut current = live("a:1", 1);
        current["spec"]["template"]["spec"]["containers"] =
            json!([{"name": "web", "image": "a:1"}, {"name": "side", "image": "s:1"}]);
        let m = deployment("a:1", 1);
        assert_eq!(
            patch(Some(&o), &m, &current, true),
            Some(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "side", "$patch": "delete"}],
                "$setElementOrder/containers": [{"name": "web"}]}}}}))
        );
    }

    #[test]
    fn other_lists_are_replaced_when_they_differ() {
        let mut m = deployment("a:1", 1);
        m["spec"]["template"]["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
        let current = live("a:1", 1);
        assert_eq!(
            patch(None, &m, &current, true),
            Some(
                json!({"spec": {"template": {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}}})
            )
        );
        // Without a strategic schema the containers list is replaced too.
        let m2 = deployment("a:2", 1);
        assert_eq!(
            patch(None, &m2, &current, false),
            Some(
                json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "a:2"}]}}}})
            )
        );
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(covers(&json!({"a": 1}), &json!({"a": 1.0, "b": 2})));
        assert!(!covers(&json!({"a": [1, 2]}), &json!({"a": [1]})));
    }
}
