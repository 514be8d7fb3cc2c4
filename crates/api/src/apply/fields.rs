//! The set of fields a value sets, upstream's `ToFieldSet`, and the identity of list items.
//!
//! Which paths are members follows upstream exactly, since it decides what a manager owns:
//! scalars, atomic lists and maps, list items of granular lists, keys of free-form maps, and
//! fields whose value is `null` or `{}`. A struct's named field holding a non-empty object is
//! only a path to its own fields.

use super::{
    path::{Path, PathElement},
    schema::{ListType, Schema, Shape},
    set::FieldSet,
};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Why a list item has no identity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    /// An associative list item lacks a key field that has no default.
    #[error(
        "{path}: associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
    )]
    MissingKey {
        /// The list.
        path: Path,
        /// The key field.
        key: String,
    },
    /// Two items of an associative list or set have the same identity.
    #[error("{path}: duplicate entries for key {element}")]
    Duplicate {
        /// The list.
        path: Path,
        /// The identity, printed as upstream prints it (`[name="nginx"]`).
        element: PathElement,
    },
    /// An associative list item is not an object.
    #[error("{path}: associative list item is not an object")]
    NotAnObject {
        /// The list.
        path: Path,
    },
}

/// The identity of an item of a granular list (`None` for atomic lists, which have no items of
/// their own). `path` is the list's, for errors.
pub(crate) fn item_element(
    ty: &ListType,
    item: &Value,
    path: &[PathElement],
) -> Result<PathElement, ItemError> {
    match ty {
        ListType::Set | ListType::Atomic => Ok(PathElement::value(item)),
        ListType::Map(keys) => {
            let Value::Object(m) = item else {
                return Err(ItemError::NotAnObject {
                    path: Path(path.to_vec()),
                });
            };
            let mut fields = Vec::with_capacity(keys.len());
            for k in keys {
                match m
                    .get(&k.name)
                    .filter(|v| !v.is_null())
                    .or(k.default.as_ref())
                {
                    Some(v) => fields.push((k.name.clone(), v.to_string())),
                    None => {
                        return Err(ItemError::MissingKey {
                            path: Path(path.to_vec()),
                            key: k.name.clone(),
                        });
                    }
                }
            }
            Ok(PathElement::key(fields))
        }
    }
}

/// The fields `value` sets. `strict` rejects list items without identity and duplicates (an
/// applied configuration must be unambiguous); otherwise such items are skipped, so that a
/// stored object that predates the rules never blocks a write.
pub fn fields_of<S: Schema>(
    value: &Value,
    schema: &S,
    strict: bool,
) -> Result<FieldSet, ItemError> {
    let mut w = Walker {
        strict,
        path: Vec::new(),
    };
    let mut out = FieldSet::new();
    if let Value::Object(m) = value {
        w.map_items(m, schema, true, &mut out)?;
    }
    Ok(out)
}

struct Walker {
    strict: bool,
    path: Vec<PathElement>,
}

impl Walker {
    /// Adds what the value under `pe` sets to `parent`, `pe` included when it is owned as a
    /// whole. Returns whether the value's children were walked (a granular container).
    fn value<S: Schema>(
        &mut self,
        pe: PathElement,
        v: &Value,
        schema: &S,
        parent: &mut FieldSet,
    ) -> Result<bool, ItemError> {
        let shape = schema.shape();
        let granular = match (v, &shape) {
            (Value::Object(_), s) => s.is_granular_map(),
            (Value::Array(_), Shape::List(ty)) => *ty != ListType::Atomic,
            _ => false,
        };
        if !granular {
            parent.insert_member(pe);
            return Ok(false);
        }
        let mut child = FieldSet::new();
        self.path.push(pe.clone());
        let walked = match (v, shape) {
            (Value::Object(m), Shape::Struct { .. }) => self.map_items(m, schema, true, &mut child),
            (Value::Object(m), _) => self.map_items(m, schema, false, &mut child),
            (Value::Array(items), Shape::List(ty)) => {
                self.list_items(items, &ty, schema, &mut child)
            }
            _ => Ok(()),
        };
        self.path.pop();
        walked?;
        parent.attach(pe, child);
        Ok(true)
    }

    fn map_items<S: Schema>(
        &mut self,
        m: &Map<String, Value>,
        schema: &S,
        is_struct: bool,
        out: &mut FieldSet,
    ) -> Result<(), ItemError> {
        for (k, v) in m {
            let pe = PathElement::Field(k.clone());
            self.value(pe.clone(), v, &schema.field(k), out)?;
            let empty = v.is_null() || v.as_object().is_some_and(Map::is_empty);
            if empty || !(is_struct && schema.declares(k)) {
                out.insert_member(pe);
            }
        }
        Ok(())
    }

    fn list_items<S: Schema>(
        &mut self,
        items: &[Value],
        ty: &ListType,
        schema: &S,
        out: &mut FieldSet,
    ) -> Result<(), ItemError> {
        let item_schema = schema.item();
        let mut seen = HashSet::new();
        for item in items {
            let pe = match item_element(ty, item, &self.path) {
                Ok(pe) => pe,
                Err(e) if self.strict => return Err(e),
                Err(_) => continue,
            };
            if !seen.insert(pe.clone()) {
                if self.strict {
                    return Err(ItemError::Duplicate {
                        path: Path(self.path.clone()),
                        element: pe,
                    });
                }
                continue;
            }
            self.value(pe.clone(), item, &item_schema, out)?;
            out.insert_member(pe);
        }
        Ok(())
    }
}

/// `set` with every named struct field that has owned fields below it also a member (upstream's
/// `EnsureNamedFieldsAreMembers`): pruning compares such sets so that a struct someone owns a
/// field of is never removed as a whole.
pub(crate) fn with_named_fields<S: Schema>(set: &FieldSet, schema: &S) -> FieldSet {
    let mut out = FieldSet::new();
    for pe in set.members() {
        out.insert_member(pe.clone());
    }
    let is_struct = matches!(schema.shape(), Shape::Struct { .. });
    for (pe, child) in set.children() {
        let child_schema = match pe {
            PathElement::Field(name) => {
                if is_struct && schema.declares(name) {
                    out.insert_member(pe.clone());
                }
                schema.field(name)
            }
            _ => schema.item(),
        };
        out.attach(pe.clone(), with_named_fields(child, &child_schema));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::schema::{Deduced, OpenApi};
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {
                "name": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}}},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                "securityContext": {"type": "object", "properties": {"runAsUser": {"type": "integer"}}},
                "args": {"type": "array", "items": {"type": "string"}},
                "containers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "image": {"type": "string"},
                        "resources": {"type": "object", "properties": {
                            "limits": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}}}})
    }

    #[test]
    fn owns_what_upstream_owns() {
        let s = schema();
        let obj = json!({
            "metadata": {"name": "x", "labels": {"app": "web"}, "finalizers": ["a", "b"]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "securityContext": {},
                "args": ["-v"], "containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}]}
        });
        let got = fields_of(&obj, &OpenApi::structural(&s), true).unwrap();
        assert_eq!(
            got.to_fields_v1(),
            json!({
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}, "f:labels": {"f:app": {}}, "f:name": {}},
                "f:spec": {
                    "f:args": {},
                    "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {},
                        "f:resources": {"f:limits": {"f:cpu": {}}}}},
                    "f:replicas": {}, "f:securityContext": {}, "f:selector": {}}
            })
        );
    }

    #[test]
    fn deduced_objects_own_every_key() {
        let obj = json!({"spec": {"a": {"b": 1}, "list": [1, 2]}});
        let got = fields_of(&obj, &Deduced, true).unwrap();
        assert_eq!(
            got.to_fields_v1(),
            json!({"f:spec": {".": {}, "f:a": {".": {}, "f:b": {}}, "f:list": {}}})
        );
    }

    #[test]
    fn strict_rejects_duplicates_and_missing_keys() {
        let s = schema();
        let dup = json!({"spec": {"containers": [{"name": "c"}, {"name": "c"}]}});
        assert_eq!(
            fields_of(&dup, &OpenApi::structural(&s), true)
                .unwrap_err()
                .to_string(),
            r#".spec.containers: duplicate entries for key [name="c"]"#
        );
        let missing = json!({"spec": {"containers": [{"image": "i"}]}});
        assert_eq!(
            fields_of(&missing, &OpenApi::structural(&s), true)
                .unwrap_err()
                .to_string(),
            r#".spec.containers: associative list with keys has an element that omits key field "name" (and doesn't have default value)"#
        );
        let lenient = fields_of(&dup, &OpenApi::structural(&s), false).unwrap();
        assert_eq!(
            lenient.to_fields_v1(),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}}}}})
        );
    }
}
