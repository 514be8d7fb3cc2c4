//! What the server does to an object before storing it: server-owned metadata, the split between
//! a resource and its `status` subresource, generations, defaulting and validation.
//!
//! Mirrors upstream's generic registry (`rest.BeforeCreate`, `rest.BeforeUpdate`): the parts
//! every kind shares are here, and each kind's [`crate::registry::Strategy`] supplies the rest
//! (`PrepareForCreate`, `PrepareForUpdate` of the main resource and of `status`, `Validate*`).

use crate::{
    error::{ApiError, ApiResult},
    object,
    registry::{Cluster, Generation, Kind, Reset, Subresource},
};
use api::field::FieldError;
use serde_json::{Map, Value, json};

/// Which part of the object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but `status` (for resources with a status subresource).
    Main,
    /// The `status` subresource: only `status`.
    Status,
    /// `namespaces/{name}/finalize`: the main resource whose `spec.finalizers` may change (a
    /// write of the main resource keeps them, as upstream's namespace strategy does).
    Finalize,
    /// `pods/{name}/ephemeralcontainers`: the stored pod with only `spec.ephemeralContainers`
    /// taken from the write (upstream's `dropNonEphemeralContainerUpdates`).
    EphemeralContainers,
}

/// How unknown fields are treated (`fieldValidation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Reject with 400.
    Strict,
    /// Accept, with a `Warning` header per field.
    Warn,
    /// Accept silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the query value; absent means `Warn`, upstream's server default.
    pub fn parse(v: Option<&str>) -> ApiResult<Self> {
        match v {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn, or Strict, got {other:?}"
            ))),
        }
    }
}

/// Fields the server owns and a client's write never changes.
const SERVER_OWNED_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Checks `apiVersion`/`kind` against the endpoint and fills them when missing.
pub fn check_type(def: &Kind, obj: &mut Value) -> ApiResult<()> {
    let want_av = def.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => obj["apiVersion"] = Value::String(want_av.clone()),
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        None | Some("") => obj["kind"] = Value::String(def.kind.clone()),
        Some(k) if k == def.kind.as_str() => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
    }
    Ok(())
}

/// Reconciles the namespace in the body with the one in the path.
pub fn check_namespace(def: &Kind, obj: &mut Value, path_ns: Option<&str>) -> ApiResult<()> {
    let meta = object::meta_mut(obj);
    if !def.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    let Some(path_ns) = path_ns else {
        return Err(ApiError::bad_request(
            "a namespace is required for namespaced resources",
        ));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        None | Some("") => {
            meta.insert("namespace".into(), Value::String(path_ns.to_string()));
            Ok(())
        }
        Some(ns) if ns == path_ns => Ok(()),
        Some(_) => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
}

/// Checks `obj` decodes as the kind's upstream type would; a 400 `BadRequest` like upstream's
/// decoding error otherwise. Unknown fields are ignored here (field validation handles them), so
/// rollwright's own additions pass.
pub(crate) fn typecheck(def: &Kind, obj: &Value) -> ApiResult<()> {
    let Some(check) = def.typecheck else {
        return Ok(());
    };
    check(obj).map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            def.kind, def.version, def.kind
        ))
    })
}

/// Which run of a kind's strategy on a write this is. Upstream decodes a write as the kind's
/// type once, before admission, and prepares and validates it once, after mutating admission
/// (`rest.BeforeCreate`/`BeforeUpdate`); a write no mutating plugin may change is validated on
/// intake, which is the same thing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The object as the client sent it: decoded as the kind's type, and validated unless
    /// `validate` is false because the admission chain runs [`Pass::AfterMutation`].
    Intake {
        /// Whether to validate now.
        validate: bool,
    },
    /// After mutating admission, which may have changed the object (a webhook's patch is
    /// decoded as the kind's type where it is applied).
    AfterMutation,
}

impl Pass {
    /// The intake of a write that no admission plugin may change.
    pub const VALIDATED: Pass = Pass::Intake { validate: true };
}

/// Prepares a new object: names it, stamps server metadata, resets status, defaults, validates
/// (as `pass` says), and assigns what the server assigns (cluster IPs). Returns the strategy's
/// warnings.
pub fn prepare_create(
    def: &Kind,
    obj: &mut Value,
    path_ns: Option<&str>,
    cluster: &dyn Cluster,
    pass: Pass,
) -> ApiResult<Vec<String>> {
    check_type(def, obj)?;
    check_namespace(def, obj, path_ns)?;
    let strategy = &def.strategy;
    let meta = object::meta_mut(obj);
    let has_name = meta
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !has_name
        && let Some(prefix) = meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    {
        let name = format!("{prefix}{}", random_suffix());
        meta.insert("name".into(), Value::String(name));
    }
    for f in SERVER_OWNED_META {
        meta.remove(*f);
    }
    meta.remove("resourceVersion");
    meta.remove("managedFields");
    meta.insert("uid".into(), Value::String(new_uid()));
    meta.insert(
        "creationTimestamp".into(),
        Value::String(object::now_rfc3339()),
    );
    if strategy.generation() != Generation::Untracked {
        meta.insert("generation".into(), json!(1));
    }
    if def.has(Subresource::Status)
        && !strategy.keeps_status_on_create()
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    strategy_create(def, obj, pass)?;
    let name = object::name(obj).to_string();
    strategy
        .allocate(obj, cluster)
        .map_err(|errors| ApiError::invalid(def, &name, &errors))?;
    Ok(strategy.warnings(obj))
}

/// The kind's own part of a create (upstream's `rest.BeforeCreate` after the system fields):
/// prepare (status, what is derived, such as a pod's QoS class), default, validate, as `pass`
/// says.
pub(crate) fn strategy_create(def: &Kind, obj: &mut Value, pass: Pass) -> ApiResult<()> {
    let strategy = &def.strategy;
    strategy.prepare_for_create(obj);
    if let Pass::Intake { validate } = pass {
        typecheck(def, obj)?;
        if !validate {
            strategy.defaults(obj);
            return Ok(());
        }
    }
    strategy.defaults(obj);
    let name = object::name(obj).to_string();
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    errors.extend(strategy.validate(obj));
    if errors.is_empty() {
        // Upstream's `rest.BeforeCreate`: once the kind's own rules pass, the metadata rules
        // every kind shares, so that no name is stored that is not one segment of its URL.
        errors.extend(api::validation::meta::validate_common(obj, def.namespaced));
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid(def, &name, &errors));
    }
    Ok(())
}

/// Takes `part` of the stored object `old` into `new` (a status write's resets).
fn reset(new: &mut Value, old: &Value, part: Reset) {
    let copy = |new: &mut Value, parent: &[&str], key: &str| {
        let from = parent
            .iter()
            .try_fold(old, |v, k| v.get(*k))
            .and_then(|p| p.get(key))
            .cloned();
        let mut holder = &mut *new;
        for k in parent {
            if !holder.get(*k).is_some_and(Value::is_object) {
                holder[*k] = json!({});
            }
            holder = &mut holder[*k];
        }
        if let Some(m) = holder.as_object_mut() {
            match from {
                Some(v) => m.insert(key.to_string(), v),
                None => m.remove(key),
            };
        }
    };
    match part {
        Reset::Spec => copy(new, &[], "spec"),
        Reset::Labels => copy(new, &["metadata"], "labels"),
        Reset::Annotations => copy(new, &["metadata"], "annotations"),
        Reset::DeletionTimestamp => copy(new, &["metadata"], "deletionTimestamp"),
        Reset::OwnerReferences => copy(new, &["metadata"], "ownerReferences"),
        Reset::AllButStatus => {
            let status = new.get("status").cloned();
            *new = old.clone();
            if let Some(m) = new.as_object_mut() {
                match status {
                    Some(s) => m.insert("status".into(), s),
                    None => m.remove("status"),
                };
            }
        }
    }
}

/// Whether `generation` moves from `old` to `new` under `policy`.
fn generation_moves(policy: Generation, new: &Value, old: &Value) -> bool {
    let differs = |path: &str| new.pointer(path) != old.pointer(path);
    match policy {
        Generation::Untracked | Generation::Fixed => false,
        Generation::Spec => differs("/spec"),
        Generation::SpecOrAnnotations => differs("/spec") || differs("/metadata/annotations"),
        Generation::AllButMetadataAndStatus => {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("metadata");
                    m.remove("status");
                }
                v
            };
            strip(new) != strip(old)
        }
    }
}

/// Prepares an update of `old` into `new` through `part`: keeps what the client may not change
/// (as the kind's strategy says for the main resource or for `status`), moves `generation`,
/// defaults and validates. Returns the strategy's warnings.
pub fn prepare_update(
    def: &Kind,
    new: &mut Value,
    old: &Value,
    part: Part,
    cluster: &dyn Cluster,
) -> ApiResult<Vec<String>> {
    check_type(def, new)?;
    let strategy = &def.strategy;
    let name = object::name(old).to_string();
    if object::name(new) != name {
        if object::name(new).is_empty() {
            object::meta_mut(new).insert("name".into(), Value::String(name.clone()));
        } else {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                object::name(new)
            )));
        }
    }
    if let Some(ns) = object::namespace(old).map(str::to_string) {
        check_namespace(def, new, Some(&ns))?;
    }
    if part == Part::Status {
        for r in strategy.status_resets() {
            reset(new, old, *r);
        }
    }
    if part == Part::EphemeralContainers {
        keep_only_ephemeral_containers(new, old);
    }
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut errors = Vec::new();
    {
        let meta = object::meta_mut(new);
        // An update may leave `uid` out, but not change it (`ValidateObjectMetaUpdate`).
        let new_uid = meta.get("uid").and_then(Value::as_str).unwrap_or_default();
        let old_uid = old_meta
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !new_uid.is_empty() && new_uid != old_uid {
            errors.push(FieldError::invalid(
                "metadata.uid",
                Value::from(new_uid),
                "field is immutable",
            ));
        }
        for f in SERVER_OWNED_META {
            match old_meta.get(*f) {
                Some(v) => meta.insert((*f).to_string(), v.clone()),
                None => meta.remove(*f),
            };
        }
        meta.remove("managedFields");
        meta.insert(
            "namespace".into(),
            old_meta.get("namespace").cloned().unwrap_or(Value::Null),
        );
        if !def.namespaced {
            meta.remove("namespace");
        }
    }
    if part != Part::Status && def.has(Subresource::Status) {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    strategy_update(def, new, old, part, errors, Pass::VALIDATED)?;
    if part != Part::Status {
        strategy
            .allocate_update(new, old, cluster)
            .map_err(|errors| ApiError::invalid(def, &name, &errors))?;
    }
    Ok(strategy.warnings(new))
}

/// The kind's own part of an update of `old` into `new` through `part` (upstream's
/// `rest.BeforeUpdate` after the system fields): default, prepare, move `generation`, validate,
/// with `errors` already found. Run again on what mutating admission changed, as upstream runs
/// it after mutating admission.
pub(crate) fn strategy_update(
    def: &Kind,
    new: &mut Value,
    old: &Value,
    part: Part,
    mut errors: Vec<FieldError>,
    pass: Pass,
) -> ApiResult<()> {
    let strategy = &def.strategy;
    let name = object::name(old).to_string();
    if matches!(pass, Pass::Intake { .. }) {
        typecheck(def, new)?;
    }
    strategy.defaults(new);
    match part {
        Part::EphemeralContainers => {}
        Part::Main | Part::Finalize => {
            if part == Part::Main {
                strategy.prepare_for_update(new, old);
            }
            let old_generation = old.pointer("/metadata/generation").and_then(Value::as_i64);
            if let Some(g) = old_generation {
                let g = if generation_moves(strategy.generation(), new, old) {
                    g + 1
                } else {
                    g
                };
                object::meta_mut(new).insert("generation".into(), json!(g));
            }
        }
        Part::Status => strategy.prepare_for_status_update(new, old),
    }
    if object::is_deleting(old) {
        let added: Vec<String> = object::finalizers(new)
            .into_iter()
            .filter(|f| !object::finalizers(old).contains(f))
            .collect();
        if !added.is_empty() {
            errors.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                ),
            ));
        }
    }
    match part {
        Part::Main | Part::Finalize => errors.extend(strategy.validate_update(new, old)),
        Part::Status => errors.extend(strategy.validate_status_update(new, old)),
        Part::EphemeralContainers => {
            // Only pods have them: their whole spec, then what changed of them.
            errors.extend(api::validation::pod::validate_pod(new));
            errors.extend(api::validation::pod::ephemeral::validate_update(new, old));
        }
    }
    if errors.is_empty() {
        // Upstream's `rest.BeforeUpdate` checks every kind's metadata as on create once the
        // kind's own rules pass (a CustomResourceDefinition's annotations are limited too).
        errors.extend(api::validation::meta::validate_common(new, def.namespaced));
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid(def, &name, &errors));
    }
    Ok(())
}

/// Runs the kind's strategy on an object that mutating admission may have changed, as upstream runs
/// `rest.BeforeCreate` / `BeforeUpdate` only after mutating admission: what the strategy derives
/// (a pod's QoS class from the resources LimitRanger defaulted) follows the mutation, and a
/// mutation the kind's validation refuses is refused. `old` is the stored object of an update;
/// writes of subresources other than `status` carry another kind's object and are left alone.
pub(crate) fn after_mutation(
    def: &Kind,
    obj: &mut Value,
    old: Option<&Value>,
    subresource: Option<&str>,
) -> ApiResult<()> {
    let pass = Pass::AfterMutation;
    match (old, subresource) {
        (None, None) => strategy_create(def, obj, pass),
        (Some(old), None) => strategy_update(def, obj, old, Part::Main, Vec::new(), pass),
        (Some(old), Some("status")) => {
            for r in def.strategy.status_resets() {
                reset(obj, old, *r);
            }
            strategy_update(def, obj, old, Part::Status, Vec::new(), pass)
        }
        _ => Ok(()),
    }
}

/// Upstream's `dropNonEphemeralContainerUpdates`: the stored pod, with the write's ephemeral
/// containers and its name, namespace, resourceVersion and uid (which the update's own checks
/// then hold against the stored ones).
fn keep_only_ephemeral_containers(new: &mut Value, old: &Value) {
    let mut kept = old.clone();
    for key in ["name", "namespace", "resourceVersion", "uid"] {
        match new.pointer(&format!("/metadata/{key}")) {
            Some(v) => kept["metadata"][key] = v.clone(),
            None => {
                if let Some(m) = kept.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove(key);
                }
            }
        }
    }
    let ephemeral = new
        .pointer("/spec/ephemeralContainers")
        .cloned()
        .unwrap_or(Value::Null);
    if kept.get("spec").is_some_and(Value::is_object) {
        kept["spec"]["ephemeralContainers"] = ephemeral;
    }
    *new = kept;
}

/// Unknown- and duplicate-field findings for `fieldValidation`: an error under Strict, warnings
/// under Warn. Unknown fields of built-in kinds are dropped from `obj` whatever the mode
/// ([`crate::openapi::take_unknown`]). `duplicates` are the body's
/// ([`crate::request::duplicates`]), computed by the caller only when the mode is not Ignore.
pub fn check_fields(
    def: &Kind,
    obj: &mut Value,
    duplicates: Vec<String>,
    mode: FieldValidation,
) -> ApiResult<Vec<String>> {
    let unknown = crate::openapi::take_unknown(def, obj);
    if mode == FieldValidation::Ignore || (unknown.is_empty() && duplicates.is_empty()) {
        return Ok(Vec::new());
    }
    let mut findings: Vec<String> = unknown
        .into_iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    findings.extend(duplicates);
    if findings.is_empty() {
        return Ok(Vec::new());
    }
    match mode {
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            findings.join(", ")
        ))),
        _ => Ok(findings),
    }
}

/// Whether two objects are the same apart from `resourceVersion` (a write that changes nothing is
/// not stored, so it does not wake every watcher).
///
/// Compared in place, field by field: every update asks this, and copying both objects to drop
/// one field from each was a few percent of the API server's CPU in a rollout.
pub fn same_object(a: &Value, b: &Value) -> bool {
    /// Two maps equal apart from the key `skip` (in any order, as `Map`'s `==` has it).
    fn equal_without(a: &Map<String, Value>, b: &Map<String, Value>, skip: &str) -> bool {
        let len = |m: &Map<String, Value>| m.len() - usize::from(m.contains_key(skip));
        len(a) == len(b)
            && a.iter()
                .filter(|(k, _)| k.as_str() != skip)
                .all(|(k, v)| b.get(k) == Some(v))
    }
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return a == b;
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| match (k.as_str(), v, b.get(k)) {
            ("metadata", Value::Object(m), Some(Value::Object(n))) => {
                equal_without(m, n, "resourceVersion")
            }
            (_, v, w) => w == Some(v),
        })
}

/// Removes `resourceVersion` before the object is stored (the store's revision is the truth).
pub fn strip_resource_version(obj: &mut Value) {
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        m.remove("resourceVersion");
    }
}

/// A random RFC 4122 version 4 UUID.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let mut b = b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Five characters from upstream's `generateName` alphabet (no vowels, no confusable digits).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use std::sync::Arc;

    #[test]
    fn same_object_ignores_only_the_resource_version() {
        let pod = |rv: &str, image: &str| {
            json!({"metadata": {"name": "p", "resourceVersion": rv, "labels": {"a": "1"}},
                   "spec": {"containers": [{"name": "c", "image": image}]}})
        };
        assert!(same_object(&pod("1", "x"), &pod("2", "x")));
        assert!(!same_object(&pod("1", "x"), &pod("1", "y")));
        let without_rv = json!({"metadata": {"name": "p", "labels": {"a": "1"}},
                                "spec": {"containers": [{"name": "c", "image": "x"}]}});
        assert!(same_object(&pod("1", "x"), &without_rv));
        assert!(same_object(&without_rv, &pod("1", "x")));
        let relabelled = json!({"metadata": {"name": "p", "labels": {"a": "2"}},
                                "spec": {"containers": [{"name": "c", "image": "x"}]}});
        assert!(!same_object(&pod("1", "x"), &relabelled));
        let extra = json!({"metadata": {"name": "p", "resourceVersion": "1", "labels": {"a": "1"}},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {}});
        assert!(!same_object(&pod("1", "x"), &extra));
        assert!(!same_object(&extra, &pod("1", "x")));
        // Key order does not matter, as `Value`'s own equality has it.
        let reordered = json!({"spec": {"containers": [{"image": "x", "name": "c"}]},
                               "metadata": {"labels": {"a": "1"}, "resourceVersion": "9", "name": "p"}});
        assert!(same_object(&pod("1", "x"), &reordered));
        assert!(same_object(&json!(1), &json!(1)));
        assert!(!same_object(&json!({}), &json!([])));
    }

    /// A cluster with nothing in it.
    pub(crate) struct Empty;

    impl Cluster for Empty {
        fn objects(&self, _: &str, _: &str) -> Vec<Value> {
            Vec::new()
        }
    }

    fn find(group: &str, version: &str, plural: &str) -> Arc<Kind> {
        Registry::new().find(group, version, plural).unwrap()
    }

    #[test]
    fn create_stamps_metadata_and_resets_workload_status() {
        let def = find("apps", "v1", "deployments");
        let mut d = json!({"metadata": {"generateName": "web-", "resourceVersion": "5", "uid": "x"},
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": {"metadata": {"labels": {"app": "w"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}, "status": {"replicas": 9}});
        prepare_create(&def, &mut d, Some("default"), &Empty, Pass::VALIDATED).unwrap();
        let name = object::name(&d);
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["namespace"], "default");
        assert_eq!(d["metadata"]["generation"], 1);
        assert_ne!(d["metadata"]["uid"], "x");
        assert!(d["metadata"].get("resourceVersion").is_none());
        assert!(d.get("status").is_none());
    }

    fn deployment() -> (Arc<Kind>, Value) {
        let def = find("apps", "v1", "deployments");
        let mut old = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
        prepare_create(&def, &mut old, Some("default"), &Empty, Pass::VALIDATED).unwrap();
        old["status"] = json!({"replicas": 1});
        (def, old)
    }

    #[test]
    fn update_bumps_generation_on_spec_and_annotation_changes_and_keeps_status() {
        let (def, old) = deployment();
        let mut same = old.clone();
        same["metadata"]["labels"] = json!({"x": "y"});
        same["status"] = json!({"replicas": 7});
        prepare_update(&def, &mut same, &old, Part::Main, &Empty).unwrap();
        assert_eq!(same["metadata"]["generation"], 1);
        assert_eq!(same["status"]["replicas"], 1);
        let mut changed = old.clone();
        changed["spec"]["replicas"] = json!(5);
        prepare_update(&def, &mut changed, &old, Part::Main, &Empty).unwrap();
        assert_eq!(changed["metadata"]["generation"], 2);
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "2"});
        prepare_update(&def, &mut annotated, &old, Part::Main, &Empty).unwrap();
        assert_eq!(annotated["metadata"]["generation"], 2);
    }

    #[test]
    fn a_deployment_status_write_keeps_annotations_and_resets_spec_and_labels() {
        let (def, old) = deployment();
        let mut status = old.clone();
        status["spec"]["replicas"] = json!(9);
        status["status"] = json!({"replicas": 3});
        status["metadata"]["labels"] = json!({"x": "y"});
        status["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "1"});
        prepare_update(&def, &mut status, &old, Part::Status, &Empty).unwrap();
        assert_eq!(status["spec"], old["spec"]);
        assert_eq!(status["status"]["replicas"], 3);
        assert!(status["metadata"].get("labels").is_none());
        assert_eq!(
            status["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "1"
        );
        assert_eq!(status["metadata"]["generation"], 1);
    }

    #[test]
    fn changing_the_uid_is_invalid_and_leaving_it_out_keeps_it() {
        let (def, old) = deployment();
        let mut changed = old.clone();
        changed["metadata"]["uid"] = json!("other");
        let err = prepare_update(&def, &mut changed, &old, Part::Main, &Empty).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .contains("metadata.uid: Invalid value: \"other\": field is immutable"),
            "{}",
            err.message
        );
        let mut without = old.clone();
        object::meta_mut(&mut without).remove("uid");
        prepare_update(&def, &mut without, &old, Part::Main, &Empty).unwrap();
        assert_eq!(without["metadata"]["uid"], old["metadata"]["uid"]);
    }

    #[test]
    fn rejects_wrong_kind_and_namespace() {
        let def = find("", "v1", "pods");
        let mut p = json!({"kind": "Node", "metadata": {"name": "x"}});
        assert_eq!(
            prepare_create(&def, &mut p, Some("default"), &Empty, Pass::VALIDATED)
                .unwrap_err()
                .code,
            400
        );
        let mut p = json!({"metadata": {"name": "x", "namespace": "other"}});
        assert_eq!(
            prepare_create(&def, &mut p, Some("default"), &Empty, Pass::VALIDATED)
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn rejects_wrong_shapes_and_accepts_extensions() {
        let pods = find("", "v1", "pods");
        let ok = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert!(typecheck(&pods, &ok).is_ok());
        for bad in [
            json!({"metadata": {"name": "p", "labels": "x"}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": "x"}}),
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": 3}]}}),
        ] {
            let err = typecheck(&pods, &bad).unwrap_err();
            assert_eq!(err.code, 400, "{bad}");
            assert!(
                err.message
                    .starts_with("Pod in version \"v1\" cannot be handled as a Pod"),
                "{}",
                err.message
            );
        }
        let ds = find("apps", "v1", "daemonsets");
        let with_extension = json!({"metadata": {"name": "d"}, "spec": {"selector": {}, "template": {},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}});
        assert!(typecheck(&ds, &with_extension).is_ok());
        // YAML `cpu: 1` arrives as a JSON number; upstream's Quantity decodes numbers too.
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": 1.5}}}]}});
        assert!(typecheck(&pods, &pod).is_ok());
    }

    #[test]
    fn uids_are_version_4() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
