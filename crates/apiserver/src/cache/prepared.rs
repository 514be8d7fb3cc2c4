//! What a write already knows of the object it stores, handed to the cache so that the cache,
//! which sees the write come back from the store's watch, need not parse the object again.
//!
//! Every write reaches the cache twice: once as the `Value` the request handler built, and once
//! as the stored bytes in the store's event. Parsing those bytes back into a `Value` (for the
//! labels and selectable fields the cache indexes) and printing it again (with the
//! `resourceVersion` set) was 6.6% of a rollout's CPU (issue 24's profile). So the writer notes
//! the labels and field values of what it stores, keyed by the store key, and the cache takes the
//! note when the event's bytes are the ones noted; `resourceVersion` goes into the bytes directly.
//!
//! The note is a pure function of the bytes, so a stale or missing note only costs the parse it
//! would have saved: the cache checks that the event carries exactly the noted bytes.

use super::{Labels, Packed};
use crate::registry::Kind;
use bytes::Bytes;
use serde_json::{Value, value::RawValue};
use std::{collections::HashMap, sync::Mutex};
use store::Revision;

/// At most this many notes wait for their events; past it (writes whose events never came, after
/// a relist, say) all are dropped.
const MAX_NOTES: usize = 16_384;

/// What the cache indexes of one stored object.
pub(super) struct Indexed {
    pub(super) labels: Labels,
    pub(super) field_values: Packed,
}

impl Indexed {
    /// The labels and selectable field values of `obj`, an object of `def`.
    pub(super) fn of(def: &Kind, obj: &Value) -> Self {
        Indexed {
            labels: Labels::of(obj),
            field_values: Packed::new(
                def.selectable_fields
                    .iter()
                    .map(|f| def.selectable_value(obj, f))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(String::as_str),
            ),
        }
    }
}

/// One write's note.
struct Note {
    bytes: Bytes,
    indexed: Indexed,
}

/// Notes by store key, from the writers to the cache's feeding task.
#[derive(Default)]
pub(super) struct Notes(Mutex<HashMap<String, Note>>);

impl Notes {
    /// Notes that `bytes`, the serialized `obj`, are about to be written under `key`.
    pub(super) fn note(&self, key: &str, bytes: &Bytes, indexed: Indexed) {
        let mut notes = self.lock();
        if notes.len() >= MAX_NOTES && !notes.contains_key(key) {
            notes.clear();
        }
        notes.insert(
            key.to_string(),
            Note {
                bytes: bytes.clone(),
                indexed,
            },
        );
    }

    /// Drops the note of a write that did not happen, unless a later write replaced it.
    pub(super) fn forget(&self, key: &str, bytes: &Bytes) {
        let mut notes = self.lock();
        if notes.get(key).is_some_and(|n| same_bytes(&n.bytes, bytes)) {
            notes.remove(key);
        }
    }

    /// Takes the note for `key` if it is of exactly `stored`.
    pub(super) fn take(&self, key: &str, stored: &Bytes) -> Option<Indexed> {
        let mut notes = self.lock();
        if notes.get(key).is_some_and(|n| same_bytes(&n.bytes, stored)) {
            return notes.remove(key).map(|n| n.indexed);
        }
        None
    }

    /// Drops every note (the cache relisted: the events they wait for will not come).
    pub(super) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Note>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The same bytes: the very buffer (the in-process stores hand the written one back), or equal
/// contents (etcd's event is a copy).
fn same_bytes(a: &Bytes, b: &Bytes) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// The stored JSON with `metadata.resourceVersion` set to `rev`, as the last member of
/// `metadata`: what parsing the object, setting it and printing it again gives for the compact
/// JSON the write path stores (which never has a `resourceVersion`), without the parse. `None`
/// when the bytes are not of that shape (then the caller takes the long way).
pub(super) fn with_resource_version(stored: &[u8], rev: Revision) -> Option<Bytes> {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        metadata: &'a RawValue,
    }
    let top: Top<'_> = serde_json::from_slice(stored).ok()?;
    let meta = top.metadata.get();
    if !(meta.starts_with('{') && meta.ends_with('}')) || meta.contains("\"resourceVersion\"") {
        return None;
    }
    let start = (meta.as_ptr() as usize).checked_sub(stored.as_ptr() as usize)?;
    let close = start + meta.len() - 1;
    let empty = meta[1..meta.len() - 1].trim().is_empty();
    let rv = rev.to_string();
    let member = [
        if empty { "" } else { "," },
        "\"resourceVersion\":\"",
        &rv,
        "\"",
    ];
    let mut json = Vec::with_capacity(stored.len() + member.iter().map(|s| s.len()).sum::<usize>());
    json.extend_from_slice(stored.get(..close)?);
    for part in member {
        json.extend_from_slice(part.as_bytes());
    }
    json.extend_from_slice(stored.get(close..)?);
    Some(Bytes::from(json))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The long way: parse, set, print.
    fn reprinted(stored: &str, rev: Revision) -> String {
        let mut v: Value = serde_json::from_str(stored).unwrap_or_default();
        crate::object::meta_mut(&mut v).insert("resourceVersion".into(), rev.to_string().into());
        serde_json::to_string(&v).unwrap_or_default()
    }

    #[test]
    fn splicing_gives_what_reprinting_gives() {
        for stored in [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"x":"}"}},"spec":{"metadata":{}}}"#,
            r#"{"metadata":{},"kind":"ConfigMap"}"#,
            r#"{"kind":"ConfigMap","data":{"metadata":"{\"a\":1}"},"metadata":{"name":"b","annotations":{"k":"\"resourceVersion\": 1"}}}"#,
        ] {
            let spliced = with_resource_version(stored.as_bytes(), 42).unwrap_or_default();
            assert_eq!(
                std::str::from_utf8(&spliced).unwrap_or_default(),
                reprinted(stored, 42),
                "{stored}"
            );
        }
    }

    #[test]
    fn anything_else_takes_the_long_way() {
        for stored in [
            r#"{"kind":"Pod"}"#,
            r#"{"metadata":[]}"#,
            r#"{"metadata":{"resourceVersion":"7"}}"#,
            r#"not json"#,
        ] {
            assert!(
                with_resource_version(stored.as_bytes(), 1).is_none(),
                "{stored}"
            );
        }
    }

    #[test]
    fn a_note_is_taken_only_for_its_own_bytes() {
        let notes = Notes::default();
        let indexed = || Indexed {
            labels: Labels::default(),
            field_values: Packed::default(),
        };
        let first = Bytes::from_static(b"{\"a\":1}");
        let second = Bytes::from_static(b"{\"a\":2}");
        notes.note("/k", &first, indexed());
        notes.note("/k", &second, indexed());
        assert!(
            notes.take("/k", &first).is_none(),
            "a later write replaced it"
        );
        notes.forget("/k", &first);
        assert!(
            notes
                .take("/k", &Bytes::from(b"{\"a\":2}".to_vec()))
                .is_some(),
            "equal bytes"
        );
        assert!(notes.take("/k", &second).is_none(), "taken once");
    }
}
