//! What keeps the API to its owner: files holding secrets readable by their owner only, bearer
//! tokens required and compared in constant time, tokens kept out of logs, TLS 1.2 or newer only.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use rollwright::control_plane::{ControlPlane, Options, StoreKind};
use std::{os::unix::fs::PermissionsExt, path::Path};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

async fn start(dir: &Path) -> ControlPlane {
    ControlPlane::start(Options {
        data_dir: dir.to_path_buf(),
        port: 0,
        store: StoreKind::Sqlite,
        ..Default::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn files_holding_secrets_are_readable_by_their_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let cp = start(dir.path()).await;
    let secrets = ["kubeconfig", "pki/token", "pki/server.key"];
    for file in secrets {
        assert_eq!(mode(&dir.path().join(file)), 0o600, "{file}");
    }
    assert_eq!(mode(&dir.path().join("pki")), 0o700, "pki/");
    cp.stop().await;

    // A kubeconfig an older version left world-readable is narrowed when it is rewritten.
    std::fs::set_permissions(
        dir.path().join("kubeconfig"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let cp = start(dir.path()).await;
    assert_eq!(mode(&dir.path().join("kubeconfig")), 0o600);
    let kubeconfig = std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains(cp.token()),
        "the rewrite keeps the contents"
    );
    cp.stop().await;
}

/// A TLS client that trusts the cluster's CA.
fn tls_client(
    ca_pem: &[u8],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem).unwrap())
        .unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
}

/// One HTTP/1.1 GET over TLS, with a bearer token if given; the status line and the body.
async fn https_get(
    addr: std::net::SocketAddr,
    ca_pem: &[u8],
    path: &str,
    token: Option<&str>,
) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut conn = tls_client(ca_pem, rustls::DEFAULT_VERSIONS)
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    conn.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    // A peer that closes without close_notify is fine here: the answer is complete.
    let _ = tokio::time::timeout(common::DEADLINE, conn.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// Runs kubectl against `cp` with `extra` arguments; its exit status and stderr.
async fn kubectl(kubeconfig: &Path, extra: &[&str]) -> (bool, String) {
    let out = tokio::process::Command::new(common::KUBECTL)
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_wrong_token_gets_401_and_no_token_is_anonymous() {
    let dir = tempfile::tempdir().unwrap();
    let cp = start(dir.path()).await;
    let kubeconfig = dir.path().join("kubeconfig");
    let (ok, _) = kubectl(&kubeconfig, &["get", "--raw", "/api/v1/namespaces"]).await;
    assert!(ok, "the right token works");

    let wrong = format!("{}x", &cp.token()[..cp.token().len() - 1]);
    let (ok, stderr) = kubectl(
        &kubeconfig,
        &["--token", &wrong, "get", "--raw", "/api/v1/namespaces"],
    )
    .await;
    assert!(!ok);
    assert!(stderr.contains("Unauthorized"), "{stderr}");

    // A token nobody issued is a 401 Status, as upstream's "invalid bearer token".
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    let (head, body) = https_get(cp.addr, &ca, "/api/v1/namespaces", Some(&wrong)).await;
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Unauthorized", "{body}");
    assert_eq!(status["code"], 401);
    // No token (or an empty one) is system:anonymous, whom upstream's default policy lets
    // read no resources: 403 with upstream's message.
    for token in [None, Some("")] {
        let (head, body) = https_get(cp.addr, &ca, "/api/v1/namespaces", token).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{token:?}: {head}");
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            status["message"],
            r#"namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope"#,
            "{body}"
        );
    }
    let (head, _) = https_get(cp.addr, &ca, "/api/v1/namespaces", Some(cp.token())).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Health and version stay open, as upstream's are to unauthenticated probes.
    for path in ["/readyz", "/livez", "/healthz", "/version"] {
        let (head, _) = https_get(cp.addr, &ca, path, None).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    }
    cp.stop().await;
}

/// The `rollwright` binary serving on a free port, with its log captured.
struct Child {
    child: tokio::process::Child,
    addr: String,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

async fn rollwright_apiserver(dir: &Path, log: &str) -> Child {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rollwright"))
        .args(["apiserver", "--port", "0", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", log)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(common::DEADLINE, async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some(addr) = line.strip_prefix("rollwright API server listening on https://") {
                return addr.to_string();
            }
        }
        panic!("the server exited before listening");
    })
    .await
    .expect("the server listens");
    Child {
        child,
        addr,
        stdout,
    }
}

#[tokio::test]
async fn tokens_never_reach_the_log() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    // Debug is what an operator turns on to look into a problem; the token must not show then.
    let mut server = rollwright_apiserver(dir.path(), "debug").await;
    let kubeconfig = dir.path().join("kubeconfig");
    let token = std::fs::read_to_string(dir.path().join("pki/token")).unwrap();
    let wrong = "not-the-token-0123456789abcdef";
    kubectl(&kubeconfig, &["get", "pods"]).await;
    kubectl(&kubeconfig, &["--token", wrong, "get", "pods"]).await;
    kubectl(&kubeconfig, &["get", "pods", "-v=9"]).await;
    server.child.start_kill().unwrap();
    let mut stderr = server.child.stderr.take().unwrap();
    let mut log = String::new();
    stderr.read_to_string(&mut log).await.unwrap();
    while let Ok(Some(line)) = server.stdout.next_line().await {
        log.push_str(&line);
    }
    assert!(
        log.contains(&server.addr) || !log.is_empty(),
        "the log was captured"
    );
    assert!(!log.contains(token.trim()), "the admin token is in the log");
    assert!(!log.contains(wrong), "a presented token is in the log");
}

#[tokio::test]
async fn only_tls_1_2_and_newer_are_spoken() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let cp = start(dir.path()).await;
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let tcp = tokio::net::TcpStream::connect(cp.addr).await.unwrap();
        tls_client(&ca, &[version])
            .connect(
                rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                tcp,
            )
            .await
            .unwrap_or_else(|e| panic!("{version:?} is spoken: {e}"));
    }
    // rustls cannot even offer TLS 1.0 or 1.1, so the hellos are written by hand: a TLS 1.1
    // ClientHello with TLS 1.0-era suites and no extensions, as an old client sends.
    for client_version in [[3u8, 1], [3, 2]] {
        let mut hello = vec![];
        hello.extend_from_slice(&client_version);
        hello.extend_from_slice(&[0x42; 32]); // random
        hello.push(0); // no session id
        hello.extend_from_slice(&[0, 4, 0x00, 0x2f, 0x00, 0x35]); // AES-CBC-SHA suites
        hello.extend_from_slice(&[1, 0]); // null compression
        let mut handshake = vec![1, 0, 0, hello.len() as u8];
        handshake.extend_from_slice(&hello);
        let mut record = vec![0x16, 3, 1, 0, handshake.len() as u8];
        record.extend_from_slice(&handshake);
        let mut tcp = tokio::net::TcpStream::connect(cp.addr).await.unwrap();
        tcp.write_all(&record).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(common::DEADLINE, tcp.read_to_end(&mut answer))
            .await
            .expect("the server answers and closes")
            .ok();
        // A fatal alert record (0x15, level 2: handshake_failure 40 or protocol_version 70),
        // never a ServerHello (0x16).
        assert_eq!(
            answer.first(),
            Some(&0x15),
            "TLS {client_version:?} was answered with {answer:?}"
        );
        assert!(matches!(answer.get(5..7), Some([2, 40 | 70])), "{answer:?}");
    }
    cp.stop().await;
}
