//! The API server and a store in this process, and `kube` clients that call the server's router
//! directly as a tower service (no TCP, no TLS).
//!
//! `rollwright up` runs its controllers, scheduler and simulated nodes on such clients; tests of
//! those crates start one with [`Embedded::memory`] and wait on conditions with [`wait_until`].

#![warn(missing_docs)]

pub mod agent;

use apiserver::{ApiServer, ServerOptions};
use futures::{StreamExt, TryStreamExt};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;
use std::{fmt::Debug, sync::Arc, time::Duration};
use store::{Store, memory::MemoryStore};

/// Why the embedded server could not start, or a wait failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused to start.
    #[error("starting the API server: {0}")]
    Start(#[from] apiserver::error::ApiError),
    /// A wait ran past its deadline.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    /// The watch behind a wait failed.
    #[error("watch failed: {0}")]
    Watch(#[from] kube::runtime::watcher::Error),
}

/// An API server running in this process.
#[derive(Clone)]
pub struct Embedded {
    /// The server's state.
    pub server: ApiServer,
}

impl Embedded {
    /// Starts an API server on a fresh in-memory store.
    pub async fn memory() -> Result<Self, Error> {
        Self::on(Arc::new(MemoryStore::new())).await
    }

    /// Starts an API server on `store`, without authentication (only in-process clients reach it).
    pub async fn on(store: Arc<dyn Store>) -> Result<Self, Error> {
        let server = ApiServer::start(store, ServerOptions::default()).await?;
        Ok(Self { server })
    }

    /// A client whose requests go straight to the router, with `default` as its namespace.
    pub fn client(&self) -> Client {
        client_for(&self.server)
    }
}

/// A `kube` client for an in-process API server, acting as the server itself
/// (`system:masters`).
pub fn client_for(server: &ApiServer) -> Client {
    Client::new(server.in_process_router(), "default")
}

/// A `kube` client for an in-process API server acting as `user`: authorized as that user.
pub fn client_as(server: &ApiServer, user: authz::UserInfo) -> Client {
    Users::new(server).client(user)
}

/// `kube` clients acting as users of an in-process API server, all over one router: a client
/// costs a request extension, not a router of its own.
#[derive(Clone)]
pub struct Users {
    router: axum::Router,
}

impl Users {
    /// Clients of `server`.
    pub fn new(server: &ApiServer) -> Self {
        Self {
            router: server.authorizing_router(),
        }
    }

    /// A client whose requests are authorized as `user`'s.
    pub fn client(&self, user: authz::UserInfo) -> Client {
        use tower::ServiceExt;
        let agent = agent::Component::of_user(&user.username).map(agent::Component::user_agent);
        let user = Arc::new(user);
        let service =
            self.router
                .clone()
                .map_request(move |mut req: http::Request<kube::client::Body>| {
                    apiserver::act_as(&mut req, user.clone());
                    if let Some(agent) = &agent {
                        req.headers_mut()
                            .entry(http::header::USER_AGENT)
                            .or_insert_with(|| agent.clone());
                    }
                    req
                });
        Client::new(service, "default")
    }
}

/// Watches `api` until some object satisfies `pred`, or `timeout` passes; returns that object.
/// Tests use this instead of sleeping: it wakes on the event that makes the condition true.
pub async fn wait_until<K, F>(
    api: &Api<K>,
    what: &str,
    timeout: Duration,
    mut pred: F,
) -> Result<K, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(&K) -> bool,
{
    let stream = watcher(api.clone(), watcher::Config::default()).applied_objects();
    let found = tokio::time::timeout(timeout, async {
        let mut stream = stream.boxed();
        while let Some(obj) = stream.try_next().await? {
            if pred(&obj) {
                return Ok(Some(obj));
            }
        }
        Ok::<_, Error>(None)
    })
    .await
    .map_err(|_| Error::Timeout(timeout, what.to_string()))??;
    found.ok_or_else(|| Error::Timeout(timeout, what.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::PostParams;

    #[tokio::test]
    async fn an_in_process_client_reaches_the_server() {
        let e = Embedded::memory().await.unwrap();
        let ns: Api<Namespace> = Api::all(e.client());
        let list = ns.list(&Default::default()).await.unwrap();
        assert!(
            list.items
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some("kube-system"))
        );
        let waiter = tokio::spawn({
            let ns = ns.clone();
            async move {
                wait_until(&ns, "namespace x", Duration::from_secs(10), |n| {
                    n.metadata.name.as_deref() == Some("x")
                })
                .await
            }
        });
        let mut obj = Namespace::default();
        obj.metadata.name = Some("x".into());
        ns.create(&PostParams::default(), &obj).await.unwrap();
        let got = waiter.await.unwrap().unwrap();
        assert_eq!(got.metadata.name.as_deref(), Some("x"));
    }
}
