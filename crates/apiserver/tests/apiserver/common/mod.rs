//! A server over a store a test can break, and plain HTTP against its in-process router.

#![allow(dead_code, clippy::unwrap_used, reason = "a test fails by panicking")]

use apiserver::{ApiServer, ServerOptions};
use axum::{
    Router,
    body::Body,
    http::{Method, Request, StatusCode},
};
use futures::StreamExt;
use serde_json::Value;
use std::{sync::Arc, time::Duration};
use store::{Store, faulty::FaultyStore, memory::MemoryStore};
use tower::ServiceExt;

/// How long a test waits for something that should happen promptly.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// An API server over a memory store wrapped in a [`FaultyStore`].
pub struct Server {
    pub server: ApiServer,
    pub store: Arc<FaultyStore>,
    pub router: Router,
}

impl Server {
    pub async fn start() -> Server {
        Self::start_with(ServerOptions::default()).await
    }

    pub async fn start_with(mut opts: ServerOptions) -> Server {
        opts.token.get_or_insert_with(|| ADMIN_TOKEN.to_string());
        let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
        let server = ApiServer::start(store.clone() as Arc<dyn Store>, opts)
            .await
            .unwrap();
        let router = server.in_process_router();
        Server {
            server,
            store,
            router,
        }
    }

    /// The server's whole request pipeline ([`ApiServer::router`]), every request made with the
    /// bootstrap admin's token unless it brings credentials of its own.
    pub fn admin_router(&self) -> axum::Router {
        as_admin(self.server.router())
    }

    /// One request; the status and the body as JSON (`Null` when it is not JSON).
    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        call(&self.router, method, uri, body).await
    }

    /// Opens a watch (or any streaming GET) and returns its lines.
    pub async fn stream(&self, uri: &str) -> Lines {
        stream(&self.router, uri).await
    }
}

/// One request against `router`; the status and the body as JSON (`Null` when it is not JSON).
pub async fn call(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (status, bytes) = call_raw(router, method, uri, body).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// One request against `router`; the status and the body's bytes.
pub async fn call_raw(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, bytes::Bytes) {
    send(router, method, uri, "application/json", body).await
}

/// One request with a body of `content_type` against `router`; the status and the body's bytes.
async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Option<Value>,
) -> (StatusCode, bytes::Bytes) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(body.map_or(Body::empty(), |b| Body::from(b.to_string())))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, bytes)
}

/// A PATCH of `body` as `content_type` (`application/strategic-merge-patch+json`, ...) against
/// `router`; the status and the body as JSON.
pub async fn patch(
    router: &Router,
    uri: &str,
    content_type: &str,
    body: Value,
) -> (StatusCode, Value) {
    let (status, bytes) = send(router, Method::PATCH, uri, content_type, Some(body)).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// One request against `router`; the status with the `Retry-After` header, and the body as JSON.
pub async fn call_full(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> ((StatusCode, Option<String>), Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body.map_or(Body::empty(), |b| Body::from(b.to_string())))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        (status, retry_after),
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Opens a streaming GET on `router` and returns its lines.
pub async fn stream(router: &Router, uri: &str) -> Lines {
    let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "{uri}");
    Lines {
        body: resp.into_body().into_data_stream().boxed(),
        buf: Vec::new(),
    }
}

/// The lines of a streaming response (watch events), parsed as JSON.
pub struct Lines {
    body: futures::stream::BoxStream<'static, Result<bytes::Bytes, axum::Error>>,
    buf: Vec<u8>,
}

impl Lines {
    /// The next line, or `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(at) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=at).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// The next line within the test's deadline; `None` if the stream ends or nothing comes.
    pub async fn next_within(&mut self, deadline: Duration) -> Option<Value> {
        tokio::time::timeout(deadline, self.next())
            .await
            .ok()
            .flatten()
    }
}

/// A minimal Pod.
pub fn pod(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    })
}

/// The bootstrap admin token of servers the tests start.
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// `router`, with the admin token added to requests that carry no `Authorization` header.
pub fn as_admin(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::map_request(
        |mut req: axum::extract::Request| async move {
            if !req
                .headers()
                .contains_key(axum::http::header::AUTHORIZATION)
            {
                req.headers_mut().insert(
                    axum::http::header::AUTHORIZATION,
                    axum::http::HeaderValue::from_static("Bearer test-admin-token"),
                );
            }
            req
        },
    ))
}
