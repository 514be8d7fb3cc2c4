//! Load the server cannot take is turned away early: past its in-flight limits a request gets 429
//! with `Retry-After` and a Status (as upstream's max-in-flight filter answers), reads and writes
//! have separate limits, and a client that dawdles over its connection (a slowloris) is cut off
//! without keeping others out.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use apiserver::{ConnectionLimits, ServerOptions, inflight::InFlightLimits, tls::Credentials};
use axum::http::{Method, StatusCode};
use common::{DEADLINE, Server, pod};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use std::{sync::Arc, time::Duration};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

#[tokio::test]
async fn past_the_in_flight_limit_writes_get_429_with_retry_after() {
    let s = Server::start_with(ServerOptions {
        in_flight: InFlightLimits {
            mutating: 2,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let limited = s.server.router();
    s.store.hold_writes(true);
    let writes: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let router = limited.clone();
            tokio::spawn(async move {
                common::call(
                    &router,
                    Method::POST,
                    "/api/v1/namespaces/default/pods",
                    Some(pod(name)),
                )
                .await
            })
        })
        .collect();
    s.store.until_writes_waiting(2).await;

    let (code, status) = tokio::time::timeout(
        DEADLINE,
        common::call_full(
            &limited,
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("c")),
        ),
    )
    .await
    .expect("a request past the limit is answered at once, not queued");
    assert_eq!(code.0, StatusCode::TOO_MANY_REQUESTS, "{status}");
    assert_eq!(code.1.as_deref(), Some("1"), "Retry-After");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["retryAfterSeconds"], 1);

    // Reads have their own limit: they still work.
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
        assert_eq!(w.await.unwrap().0, StatusCode::CREATED);
    }
    // The slots are free again.
    let (code, _) = common::call(
        &limited,
        Method::POST,
        "/api/v1/namespaces/default/pods",
        Some(pod("c")),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
}

/// A server on a free loopback port with small connection limits; its CA and address.
async fn serve(
    limits: ConnectionLimits,
) -> (
    rustls::RootCertStore,
    std::net::SocketAddr,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let creds = Credentials::load_or_create(dir.path()).unwrap();
    let s = Server::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
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
    (roots, addr, dir)
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
