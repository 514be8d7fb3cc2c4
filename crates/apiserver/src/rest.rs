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
    plugins::{Operation, Review},
    registry::{Kind, Registry, Storage},
    request::{self, BodyType, Output, Params, Target},
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

/// A client's write as [`ApiServer::admitted_update`] describes it to the admission plugins.
pub(crate) struct Write<'a> {
    /// The kind and version the client wrote.
    pub view: &'a Kind,
    /// The subresource written, `None` for the main resource.
    pub subresource: Option<&'a str>,
}

/// What a write did. The objects are shared with the cache's parsed copies of what this server
/// wrote last (see `cache::recent`), so reading one costs nothing and owning one may cost a copy.
pub(crate) enum Outcome {
    /// Stored (or would have been, under dry run): the new object, `resourceVersion` set.
    Written(Arc<Value>),
    /// Nothing changed: the stored object.
    Unchanged(Arc<Value>),
    /// Deleted: the last state, `resourceVersion` at the deletion.
    Deleted(Arc<Value>),
}

impl Outcome {
    /// The object.
    pub(crate) fn value(&self) -> &Value {
        match self {
            Outcome::Written(v) | Outcome::Unchanged(v) | Outcome::Deleted(v) => v,
        }
    }

    /// The object, owned (a copy when the cache still shares it).
    pub(crate) fn into_value(self) -> Value {
        match self {
            Outcome::Written(v) | Outcome::Unchanged(v) | Outcome::Deleted(v) => {
                Arc::unwrap_or_clone(v)
            }
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
    /// The namespace of the path: a namespaced request never sees another namespace's objects,
    /// whichever way (list, watch, delete collection) it reads them.
    namespace: Option<String>,
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
}

impl Filter {
    /// The filter of a request for `t` on `def`, the kind that stores the objects (whose
    /// selectable fields the cache extracted): the path's namespace and name, and the selectors.
    pub(crate) fn new(def: &Kind, params: &Params, t: &Target) -> ApiResult<Self> {
        let name = t.name.as_deref();
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
                let supported = &def.selectable_fields;
                if let Some(bad) = f.fields().find(|f| {
                    !matches!(*f, "metadata.name" | "metadata.namespace")
                        && !supported.iter().any(|s| s == f)
                }) {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {bad}"
                    )));
                }
                Some(f)
            }
        };
        let namespace = t.namespace.clone().filter(|_| def.namespaced);
        Ok(Self {
            namespace,
            label,
            field,
        })
    }

    /// Whether the request has no selectors. The namespace does not count: a list reads one
    /// namespace's objects from the cache's index already (and knows how many remain), while a
    /// watch, which sees every change of the kind, applies [`Filter::matches`] to each.
    pub(crate) fn is_empty(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }

    pub(crate) fn matches(&self, e: &Entry) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| *e.namespace == *ns)
            && self.label.as_ref().is_none_or(|l| e.matches_labels(l))
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

/// A Table of stored `objects`, printed by `storage`'s printer. For `includeObject=Object` each
/// row embeds the object as `view` serves it: upstream's asTable converts a row's object to the
/// request's version (`scope.Convertor.ConvertToVersion`), so `kubectl get --sort-by` and
/// `-o custom-columns` read the fields of the version they asked for.
pub(crate) fn table_of(
    view: &Kind,
    storage: &Kind,
    objects: &[&Value],
    include: table::IncludeObject,
    list_meta: Value,
) -> Value {
    let mut t = table::table(storage, objects, clock::now(), include, list_meta);
    let as_stored = view.conversion().is_none() && !view.strategy.defaults_on_read();
    if include == table::IncludeObject::Object
        && !as_stored
        && let Some(rows) = t.get_mut("rows").and_then(Value::as_array_mut)
    {
        for (row, obj) in rows.iter_mut().zip(objects) {
            row["object"] = present(view, (*obj).clone());
        }
    }
    t
}

/// A stored object as `view` serves it: converted when the view is another version or group of
/// the stored kind, as is otherwise, then given the view's defaults when its schema has some
/// (upstream defaults custom resources as it decodes them from storage).
pub(crate) fn present(view: &Kind, obj: Value) -> Value {
    let mut obj = match view.conversion() {
        None => obj,
        Some(conversion) => {
            let mut obj = conversion.stored_to_view(obj);
            if let Some(m) = obj.as_object_mut() {
                m.insert("apiVersion".into(), Value::String(view.api_version()));
                m.insert("kind".into(), Value::String(view.kind.clone()));
            }
            obj
        }
    };
    if view.strategy.defaults_on_read() {
        view.strategy.default_on_read(&mut obj);
    }
    obj
}

/// A request object of `view` as `storage` stores it.
pub(crate) fn intake(view: &Kind, storage: &Kind, obj: Value) -> Value {
    let Some(conversion) = view.conversion() else {
        return obj;
    };
    let mut obj = conversion.view_to_stored(obj);
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(storage.api_version()));
        m.insert("kind".into(), Value::String(storage.kind.clone()));
    }
    obj
}

/// The serialized object of a cache entry as `view` serves it (the stored bytes themselves
/// unless the view converts).
pub(crate) fn entry_json(view: &Kind, e: &Entry) -> Bytes {
    match view.storage {
        Storage::Own if !view.strategy.defaults_on_read() => e.json.clone(),
        Storage::Own | Storage::View { .. } | Storage::Nowhere => {
            Bytes::from(serde_json::to_vec(&present(view, e.value())).unwrap_or_default())
        }
    }
}

/// Renders one stored object in the negotiated representation of `view`; tables are printed
/// by `storage`'s printer (a view prints as the kind it views, as upstream's printers work on
/// the stored type).
pub(crate) fn object_response(
    view: &Kind,
    storage: &Kind,
    code: StatusCode,
    obj: &Value,
    out: Output,
) -> Response {
    match out {
        // Served as stored, the object is printed as it is: every write answers with its object,
        // and a copy made only to be printed was a few percent of the server's CPU.
        Output::Json if view.conversion().is_none() && !view.strategy.defaults_on_read() => {
            json_response(code, serde_json::to_vec(obj).unwrap_or_default())
        }
        Output::Json => json_response(
            code,
            serde_json::to_vec(&present(view, obj.clone())).unwrap_or_default(),
        ),
        Output::Metadata => json_response(code, partial_metadata(obj).to_string()),
        Output::Table(include) => {
            let t = table_of(
                view,
                storage,
                &[obj],
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
    /// The served kinds.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        self.cache.registry()
    }

    /// The kind that stores what `view` serves.
    pub(crate) fn storage_of(&self, view: &Arc<Kind>) -> Arc<Kind> {
        self.registry().storage_of(view)
    }

    /// Waits until the cache reflects every acknowledged write, this server's and (on a shared
    /// store such as etcd) every other server's: a consistent read, as upstream's watch cache
    /// serves one after asking etcd for its current revision. When the store cannot answer (etcd
    /// without a quorum), reads go on from the cache as it is and writes fail on their own.
    pub(crate) async fn sync_cache(&self) -> ApiResult<()> {
        let target = match self.store.current_revision().await {
            Ok(revision) => revision,
            Err(StoreError::Unavailable(_)) => self.store.revision(),
            Err(e) => return Err(e.into()),
        };
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
        let def = self.storage_of(&t.def);
        self.sync_for_read(params).await?;
        let entry = self
            .cache
            .get(&def, t.namespace.as_deref(), name)
            .ok_or_else(|| ApiError::not_found(&t.def, name))?;
        Ok(match out {
            Output::Json => json_response(StatusCode::OK, entry_json(&t.def, &entry)),
            _ => object_response(&t.def, &def, StatusCode::OK, &entry.value(), out),
        })
    }

    /// The filtered objects of a collection and the revision they are consistent at.
    pub(crate) fn select(&self, t: &Target, filter: &Filter) -> (Vec<Arc<Entry>>, Revision) {
        let def = self.storage_of(&t.def);
        let (mut items, rev) = self.cache.list(&def, t.namespace.as_deref());
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
        let def = self.storage_of(&t.def);
        let filter = Filter::new(&def, params, t)?;
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
                        .list_at(&def, t.namespace.as_deref(), rv)
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
                    body.extend_from_slice(&entry_json(&t.def, e));
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
                let t = table_of(&t.def, &def, &refs, include, list_meta);
                json_response(StatusCode::OK, t.to_string())
            }
        })
    }

    /// Refuses creates in a namespace that does not exist or is going away, naming the object
    /// (its name, or its `generateName` prefix) as upstream's NamespaceLifecycle admission does.
    pub(crate) fn check_namespace_open(
        &self,
        def: &Kind,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<()> {
        let (Some(ns), true) = (ns, def.namespaced) else {
            return Ok(());
        };
        let ns_def = self.namespaces()?;
        let entry = self
            .cache
            .get(&ns_def, None, ns)
            .ok_or_else(|| ApiError::not_found(&ns_def, ns))?;
        // Upstream's NamespaceLifecycle admission asks the phase, which deletion sets to
        // Terminating with the deletion timestamp; the cache indexes it, so nothing is parsed.
        if entry.field_is("status.phase", "Terminating") {
            return Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                def.group_resource(),
            )));
        }
        Ok(())
    }

    /// The namespaces kind.
    fn namespaces(&self) -> ApiResult<Arc<Kind>> {
        self.registry()
            .find("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("no namespaces kind"))
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
        let dups = match fv {
            FieldValidation::Ignore => Vec::new(),
            _ => request::duplicates(body, format),
        };
        let mut warnings = admission::check_fields(&t.def, &mut obj, dups, fv)?;
        let def = self.storage_of(&t.def);
        admission::check_type(&t.def, &mut obj)?;
        let mut obj = intake(&t.def, &def, obj);
        // What the object is called before a name is generated, for the namespace check.
        let requested_name = Some(object::name(&obj))
            .filter(|n| !n.is_empty())
            .or_else(|| object::meta_str(&obj, "generateName"))
            .unwrap_or_default()
            .to_string();
        self.sync_cache().await?;
        apply::track(&def, None, &mut obj, &manager, Part::Main, |o| {
            warnings.extend(admission::prepare_create(
                &def,
                o,
                t.namespace.as_deref(),
                &*self.cache,
            )?);
            Ok(())
        })?;
        self.check_namespace_open(&def, t.namespace.as_deref(), &requested_name)?;
        let dry_run = params.dry_run()?;
        let user = crate::context::user()?;
        let review = Review {
            user: &user,
            operation: Operation::Create,
            kind: &def,
            view: &t.def,
            namespace: t.namespace.as_deref(),
            name: &requested_name,
            subresource: None,
            old: None,
            dry_run,
        };
        warnings.extend(self.admit(&review, &mut obj).await?);
        let created = self.store_create(&def, obj, dry_run).await?;
        if !dry_run {
            self.after_write(&def, &created);
        }
        Ok(with_warnings(
            object_response(&t.def, &def, StatusCode::CREATED, &created, out),
            &warnings,
        ))
    }

    /// Creates the objects the server keeps from the start ([`crate::registry::bootstrap_objects`])
    /// when they are missing; ones a user changed are left alone.
    pub(crate) async fn ensure_bootstrap_objects(&self) -> ApiResult<()> {
        for mut obj in crate::registry::bootstrap_objects() {
            self.ensure_object(&mut obj).await?;
        }
        Ok(())
    }

    /// Creates `obj` (of a built-in kind, named by its `apiVersion` and `kind`) unless an object
    /// of that name exists.
    pub async fn ensure_object(&self, obj: &mut Value) -> ApiResult<()> {
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (group, _) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let def = self
            .registry()
            .find_kind(group, kind)
            .ok_or_else(|| ApiError::internal(format!("no kind {kind} in {api_version}")))?;
        let ns = object::namespace(obj).map(str::to_string);
        if self
            .cache
            .get(&def, ns.as_deref(), object::name(obj))
            .is_some()
        {
            return Ok(());
        }
        admission::prepare_create(&def, obj, ns.as_deref(), &*self.cache)?;
        match self.store_create(&def, obj.clone(), false).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Stores a prepared new object.
    pub(crate) async fn store_create(
        &self,
        def: &Kind,
        mut obj: Value,
        dry_run: bool,
    ) -> ApiResult<Arc<Value>> {
        let name = object::name(&obj).to_string();
        let key = def.key(object::namespace(&obj), &name);
        // ResourceQuota admission: checked under dry run too, charged otherwise (crate::quota).
        let charge = crate::quota::admit_create(self, def, &obj, dry_run).await?;
        if dry_run {
            if self
                .cache
                .get(def, object::namespace(&obj), &name)
                .is_some()
            {
                return Err(ApiError::already_exists(def, &name));
            }
            return Ok(Arc::new(obj));
        }
        admission::strip_resource_version(&mut obj);
        let bytes = self.stored_bytes(&key, &obj)?;
        match self.store.create(&key, bytes.clone()).await {
            Ok(kv) => {
                charge.keep();
                set_rv(&mut obj, kv.mod_revision);
                let obj = Arc::new(obj);
                self.cache.remember(def, &key, kv.mod_revision, &obj);
                Ok(obj)
            }
            Err(e) => {
                self.cache.forget_write(&key, &bytes);
                match e {
                    StoreError::AlreadyExists(_) => Err(ApiError::already_exists(def, &name)),
                    e => Err(e.into()),
                }
            }
        }
    }

    /// The bytes `obj` is stored as under `key`, noted for the cache, which then indexes them
    /// without parsing them again when the store's event brings them back.
    fn stored_bytes(&self, key: &str, obj: &Value) -> ApiResult<Bytes> {
        let bytes =
            Bytes::from(serde_json::to_vec(obj).map_err(|e| ApiError::internal(e.to_string()))?);
        self.cache.note_write(key, obj, &bytes);
        Ok(bytes)
    }

    /// Reads the current object, lets `f` decide, and writes with compare-and-swap; retries when
    /// another writer got there first.
    pub(crate) async fn guaranteed_update<F>(
        &self,
        def: &Kind,
        ns: Option<&str>,
        name: &str,
        dry_run: bool,
        f: F,
    ) -> ApiResult<Outcome>
    where
        F: FnMut(&Value, Revision) -> ApiResult<Change> + Send,
    {
        let (outcome, _) = self
            .admitted_update(def, ns, name, dry_run, None, f)
            .await?;
        Ok(outcome)
    }

    /// [`Self::guaranteed_update`] of a client's write: each new object `f` makes goes through
    /// the admission plugins ([`Self::admit`]) as `write` describes it, before it is stored.
    /// Returns the plugins' warnings with the outcome.
    pub(crate) async fn admitted_update<F>(
        &self,
        def: &Kind,
        ns: Option<&str>,
        name: &str,
        dry_run: bool,
        write: Option<Write<'_>>,
        mut f: F,
    ) -> ApiResult<(Outcome, Vec<String>)>
    where
        F: FnMut(&Value, Revision) -> ApiResult<Change> + Send,
    {
        let key = def.key(ns, name);
        let mut warnings = Vec::new();
        for _ in 0..MAX_RETRIES {
            self.sync_cache().await?;
            let entry = self
                .cache
                .get(def, ns, name)
                .ok_or_else(|| ApiError::not_found(def, name))?;
            let old = self.cache.parsed(&key, &entry);
            match f(&old, entry.rev)? {
                Change::Write(mut new) => {
                    set_rv(&mut new, entry.rev);
                    if admission::same_object(&new, &old) {
                        return Ok((Outcome::Unchanged(old), warnings));
                    }
                    if let Some(write) = &write {
                        let user = crate::context::user()?;
                        let review = Review {
                            user: &user,
                            operation: Operation::Update,
                            kind: def,
                            view: write.view,
                            namespace: ns,
                            name,
                            subresource: write.subresource,
                            old: Some(&old),
                            dry_run,
                        };
                        warnings = self.admit(&review, &mut new).await?;
                        set_rv(&mut new, entry.rev);
                    }
                    crate::quota::check_update(self, def, &new, &old)?;
                    if dry_run {
                        return Ok((Outcome::Written(Arc::new(new)), warnings));
                    }
                    admission::strip_resource_version(&mut new);
                    let bytes = self.stored_bytes(&key, &new)?;
                    let written = self
                        .store
                        .update(&key, bytes.clone(), Some(entry.rev))
                        .await;
                    if written.is_err() {
                        self.cache.forget_write(&key, &bytes);
                    }
                    match written {
                        Ok(kv) => {
                            set_rv(&mut new, kv.mod_revision);
                            let new = Arc::new(new);
                            self.cache.remember(def, &key, kv.mod_revision, &new);
                            return Ok((Outcome::Written(new), warnings));
                        }
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(def, name)),
                        Err(e) => return Err(e.into()),
                    }
                }
                Change::Delete => {
                    if dry_run {
                        return Ok((Outcome::Deleted(old), warnings));
                    }
                    match self.store.delete(&key, Some(entry.rev)).await {
                        Ok(kv) => {
                            // Forgotten first, so that the last state is ours alone to change.
                            self.cache.forget_deleted(&key);
                            let mut last = Arc::unwrap_or_clone(old);
                            set_rv(&mut last, kv.mod_revision);
                            return Ok((Outcome::Deleted(Arc::new(last)), warnings));
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
        let mut new = request::decode_object(body, format)?;
        let manager = apply::field_manager(params, headers, "UpdateOptions")?;
        let fv = FieldValidation::parse(params.field_validation.as_deref())?;
        let dups = match fv {
            FieldValidation::Ignore => Vec::new(),
            _ => request::duplicates(body, format),
        };
        let mut warnings = admission::check_fields(&t.def, &mut new, dups, fv)?;
        let precondition = request::parse_rv(object::resource_version(&new))?;
        // A uid in the body is a precondition, as upstream's `DefaultUpdatedObjectInfo` makes it.
        let uid_precondition = object::meta_str(&new, "uid")
            .filter(|u| !u.is_empty())
            .map(str::to_string);
        let def = self.storage_of(&t.def);
        admission::check_type(&t.def, &mut new)?;
        let new = intake(&t.def, &def, new);
        let mut strategy_warnings = Vec::new();
        let sub = t.sub.map(|s| s.name());
        let (outcome, admitted) = self
            .admitted_update(
                &def,
                t.namespace.as_deref(),
                name,
                params.dry_run()?,
                Some(Write {
                    view: &t.def,
                    subresource: sub,
                }),
                |old, rev| {
                    if let Some(uid) = &uid_precondition
                        && object::meta_str(old, "uid") != Some(uid.as_str())
                    {
                        return Err(ApiError::conflict(&def, name, &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            object::meta_str(old, "uid").unwrap_or("")
                        )));
                    }
                    if precondition.is_some_and(|want| want != rev) {
                        return Err(ApiError::stale(&def, name));
                    }
                    let mut next = new.clone();
                    apply::track(&def, Some(old), &mut next, &manager, part, |n| {
                        strategy_warnings =
                            admission::prepare_update(&def, n, old, part, &*self.cache)?;
                        Ok(())
                    })?;
                    Ok(self.finish_if_released(next))
                },
            )
            .await?;
        warnings.extend(strategy_warnings);
        warnings.extend(admitted);
        if !params.dry_run()? {
            self.after_outcome(&def, &outcome);
        }
        Ok(with_warnings(
            self.write_response(&t.def, &def, outcome, out),
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
        let view = &t.def;
        let def = self.storage_of(view);
        if bt == BodyType::StrategicMergePatch
            && matches!(view.schema, Some(crate::registry::Schema::Custom { .. }))
        {
            // Custom resources have no patch strategies; upstream refuses this patch type.
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json (custom resources accept json-patch, merge-patch and apply-patch)",
            ));
        }
        let mut warnings = Vec::new();
        let sub = t.sub.map(|s| s.name());
        let (outcome, admitted) = self
            .admitted_update(
                &def,
                t.namespace.as_deref(),
                name,
                params.dry_run()?,
                Some(Write {
                    view,
                    subresource: sub,
                }),
                |old, rev| {
                    // The patch applies to the object as the client sees it (its version).
                    let current = present(view, old.clone());
                    let mut next = crate::patch::apply(bt, current, &patch)?;
                    if !next.is_object() {
                        return Err(ApiError::bad_request(
                            "the patch produced something other than an object",
                        ));
                    }
                    warnings = admission::check_fields(view, &mut next, Vec::new(), fv)?;
                    let precondition = request::parse_rv(object::resource_version(&next))?;
                    if precondition.is_some_and(|want| want != rev) {
                        return Err(ApiError::stale(&def, name));
                    }
                    admission::check_type(view, &mut next)?;
                    let mut next = intake(view, &def, next);
                    apply::track(&def, Some(old), &mut next, &manager, part, |n| {
                        warnings.extend(admission::prepare_update(
                            &def,
                            n,
                            old,
                            part,
                            &*self.cache,
                        )?);
                        Ok(())
                    })?;
                    Ok(self.finish_if_released(next))
                },
            )
            .await?;
        warnings.extend(admitted);
        if !params.dry_run()? {
            self.after_outcome(&def, &outcome);
        }
        Ok(with_warnings(
            self.write_response(view, &def, outcome, out),
            &warnings,
        ))
    }

    /// What a stored write changes beyond the object: a CustomResourceDefinition's kinds are
    /// served (or no longer served) as soon as it is written.
    pub(crate) fn after_write(&self, def: &Kind, obj: &Value) {
        if crate::registry::apiextensions::is_definition(def) {
            crate::registry::apiextensions::register(self.registry(), obj);
        }
    }

    pub(crate) fn after_outcome(&self, def: &Kind, outcome: &Outcome) {
        match outcome {
            Outcome::Written(v) => self.after_write(def, v),
            Outcome::Deleted(v) if crate::registry::apiextensions::is_definition(def) => {
                crate::registry::apiextensions::unregister(self.registry(), v)
            }
            _ => {}
        }
    }

    /// Deletes a CustomResourceDefinition: first every object of the kinds it defines (as
    /// upstream's `customresourcecleanup` finalizer does), then the definition, which then
    /// serves nothing.
    async fn delete_definition(
        &self,
        def: &Kind,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Outcome> {
        self.sync_cache().await?;
        let crd = self
            .cache
            .get(def, None, name)
            .ok_or_else(|| ApiError::not_found(def, name))?
            .value();
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        if !opts.dry_run
            && let Some(custom) = self.registry().owner(group, plural)
        {
            let each = DeleteOptions {
                propagation: Some("Background".into()),
                ..Default::default()
            };
            let (items, _) = self.cache.list(&custom, None);
            for e in items {
                let ns = Some(&*e.namespace).filter(|s| !s.is_empty());
                if let Err(err) = self.delete_object(&custom, ns, &e.name, &each).await
                    && err.code != 404
                {
                    tracing::warn!(name = %e.name, error = %err, "custom resource cleanup");
                }
            }
        }
        let outcome = self.delete_object(def, None, name, opts).await?;
        if !opts.dry_run {
            self.after_outcome(def, &outcome);
        }
        Ok(outcome)
    }

    /// An update that removes the last finalizer of an object being deleted deletes it (for a
    /// namespace, also the last of `spec.finalizers`, which the namespace controller removes).
    pub(crate) fn finish_if_released(&self, next: Value) -> Change {
        let grace = next
            .get("metadata")
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if object::is_deleting(&next)
            && object::finalizers(&next).is_empty()
            && spec_finalizers_released(&next)
            && grace == 0
        {
            Change::Delete
        } else {
            Change::Write(next)
        }
    }

    fn write_response(&self, view: &Kind, def: &Kind, outcome: Outcome, out: Output) -> Response {
        match outcome {
            Outcome::Deleted(v) | Outcome::Written(v) | Outcome::Unchanged(v) => {
                object_response(view, def, StatusCode::OK, &v, out)
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
        let def = self.storage_of(&t.def);
        let outcome = self
            .delete_one(&def, &t.def, t.namespace.as_deref(), name, &opts)
            .await?;
        Ok(match outcome {
            Outcome::Deleted(_) if !def.graceful_delete() => {
                json_response(StatusCode::OK, success_status(&t.def, name).to_string())
            }
            other => object_response(&t.def, &def, StatusCode::OK, other.value(), out),
        })
    }

    /// Deletes one object of `def` (the stored kind) the way its kind is deleted: a Namespace
    /// and a CustomResourceDefinition start their finalization, anything else is deleted
    /// gracefully. A single DELETE and each object of a DELETE of a collection come here, and
    /// go through the admission plugins first (`view` is the kind the client named).
    async fn delete_one(
        &self,
        def: &Kind,
        view: &Kind,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Outcome> {
        self.admit_delete(def, view, ns, name, opts).await?;
        if is_namespaces(def) {
            self.delete_namespace(name, opts).await
        } else if crate::registry::apiextensions::is_definition(def) {
            self.delete_definition(def, name, opts).await
        } else {
            self.delete_object(def, ns, name, opts).await
        }
    }

    /// Runs the admission plugins on a client's delete, with the stored object as the old one
    /// (upstream's delete handler admits, then the store's `deleteValidation` validates, with
    /// `oldObject` set and no object). A missing object is left to the delete's own 404.
    async fn admit_delete(
        &self,
        def: &Kind,
        view: &Kind,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<()> {
        self.sync_cache().await?;
        let Some(entry) = self.cache.get(def, ns, name) else {
            return Ok(());
        };
        let old = self.cache.parsed(&def.key(ns, name), &entry);
        let mut obj = (*old).clone();
        let user = crate::context::user()?;
        let review = Review {
            user: &user,
            operation: Operation::Delete,
            kind: def,
            view,
            namespace: ns,
            name,
            subresource: None,
            old: Some(&old),
            dry_run: opts.dry_run,
        };
        self.admit(&review, &mut obj).await?;
        Ok(())
    }

    /// Deletes (or starts deleting) one object as upstream's graceful deletion does.
    pub(crate) async fn delete_object(
        &self,
        def: &Kind,
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
            let chosen = finalizers
                .iter()
                .any(|f| f == "orphan" || f == "foregroundDeletion");
            let propagation = match opts.propagation.as_deref() {
                None if !chosen => Some(def.strategy.default_propagation()),
                p => p,
            };
            match propagation {
                Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => finalizers.push("orphan".into()),
                Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
                    finalizers.push("foregroundDeletion".into())
                }
                _ => {}
            }
            if propagation == Some("Background") {
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
            let now = clock::now();
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
    fn grace_period(&self, def: &Kind, old: &Value, opts: &DeleteOptions) -> i64 {
        if !def.graceful_delete() {
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

    /// Deletes a namespace: marks it Terminating; the namespace controller empties it and
    /// removes its `kubernetes` finalizer, and the update that removes the last finalizer
    /// deletes it ([`Self::finish_if_released`]). Without finalizers it goes at once.
    async fn delete_namespace(&self, name: &str, opts: &DeleteOptions) -> ApiResult<Outcome> {
        let ns_def = self.namespaces()?;
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            )));
        }
        self.guaranteed_update(&ns_def, None, name, opts.dry_run, |old, _| {
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
            next["status"]["phase"] = json!("Terminating");
            Ok(self.finish_if_released(next))
        })
        .await
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
        let def = self.storage_of(&t.def);
        let filter = Filter::new(&def, params, t)?;
        self.sync_cache().await?;
        let (items, rev) = self.select(t, &filter);
        let mut deleted = Vec::new();
        for e in items {
            let ns = Some(&*e.namespace).filter(|s| !s.is_empty());
            let result = self.delete_one(&def, &t.def, ns, &e.name, &opts).await;
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
                    table_of(&t.def, &def, &refs, include, list_meta).to_string(),
                )
            }
            _ => {
                let items: Vec<Value> = deleted.into_iter().map(|v| present(&t.def, v)).collect();
                json_response(
                    StatusCode::OK,
                    json!({"kind": t.def.list_kind(), "apiVersion": t.def.api_version(),
                    "metadata": list_meta, "items": items})
                    .to_string(),
                )
            }
        })
    }
}

fn is_namespaces(def: &Kind) -> bool {
    def.is("", "Namespace")
}

/// Whether `spec.finalizers` (namespaces') is empty or absent.
fn spec_finalizers_released(obj: &Value) -> bool {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|f| f.is_empty())
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
pub(crate) fn success_status(def: &Kind, name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
           "details": {"name": name, "group": def.group, "kind": def.plural}})
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
