//! The audit filter: upstream's `WithAuditInit` and `WithAudit` (`endpoints/filters/audit.go`),
//! with what upstream's handlers add to the event (`LogRequestObject`, `LogRequestPatch`,
//! `LogResponseObject` in `pkg/audit/request.go`).
//!
//! Every response carries the request's `Audit-Id` (the client's own, if it sent one). A request
//! the policy audits gets a `RequestReceived` event before it is handled and a
//! `ResponseComplete` one after; a long-running request (a watch) gets `ResponseStarted` when
//! its headers are ready and `ResponseComplete` when its stream ends; a handler that panics gets
//! `Panic`. Bodies are recorded at the `Request` and `RequestResponse` levels as the handler
//! reads and returns them, up to [`MAX_OBJECT`] bytes each.
//!
//! The user is the authenticated one: upstream audits before impersonating, so its policy
//! matches the real requester, and the impersonated user is recorded beside it.

use super::{
    Auditor,
    event::{Event, MicroTime, ObjectReference, ResponseStatus},
    policy::{Level, RequestAuditConfig, Stage, Stages},
};
use crate::{context::Identity, filters::request_info::RequestInfo, state::ApiServer};
use authz::{Attributes, Decision, UserInfo};
use axum::{
    body::Body,
    extract::{ConnectInfo, Request},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use futures::FutureExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use serde_json::Value;
use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
    panic::AssertUnwindSafe,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

/// Upstream's `Audit-ID` header, in and out.
static AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// The largest request or response body recorded; a larger one is left out and the event
/// annotated as upstream's truncating backend does.
const MAX_OBJECT: usize = 10 * 1024 * 1024;

const TRUNCATED: &str = "audit.k8s.io/truncated";

/// Upstream's `maxUserAgentLength`.
const MAX_USER_AGENT: usize = 1024;

tokio::task_local! {
    static ANNOTATIONS: Annotations;
}

/// Annotations added while a request is served; the first value for a key stays.
#[derive(Clone, Default)]
struct Annotations(Arc<Mutex<BTreeMap<String, String>>>);

impl Annotations {
    fn add(&self, key: &str, value: &str) {
        let Ok(mut map) = self.0.lock() else { return };
        match map.get(key) {
            Some(old) if old != value => {
                tracing::warn!(key, value, old = %old, "audit annotation already set");
            }
            Some(_) => {}
            None => {
                map.insert(key.to_string(), value.to_string());
            }
        }
    }

    fn merge_into(&self, event: &mut Event) {
        if let Ok(map) = self.0.lock() {
            for (k, v) in map.iter() {
                event
                    .annotations
                    .entry(k.clone())
                    .or_insert_with(|| v.clone());
            }
        }
    }
}

/// Adds an annotation to the audit event of the request this task serves (upstream's
/// `audit.AddAuditAnnotation`); nothing when the request is not audited.
pub(crate) fn annotate(key: &str, value: &str) {
    let _ = ANNOTATIONS.try_with(|a| a.add(key, value));
}

/// Records the authorizer's decision as upstream's authorization filter does:
/// `authorization.k8s.io/decision` (`allow` or `forbid`) and `authorization.k8s.io/reason`.
pub(crate) fn record_decision(decision: &Decision) {
    let verdict = if decision.allowed() {
        "allow"
    } else {
        "forbid"
    };
    annotate("authorization.k8s.io/decision", verdict);
    annotate("authorization.k8s.io/reason", decision.reason());
}

/// The filter around `next` (the rest of the chain). Placed after authentication (it reads the request's [`Identity`]; none means an
/// anonymous request); without an [`Auditor`] it only passes the request on.
pub(crate) async fn run<F, Fut>(s: &ApiServer, req: Request, next: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let Some(auditor) = s.audit.clone() else {
        return next(req).await;
    };
    let received = MicroTime::now();
    let audit_id = audit_id(&req);
    let identity = req.extensions().get::<Identity>();
    let (user, impersonated) = match identity {
        Some(Identity {
            user,
            impersonator: Some(real),
        }) => ((**real).clone(), Some((**user).clone())),
        Some(Identity {
            user,
            impersonator: None,
        }) => ((**user).clone(), None),
        None => (UserInfo::anonymous(), None),
    };
    let attrs = RequestInfo::of(&req, user);
    let config = auditor.policy.evaluate(&attrs);
    let resp = if config.level == Level::None {
        next(req).await
    } else {
        let event = Event::new(config.level, audit_id.clone(), received);
        Recording {
            auditor,
            config,
            event,
        }
        .run(attrs, impersonated, req, next)
        .await
    };
    with_audit_id(resp, &audit_id)
}

/// Records a request that failed authentication, as upstream's `WithFailedAuthenticationAudit`:
/// the policy sees no user, and one `ResponseStarted` event says which credentials were tried.
/// The authentication layer calls it with the 401 it answers (`client_cert`: whether the client
/// presented a certificate).
pub(crate) async fn failed_authentication(
    s: &ApiServer,
    req: Request,
    client_cert: bool,
    resp: Response,
) -> Response {
    let Some(auditor) = &s.audit else {
        return resp;
    };
    let received = MicroTime::now();
    let audit_id = audit_id(&req);
    let attrs = RequestInfo::of(&req, UserInfo::default());
    let config = auditor.policy.evaluate(&attrs);
    if config.level != Level::None {
        let mut ev = Event::new(config.level, audit_id.clone(), received);
        request_metadata(&mut ev, &req, attrs);
        ev.response_status = Some(ResponseStatus {
            message: Some(attempted_authentication(&req, client_cert)),
            code: resp.status().as_u16(),
            ..Default::default()
        });
        auditor
            .emit(&mut ev, Stage::ResponseStarted, config.omit_stages)
            .await;
    }
    with_audit_id(resp, &audit_id)
}

/// Upstream's `getAuthMethods`.
fn attempted_authentication(req: &Request, client_cert: bool) -> String {
    let mut methods = Vec::new();
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    let scheme = auth.split(' ').next().unwrap_or("").to_ascii_lowercase();
    if scheme == "basic" && auth.len() > "basic ".len() {
        methods.push("basic");
    }
    if scheme == "bearer" && auth.split(' ').count() > 1 {
        methods.push("bearer");
    }
    let access_token = req.uri().query().unwrap_or("").split('&').any(|p| {
        p.strip_prefix("access_token=")
            .is_some_and(|t| !t.trim().is_empty())
    });
    if access_token {
        methods.push("access_token");
    }
    if client_cert {
        methods.push("x509");
    }
    if methods.is_empty() {
        "Authentication failed, no credentials provided".to_string()
    } else {
        format!("Authentication failed, attempted: {}", methods.join(", "))
    }
}

/// The request's `Audit-ID`, or a new one (upstream's `WithAuditInit`).
fn audit_id(req: &Request) -> String {
    req.headers()
        .get(&AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map_or_else(crate::admission::new_uid, str::to_string)
}

/// Echoes the audit ID to the client, unless the response names one already.
fn with_audit_id(mut resp: Response, audit_id: &str) -> Response {
    if !resp.headers().contains_key(&AUDIT_ID)
        && let Ok(v) = HeaderValue::from_str(audit_id)
    {
        resp.headers_mut().insert(AUDIT_ID.clone(), v);
    }
    resp
}

/// Upstream's `LogRequestMetadata`: who asked for what, from where.
fn request_metadata(ev: &mut Event, req: &Request, attrs: Attributes) {
    ev.request_uri = req.uri().path_and_query().map_or_else(
        || req.uri().path().to_string(),
        |pq| pq.as_str().to_string(),
    );
    ev.user_agent = user_agent(req.headers());
    ev.source_ips = source_ips(req);
    ev.object_ref = attrs.resource_request.then(|| ObjectReference {
        resource: attrs.resource,
        namespace: attrs.namespace,
        name: attrs.name,
        api_group: attrs.api_group,
        api_version: attrs.api_version,
        subresource: attrs.subresource,
        ..Default::default()
    });
    ev.verb = attrs.verb;
    ev.user = attrs.user;
}

/// Upstream's `LongRunningFunc` for kube-apiserver: verbs `watch` and `proxy`, and the
/// streaming subresources.
fn is_long_running(attrs: &Attributes) -> bool {
    matches!(attrs.verb.as_str(), "watch" | "proxy")
        || attrs.resource_request
            && matches!(
                attrs.subresource.as_str(),
                "attach" | "exec" | "proxy" | "log" | "portforward"
            )
}

/// One audited request.
struct Recording {
    auditor: Arc<Auditor>,
    config: RequestAuditConfig,
    event: Event,
}

impl Recording {
    async fn run<F, Fut>(
        mut self,
        attrs: Attributes,
        impersonated: Option<UserInfo>,
        req: Request,
        next: F,
    ) -> Response
    where
        F: FnOnce(Request) -> Fut,
        Fut: Future<Output = Response>,
    {
        let omit = self.config.omit_stages;
        let level = self.config.level;
        let ev = &mut self.event;
        let long_running = is_long_running(&attrs);
        request_metadata(ev, &req, attrs);
        ev.impersonated_user = impersonated;
        if !self.auditor.emit(ev, Stage::RequestReceived, omit).await {
            // Upstream refuses a request it cannot audit.
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "Internal Server Error: {:?}: failed to store audit event\n",
                    ev.request_uri
                ),
            )
                .into_response();
        }

        // Handlers log the body they decode: creates and updates (whose object also names
        // what `objectRef` lacks) at every level, patches and delete options from `Request` on.
        let capture = match ev.verb.as_str() {
            "create" | "update" => true,
            "patch" | "delete" | "deletecollection" => level >= Level::Request,
            _ => false,
        };
        let request_type = content_type(req.headers()).to_string();
        let captured = capture.then(|| Arc::new(Mutex::new(Captured::default())));
        let req = match &captured {
            Some(c) => req.map(|body| {
                Body::new(Tee {
                    body,
                    into: c.clone(),
                })
            }),
            None => req,
        };
        let annotations = Annotations::default();
        let abandoned = Abandoned {
            auditor: self.auditor.clone(),
            event: Some(ev.clone()),
            omit,
        };
        let handled = AssertUnwindSafe(ANNOTATIONS.scope(annotations.clone(), next(req)))
            .catch_unwind()
            .await;
        abandoned.disarm();
        annotations.merge_into(ev);
        let resp = match handled {
            Ok(resp) => resp,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                ev.response_status = Some(ResponseStatus {
                    status: Some("Failure".into()),
                    message: Some(format!("APIServer panic'd: {what}")),
                    reason: Some("InternalError".into()),
                    code: 500,
                    ..Default::default()
                });
                self.auditor.emit(ev, Stage::Panic, omit).await;
                std::panic::resume_unwind(panic);
            }
        };
        if let Some(c) = captured {
            let (bytes, overflow) = match c.lock() {
                Ok(mut c) => (std::mem::take(&mut c.bytes), c.overflow),
                Err(_) => (Vec::new(), true),
            };
            if overflow && level >= Level::Request {
                ev.annotations
                    .insert(TRUNCATED.to_string(), "true".to_string());
            } else if let Some(obj) = decode(&bytes, &request_type) {
                record_request(ev, &self.config, obj);
            }
        }

        let code = resp.status().as_u16();
        let (parts, body) = resp.into_parts();
        let mut status = ResponseStatus::code(code);
        // Only failures and deletes answer with a `Status`; other bodies matter at
        // `RequestResponse` only, so a `Metadata` list is not read twice.
        let may_be_status = !(200..300).contains(&code) || ev.verb.starts_with("delete");
        let wanted = level >= Level::RequestResponse || may_be_status;
        let body = match body.size_hint().exact() {
            Some(n) if wanted && readable(&parts.headers) => {
                if n as usize > MAX_OBJECT {
                    if level >= Level::RequestResponse {
                        ev.annotations
                            .insert(TRUNCATED.to_string(), "true".to_string());
                    }
                    body
                } else {
                    // The whole body is in memory already: only an in-process error can stop
                    // this, and then the client gets the 500 the error would have become.
                    match axum::body::to_bytes(body, MAX_OBJECT).await {
                        Ok(bytes) => {
                            let obj = decode(&bytes, content_type(&parts.headers));
                            record_response(ev, &self.config, obj, &mut status);
                            Body::from(bytes)
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "reading a response to audit it failed");
                            status = ResponseStatus::code(500);
                            ev.response_status = Some(status);
                            self.auditor.emit(ev, Stage::ResponseComplete, omit).await;
                            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
                        }
                    }
                }
            }
            _ => body,
        };
        ev.response_status = Some(status);
        if long_running {
            self.auditor.emit(ev, Stage::ResponseStarted, omit).await;
            let body = crate::guarded_body::guarded(body, Completing(Some(Box::new(self))));
            Response::from_parts(parts, body)
        } else {
            self.auditor.emit(ev, Stage::ResponseComplete, omit).await;
            Response::from_parts(parts, body)
        }
    }
}

/// Upstream's `LogRequestObject` (or `LogRequestPatch` for a patch, which is recorded as sent).
fn record_request(ev: &mut Event, config: &RequestAuditConfig, mut obj: Value) {
    let patch = ev.verb == "patch";
    if !patch
        && let (Some(meta), Some(r)) = (
            obj.get("metadata").and_then(Value::as_object),
            ev.object_ref.as_mut(),
        )
    {
        let fill = |slot: &mut String, key: &str| {
            if slot.is_empty()
                && let Some(v) = meta.get(key).and_then(Value::as_str)
            {
                *slot = v.to_string();
            }
        };
        fill(&mut r.namespace, "namespace");
        fill(&mut r.name, "name");
        fill(&mut r.uid, "uid");
        fill(&mut r.resource_version, "resourceVersion");
    }
    if config.level < Level::Request {
        return;
    }
    if !patch && config.omit_managed_fields {
        drop_managed_fields(&mut obj);
    }
    ev.request_object = Some(obj);
}

/// Upstream's `LogResponseObject`: a `Status` body gives the response status; at
/// `RequestResponse` the body is the response object.
fn record_response(
    ev: &mut Event,
    config: &RequestAuditConfig,
    obj: Option<Value>,
    status: &mut ResponseStatus,
) {
    let Some(mut obj) = obj else {
        return;
    };
    let want_object = config.level >= Level::RequestResponse;
    if obj.get("kind").and_then(Value::as_str) == Some("Status") {
        *status = ResponseStatus::from_status(&obj, status.code);
    }
    if want_object {
        if config.omit_managed_fields {
            drop_managed_fields(&mut obj);
        }
        ev.response_object = Some(obj);
    }
}

/// Upstream's `copyWithoutManagedFields`: from an object, a list's items, a table's rows.
fn drop_managed_fields(obj: &mut Value) {
    fn one(obj: &mut Value) {
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    }
    one(obj);
    if let Some(items) = obj.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(one);
    }
    if obj.get("kind").and_then(Value::as_str) == Some("Table")
        && let Some(rows) = obj.get_mut("rows").and_then(Value::as_array_mut)
    {
        for row in rows {
            if let Some(o) = row.get_mut("object") {
                one(o);
            }
        }
    }
}

/// A body as the log shows it, in JSON as upstream encodes recorded objects: JSON as sent,
/// protobuf (what typed clients such as `kubectl create` send) and YAML (an apply patch)
/// converted.
fn decode(bytes: &[u8], content_type: &str) -> Option<Value> {
    if bytes.is_empty() {
        return None;
    }
    if content_type.starts_with(crate::protobuf::CONTENT_TYPE) {
        return crate::protobuf::decode(bytes).ok();
    }
    if let Ok(v) = serde_json::from_slice(bytes) {
        return Some(v);
    }
    if content_type.contains("yaml") {
        return std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| serde_saphyr::from_str(s).ok());
    }
    None
}

fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Whether a response's body is JSON (the server answers only objects in JSON; protobuf it
/// streams in watches, which are not recorded).
fn readable(headers: &HeaderMap) -> bool {
    content_type(headers).starts_with("application/json")
}

/// Upstream's `maybeTruncateUserAgent`.
fn user_agent(headers: &HeaderMap) -> String {
    let Some(ua) = headers.get(header::USER_AGENT) else {
        return String::new();
    };
    let ua = String::from_utf8_lossy(ua.as_bytes());
    if ua.len() <= MAX_USER_AGENT {
        return ua.into_owned();
    }
    let mut end = MAX_USER_AGENT;
    while !ua.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...TRUNCATED", &ua[..end])
}

/// Upstream's `utilnet.SourceIPs`: the `X-Forwarded-For` chain, `X-Real-Ip` if not in it, and
/// the peer's address unless it ends the chain already.
fn source_ips(req: &Request) -> Vec<String> {
    let headers = req.headers();
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let parse = |s: &str| s.trim().parse::<IpAddr>().ok().map(|ip| ip.to_canonical());
    let mut ips: Vec<IpAddr> = text("x-forwarded-for")
        .map(|chain| chain.split(',').filter_map(parse).collect())
        .unwrap_or_default();
    if let Some(ip) = text("x-real-ip").and_then(parse)
        && !ips.contains(&ip)
    {
        ips.push(ip);
    }
    if let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() {
        let ip = peer.ip().to_canonical();
        if ips.last() != Some(&ip) {
            ips.push(ip);
        }
    }
    ips.iter().map(IpAddr::to_string).collect()
}

/// What a request body's reader has read so far, up to [`MAX_OBJECT`].
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    overflow: bool,
}

/// A request body that keeps a copy of what the handler reads.
struct Tee {
    body: Body,
    into: Arc<Mutex<Captured>>,
}

impl HttpBody for Tee {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && let Ok(mut c) = self.into.lock()
        {
            if c.bytes.len() + data.len() > MAX_OBJECT {
                c.overflow = true;
            } else if !c.overflow {
                c.bytes.extend_from_slice(data);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Completes the event of a request whose client went away while it was handled, which
/// cancels the handler here. Upstream's handler runs on and its event completes; without a
/// response to show, it gets the status upstream gives a handler that wrote none.
struct Abandoned {
    auditor: Arc<Auditor>,
    event: Option<Event>,
    omit: Stages,
}

impl Abandoned {
    fn disarm(mut self) {
        self.event = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(mut ev) = self.event.take() {
            ev.response_status = Some(ResponseStatus {
                status: Some("Success".into()),
                message: Some("Connection closed early".into()),
                code: 200,
                ..Default::default()
            });
            self.auditor
                .emit_now(&mut ev, Stage::ResponseComplete, self.omit);
        }
    }
}

/// Writes a long-running response's `ResponseComplete` event when its body is done (its stream
/// ended or the client went away).
struct Completing(Option<Box<Recording>>);

impl Drop for Completing {
    fn drop(&mut self) {
        if let Some(mut r) = self.0.take() {
            let omit = r.config.omit_stages;
            r.auditor
                .emit_now(&mut r.event, Stage::ResponseComplete, omit);
        }
    }
}

#[cfg(test)]
mod tests;
