//! What a write changed, field by field: upstream's `Compare` (added, modified, removed).
//!
//! Ownership moves along these sets: a manager making a change takes the added and modified
//! fields from everyone else, and nobody keeps a removed field. Leaves (scalars, atomic lists and
//! maps) are *modified* when their value differs; any path present on one side only, containers
//! and list items included, is *added* or *removed*. `null` counts as absent, as it does once
//! upstream decodes an object into its Go type.

use super::{
    fields::item_element,
    path::PathElement,
    schema::{ListType, Schema, Shape},
    set::FieldSet,
};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// The changes between two versions of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Paths only the new version has.
    pub added: FieldSet,
    /// Leaves whose value changed.
    pub modified: FieldSet,
    /// Paths only the old version has.
    pub removed: FieldSet,
}

impl Diff {
    /// Added or modified: what a writer takes from everyone else.
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }

    /// Splits into (added or modified, removed).
    pub fn into_changed_and_removed(self) -> (FieldSet, FieldSet) {
        let mut changed = self.added;
        changed.union_with(&self.modified);
        (changed, self.removed)
    }

    fn attach(&mut self, pe: &PathElement, child: Diff) {
        for (set, sub) in [
            (&mut self.added, child.added),
            (&mut self.modified, child.modified),
            (&mut self.removed, child.removed),
        ] {
            if !sub.is_empty() {
                set.attach(pe.clone(), sub);
            }
        }
    }
}

/// Compares two objects (`None` for one that does not exist). `metadata.managedFields` is not
/// compared: it is the bookkeeping, not the object.
pub fn diff<S: Schema>(old: Option<&Value>, new: Option<&Value>, schema: &S) -> Diff {
    diff_top(old, new, schema, |_| true)
}

/// [`diff`] of the top-level fields `keep` accepts only (a status write need not compare specs).
pub fn diff_top<S: Schema>(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: &S,
    keep: impl Fn(&str) -> bool,
) -> Diff {
    let mut out = Diff::default();
    let empty = Map::new();
    let old = old.and_then(Value::as_object).unwrap_or(&empty);
    let new = new.and_then(Value::as_object).unwrap_or(&empty);
    let skip = |k: &str| (k == "metadata").then_some(MANAGED_FIELDS);
    for (k, o) in old.iter().filter(|(k, _)| keep(k)) {
        let pe = PathElement::Field(k.clone());
        value(
            &pe,
            Some(o),
            new.get(k),
            &schema.field(k),
            skip(k),
            &mut out,
        );
    }
    for (k, n) in new.iter().filter(|(k, _)| keep(k)) {
        if !old.contains_key(k) {
            let pe = PathElement::Field(k.clone());
            value(&pe, None, Some(n), &schema.field(k), skip(k), &mut out);
        }
    }
    out
}

/// The field `metadata` of the root skips, in every comparison.
const MANAGED_FIELDS: &str = "managedFields";

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn value<S: Schema>(
    pe: &PathElement,
    old: Option<&Value>,
    new: Option<&Value>,
    schema: &S,
    skip: Option<&str>,
    out: &mut Diff,
) {
    let (old, new) = (present(old), present(new));
    let (old_v, new_v) = match (old, new) {
        (None, None) => return,
        (Some(o), Some(n)) => (o, n),
        (Some(o), None) => (o, o),
        (None, Some(n)) => (n, n),
    };
    let shape = schema.shape();
    let mut child = Diff::default();
    let granular = match (old_v, new_v, &shape) {
        (Value::Object(a), Value::Object(b), s) if s.is_granular_map() => {
            let empty = Map::new();
            let a = if old.is_some() { a } else { &empty };
            let b = if new.is_some() { b } else { &empty };
            map_items(a, b, schema, skip, &mut child);
            true
        }
        (Value::Array(a), Value::Array(b), Shape::List(ty)) if *ty != ListType::Atomic => {
            let a: &[Value] = if old.is_some() { a } else { &[] };
            let b: &[Value] = if new.is_some() { b } else { &[] };
            list_items(a, b, ty, schema, &mut child);
            true
        }
        _ => false,
    };
    out.attach(pe, child);
    match (old, new) {
        (None, Some(_)) => out.added.insert_member(pe.clone()),
        (Some(_), None) => out.removed.insert_member(pe.clone()),
        (Some(o), Some(n)) if !granular && o != n => out.modified.insert_member(pe.clone()),
        _ => {}
    }
}

/// Compares the fields of two maps, but `skip`.
fn map_items<S: Schema>(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    schema: &S,
    skip: Option<&str>,
    out: &mut Diff,
) {
    for (k, o) in old.iter().filter(|(k, _)| skip != Some(k.as_str())) {
        let pe = PathElement::Field(k.clone());
        value(&pe, Some(o), new.get(k), &schema.field(k), None, out);
    }
    for (k, n) in new.iter().filter(|(k, _)| skip != Some(k.as_str())) {
        if !old.contains_key(k) {
            let pe = PathElement::Field(k.clone());
            value(&pe, None, Some(n), &schema.field(k), None, out);
        }
    }
}

fn list_items<S: Schema>(old: &[Value], new: &[Value], ty: &ListType, schema: &S, out: &mut Diff) {
    let item_schema = schema.item();
    // Items by identity, first of duplicates only (as upstream compares them).
    let index = |items: &[Value]| -> Vec<(PathElement, usize)> {
        let mut seen = HashSet::new();
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let pe = item_element(ty, item, &[]).ok()?;
                seen.insert(pe.clone()).then_some((pe, i))
            })
            .collect()
    };
    let old_ix = index(old);
    let new_ix = index(new);
    let new_by: HashMap<&PathElement, usize> = new_ix.iter().map(|(p, i)| (p, *i)).collect();
    let old_by: HashMap<&PathElement, usize> = old_ix.iter().map(|(p, i)| (p, *i)).collect();
    for (pe, i) in &old_ix {
        let n = new_by.get(pe).map(|&j| &new[j]);
        value(pe, Some(&old[*i]), n, &item_schema, None, out);
    }
    for (pe, j) in &new_ix {
        if !old_by.contains_key(pe) {
            value(pe, None, Some(&new[*j]), &item_schema, None, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::schema::OpenApi;
    use serde_json::json;

    fn s() -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "managedFields": {"type": "array", "items": {"type": "object"}}}},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "args": {"type": "array", "items": {"type": "string"}},
                "containers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "image": {"type": "string"}}}}}}}})
    }

    #[test]
    fn added_modified_removed() {
        let schema = s();
        let old = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "managedFields": [{"manager": "x"}]},
            "spec": {"replicas": 1, "args": ["x"], "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}});
        let new = json!({"metadata": {"labels": {"a": "1", "c": "3"}},
            "spec": {"replicas": 2, "args": ["y"], "containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "1"}]}});
        let d = diff(Some(&old), Some(&new), &OpenApi::structural(&schema));
        assert_eq!(
            d.added.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:c": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert_eq!(
            d.modified.to_fields_v1(),
            json!({"f:spec": {"f:args": {}, "f:containers": {"k:{\"name\":\"b\"}": {"f:image": {}}}, "f:replicas": {}}})
        );
        assert_eq!(
            d.removed.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:b": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        let same = diff(Some(&old), Some(&old), &OpenApi::structural(&schema));
        assert_eq!(same, Diff::default());
    }

    #[test]
    fn creation_adds_every_path() {
        let schema = s();
        let new = json!({"spec": {"replicas": 1, "containers": [{"name": "a"}]}});
        let d = diff(None, Some(&new), &OpenApi::structural(&schema));
        assert_eq!(
            d.added.to_fields_v1(),
            json!({"f:spec": {".": {}, "f:containers": {".": {}, "k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}, "f:replicas": {}}})
        );
        assert!(d.modified.is_empty() && d.removed.is_empty());
    }
}
