//! `metadata.managedFields`: who owns which fields, in upstream's format.
//!
//! One entry per manager identity: manager name, operation (`Apply` or `Update`), subresource,
//! and, for `Update` only, the API version (an applier keeps one entry whatever version it
//! applies through, as upstream's `BuildManagerIdentifier` has it).

use super::set::{FieldSet, FieldsError};
use serde_json::{Map, Value, json};

/// How a manager came to own its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply: the manager's applied configuration.
    Apply,
    /// Any other write (create, update, patch): the fields it changed.
    Update,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedEntry {
    /// The field manager, e.g. `kubectl` or `kube-controller-manager`.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: Operation,
    /// The API version the fields are expressed in.
    pub api_version: String,
    /// When the manager last changed the object (RFC 3339), if known.
    pub time: Option<String>,
    /// The subresource written through (`status`, `scale`), empty for the main resource.
    pub subresource: String,
    /// The fields owned.
    pub fields: FieldSet,
    /// The entry as it was read, while nothing about it changed: written back as is, which
    /// spares re-encoding the entries a write does not touch.
    pub(crate) source: Option<Value>,
    /// Whether `fields` holds the entry's fields; an entry read lazily keeps them in `source`
    /// until a write needs them (most writes touch one or two managers' fields).
    pub(crate) parsed: bool,
}

impl ManagedEntry {
    /// Whether two entries are the same manager (and so one entry).
    pub fn same_manager(&self, other: &ManagedEntry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// The manager as upstream's conflict messages print it, e.g.
    /// `"kubectl" with subresource "scale" using apps/v1`.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    /// The entry as upstream writes it: an unchanged one as it was read (moved, not copied:
    /// copying every manager's `fieldsV1` on every write was 1.7% of a rollout's CPU).
    fn into_json(self) -> Value {
        if let Some(v) = self.source {
            return v;
        }
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation.as_str()));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    /// Parses the fields of an entry read lazily (nothing when they are already parsed). A
    /// malformed `fieldsV1` leaves the manager owning nothing, as upstream starts over on
    /// bookkeeping it cannot read.
    pub(crate) fn load(&mut self) {
        if self.parsed {
            return;
        }
        self.parsed = true;
        let read = self
            .source
            .as_ref()
            .and_then(|v| v.get("fieldsV1"))
            .map(FieldSet::from_fields_v1);
        match read {
            Some(Ok(fields)) => self.fields = fields,
            Some(Err(_)) => self.source = None,
            None => {}
        }
    }

    /// Whether the manager owns any of `set` (whether taking `set` from it changes it).
    pub(crate) fn touches(&self, set: &FieldSet) -> bool {
        if self.parsed {
            return self.fields.intersects(set);
        }
        match self.source.as_ref().and_then(|v| v.get("fieldsV1")) {
            Some(Value::Object(raw)) => raw_intersects(raw, set),
            _ => false,
        }
    }

    fn from_json(v: &Value) -> Result<Self, ManagedFieldsError> {
        let mut e = Self::header_from_json(v)?;
        if let Some(f) = v.get("fieldsV1") {
            e.fields = FieldSet::from_fields_v1(f)?;
        }
        e.parsed = true;
        Ok(e)
    }

    /// Everything but the fields, which stay in `source` until [`ManagedEntry::load`].
    fn header_from_json(v: &Value) -> Result<Self, ManagedFieldsError> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let operation = match v.get("operation").and_then(Value::as_str) {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            other => {
                return Err(ManagedFieldsError::Operation(
                    other.unwrap_or("").to_string(),
                ));
            }
        };
        match v.get("fieldsType").and_then(Value::as_str) {
            Some("FieldsV1") | None => {}
            Some(other) => return Err(ManagedFieldsError::FieldsType(other.to_string())),
        }
        if !v.is_object() {
            return Err(ManagedFieldsError::NotAList);
        }
        Ok(ManagedEntry {
            manager: s("manager"),
            operation,
            api_version: s("apiVersion"),
            time: v.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: s("subresource"),
            fields: FieldSet::new(),
            source: Some(v.clone()),
            parsed: false,
        })
    }
}

/// Whether a `fieldsV1` object shares a path with `set`, reading the JSON where the steps are
/// fields (whose keys are unambiguous) and parsing it where they are not.
fn raw_intersects(raw: &Map<String, Value>, set: &FieldSet) -> bool {
    let needs_parse = set
        .members()
        .chain(set.children().map(|(pe, _)| pe))
        .any(|pe| pe.as_field().is_none());
    if needs_parse {
        return FieldSet::from_fields_v1(&Value::Object(raw.clone()))
            .is_ok_and(|parsed| parsed.intersects(set));
    }
    let owned = |v: &Value| {
        v.as_object()
            .is_some_and(|m| m.is_empty() || m.contains_key("."))
    };
    set.members()
        .any(|pe| raw.get(&pe.to_fields_key()).is_some_and(owned))
        || set.children().any(|(pe, sub)| {
            raw.get(&pe.to_fields_key())
                .and_then(Value::as_object)
                .is_some_and(|m| raw_intersects(m, sub))
        })
}

/// Why `managedFields` could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManagedFieldsError {
    /// Not a list of objects.
    #[error("managedFields must be a list of objects")]
    NotAList,
    /// An operation other than `Apply` and `Update`.
    #[error("unsupported operation {0:?}")]
    Operation(String),
    /// A `fieldsType` other than `FieldsV1`.
    #[error("unsupported fieldsType {0:?}")]
    FieldsType(String),
    /// A malformed `fieldsV1`.
    #[error(transparent)]
    Fields(#[from] FieldsError),
}

/// Every manager of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedFields {
    /// The entries, in no particular order until encoded.
    pub entries: Vec<ManagedEntry>,
}

/// How many `Update` managers an object keeps; older ones are folded into one
/// `ancient-changes` entry (upstream's `DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager that older `Update` entries are folded into.
pub const ANCIENT_CHANGES: &str = "ancient-changes";

impl ManagedFields {
    /// Reads `metadata.managedFields` of an object (none: empty).
    pub fn of(obj: &Value) -> Result<Self, ManagedFieldsError> {
        match obj.get("metadata").and_then(|m| m.get("managedFields")) {
            None | Some(Value::Null) => Ok(Self::default()),
            Some(v) => Self::from_json(v),
        }
    }

    /// Reads a `managedFields` list.
    pub fn from_json(v: &Value) -> Result<Self, ManagedFieldsError> {
        let Value::Array(items) = v else {
            return Err(ManagedFieldsError::NotAList);
        };
        let entries = items
            .iter()
            .map(ManagedEntry::from_json)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ManagedFields { entries })
    }

    /// Reads a `managedFields` list leaving each entry's fields unparsed until
    /// [`ManagedEntry::load`].
    pub(crate) fn from_json_lazily(v: &Value) -> Result<Self, ManagedFieldsError> {
        let Value::Array(items) = v else {
            return Err(ManagedFieldsError::NotAList);
        };
        let entries = items
            .iter()
            .map(ManagedEntry::header_from_json)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ManagedFields { entries })
    }

    /// Parses every entry's fields.
    pub(crate) fn load_all(&mut self) {
        self.entries.iter_mut().for_each(ManagedEntry::load);
    }

    /// Whether no manager owns anything.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of a manager.
    pub fn get(&self, who: &ManagedEntry) -> Option<&ManagedEntry> {
        self.entries.iter().find(|e| e.same_manager(who))
    }

    /// Replaces (or adds) the entry of a manager; an empty set removes it. The entry is written
    /// out from its fields from now on.
    pub fn set(&mut self, mut entry: ManagedEntry) {
        entry.source = None;
        entry.parsed = true;
        self.entries.retain(|e| !e.same_manager(&entry));
        if !entry.fields.is_empty() {
            self.entries.push(entry);
        }
    }

    /// Everything owned by managers other than `who`.
    pub fn owned_by_others(&self, who: &ManagedEntry) -> FieldSet {
        self.entries
            .iter()
            .filter(|e| !e.same_manager(who))
            .fold(FieldSet::new(), |acc, e| acc.union(&e.fields))
    }

    /// Folds the oldest `Update` entries beyond [`MAX_UPDATE_MANAGERS`] into `ancient-changes`.
    pub fn cap_updates(&mut self) {
        let updates = |m: &Self| {
            m.entries
                .iter()
                .filter(|e| e.operation == Operation::Update)
                .count()
        };
        while updates(self) > MAX_UPDATE_MANAGERS {
            let oldest = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.operation == Operation::Update && e.manager != ANCIENT_CHANGES)
                .min_by(|(_, a), (_, b)| a.time.cmp(&b.time))
                .map(|(i, _)| i);
            let Some(i) = oldest else { break };
            let mut old = self.entries.remove(i);
            old.load();
            let mut bucket = ManagedEntry {
                manager: ANCIENT_CHANGES.into(),
                operation: Operation::Update,
                api_version: old.api_version.clone(),
                time: None,
                subresource: String::new(),
                fields: old.fields.clone(),
                source: None,
                parsed: true,
            };
            if let Some(existing) = self.entries.iter_mut().find(|e| e.same_manager(&bucket)) {
                existing.load();
                bucket.fields = bucket.fields.union(&existing.fields);
            }
            self.set(bucket);
        }
    }

    /// The `managedFields` list in upstream's order: `Apply` before `Update`, then by time,
    /// manager, API version and subresource.
    pub fn into_json(self) -> Value {
        let mut entries: Vec<ManagedEntry> = self
            .entries
            .into_iter()
            .filter(|e| e.source.is_some() || !e.fields.is_empty())
            .collect();
        entries.sort_by(|a, b| {
            (
                a.operation,
                &a.time,
                &a.manager,
                &a.api_version,
                &a.subresource,
            )
                .cmp(&(
                    b.operation,
                    &b.time,
                    &b.manager,
                    &b.api_version,
                    &b.subresource,
                ))
        });
        Value::Array(entries.into_iter().map(ManagedEntry::into_json).collect())
    }

    /// Writes the entries into `metadata.managedFields` (removing it when there are none).
    pub fn write_to(self, obj: &mut Value) {
        let Some(Value::Object(meta)) = obj.get_mut("metadata") else {
            if !self.is_empty()
                && let Value::Object(root) = obj
            {
                let mut meta = Map::new();
                meta.insert("managedFields".into(), self.into_json());
                root.insert("metadata".into(), Value::Object(meta));
            }
            return;
        };
        if self.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), self.into_json());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_upstream_entries() {
        let v = json!([
            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
             "time": "2024-01-01T00:00:01Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:replicas": {}}}, "subresource": "status"},
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
             "time": "2024-01-01T00:00:02Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]);
        let m = ManagedFields::from_json(&v).unwrap();
        assert_eq!(m.entries.len(), 2);
        // Apply sorts first.
        let out = m.clone().into_json();
        assert_eq!(out[0]["manager"], "kubectl");
        assert_eq!(out[1], v[0]);
        assert_eq!(
            m.entries[0].describe(),
            r#""kube-controller-manager" with subresource "status" using apps/v1"#
        );
        assert_eq!(m.entries[1].describe(), r#""kubectl""#);
        assert!(ManagedFields::from_json(&json!([{"operation": "Merge"}])).is_err());
        assert!(ManagedFields::from_json(&json!({})).is_err());
    }

    #[test]
    fn lazily_read_entries_answer_without_parsing() {
        let v = json!([{"manager": "m", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {},
                "f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}}}}}}]);
        let m = ManagedFields::from_json_lazily(&v).unwrap();
        let e = &m.entries[0];
        assert!(!e.parsed);
        let set = |v: Value| FieldSet::from_fields_v1(&v).unwrap();
        assert!(e.touches(&set(json!({"f:spec": {"f:replicas": {}}}))));
        assert!(!e.touches(&set(json!({"f:spec": {"f:paused": {}}}))));
        assert!(!e.touches(&set(json!({"f:status": {"f:replicas": {}}}))));
        assert!(e.touches(&set(
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {"f:image": {}}}}})
        )));
        assert!(!e.touches(&set(
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"b\"}": {}}}})
        )));
        // Untouched, it is written back exactly as read.
        assert_eq!(m.clone().into_json(), v);
        let mut loaded = m.clone();
        loaded.load_all();
        assert_eq!(
            loaded.entries[0].fields,
            ManagedFields::from_json(&v).unwrap().entries[0].fields
        );
    }

    #[test]
    fn caps_update_managers() {
        let mut m = ManagedFields::default();
        for i in 0..12 {
            m.set(ManagedEntry {
                manager: format!("m{i:02}"),
                operation: Operation::Update,
                api_version: "v1".into(),
                time: Some(format!("2024-01-01T00:00:{i:02}Z")),
                subresource: String::new(),
                fields: FieldSet::from_fields_v1(&json!({ format!("f:f{i}"): {} })).unwrap(),
                source: None,
                parsed: true,
            });
        }
        m.cap_updates();
        assert_eq!(m.entries.len(), MAX_UPDATE_MANAGERS);
        let ancient = m
            .entries
            .iter()
            .find(|e| e.manager == ANCIENT_CHANGES)
            .unwrap();
        assert_eq!(
            ancient.fields.to_fields_v1(),
            json!({"f:f0": {}, "f:f1": {}, "f:f2": {}})
        );
        assert!(
            m.entries
                .iter()
                .all(|e| e.manager != "m00" && e.manager != "m02")
        );
    }
}
