//! The REST verbs on a resource: get, list, create, update, patch, delete, deletecollection.
//!
//! Reads come from the watch cache after it has caught up with the store (a read with no
//! `resourceVersion` is consistent, as upstream's is). Writes go to the store with
//! compare-and-swap on the revision, retried on conflicts that the client did not ask to see, as
//! upstream's `GuaranteedUpdate` does.

use crate::{
    admission::{self, FieldValidation, Part},
    apply,
    cache::Entry,
    error::{ApiError, ApiResult},
    object,
    request::{self, BodyType, Output, Params, Target},
    resource::{self, ResourceDef},
    server::ApiServer,
    table,
};
use api::selector::{FieldSelector, LabelSelector};
use axum::{
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use std::{sync::Arc, time::Duration};
use store::{Revision, StoreError};

/// How long a read waits for the cache to catch up with the store before giving up.
const CACHE_WAIT: Duration = Duration::from_secs(10);
/// How many times a write retries after losing a compare-and-swap race it did not ask for.
const MAX_RETRIES: usize = 16;

/// What a write did.
pub(crate) enum Outcome {
    /// Stored (or would have been, under dry run): the new object, `resourceVersion` set.
    Written(Value),
    /// Nothing changed: the stored object.
    Unchanged(Value),
    /// Deleted: the last state, `resourceVersion` at the deletion.
    Deleted(Value),
}

impl Outcome {
    pub(crate) fn into_value(self) -> Value {
        match self {
            Outcome::Written(v) | Outcome::Unchanged(v) | Outcome::Deleted(v) => v,
        }
    }
}

/// What a write function decides to do with the current object.
pub(crate) enum Change {
    /// Store this object.
    Write(Value),
    /// Delete the object.
    Delete,
}

/// Label and field selectors of a request, checked against what the resource supports.
pub(crate) struct Filter {
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
}

impl Filter {
    pub(crate) fn new(def: &ResourceDef, params: &Params, name: Option<&str>) -> ApiResult<Self> {
        let label =
            match params
                .label_selector
                .as_deref()
                .filter(|s| !s.trim().is_empty())
            {
                None => None,
                Some(s) => Some(LabelSelector::parse(s).map_err(|e| {
                    ApiError::bad_request(format!("unable to parse requirement: {e}"))
                })?),
            };
        let mut selector = params.field_selector.clone().unwrap_or_default();
        if let Some(name) = name {
            // A watch on `/pods/x` is a watch with `metadata.name=x`.
            if !selector.is_empty() {
                selector.push(',');
            }
            selector.push_str(&format!("metadata.name={name}"));
        }
        let field = match selector.trim() {
            "" => None,
            s => {
                let f = FieldSelector::parse(s).map_err(|e| {
                    ApiError::bad_request(format!("invalid field selector {s:?}: {e}"))
                })?;
                let supported = crate::cache::selectable_fields(def.kind);
                if let Some(bad) = f.fields().find(|f| {
                    !matches!(*f, "metadata.name" | "metadata.namespace") && !supported.contains(f)
                }) {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {bad}"
                    )));
                }
                Some(f)
            }
        };
        Ok(Self { label, field })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }

    pub(crate) fn matches(&self, e: &Entry) -> bool {
        self.label.as_ref().is_none_or(|l| l.matches_map(&e.labels))
            && self
                .field
                .as_ref()
                .is_none_or(|f| f.matches(|name: &str| e.field(name)))
    }
}

/// The position a `continue` token encodes.
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: Revision,
    snap: u64,
    off: usize,
}

fn encode_continue(t: &ContinueToken) -> String {
    let raw = serde_json::to_vec(t).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(s: &str) -> ApiResult<ContinueToken> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
        .and_then(|raw| serde_json::from_slice(&raw).ok())
        .ok_or_else(|| ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))
}

/// A JSON response with the given code.
pub(crate) fn json_response(code: StatusCode, body: impl Into<axum::body::Body>) -> Response {
    let mut r = (code, body.into()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Adds `Warning` headers (unknown fields under `fieldValidation=Warn`).
pub(crate) fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

/// `PartialObjectMetadata` of an object.
fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
           "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// Renders one object in the negotiated representation.
pub(crate) fn object_response(
    def: &ResourceDef,
    code: StatusCode,
    obj: &Value,
    out: Output,
) -> Response {
    match out {
        Output::Json => json_response(code, serde_json::to_vec(obj).unwrap_or_default()),
        Output::Metadata => json_response(code, partial_metadata(obj).to_string()),
        Output::Table(include) => {
            let t = table::table(
                def,
                &[obj],
                jiff::Timestamp::now(),
                include,
                json!({
                    "resourceVersion": object::resource_version(obj).unwrap_or_default()
                }),
            );
            json_response(code, t.to_string())
        }
    }
}

impl ApiServer {
    /// Waits until the cache reflects every acknowledged write.
    pub(crate) async fn sync_cache(&self) -> ApiResult<()> {
        let target = self.store.revision();
        if self.cache.revision() >= target || self.cache.wait_for(target, CACHE_WAIT).await {
            Ok(())
        } else {
            Err(ApiError::timeout(
                "the watch cache did not catch up with the store in time",
            ))
        }
    }

    /// Brings the cache to where the request's `resourceVersion` asks.
    async fn sync_for_read(&self, params: &Params) -> ApiResult<()> {
        match params.resource_version()? {
            None => self.sync_cache().await,
            Some(0) => Ok(()),
            Some(rv) => {
                if self.cache.wait_for(rv, Duration::from_secs(3)).await {
                    Ok(())
                } else {
                    Err(ApiError::timeout(format!(
                        "Too large resource version: {rv}, current: {}",
                        self.cache.revision()
                    )))
                }
            }
        }
    }

    /// GET of one object.
    pub(crate) async fn get(
        &self,
        t: &Target,
        params: &Params,
        out: Output,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        self.sync_for_read(params).await?;
        let entry = self
            .cache
            .get(t.def, t.namespace.as_deref(), name)
            .ok_or_else(|| ApiError::not_found(t.def, name))?;
        Ok(match out {
            Output::Json => json_response(StatusCode::OK, entry.json.clone()),
            _ => object_response(t.def, StatusCode::OK, &entry.value(), out),
        })
    }

    /// The filtered objects of a collection and the revision they are consistent at.
    pub(crate) fn select(&self, t: &Target, filter: &Filter) -> (Vec<Arc<Entry>>, Revision) {
        let (mut items, rev) = self.cache.list(t.def, t.namespace.as_deref());
        if !filter.is_empty() {
            items.retain(|e| filter.matches(e));
        }
        (items, rev)
    }

    /// LIST of a collection, with selectors and pagination.
    pub(crate) async fn list(
        &self,
        t: &Target,
        params: &Params,
        out: Output,
    ) -> ApiResult<Response> {
        let filter = Filter::new(t.def, params, None)?;
        let limit = params.limit()?;
        let (page, rev, next, remaining) = if let Some(token) =
            params.continue_token.as_deref().filter(|s| !s.is_empty())
        {
            let token = decode_continue(token)?;
            let snap = self.cache.snapshot(token.snap).ok_or_else(|| {
                ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
            })?;
            paginate(
                &self.cache,
                snap,
                token.rv,
                token.off,
                limit,
                Some(token.snap),
            )
        } else {
            self.sync_for_read(params).await?;
            let (items, rev) = match (
                params.resource_version_match.as_deref(),
                params.resource_version()?,
            ) {
                // An exact list is the collection as it was at that revision, not a newer one.
                (Some("Exact"), Some(rv)) if rv > 0 => {
                    let mut items = self
                        .cache
                        .list_at(t.def, t.namespace.as_deref(), rv)
                        .map_err(|_| {
                            ApiError::expired(
                                "The resourceVersion for the provided list is too old.",
                            )
                        })?;
                    items.retain(|e| filter.matches(e));
                    (items, rv)
                }
                (Some("Exact"), rv) => {
                    let why = match rv {
                        None => {
                            "resourceVersionMatch is forbidden unless resourceVersion is provided"
                        }
                        Some(_) => {
                            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
                        }
                    };
                    return Err(ApiError {
                        code: 422,
                        reason: "Invalid",
                        message: format!(
                            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: {why}"
                        ),
                        details: None,
                    });
                }
                _ => self.select(t, &filter),
            };
            paginate(&self.cache, Arc::new(items), rev, 0, limit, None)
        };
        let mut list_meta = json!({"resourceVersion": rev.to_string()});
        if let Some(next) = next {
            list_meta["continue"] = Value::String(next);
            if filter.is_empty() {
                list_meta["remainingItemCount"] = json!(remaining);
            }
        }
        Ok(match out {
            Output::Json => {
                let mut body =
                    Vec::with_capacity(page.iter().map(|e| e.json.len() + 1).sum::<usize>() + 256);
                body.extend_from_slice(
                    format!(
                        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
                        t.def.list_kind(),
                        t.def.api_version(),
                        list_meta
                    )
                    .as_bytes(),
                );
                for (i, e) in page.iter().enumerate() {
                    if i > 0 {
                        body.push(b',');
                    }
                    body.extend_from_slice(&e.json);
                }
                body.extend_from_slice(b"]}");
                json_response(StatusCode::OK, body)
            }
            Output::Metadata => {
                let items: Vec<Value> = page.iter().map(|e| partial_metadata(&e.value())).collect();
                json_response(
                    StatusCode::OK,
                    json!({"kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "items": items})
                    .to_string(),
                )
            }
            Output::Table(include) => {
                let values: Vec<Value> = page.iter().map(|e| e.value()).collect();
                let refs: Vec<&Value> = values.iter().collect();
                let t = table::table(t.def, &refs, jiff::Timestamp::now(), include, list_meta);
                json_response(StatusCode::OK, t.to_string())
            }
        })
    }

    /// Refuses writes into a namespace that does not exist or is going away.
    pub(crate) fn check_namespace_open(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
    ) -> ApiResult<()> {
        let (Some(ns), true) = (ns, def.namespaced) else {
            return Ok(());
        };
        let ns_def = namespaces();
        let entry = self
            .cache
            .get(ns_def, None, ns)
            .ok_or_else(|| ApiError::not_found(ns_def, ns))?;
        if object::is_deleting(&entry.value()) {
            return Err(ApiError::forbidden(format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                def.group_resource(),
                "",
            )));
        }
        Ok(())
    }

    /// POST to a collection.
    pub(crate) async fn create(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
        out: Output,
    ) -> ApiResult<Response> {
        let (bt, format) = request::body_type(headers)?;
        if bt != BodyType::Object {
            return Err(ApiError::unsupported_media_type("a patch type on create"));
        }
        let mut obj = request::decode_object(body, format)?;
        let manager = apply::field_manager(params, headers, "CreateOptions")?;
        let fv = FieldValidation::parse(params.field_validation.as_deref())?;
        let warnings = admission::check_fields(t.def, &obj, fv)?;
        apply::track(t.def, None, &mut obj, &manager, Part::Main, |o| {
            admission::prepare_create(t.def, o, t.namespace.as_deref())
        })?;
        self.sync_cache().await?;
        self.check_namespace_open(t.def, t.namespace.as_deref())?;
        let created = self.store_create(t.def, obj, params.dry_run()?).await?;
        Ok(with_warnings(
            object_response(t.def, StatusCode::CREATED, &created, out),
            &warnings,
        ))
    }

    /// Stores a prepared new object.
    pub(crate) async fn store_create(
        &self,
        def: &ResourceDef,
        mut obj: Value,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let name = object::name(&obj).to_string();
        let key = def.key(object::namespace(&obj), &name);
        if dry_run {
            if self
                .cache
                .get(def, object::namespace(&obj), &name)
                .is_some()
            {
                return Err(ApiError::already_exists(def, &name));
            }
            return Ok(obj);
        }
        admission::strip_resource_version(&mut obj);
        let bytes = serde_json::to_vec(&obj).map_err(|e| ApiError::internal(e.to_string()))?;
        match self.store.create(&key, Bytes::from(bytes)).await {
            Ok(kv) => {
                set_rv(&mut obj, kv.mod_revision);
                Ok(obj)
            }
            Err(StoreError::AlreadyExists(_)) => Err(ApiError::already_exists(def, &name)),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the current object, lets `f` decide, and writes with compare-and-swap; retries when
    /// another writer got there first.
    pub(crate) async fn guaranteed_update<F>(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        dry_run: bool,
        mut f: F,
    ) -> ApiResult<Outcome>
    where
        F: FnMut(&Value, Revision) -> ApiResult<Change> + Send,
    {
        let key = def.key(ns, name);
        for _ in 0..MAX_RETRIES {
            self.sync_cache().await?;
            let entry = self
                .cache
                .get(def, ns, name)
                .ok_or_else(|| ApiError::not_found(def, name))?;
            let old = entry.value();
            match f(&old, entry.rev)? {
                Change::Write(mut new) => {
                    set_rv(&mut new, entry.rev);
                    if admission::same_object(&new, &old) {
                        return Ok(Outcome::Unchanged(old));
                    }
                    if dry_run {
                        return Ok(Outcome::Written(new));
                    }
                    admission::strip_resource_version(&mut new);
                    let bytes =
                        serde_json::to_vec(&new).map_err(|e| ApiError::internal(e.to_string()))?;
                    match self
                        .store
                        .update(&key, Bytes::from(bytes), Some(entry.rev))
                        .await
                    {
                        Ok(kv) => {
                            set_rv(&mut new, kv.mod_revision);
                            return Ok(Outcome::Written(new));
                        }
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(def, name)),
                        Err(e) => return Err(e.into()),
                    }
                }
                Change::Delete => {
                    if dry_run {
                        return Ok(Outcome::Deleted(old));
                    }
                    match self.store.delete(&key, Some(entry.rev)).await {
                        Ok(kv) => {
                            let mut last = old;
                            set_rv(&mut last, kv.mod_revision);
                            return Ok(Outcome::Deleted(last));
                        }
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(def, name)),
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Err(ApiError::conflict(
            def,
            name,
            "too many concurrent writers; please retry",
        ))
    }

    /// PUT of a whole object (main resource or status).
    pub(crate) async fn update(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
        part: Part,
        out: Output,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        let (bt, format) = request::body_type(headers)?;
        if bt != BodyType::Object {
            return Err(ApiError::unsupported_media_type("a patch type on update"));
        }
        let new = request::decode_object(body, format)?;
        let manager = apply::field_manager(params, headers, "UpdateOptions")?;
        let fv = FieldValidation::parse(params.field_validation.as_deref())?;
        let warnings = admission::check_fields(t.def, &new, fv)?;
        let precondition = request::parse_rv(object::resource_version(&new))?;
        let def = t.def;
        let outcome = self
            .guaranteed_update(
                def,
                t.namespace.as_deref(),
                name,
                params.dry_run()?,
                |old, rev| {
                    if precondition.is_some_and(|want| want != rev) {
                        return Err(ApiError::stale(def, name));
                    }
                    let mut next = new.clone();
                    apply::track(def, Some(old), &mut next, &manager, part, |n| {
                        admission::prepare_update(def, n, old, part)
                    })?;
                    Ok(self.finish_if_released(def, next))
                },
            )
            .await?;
        Ok(with_warnings(
            self.write_response(def, outcome, out),
            &warnings,
        ))
    }

    /// PATCH of the main resource or status.
    pub(crate) async fn patch(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
        part: Part,
        out: Output,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        let (bt, format) = request::body_type(headers)?;
        if bt == BodyType::ApplyPatch {
            return self.server_side_apply(t, params, body, part, out).await;
        }
        let manager = apply::field_manager(params, headers, "PatchOptions")?;
        let patch = request::decode(body, format)?;
        let fv = FieldValidation::parse(params.field_validation.as_deref())?;
        let def = t.def;
        let mut warnings = Vec::new();
        let outcome = self
            .guaranteed_update(
                def,
                t.namespace.as_deref(),
                name,
                params.dry_run()?,
                |old, rev| {
                    let mut next = apply_patch(bt, old, &patch)?;
                    if !next.is_object() {
                        return Err(ApiError::bad_request(
                            "the patch produced something other than an object",
                        ));
                    }
                    warnings = admission::check_fields(def, &next, fv)?;
                    let precondition = request::parse_rv(object::resource_version(&next))?;
                    if precondition.is_some_and(|want| want != rev) {
                        return Err(ApiError::stale(def, name));
                    }
                    apply::track(def, Some(old), &mut next, &manager, part, |n| {
                        admission::prepare_update(def, n, old, part)
                    })?;
                    Ok(self.finish_if_released(def, next))
                },
            )
            .await?;
        Ok(with_warnings(
            self.write_response(def, outcome, out),
            &warnings,
        ))
    }

    /// An update that removes the last finalizer of an object being deleted deletes it.
    pub(crate) fn finish_if_released(&self, _def: &ResourceDef, next: Value) -> Change {
        let grace = next
            .get("metadata")
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if object::is_deleting(&next) && object::finalizers(&next).is_empty() && grace == 0 {
            Change::Delete
        } else {
            Change::Write(next)
        }
    }

    fn write_response(&self, def: &ResourceDef, outcome: Outcome, out: Output) -> Response {
        match outcome {
            Outcome::Deleted(v) | Outcome::Written(v) | Outcome::Unchanged(v) => {
                object_response(def, StatusCode::OK, &v, out)
            }
        }
    }

    /// DELETE of one object.
    pub(crate) async fn delete(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
        out: Output,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        let opts = DeleteOptions::from_request(params, headers, body)?;
        let outcome = if is_namespaces(t.def) {
            self.delete_namespace(name, &opts).await?
        } else {
            self.delete_object(t.def, t.namespace.as_deref(), name, &opts)
                .await?
        };
        Ok(match outcome {
            Outcome::Deleted(v) if !t.def.graceful_delete => {
                let _ = v;
                json_response(StatusCode::OK, success_status(t.def, name).to_string())
            }
            other => object_response(t.def, StatusCode::OK, &other.into_value(), out),
        })
    }

    /// Deletes (or starts deleting) one object as upstream's graceful deletion does.
    pub(crate) async fn delete_object(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Outcome> {
        self.guaranteed_update(def, ns, name, opts.dry_run, |old, rev| {
            if let Some(uid) = &opts.precondition_uid
                && object::meta_str(old, "uid") != Some(uid.as_str())
            {
                return Err(ApiError::conflict(def, name, &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    object::meta_str(old, "uid").unwrap_or("")
                )));
            }
            if let Some(want) = opts.precondition_rv
                && want != rev
            {
                return Err(ApiError::conflict(def, name, &format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rev}"
                )));
            }
            let mut next = old.clone();
            let mut finalizers = object::finalizers(old);
            match opts.propagation.as_deref() {
                Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => finalizers.push("orphan".into()),
                Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
                    finalizers.push("foregroundDeletion".into())
                }
                _ => {}
            }
            if opts.propagation.as_deref() == Some("Background") {
                finalizers.retain(|f| f != "orphan" && f != "foregroundDeletion");
            }
            let grace = self.grace_period(def, old, opts);
            let already = object::is_deleting(old);
            let meta = object::meta_mut(&mut next);
            if !finalizers.is_empty() {
                meta.insert("finalizers".into(), json!(finalizers));
            }
            if grace == 0 && finalizers.is_empty() {
                return Ok(Change::Delete);
            }
            let now = jiff::Timestamp::now();
            let deadline = now + jiff::SignedDuration::from_secs(grace);
            let current_grace = meta.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
            // A second delete may only shorten the grace period, as upstream's BeforeDelete.
            if !already || current_grace.is_some_and(|g| grace < g) {
                meta.insert("deletionTimestamp".into(), Value::String(object::format_time(deadline)));
                meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            }
            Ok(Change::Write(next))
        })
        .await
    }

    /// The grace period a deletion gets: only pods on a node get one, and terminal ones do not.
    fn grace_period(&self, def: &ResourceDef, old: &Value, opts: &DeleteOptions) -> i64 {
        if !def.graceful_delete {
            return 0;
        }
        let on_node = object::path(old, "spec.nodeName")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        let phase = object::path(old, "status.phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !on_node || matches!(phase, "Succeeded" | "Failed") {
            return 0;
        }
        opts.grace
            .or_else(|| {
                object::path(old, "spec.terminationGracePeriodSeconds").and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0)
    }

    /// Deletes a namespace and everything in it. Upstream marks it Terminating and lets the
    /// namespace controller empty it; here the API server empties it itself, deleting each object
    /// as a client would (pods gracefully), and removes the namespace once it is empty.
    async fn delete_namespace(&self, name: &str, opts: &DeleteOptions) -> ApiResult<Outcome> {
        let ns_def = namespaces();
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            )));
        }
        let outcome = self
            .guaranteed_update(ns_def, None, name, opts.dry_run, |old, _| {
                if object::is_deleting(old) {
                    let mut same = old.clone();
                    admission::strip_resource_version(&mut same);
                    return Ok(Change::Write(same));
                }
                let mut next = old.clone();
                object::meta_mut(&mut next).insert(
                    "deletionTimestamp".into(),
                    Value::String(object::now_rfc3339()),
                );
                object::meta_mut(&mut next).insert("deletionGracePeriodSeconds".into(), json!(0));
                next["status"] = json!({"phase": "Terminating"});
                Ok(Change::Write(next))
            })
            .await?;
        if !opts.dry_run {
            let server = self.clone();
            let name = name.to_string();
            tokio::spawn(async move { server.finalize_namespace(&name).await });
        }
        Ok(outcome)
    }

    async fn finalize_namespace(&self, ns: &str) {
        let opts = DeleteOptions {
            propagation: Some("Background".into()),
            ..Default::default()
        };
        for _ in 0..600 {
            let mut remaining = 0;
            for def in resource::RESOURCES.iter().filter(|d| d.namespaced) {
                let (items, _) = self.cache.list(def, Some(ns));
                for e in items {
                    remaining += 1;
                    if let Err(err) = self.delete_object(def, Some(ns), &e.name, &opts).await
                        && err.code != 404
                    {
                        tracing::warn!(namespace = ns, name = %e.name, error = %err, "namespace cleanup");
                    }
                }
            }
            if remaining == 0 {
                let ns_def = namespaces();
                let _ = self
                    .guaranteed_update(ns_def, None, ns, false, |_, _| Ok(Change::Delete))
                    .await;
                return;
            }
            // Wait for the cache to move (pods finishing graceful deletion) before looking again.
            let rev = self.cache.revision();
            self.cache.wait_for(rev + 1, Duration::from_secs(1)).await;
        }
        tracing::warn!(
            namespace = ns,
            "namespace still has content after cleanup attempts"
        );
    }

    /// DELETE of a collection: deletes every selected object.
    pub(crate) async fn delete_collection(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
        out: Output,
    ) -> ApiResult<Response> {
        let opts = DeleteOptions::from_request(params, headers, body)?;
        let filter = Filter::new(t.def, params, None)?;
        self.sync_cache().await?;
        let (items, rev) = self.select(t, &filter);
        let mut deleted = Vec::new();
        for e in items {
            let result = if is_namespaces(t.def) {
                self.delete_namespace(&e.name, &opts).await
            } else {
                self.delete_object(
                    t.def,
                    Some(e.namespace.as_str()).filter(|s| !s.is_empty()),
                    &e.name,
                    &opts,
                )
                .await
            };
            match result {
                Ok(o) => deleted.push(o.into_value()),
                Err(err) if err.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        let list_meta = json!({"resourceVersion": rev.to_string()});
        Ok(match out {
            Output::Table(include) => {
                let refs: Vec<&Value> = deleted.iter().collect();
                json_response(
                    StatusCode::OK,
                    table::table(t.def, &refs, jiff::Timestamp::now(), include, list_meta)
                        .to_string(),
                )
            }
            _ => json_response(
                StatusCode::OK,
                json!({"kind": t.def.list_kind(), "apiVersion": t.def.api_version(),
                "metadata": list_meta, "items": deleted})
                .to_string(),
            ),
        })
    }
}

fn is_namespaces(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.kind == "Namespace"
}

fn namespaces() -> &'static ResourceDef {
    resource::find("", "v1", "namespaces").unwrap_or(&resource::RESOURCES[0])
}

fn paginate(
    cache: &crate::cache::Cache,
    items: Arc<Vec<Arc<Entry>>>,
    rev: Revision,
    offset: usize,
    limit: usize,
    snap: Option<u64>,
) -> (Vec<Arc<Entry>>, Revision, Option<String>, usize) {
    let start = offset.min(items.len());
    let end = if limit == 0 {
        items.len()
    } else {
        (start + limit).min(items.len())
    };
    let page = items[start..end].to_vec();
    if end >= items.len() {
        return (page, rev, None, 0);
    }
    let remaining = items.len() - end;
    let snap = snap.unwrap_or_else(|| cache.save_snapshot(items.clone()));
    let token = encode_continue(&ContinueToken {
        rv: rev,
        snap,
        off: end,
    });
    (page, rev, Some(token), remaining)
}

/// Sets `metadata.resourceVersion`.
pub(crate) fn set_rv(obj: &mut Value, rev: Revision) {
    object::meta_mut(obj).insert("resourceVersion".into(), Value::String(rev.to_string()));
}

/// A successful deletion's `Status`, as upstream returns for resources that do not return the
/// deleted object.
pub(crate) fn success_status(def: &ResourceDef, name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
           "details": {"name": name, "group": def.group, "kind": def.plural}})
}

/// Applies a patch of the given type.
pub(crate) fn apply_patch(bt: BodyType, old: &Value, patch: &Value) -> ApiResult<Value> {
    match bt {
        BodyType::JsonPatch => {
            let p: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            let mut doc = old.clone();
            json_patch::patch(&mut doc, &p).map_err(|e| ApiError {
                code: 422,
                reason: "Invalid",
                message: format!(
                    "the server rejected our request due to an error in our request: {e}"
                ),
                details: None,
            })?;
            Ok(doc)
        }
        BodyType::MergePatch => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "a JSON merge patch must be an object",
                ));
            }
            let mut doc = old.clone();
            json_patch::merge(&mut doc, patch);
            Ok(doc)
        }
        BodyType::StrategicMergePatch => api::smp::apply(old, patch, &api::smp::Builtin)
            .map_err(|e| ApiError::bad_request(e.to_string())),
        BodyType::ApplyPatch => Err(ApiError::unsupported_media_type(
            "application/apply-patch+yaml (server-side apply is served on objects and their status, not here)",
        )),
        BodyType::Object => Err(ApiError::unsupported_media_type(
            "application/json on PATCH",
        )),
    }
}

/// Options of a deletion, from the query and an optional `DeleteOptions` body.
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    pub(crate) propagation: Option<String>,
    pub(crate) grace: Option<i64>,
    pub(crate) precondition_uid: Option<String>,
    pub(crate) precondition_rv: Option<Revision>,
    pub(crate) dry_run: bool,
}

impl DeleteOptions {
    pub(crate) fn from_request(
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> ApiResult<Self> {
        let mut opts = DeleteOptions {
            propagation: params.propagation_policy.clone().filter(|s| !s.is_empty()),
            grace: params.grace_period_seconds()?,
            dry_run: params.dry_run()?,
            ..Default::default()
        };
        if !body.is_empty() {
            let (_, format) = request::body_type(headers)?;
            let v = request::decode_object(body, format)?;
            opts.merge_body(&v)?;
        }
        if let Some(p) = &opts.propagation
            && !matches!(p.as_str(), "Orphan" | "Foreground" | "Background")
        {
            return Err(ApiError::bad_request(format!(
                "DeleteOptions.propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
        Ok(opts)
    }

    /// Merges a `DeleteOptions` object (also the `deleteOptions` of an Eviction).
    pub(crate) fn merge_body(&mut self, v: &Value) -> ApiResult<()> {
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            self.propagation = Some(p.to_string());
        } else if let Some(orphan) = v.get("orphanDependents").and_then(Value::as_bool) {
            self.propagation = Some(if orphan { "Orphan" } else { "Background" }.to_string());
        }
        if let Some(g) = v.get("gracePeriodSeconds").and_then(Value::as_i64) {
            self.grace = Some(g);
        }
        if let Some(pre) = v.get("preconditions") {
            self.precondition_uid = pre.get("uid").and_then(Value::as_str).map(str::to_string);
            self.precondition_rv =
                request::parse_rv(pre.get("resourceVersion").and_then(Value::as_str))?;
        }
        if let Some(d) = v.get("dryRun").and_then(Value::as_array) {
            self.dry_run = d.iter().any(|x| x == "All");
        }
        Ok(())
    }
}
