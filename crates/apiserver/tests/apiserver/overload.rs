//! Load the server cannot take is turned away early, and not the administrator's: its writes are
//! exempt from priority and fairness (tests/apiserver/flowcontrol.rs has the levels and queues),
//! and a client that dawdles over its connection (a slowloris) is cut off without keeping others
//! out.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use apiserver::{ConnectionLimits, ServerOptions, inflight::InFlightLimits, tls::Credentials};
use axum::{
    body::Body,
    http::{self, Method, StatusCode},
};
use common::{DEADLINE, Server, pod};
use futures::StreamExt;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use std::{sync::Arc, time::Duration};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tower::ServiceExt;

/// Issue 36: 500 concurrent administrator creates got 64-263 429s from the mutating in-flight
/// limit. `system:masters` is exempt from priority and fairness, as upstream's `exempt`
/// FlowSchema makes it: however many of its writes wait on the store, none is refused.
#[tokio::test]
async fn administrator_writes_past_the_server_seats_are_not_refused() {
    let s = Server::start_with(ServerOptions {
        in_flight: InFlightLimits {
            read_only: 1,
            mutating: 1,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let limited = s.admin_router();
    s.store.hold_writes(true);
    const WRITES: usize = 50;
    let writes: Vec<_> = (0..WRITES)
        .map(|i| {
            let router = limited.clone();
            tokio::spawn(async move {
                common::call_full(
                    &router,
                    Method::POST,
                    "/api/v1/namespaces/default/pods",
                    Some(pod(&format!("p{i}"))),
                )
                .await
            })
        })
        .collect();
    // Every write is in the store's hands at once: none waited for a seat, none was refused.
    tokio::time::timeout(DEADLINE, s.store.until_writes_waiting(WRITES))
        .await
        .expect("every administrator write reaches the store at once");
    let (code, _) = common::call(
        &limited,
        Method::GET,
        "/api/v1/namespaces/default/pods",
        None,
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    s.store.hold_writes(false);
    for w in writes {
        let ((code, _), status) = w.await.unwrap();
        assert_eq!(code, StatusCode::CREATED, "{status}");
    }
}

/// A server on a free loopback port with small connection limits; its CA and address.
async fn serve(
    limits: ConnectionLimits,
) -> (
    rustls::RootCertStore,
    std::net::SocketAddr,
    tempfile::TempDir,
) {
    let (roots, addr, dir, _) = serve_with(limits).await;
    (roots, addr, dir)
}

/// [`serve`], and the server for in-process calls.
async fn serve_with(
    limits: ConnectionLimits,
) -> (
    rustls::RootCertStore,
    std::net::SocketAddr,
    tempfile::TempDir,
    Server,
) {
    let dir = tempfile::tempdir().unwrap();
    let creds = Credentials::load_or_create(dir.path()).unwrap();
    let s = Server::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(apiserver::serve_tls_with(
        listener,
        s.admin_router(),
        creds.server_config().unwrap(),
        limits,
        std::future::pending(),
    ));
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(creds.ca_pem.as_bytes()).unwrap())
        .unwrap();
    (roots, addr, dir, s)
}

async fn tls(
    roots: &rustls::RootCertStore,
    addr: std::net::SocketAddr,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots.clone())
    .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Reads until the peer closes (or errors); fails the test if that takes past the deadline.
async fn closed_by_server(mut conn: impl AsyncReadExt + Unpin, what: &str) {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(DEADLINE, async {
        while let Ok(n) = conn.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the server kept a {what} open"));
}

#[tokio::test]
async fn a_slowloris_is_cut_off_and_does_not_keep_a_client_out() {
    let limits = ConnectionLimits {
        max_connections: 6,
        handshake_timeout: Duration::from_secs(1),
        header_read_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let (roots, addr, _dir) = serve(limits).await;
    let mut dawdlers = tokio::task::JoinSet::new();
    // Two connect and never say hello; two finish TLS and never send a request (one of them
    // asked for HTTP/2); two send headers one line at a time, each a bit later.
    for _ in 0..2 {
        let tcp = TcpStream::connect(addr).await.unwrap();
        dawdlers.spawn(closed_by_server(tcp, "silent TCP connection"));
    }
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let conn = tls(&roots, addr, alpn).await;
        dawdlers.spawn(closed_by_server(conn, "silent TLS connection"));
    }
    for _ in 0..2 {
        let mut conn = tls(&roots, addr, b"http/1.1").await;
        dawdlers.spawn(async move {
            conn.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\n")
                .await
                .unwrap();
            let trickle = async {
                for i in 0..100 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if conn
                        .write_all(format!("X-Slow-{i}: a\r\n").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            };
            tokio::time::timeout(DEADLINE, trickle)
                .await
                .expect("the server stopped a request whose headers trickle in");
        });
    }
    // Every slot is taken by a dawdler now; a normal client still gets its answer.
    let mut client = tokio::time::timeout(DEADLINE, tls(&roots, addr, b"http/1.1"))
        .await
        .expect("a normal client connects");
    client
        .write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(DEADLINE, client.read_to_end(&mut answer))
        .await
        .expect("a normal client is answered")
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    while let Some(done) = dawdlers.join_next().await {
        done.unwrap();
    }
}

/// An HTTP/2 client connection (as kubectl's); the task that drives it ends when the server closes it.
async fn h2_client(
    roots: &rustls::RootCertStore,
    addr: std::net::SocketAddr,
) -> (
    hyper::client::conn::http2::SendRequest<Body>,
    tokio::task::JoinHandle<()>,
) {
    let conn = tls(roots, addr, b"h2").await;
    let (sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(conn),
    )
    .await
    .unwrap();
    (
        sender,
        tokio::spawn(async move { connection.await.unwrap() }),
    )
}

/// An HTTP/1.1 keep-alive client connection; the task that drives it ends when the server closes it.
async fn h1_client(
    roots: &rustls::RootCertStore,
    addr: std::net::SocketAddr,
) -> (
    hyper::client::conn::http1::SendRequest<Body>,
    tokio::task::JoinHandle<()>,
) {
    let conn = tls(roots, addr, b"http/1.1").await;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(conn))
            .await
            .unwrap();
    (
        sender,
        tokio::spawn(async move { connection.await.unwrap() }),
    )
}

fn get(uri: &str) -> http::Request<Body> {
    http::Request::get(format!("https://localhost{uri}"))
        .header("host", "localhost")
        .body(Body::empty())
        .unwrap()
}

async fn body_of(resp: http::Response<hyper::body::Incoming>) -> serde_json::Value {
    let bytes = axum::body::to_bytes(Body::new(resp.into_body()), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Waits for a connection's driver to end: the server closed the connection.
async fn closed(task: tokio::task::JoinHandle<()>, what: &str) {
    tokio::time::timeout(DEADLINE, task)
        .await
        .unwrap_or_else(|_| panic!("the server kept an idle {what} connection open"))
        .unwrap();
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_but_one_with_an_open_watch_is_not() {
    let limits = ConnectionLimits {
        idle_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let (roots, addr, _dir, s) = serve_with(limits).await;

    let (mut watcher, watching) = h2_client(&roots, addr).await;
    let watch = watcher
        .send_request(get("/api/v1/namespaces/default/pods?watch=1"))
        .await
        .unwrap();
    assert_eq!(watch.status(), StatusCode::OK);
    let mut events = Body::new(watch.into_body()).into_data_stream();

    // One request, answered in full: then the connection is idle, and is closed.
    let (mut client, driving) = h2_client(&roots, addr).await;
    let resp = client.send_request(get("/version")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    body_of(resp).await;
    closed(driving, "HTTP/2").await;

    // The watch, open all the while, still streams.
    assert!(!watching.is_finished(), "the watch's connection was closed");
    let (code, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("seen")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let mut seen = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(chunk) = events.next().await {
            seen.extend_from_slice(&chunk.unwrap());
            if String::from_utf8_lossy(&seen).contains("\"name\":\"seen\"") {
                return;
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("the open watch delivers the new pod");
}

#[tokio::test]
async fn an_idle_http1_keep_alive_connection_is_closed() {
    let limits = ConnectionLimits {
        idle_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let (roots, addr, _dir) = serve(limits).await;
    let (mut client, driving) = h1_client(&roots, addr).await;
    let resp = client.send_request(get("/version")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    body_of(resp).await;
    closed(driving, "HTTP/1.1").await;
}

/// kubectl sends a label selector in the URL, which HTTP/2 carries in a header; upstream takes up
/// to 1 MiB of headers (Go's `MaxHeaderBytes`). A URL is at most 64 KiB here (the `http` crate's
/// limit), so the selector is 60 KiB and another header makes up the 100 KiB.
#[tokio::test]
async fn a_long_label_selector_and_100_kib_of_headers_are_taken_over_http2_and_http1() {
    let (roots, addr, _dir, s) = serve_with(ConnectionLimits::default()).await;
    let (code, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("kept")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let mut values = Vec::new();
    let mut len = 0;
    for i in 0.. {
        let v = format!("value-{i:06}");
        len += v.len() + 1;
        values.push(v);
        if len > 60 * 1024 {
            break;
        }
    }
    let uri = format!(
        "/api/v1/namespaces/default/pods?labelSelector=app%20notin%20({})",
        values.join(",")
    );
    let request = || {
        let mut req = get(&uri);
        req.headers_mut().insert(
            "x-long",
            http::HeaderValue::from_str(&"a".repeat(40 * 1024)).unwrap(),
        );
        req
    };
    assert!(uri.len() + 40 * 1024 > 100 * 1024);

    let (mut h2, _driving) = h2_client(&roots, addr).await;
    let resp = h2.send_request(request()).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "HTTP/2");
    assert_eq!(body_of(resp).await["items"][0]["metadata"]["name"], "kept");

    let (mut h1, _driving) = h1_client(&roots, addr).await;
    let resp = h1.send_request(request()).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "HTTP/1.1");
    assert_eq!(body_of(resp).await["items"][0]["metadata"]["name"], "kept");
}

/// A write whose body trickles in is cut off at the request timeout with upstream's 504 Status,
/// and its mutating slot is free again.
#[tokio::test]
async fn a_body_that_never_finishes_gets_504_and_frees_its_slot() {
    let s = Server::start_with(ServerOptions {
        in_flight: InFlightLimits {
            mutating: 1,
            request_timeout: Duration::from_millis(300),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let limited = s.admin_router();
    let first: Result<bytes::Bytes, std::io::Error> =
        Ok(bytes::Bytes::from_static(b"{\"apiVersion\": \"v1\","));
    let trickle = futures::stream::iter([first]).chain(futures::stream::pending());
    let req = http::Request::post("/api/v1/namespaces/default/pods")
        .header("content-type", "application/json")
        .body(Body::from_stream(trickle))
        .unwrap();
    let resp = tokio::time::timeout(DEADLINE, limited.clone().oneshot(req))
        .await
        .expect("a request whose body never ends is answered")
        .unwrap();
    assert_eq!(resp.status(), StatusCode::GATEWAY_TIMEOUT);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        status,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Timeout: request did not complete within the allotted timeout",
            "reason": "Timeout", "details": {}, "code": 504,
        })
    );

    let (code, body) = common::call(
        &limited,
        Method::POST,
        "/api/v1/namespaces/default/pods",
        Some(pod("after")),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

/// 4,096 anonymous keep-alive clients filled every slot and kept an administrator out (issue 36):
/// now a full server closes an idle connection that never authenticated to make room, so a user
/// gets in without waiting for the idle timeout.
#[tokio::test]
async fn idle_anonymous_connections_make_room_for_a_user() {
    let limits = ConnectionLimits {
        max_connections: 4,
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let creds = Credentials::load_or_create(dir.path()).unwrap();
    let s = Server::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // The whole chain, no credentials added: the anonymous clients stay anonymous.
    tokio::spawn(apiserver::serve_tls_with(
        listener,
        s.server.router(),
        creds.server_config().unwrap(),
        limits,
        std::future::pending(),
    ));
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(creds.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let mut anonymous = Vec::new();
    for _ in 0..4 {
        let (mut sender, driver) = h1_client(&roots, addr).await;
        let resp = sender.send_request(get("/healthz")).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let _ = axum::body::to_bytes(Body::new(resp.into_body()), usize::MAX).await;
        anonymous.push((sender, driver));
    }
    // Every slot is held by an idle anonymous keep-alive connection (idle timeout: 90 s).
    let admin = async {
        let (mut sender, _driver) = h1_client(&roots, addr).await;
        let mut req = get("/api/v1/namespaces");
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", crate::common::ADMIN_TOKEN)
                .parse()
                .unwrap(),
        );
        sender.send_request(req).await.unwrap()
    };
    let resp = tokio::time::timeout(DEADLINE, admin)
        .await
        .expect("the administrator is served while anonymous clients hold every slot");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(body_of(resp).await["kind"], "NamespaceList");
    // One anonymous connection was closed for it.
    let drivers = anonymous.into_iter().map(|(_, d)| d);
    let (first, _, _) = futures::future::select_all(drivers).await;
    first.unwrap();
}
