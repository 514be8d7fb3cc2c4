//! Which cluster and namespace a command works on, found as kubectl finds them: `--kubeconfig`,
//! then `$KUBECONFIG` (a list of files, merged), then `~/.kube/config`; `--context` picks a
//! context, `-n` a namespace (else the context's, else `default`), `-A` all namespaces.
//! One rollwright addition: with none of those, `./.rollwright/kubeconfig` (what `rollwright up`
//! writes in the directory it runs in) is used, so the tour works without exporting anything.

use anyhow::{Context, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::{Path, PathBuf};

/// Where `rollwright up` writes its kubeconfig by default.
const ROLLWRIGHT_KUBECONFIG: &str = ".rollwright/kubeconfig";

/// The flags every cluster command takes.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Target {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then ./.rollwright/kubeconfig).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace (default: the context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// All namespaces (for `get`).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
}

/// A connected client and the namespace commands default to.
#[derive(Clone)]
pub struct Session {
    /// The client.
    pub client: kube::Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// `-A`.
    pub all_namespaces: bool,
    /// The API server's URL, for messages.
    pub server: String,
    /// Where the kubeconfig came from, for messages.
    pub source: String,
}

/// Where a kubeconfig is read from.
#[derive(Debug, PartialEq, Eq)]
enum Source {
    /// `--kubeconfig FILE`.
    Flag(PathBuf),
    /// `$KUBECONFIG` (one or more files).
    Env(String),
    /// A file found at a default place.
    Default(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(p) | Source::Default(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "$KUBECONFIG ({v})"),
        }
    }
}

/// kubectl's order of places; `exists` says whether a default file is there.
fn locate(
    flag: Option<&Path>,
    env: Option<&str>,
    home: Option<&Path>,
    exists: impl Fn(&Path) -> bool,
) -> Option<Source> {
    if let Some(p) = flag {
        return Some(Source::Flag(p.to_path_buf()));
    }
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        return Some(Source::Env(v.to_string()));
    }
    let home_config = home.map(|h| h.join(".kube").join("config"));
    [home_config, Some(PathBuf::from(ROLLWRIGHT_KUBECONFIG))]
        .into_iter()
        .flatten()
        .find(|p| exists(p))
        .map(Source::Default)
}

impl Target {
    /// Reads the kubeconfig and builds a client (no request is made yet).
    pub async fn connect(&self) -> anyhow::Result<Session> {
        let env = std::env::var("KUBECONFIG").ok();
        let home = std::env::home_dir();
        let source = locate(
            self.kubeconfig.as_deref(),
            env.as_deref(),
            home.as_deref(),
            Path::exists,
        )
        .context(
            "no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG \
             (`rollwright up` writes .rollwright/kubeconfig)",
        )?;
        let kubeconfig = match &source {
            Source::Flag(p) | Source::Default(p) => Kubeconfig::read_from(p),
            Source::Env(_) => Kubeconfig::from_env().map(Option::unwrap_or_default),
        }
        .map_err(|e| {
            anyhow::anyhow!("cannot read kubeconfig {source}: {e} (pass another with --kubeconfig)")
        })?;
        if let Some(context) = &self.context
            && !kubeconfig.contexts.iter().any(|c| &c.name == context)
        {
            let known: Vec<&str> = kubeconfig
                .contexts
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            bail!(
                "context {context:?} is not in kubeconfig {source} (it has: {})",
                known.join(", ")
            );
        }
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| anyhow::anyhow!("kubeconfig {source}: {e}"))?;
        let server = config.cluster_url.to_string();
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config)
            .map_err(|e| anyhow::anyhow!("kubeconfig {source}: {e}"))?;
        Ok(Session {
            client,
            namespace,
            all_namespaces: self.all_namespaces,
            server: server.trim_end_matches('/').to_string(),
            source: source.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_order_then_rollwright_default() {
        let home = Path::new("/home/u");
        let home_config = home.join(".kube/config");
        let rw = PathBuf::from(ROLLWRIGHT_KUBECONFIG);
        let all = |_: &Path| true;
        let only_rw = |p: &Path| p == Path::new(ROLLWRIGHT_KUBECONFIG);
        let none = |_: &Path| false;
        let cases: Vec<(Option<&Path>, Option<&str>, Option<Source>)> = vec![
            (
                Some(Path::new("/x")),
                Some("/y"),
                Some(Source::Flag("/x".into())),
            ),
            (None, Some("/y:/z"), Some(Source::Env("/y:/z".into()))),
            (None, Some(""), Some(Source::Default(home_config.clone()))),
            (None, None, Some(Source::Default(home_config))),
        ];
        for (flag, env, want) in cases {
            assert_eq!(locate(flag, env, Some(home), all), want);
        }
        assert_eq!(
            locate(None, None, Some(home), only_rw),
            Some(Source::Default(rw))
        );
        assert_eq!(locate(None, None, Some(home), none), None);
    }
}
