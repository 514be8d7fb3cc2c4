//! The server: start-up and bootstrap, routes, dispatch, and the HTTPS accept loop; its state
//! is [`crate::state`].

use crate::{
    admission::Part,
    cache::Cache,
    context::Identity,
    discovery,
    error::{ApiError, ApiResult},
    health,
    inflight::InFlight,
    metrics::Metrics,
    openapi,
    registry::{Registry, Subresource},
    request::{self, MAX_BODY, Output, Params, Target},
    rest::json_response,
    state::{ApiServer, ServerOptions, ServerState},
};
use axum::{
    Router,
    extract::{Path, Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::{self},
    response::{IntoResponse, Response},
    routing::get,
};
use bytes::Bytes;
use serde_json::json;
use std::{sync::Arc, time::Instant};
use store::Store;

/// The namespaces a cluster has from the start.
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

impl ApiServer {
    /// Loads the cache from `store`, follows it in the background, and creates the system
    /// namespaces if they are missing.
    pub async fn start(store: Arc<dyn Store>, opts: ServerOptions) -> Result<Self, ApiError> {
        let registry = Arc::new(Registry::new());
        crate::registry::apiextensions::register_stored(&registry, store.as_ref()).await?;
        let cache = Arc::new(Cache::with_limits(
            opts.history,
            opts.history_bytes,
            registry.clone(),
        ));
        let rev = cache.prime(store.as_ref()).await?;
        tokio::spawn(cache.clone().run(store.clone(), rev));
        if let Some(ttl) = opts.event_ttl {
            tokio::spawn(crate::expiry::sweep_events(
                store.clone(),
                registry.clone(),
                ttl,
            ));
        }
        let server = Self(Arc::new(ServerState {
            store,
            cache,
            metrics: Arc::new(Metrics::new()),
            in_flight: Arc::new(InFlight::new(&opts.in_flight)),
            flow_control: Arc::new(crate::flowcontrol::FlowControl::new(
                opts.in_flight.total(),
                opts.in_flight.request_timeout / 4,
            )),
            token: opts.token.map(Arc::from),
            service_accounts: opts.service_accounts,
            authz: Default::default(),
            service_account_key: opts.service_account_key,
            audit: opts.audit,
            aggregator: Default::default(),
        }));
        if let Some(budget) = opts.event_budget {
            tokio::spawn(crate::expiry::keep_within_budget(server.clone(), budget));
        }
        server.bootstrap().await?;
        server.load_flow_control();
        crate::aggregator::start(&server).await;
        Ok(server)
    }

    async fn bootstrap(&self) -> Result<(), ApiError> {
        let def = self
            .registry()
            .find("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("no namespaces resource"))?;
        for ns in SYSTEM_NAMESPACES {
            if self.cache.get(&def, None, ns).is_some() {
                continue;
            }
            let mut obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}});
            crate::admission::prepare_create(
                &def,
                &mut obj,
                None,
                &*self.cache,
                crate::admission::Pass::VALIDATED,
            )?;
            match self.store_create(&def, obj, false).await {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        self.ensure_bootstrap_objects().await?;
        self.ensure_flow_control_objects().await?;
        crate::bootstrap_policy::reconcile(self).await?;
        // The server is handed out only once its cache holds what bootstrap wrote: a system
        // component's first request is then authorized by the bootstrap policy, not refused
        // while the cache catches up (the start-up 403s upstream's components retry through).
        self.sync_cache().await
    }

    /// What the watch cache holds of a resource (`None` for one the registry does not serve).
    pub fn cache_footprint(&self, group: &str, plural: &str) -> Option<crate::cache::Footprint> {
        let def = self.cache.registry().owner(group, plural)?;
        Some(self.cache.footprint(&def))
    }

    /// How many Events were deleted before their TTL to keep within the Event budget.
    pub fn events_evicted(&self) -> u64 {
        self.metrics.events_evicted_total()
    }

    /// The store's current revision.
    pub fn revision(&self) -> u64 {
        self.store.revision()
    }

    /// The route table: discovery, OpenAPI, health, metrics, and every resource request
    /// ([`dispatch`]), behind the aggregator's proxy for remote APIServices. The chain of
    /// filters in front of it is [`crate::filters::chain`].
    pub(crate) fn routes(&self) -> Router {
        Router::new()
            .route("/api", get(core_discovery))
            .route("/apis", get(groups_discovery))
            .route("/api/{version}", get(core_resources))
            .route("/apis/{group}", get(group_discovery))
            .route("/apis/{group}/{version}", get(group_resources))
            // Upstream answers discovery with a trailing slash too (`/apis/`, as the
            // conformance specs and older clients ask for it).
            .route("/api/", get(core_discovery))
            .route("/apis/", get(groups_discovery))
            .route("/api/{version}/", get(core_resources))
            .route("/apis/{group}/", get(group_discovery))
            .route("/apis/{group}/{version}/", get(group_resources))
            .route("/openapi/v2", get(openapi_v2))
            .route("/openapi/v3", get(openapi_index))
            .route("/openapi/v3/{*path}", get(openapi_doc))
            .route("/metrics", get(metrics))
            .route(
                "/version",
                get(|| async { axum::Json(discovery::version()) }),
            )
            .route("/healthz", get(health::healthz))
            .route("/healthz/{check}", get(health::healthz_check))
            .route("/livez", get(health::livez))
            .route("/livez/{check}", get(health::livez_check))
            .route("/readyz", get(health::readyz))
            .route("/readyz/{check}", get(health::readyz_check))
            .fallback(dispatch)
            // Requests of remote APIServices go to their servers (the aggregator in front).
            .layer(middleware::from_fn_with_state(
                self.clone(),
                crate::aggregator::proxy::route,
            ))
            .with_state(self.clone())
    }
}

fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            a.split(',').any(|c| {
                c.contains("as=APIGroupDiscoveryList") && c.contains("v=v2;")
                    || c.trim().ends_with("v=v2") && c.contains("as=APIGroupDiscoveryList")
            })
        })
}

fn aggregated_response(v: serde_json::Value) -> Response {
    let mut r = json_response(StatusCode::OK, v.to_string());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(discovery::AGGREGATED_CONTENT_TYPE),
    );
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}

async fn core_discovery(State(s): State<ApiServer>, headers: HeaderMap) -> Response {
    if wants_aggregated(&headers) {
        aggregated_response(discovery::aggregated(s.registry(), true))
    } else {
        json_response(StatusCode::OK, discovery::api_versions().to_string())
    }
}

async fn groups_discovery(State(s): State<ApiServer>, headers: HeaderMap) -> Response {
    use crate::aggregator::discovery as remote;
    if wants_aggregated(&headers) {
        let mut doc = discovery::aggregated(s.registry(), false);
        if let Some(items) = doc["items"].as_array_mut() {
            items.extend(remote::aggregated_groups(&s));
        }
        aggregated_response(doc)
    } else {
        let mut doc = discovery::api_group_list(s.registry());
        if let Some(groups) = doc["groups"].as_array_mut() {
            groups.extend(remote::legacy_groups(&s));
        }
        json_response(StatusCode::OK, doc.to_string())
    }
}

async fn core_resources(State(s): State<ApiServer>, Path(version): Path<String>) -> Response {
    match discovery::resource_list(s.registry(), "", &version) {
        Some(v) => json_response(StatusCode::OK, v.to_string()),
        None => ApiError::no_route(&format!("/api/{version}")).into_response(),
    }
}

async fn group_discovery(State(s): State<ApiServer>, Path(group): Path<String>) -> Response {
    let list = discovery::api_group_list(s.registry());
    let found = list
        .get("groups")
        .and_then(|g| g.as_array())
        .and_then(|gs| {
            gs.iter()
                .find(|g| g.get("name").and_then(|n| n.as_str()) == Some(group.as_str()))
                .cloned()
        });
    match found {
        Some(mut g) => {
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            json_response(StatusCode::OK, g.to_string())
        }
        None => match crate::aggregator::discovery::legacy_group(&s, &group) {
            Some(g) => json_response(StatusCode::OK, g.to_string()),
            None => ApiError::no_route(&format!("/apis/{group}")).into_response(),
        },
    }
}

async fn group_resources(
    State(s): State<ApiServer>,
    Path((group, version)): Path<(String, String)>,
) -> Response {
    match discovery::resource_list(s.registry(), &group, &version) {
        Some(v) => json_response(StatusCode::OK, v.to_string()),
        None => ApiError::no_route(&format!("/apis/{group}/{version}")).into_response(),
    }
}

/// `/openapi/v2` as JSON or as gnostic's protobuf, with an `ETag` pollers revalidate against.
/// The form is chosen as kube-openapi's handler chooses it: the `Accept` clauses by preference,
/// the first that names `application/json` or
/// `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` (or a wildcard over one) wins,
/// no `Accept` means `*/*`, and nothing acceptable is a 406.
async fn openapi_v2(State(s): State<ApiServer>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .unwrap_or("*/*");
    let Some(protobuf) = openapi_v2_wants_protobuf(accept) else {
        return ApiError {
            code: 406,
            reason: "NotAcceptable",
            message: format!(
                "only application/json and {OPENAPI_V2_PROTOBUF} are served here, not {accept}"
            ),
            details: None,
        }
        .into_response();
    };
    let doc = openapi::v2::document(s.registry());
    let (bytes, etag, content_type) = if protobuf {
        let (bytes, etag) = doc.protobuf();
        // Upstream's http.ServeContent sniffs the type of these bytes.
        (bytes.clone(), etag.as_str(), "application/octet-stream")
    } else {
        (doc.bytes.clone(), doc.etag.as_str(), "application/json")
    };
    let etag = format!("\"{etag}\"");
    let fresh = headers
        .get(axum::http::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == etag);
    let mut resp = if fresh {
        let mut r = Response::new(axum::body::Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(axum::body::Body::from(bytes));
        r.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static(content_type),
        );
        r
    };
    if let Ok(v) = axum::http::HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(axum::http::header::ETAG, v);
    }
    resp.headers_mut().insert(
        axum::http::header::VARY,
        axum::http::HeaderValue::from_static("Accept"),
    );
    resp
}

/// The media type client-go's `OpenAPISchema` asks for.
const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// Whether an `Accept` header picks `/openapi/v2`'s protobuf form (`Some(true)`), its JSON
/// (`Some(false)`) or neither. As goautoneg orders them: by quality, then the more specific
/// clause first; a clause of quality 0 accepts nothing.
fn openapi_v2_wants_protobuf(accept: &str) -> Option<bool> {
    let mut clauses: Vec<(f32, u8, &str, &str)> = accept
        .split(',')
        .filter_map(|clause| {
            let mut parts = clause.split(';').map(str::trim);
            let (ty, sub) = parts.next()?.split_once('/')?;
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim() == "q")
                .and_then(|(_, v)| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let wildcards = u8::from(ty == "*") + u8::from(sub == "*");
            Some((q, wildcards, ty, sub))
        })
        .filter(|(q, ..)| *q > 0.0)
        .collect();
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let (pb_type, pb_sub) = OPENAPI_V2_PROTOBUF.split_once('/')?;
    clauses.iter().find_map(|(_, _, ty, sub)| {
        let type_ok = |want: &str| *ty == want || *ty == "*";
        if type_ok("application") && (*sub == "json" || *sub == "*") {
            Some(false)
        } else if type_ok(pb_type) && *sub == pb_sub {
            Some(true)
        } else {
            None
        }
    })
}

async fn openapi_index(State(s): State<ApiServer>) -> Response {
    json_response(StatusCode::OK, openapi::index(s.registry()).to_string())
}

async fn openapi_doc(State(s): State<ApiServer>, Path(path): Path<String>) -> Response {
    match openapi::group_version_bytes(s.registry(), &path) {
        Some(doc) => json_response(StatusCode::OK, doc),
        None => ApiError::no_route(&format!("/openapi/v3/{path}")).into_response(),
    }
}

async fn metrics(State(s): State<ApiServer>) -> Response {
    let counts = s.cache.counts();
    let counts: Vec<(&str, usize)> = counts.iter().map(|(p, n)| (p.as_str(), *n)).collect();
    let text = s.metrics.render(s.store.revision(), &counts);
    let mut r = (StatusCode::OK, text).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

/// Every resource request: decides the verb and calls it.
async fn dispatch(State(s): State<ApiServer>, req: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let Some(target) = request::parse_path(s.registry(), parts.uri.path()) else {
        return ApiError::no_route(parts.uri.path()).into_response();
    };
    let params = match Params::parse(parts.uri.query()) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let verb = verb_of(&parts.method, &target, &params);
    let resource = match target.sub {
        Some(sub) => format!("{}/{}", target.def.plural, sub.name()),
        None => target.def.plural.to_string(),
    };
    let body = match request::read_body(body, MAX_BODY, s.in_flight.request_timeout).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    // Identity fails closed: a request no layer authenticated never reaches the registry.
    let Some(user) = parts.extensions.get::<Identity>().map(|i| i.user.clone()) else {
        tracing::error!(path = %parts.uri.path(), "a request reached the registry without a user");
        return ApiError::internal("the request has no authenticated user").into_response();
    };
    let result = crate::context::scope(
        user,
        s.handle(&parts.method, &parts.headers, &target, &params, &body),
    )
    .await;
    let response = result.unwrap_or_else(|e| e.into_response());
    s.metrics.observe(
        verb,
        &resource,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    if response.status().is_server_error() {
        tracing::warn!(method = %parts.method, path = %parts.uri.path(), code = response.status().as_u16(), "request failed");
    }
    response
}

fn verb_of(method: &Method, t: &Target, p: &Params) -> &'static str {
    match *method {
        Method::GET if p.is_watch() => "watch",
        Method::GET if t.name.is_some() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if t.name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

impl ApiServer {
    async fn handle(
        &self,
        method: &Method,
        headers: &HeaderMap,
        t: &Target,
        p: &Params,
        body: &Bytes,
    ) -> ApiResult<Response> {
        let out: Output = request::negotiate(headers, p.include_object.as_deref())?;
        let named = t.name.is_some();
        if t.def.computed {
            return Ok(self.component_statuses(method, t, p, out));
        }
        if !t.def.is_stored() {
            return self.review(method, t, headers, body).await;
        }
        match (method.clone(), t.sub) {
            (Method::GET, _) if p.is_watch() => self.watch(t, p, out).await,
            (
                Method::GET,
                None
                | Some(
                    Subresource::Status | Subresource::Approval | Subresource::EphemeralContainers,
                ),
            ) if named => self.get(t, p, out).await,
            (Method::GET, None) => self.list(t, p, out).await,
            (Method::GET, Some(Subresource::Scale)) => self.get_scale(t).await,
            (Method::GET, Some(Subresource::Log)) => self.pod_log(t, p).await,
            (Method::GET | Method::POST, Some(Subresource::Exec)) => self.pod_exec(t, p).await,
            (Method::POST, None) if !named => self.create(t, p, headers, body, out).await,
            (Method::POST, Some(Subresource::Binding)) => self.bind(t, p, headers, body).await,
            (Method::POST, Some(Subresource::Eviction)) => self.evict(t, p, headers, body).await,
            (Method::POST, Some(Subresource::Token)) => self.request_token(t, headers, body).await,
            (Method::PUT, None) if named => self.update(t, p, headers, body, Part::Main, out).await,
            (Method::PUT, Some(Subresource::Status | Subresource::Approval)) => {
                self.update(t, p, headers, body, Part::Status, out).await
            }
            (Method::PUT, Some(Subresource::Finalize)) => {
                self.update(t, p, headers, body, Part::Finalize, out).await
            }
            (Method::PUT, Some(Subresource::EphemeralContainers)) => {
                let part = Part::EphemeralContainers;
                self.update(t, p, headers, body, part, out).await
            }
            (Method::PUT, Some(Subresource::Scale)) => {
                self.write_scale(t, p, headers, body, false).await
            }
            (Method::PATCH, None) if named => {
                self.patch(t, p, headers, body, Part::Main, out).await
            }
            (Method::PATCH, Some(Subresource::Status | Subresource::Approval)) => {
                self.patch(t, p, headers, body, Part::Status, out).await
            }
            (Method::PATCH, Some(Subresource::EphemeralContainers)) => {
                let part = Part::EphemeralContainers;
                self.patch(t, p, headers, body, part, out).await
            }
            (Method::PATCH, Some(Subresource::Scale)) => {
                self.write_scale(t, p, headers, body, true).await
            }
            (Method::DELETE, None) if named => self.delete(t, p, headers, body, out).await,
            (Method::DELETE, None) => self.delete_collection(t, p, headers, body, out).await,
            (m, sub) => Err(ApiError::method_not_allowed(format!(
                "{m} is not supported on {}{}",
                t.def.plural,
                sub.map(|s| format!("/{}", s.name())).unwrap_or_default()
            ))),
        }
    }
}
