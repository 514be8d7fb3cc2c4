//! Serving over TLS: the accept loop, each connection's handshake within its timeout, then
//! HTTP/2 or HTTP/1.1 as ALPN chose, within the connection limits ([`ConnectionLimits`]).

use crate::{
    connection::ConnectionLimits,
    connection::{Activity, drive},
    filters::authentication,
};
use axum::{Router, body::Body, extract::Request};
use std::{sync::Arc, time::Duration};

/// The most header bytes a request may carry: upstream sets Go's `MaxHeaderBytes` to 1 MiB (for
/// HTTP/2 Go derives its `SETTINGS_MAX_HEADER_LIST_SIZE` from the same value), so a long label
/// selector that upstream takes is taken here too.
const MAX_HEADER_BYTES: usize = 1 << 20;

/// What Go's HTTP/1 server reads past `MaxHeaderBytes` before it answers 431 (its
/// `initialReadLimitSize` slack for the request line and framing).
const HEADER_SLACK: usize = 4096;

/// Serves `router` over TLS on `listener` until `shutdown` resolves, with the default
/// [`ConnectionLimits`].
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Arc<rustls::ServerConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) {
    serve_tls_with(listener, router, tls, ConnectionLimits::default(), shutdown).await;
}

/// Serves `router` over TLS on `listener` until `shutdown` resolves, within `limits`.
pub async fn serve_tls_with(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Arc<rustls::ServerConfig>,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let limits = Arc::new(limits);
    let live = Live::default();
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        // A full server asks one idle anonymous connection to make room, then waits for a slot;
        // no further connection is accepted meanwhile (the kernel's backlog holds them).
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                live.make_room();
                tokio::select! {
                    _ = &mut shutdown => break,
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        let limits = limits.clone();
        let activity = Activity::new();
        let registered = live.register(activity.clone());
        connections.spawn(async move {
            let _slot = slot;
            let _registered = registered;
            serve_connection(tcp, peer, acceptor, router, &limits, activity).await;
        });
        // Reap what finished meanwhile.
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}

/// The connections being served, for finding one that may make room.
#[derive(Clone, Default)]
struct Live(Arc<std::sync::Mutex<LiveSet>>);

#[derive(Default)]
struct LiveSet {
    next: u64,
    connections: std::collections::HashMap<u64, Activity>,
}

impl Live {
    /// Adds a connection; it is removed when the returned guard drops.
    fn register(&self, activity: Activity) -> Registered {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let id = set.next;
        set.next += 1;
        set.connections.insert(id, activity);
        Registered(self.clone(), id)
    }

    /// Asks one idle connection that never authenticated to close, if there is one.
    fn make_room(&self) {
        let set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = set.connections.values().find(|a| a.yields()) {
            a.make_room();
        }
    }
}

/// A connection's place in [`Live`].
struct Registered(Live, u64);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut set = (self.0).0.lock().unwrap_or_else(|e| e.into_inner());
        set.connections.remove(&self.1);
    }
}

/// One connection: the TLS handshake within its timeout, then HTTP/2 or HTTP/1.1 as ALPN chose.
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
    limits: &ConnectionLimits,
    activity: Activity,
) {
    let tls = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    // rustls verified the chain against the cluster CA; the leaf names the user.
    let certificate = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| authentication::certificate_user(leaf))
        .map(|user| authentication::ClientCertificate(Arc::new(user)));
    let requests = activity.clone();
    let identified = activity.identified();
    let service = hyper_util::service::TowerToHyperService::new(tower::service_fn(
        move |r: Request<hyper::body::Incoming>| {
            let router = router.clone();
            let open = requests.begin();
            let mut r = r.map(Body::new);
            // The peer's address, for the audit log's `sourceIPs`.
            r.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            if let Some(c) = &certificate {
                r.extensions_mut().insert(c.clone());
            }
            r.extensions_mut().insert(identified.clone());
            async move {
                let response = router.oneshot(r).await?;
                Ok::<_, std::convert::Infallible>(response.map(|body| open.until_sent(body)))
            }
        },
    ));
    let io = hyper_util::rt::TokioIo::new(tls);
    let timer = hyper_util::rt::TokioTimer::new();
    if h2 {
        let mut builder =
            hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
        builder
            .timer(timer)
            .max_concurrent_streams(limits.max_streams_per_connection)
            .max_header_list_size(
                u32::try_from(MAX_HEADER_BYTES + HEADER_SLACK).unwrap_or(u32::MAX),
            )
            // Pings find peers that vanished without closing (upstream pings too).
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(20));
        let connection = builder.serve_connection(io, service);
        drive(
            connection,
            |c| c.graceful_shutdown(),
            &activity,
            peer,
            limits,
        )
        .await;
    } else {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(timer)
            .header_read_timeout(limits.header_read_timeout)
            .max_header_size(MAX_HEADER_BYTES + HEADER_SLACK)
            // The read buffer must hold the largest header block taken.
            .max_buf_size(MAX_HEADER_BYTES + 2 * HEADER_SLACK);
        let connection = builder.serve_connection(io, service).with_upgrades();
        drive(
            connection,
            |c| c.graceful_shutdown(),
            &activity,
            peer,
            limits,
        )
        .await;
    }
}

use tower::ServiceExt as _;
