//! `managedFields` bookkeeping of every write (upstream's `fieldmanager`): who a write's field
//! manager is, and which fields each manager owns after it, on top of [`api::apply`]. Server-side
//! apply itself is [`crate::apply`].

use crate::{
    admission::Part,
    error::{ApiError, ApiResult},
    object, openapi,
    registry::{Kind, Schema, Subresource},
    request::Params,
};
use api::{
    apply::{OpenApi, Requested, Scope, Writer},
    field::FieldError,
};
use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

/// Upstream's limit on a field manager's length.
const MAX_MANAGER_LEN: usize = 128;

/// The field manager of a non-apply write: `fieldManager`, else the `User-Agent`'s product.
/// `options` names the request's options kind in errors (`CreateOptions`, `UpdateOptions`,
/// `PatchOptions`); `force` is refused, since only an apply may force.
pub(crate) fn field_manager(
    params: &Params,
    headers: &HeaderMap,
    options: &str,
) -> ApiResult<String> {
    if params.force.is_some() {
        return Err(options_invalid(
            options,
            &[FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            )],
        ));
    }
    match params.field_manager.as_deref().filter(|m| !m.is_empty()) {
        Some(m) => validate_manager(m, options).map(|()| m.to_string()),
        None => {
            let agent = headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let product = agent.split('/').next().unwrap_or("");
            Ok(product.chars().take(MAX_MANAGER_LEN).collect())
        }
    }
}

pub(crate) fn validate_manager(m: &str, options: &str) -> ApiResult<()> {
    if m.len() > MAX_MANAGER_LEN {
        return Err(options_invalid(
            options,
            &[FieldError::too_long("fieldManager", MAX_MANAGER_LEN)],
        ));
    }
    if let Some((i, c)) = m.char_indices().find(|(_, c)| c.is_control()) {
        return Err(options_invalid(
            options,
            &[FieldError::invalid(
                "fieldManager",
                json!(m),
                format!("invalid character {c:?} (at position {i})"),
            )],
        ));
    }
    Ok(())
}

/// A 422 about the request's options, e.g. `PatchOptions.meta.k8s.io "" is invalid: ...`.
pub(crate) fn options_invalid(kind: &str, errors: &[FieldError]) -> ApiError {
    let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.kind.reason(), "message": e.message(), "field": e.field}))
        .collect();
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("{kind}.meta.k8s.io \"\" is invalid: {}", list.join(", ")),
        details: Some(json!({"group": "meta.k8s.io", "kind": kind, "causes": causes})),
    }
}

/// The subresource a write goes through, as `managedFields` names it.
pub(crate) fn subresource_name(part: Part) -> &'static str {
    match part {
        Part::Main => "",
        Part::Status => Subresource::Status.name(),
        Part::Finalize => Subresource::Finalize.name(),
        Part::EphemeralContainers => Subresource::EphemeralContainers.name(),
    }
}

/// The fields a write through `subresource` owns: a kind's `status` is written only through its
/// `status` subresource, when it has one.
pub(crate) fn scope(def: &Kind, subresource: &str) -> Scope<'static> {
    if subresource == Subresource::Status.name() {
        Scope::Only("status")
    } else if def.has(Subresource::Status) {
        Scope::Except("status")
    } else {
        Scope::Whole
    }
}

/// The merge schema of a kind: a built-in kind's OpenAPI schema with upstream's list and map
/// types, a custom resource's structural schema (its `x-kubernetes-list-type`s and such).
pub(crate) fn schema_of(def: &Kind) -> OpenApi<'_> {
    match (&def.schema, openapi::schema_of(def)) {
        (Some(Schema::Custom { .. }), Some(root)) => OpenApi::structural(root),
        (_, Some(root)) => OpenApi::new(root, openapi::components()),
        (_, None) => OpenApi::undescribed(),
    }
}

/// Records a non-apply write in `managedFields`: `prepare` (admission) turns the request's
/// object into what is stored, and what changed from `old` (`None` on create) becomes the
/// manager's. The `managedFields` the request carried (`[]` or `[{}]` to reset them) are read
/// before admission drops them; a `status` write may not set them.
pub(crate) fn track(
    def: &Kind,
    old: Option<&Value>,
    next: &mut Value,
    manager: &str,
    part: Part,
    prepare: impl FnOnce(&mut Value) -> ApiResult<()>,
) -> ApiResult<()> {
    record(def, old, next, manager, subresource_name(part), prepare)
}

/// [`track`] for a write through another subresource (`scale`), which changes the object
/// itself and is recorded with the subresource's name.
pub(crate) fn track_subresource(
    def: &Kind,
    old: &Value,
    next: &mut Value,
    manager: &str,
    sub: Subresource,
    prepare: impl FnOnce(&mut Value) -> ApiResult<()>,
) -> ApiResult<()> {
    record(def, Some(old), next, manager, sub.name(), prepare)
}

fn record(
    def: &Kind,
    old: Option<&Value>,
    next: &mut Value,
    manager: &str,
    subresource: &str,
    prepare: impl FnOnce(&mut Value) -> ApiResult<()>,
) -> ApiResult<()> {
    let requested = if subresource.is_empty() {
        Requested::of(next)
    } else {
        Requested::Keep
    };
    // Upstream's field manager sees the request as decoded, defaults included, and runs before
    // the kind's strategy: what the strategy generates (a Job's selector and labels, a status
    // carried over) is nobody's, so a later apply that leaves it out does not remove it.
    // Defaulting only fills what is missing, so it is safe before `prepare`'s type check, which
    // still refuses a mistyped request with the same answer (decoding it twice per write would
    // cost every pod status update).
    def.strategy.defaults(next);
    let now = object::now_rfc3339();
    let writer = Writer {
        manager,
        api_version: &def.api_version(),
        subresource,
        now: &now,
    };
    api::apply::update(
        old,
        next,
        &requested,
        &schema_of(def),
        &writer,
        scope(def, subresource),
    );
    admit_keeping_managed(next, prepare)
}

/// Runs admission on an applied object without losing the `managedFields` apply computed (the
/// strategies drop whatever a client sent there).
pub(crate) fn admit_keeping_managed(
    obj: &mut Value,
    prepare: impl FnOnce(&mut Value) -> ApiResult<()>,
) -> ApiResult<()> {
    let managed = obj
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .cloned();
    prepare(obj)?;
    match managed {
        Some(m) => {
            object::meta_mut(obj).insert("managedFields".into(), m);
        }
        None => {
            object::meta_mut(obj).remove("managedFields");
        }
    }
    Ok(())
}
