//! Duplicate fields in a request body, for `fieldValidation` (upstream's strict decoding).
//!
//! A JSON object with a key twice decodes (the last one wins) but Strict rejects it and Warn
//! warns, naming the field by its path as upstream's `sigs.k8s.io/json` does
//! (`duplicate field "spec.replicas"`). YAML bodies report the line, as `yaml.v2` does
//! (`line 9: key "foo" already set in map`). serde_json and serde-saphyr both keep one value per
//! key and say nothing, so the JSON walk below is written here: a serde visitor over the body's
//! tokens that remembers the keys of each object.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::{self, Write as _};

/// The duplicate fields of a JSON body, as upstream words them, in document order. A body that
/// is not JSON has none (its decode error is reported elsewhere).
pub fn json_duplicates(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = String::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Walk {
        path: &mut path,
        out: &mut out,
    }
    .deserialize(&mut de);
    out.into_iter()
        .map(|p| format!("duplicate field \"{p}\""))
        .collect()
}

/// A YAML duplicate key as `yaml.v2` reports it: `line N: key "k" already set in map`.
pub fn yaml_duplicate(line: u64, key: &str) -> String {
    format!("line {line}: key \"{key}\" already set in map")
}

/// The walk runs on every JSON write, so it allocates as little as it can: one path buffer that
/// each field appends its segment to and takes back off, and keys borrowed from the body unless
/// they hold escapes.
struct Walk<'o> {
    path: &'o mut String,
    out: &'o mut Vec<String>,
}

impl Walk<'_> {
    /// The walk of a child, whose segment the caller has appended to the path.
    fn child(&mut self) -> Walk<'_> {
        Walk {
            path: self.path,
            out: self.out,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let len = self.path.len();
            if len > 0 {
                self.path.push('.');
            }
            self.path.push_str(&key);
            if !seen.insert(key) {
                self.out.push(self.path.clone());
            }
            map.next_value_seed(self.child())?;
            self.path.truncate(len);
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let len = self.path.len();
            // Writing to a String cannot fail.
            let _ = write!(self.path, "[{i}]");
            let more = seq.next_element_seed(self.child())?.is_some();
            self.path.truncate(len);
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(IgnoredAny).map(|_| ())
    }
}

/// An object's key, borrowed from the body when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_named_by_their_path_in_document_order() {
        let body =
            br#"{"spec": {"replicas": 2, "replicas": 3, "template": {"spec": {"containers": [
            {"name": "a", "image": "x", "image": "y"}]}}}, "kind": "D", "kind": "D"}"#;
        assert_eq!(
            json_duplicates(body),
            [
                "duplicate field \"spec.replicas\"",
                "duplicate field \"spec.template.spec.containers[0].image\"",
                "duplicate field \"kind\"",
            ]
        );
        assert!(json_duplicates(br#"{"a": {"b": 1}, "c": [{"b": 1}, {"b": 2}]}"#).is_empty());
        assert!(json_duplicates(b"not json").is_empty());
        // A key written with an escape is the same key as the one written plainly.
        assert_eq!(
            json_duplicates(
                br#"{"m": {"a\u0062": 1, "ab": 2}, "l": [{"x": 1}, {"y": 1, "y": 2}]}"#
            ),
            ["duplicate field \"m.ab\"", "duplicate field \"l[1].y\""]
        );
    }
}
