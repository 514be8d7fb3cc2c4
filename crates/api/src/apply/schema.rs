//! What server-side apply needs to know about a type: whether a map is a struct with named
//! fields, a free-form map or atomic, and how a list merges (`atomic`, `set`, or `map` keyed by
//! some of its items' fields).
//!
//! The walkers take any [`Schema`] node and descend with [`Schema::field`] and [`Schema::item`].
//! [`OpenApi`] reads OpenAPI v3 schemas, which covers both sources upstream has: the built-in
//! kinds' component schemas (with `$ref`s between them) and CustomResourceDefinitions' structural
//! schemas. [`Deduced`] is upstream's schema for objects of no known type.

use serde_json::{Map, Value};

/// How a list merges, upstream's `x-kubernetes-list-type`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole; one owner.
    Atomic,
    /// Scalars merged as a set; each value owned on its own.
    Set,
    /// Items identified by some of their fields (`x-kubernetes-list-map-keys`); each item and
    /// each of its fields owned on its own.
    Map(Vec<KeyField>),
}

/// A key field of an associative list, with the default used when an item omits it (upstream
/// fills `protocol: TCP` of ports this way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyField {
    /// The field name.
    pub name: String,
    /// Its default value, if the schema has one.
    pub default: Option<Value>,
}

/// The type of a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A string, number, boolean (or int-or-string).
    Scalar,
    /// An object with named fields ([`Schema::declares`]); `atomic` when the whole struct has one
    /// owner (`x-kubernetes-map-type: atomic`, upstream's `+structType=atomic`).
    Struct {
        /// Replaced as a whole.
        atomic: bool,
    },
    /// An object with arbitrary keys (labels, `data`, resource quantities).
    Map {
        /// Replaced as a whole (`+mapType=atomic`, e.g. a pod's `nodeSelector`).
        atomic: bool,
    },
    /// A list.
    List(ListType),
    /// Not described: maps are merged key by key, lists are atomic (upstream's deduced type).
    Unknown,
}

impl Shape {
    /// Whether an object of this shape merges key by key (a struct or map that is not atomic,
    /// or an undescribed object).
    pub fn is_granular_map(&self) -> bool {
        matches!(
            self,
            Shape::Struct { atomic: false } | Shape::Map { atomic: false } | Shape::Unknown
        )
    }

    /// Whether a value of this shape has one owner for all of it.
    pub fn is_atomic(&self) -> bool {
        matches!(
            self,
            Shape::Scalar
                | Shape::Struct { atomic: true }
                | Shape::Map { atomic: true }
                | Shape::List(ListType::Atomic)
        )
    }
}

/// A node of a type description. Implement it to let server-side apply merge another kind of
/// schema; [`OpenApi`] covers OpenAPI v3 (built-in kinds and CRDs).
pub trait Schema: Clone {
    /// The type of the value at this node.
    fn shape(&self) -> Shape;
    /// Whether a struct declares `name` (its value is then not owned merely for being present,
    /// unlike a key of a free-form map).
    fn declares(&self, name: &str) -> bool;
    /// The node of a field or map value (an unknown node when the field is not described).
    fn field(&self, name: &str) -> Self;
    /// The node of a list's items.
    fn item(&self) -> Self;
}

/// Upstream's deduced schema: every object a granular map of undeclared keys, every list atomic.
#[derive(Clone, Copy, Debug, Default)]
pub struct Deduced;

impl Schema for Deduced {
    fn shape(&self) -> Shape {
        Shape::Unknown
    }
    fn declares(&self, _: &str) -> bool {
        false
    }
    fn field(&self, _: &str) -> Self {
        Deduced
    }
    fn item(&self) -> Self {
        Deduced
    }
}

/// A node of an OpenAPI v3 schema, resolving `$ref`s (`#/components/schemas/<name>`, or
/// `#/definitions/<name>`) against `components`.
///
/// Reads `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and `x-kubernetes-map-type`; a
/// list without a list type falls back to its strategic-merge tags as upstream's schema
/// conversion does (`x-kubernetes-patch-strategy: merge` with a merge key is a map on that key,
/// without one a set), and is otherwise atomic.
#[derive(Clone, Copy, Debug)]
pub struct OpenApi<'a> {
    /// The property node as written (its extensions take precedence) and the node it resolves
    /// to; `None` for a value the schema does not describe.
    node: Option<(&'a Value, &'a Value)>,
    components: Option<&'a Map<String, Value>>,
}

/// How deep `$ref` chains may go before the schema counts as undescribed.
const MAX_REF_DEPTH: usize = 16;

impl<'a> OpenApi<'a> {
    /// The root of a kind's schema whose `$ref`s point into `components`.
    pub fn new(root: &'a Value, components: &'a Map<String, Value>) -> Self {
        Self::at(Some(root), Some(components))
    }

    /// A node that describes nothing: values merge as upstream's deduced type, like
    /// [`Deduced`] (for kinds without a schema).
    pub fn undescribed() -> Self {
        Self::at(None, None)
    }

    /// The root of a self-contained (structural) schema, as CRDs have.
    pub fn structural(root: &'a Value) -> Self {
        Self::at(Some(root), None)
    }

    fn at(raw: Option<&'a Value>, components: Option<&'a Map<String, Value>>) -> Self {
        let node = raw.and_then(|raw| resolve(raw, components, 0).map(|target| (raw, target)));
        OpenApi { node, components }
    }

    /// An extension (or keyword), looked up on the node as written and then on its target.
    fn ext(&self, key: &str) -> Option<&'a Value> {
        let (raw, target) = self.node?;
        raw.get(key).or_else(|| target.get(key))
    }

    fn target(&self) -> Option<&'a Value> {
        self.node.map(|(_, t)| t)
    }

    fn list_type(&self) -> ListType {
        let keys_of = |names: Vec<&str>| {
            let item = self.item();
            ListType::Map(
                names
                    .into_iter()
                    .map(|n| KeyField {
                        name: n.to_string(),
                        default: item
                            .target()
                            .and_then(|t| t.get("properties"))
                            .and_then(|p| p.get(n))
                            .and_then(|p| {
                                resolve(p, self.components, 0)
                                    .and_then(|r| p.get("default").or_else(|| r.get("default")))
                            })
                            .cloned(),
                    })
                    .collect(),
            )
        };
        match self.ext("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => return ListType::Set,
            Some("atomic") => return ListType::Atomic,
            Some("map") => {
                let names: Vec<&str> = self
                    .ext("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !names.is_empty() {
                    return keys_of(names);
                }
                return ListType::Atomic;
            }
            _ => {}
        }
        let merge = self
            .ext("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .is_some_and(|s| s.split(',').any(|p| p == "merge"));
        if !merge {
            return ListType::Atomic;
        }
        match self
            .ext("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
        {
            Some(key) => keys_of(vec![key]),
            None => ListType::Set,
        }
    }
}

/// Follows `$ref` and single-schema `allOf` wrappers to the schema that describes the value.
fn resolve<'a>(
    v: &'a Value,
    components: Option<&'a Map<String, Value>>,
    depth: usize,
) -> Option<&'a Value> {
    if depth > MAX_REF_DEPTH {
        return None;
    }
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next()?;
        return resolve(components?.get(name)?, components, depth + 1);
    }
    if v.get("properties").is_none()
        && v.get("type").is_none()
        && let Some([only]) = v.get("allOf").and_then(Value::as_array).map(Vec::as_slice)
    {
        return resolve(only, components, depth + 1);
    }
    Some(v)
}

impl Schema for OpenApi<'_> {
    fn shape(&self) -> Shape {
        let Some(t) = self.target() else {
            return Shape::Unknown;
        };
        // Most nodes are scalars: answer those with one lookup.
        match t.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "number" | "boolean") => return Shape::Scalar,
            Some("array") => return Shape::List(self.list_type()),
            _ => {}
        }
        if t.get("items").is_some() {
            return Shape::List(self.list_type());
        }
        if self.ext("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            return Shape::Scalar;
        }
        let atomic_map =
            self.ext("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        let props = t.get("properties").and_then(Value::as_object);
        if props.is_some_and(|p| !p.is_empty()) {
            return Shape::Struct { atomic: atomic_map };
        }
        if t.get("additionalProperties").is_some_and(Value::is_object) {
            return Shape::Map { atomic: atomic_map };
        }
        Shape::Unknown
    }

    fn declares(&self, name: &str) -> bool {
        self.target()
            .and_then(|t| t.get("properties"))
            .and_then(|p| p.get(name))
            .is_some()
    }

    fn field(&self, name: &str) -> Self {
        let Some(t) = self.target() else {
            return Self::at(None, self.components);
        };
        let raw = match t.get("properties").and_then(|p| p.get(name)) {
            Some(p) => Some(p),
            None => t.get("additionalProperties").filter(|a| a.is_object()),
        };
        Self::at(raw, self.components)
    }

    fn item(&self) -> Self {
        Self::at(self.target().and_then(|t| t.get("items")), self.components)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_from_openapi() {
        let components = json!({
            "Port": {"type": "object", "properties": {
                "containerPort": {"type": "integer"},
                "protocol": {"type": "string", "default": "TCP"}}},
            "Selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "Spec": {"type": "object", "properties": {
                "ports": {"type": "array", "items": {"$ref": "#/components/schemas/Port"},
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["containerPort", "protocol"]},
                "env": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
                "finalizers": {"type": "array", "items": {"type": "string"},
                    "x-kubernetes-patch-strategy": "merge"},
                "args": {"type": "array", "items": {"type": "string"}},
                "selector": {"allOf": [{"$ref": "#/components/schemas/Selector"}], "description": "d"},
                "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"},
                    "x-kubernetes-map-type": "atomic"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        });
        let components = components.as_object().unwrap();
        let root = json!({"$ref": "#/components/schemas/Spec"});
        let s = OpenApi::new(&root, components);
        assert_eq!(s.shape(), Shape::Struct { atomic: false });
        assert!(s.declares("ports") && !s.declares("nope"));
        let key = |n: &str, d: Option<Value>| KeyField {
            name: n.into(),
            default: d,
        };
        assert_eq!(
            s.field("ports").shape(),
            Shape::List(ListType::Map(vec![
                key("containerPort", None),
                key("protocol", Some(json!("TCP")))
            ]))
        );
        assert_eq!(
            s.field("env").shape(),
            Shape::List(ListType::Map(vec![key("name", None)]))
        );
        assert_eq!(s.field("finalizers").shape(), Shape::List(ListType::Set));
        assert_eq!(s.field("args").shape(), Shape::List(ListType::Atomic));
        assert_eq!(s.field("selector").shape(), Shape::Struct { atomic: true });
        assert_eq!(s.field("nodeSelector").shape(), Shape::Map { atomic: true });
        assert_eq!(s.field("labels").shape(), Shape::Map { atomic: false });
        assert_eq!(s.field("labels").field("x").shape(), Shape::Scalar);
        assert_eq!(s.field("port").shape(), Shape::Scalar);
        assert_eq!(s.field("raw").shape(), Shape::Unknown);
        assert_eq!(s.field("nope").shape(), Shape::Unknown);
        assert_eq!(s.field("nope").field("deeper").shape(), Shape::Unknown);
        assert_eq!(
            s.field("ports").item().field("protocol").shape(),
            Shape::Scalar
        );
    }
}
