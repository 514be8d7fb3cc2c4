//! The HTTPS endpoint kube-controller-manager and kube-scheduler serve on
//! `--bind-address:--secure-port` (10257 and 10259): `/healthz` and `/livez` (the process runs),
//! `/readyz` (it is ready to act: leader or standby alike, as a standby is a healthy replica) and
//! `/metrics` (the rest client's requests and rate-limiter waits, the controllers' work queues,
//! whether it leads, controller restarts).
//!
//! Like upstream without `--tls-cert-file`, it serves a self-signed certificate generated at start
//! (in memory: the pod's root filesystem is read-only). Upstream also asks the API server
//! (TokenReview, SubjectAccessReview) who may read `/metrics`; this endpoint does not, which is
//! why it binds to loopback unless told otherwise: expose it only where anyone who can connect
//! may read the metrics.

use axum::{Router, http::header, response::IntoResponse, routing::get};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};
use std::{
    net::SocketAddr,
    sync::{Arc, LazyLock},
};

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum StatusServerError {
    /// The address could not be bound.
    #[error("binding {addr} for /healthz, /readyz and /metrics")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What went wrong.
        #[source]
        error: std::io::Error,
    },
    /// The self-signed certificate could not be made.
    #[error("generating the self-signed serving certificate")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the certificate.
    #[error("configuring TLS")]
    Tls(#[from] rustls::Error),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseName {
    name: String,
}

/// client-go's `leader_election_master_status{name}`: 1 while this process leads.
static LEADING: LazyLock<Family<LeaseName, Gauge>> = LazyLock::new(Family::default);

/// Marks this process the leader of `name` until dropped.
pub struct Leading(String);

impl Leading {
    /// This process now leads `name`.
    pub fn start(name: &str) -> Self {
        LEADING
            .get_or_create(&LeaseName {
                name: name.to_owned(),
            })
            .set(1);
        Self(name.to_owned())
    }

    /// Records that this process is a candidate for `name`, not (yet) leading.
    pub fn candidate(name: &str) {
        LEADING
            .get_or_create(&LeaseName {
                name: name.to_owned(),
            })
            .set(0);
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        Leading::candidate(&self.0);
    }
}

/// The metrics in the OpenMetrics text format.
pub fn metrics_text() -> String {
    let mut registry = Registry::default();
    restclient::metrics::register(&mut registry);
    controllers::runtime::queue_metrics::register(&mut registry);
    registry.register(
        "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease",
        LEADING.clone(),
    );
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    let body = text.strip_suffix("# EOF\n").unwrap_or(&text).to_owned();
    body + &controllers::runtime::supervisor::encode_restarts() + "# EOF\n"
}

fn router() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(|| async {
                (
                    [(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    metrics_text(),
                )
                    .into_response()
            }),
        )
}

/// The running endpoint; dropping it stops it.
pub struct StatusServer {
    /// Where it listens (the port chosen when 0 was asked for).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves the endpoint on `addr` until the returned server is dropped.
pub async fn serve(addr: SocketAddr) -> Result<StatusServer, StatusServerError> {
    let names = vec!["localhost".to_owned(), addr.ip().to_string()];
    let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(names)?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| StatusServerError::Bind { addr, error })?;
    let addr = listener
        .local_addr()
        .map_err(|error| StatusServerError::Bind { addr, error })?;
    let router = router();
    let task = tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!(error = %e, "accepting a connection");
                    continue;
                }
            };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let handshake =
                    tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp));
                let tls = match handshake.await {
                    Ok(Ok(tls)) => tls,
                    _ => {
                        tracing::debug!(%peer, "TLS handshake failed or timed out");
                        return;
                    }
                };
                let service = hyper_util::service::TowerToHyperService::new(router);
                let served = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
                if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "status connection ended with an error");
                }
            });
        }
    });
    tracing::info!(%addr, "serving /healthz, /readyz and /metrics over HTTPS");
    Ok(StatusServer { addr, task })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_name_the_lease_led_and_end_once() {
        {
            let _leading = Leading::start("unit-test-lease");
            assert!(
                metrics_text()
                    .contains("leader_election_master_status{name=\"unit-test-lease\"} 1")
            );
        }
        let text = metrics_text();
        assert!(text.contains("leader_election_master_status{name=\"unit-test-lease\"} 0"));
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(text.ends_with("# EOF\n"));
    }
}
