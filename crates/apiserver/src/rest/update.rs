//! Updates: PUT and PATCH through the admission chain, stored with compare-and-swap on the
//! revision and retried on conflicts the client did not ask to see (upstream's
//! `GuaranteedUpdate`).

use super::{
    response::with_warnings,
    write::{MAX_RETRIES, set_rv},
};
use crate::{
    admission::{self, FieldValidation, Part},
    change::{Change, Outcome, Write},
    error::{ApiError, ApiResult},
    managed_fields, object,
    plugins::{Operation, Review},
    registry::Kind,
    request::{self, BodyType, Output, Params, Target},
    state::ApiServer,
    view::{intake, present},
};
use axum::{http::HeaderMap, response::Response};
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use store::{Revision, StoreError};

impl ApiServer {
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
                    let user = write.as_ref().map(|_| crate::context::user()).transpose()?;
                    let review = write
                        .as_ref()
                        .zip(user.as_ref())
                        .map(|(write, user)| Review {
                            user,
                            operation: Operation::Update,
                            kind: def,
                            view: write.view,
                            namespace: ns,
                            name,
                            subresource: write.subresource,
                            old: Some(&old),
                            dry_run,
                            reserved: Default::default(),
                            mutated: Default::default(),
                        });
                    if let Some(review) = &review {
                        warnings = self
                            .admit(review, &mut new, crate::admission::Pass::VALIDATED)
                            .await?;
                        set_rv(&mut new, entry.rev);
                    }
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
                            if let Some(review) = &review {
                                review.reserved.keep();
                            }
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
        let manager = managed_fields::field_manager(params, headers, "UpdateOptions")?;
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
                    managed_fields::track(&def, Some(old), &mut next, &manager, part, |n| {
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
        let manager = managed_fields::field_manager(params, headers, "PatchOptions")?;
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
                    managed_fields::track(&def, Some(old), &mut next, &manager, part, |n| {
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
}
