//! The cross-run: the same tests against upstream's own kube-apiserver, with rollwright's
//! controllers, scheduler and simulated nodes as clients of it, as they run on a real cluster.
//!
//! `tools/cross-run` sets `ROLLWRIGHT_E2E_KUBE_APISERVER` (a kube-apiserver built from upstream's
//! source, never committed) and `ROLLWRIGHT_E2E_ETCD` (one etcd it started); each test's cluster
//! is then a kube-apiserver of its own on that etcd under a prefix of its own, with upstream's
//! default admission plugins and RBAC. Without them (CI, `cargo test`), tests run on rollwright's
//! own API server as always.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};
use tokio::process::{Child, Command};

/// How long a kube-apiserver may take to become ready (its post-start hooks: bootstrap RBAC,
/// priority classes, the default namespaces).
const READY_WITHIN: Duration = Duration::from_secs(90);

/// Where upstream's binaries are, when this run is a cross-run.
pub struct Reference {
    kube_apiserver: PathBuf,
    etcd: String,
}

/// The reference this run uses, if it is a cross-run.
pub fn reference() -> Option<Reference> {
    let kube_apiserver = std::env::var_os("ROLLWRIGHT_E2E_KUBE_APISERVER")?;
    let etcd = std::env::var("ROLLWRIGHT_E2E_ETCD")
        .expect("ROLLWRIGHT_E2E_ETCD (an etcd client URL) goes with ROLLWRIGHT_E2E_KUBE_APISERVER");
    Some(Reference {
        kube_apiserver: kube_apiserver.into(),
        etcd,
    })
}

/// One upstream kube-apiserver, stopped when dropped.
pub struct ApiServer {
    _process: Child,
    pub kubeconfig: PathBuf,
    /// An admin client over HTTPS, as `rollwright controllers --kubeconfig` connects.
    pub client: kube::Client,
}

impl Reference {
    /// Starts a kube-apiserver with its credentials and log in `dir`, on a prefix of the shared
    /// etcd no other test uses, and waits until it is ready.
    pub async fn start(&self, dir: &Path) -> ApiServer {
        let pki = dir.join("pki");
        std::fs::create_dir_all(&pki).expect("pki dir");
        let key = pki.join("sa.key");
        let public = pki.join("sa.pub");
        openssl(&["genrsa", "-out", path(&key), "2048"]).await;
        openssl(&["rsa", "-in", path(&key), "-pubout", "-out", path(&public)]).await;
        let token = format!("{:032x}", rand::random::<u128>());
        let tokens = pki.join("tokens.csv");
        std::fs::write(&tokens, format!("{token},admin,admin,system:masters\n"))
            .expect("token file");
        let port = free_port();
        let prefix = format!("/e2e-{:032x}", rand::random::<u128>());
        let log = std::fs::File::create(dir.join("kube-apiserver.log")).expect("log file");
        let process = Command::new(&self.kube_apiserver)
            .args(["--etcd-servers", &self.etcd, "--etcd-prefix", &prefix])
            .args([
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                &port.to_string(),
            ])
            .arg("--cert-dir")
            .arg(pki.join("serving"))
            .arg("--token-auth-file")
            .arg(&tokens)
            .args(["--authorization-mode", "Node,RBAC"])
            .arg("--service-account-key-file")
            .arg(&public)
            .arg("--service-account-signing-key-file")
            .arg(&key)
            .args(["--service-account-issuer", "https://kubernetes.default.svc"])
            .args(["--service-cluster-ip-range", "10.96.0.0/16"])
            // Rollwright serves StatefulSet maxUnavailable (beta in 1.28, off by default there).
            .args(["--feature-gates", "MaxUnavailableStatefulSet=true"])
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("kube-apiserver starts");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: upstream\n  cluster: \
                 {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\n\
                 users:\n- name: admin\n  user: {{token: \"{token}\"}}\ncontexts:\n\
                 - name: upstream\n  context: {{cluster: upstream, user: admin}}\n\
                 current-context: upstream\n"
            ),
        )
        .expect("kubeconfig written");
        let client = super::process::client(dir).await;
        wait_ready(&client).await;
        add_default_storage_class(&client).await;
        ApiServer {
            _process: process,
            kubeconfig,
            client,
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

async fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .await
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Asks `/readyz` until it answers `ok`. Readiness has no watch, so this asks again every
/// 200 ms, up to [`READY_WITHIN`].
async fn wait_ready(client: &kube::Client) {
    let ready = tokio::time::timeout(READY_WITHIN, async {
        loop {
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("request");
            if client.request_text(req).await.is_ok_and(|t| t == "ok") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        ready.is_ok(),
        "kube-apiserver not ready within {READY_WITHIN:?}"
    );
}

/// A bare kube-apiserver has no StorageClass; a real cluster has a default one from its
/// installer (kind's `standard`, a cloud's disks). This is rollwright's, as `rollwright up`
/// installs it: claims that name no class are provisioned by rollwright's volume controller.
async fn add_default_storage_class(client: &kube::Client) {
    use k8s_openapi::api::storage::v1::StorageClass;
    let class: StorageClass =
        serde_json::from_value(rollwright::control_plane::default_storage_class())
            .expect("a StorageClass");
    kube::Api::<StorageClass>::all(client.clone())
        .create(&Default::default(), &class)
        .await
        .expect("the default StorageClass is created");
}
