//! One step into a value, as structured-merge-diff names it: a field of a map, an item of an
//! associative list by its key fields, an item of a set by its value, or an item by position.
//!
//! Two spellings matter: the `fieldsV1` keys stored in `managedFields` (`f:name`,
//! `k:{"name":"nginx"}`, `v:"x"`, `i:0`) and the path strings of conflict messages
//! (`.spec.containers[name="nginx"].image`, `[=x]`, `[0]`).

use serde_json::Value;
use std::fmt;

/// One step into a value.
///
/// Values are kept as their compact JSON text, which gives the total order a set needs (the
/// declaration order of the variants is upstream's: fields, then keys, then values, then
/// indexes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of a map or struct.
    Field(String),
    /// An item of an associative list: its key fields, sorted by name, with their JSON values.
    Key(Vec<(String, String)>),
    /// An item of a set, by its JSON value.
    Value(String),
    /// An item by position (lists whose items have no identity of their own).
    Index(usize),
}

/// A `fieldsV1` key that is not one of upstream's four forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid fieldsV1 key {0:?}")]
pub struct BadKey(pub String);

impl PathElement {
    /// A field step.
    pub fn field(name: &str) -> Self {
        PathElement::Field(name.to_string())
    }

    /// The set step of a value.
    pub fn value(v: &Value) -> Self {
        PathElement::Value(v.to_string())
    }

    /// The associative-list step of key fields (sorted here, so any order may be given).
    pub fn key(mut fields: Vec<(String, String)>) -> Self {
        fields.sort();
        PathElement::Key(fields)
    }

    /// The field name, for a field step.
    pub fn as_field(&self) -> Option<&str> {
        match self {
            PathElement::Field(f) => Some(f),
            _ => None,
        }
    }

    /// The key of this step in a `fieldsV1` object.
    pub fn to_fields_key(&self) -> String {
        match self {
            PathElement::Field(f) => {
                let mut s = String::with_capacity(f.len() + 2);
                s.push_str("f:");
                s.push_str(f);
                s
            }
            PathElement::Key(fields) => {
                let body: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                    .collect();
                format!("k:{{{}}}", body.join(","))
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `fieldsV1` key (not `.`, which marks membership rather than a step).
    pub fn from_fields_key(s: &str) -> Result<Self, BadKey> {
        let bad = || BadKey(s.to_string());
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        match kind {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "v" => {
                let v: Value = serde_json::from_str(rest).map_err(|_| bad())?;
                Ok(PathElement::value(&v))
            }
            "i" => rest.parse().map(PathElement::Index).map_err(|_| bad()),
            "k" => match serde_json::from_str::<Value>(rest).map_err(|_| bad())? {
                Value::Object(m) => Ok(PathElement::key(
                    m.into_iter().map(|(k, v)| (k, v.to_string())).collect(),
                )),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

/// Prints a step as upstream's conflict messages do.
impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={v}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object root, printed as upstream prints `fieldpath.Path`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// A path of field names, e.g. `Path::fields(&["spec", "replicas"])`.
    pub fn fields(names: &[&str]) -> Self {
        Path(names.iter().map(|n| PathElement::field(n)).collect())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_keys_round_trip() {
        let cases = [
            (PathElement::field("spec"), "f:spec"),
            (
                PathElement::key(vec![
                    ("protocol".into(), json!("TCP").to_string()),
                    ("containerPort".into(), json!(80).to_string()),
                ]),
                r#"k:{"containerPort":80,"protocol":"TCP"}"#,
            ),
            (PathElement::value(&json!("a")), r#"v:"a""#),
            (PathElement::Index(3), "i:3"),
        ];
        for (pe, key) in cases {
            assert_eq!(pe.to_fields_key(), key);
            assert_eq!(PathElement::from_fields_key(key), Ok(pe));
        }
        for bad in ["x:1", "nocolon", "k:[1]", "i:x", "v:{"] {
            assert!(PathElement::from_fields_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_print_as_upstream() {
        let p = Path(vec![
            PathElement::field("spec"),
            PathElement::field("containers"),
            PathElement::key(vec![("name".into(), json!("nginx").to_string())]),
            PathElement::field("ports"),
            PathElement::key(vec![
                ("containerPort".into(), "80".into()),
                ("protocol".into(), json!("TCP").to_string()),
            ]),
        ]);
        assert_eq!(
            p.to_string(),
            r#".spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"]"#
        );
        let set = Path(vec![
            PathElement::field("metadata"),
            PathElement::field("finalizers"),
            PathElement::value(&json!("a")),
        ]);
        assert_eq!(set.to_string(), r#".metadata.finalizers[="a"]"#);
    }
}
