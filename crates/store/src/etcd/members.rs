//! The etcd members one store talks to, and the failover between them.
//!
//! etcd's Go client keeps talking to one member while it works and moves to the next when it
//! fails, retrying a request that never reached a member. The Rust client balances over all
//! endpoints instead and fails a request routed to a member that is down, so the store keeps one
//! client per member and does the failover itself, as clientv3 does.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use etcd_client::{Client, ConnectOptions, KvClient, LeaseClient, WatchClient};
use tokio::time::Instant;

use super::EtcdOptions;
use crate::{Result, StoreError};

/// The largest response this client decodes (a page of large objects, or a watch response that
/// carries many events).
const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// Which failed requests may be sent again to another member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Retry {
    /// Reads: any failure to get an answer.
    Any,
    /// Writes: only when the request cannot have been applied (the member was unreachable or had
    /// no leader). A write that timed out or lost its connection midway may have happened, and a
    /// second attempt could then fail against the first (a create meeting itself).
    Unsent,
}

/// Why a request failed, before it becomes a [`StoreError`].
#[derive(Debug)]
pub(super) enum Failure {
    /// etcd (or the connection to it) answered with an error.
    Etcd(etcd_client::Error),
    /// No answer within the request timeout.
    TimedOut(&'static str, Duration),
}

impl From<Failure> for StoreError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::TimedOut(what, after) => super::timed_out(what, after),
            Failure::Etcd(e) if unavailable(&e) => StoreError::Unavailable(message(&e)),
            Failure::Etcd(e) => StoreError::Backend(message(&e)),
        }
    }
}

/// The clients of one member.
struct Member {
    kv: KvClient,
    watch: WatchClient,
    lease: LeaseClient,
}

/// One client per member, and the member in use.
pub(super) struct Members {
    clients: Vec<Member>,
    preferred: AtomicUsize,
}

impl Members {
    /// Prepares a client for each endpoint; connections are made on first use.
    pub(super) async fn connect<E: AsRef<str>>(
        endpoints: &[E],
        opts: &EtcdOptions,
    ) -> Result<Self> {
        let mut clients = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let connect = ConnectOptions::new()
                .with_connect_timeout(opts.connect_timeout)
                .with_keep_alive(Duration::from_secs(5), opts.request_timeout)
                // A member cut off from the others fails at once instead of waiting out a timeout.
                .with_require_leader(true);
            let client = Client::connect([endpoint.as_ref()], Some(connect))
                .await
                .map_err(|e| {
                    StoreError::Backend(format!("etcd endpoint {}: {e}", endpoint.as_ref()))
                })?;
            clients.push(Member {
                kv: client.kv_client().max_decoding_message_size(MAX_MESSAGE),
                watch: client.watch_client().max_decoding_message_size(MAX_MESSAGE),
                lease: client.lease_client(),
            });
        }
        if clients.is_empty() {
            return Err(StoreError::Backend("no etcd endpoints given".into()));
        }
        Ok(Self {
            clients,
            preferred: AtomicUsize::new(0),
        })
    }

    /// Sends `request` to the member in use and, when `retry` allows, to the next ones in turn,
    /// all within `timeout`; the member that answered stays in use.
    pub(super) async fn call<T, F, Fut>(
        &self,
        what: &'static str,
        retry: Retry,
        timeout: Duration,
        request: F,
    ) -> Result<T, Failure>
    where
        F: Fn(KvClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call_on(|m| m.kv.clone(), what, retry, timeout, request)
            .await
    }

    /// [`Members::call`] on the lease service.
    pub(super) async fn call_lease<T, F, Fut>(
        &self,
        what: &'static str,
        timeout: Duration,
        request: F,
    ) -> Result<T, Failure>
    where
        F: Fn(LeaseClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        // A grant that timed out may have happened; the lease then expires unused.
        self.call_on(|m| m.lease.clone(), what, Retry::Any, timeout, request)
            .await
    }

    async fn call_on<C, T, F, Fut>(
        &self,
        client: impl Fn(&Member) -> C,
        what: &'static str,
        retry: Retry,
        timeout: Duration,
        request: F,
    ) -> Result<T, Failure>
    where
        F: Fn(C) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + timeout;
        let first = self.preferred.load(Ordering::Relaxed);
        let mut last = None;
        for attempt in 0..self.clients.len() {
            let i = (first + attempt) % self.clients.len();
            match tokio::time::timeout_at(deadline, request(client(&self.clients[i]))).await {
                Err(_) => {
                    // A member that does not answer in time (stalled, or still following a dead
                    // leader) is not asked first again: the next request starts elsewhere.
                    self.avoid(i);
                    return Err(Failure::TimedOut(what, timeout));
                }
                Ok(Ok(response)) => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(response);
                }
                Ok(Err(e)) if retriable(&e, retry) => last = Some(e),
                Ok(Err(e)) => {
                    // A write cut off midway cannot be sent again, but the connection that cut
                    // it off is not trusted with the next one either.
                    if unavailable(&e) {
                        self.avoid(i);
                    }
                    return Err(Failure::Etcd(e));
                }
            }
        }
        // Every member failed; start with the next one next time.
        self.failed();
        Err(last.map_or(Failure::TimedOut(what, timeout), Failure::Etcd))
    }

    /// A client for a watch, on the member in use.
    pub(super) fn watch_client(&self) -> WatchClient {
        self.clients[self.preferred.load(Ordering::Relaxed) % self.clients.len()]
            .watch
            .clone()
    }

    /// The member in use failed: use the next one.
    pub(super) fn failed(&self) {
        self.avoid(self.preferred.load(Ordering::Relaxed));
    }

    /// Member `i` failed: if it is still the one in use, use the next one (a request that
    /// succeeded elsewhere meanwhile has already moved on, and keeps its choice).
    fn avoid(&self, i: usize) {
        let next = (i + 1) % self.clients.len();
        let _ = self
            .preferred
            .compare_exchange(i, next, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The gRPC status of a failure, if it has one.
fn status(e: &etcd_client::Error) -> Option<&tonic::Status> {
    match e {
        etcd_client::Error::GRpcStatus(status) => Some(status),
        _ => None,
    }
}

/// Whether the failure says "not now" rather than "no": etcd had no leader or no time, or the
/// connection to it failed (tonic reports a broken connection as an `Unknown` "transport error"
/// or an h2 protocol error).
fn unavailable(e: &etcd_client::Error) -> bool {
    match status(e) {
        Some(status) => {
            matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
            ) || status.message().starts_with("transport error")
                || status.message().starts_with("h2 protocol error")
        }
        None => matches!(
            e,
            etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_)
        ),
    }
}

/// Whether a request that failed so may go to another member.
fn retriable(e: &etcd_client::Error, retry: Retry) -> bool {
    match retry {
        Retry::Any => unavailable(e),
        Retry::Unsent => match status(e) {
            // The connection could not be made, or the member refused before proposing anything.
            Some(status) => {
                status.code() == tonic::Code::Unavailable
                    && ["tcp connect error", "Connection refused", "no leader"]
                        .iter()
                        .any(|m| status.message().contains(m))
            }
            None => matches!(e, etcd_client::Error::TransportError(_)),
        },
    }
}

/// The error's text, with etcd's own message when it sent one.
fn message(e: &etcd_client::Error) -> String {
    match status(e) {
        Some(status) => format!("etcd: {}", status.message()),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn writes_go_elsewhere_only_when_they_cannot_have_happened() {
        use tonic::Code::*;
        let cases = [
            (Unavailable, "tcp connect error", true, true),
            (Unavailable, "etcdserver: no leader", true, true),
            (
                Unavailable,
                "error reading a body from connection",
                true,
                false,
            ),
            (Unavailable, "etcdserver: request timed out", true, false),
            (DeadlineExceeded, "deadline", true, false),
            (
                InvalidArgument,
                "etcdserver: request is too large",
                false,
                false,
            ),
            (
                OutOfRange,
                "mvcc: required revision has been compacted",
                false,
                false,
            ),
        ];
        for (code, message, any, unsent) in cases {
            let e = status(code, message);
            assert_eq!(retriable(&e, Retry::Any), any, "{message} (read)");
            assert_eq!(retriable(&e, Retry::Unsent), unsent, "{message} (write)");
        }
    }

    #[test]
    fn failures_become_unavailable_or_backend_errors() {
        let cases = [
            (
                Failure::Etcd(status(tonic::Code::Unavailable, "etcdserver: no leader")),
                StoreError::Unavailable("etcd: etcdserver: no leader".into()),
            ),
            (
                Failure::Etcd(status(
                    tonic::Code::InvalidArgument,
                    "etcdserver: request is too large",
                )),
                StoreError::Backend("etcd: etcdserver: request is too large".into()),
            ),
            (
                Failure::TimedOut("write", Duration::from_secs(5)),
                StoreError::Unavailable("etcd did not answer a write within 5s".into()),
            ),
        ];
        for (failure, want) in cases {
            assert_eq!(StoreError::from(failure), want);
        }
    }
}
