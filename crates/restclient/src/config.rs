//! Where a component finds its cluster, in the order kubectl and kube-rs's `Config::infer` look,
//! with rollwright's local control plane last:
//!
//! 1. `--kubeconfig PATH`;
//! 2. `$KUBECONFIG` (a list of files, merged as kubectl merges them);
//! 3. in a pod: `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT` and the ServiceAccount mounted
//!    at `/var/run/secrets/kubernetes.io/serviceaccount` (client-go's `rest.InClusterConfig`);
//! 4. `.rollwright/kubeconfig`, which `rollwright up` writes.
//!
//! In a pod the token is a projected ServiceAccount token the kubelet rotates (hourly, valid for
//! an hour and a bit more): the client names the file rather than holding its contents, and
//! kube-rs re-reads it at least once a minute (`RefreshableToken::File`), as client-go's
//! `BearerTokenFile` does through its cached file token source. The CA bundle is re-read the same
//! way (`Config::root_cert_file`).

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use std::path::{Path, PathBuf};

/// Where the configuration came from, for the log line that says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig`.
    Flag(PathBuf),
    /// `$KUBECONFIG`, as given.
    Env(String),
    /// The pod's ServiceAccount, and the API server's address from the environment.
    InCluster,
    /// The local control plane's kubeconfig.
    Local(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(path) => write!(f, "--kubeconfig {}", path.display()),
            Source::Env(value) => write!(f, "KUBECONFIG={value}"),
            Source::InCluster => f.write_str("in-cluster (ServiceAccount)"),
            Source::Local(path) => write!(f, "{} (rollwright up)", path.display()),
        }
    }
}

/// Why no configuration could be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A kubeconfig that was named could not be read or used.
    #[error("reading kubeconfig from {source_name}")]
    Kubeconfig {
        /// Where it was looked for.
        source_name: Source,
        /// What went wrong.
        #[source]
        error: kube::config::KubeconfigError,
    },
    /// In a pod, the ServiceAccount's token could not be read.
    #[error(
        "in-cluster configuration: reading the ServiceAccount token {}",
        path.display()
    )]
    Token {
        /// The token file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        error: std::io::Error,
    },
    /// In a pod, `KUBERNETES_SERVICE_PORT` is no port.
    #[error("in-cluster configuration: KUBERNETES_SERVICE_PORT={0:?} is not a port")]
    Port(String),
    /// Nothing named a cluster, and no local control plane has written its kubeconfig.
    #[error(
        "no cluster configuration: no --kubeconfig, no KUBECONFIG, not in a pod, and no {} (start `rollwright up` first, or pass --kubeconfig)",
        .0.display()
    )]
    Nothing(PathBuf),
}

/// The in-cluster configuration's inputs: the API server's address (the `kubernetes` Service's,
/// which the kubelet puts in every container's environment) and the ServiceAccount directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InCluster {
    /// `KUBERNETES_SERVICE_HOST`.
    pub host: String,
    /// `KUBERNETES_SERVICE_PORT`.
    pub port: String,
    /// Where the ServiceAccount is mounted: `token`, `ca.crt` and `namespace`.
    pub dir: PathBuf,
}

impl InCluster {
    /// Where the kubelet mounts a pod's ServiceAccount.
    pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

    /// From the process's environment, with the ServiceAccount at its usual place; `None`
    /// outside a pod (client-go's `ErrNotInCluster`: either variable missing or empty).
    pub fn from_env() -> Option<Self> {
        Self::from_vars(
            std::env::var("KUBERNETES_SERVICE_HOST").ok(),
            std::env::var("KUBERNETES_SERVICE_PORT").ok(),
            PathBuf::from(Self::SERVICE_ACCOUNT_DIR),
        )
    }

    /// From the two variables' values and a ServiceAccount directory (tests name their own).
    pub fn from_vars(host: Option<String>, port: Option<String>, dir: PathBuf) -> Option<Self> {
        match (host, port) {
            (Some(host), Some(port)) if !host.is_empty() && !port.is_empty() => {
                Some(Self { host, port, dir })
            }
            _ => None,
        }
    }

    /// The token file.
    pub fn token_file(&self) -> PathBuf {
        self.dir.join("token")
    }

    /// The CA bundle.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// client-go's `rest.InClusterConfig`: `https://HOST:PORT` (IPv6 bracketed), the token by its
    /// file (re-read as the kubelet rotates it), the CA bundle if it can be read (client-go logs
    /// an error and goes on with the system's roots otherwise), and the pod's namespace as the
    /// default (clientcmd's in-cluster `Namespace()`, `default` without the file).
    pub async fn config(&self) -> Result<kube::Config, ConfigError> {
        let port: u16 = self
            .port
            .parse()
            .map_err(|_| ConfigError::Port(self.port.clone()))?;
        let host = match self.host.parse::<std::net::Ipv6Addr>() {
            Ok(v6) => format!("[{v6}]"),
            Err(_) => self.host.clone(),
        };
        // client-go reads the token once at start, failing without one; later reads are the
        // rotation.
        let token = self.token_file();
        std::fs::read(&token).map_err(|error| ConfigError::Token {
            path: token.clone(),
            error,
        })?;
        let ca = self.ca_file();
        let ca = match std::fs::read(&ca) {
            Ok(_) => Some(ca),
            Err(e) => {
                tracing::error!(path = %ca.display(), error = %e, "expected to load the root CA from the ServiceAccount, going on without it");
                None
            }
        };
        let namespace = std::fs::read_to_string(self.dir.join("namespace"))
            .ok()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let name = "in-cluster".to_owned();
        let kubeconfig = Kubeconfig {
            clusters: vec![NamedCluster {
                name: name.clone(),
                cluster: Some(Cluster {
                    server: Some(format!("https://{host}:{port}")),
                    certificate_authority: ca.as_deref().map(path_string),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            auth_infos: vec![NamedAuthInfo {
                name: name.clone(),
                auth_info: Some(AuthInfo {
                    token_file: Some(path_string(&token)),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            contexts: vec![NamedContext {
                name: name.clone(),
                context: Some(Context {
                    cluster: name.clone(),
                    user: Some(name.clone()),
                    namespace: Some(namespace),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            current_context: Some(name),
            ..Default::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|error| ConfigError::Kubeconfig {
                source_name: Source::InCluster,
                error,
            })?;
        // Re-read as the token is: the cluster's CA may rotate too.
        config.root_cert_file = ca;
        Ok(config)
    }
}

fn path_string(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Everything the choice depends on, read once from the flags and the environment so that the
/// choice itself ([`Inference::source`]) is a plain function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inference {
    /// `--kubeconfig`.
    pub flag: Option<PathBuf>,
    /// `$KUBECONFIG`, if set and not empty.
    pub env: Option<String>,
    /// The pod's environment, if in one.
    pub in_cluster: Option<InCluster>,
    /// The local control plane's kubeconfig.
    pub local: PathBuf,
}

impl Inference {
    /// `rollwright up`'s kubeconfig, relative to the working directory.
    pub const LOCAL: &str = ".rollwright/kubeconfig";

    /// From `--kubeconfig` and this process's environment.
    pub fn from_env(flag: Option<PathBuf>) -> Self {
        Self {
            flag,
            env: std::env::var("KUBECONFIG").ok().filter(|v| !v.is_empty()),
            in_cluster: InCluster::from_env(),
            local: PathBuf::from(Self::LOCAL),
        }
    }

    /// Which source wins: the first present in the module's order. The local kubeconfig is the
    /// fallback even when missing, so that the error names it.
    pub fn source(&self) -> Source {
        if let Some(path) = &self.flag {
            Source::Flag(path.clone())
        } else if let Some(value) = &self.env {
            Source::Env(value.clone())
        } else if self.in_cluster.is_some() {
            Source::InCluster
        } else {
            Source::Local(self.local.clone())
        }
    }

    /// Loads the configuration from the source that wins.
    pub async fn load(&self) -> Result<(kube::Config, Source), ConfigError> {
        let source = self.source();
        let kubeconfig = match &source {
            Source::InCluster => {
                let Some(in_cluster) = &self.in_cluster else {
                    return Err(ConfigError::Nothing(self.local.clone()));
                };
                return Ok((in_cluster.config().await?, source));
            }
            Source::Local(path) if !path.exists() => {
                return Err(ConfigError::Nothing(path.clone()));
            }
            Source::Flag(path) | Source::Local(path) => Kubeconfig::read_from(path),
            Source::Env(value) => merged(value),
        };
        let kubeconfig = kubeconfig.map_err(|error| ConfigError::Kubeconfig {
            source_name: source.clone(),
            error,
        })?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|error| ConfigError::Kubeconfig {
                    source_name: source.clone(),
                    error,
                })?;
        Ok((config, source))
    }
}

/// `$KUBECONFIG`'s files merged in order, as kubectl merges them (the first to set a value wins).
fn merged(value: &str) -> Result<Kubeconfig, kube::config::KubeconfigError> {
    std::env::split_paths(value)
        .filter(|p| !p.as_os_str().is_empty())
        .try_fold(Kubeconfig::default(), |merged, path| {
            Kubeconfig::read_from(path).and_then(|c| merged.merge(c))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inference(flag: bool, env: bool, pod: bool) -> Inference {
        Inference {
            flag: flag.then(|| PathBuf::from("/flag")),
            env: env.then(|| "/env".to_owned()),
            in_cluster: InCluster::from_vars(
                pod.then(|| "10.96.0.1".to_owned()),
                pod.then(|| "443".to_owned()),
                PathBuf::from("/sa"),
            ),
            local: PathBuf::from("/local"),
        }
    }

    #[test]
    fn the_flag_wins_then_the_environment_then_the_pod_then_the_local_plane() {
        let table = [
            ((true, true, true), Source::Flag("/flag".into())),
            ((false, true, true), Source::Env("/env".into())),
            ((false, false, true), Source::InCluster),
            ((false, false, false), Source::Local("/local".into())),
        ];
        for ((flag, env, pod), want) in table {
            assert_eq!(
                inference(flag, env, pod).source(),
                want,
                "{flag} {env} {pod}"
            );
        }
    }

    #[test]
    fn a_pod_needs_both_variables_set_and_not_empty() {
        let dir = PathBuf::from("/sa");
        let some = |s: &str| Some(s.to_owned());
        assert!(InCluster::from_vars(some("h"), some("443"), dir.clone()).is_some());
        assert!(InCluster::from_vars(some("h"), None, dir.clone()).is_none());
        assert!(InCluster::from_vars(None, some("443"), dir.clone()).is_none());
        assert!(InCluster::from_vars(some(""), some("443"), dir).is_none());
    }

    /// A CA certificate (any valid one: the client only parses it here).
    const CA: &str = include_str!("../tests/data/ca.crt");

    fn service_account(token: &str, ca: bool, namespace: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
        let write = |name: &str, contents: &str| {
            std::fs::write(dir.path().join(name), contents)
                .unwrap_or_else(|e| panic!("writing {name}: {e}"));
        };
        write("token", token);
        if ca {
            write("ca.crt", CA);
        }
        if let Some(ns) = namespace {
            write("namespace", ns);
        }
        dir
    }

    fn in_cluster(host: &str, port: &str, dir: &Path) -> InCluster {
        InCluster {
            host: host.to_owned(),
            port: port.to_owned(),
            dir: dir.to_owned(),
        }
    }

    #[tokio::test]
    async fn in_a_pod_the_token_file_ca_and_namespace_are_the_service_accounts() {
        let sa = service_account("first-token", true, Some("rollwright-system\n"));
        let config = in_cluster("10.96.0.1", "443", sa.path())
            .config()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // client-go joins host and port whatever the port.
        assert_eq!(config.cluster_url.to_string(), "https://10.96.0.1:443/");
        assert_eq!(config.default_namespace, "rollwright-system");
        // The file, not its contents: kube-rs re-reads it as the kubelet rotates it.
        assert_eq!(
            config.auth_info.token_file.as_deref(),
            Some(sa.path().join("token").to_string_lossy().as_ref())
        );
        assert!(config.auth_info.token.is_none());
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        assert_eq!(config.root_cert_file, Some(sa.path().join("ca.crt")));
    }

    #[tokio::test]
    async fn in_a_pod_ipv6_is_bracketed_a_missing_ca_or_namespace_is_tolerated() {
        let sa = service_account("t", false, None);
        let config = in_cluster("fd00::1", "6443", sa.path())
            .config()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.cluster_url.to_string(), "https://[fd00::1]:6443/");
        assert_eq!(config.default_namespace, "default");
        assert!(config.root_cert_file.is_none());
    }

    #[tokio::test]
    async fn in_a_pod_a_missing_token_or_a_bad_port_is_an_error() {
        let empty = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let err = in_cluster("10.96.0.1", "443", empty.path()).config().await;
        assert!(matches!(err, Err(ConfigError::Token { .. })), "{err:?}");
        let sa = service_account("t", true, None);
        let err = in_cluster("10.96.0.1", "https", sa.path()).config().await;
        assert!(matches!(err, Err(ConfigError::Port(_))), "{err:?}");
    }

    #[tokio::test]
    async fn the_inferred_pod_configuration_loads_and_no_configuration_names_the_local_file() {
        let sa = service_account("t", true, Some("ns"));
        let mut inference = inference(false, false, false);
        inference.in_cluster = Some(in_cluster("127.0.0.1", "6443", sa.path()));
        let (config, source) = inference.load().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(source, Source::InCluster);
        assert_eq!(config.default_namespace, "ns");
        inference.in_cluster = None;
        let err = inference.load().await;
        assert!(matches!(err, Err(ConfigError::Nothing(_))), "{err:?}");
    }
}
