//! Duplicate fields in a request body, for `fieldValidation` (upstream's strict decoding).
//!
//! A JSON object with a key twice decodes (the last one wins) but Strict rejects it and Warn
//! warns, naming the field by its path as upstream's `sigs.k8s.io/json` does
//! (`duplicate field "spec.replicas"`). YAML bodies report the line, as `yaml.v2` does
//! (`line 9: key "foo" already set in map`). serde_json and serde-saphyr both keep one value per
//! key and say nothing, so the JSON walk below is written here: a serde visitor over the body's
//! tokens that remembers the keys of each object.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The duplicate fields of a JSON body, as upstream words them, in document order. A body that
/// is not JSON has none (its decode error is reported elsewhere).
pub fn json_duplicates(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Walk {
        path: String::new(),
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

struct Walk<'o> {
    path: String,
    out: &'o mut Vec<String>,
}

impl Walk<'_> {
    fn child(&mut self, segment: &str) -> Walk<'_> {
        let path = if self.path.is_empty() {
            segment.to_string()
        } else if segment.starts_with('[') {
            format!("{}{segment}", self.path)
        } else {
            format!("{}.{segment}", self.path)
        };
        Walk {
            path,
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
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                let dup = self.child(&key).path;
                self.out.push(dup);
            }
            map.next_value_seed(self.child(&key))?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq
            .next_element_seed(self.child(&format!("[{i}]")))?
            .is_some()
        {
            i += 1;
        }
        Ok(())
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
    }
}
