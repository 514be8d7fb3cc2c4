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
    change::{Outcome, Write},
    error::{ApiError, ApiResult},
    managed_fields::{
        admit_keeping_managed, options_invalid, schema_of, scope, subresource_name,
        validate_manager,
    },
    object,
    plugins::{Operation, Review},
    registry::Kind,
    request::{self, Format, Params, Target},
    rest::{object_response, with_warnings},
    state::ApiServer,
    view::{intake, present},
};
use api::{
    apply::{ApplyError, Writer},
    field::FieldError,
};
use axum::{http::StatusCode, response::Response};
use bytes::Bytes;
use serde_json::{Value, json};

/// How many times an apply that races with a create or delete starts over.
const MAX_ATTEMPTS: usize = 8;

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
                    reserved: Default::default(),
                    mutated: Default::default(),
                };
                let pass = self.intake(&review);
                admit_keeping_managed(&mut obj, |o| {
                    warnings.extend(admission::prepare_create(&def, o, ns, &*self.cache, pass)?);
                    Ok(())
                })?;
                self.check_namespace_open(&def, ns, name)?;
                warnings.extend(self.admit(&review, &mut obj, pass).await?);
                match self.store_create(&def, obj, dry_run).await {
                    Ok(created) => {
                        review.reserved.keep();
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
