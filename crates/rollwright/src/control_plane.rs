//! The embedded control plane: store, API server and (in later stages) the controllers,
//! scheduler and simulated nodes, started together in one process.

use anyhow::Context;
use apiserver::{ApiServer, ServerOptions, tls::Credentials};
use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
    sync::Arc,
};
use store::Store;
use tokio::{sync::oneshot, task::JoinHandle};

/// Which store backend to run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// Durable SQLite under the data directory (the default).
    Sqlite,
    /// In memory; everything is lost on exit.
    Memory,
    /// An etcd cluster (`--etcd-servers`), which several API servers can share.
    Etcd,
}

/// How to start a control plane.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where the store, certificates and kubeconfig live.
    pub data_dir: PathBuf,
    /// Address to bind (loopback unless asked otherwise).
    pub bind: IpAddr,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// Store backend.
    pub store: StoreKind,
    /// Client URLs of the etcd members, for [`StoreKind::Etcd`].
    pub etcd_servers: Vec<String>,
    /// How long an Event is kept after its last write (`--event-ttl`).
    pub event_ttl: std::time::Duration,
    /// The most Events kept at once (`--event-budget`; `None`: every Event for its TTL).
    pub event_budget: Option<usize>,
    /// How often etcd's history is compacted, for [`StoreKind::Etcd`] (`--etcd-compaction-interval`;
    /// zero: never by this server).
    pub etcd_compaction_interval: std::time::Duration,
    /// The audit policy (`--audit-policy-file`).
    pub audit_policy_file: Option<PathBuf>,
    /// Where audit events go (`--audit-log-path`, `-` for standard output).
    pub audit_log_path: Option<PathBuf>,
    /// How the audit log rotates (`--audit-log-maxsize`, `--audit-log-maxbackup`,
    /// `--audit-log-maxage`).
    pub audit_log_rotation: apiserver::audit::Rotation,
    /// The parts to run beside the API server, on in-process clients.
    pub components: crate::components::Components,
    /// Whether the parts wait for [`ControlPlane::start_components`]: a caller that loads
    /// objects first (a rehearsal loads a cluster's snapshot) starts them on a complete picture.
    pub defer_components: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from(".rollwright"),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 6443,
            store: StoreKind::Sqlite,
            etcd_servers: Vec::new(),
            event_ttl: apiserver::DEFAULT_EVENT_TTL,
            event_budget: Some(apiserver::DEFAULT_EVENT_BUDGET),
            etcd_compaction_interval: store::etcd::DEFAULT_COMPACTION_INTERVAL,
            audit_policy_file: None,
            audit_log_path: None,
            audit_log_rotation: Default::default(),
            components: Default::default(),
            defer_components: false,
        }
    }
}

/// A running control plane.
pub struct ControlPlane {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The kubeconfig written for it.
    pub kubeconfig: PathBuf,
    /// The API server's state (for in-process clients).
    pub server: ApiServer,
    credentials: Credentials,
    audit: Option<Arc<apiserver::audit::Auditor>>,
    /// Held while running: one process per data directory.
    _lock: std::fs::File,
    components: Option<crate::components::Running>,
    /// The parts not started yet ([`Options::defer_components`]).
    waiting: Option<crate::components::Components>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ControlPlane {
    /// Opens the store, starts the API server on the configured port and writes the kubeconfig.
    pub async fn start(mut opts: Options) -> anyhow::Result<Self> {
        private_dir(&opts.data_dir)
            .with_context(|| format!("creating data directory {}", opts.data_dir.display()))?;
        let lock = lock_data_dir(&opts.data_dir)?;
        let credentials = Credentials::load_or_create(&opts.data_dir.join("pki"))?;
        // ServiceAccount tokens are signed with this key (upstream's `sa.key`); kept across
        // restarts so that issued tokens stay valid.
        let sa_key_path = opts.data_dir.join("pki").join("sa.key");
        let service_account_key = Arc::new(
            satoken::Key::load_or_create(&sa_key_path)
                .with_context(|| format!("the service-account key {}", sa_key_path.display()))?,
        );
        if let Some(settings) = &mut opts.components.controllers
            && settings.serviceaccount_token.key.is_none()
        {
            settings.serviceaccount_token.key = Some(service_account_key.clone());
        }
        // A bad policy or log path stops start-up, as upstream's does.
        let audit = apiserver::audit::Auditor::from_flags(
            opts.audit_policy_file.as_deref(),
            opts.audit_log_path.as_deref(),
            opts.audit_log_rotation,
        )?;
        // The root-ca-cert-publisher publishes the CA the kubeconfig trusts this server with,
        // unless told another (`--root-ca-file`).
        if let Some(settings) = &mut opts.components.controllers
            && settings.root_ca.bundle.is_none()
        {
            settings.root_ca.bundle = Some(
                controllers::root_ca::RootCa::from_pem(credentials.ca_pem.clone())
                    .context("the generated CA")?,
            );
        }
        let store: Arc<dyn Store> = match opts.store {
            StoreKind::Sqlite => {
                let path = opts.data_dir.join("store.db");
                Arc::new(
                    store::sqlite::SqliteStore::open(
                        &path,
                        store::sqlite::SqliteOptions::default(),
                    )
                    .with_context(|| format!("opening store {}", path.display()))?,
                )
            }
            StoreKind::Memory => Arc::new(store::memory::MemoryStore::new()),
            StoreKind::Etcd => {
                if opts.etcd_servers.is_empty() {
                    anyhow::bail!(
                        "--store etcd needs the etcd members' client URLs: --etcd-servers http://127.0.0.1:2379[,URL...]"
                    );
                }
                Arc::new(
                    store::etcd::EtcdStore::connect(
                        &opts.etcd_servers,
                        store::etcd::EtcdOptions {
                            expiring: apiserver::expiry::expiring(opts.event_ttl),
                            compaction_interval: Some(opts.etcd_compaction_interval),
                            ..Default::default()
                        },
                    )
                    .await?,
                )
            }
        };
        let server = ApiServer::start(
            store,
            ServerOptions {
                token: Some(credentials.token.clone()),
                // Pods must name an existing ServiceAccount only where the serviceaccount
                // controller creates every namespace's `default` one.
                service_accounts: opts.components.controllers.as_ref().is_some_and(|s| {
                    controllers::enabled(s).is_ok_and(|on| {
                        on.contains(
                            <controllers::serviceaccount::ServiceAccountController as controllers::runtime::Controller>::NAME,
                        )
                    })
                }),
                event_ttl: Some(opts.event_ttl),
                event_budget: opts.event_budget,
                service_account_key: Some(service_account_key),
                audit: audit.clone(),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("starting the API server: {e}"))?;
        let listener = tokio::net::TcpListener::bind((opts.bind, opts.port))
            .await
            .with_context(|| {
                format!(
                    "binding {}:{} (is another server running? use --port 0 for a free port)",
                    opts.bind, opts.port
                )
            })?;
        let addr = listener.local_addr()?;
        let kubeconfig = opts.data_dir.join("kubeconfig");
        let host = if opts.bind.is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            opts.bind.to_string()
        };
        // It holds the admin token: readable by its owner only, from the moment it exists.
        apiserver::tls::write_private(&kubeconfig, &credentials.kubeconfig(&host, addr.port()))
            .with_context(|| format!("writing {}", kubeconfig.display()))?;
        let (tx, rx) = oneshot::channel::<()>();
        let tls = credentials.server_config()?;
        let router = server.router();
        let task = tokio::spawn(async move {
            apiserver::serve_tls(listener, router, tls, async {
                let _ = rx.await;
            })
            .await;
        });
        ensure_cluster_objects(&server, &host, addr.port()).await?;
        let mut cp = Self {
            addr,
            kubeconfig,
            server,
            credentials,
            audit,
            _lock: lock,
            components: None,
            waiting: Some(opts.components),
            shutdown: Some(tx),
            task: Some(task),
        };
        if !opts.defer_components {
            cp.start_components()?;
        }
        Ok(cp)
    }

    /// Starts the parts [`Options::components`] names, if they wait for this
    /// ([`Options::defer_components`]); a no-op once they run.
    pub fn start_components(&mut self) -> anyhow::Result<()> {
        let Some(what) = self.waiting.take() else {
            return Ok(());
        };
        // The in-cluster parts talk to the server in-process (no TCP, no TLS): same API, same
        // admission, none of the transport's cost.
        //
        // And without client rate limits, unlike `controllers`, `scheduler` and `nodes` against a
        // cluster (20/30, 50/100, 50/100 as upstream's): `up` is rollwright's own cluster, whose
        // pace is meant to be its controllers' and its simulated kubelets', with no network
        // between them and the API server to protect. A limit here would model a client
        // configuration nobody chose; rehearsing a real cluster should set the limits it measured.
        tracing::info!("in-process clients: no client-side rate limit");
        let users = embedded::Users::new(&self.server);
        self.components = Some(crate::components::start_with_identities(
            &what,
            Arc::new(move |user| users.client(user)),
        )?);
        Ok(())
    }

    /// The bearer token clients use.
    pub fn token(&self) -> &str {
        &self.credentials.token
    }

    /// A `kube` client for this control plane over HTTPS, as any client would connect.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        Ok(kube::Client::try_from(cfg)?)
    }

    /// Stops serving and waits until the listener and connections are closed.
    pub async fn stop(mut self) {
        if let Some(parts) = self.components.take() {
            parts.stop().await;
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        if let Some(audit) = &self.audit {
            audit.flush().await;
        }
    }
}

/// Takes the data directory's lock, so a second process cannot open the same store (its writes
/// would race this one's) or overwrite the kubeconfig of the running one.
/// The name of the StorageClass every cluster starts with.
pub const DEFAULT_STORAGE_CLASS: &str = "standard";

/// The default StorageClass `standard`, like kind's: provisioned by rollwright's volume
/// controller (a simulated provisioner), bound when the first pod using a claim is scheduled.
pub fn default_storage_class() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": DEFAULT_STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": controllers::volume::class::SIMULATED_PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    })
}

/// Creates the objects a fresh cluster has beside what the API server bootstraps by itself
/// (namespaces, system PriorityClasses), when they are missing; ones a user changed are left
/// alone, as upstream's addon manager does with `EnsureExists`:
/// - the `kubernetes` Service in `default` (upstream's API server makes it; it needs the serving
///   port, known here) with its Endpoints and EndpointSlice pointing at this server;
/// - the default StorageClass `standard`, like kind's: simulated provisioning, bound when the
///   first pod using a claim is scheduled, volumes deleted with their claims;
/// - the ClusterRole and ClusterRoleBinding `rollwright:node-simulator`, granting the node
///   simulator's shared watches their reads (see [`node_simulator_reads`]).
async fn ensure_cluster_objects(server: &ApiServer, host: &str, port: u16) -> anyhow::Result<()> {
    let [reader_role, reader_binding] = node_simulator_reads();
    let [rollback_role, rollback_binding] = controllers::autorollback::rbac_objects();
    let [budgets_role, budgets_binding] = controllers::disruption_gate::rbac_objects();
    let objects = [
        apiserver::registry::kubernetes_service(port),
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": host}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
        }),
        serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [host], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }),
        default_storage_class(),
        reader_role,
        reader_binding,
        rollback_role,
        rollback_binding,
        budgets_role,
        budgets_binding,
    ];
    for mut obj in objects {
        let what = format!("{}/{}", obj["kind"], obj["metadata"]["name"]);
        server
            .ensure_object(&mut obj)
            .await
            .map_err(|e| anyhow::anyhow!("creating {what}: {e}"))?;
    }
    Ok(())
}

/// The ClusterRole and ClusterRoleBinding that let the node simulator's reader
/// ([`nodesim::identity::READER`]) run the simulator's shared watches, and nothing else: its
/// nodes write as themselves (`system:node:NAME`, under upstream's Node authorizer), and a
/// kubelet's own permissions do not cover these watches (it may not list claims at all).
fn node_simulator_reads() -> [serde_json::Value; 2] {
    let name = nodesim::identity::READER;
    let labels = serde_json::json!({"app.kubernetes.io/managed-by": "rollwright"});
    [
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": [{
                "apiGroups": [""],
                // nodes: the watch of every simulated node (by label), whose annotations stop,
                //   start and pressure it and whose deletion ends its kubelet;
                // pods: the watch of every bound pod (`spec.nodeName!=`), each simulated by its
                //   node;
                // persistentvolumeclaims: the watch of every claim, since a pod starts only
                //   once every claim it mounts is Bound (`nodesim::volumes`);
                // secrets, configmaps: a metadata-only watch of each, since a pod's Secret and
                //   ConfigMap volumes must find their object before it starts
                //   (`nodesim::mounts`); a kubelet reads those of its pods as its node, which
                //   the Node authorizer allows, but one watch of names serves every node.
                // Nothing else is read from the API: images, the fault profile and the command
                // interpreter work from the pod spec and local files alone.
                "resources": ["nodes", "pods", "persistentvolumeclaims", "secrets", "configmaps"],
                "verbs": ["get", "list", "watch"],
            }],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
        }),
    ]
}

/// Creates the data directory readable by its owner only, and narrows one that exists: it holds
/// the store (every Secret), the CA's key and the admin kubeconfig (etcd keeps its data directory
/// 0700 for the same reason).
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

fn lock_data_dir(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let path = dir.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "data directory {} is in use by another rollwright process; stop it, or pass another --data-dir",
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap

    use super::*;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Subject};
    use kube::Api;

    #[tokio::test]
    async fn the_node_simulators_reader_is_granted_exactly_its_watches() {
        let e = embedded::Embedded::memory().await.unwrap();
        ensure_cluster_objects(&e.server, "127.0.0.1", 6443)
            .await
            .unwrap();
        let name = "rollwright:node-simulator";
        let role: ClusterRole = Api::all(e.client()).get(name).await.unwrap();
        assert_eq!(
            role.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
            "rollwright"
        );
        let rule = PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(
                [
                    "nodes",
                    "pods",
                    "persistentvolumeclaims",
                    "secrets",
                    "configmaps",
                ]
                .map(String::from)
                .into(),
            ),
            verbs: ["get", "list", "watch"].map(String::from).into(),
            ..Default::default()
        };
        assert_eq!(role.rules, Some(vec![rule]));
        let binding: ClusterRoleBinding = Api::all(e.client()).get(name).await.unwrap();
        assert_eq!(
            binding.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
            "rollwright"
        );
        assert_eq!(
            (
                binding.role_ref.kind.as_str(),
                binding.role_ref.name.as_str()
            ),
            ("ClusterRole", name)
        );
        let reader = nodesim::identity::reader_user().username;
        assert_eq!(
            binding.subjects,
            Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "User".into(),
                name: reader,
                namespace: None,
            }])
        );
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod data_dir_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_data_directory_is_created_private() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("a").join(".rollwright");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn an_existing_data_directory_is_narrowed() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join(".rollwright");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }
}
