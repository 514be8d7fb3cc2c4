//! API Priority and Fairness (upstream's `WithPriorityAndFairness` filter and its controller,
//! `util/flowcontrol`): every request is classified by the FlowSchemas into a priority level;
//! exempt levels serve at once, limited ones share the server's seats (the read and mutating
//! in-flight limits added up, as upstream's `serverConcurrencyLimit`) in proportion to their
//! `nominalConcurrencyShares`, and within a level flows are queued fairly
//! ([`queueset`]). So one user's requests can fill only its own level's seats and its own
//! queues: `system:masters` is exempt, the controllers run at `workload-high`, the nodes at
//! `system` and `node-high`, and other users at `global-default`, each flow fairly against the
//! others of its level.
//!
//! The configuration is read from the FlowSchema and PriorityLevelConfiguration objects in the
//! watch cache and rebuilt when one changes (compared by the cache's change counts on each
//! request, as the RBAC snapshot is); a level keeps its queues and the requests waiting in them
//! across a rebuild.
//!
//! Not done as upstream: levels do not lend or borrow seats (`lendablePercent`,
//! `borrowingLimitPercent`), a mutating request takes one seat with no extra for the watches it
//! wakes, and a PriorityLevelConfiguration's `status` is not written (a FlowSchema's `Dangling`
//! condition is, [`status`]).

mod bootstrap;
pub(crate) mod config;
pub(crate) mod queueset;
mod retry_after;
mod status;
pub(crate) mod width;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, OnceLock, RwLock},
    time::{Duration, Instant},
};

use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::Response,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    cache::{Cache, ChangeCount},
    change::Change,
    context::Identity,
    error::ApiResult,
    filters::request_info::RequestInfo,
    registry::Kind,
    state::ApiServer,
};
use config::Config;
use queueset::QueueSet;

/// The group of FlowSchemas and PriorityLevelConfigurations.
pub(crate) const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The header naming the FlowSchema a request matched, by UID (upstream sets UIDs, not names,
/// so that a rejected client does not learn how an administrator named its low priority).
pub(crate) const FLOW_SCHEMA_UID: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// The header naming the priority level a request was served (or rejected) at, by UID.
pub(crate) const PRIORITY_LEVEL_UID: &str = "X-Kubernetes-PF-PriorityLevel-UID";

/// Upstream's answer to a rejected request (`http.Error`, so plain text, not a Status).
const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.\n";

/// The server's flow control: its configuration as last read and its levels' queues.
pub(crate) struct FlowControl {
    /// Seats shared among the limited levels.
    total: u32,
    /// How long a request waits in a queue before it is rejected (upstream: a quarter of
    /// `--request-timeout`).
    wait_limit: Duration,
    counts: OnceLock<Vec<ChangeCount>>,
    built: RwLock<Option<Arc<Snapshot>>>,
    rebuild: Mutex<()>,
    retry_after: retry_after::RetryAfter,
}

/// One configuration and the levels it serves.
struct Snapshot {
    /// The change counts of the two kinds it was built at.
    at: Vec<u64>,
    config: Config,
    /// The limited levels' queues, by name.
    sets: BTreeMap<String, Arc<QueueSet>>,
}

impl FlowControl {
    /// Flow control over `total` seats; a request waits at most `wait_limit` in a queue.
    pub(crate) fn new(total: u32, wait_limit: Duration) -> Self {
        Self {
            total: total.max(1),
            wait_limit,
            counts: OnceLock::new(),
            built: RwLock::new(None),
            rebuild: Mutex::new(()),
            retry_after: Default::default(),
        }
    }

    fn now(&self, cache: &Cache) -> Vec<u64> {
        self.counts
            .get_or_init(|| {
                ["flowschemas", "prioritylevelconfigurations"]
                    .iter()
                    .filter_map(|plural| cache.registry().owner(GROUP, plural))
                    .map(|def| cache.changes(&def))
                    .collect()
            })
            .iter()
            .map(ChangeCount::get)
            .collect()
    }

    /// The configuration now, rebuilt first if a FlowSchema or PriorityLevelConfiguration
    /// changed since it was built.
    fn snapshot(&self, server: &ApiServer) -> Arc<Snapshot> {
        let (cache, metrics) = (&server.cache, &server.metrics);
        let at = self.now(cache);
        let current = || {
            self.built
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .filter(|s| s.at == at)
        };
        if let Some(s) = current() {
            return s;
        }
        let _rebuilding = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = current() {
            return s;
        }
        let objects = |plural: &str| -> Vec<Value> {
            cache
                .registry()
                .owner(GROUP, plural)
                .map(|def| cache.list(&def, None).0.iter().map(|e| e.value()).collect())
                .unwrap_or_default()
        };
        let (flow_schemas, levels) = (
            objects("flowschemas"),
            objects("prioritylevelconfigurations"),
        );
        let config = Config::new(&flow_schemas, &levels);
        let updates = status::dangling_updates(&flow_schemas, &levels);
        if !updates.is_empty() {
            let server = server.clone();
            tokio::spawn(async move { server.write_dangling(updates).await });
        }
        let previous = self.built.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut sets = BTreeMap::new();
        for (name, level) in config.level_configs(self.total, self.wait_limit) {
            metrics.apf_nominal_limit(&name, level.concurrency);
            let set = match previous.as_ref().and_then(|p| p.sets.get(&name)) {
                Some(set) => {
                    set.reconfigure(level);
                    set.clone()
                }
                None => QueueSet::new(level),
            };
            sets.insert(name, set);
        }
        let snapshot = Arc::new(Snapshot { at, config, sets });
        *self.built.write().unwrap_or_else(|e| e.into_inner()) = Some(snapshot.clone());
        snapshot
    }
}

/// The flow a request belongs to, hashed as upstream hashes it (`hashFlowID`).
fn flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(flow_schema.as_bytes());
    h.update([0u8]);
    h.update(distinguisher.as_bytes());
    let sum = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&sum[..8]);
    u64::from_le_bytes(first)
}

/// Upstream's long-running requests other than watches (`BasicLongRunningRequestCheck`): not
/// limited, as they would hold seats for as long as they run.
fn long_running(attrs: &authz::Attributes) -> bool {
    attrs.resource_request
        && (attrs.verb == "proxy"
            || matches!(
                attrs.subresource.as_str(),
                "attach" | "exec" | "proxy" | "log" | "portforward"
            ))
}

fn set_headers(resp: &mut Response, fs_uid: &str, pl_uid: &str) {
    for (name, value) in [(PRIORITY_LEVEL_UID, pl_uid), (FLOW_SCHEMA_UID, fs_uid)] {
        if let Ok(v) = HeaderValue::from_str(value) {
            resp.headers_mut().insert(name, v);
        }
    }
}

/// The filter.
pub(crate) async fn filter(State(server): State<ApiServer>, req: Request, next: Next) -> Response {
    let Some(identity) = req.extensions().get::<Identity>().cloned() else {
        return next.run(req).await;
    };
    let attrs = RequestInfo::of(&req, (*identity.user).clone());
    if long_running(&attrs) {
        return next.run(req).await;
    }
    let metrics = server.metrics.clone();
    let snapshot = server.flow_control.snapshot(&server);
    let Some((fs, pl)) = snapshot.config.classify(&attrs) else {
        // Nothing matches only when `catch-all` is gone (the server puts it back on start).
        return next.run(req).await;
    };
    let (fs_name, fs_uid) = (fs.name.clone(), fs.uid.clone());
    let (pl_name, pl_uid) = (pl.name.clone(), pl.uid.clone());
    let Some(set) = snapshot.sets.get(&pl_name).cloned() else {
        // Exempt.
        metrics.apf_dispatched(&pl_name, &fs_name);
        let executing = metrics.apf_executing(&pl_name, &fs_name, 1);
        let mut resp = next.run(req).await;
        set_headers(&mut resp, &fs_uid, &pl_uid);
        return resp.map(|body| crate::guarded_body::guarded(body, executing));
    };
    let stored = if attrs.verb == "list" || attrs.verb == "watch" {
        server
            .registry()
            .find(&attrs.api_group, &attrs.api_version, &attrs.resource)
            .map(|def| server.cache.len(&server.storage_of(&def)))
    } else {
        None
    };
    let seats = width::seats(&attrs, req.uri().query(), stored);
    let hash = flow_hash(&fs_name, fs.flow_distinguisher(&attrs));
    drop(snapshot);
    let started = Instant::now();
    let admitted = {
        let _waiting = metrics.apf_inqueue(&pl_name, &fs_name);
        set.acquire(hash, seats).await
    };
    let waited = started.elapsed().as_secs_f64();
    let admitted = match admitted {
        Ok(a) => a,
        Err(rejection) => {
            metrics.apf_rejected(&pl_name, &fs_name, rejection.as_str(), waited);
            let retry_after = server
                .flow_control
                .retry_after
                .refused(&pl_name, clock::now().as_second());
            return too_many_requests(&fs_uid, &pl_uid, retry_after);
        }
    };
    metrics.apf_dispatched(&pl_name, &fs_name);
    metrics.apf_waited(&pl_name, &fs_name, waited);
    let executing = metrics.apf_executing(&pl_name, &fs_name, admitted.width());
    let watch = attrs.verb == "watch";
    let mut resp = next.run(req).await;
    set_headers(&mut resp, &fs_uid, &pl_uid);
    if watch {
        // A watch holds its seats while it starts, not while it streams.
        drop((admitted, executing));
        return resp;
    }
    // Seats are held until the answer is sent, as upstream's handler writes it before returning.
    resp.map(|body| crate::guarded_body::guarded(body, (admitted, executing)))
}

fn too_many_requests(fs_uid: &str, pl_uid: &str, retry_after: i64) -> Response {
    let mut resp = Response::new(Body::from(TOO_MANY_REQUESTS));
    *resp.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    let headers = resp.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    set_headers(&mut resp, fs_uid, pl_uid);
    resp
}

impl ApiServer {
    /// Reads the flow-control configuration now (and so writes the FlowSchemas' status), as the
    /// server starts.
    pub(crate) fn load_flow_control(&self) {
        self.flow_control.snapshot(self);
    }

    /// Writes FlowSchemas' `Dangling` conditions (upstream's controller writes them the same
    /// way, after reading a new configuration). A write lost to a race is made again at the
    /// next configuration read, which the write itself causes.
    async fn write_dangling(&self, updates: Vec<(String, Value)>) {
        let Some(def) = self.registry().owner(GROUP, "flowschemas") else {
            return;
        };
        for (name, condition) in updates {
            let outcome = self
                .guaranteed_update(&def, None, &name, false, |old, _| {
                    let mut new = old.clone();
                    status::set_condition(&mut new, condition.clone());
                    Ok(Change::Write(new))
                })
                .await;
            if let Err(e) = outcome
                && e.code != 404
            {
                tracing::warn!(name, error = %e, "unable to write the FlowSchema's status");
            }
        }
    }

    /// Creates the default FlowSchemas and PriorityLevelConfigurations that are missing and puts
    /// back those the server keeps up to date ([`bootstrap::revise`]).
    pub(crate) async fn ensure_flow_control_objects(&self) -> ApiResult<()> {
        for (kind, default) in bootstrap::objects() {
            let plural = match default.get("kind").and_then(Value::as_str) {
                Some("FlowSchema") => "flowschemas",
                _ => "prioritylevelconfigurations",
            };
            let Some(def) = self.registry().owner(GROUP, plural) else {
                continue;
            };
            let name = crate::object::name(&default).to_string();
            match self.cache.get(&def, None, &name).map(|e| e.value()) {
                None => {
                    let mut obj = default.clone();
                    self.ensure_object(&mut obj).await?;
                }
                Some(existing) => {
                    if bootstrap::revise(kind, &existing, &default).is_some() {
                        self.revise_default(&def, &name, kind, &default).await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn revise_default(
        &self,
        def: &Arc<Kind>,
        name: &str,
        kind: bootstrap::Ensure,
        default: &Value,
    ) -> ApiResult<()> {
        let outcome = self
            .guaranteed_update(def, None, name, false, |old, _| {
                Ok(Change::Write(
                    bootstrap::revise(kind, old, default).unwrap_or_else(|| old.clone()),
                ))
            })
            .await;
        match outcome {
            Err(e) if e.code == 404 => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_hash_as_upstream() {
        // Distinct flows of a schema hash apart; the hash is sha256's first 8 bytes.
        assert_ne!(
            flow_hash("global-default", "alice"),
            flow_hash("global-default", "bob")
        );
        assert_ne!(flow_hash("a", "bc"), flow_hash("ab", "c"));
    }
}
