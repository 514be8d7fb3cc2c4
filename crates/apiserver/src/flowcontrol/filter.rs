//! The request filter of API Priority and Fairness (upstream's `WithPriorityAndFairness`): a
//! request is classified, waits for its seats in its level's queues, and holds them until its
//! answer is sent.

use std::time::Instant;

use axum::{
    body::Body,
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    response::Response,
};

use super::{FLOW_SCHEMA_UID, PRIORITY_LEVEL_UID, TOO_MANY_REQUESTS, flow_hash, width};
use crate::{context::Identity, filters::request_info::RequestInfo, state::ApiServer};

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

/// The filter around `next` (the rest of the chain): `next` runs once the request has its
/// seats, which it holds until its answer is sent.
pub(crate) async fn run<F, Fut>(server: &ApiServer, req: Request, next: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let Some(identity) = req.extensions().get::<Identity>().cloned() else {
        return next(req).await;
    };
    let attrs = RequestInfo::of(&req, (*identity.user).clone());
    if long_running(&attrs) {
        return next(req).await;
    }
    let metrics = server.metrics.clone();
    let snapshot = server.snapshot_flow_control();
    let Some((fs, pl)) = snapshot.config.classify(&attrs) else {
        // Nothing matches only when `catch-all` is gone (the server puts it back on start).
        return next(req).await;
    };
    let (fs_name, fs_uid) = (fs.name.clone(), fs.uid.clone());
    let (pl_name, pl_uid) = (pl.name.clone(), pl.uid.clone());
    let Some(set) = snapshot.sets.get(&pl_name).cloned() else {
        // Exempt.
        let flow = metrics.apf_flow(&pl_name, &fs_name);
        flow.dispatched(None);
        let executing = flow.executing(1);
        let mut resp = next(req).await;
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
    let flow = metrics.apf_flow(&pl_name, &fs_name);
    let admitted = {
        let _waiting = flow.inqueue();
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
    flow.dispatched(Some(waited));
    let executing = flow.executing(admitted.width());
    let watch = attrs.verb == "watch";
    let mut resp = next(req).await;
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
