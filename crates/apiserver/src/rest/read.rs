//! Reads: get, list (paged with continue tokens) and the selectors they filter by, from the
//! watch cache once it has caught up with the store (a read with no `resourceVersion` is
//! consistent, as upstream's is).

use super::response::{entry_json, json_response, list_response, object_response};
use crate::{
    cache::Entry,
    error::{ApiError, ApiResult},
    registry::Kind,
    request::{Output, Params, Target},
    state::ApiServer,
};
use api::selector::{FieldSelector, LabelSelector};
use axum::{http::StatusCode, response::Response};
use base64::Engine;
use serde_json::{Value, json};
use std::{sync::Arc, time::Duration};
use store::{Revision, StoreError};

/// How long a read waits for the cache to catch up with the store before giving up.
pub(super) const CACHE_WAIT: Duration = Duration::from_secs(10);

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
pub(super) struct ContinueToken {
    rv: Revision,
    snap: u64,
    off: usize,
}

pub(super) fn encode_continue(t: &ContinueToken) -> String {
    let raw = serde_json::to_vec(t).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

pub(super) fn decode_continue(s: &str) -> ApiResult<ContinueToken> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
        .and_then(|raw| serde_json::from_slice(&raw).ok())
        .ok_or_else(|| ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))
}

pub(super) fn paginate(
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

impl ApiServer {
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
    pub(super) async fn sync_for_read(&self, params: &Params) -> ApiResult<()> {
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
        Ok(list_response(
            &t.def,
            &def,
            page,
            &list_meta,
            out,
            self.metrics.list_buffered(),
        ))
    }
}
