//! Creates: a client's POST through the admission chain to the store, and the objects the
//! server keeps from the start.

use super::{
    response::{object_response, with_warnings},
    write::set_rv,
};
use crate::{
    admission::{self, FieldValidation, Part},
    error::{ApiError, ApiResult},
    managed_fields, object,
    plugins::{Operation, Review},
    registry::Kind,
    request::{self, BodyType, Output, Params, Target},
    state::ApiServer,
    view::intake,
};
use axum::{
    http::{HeaderMap, StatusCode},
    response::Response,
};
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use store::StoreError;

impl ApiServer {
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
        let manager = managed_fields::field_manager(params, headers, "CreateOptions")?;
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
            reserved: Default::default(),
            mutated: Default::default(),
        };
        let pass = self.intake(&review);
        managed_fields::track(&def, None, &mut obj, &manager, Part::Main, |o| {
            warnings.extend(admission::prepare_create(
                &def,
                o,
                t.namespace.as_deref(),
                &*self.cache,
                pass,
            )?);
            Ok(())
        })?;
        self.check_namespace_open(&def, t.namespace.as_deref(), &requested_name)?;
        warnings.extend(self.admit(&review, &mut obj, pass).await?);
        let created = self.store_create(&def, obj, dry_run).await?;
        review.reserved.keep();
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
        admission::prepare_create(
            &def,
            obj,
            ns.as_deref(),
            &*self.cache,
            admission::Pass::VALIDATED,
        )?;
        match self.store_create(&def, obj.clone(), false).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Stores a prepared (and, for a client's write, admitted) new object.
    pub(crate) async fn store_create(
        &self,
        def: &Kind,
        mut obj: Value,
        dry_run: bool,
    ) -> ApiResult<Arc<Value>> {
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
            return Ok(Arc::new(obj));
        }
        admission::strip_resource_version(&mut obj);
        let bytes = self.stored_bytes(&key, &obj)?;
        match self.store.create(&key, bytes.clone()).await {
            Ok(kv) => {
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
    pub(super) fn stored_bytes(&self, key: &str, obj: &Value) -> ApiResult<Bytes> {
        let bytes =
            Bytes::from(serde_json::to_vec(obj).map_err(|e| ApiError::internal(e.to_string()))?);
        self.cache.note_write(key, obj, &bytes);
        Ok(bytes)
    }
}
