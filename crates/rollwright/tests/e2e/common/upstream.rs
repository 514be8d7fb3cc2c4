//! The cross-run: the same tests against upstream's own kube-apiserver, with rollwright's
//! controllers, scheduler and simulated nodes as clients of it, as they run on a real cluster.
//!
//! `tools/cross-run` sets `ROLLWRIGHT_E2E_KUBE_APISERVER` (a kube-apiserver built from upstream's
//! source, never committed) and `ROLLWRIGHT_E2E_ETCD` (one etcd it started); each test's cluster
//! is then a kube-apiserver of its own on that etcd under a prefix of its own, with upstream's
//! default admission plugins and RBAC. Without them (CI, `cargo test`), tests run on rollwright's
//! own API server as always.
//!
//! `ROLLWRIGHT_E2E_INSTALLED` makes it a cross-run as an operator installs rollwright: each
//! server gets `rollwright install`'s Namespace, ServiceAccount and roles for the four workload
//! controllers, and those controllers run with that ServiceAccount's token (the others, the
//! scheduler and the nodes stand in for the cluster's own and stay administrators).
//! `ROLLWRIGHT_E2E_AUDIT_DIR` gives each server an audit log there (metadata of every request),
//! so that the run can count what upstream refused rollwright's account.

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
    /// In an installed cross-run, a client with the installed ServiceAccount's token.
    installed: Option<kube::Client>,
    /// The serving certificate kube-apiserver made itself (its own CA): what the
    /// root-ca-cert-publisher publishes as `kube-root-ca.crt`, as a cluster's controller manager
    /// is given its CA (`--root-ca-file`); without it the kubelets would wait for the ConfigMap.
    root_ca: controllers::root_ca::RootCa,
    /// Where that certificate is.
    pub root_ca_file: PathBuf,
}

/// The controllers `rollwright install` runs as its own ServiceAccount.
const INSTALLED: [&str; 4] = ["deployment", "replicaset", "daemonset", "statefulset"];
/// The ServiceAccount `rollwright install` creates (namespace, name).
const INSTALLED_ACCOUNT: (&str, &str) = ("rollwright-system", "rollwright-controllers");

/// What rollwright runs against one upstream server; stopped together.
pub struct Parts(Vec<rollwright::components::Running>);

impl Parts {
    pub fn one(running: rollwright::components::Running) -> Parts {
        Parts(vec![running])
    }

    pub async fn stop(self) {
        for running in self.0 {
            running.stop().await;
        }
    }
}

impl ApiServer {
    /// Starts `what` as clients of this server: all as the administrator, or in an installed
    /// cross-run the installed controllers as their ServiceAccount, in a process part of their
    /// own (their own informers too, as the installed Deployment's pod has).
    pub fn start(&self, what: &rollwright::components::Components) -> Parts {
        let mut what = what.clone();
        if let Some(settings) = what.controllers.as_mut()
            && settings.root_ca.bundle.is_none()
        {
            settings.root_ca.bundle = Some(self.root_ca.clone());
        }
        let what = &what;
        let start = |client: &kube::Client, what: &rollwright::components::Components| {
            rollwright::components::start_elected(client.clone(), what, None).expect("parts start")
        };
        let (Some(installed), Some(settings)) = (&self.installed, &what.controllers) else {
            return Parts(vec![start(&self.client, what)]);
        };
        let enabled = controllers::enabled(settings).expect("known controllers");
        let (mine, theirs): (Vec<&str>, Vec<&str>) =
            enabled.into_iter().partition(|c| INSTALLED.contains(c));
        let only = |names: Vec<&str>| rollwright::components::ControllerSettings {
            enabled: controllers::Selection::only(names),
            ..settings.clone()
        };
        let mut parts = Vec::new();
        if !mine.is_empty() {
            let installed_part = rollwright::components::Components {
                nodes: None,
                profile: None,
                scheduler: None,
                controllers: Some(only(mine)),
            };
            parts.push(start(installed, &installed_part));
        }
        let rest = rollwright::components::Components {
            nodes: what.nodes.clone(),
            profile: what.profile.clone(),
            scheduler: what.scheduler.clone(),
            controllers: (!theirs.is_empty()).then(|| only(theirs)),
        };
        parts.push(start(&self.client, &rest));
        Parts(parts)
    }
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
        let id = format!("{:032x}", rand::random::<u128>());
        let prefix = format!("/e2e-{id}");
        let log = std::fs::File::create(dir.join("kube-apiserver.log")).expect("log file");
        let mut command = Command::new(&self.kube_apiserver);
        if let Some(audit) = std::env::var_os("ROLLWRIGHT_E2E_AUDIT_DIR") {
            let policy = pki.join("audit-policy.yaml");
            std::fs::write(
                &policy,
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n\
                 rules: [{level: Metadata}]\n",
            )
            .expect("audit policy");
            command
                .arg("--audit-policy-file")
                .arg(&policy)
                .arg("--audit-log-path")
                .arg(Path::new(&audit).join(format!("{id}.log")));
        }
        let process = command
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
        let installed = match std::env::var_os("ROLLWRIGHT_E2E_INSTALLED") {
            Some(_) => Some(install(&client, dir, port).await),
            None => None,
        };
        let root_ca_file = pki.join("serving/apiserver.crt");
        let root_ca = controllers::root_ca::RootCa::read(&root_ca_file)
            .expect("kube-apiserver's self-signed serving certificate");
        ApiServer {
            _process: process,
            kubeconfig,
            client,
            installed,
            root_ca,
            root_ca_file,
        }
    }
}

/// Applies `rollwright install`'s account and roles for [`INSTALLED`] (not its Deployment: the
/// test runs the controllers) and answers a client with a token of that account, written as a
/// kubeconfig in `dir/installed`.
async fn install(admin: &kube::Client, dir: &Path, port: u16) -> kube::Client {
    use k8s_openapi::api::{
        authentication::v1::{TokenRequest, TokenRequestSpec},
        core::v1::ServiceAccount,
    };
    let names: Vec<String> = INSTALLED.iter().map(|c| c.to_string()).collect();
    let install = rollwright::install::Install::new(&names, INSTALLED_ACCOUNT.0, "rollwright:e2e")
        .expect("installable controllers");
    let manifests: Vec<serde_json::Value> = install
        .manifests()
        .into_iter()
        .filter(|m| {
            !matches!(
                m["kind"].as_str(),
                Some("Deployment" | "PodDisruptionBudget")
            )
        })
        .collect();
    rollwright::install::apply(admin, &manifests)
        .await
        .expect("the install applies");
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(6 * 3600),
            ..Default::default()
        },
        ..Default::default()
    };
    let token = kube::Api::<ServiceAccount>::namespaced(admin.clone(), INSTALLED_ACCOUNT.0)
        .create_token_request(INSTALLED_ACCOUNT.1, &Default::default(), &request)
        .await
        .expect("a token of the installed account")
        .status
        .expect("a token")
        .token;
    let installed = dir.join("installed");
    std::fs::create_dir_all(&installed).expect("installed dir");
    std::fs::write(
        installed.join("kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: upstream\n  cluster: \
             {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\n\
             users:\n- name: installed\n  user: {{token: \"{token}\"}}\ncontexts:\n\
             - name: upstream\n  context: {{cluster: upstream, user: installed}}\n\
             current-context: upstream\n"
        ),
    )
    .expect("kubeconfig written");
    super::process::client(&installed).await
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
