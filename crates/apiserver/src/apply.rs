//! Server-side apply over HTTP (`PATCH` with `application/apply-patch+yaml`), and the
//! `managedFields` bookkeeping of every other write, on top of [`api::apply`].
//!
//! The field manager of a request is its `fieldManager` parameter; an apply must name one, other
//! writes default to the product of their `User-Agent` (`kubectl/v1.33.0 (...)` is `kubectl`), as
//! upstream does. Merge rules come from the kind's OpenAPI schema, decorated with upstream's list
//! and map types ([`api::apply::builtin`]); a kind without a schema merges as upstream's deduced
//! type.

use crate::{
    admission::{self, FieldValidation, Part},
    error::{ApiError, ApiResult},
    object, openapi,
    plugins::{Operation, Review},
    registry::{Kind, Schema, Subresource},
    request::{self, Format, Params, Target},
    rest::{Outcome, Write, intake, object_response, present, with_warnings},
    server::ApiServer,
};
use api::{
    apply::{ApplyError, OpenApi, Requested, Scope, Writer},
    field::FieldError,
};
use axum::{
    http::{HeaderMap, StatusCode, header},
    response::Response,
};
use bytes::Bytes;
use serde_json::{Value, json};

/// Upstream's limit on a field manager's length.
const MAX_MANAGER_LEN: usize = 128;

/// How many times an apply that races with a create or delete starts over.
const MAX_ATTEMPTS: usize = 8;

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

fn validate_manager(m: &str, options: &str) -> ApiResult<()> {
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
fn options_invalid(kind: &str, errors: &[FieldError]) -> ApiError {
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
fn subresource_name(part: Part) -> &'static str {
    match part {
        Part::Main => "",
        Part::Status => Subresource::Status.name(),
        Part::Finalize => Subresource::Finalize.name(),
    }
}

/// The fields a write through `subresource` owns: a kind's `status` is written only through its
/// `status` subresource, when it has one.
fn scope(def: &Kind, subresource: &str) -> Scope<'static> {
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
fn schema_of(def: &Kind) -> OpenApi<'_> {
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
fn admit_keeping_managed(
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

/// An apply's refusal as upstream answers it.
fn apply_error(def: &Kind, e: ApplyError) -> ApiError {
    match e {
        ApplyError::Conflicts(conflicts) => {
            let causes: Vec<Value> = conflicts
                .0
                .iter()
                .map(|c| {
                    json!({"reason": "FieldManagerConflict",
                           "message": format!("conflict with {}", c.manager),
                           "field": c.path.to_string()})
                })
                .collect();
            ApiError {
                code: 409,
                reason: "Conflict",
                message: conflicts.to_string(),
                details: Some(json!({"causes": causes})),
            }
        }
        ApplyError::Item(item) => ApiError {
            code: 422,
            reason: "Invalid",
            message: format!(
                "failed to create typed patch object ({}, Kind={}): {item}",
                def.api_version(),
                def.kind
            ),
            details: Some(json!({"group": def.group, "kind": def.kind, "causes": [
                {"reason": "FieldValueInvalid", "message": item.to_string()}]})),
        },
        other => ApiError::bad_request(other.to_string()),
    }
}

/// The options of an apply: its manager (required) and whether it forces.
struct ApplyOptions {
    manager: String,
    force: bool,
}

impl ApplyOptions {
    fn from_params(params: &Params) -> ApiResult<Self> {
        let manager = params.field_manager.clone().unwrap_or_default();
        if manager.is_empty() {
            return Err(options_invalid(
                "PatchOptions",
                &[FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        }
        validate_manager(&manager, "PatchOptions")?;
        let force = match params.force.as_deref() {
            None | Some("") | Some("false" | "0" | "False" | "FALSE") => false,
            Some("true" | "1" | "True" | "TRUE") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "invalid value for force: {other:?}"
                )));
            }
        };
        Ok(Self { manager, force })
    }
}

/// Checks what an applied configuration says about itself against the endpoint.
fn check_config(def: &Kind, config: &mut Value, name: &str) -> ApiResult<()> {
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ));
    }
    let want = def.api_version();
    let got = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if got != want {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {got}, expected: {want}"
        )));
    }
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != def.kind {
        return Err(ApiError::bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {kind}, expected: {}",
            def.kind
        )));
    }
    match object::name(config) {
        "" => {
            object::meta_mut(config).insert("name".into(), Value::String(name.to_string()));
        }
        n if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {}
    }
    Ok(())
}

/// `fieldValidation` of an apply configuration, worded as upstream's apply path words it: under
/// Strict an unknown field fails the typed conversion of structured-merge-diff (500, as upstream's
/// plain error), and a duplicate key fails yaml.v2's strict decoding (400).
fn check_apply_fields(
    view: &Kind,
    config: &mut Value,
    t: &Target,
    body: &Bytes,
    fv: FieldValidation,
) -> ApiResult<Vec<String>> {
    match fv {
        FieldValidation::Ignore => return admission::check_fields(view, config, Vec::new(), fv),
        FieldValidation::Warn => {
            let duplicates = request::duplicates(body, Format::Yaml);
            return admission::check_fields(view, config, duplicates, fv);
        }
        FieldValidation::Strict => {}
    }
    let unknown = crate::openapi::take_unknown(view, config);
    if !unknown.is_empty() {
        let mut errors: Vec<String> = unknown
            .iter()
            .map(|p| format!(".{p}: field not declared in schema"))
            .collect();
        if errors.len() > 1 {
            errors = std::iter::once("errors:".to_string())
                .chain(errors.into_iter().map(|e| format!("  {e}")))
                .collect();
        }
        let group = if view.group.is_empty() {
            ""
        } else {
            &view.group
        };
        return Err(ApiError {
            code: 500,
            reason: "",
            message: format!(
                "failed to create typed patch object ({}/{}; {group}/{}, Kind={}): {}",
                t.namespace.as_deref().unwrap_or(""),
                t.name.as_deref().unwrap_or(""),
                view.version,
                view.kind,
                errors.join("\n")
            ),
            details: None,
        });
    }
    if let Some(dup) = request::duplicates(body, Format::Yaml).first() {
        return Err(ApiError::bad_request(format!(
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {dup}"
        )));
    }
    Ok(Vec::new())
}

impl ApiServer {
    /// `PATCH` with an apply configuration: creates the object if it does not exist, merges
    /// the configuration into it otherwise.
    pub(crate) async fn server_side_apply(
        &self,
        t: &Target,
        params: &Params,
        body: &Bytes,
        part: Part,
        out: crate::request::Output,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        // The configuration is in the kind the request addressed (`view`), which may be another
        // group or version of the kind that is stored (`def`): it is merged into the live object
        // as that view presents it, then stored as the stored kind.
        let view = &*t.def;
        let def = self.storage_of(&t.def);
        let opts = ApplyOptions::from_params(params)?;
        let dry_run = params.dry_run()?;
        let mut config = request::decode(body, Format::Yaml)?;
        check_config(view, &mut config, name)?;
        let fv = FieldValidation::parse(params.field_validation.as_deref())?;
        let mut warnings = check_apply_fields(view, &mut config, t, body, fv)?;
        let precondition = request::parse_rv(object::resource_version(&config))?;
        let subresource = subresource_name(part);
        let ns = t.namespace.as_deref();
        let now = object::now_rfc3339();
        let api_version = view.api_version();
        let writer = Writer {
            manager: &opts.manager,
            api_version: &api_version,
            subresource,
            now: &now,
        };
        let scope = scope(view, subresource);
        let schema = schema_of(view);
        let merge = |live: Option<&Value>| -> ApiResult<Value> {
            let live = live.map(|l| present(view, l.clone()));
            api::apply::apply(live.as_ref(), &config, &schema, &writer, scope, opts.force)
                .map(|merged| intake(view, &def, merged))
                .map_err(|e| apply_error(view, e))
        };
        for _ in 0..MAX_ATTEMPTS {
            self.sync_cache().await?;
            if self.cache.get(&def, ns, name).is_none() {
                if part == Part::Status {
                    return Err(ApiError::not_found(&def, name));
                }
                if precondition.is_some() {
                    return Err(ApiError::stale(&def, name));
                }
                let mut obj = merge(None)?;
                admit_keeping_managed(&mut obj, |o| {
                    warnings.extend(admission::prepare_create(&def, o, ns, &*self.cache)?);
                    Ok(())
                })?;
                self.check_namespace_open(&def, ns, name)?;
                // An apply that creates is a CREATE to every admission plugin, as upstream's
                // patch handler makes it.
                let user = crate::context::user()?;
                let review = Review {
                    user: &user,
                    operation: Operation::Create,
                    kind: &def,
                    view,
                    namespace: ns,
                    name,
                    subresource: None,
                    old: None,
                    dry_run,
                };
                warnings.extend(self.admit(&review, &mut obj).await?);
                match self.store_create(&def, obj, dry_run).await {
                    Ok(created) => {
                        if !dry_run {
                            self.after_write(&def, &created);
                        }
                        return Ok(with_warnings(
                            object_response(view, &def, StatusCode::CREATED, &created, out),
                            &warnings,
                        ));
                    }
                    Err(e) if e.reason == "AlreadyExists" => continue,
                    Err(e) => return Err(e),
                }
            }
            let mut strategy_warnings = Vec::new();
            // An apply that changes an object is an UPDATE to every admission plugin.
            let write = Write {
                view,
                subresource: t.sub.map(|s| s.name()),
            };
            let result = self
                .admitted_update(&def, ns, name, dry_run, Some(write), |old, rev| {
                    if precondition.is_some_and(|want| want != rev) {
                        return Err(ApiError::stale(&def, name));
                    }
                    let mut next = merge(Some(old))?;
                    admit_keeping_managed(&mut next, |n| {
                        strategy_warnings =
                            admission::prepare_update(&def, n, old, part, &*self.cache)?;
                        Ok(())
                    })?;
                    api::apply::settle(old, &mut next);
                    Ok(self.finish_if_released(next))
                })
                .await;
            match result {
                Err(e) if e.code == 404 => continue,
                Err(e) => return Err(e),
                Ok((outcome, admitted)) => {
                    if !dry_run {
                        self.after_outcome(&def, &outcome);
                    }
                    warnings.extend(strategy_warnings);
                    warnings.extend(admitted);
                    let (Outcome::Written(v) | Outcome::Unchanged(v) | Outcome::Deleted(v)) =
                        outcome;
                    return Ok(with_warnings(
                        object_response(view, &def, StatusCode::OK, &v, out),
                        &warnings,
                    ));
                }
            }
        }
        Err(ApiError::conflict(
            &def,
            name,
            "the object was created and deleted concurrently too often; please retry",
        ))
    }
}
