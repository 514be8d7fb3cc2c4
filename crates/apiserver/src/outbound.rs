//! HTTPS connections the server itself opens to a backend behind a Service: admission webhooks
//! and aggregated API servers. The Service is resolved to one of its ready endpoints, as
//! upstream's endpoint routing does (`k8s.io/apiserver/pkg/util/proxy.ResolveEndpoint`), since
//! cluster IPs here are only numbers; the backend's certificate is checked for the name the
//! caller gives (`NAME.NAMESPACE.svc`) against the caller's CA bundle, or not at all where
//! upstream skips it.
//!
//! Errors are worded as Go's dialer and TLS stack word them, since upstream's messages (webhook
//! failures, an APIService's `FailedDiscoveryCheck`) quote them.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use axum::body::Body;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};
use serde_json::Value;

use crate::state::ApiServer;

/// Which server certificates a connection accepts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Trust<'a> {
    /// Those issued by a CA in this PEM bundle (an empty or unreadable bundle trusts nothing).
    Bundle(&'a [u8]),
    /// Any (upstream's `insecureSkipTLSVerify`, and its availability checks).
    Anything,
}

/// An address of a ready endpoint of Service `namespace/name` behind its port `port`, as
/// upstream's `ResolveEndpoint` picks it (with its error texts).
pub(crate) fn resolve_endpoint(
    server: &ApiServer,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<SocketAddr, String> {
    let registry = server.registry();
    let (Some(services), Some(endpoints)) = (
        registry.find("", "v1", "services"),
        registry.find("", "v1", "endpoints"),
    ) else {
        return Err("services are not served".into());
    };
    let service = server
        .cache
        .get(&services, Some(namespace), name)
        .ok_or_else(|| format!("service {name:?} not found"))?
        .value();
    let kind = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !matches!(kind, "ClusterIP" | "LoadBalancer" | "NodePort") {
        return Err(format!("unsupported service type {kind:?}"));
    }
    let port_name = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .map(|p| p.get("name").and_then(Value::as_str).unwrap_or_default())
        .ok_or_else(|| format!("no service port {port} found for service {name:?}"))?;
    let eps = server
        .cache
        .get(&endpoints, Some(namespace), name)
        .ok_or_else(|| format!("endpoints {name:?} not found"))?
        .value();
    eps.get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|subset| {
            let ip = subset
                .pointer("/addresses/0/ip")
                .and_then(Value::as_str)?
                .parse()
                .ok()?;
            let port = subset
                .get("ports")
                .and_then(Value::as_array)?
                .iter()
                .find(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == port_name)?
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())?;
            Some(SocketAddr::new(ip, port))
        })
        .ok_or_else(|| format!("no endpoints available for service {name:?}"))
}

/// A client TLS configuration speaking HTTP/1.1, trusting what `trust` says.
pub(crate) fn tls_config(trust: Trust<'_>) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let mut config = match trust {
        Trust::Bundle(pem) => {
            let mut roots = RootCertStore::empty();
            roots.add_parsable_certificates(
                CertificateDer::pem_slice_iter(pem).filter_map(Result::ok),
            );
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Anything => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Go's wording of a failed dial.
pub(crate) fn dial_error(addr: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        _ => format!("dial tcp {addr}: {e}"),
    }
}

/// Go's wording of a failed handshake, for the common case of an untrusted certificate.
pub(crate) fn tls_error(e: &std::io::Error) -> String {
    let rustls_error = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match rustls_error {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
                .into()
        }
        Some(other) => format!("tls: {other}"),
        None => format!("remote error: {e}"),
    }
}

/// Whether `ip` belongs to a simulated node or one of its pods ([`api::simulated`]).
fn simulated(server: &ApiServer, ip: IpAddr) -> bool {
    let Some(nodes) = server.registry().find("", "v1", "nodes") else {
        return false;
    };
    server
        .cache
        .list(&nodes, None)
        .0
        .iter()
        // Only nodes labelled simulated are read further, and only the fields that say so.
        .filter(|e| e.label(api::simulated::LABEL) == Some("true"))
        .any(|e| api::simulated::json_owns_address(&e.json, ip))
}

/// Dials `addrs`, shakes hands for `server_name` and starts an HTTP/1.1 connection; it ends
/// once the sender is dropped and the last answer's body is read.
///
/// An address of a simulated node or pod is never dialled: no process serves it, and on a
/// developer's machine the connection would leave for the network. It is refused as a real
/// dial to an address where nothing listens is.
pub(crate) async fn connect(
    server: &ApiServer,
    addrs: &[SocketAddr],
    shown_addr: &str,
    server_name: &str,
    config: ClientConfig,
) -> Result<SendRequest<Body>, String> {
    let real: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| !simulated(server, a.ip()))
        .collect();
    if real.is_empty() && !addrs.is_empty() {
        tracing::debug!(addr = %shown_addr, "not dialling a simulated address");
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        return Err(dial_error(shown_addr, &refused));
    }
    let tcp = tokio::net::TcpStream::connect(real.as_slice())
        .await
        .map_err(|e| dial_error(shown_addr, &e))?;
    let name = ServerName::try_from(server_name.to_string()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| tls_error(&e))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "backend connection ended");
        }
    });
    Ok(sender)
}

/// Accepts any certificate, still checking that the handshake was signed by its key.
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
