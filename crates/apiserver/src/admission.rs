//! What the server does to an object before storing it: server-owned metadata, the split between
//! a resource and its `status` subresource, generations, defaulting and validation.
//!
//! Mirrors upstream's REST strategies (`PrepareForCreate`, `PrepareForUpdate`, `Validate*`) and
//! the admission plugins that matter here, driven by [`ResourceDef`] rather than one type per
//! resource.

use crate::{
    error::{ApiError, ApiResult},
    object,
    resource::ResourceDef,
};
use api::field::FieldError;
use serde_json::{Value, json};

/// Which part of the object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but `status` (for resources with a status subresource).
    Main,
    /// The `status` subresource: only `status`.
    Status,
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
pub fn check_type(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
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
        None | Some("") => obj["kind"] = Value::String(def.kind.to_string()),
        Some(k) if k == def.kind => {}
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
pub fn check_namespace(def: &ResourceDef, obj: &mut Value, path_ns: Option<&str>) -> ApiResult<()> {
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

/// Prepares a new object: names it, stamps server metadata, resets status, defaults, validates.
pub fn prepare_create(def: &ResourceDef, obj: &mut Value, path_ns: Option<&str>) -> ApiResult<()> {
    check_type(def, obj)?;
    check_namespace(def, obj, path_ns)?;
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
    meta.insert("generation".into(), json!(1));
    reset_status_on_create(def, obj);
    crate::typecheck::check(def, obj)?;
    api::defaults::apply(def.group, def.kind, obj);
    let name = object::name(obj).to_string();
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    errors.extend(api::validation::validate_create(def.group, def.kind, obj));
    if !errors.is_empty() {
        return Err(ApiError::invalid(def, &name, &errors));
    }
    Ok(())
}

/// The status a new object starts with, as upstream's strategies set it.
fn reset_status_on_create(def: &ResourceDef, obj: &mut Value) {
    let status = match (def.group, def.kind) {
        ("", "Pod") => {
            let qos = qos_class(obj);
            json!({"phase": "Pending", "qosClass": qos})
        }
        ("", "Namespace") => json!({"phase": "Active"}),
        ("", "PersistentVolumeClaim") => json!({"phase": "Pending"}),
        ("", "PersistentVolume") => {
            json!({"phase": "Pending", "lastPhaseTransitionTime": object::now_rfc3339()})
        }
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => json!({}),
        // Nodes may be created with their status (kubelets register that way); the rest have none.
        _ => return,
    };
    obj["status"] = status;
}

/// The pod's QoS class from its containers' requests and limits (upstream `GetPodQOS`, for CPU
/// and memory).
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| pod.get("spec")?.get(*k)?.as_array())
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let res = c.get("resources");
        let requests = res
            .and_then(|r| r.get("requests"))
            .and_then(Value::as_object);
        let limits = res.and_then(|r| r.get("limits")).and_then(Value::as_object);
        for r in ["cpu", "memory"] {
            let req = requests.and_then(|m| m.get(r));
            let lim = limits.and_then(|m| m.get(r));
            if req.is_some() || lim.is_some() {
                any = true;
            }
            match (req, lim) {
                (_, None) => guaranteed = false,
                (Some(a), Some(b)) if a != b => guaranteed = false,
                _ => {}
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// Prepares an update of `old` into `new` through `part`: keeps what the client may not change,
/// bumps `generation` on spec changes, defaults and validates.
pub fn prepare_update(
    def: &ResourceDef,
    new: &mut Value,
    old: &Value,
    part: Part,
) -> ApiResult<()> {
    check_type(def, new)?;
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
        // Only status changes; everything else comes from the stored object.
        let status = new.get("status").cloned();
        let rv = object::resource_version(new).map(str::to_string);
        *new = old.clone();
        match status {
            Some(s) => new["status"] = s,
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        let meta = object::meta_mut(new);
        match rv {
            Some(rv) => meta.insert("resourceVersion".into(), Value::String(rv)),
            None => meta.remove("resourceVersion"),
        };
        return crate::typecheck::check(def, new);
    }
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    {
        let meta = object::meta_mut(new);
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
    if def.has(crate::resource::Subresource::Status) {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    crate::typecheck::check(def, new)?;
    api::defaults::apply(def.group, def.kind, new);
    let old_generation = old_meta
        .get("generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let generation = if def.tracks_generation && new.get("spec") != old.get("spec") {
        old_generation + 1
    } else {
        old_generation
    };
    object::meta_mut(new).insert("generation".into(), json!(generation));
    if object::is_deleting(old) {
        let added: Vec<String> = object::finalizers(new)
            .into_iter()
            .filter(|f| !object::finalizers(old).contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                def,
                &name,
                &[FieldError::forbidden(
                    "metadata.finalizers",
                    format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                    ),
                )],
            ));
        }
    }
    let errors = api::validation::validate_update(def.group, def.kind, new, old);
    if !errors.is_empty() {
        return Err(ApiError::invalid(def, &name, &errors));
    }
    Ok(())
}

/// Unknown-field findings for `fieldValidation`: an error under Strict, warnings under Warn.
pub fn check_fields(
    def: &ResourceDef,
    obj: &Value,
    mode: FieldValidation,
) -> ApiResult<Vec<String>> {
    if mode == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let unknown = crate::openapi::unknown_fields(def.group, def.version, def.kind, obj);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    match mode {
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            unknown.join(", ")
        ))),
        _ => Ok(unknown),
    }
}

/// Whether two objects are the same apart from `resourceVersion` (a write that changes nothing is
/// not stored, so it does not wake every watcher).
pub fn same_object(a: &Value, b: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(Value::Object(m)) = v.get_mut("metadata") {
            m.remove("resourceVersion");
        }
        v
    }
    strip(a) == strip(b)
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
mod tests {
    use super::*;
    use crate::resource::find;

    #[test]
    fn create_stamps_metadata_and_resets_workload_status() {
        let def = find("apps", "v1", "deployments").unwrap();
        let mut d = json!({"metadata": {"generateName": "web-", "resourceVersion": "5", "uid": "x"},
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": {"metadata": {"labels": {"app": "w"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}, "status": {"replicas": 9}});
        prepare_create(def, &mut d, Some("default")).unwrap();
        let name = object::name(&d);
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["namespace"], "default");
        assert_eq!(d["metadata"]["generation"], 1);
        assert_ne!(d["metadata"]["uid"], "x");
        assert!(d["metadata"].get("resourceVersion").is_none());
        assert_eq!(d["status"], json!({}));
    }

    #[test]
    fn update_bumps_generation_only_on_spec_change_and_keeps_status() {
        let def = find("apps", "v1", "deployments").unwrap();
        let mut old = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
        prepare_create(def, &mut old, Some("default")).unwrap();
        old["status"] = json!({"replicas": 1});
        let mut same = old.clone();
        same["metadata"]["labels"] = json!({"x": "y"});
        same["status"] = json!({"replicas": 7});
        prepare_update(def, &mut same, &old, Part::Main).unwrap();
        assert_eq!(same["metadata"]["generation"], 1);
        assert_eq!(same["status"]["replicas"], 1);
        let mut changed = old.clone();
        changed["spec"]["replicas"] = json!(5);
        prepare_update(def, &mut changed, &old, Part::Main).unwrap();
        assert_eq!(changed["metadata"]["generation"], 2);
        let mut status = old.clone();
        status["spec"]["replicas"] = json!(9);
        status["status"] = json!({"replicas": 3});
        prepare_update(def, &mut status, &old, Part::Status).unwrap();
        assert_eq!(status["spec"], old["spec"]);
        assert_eq!(status["status"]["replicas"], 3);
    }

    #[test]
    fn rejects_wrong_kind_and_namespace() {
        let def = find("", "v1", "pods").unwrap();
        let mut p = json!({"kind": "Node", "metadata": {"name": "x"}});
        assert_eq!(
            prepare_create(def, &mut p, Some("default"))
                .unwrap_err()
                .code,
            400
        );
        let mut p = json!({"metadata": {"name": "x", "namespace": "other"}});
        assert_eq!(
            prepare_create(def, &mut p, Some("default"))
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn qos_classes() {
        let be = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(qos_class(&be), "BestEffort");
        let g = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(qos_class(&b), "Burstable");
    }

    #[test]
    fn uids_are_version_4() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
