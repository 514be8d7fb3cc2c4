//! Merging an applied configuration into the live object, and removing fields from an object:
//! upstream's `Merge` and `RemoveItems`.
//!
//! The configuration wins wherever it says something: its scalars, atomic lists and atomic maps
//! replace the live ones; granular maps merge key by key; granular lists merge item by item
//! (matched by key or value), the configuration deciding the order of the items it names while
//! live-only items keep their place among them.

use super::{
    fields::item_element,
    path::PathElement,
    schema::{ListType, Schema, Shape},
    set::FieldSet,
};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Merges `config` into `live`. `null`s the configuration sets end up as absent fields.
pub fn merge<S: Schema>(live: &Value, config: &Value, schema: &S) -> Value {
    let mut out = merge_value(Some(live), config, schema);
    drop_nulls(&mut out);
    out
}

fn merge_value<S: Schema>(live: Option<&Value>, config: &Value, schema: &S) -> Value {
    let Some(live) = live.filter(|v| !v.is_null()) else {
        return config.clone();
    };
    match (live, config, schema.shape()) {
        (Value::Object(l), Value::Object(c), shape) if shape.is_granular_map() => {
            let mut out = Map::with_capacity(l.len() + c.len());
            for (k, lv) in l {
                let v = match c.get(k) {
                    Some(cv) => merge_value(Some(lv), cv, &schema.field(k)),
                    None => lv.clone(),
                };
                out.insert(k.clone(), v);
            }
            for (k, cv) in c {
                if !l.contains_key(k) {
                    out.insert(k.clone(), cv.clone());
                }
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c), Shape::List(ty)) if ty != ListType::Atomic => {
            Value::Array(merge_lists(l, c, &ty, &schema.item()))
        }
        _ => config.clone(),
    }
}

/// Upstream's list merge: walks both lists at once; items both have are merged in the
/// configuration's order, live-only items stay where they are relative to them, and
/// configuration-only items come where the configuration puts them.
fn merge_lists<S: Schema>(live: &[Value], config: &[Value], ty: &ListType, item: &S) -> Vec<Value> {
    let ids = |items: &[Value]| -> Vec<Option<PathElement>> {
        items
            .iter()
            .map(|v| item_element(ty, v, &[]).ok())
            .collect()
    };
    let live_ids = ids(live);
    let config_ids = ids(config);
    let first_index = |ids: &[Option<PathElement>]| {
        let mut m: HashMap<PathElement, usize> = HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            if let Some(id) = id {
                m.entry(id.clone()).or_insert(i);
            }
        }
        m
    };
    let in_live = first_index(&live_ids);
    let in_config = first_index(&config_ids);
    // The shared items in the configuration's order: each round waits for the next of them.
    let mut shared = config_ids
        .iter()
        .flatten()
        .filter(|id| in_live.contains_key(*id))
        .collect::<Vec<_>>()
        .into_iter();
    let mut next_shared = shared.next();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let mut taken = std::collections::HashSet::new();
    let (mut li, mut ci) = (0, 0);
    while li < live.len() || ci < config.len() {
        if li < live.len() && ci < config.len() && live_ids[li].is_some() {
            let lid = live_ids[li].as_ref();
            if lid == config_ids[ci].as_ref() {
                if let Some(id) = lid
                    && taken.insert(id.clone())
                {
                    out.push(merge_value(Some(&live[li]), &config[ci], item));
                }
                li += 1;
                ci += 1;
                next_shared = shared.next();
                continue;
            }
            if lid.is_some_and(|id| in_config.contains_key(id)) && next_shared != lid {
                // Shared, but not the one this round is for: it is placed when the
                // configuration reaches it.
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            let lid = live_ids[li].as_ref();
            if !lid.is_some_and(|id| in_config.contains_key(id)) {
                out.push(live[li].clone());
                li += 1;
                continue;
            }
        }
        if ci < config.len() {
            let cid = config_ids[ci].as_ref();
            let lv = cid.and_then(|id| in_live.get(id)).map(|&i| &live[i]);
            if cid.is_none_or(|id| taken.insert(id.clone())) {
                out.push(merge_value(lv, &config[ci], item));
            }
            if cid.is_some() && next_shared == cid {
                next_shared = shared.next();
            }
            ci += 1;
        } else {
            // Only shared live items remain; they were merged when the configuration named them.
            li += 1;
        }
    }
    out
}

/// Removes `null` fields from maps (what decoding into a Go type does with them).
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Removes the members of `set` (with everything under them) from `value`. A map or list left
/// empty by the removal goes too, as upstream's leaves a `null` that decoding drops.
pub fn remove<S: Schema>(value: &Value, set: &FieldSet, schema: &S) -> Value {
    remove_in(value, set, schema).unwrap_or(Value::Object(Map::new()))
}

/// `None` when everything went.
fn remove_in<S: Schema>(value: &Value, set: &FieldSet, schema: &S) -> Option<Value> {
    if set.is_empty() {
        return Some(value.clone());
    }
    match (value, schema.shape()) {
        (Value::Object(m), shape) if !shape.is_atomic() && !matches!(shape, Shape::List(_)) => {
            if m.is_empty() {
                return Some(value.clone());
            }
            let mut out = Map::new();
            for (k, v) in m {
                let pe = PathElement::Field(k.clone());
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => {
                        if let Some(v) = remove_in(v, sub, &schema.field(k)) {
                            out.insert(k.clone(), v);
                        }
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (Value::Array(items), Shape::List(ty)) if ty != ListType::Atomic => {
            if items.is_empty() {
                return Some(value.clone());
            }
            let item_schema = schema.item();
            let mut out = Vec::new();
            for item in items {
                let Ok(pe) = item_element(&ty, item, &[]) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => out.extend(remove_in(item, sub, &item_schema)),
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        _ => Some(value.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::schema::OpenApi;
    use serde_json::json;

    fn s() -> Value {
        json!({"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
            "fin": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "string"}, "w": {"type": "string"}}}}}})
    }

    #[test]
    fn merges_by_list_type() {
        let schema = s();
        let sch = OpenApi::structural(&schema);
        let live = json!({"labels": {"a": "1"}, "args": ["x", "y"], "fin": ["a", "b"],
            "items": [{"name": "a", "v": "1", "w": "live"}, {"name": "b", "v": "1"}]});
        let config = json!({"labels": {"b": "2", "gone": null}, "args": ["z"], "fin": ["c", "a"],
            "items": [{"name": "c", "v": "3"}, {"name": "a", "v": "2"}]});
        assert_eq!(
            merge(&live, &config, &sch),
            json!({"labels": {"a": "1", "b": "2"}, "args": ["z"], "fin": ["c", "a", "b"],
                "items": [{"name": "c", "v": "3"}, {"name": "a", "v": "2", "w": "live"}, {"name": "b", "v": "1"}]})
        );
    }

    #[test]
    fn shared_items_follow_the_configuration_order() {
        let schema = s();
        let sch = OpenApi::structural(&schema);
        let live = json!({"items": [{"name": "a"}, {"name": "x"}, {"name": "b"}]});
        let config = json!({"items": [{"name": "b"}, {"name": "a"}]});
        assert_eq!(
            merge(&live, &config, &sch),
            json!({"items": [{"name": "x"}, {"name": "b"}, {"name": "a"}]})
        );
    }

    #[test]
    fn removes_members_and_empties() {
        let schema = s();
        let sch = OpenApi::structural(&schema);
        let v = json!({"labels": {"a": "1"}, "args": ["x"], "fin": ["a", "b"],
            "items": [{"name": "a", "v": "1"}, {"name": "b", "v": "1", "w": "2"}]});
        let set = FieldSet::from_fields_v1(&json!({
            "f:labels": {"f:a": {}}, "f:fin": {"v:\"a\"": {}},
            "f:items": {"k:{\"name\":\"a\"}": {}, "k:{\"name\":\"b\"}": {"f:w": {}}}}))
        .unwrap();
        assert_eq!(
            remove(&v, &set, &sch),
            json!({"args": ["x"], "fin": ["b"], "items": [{"name": "b", "v": "1"}]})
        );
    }
}
