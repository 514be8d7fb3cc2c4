//! The server's certificates and the kubeconfig that trusts them.
//!
//! On first start a CA and a serving certificate for loopback names are generated under the data
//! directory, with a random bearer token; later starts reuse them, so an existing kubeconfig keeps
//! working across restarts.

use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
};
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

/// Why credentials could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Generating a certificate failed.
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A stored certificate or key does not parse.
    #[error(
        "{path}: not a valid PEM certificate or key ({reason}); delete it to have it regenerated"
    )]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the certificate.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The credentials a server runs with.
pub struct Credentials {
    /// The CA certificate (PEM), which clients trust.
    pub ca_pem: String,
    /// The serving certificate chain.
    pub cert_chain: Vec<CertificateDer<'static>>,
    /// The serving key.
    pub key: PrivateKeyDer<'static>,
    /// The bearer token clients must present.
    pub token: String,
    /// The CA that signs client certificates (and the serving certificate).
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes a file only its owner may read (a key, a token, a kubeconfig holding the token).
///
/// The file is created with mode 0600 rather than chmod-ed after writing, so there is no moment in
/// which another user could open it; an existing file has its mode narrowed before it is truncated
/// and rewritten.
pub fn write_private(path: &Path, contents: &str) -> Result<(), TlsError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io(path))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io(path))?;
    }
    file.set_len(0).map_err(io(path))?;
    file.write_all(contents.as_bytes()).map_err(io(path))?;
    file.sync_all().map_err(io(path))
}

impl Credentials {
    /// Loads the credentials under `dir`, generating any that are missing.
    pub fn load_or_create(dir: &Path) -> Result<Self, TlsError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            // Only the owner lists the directory that holds the key and the token.
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(dir).map_err(io(dir))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(io(dir))?;
        }
        let ca_path = dir.join("ca.crt");
        let ca_key_path = dir.join("ca.key");
        let cert_path = dir.join("server.crt");
        let key_path = dir.join("server.key");
        let token_path = dir.join("token");
        // A data directory from before client certificates has no CA key: everything is made
        // anew (the kubeconfig is rewritten at every start; the token is kept).
        if !(ca_path.exists() && ca_key_path.exists() && cert_path.exists() && key_path.exists()) {
            generate(&ca_path, &ca_key_path, &cert_path, &key_path)?;
        }
        if !token_path.exists() {
            let bytes: [u8; 24] = rand::random();
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            write_private(&token_path, &token)?;
        }
        let ca_pem = std::fs::read_to_string(&ca_path).map_err(io(&ca_path))?;
        let pem_err = |path: &Path, e: rustls::pki_types::pem::Error| TlsError::Pem {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let cert_chain = CertificateDer::pem_file_iter(&cert_path)
            .map_err(|e| pem_err(&cert_path, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_err(&cert_path, e))?;
        let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| pem_err(&key_path, e))?;
        let token = std::fs::read_to_string(&token_path)
            .map_err(io(&token_path))?
            .trim()
            .to_string();
        let ca_key_pem = std::fs::read_to_string(&ca_key_path).map_err(io(&ca_key_path))?;
        let ca_key = rcgen::KeyPair::from_pem(&ca_key_pem).map_err(|e| TlsError::Pem {
            path: ca_key_path.clone(),
            reason: e.to_string(),
        })?;
        let ca = rcgen::Issuer::from_ca_cert_pem(&ca_pem, ca_key).map_err(|e| TlsError::Pem {
            path: ca_path.clone(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            ca_pem,
            cert_chain,
            key,
            token,
            ca,
        })
    }

    /// A client certificate and key (PEM) for user `name` in `groups`, signed by the cluster
    /// CA: the server authenticates it as upstream's x509 authenticator does (CN the user, each
    /// O a group).
    pub fn client_certificate(
        &self,
        name: &str,
        groups: &[&str],
    ) -> Result<(String, String), TlsError> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        for g in groups {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *g);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.ca)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// A rustls server configuration offering HTTP/2 and HTTP/1.1.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // Client certificates are asked for, not required: token and anonymous clients connect
        // too. One the CA did not sign fails the handshake, as with upstream's --client-ca-file.
        let mut roots = rustls::RootCertStore::empty();
        for der in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()).flatten() {
            roots.add(der)?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_string())))?;
        let mut cfg = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.cert_chain.clone(), self.key.clone_key())?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }

    /// A kubeconfig for `https://{host}:{port}` with the CA and token embedded.
    pub fn kubeconfig(&self, host: &str, port: u16) -> String {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: rollwright\n  cluster:\n    server: https://{host}:{port}\n    certificate-authority-data: {ca}\nusers:\n- name: rollwright-admin\n  user:\n    token: {}\ncontexts:\n- name: rollwright\n  context:\n    cluster: rollwright\n    user: rollwright-admin\n    namespace: default\ncurrent-context: rollwright\npreferences: {{}}\n",
            self.token
        )
    }
}

fn generate(
    ca_path: &Path,
    ca_key_path: &Path,
    cert_path: &Path,
    key_path: &Path,
) -> Result<(), TlsError> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "rollwright-ca");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    write_private(ca_key_path, &ca_key.serialize_pem())?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
    ])?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "rollwright-apiserver");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer)?;
    std::fs::write(ca_path, ca_cert.pem()).map_err(io(ca_path))?;
    std::fs::write(cert_path, cert.pem()).map_err(io(cert_path))?;
    write_private(key_path, &key.serialize_pem())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let a = Credentials::load_or_create(dir.path()).unwrap();
        let b = Credentials::load_or_create(dir.path()).unwrap();
        assert_eq!(a.ca_pem, b.ca_pem);
        assert_eq!(a.token, b.token);
        assert_eq!(a.token.len(), 48);
        a.server_config().unwrap();
        let kc = a.kubeconfig("127.0.0.1", 6443);
        assert!(kc.contains("server: https://127.0.0.1:6443"));
        assert!(kc.contains(&a.token));
    }

    #[test]
    fn a_corrupt_key_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        Credentials::load_or_create(dir.path()).unwrap();
        std::fs::write(dir.path().join("server.key"), "garbage").unwrap();
        let err = Credentials::load_or_create(dir.path())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("server.key"), "{err}");
    }
}
