//! Conversions between a stored object and another version or group's view of it.
//!
//! Upstream stores one version of each resource and converts on the way in and out; a kind
//! served as a view ([`super::Storage::View`]) does the same. `apiVersion` and `kind` are set by
//! the caller, so a conversion only moves fields.

use serde_json::Value;

/// Turns a stored object into this view's form and back.
pub trait Conversion: Send + Sync {
    /// The stored form to this view's.
    fn stored_to_view(&self, obj: Value) -> Value;
    /// This view's form to the stored one.
    fn view_to_stored(&self, obj: Value) -> Value;
}

/// The `None` conversion of CustomResourceDefinitions: versions differ only in `apiVersion`.
pub struct Identity;

impl Conversion for Identity {
    fn stored_to_view(&self, obj: Value) -> Value {
        obj
    }

    fn view_to_stored(&self, obj: Value) -> Value {
        obj
    }
}

/// Moves the value at dotted path `from` to dotted path `to` (absent stays absent).
pub fn rename(obj: &mut Value, from: &str, to: &str) {
    let Some(v) = take(obj, from) else {
        return;
    };
    put(obj, to, v);
}

/// Removes and returns the value at a dotted path.
pub fn take(obj: &mut Value, dotted: &str) -> Option<Value> {
    let (parent, last) = match dotted.rsplit_once('.') {
        Some((p, l)) => (p, l),
        None => ("", dotted),
    };
    let holder = if parent.is_empty() {
        Some(obj)
    } else {
        parent.split('.').try_fold(obj, |v, seg| v.get_mut(seg))
    };
    holder?.as_object_mut()?.remove(last)
}

/// Sets the value at a dotted path, creating objects on the way.
pub fn put(obj: &mut Value, dotted: &str, v: Value) {
    let mut cur = obj;
    let segs: Vec<&str> = dotted.split('.').collect();
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Default::default());
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == segs.len() {
            map.insert((*seg).to_string(), v);
            return;
        }
        cur = map
            .entry((*seg).to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renames_nested_paths() {
        let mut v = json!({"a": {"b": 1}, "c": 2});
        rename(&mut v, "a.b", "x.y.z");
        rename(&mut v, "c", "d");
        rename(&mut v, "missing", "e");
        assert_eq!(v, json!({"a": {}, "x": {"y": {"z": 1}}, "d": 2}));
    }
}
