//! Deletes: one object (gracefully for pods, through finalizers), a namespace, a collection,
//! with upstream's `DeleteOptions`.

use super::{
    read::Filter,
    response::{json_response, object_response, success_status, table_of},
};
use crate::{
    admission::{self},
    change::{Change, Outcome},
    error::{ApiError, ApiResult},
    object,
    plugins::{Operation, Review},
    registry::Kind,
    request::{self, Output, Params, Target},
    state::ApiServer,
    view::present,
};
use axum::{
    http::{HeaderMap, StatusCode},
    response::Response,
};
use bytes::Bytes;
use serde_json::{Value, json};
use store::Revision;

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

impl ApiServer {
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
    pub(super) async fn delete_one(
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
    pub(super) async fn admit_delete(
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
            reserved: Default::default(),
            mutated: Default::default(),
        };
        self.admit(&review, &mut obj, crate::admission::Pass::VALIDATED)
            .await?;
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
    pub(super) fn grace_period(&self, def: &Kind, old: &Value, opts: &DeleteOptions) -> i64 {
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
    pub(super) async fn delete_namespace(
        &self,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Outcome> {
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

    /// Deletes a CustomResourceDefinition: first every object of the kinds it defines (as
    /// upstream's `customresourcecleanup` finalizer does), then the definition, which then
    /// serves nothing.
    pub(super) async fn delete_definition(
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
}

pub(super) fn is_namespaces(def: &Kind) -> bool {
    def.is("", "Namespace")
}
