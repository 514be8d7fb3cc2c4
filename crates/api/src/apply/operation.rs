//! The two operations that move field ownership: an apply and any other write (an update).
//!
//! **Apply** (upstream's `Updater.Apply`): the configuration is merged into the live object; the
//! fields the manager applied last time and no longer applies are removed unless someone else
//! (its new configuration included) owns them; a field whose value changes and that another
//! manager owns is a conflict unless forced, in which case ownership moves to the applier.
//!
//! **Update** (upstream's `Updater.Update`): whatever the write changed belongs to the writer
//! from now on, and nobody else keeps a field that changed or went away.
//!
//! Both leave server-owned metadata (`name`, `uid`, `resourceVersion`, ...) unowned, and only
//! track the part of the object their endpoint may change (upstream's reset fields): the main
//! resource of a kind with a `status` subresource does not own `status`, and the `status`
//! subresource owns nothing else.

use super::{
    conflict::Conflicts,
    diff::{diff, diff_top},
    fields::{ItemError, fields_of, with_named_fields},
    managed::{ManagedEntry, ManagedFields, Operation},
    merge::{merge, remove},
    path::PathElement,
    schema::Schema,
    set::FieldSet,
};
use serde_json::{Map, Value};

/// The annotation of client-side `kubectl apply`.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager whose server-side applies take over from client-side apply (upstream upgrades
/// the annotation only for kubectl's own default manager).
const KUBECTL: &str = "kubectl";

/// The manager that owns what an object held before its first apply, when nobody tracked it.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Who writes, and through which endpoint.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// The API version of the request, e.g. `apps/v1`.
    pub api_version: &'a str,
    /// The subresource written through (`status`, `scale`), empty for the main resource.
    pub subresource: &'a str,
    /// The time of the write (RFC 3339), stamped on the entry of a manager that changed something.
    pub now: &'a str,
}

impl Writer<'_> {
    fn entry(&self, operation: Operation, fields: FieldSet, time: Option<String>) -> ManagedEntry {
        ManagedEntry {
            manager: self.manager.to_string(),
            operation,
            api_version: self.api_version.to_string(),
            time,
            subresource: self.subresource.to_string(),
            fields,
            source: None,
            parsed: true,
        }
    }
}

/// The top-level fields an endpoint's writes own (upstream's reset fields, inverted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Everything.
    Whole,
    /// Everything but this field (the main resource of a kind with a `status` subresource).
    Except(&'a str),
    /// Only this field (the `status` subresource).
    Only(&'a str),
}

impl Scope<'_> {
    fn keeps(&self, pe: &PathElement) -> bool {
        pe.as_field().is_none_or(|name| self.keeps_field(name))
    }

    fn keeps_field(&self, name: &str) -> bool {
        match self {
            Scope::Whole => true,
            Scope::Except(f) => name != *f,
            Scope::Only(f) => name == *f,
        }
    }
}

/// Why an apply was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The configuration is not an object.
    #[error("the applied configuration must be an object")]
    NotAnObject,
    /// The configuration sets `metadata.managedFields`.
    #[error("metadata.managedFields must be nil")]
    ManagedFieldsInConfig,
    /// A list item of the configuration has no identity, or two share one.
    #[error(transparent)]
    Item(#[from] ItemError),
    /// Fields other managers own would change.
    #[error("{0}")]
    Conflicts(Conflicts),
}

/// Metadata fields nobody owns (upstream's `stripMetaManager`).
const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// `set` without server-owned paths and outside the scope.
fn tracked(mut set: FieldSet, scope: Scope) -> FieldSet {
    set.retain_top(|pe| scope.keeps(pe));
    set.remove_field_members(&[], &["apiVersion", "kind", "metadata"]);
    set.remove_field_members(&["metadata"], SERVER_META);
    set
}

/// Reads the managers of an object, their fields left unparsed until needed; unreadable
/// bookkeeping starts over, as upstream's does.
fn managers_of(obj: Option<&Value>) -> ManagedFields {
    obj.and_then(|o| o.get("metadata")?.get("managedFields"))
        .and_then(|v| ManagedFields::from_json_lazily(v).ok())
        .unwrap_or_default()
}

/// Whether two objects are equal apart from their managers.
fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(Value::Object(m)) = v.get_mut("metadata") {
            m.remove("managedFields");
        }
        v
    };
    strip(a) == strip(b)
}

/// Server-side apply of `config` by `writer` to `live` (`None`: the object does not exist yet).
/// Returns the new object with its `managedFields`; it equals `live` when nothing changed.
pub fn apply<S: Schema>(
    live: Option<&Value>,
    config: &Value,
    schema: &S,
    writer: &Writer,
    scope: Scope,
    force: bool,
) -> Result<Value, ApplyError> {
    match apply_once(live, config, schema, writer, scope, force) {
        Err(ApplyError::Conflicts(conflicts)) if writer.manager == KUBECTL && !force => {
            // Taking over from client-side apply: fields the last client-side apply set are
            // kubectl's to change.
            let allowed = live
                .map(|l| allowed_by_last_applied(l, schema))
                .unwrap_or_default();
            let remaining = Conflicts(
                conflicts
                    .0
                    .iter()
                    .filter(|c| !allowed.has(&c.path.0))
                    .cloned()
                    .collect(),
            );
            if remaining.is_empty() {
                apply_once(live, config, schema, writer, scope, true)
            } else {
                Err(ApplyError::Conflicts(remaining))
            }
        }
        other => other,
    }
    .map(|mut obj| {
        if writer.manager == KUBECTL {
            sync_last_applied(&mut obj, config);
        }
        obj
    })
}

fn apply_once<S: Schema>(
    live: Option<&Value>,
    config: &Value,
    schema: &S,
    writer: &Writer,
    scope: Scope,
    force: bool,
) -> Result<Value, ApplyError> {
    if !config.is_object() {
        return Err(ApplyError::NotAnObject);
    }
    if config
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::ManagedFieldsInConfig);
    }
    let mut managers = managers_of(live);
    managers.load_all();
    if let Some(live) = live
        && managers.is_empty()
    {
        // Nobody tracked this object: what it holds belongs to someone, so an apply that changes
        // it conflicts (upstream's `skipNonAppliedManager`).
        let before = Writer {
            manager: BEFORE_FIRST_APPLY,
            ..*writer
        };
        let held = tracked(diff(None, Some(live), schema).added, scope);
        managers.set(before.entry(Operation::Update, held, Some(writer.now.to_string())));
    }
    let applied = tracked(fields_of(config, schema, true)?, scope);
    let me = writer.entry(Operation::Apply, applied.clone(), None);
    let previous = managers.get(&me).cloned();
    let last = previous
        .as_ref()
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let empty = Value::Object(Map::new());
    let base = live.unwrap_or(&empty);
    let mut merged = merge(base, config, schema);
    managers.set(me.clone());

    if !last.is_empty() {
        // Fields this manager applied before and no longer does go, unless someone (its new
        // configuration included) still owns them.
        let owned = managers
            .entries
            .iter()
            .fold(FieldSet::new(), |acc, e| acc.union(&e.fields));
        let gone = with_named_fields(&last, schema).difference(&with_named_fields(&owned, schema));
        merged = remove(&merged, &gone, schema);
    }

    let (changed, removed) = diff_top(Some(base), Some(&merged), schema, |k| scope.keeps_field(k))
        .into_changed_and_removed();
    let (changed, removed) = (tracked(changed, scope), tracked(removed, scope));
    let conflicting: Vec<(&ManagedEntry, FieldSet)> = managers
        .entries
        .iter()
        .filter(|e| !e.same_manager(&me))
        .map(|e| (e, e.fields.intersection(&changed)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if !force && !conflicting.is_empty() {
        return Err(ApplyError::Conflicts(Conflicts::from_managers(conflicting)));
    }
    let others: Vec<ManagedEntry> = managers
        .entries
        .iter()
        .filter(|e| !e.same_manager(&me))
        .filter(|e| e.fields.intersects(&changed) || e.fields.intersects(&removed))
        .map(|e| {
            let mut e = e.clone();
            e.fields.subtract(&changed);
            e.fields.subtract(&removed);
            e
        })
        .collect();
    for e in others {
        managers.set(e);
    }
    let time = if same_content(base, &merged) && live.is_some() {
        previous.and_then(|p| p.time)
    } else {
        Some(writer.now.to_string())
    };
    managers.set(ManagedEntry { time, ..me });
    managers.cap_updates();
    managers.write_to(&mut merged);
    Ok(merged)
}

/// After admission: when a write changed nothing but the times its bookkeeping stamped (an
/// apply spelt a value differently from how the server stores it, say), the stored
/// `managedFields` stay, so that the write is a no-op and the object's version does not move.
pub fn settle(old: &Value, new: &mut Value) {
    let managed = |v: &Value| {
        v.get("metadata")
            .and_then(|m| m.get("managedFields"))
            .cloned()
    };
    let untimed = |v: Option<Value>| match v {
        Some(Value::Array(mut entries)) => {
            for e in &mut entries {
                if let Value::Object(m) = e {
                    m.remove("time");
                }
            }
            Some(Value::Array(entries))
        }
        other => other,
    };
    let before = managed(old);
    if before.is_some()
        && untimed(before.clone()) == untimed(managed(new))
        && same_content(old, new)
        && let (Some(b), Some(Value::Object(meta))) = (before, new.get_mut("metadata"))
    {
        meta.insert("managedFields".into(), b);
    }
}

/// Fields both the live object and its client-side `last-applied-configuration` set.
fn allowed_by_last_applied<S: Schema>(live: &Value, schema: &S) -> FieldSet {
    let Some(last) = annotation(live, LAST_APPLIED)
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .filter(Value::is_object)
    else {
        return FieldSet::new();
    };
    match (
        fields_of(live, schema, false),
        fields_of(&last, schema, false),
    ) {
        (Ok(l), Ok(a)) => l.intersection(&a),
        _ => FieldSet::new(),
    }
}

fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// Keeps client-side apply's annotation in step with kubectl's server-side applies, so that
/// going back to client-side apply works (upstream's `lastAppliedUpdater`).
fn sync_last_applied(obj: &mut Value, config: &Value) {
    if annotation(obj, LAST_APPLIED).is_none() {
        return;
    }
    let mut last = config.clone();
    if let Some(Value::Object(a)) = last
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    {
        a.remove(LAST_APPLIED);
    }
    let text = sorted(&last).to_string();
    if let Some(Value::Object(a)) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    {
        a.insert(LAST_APPLIED.into(), Value::String(text));
    }
}

/// The value with object keys sorted, as Go encodes maps.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// What the request said about `managedFields`, for [`update`].
#[derive(Clone, Debug, PartialEq)]
pub enum Requested {
    /// Nothing (or a subresource write, which may not change them): keep the stored ones.
    Keep,
    /// This list: `[]` or `[{}]` resets the bookkeeping, anything else readable replaces it.
    List(Value),
}

impl Requested {
    /// What the body of a write carries.
    pub fn of(body: &Value) -> Self {
        match body.get("metadata").and_then(|m| m.get("managedFields")) {
            None | Some(Value::Null) => Requested::Keep,
            Some(v) => Requested::List(v.clone()),
        }
    }
}

/// Records a non-apply write: `old` (`None` on create) became `new`. Sets `new`'s
/// `managedFields`.
pub fn update<S: Schema>(
    old: Option<&Value>,
    new: &mut Value,
    requested: &Requested,
    schema: &S,
    writer: &Writer,
    scope: Scope,
) {
    let mut managers = match requested {
        Requested::List(Value::Array(items))
            if items.is_empty()
                || (items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty)) =>
        {
            ManagedFields::default()
        }
        Requested::List(v) => match ManagedFields::from_json_lazily(v) {
            Ok(m) if !m.is_empty() => m,
            _ => managers_of(old),
        },
        Requested::Keep => managers_of(old),
    };
    let (changed, removed) =
        diff_top(old, Some(new), schema, |k| scope.keeps_field(k)).into_changed_and_removed();
    let (changed, removed) = (tracked(changed, scope), tracked(removed, scope));
    let me = writer.entry(Operation::Update, FieldSet::new(), None);
    // Only the entries this write takes fields from are parsed and rewritten.
    let mut others = Vec::new();
    for e in managers.entries.iter_mut() {
        if e.same_manager(&me) {
            e.load();
        } else if e.touches(&changed) || e.touches(&removed) {
            e.load();
            let mut e = e.clone();
            e.fields.subtract(&changed);
            e.fields.subtract(&removed);
            others.push(e);
        }
    }
    for e in others {
        managers.set(e);
    }
    let previous = managers.get(&me).cloned();
    match previous {
        // Nothing of this manager's changed: its entry stays as it was.
        Some(p) if changed.is_empty() && !p.fields.intersects(&removed) => {}
        Some(p) => {
            let mut fields = p.fields.clone();
            fields.subtract(&removed);
            fields.union_with(&changed);
            let time = if changed.is_empty() {
                p.time
            } else {
                Some(writer.now.to_string())
            };
            managers.set(ManagedEntry { fields, time, ..me });
        }
        None => managers.set(ManagedEntry {
            fields: changed,
            time: Some(writer.now.to_string()),
            ..me
        }),
    }
    managers.cap_updates();
    managers.write_to(new);
}
