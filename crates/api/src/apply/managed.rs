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

    fn to_json(&self) -> Value {
        if let Some(v) = &self.source {
            return v.clone();
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

    fn from_json(v: &Value) -> Result<Self, ManagedFieldsError> {
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
        let fields = match v.get("fieldsV1") {
            Some(f) => FieldSet::from_fields_v1(f)?,
            None => FieldSet::new(),
        };
        Ok(ManagedEntry {
            manager: s("manager"),
            operation,
            api_version: s("apiVersion"),
            time: v.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: s("subresource"),
            fields,
            source: Some(v.clone()),
        })
    }
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
            let old = self.entries.remove(i);
            let mut bucket = ManagedEntry {
                manager: ANCIENT_CHANGES.into(),
                operation: Operation::Update,
                api_version: old.api_version.clone(),
                time: None,
                subresource: String::new(),
                fields: old.fields.clone(),
                source: None,
            };
            if let Some(existing) = self.get(&bucket) {
                bucket.fields = bucket.fields.union(&existing.fields);
            }
            self.set(bucket);
        }
    }

    /// The `managedFields` list in upstream's order: `Apply` before `Update`, then by time,
    /// manager, API version and subresource.
    pub fn to_json(&self) -> Value {
        let mut entries: Vec<&ManagedEntry> = self.entries.iter().collect();
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
        Value::Array(entries.into_iter().map(ManagedEntry::to_json).collect())
    }

    /// Writes the entries into `metadata.managedFields` (removing it when there are none).
    pub fn write_to(&self, obj: &mut Value) {
        let Some(Value::Object(meta)) = obj.get_mut("metadata") else {
            if !self.is_empty()
                && let Value::Object(root) = obj
            {
                let mut meta = Map::new();
                meta.insert("managedFields".into(), self.to_json());
                root.insert("metadata".into(), Value::Object(meta));
            }
            return;
        };
        if self.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), self.to_json());
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
        let out = m.to_json();
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
