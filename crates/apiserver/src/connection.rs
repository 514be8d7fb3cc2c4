//! A connection's requests in progress, and closing it once it sits idle: upstream's Go server
//! closes a keep-alive connection (HTTP/1.1) or an HTTP/2 connection with no open streams after
//! its `IdleTimeout` (90 s in kube-apiserver's `secure_serving.go`). hyper's HTTP/2 server has no
//! idle timer, and its keep-alive pings would hold an idle connection forever, so the requests are
//! counted here (hand-written: neither hyper nor tower offers this).

/// How the server treats connections, so that clients that connect and then dawdle (a
/// slowloris) cannot hold it: Go's `http.Server` bounds the same things for upstream.
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Connections served at once. When all are taken, a new connection takes the slot of an
    /// idle one that never carried an authenticated request, so that anonymous keep-alive
    /// clients cannot keep users out; with none such, it waits until one closes. (Upstream's Go
    /// server has no cap, only the file descriptor limit.)
    pub max_connections: usize,
    /// A TLS handshake must finish within this.
    pub handshake_timeout: Duration,
    /// The headers of a request, and a connection's first request, must arrive within this
    /// (upstream's `ReadHeaderTimeout` is 32 s).
    pub header_read_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once (upstream's
    /// `--http2-max-streams-per-connection`, 1000 in kube-apiserver).
    pub max_streams_per_connection: u32,
    /// A connection with no request in progress (no open stream, no unfinished response) for this
    /// long is closed (upstream's `IdleTimeout`, 90 s, for HTTP/1.1 keep-alive and HTTP/2 alike).
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            max_streams_per_connection: 1000,
            idle_timeout: Duration::from_secs(90),
        }
    }
}
use axum::body::Body;
use bytes::Bytes;
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

/// Serves one HTTP connection until it ends, closing it (gracefully: HTTP/2 says GOAWAY) when it
/// never starts a request, when it sits idle past the idle limit, or when the server, full, asks
/// an idle anonymous connection to make room ([`Activity::make_room`]).
pub(crate) async fn drive<C>(
    connection: C,
    shutdown: fn(std::pin::Pin<&mut C>),
    activity: &Activity,
    peer: std::net::SocketAddr,
    limits: &ConnectionLimits,
) where
    C: std::future::Future<Output = Result<(), hyper::Error>>,
{
    tokio::pin!(connection);
    // HTTP/1.1's header timeout covers a request that trickles in; this covers a connection that
    // never starts one (an HTTP/2 client that never sends its preface, say).
    let idle_start = async {
        tokio::time::sleep(limits.header_read_timeout).await;
        if activity.started() {
            std::future::pending::<()>().await;
        }
    };
    let result = tokio::select! {
        result = &mut connection => result,
        _ = idle_start => {
            tracing::debug!(%peer, "no request in time; connection closed");
            return;
        }
        _ = activity.yield_slot.notified() => {
            tracing::debug!(%peer, "idle anonymous connection closed to make room for another");
            if !activity.started() {
                // Nothing was ever asked on it: closed at once, as the header timeout would.
                // (hyper's graceful shutdown of an HTTP/1.1 connection still waiting for its
                // first request waits for that request, which a dawdler never sends.)
                return;
            }
            shutdown(connection.as_mut());
            connection.await
        }
        _ = activity.idle_for(limits.idle_timeout) => {
            tracing::debug!(%peer, "connection idle; closing it");
            shutdown(connection.as_mut());
            // With nothing in progress the close is immediate; a request that raced in is
            // finished first.
            connection.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// The requests in progress on one connection, and whether it may make room for another.
#[derive(Clone)]
pub(crate) struct Activity {
    open: tokio::sync::watch::Sender<usize>,
    started: Arc<AtomicBool>,
    identified: Identified,
    yield_slot: Arc<tokio::sync::Notify>,
}

/// Set on a connection once one of its requests authenticated as someone (not
/// `system:anonymous`): such a connection keeps its slot when the server is full.
#[derive(Clone, Default)]
pub(crate) struct Identified(Arc<AtomicBool>);

impl Identified {
    /// The connection carried a request of an authenticated user.
    pub(crate) fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self {
            open: tokio::sync::watch::Sender::new(0),
            started: Arc::new(AtomicBool::new(false)),
            identified: Identified::default(),
            yield_slot: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// What the authentication layer marks when a request of this connection names a user.
    pub(crate) fn identified(&self) -> Identified {
        self.identified.clone()
    }

    /// Whether this connection may be closed to make room for a new one: no request in
    /// progress, and none of its requests ever authenticated as anyone.
    pub(crate) fn yields(&self) -> bool {
        *self.open.borrow() == 0 && !self.identified.0.load(Ordering::Relaxed)
    }

    /// Asks the connection to close as it would when idle (gracefully: HTTP/2 says GOAWAY).
    pub(crate) fn make_room(&self) {
        self.yield_slot.notify_one();
    }

    /// A request begins; it ends when the returned guard is dropped.
    pub(crate) fn begin(&self) -> Open {
        self.started.store(true, Ordering::Relaxed);
        self.open.send_modify(|n| *n += 1);
        Open(self.open.clone())
    }

    fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Resolves once no request has been in progress for `limit`.
    async fn idle_for(&self, limit: Duration) {
        // `self` holds a sender, so the waits below never fail.
        let mut open = self.open.subscribe();
        loop {
            let _ = open.wait_for(|n| *n == 0).await.is_ok();
            tokio::select! {
                _ = tokio::time::sleep(limit) => return,
                _ = async { open.wait_for(|n| *n > 0).await.is_ok() } => {}
            }
        }
    }
}

/// One request in progress.
pub(crate) struct Open(tokio::sync::watch::Sender<usize>);

impl Open {
    /// The response body of this request: the request is in progress until the body is sent or
    /// dropped, so a watch keeps its connection busy for as long as it streams.
    pub(crate) fn until_sent(self, body: Body) -> Body {
        Body::new(Busy { body, _open: self })
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A response body whose request is in progress until the body is finished or dropped.
struct Busy {
    body: Body,
    _open: Open,
}

impl hyper::body::Body for Busy {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
