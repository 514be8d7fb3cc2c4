//! Watch streams: newline-delimited JSON `WatchEvent`s from the cache.
//!
//! A watch starts from the request's `resourceVersion` (replaying the cache's history after it),
//! or with the current objects as ADDED events when there is none (or with `sendInitialEvents`).
//! Objects entering or leaving the selector are sent as ADDED or DELETED, as upstream's cacher
//! does. A watcher that falls too far behind gets a 410 `Expired` error event and must relist.

use crate::{
    cache::{CacheEvent, EventType},
    error::{ApiError, ApiResult},
    registry::Kind,
    request::{self, Output, Params, Target},
    rest::{Filter, entry_json, json_response, table_of},
    state::ApiServer,
};
use axum::{body::Body, http::StatusCode, response::Response};
use bytes::Bytes;
use futures::stream;
use serde_json::{Value, json};
use std::{sync::Arc, time::Duration};
use tokio::sync::broadcast::error::RecvError;

/// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);

/// The state a watch stream carries between events.
struct WatchState {
    def: Arc<Kind>,
    /// The kind that stores the objects (whose printer renders tables).
    storage: Arc<Kind>,
    filter: Filter,
    out: Output,
    /// Replayed history or the current objects, still to be sent.
    initial: std::vec::IntoIter<Arc<CacheEvent>>,
    /// Encoded lines to send after them.
    pending: std::collections::VecDeque<Bytes>,
    live: tokio::sync::broadcast::Receiver<Arc<CacheEvent>>,
    server: ApiServer,
    bookmarks: bool,
    /// The revision of the last event taken from the cache, sent or filtered out: everything of
    /// this resource up to it has been seen.
    last_rev: u64,
    /// The last revision the client was told of (an event or a bookmark).
    sent_rev: u64,
    /// When the next BOOKMARK is due; kept across loop passes so a stream of filtered-out events
    /// does not keep pushing it back.
    next_bookmark: tokio::time::Instant,
    deadline: tokio::time::Instant,
    done: bool,
    _open: crate::metrics::GaugeGuard,
}

impl ApiServer {
    /// Starts a watch on a collection (or one object, when the path names it).
    pub(crate) async fn watch(
        &self,
        t: &Target,
        params: &Params,
        out: Output,
    ) -> ApiResult<Response> {
        let storage = self.storage_of(&t.def);
        let filter = Filter::new(&storage, params, t)?;
        let initial_events = request::flag(&params.send_initial_events);
        let from = match params.resource_version()? {
            _ if initial_events => None,
            None | Some(0) => None,
            Some(rv) => {
                // A client may have seen a revision (from a write) the cache has not applied yet.
                if !self.cache.wait_for(rv, Duration::from_secs(3)).await {
                    return Err(ApiError::timeout(format!(
                        "Too large resource version: {rv}"
                    )));
                }
                Some(rv)
            }
        };
        if from.is_none() && !initial_events && params.resource_version.is_none() {
            self.sync_cache().await?;
        }
        let sub = match self.cache.subscribe(&storage, from) {
            Ok(sub) => sub,
            // Upstream answers a watch from a compacted revision with 200 and one ERROR event (410),
            // and clients (client-go's reflector, kube-rs' watcher) relist on exactly that.
            Err(too_old) => {
                let status = ApiError::expired(too_old.to_string()).status();
                return Ok(json_response(StatusCode::OK, line("ERROR", &status)));
            }
        };
        let mut pending = std::collections::VecDeque::new();
        let mut last_rev = sub
            .initial
            .iter()
            .map(|ev| ev.entry.rev)
            .fold(from.unwrap_or(sub.rev), u64::max);
        let bookmarks = request::flag(&params.allow_watch_bookmarks);
        if initial_events {
            last_rev = sub.rev;
            pending.push_back(bookmark(&t.def, last_rev, true));
        }
        let timeout = match params.timeout_seconds()? {
            Some(s) => Duration::from_secs(s),
            // Upstream spreads unbounded watches over 30-60 minutes so they do not all reconnect at once.
            None => Duration::from_secs(1800 + rand::random_range(0..1800)),
        };
        let state = WatchState {
            def: t.def.clone(),
            storage: storage.clone(),
            filter,
            out,
            initial: sub.initial.into_iter(),
            pending,
            live: sub.live,
            server: self.clone(),
            bookmarks,
            last_rev,
            sent_rev: last_rev,
            next_bookmark: tokio::time::Instant::now() + BOOKMARK_EVERY,
            deadline: tokio::time::Instant::now() + timeout,
            done: false,
            _open: self.metrics.open_watch(&t.def.plural),
        };
        let body = stream::unfold(state, |mut st| async move {
            loop {
                // The initial events are encoded one at a time as the client takes them, so a
                // watcher holds one copy of its collection's pointers, not of its bytes.
                if let Some(ev) = st.initial.next() {
                    match encode_event(&st.def, &st.storage, &st.filter, &ev, st.out) {
                        Some(b) => return Some((Ok::<Bytes, std::io::Error>(b), st)),
                        None => continue,
                    }
                }
                if let Some(b) = st.pending.pop_front() {
                    return Some((Ok(b), st));
                }
                if st.done {
                    return None;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(st.deadline) => { st.done = true; }
                    ev = st.live.recv() => match ev {
                        Ok(ev) => {
                            if ev.entry.rev <= st.last_rev {
                                continue;
                            }
                            st.last_rev = ev.entry.rev;
                            if let Some(b) = encode_event(&st.def, &st.storage, &st.filter, &ev, st.out) {
                                st.sent_rev = ev.entry.rev;
                                st.pending.push_back(b);
                            }
                        }
                        Err(RecvError::Lagged(_)) => {
                            let status = ApiError::expired("the watch fell too far behind; please relist").status();
                            st.pending.push_back(line("ERROR", &status));
                            st.done = true;
                        }
                        // The cache relisted from the store (or is going away): its history
                        // restarted, so this watcher cannot be told what changed; like upstream's
                        // cacher, end it so that its client relists.
                        Err(RecvError::Closed) => {
                            let status = ApiError::expired("the watch cache was reinitialized from storage; please relist").status();
                            st.pending.push_back(line("ERROR", &status));
                            st.done = true;
                        }
                    },
                    _ = tokio::time::sleep_until(st.next_bookmark), if st.bookmarks => {
                        st.next_bookmark = tokio::time::Instant::now() + BOOKMARK_EVERY;
                        // With nothing queued, every event up to the revision read before checking
                        // the channel is already received (the cache sends before it publishes a
                        // revision); otherwise the last event taken is as far as it is known.
                        let rev = st.server.cache.revision();
                        let rev = if st.live.is_empty() { rev.max(st.last_rev) } else { st.last_rev };
                        if rev > st.sent_rev {
                            st.last_rev = rev;
                            st.sent_rev = rev;
                            st.pending.push_back(bookmark(&st.def, rev, false));
                        }
                    }
                }
            }
        });
        let mut resp = json_response(StatusCode::OK, Body::from_stream(body));
        resp.headers_mut().insert(
            axum::http::header::CACHE_CONTROL,
            axum::http::HeaderValue::from_static("no-cache, private"),
        );
        Ok(resp)
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

fn bookmark(def: &Kind, rev: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta}),
    )
}

/// Encodes one cache event for a watcher, or `None` if the watcher's selector hides it.
fn encode_event(
    def: &Kind,
    storage: &Kind,
    filter: &Filter,
    ev: &CacheEvent,
    out: Output,
) -> Option<Bytes> {
    let now = filter.matches(&ev.entry);
    let before = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
    let kind = match ev.kind {
        EventType::Added if now => EventType::Added,
        EventType::Modified if now && before => EventType::Modified,
        EventType::Modified if now => EventType::Added,
        EventType::Modified if before => EventType::Deleted,
        EventType::Deleted if now => EventType::Deleted,
        _ => return None,
    };
    Some(match out {
        Output::Json => {
            let json = entry_json(def, &ev.entry);
            let mut v = Vec::with_capacity(json.len() + 32);
            v.extend_from_slice(b"{\"type\":\"");
            v.extend_from_slice(kind.as_str().as_bytes());
            v.extend_from_slice(b"\",\"object\":");
            v.extend_from_slice(&json);
            v.extend_from_slice(b"}\n");
            Bytes::from(v)
        }
        Output::Metadata => {
            let obj = ev.entry.value();
            line(
                kind.as_str(),
                &json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))}),
            )
        }
        Output::Table(include) => {
            let obj = ev.entry.value();
            let t = table_of(
                def,
                storage,
                &[&obj],
                include,
                json!({"resourceVersion": ev.entry.rev.to_string()}),
            );
            line(kind.as_str(), &t)
        }
    })
}
