//! etcd members started on loopback for tests and benchmarks: one process per member, each on free
//! ports with its data in a temporary directory, stopped (SIGKILL) when dropped.
//!
//! This needs the `etcd` binary (Debian's `etcd-server` package; `$ETCD` names another). It is
//! not how production runs: there the user points `--etcd-servers` at their own cluster.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use tempfile::TempDir;

use super::{EtcdOptions, EtcdStore};
use crate::Store;

/// Why a local cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    /// No etcd binary.
    #[error("the etcd binary was not found (install Debian's etcd-server, or set $ETCD)")]
    NotInstalled,
    /// Spawning or preparing a member failed.
    #[error("starting etcd: {0}")]
    Io(#[from] std::io::Error),
    /// The members did not elect a leader and answer in time.
    #[error("etcd did not become ready within {0:?}; see the logs under {1}")]
    NotReady(Duration, PathBuf),
    /// A member exited while starting (its log says why: most often a port another process took
    /// between [`free_port`] and etcd's bind).
    #[error("etcd member {0} exited while starting; see its log under {1}")]
    Exited(String, PathBuf),
}

/// How many times [`LocalCluster::start`] tries fresh ports when a member exits at start.
const START_ATTEMPTS: usize = 3;

/// One member of a [`LocalCluster`].
struct Member {
    name: String,
    client_url: String,
    peer_url: String,
    data_dir: PathBuf,
    process: Option<Child>,
}

/// A cluster of etcd members on loopback.
pub struct LocalCluster {
    members: Vec<Member>,
    initial_cluster: String,
    binary: PathBuf,
    /// Dropped last: the members' data.
    dir: TempDir,
}

/// How long a cluster may take to answer its first read.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

impl LocalCluster {
    /// The etcd binary: `$ETCD`, else `etcd` on the `PATH`.
    pub fn binary() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("ETCD") {
            return Some(PathBuf::from(path));
        }
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("etcd"))
                .find(|candidate| candidate.is_file())
        })
    }

    /// Starts `size` members and waits until each of them answers, and the cluster a
    /// linearizable read. A member that exits at start (a port taken in between) makes the whole
    /// cluster start again on fresh ports, up to [`START_ATTEMPTS`] times: a cluster short of a
    /// member from the start would lose its quorum to the first member a test takes down.
    pub async fn start(size: usize) -> Result<Self, MemberError> {
        let mut attempt = 1;
        loop {
            match Self::start_once(size).await {
                Err(MemberError::Exited(name, dir)) if attempt < START_ATTEMPTS => {
                    tracing::warn!(member = name, dir = %dir.display(), attempt, "etcd member exited at start; trying fresh ports");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(size: usize) -> Result<Self, MemberError> {
        let binary = Self::binary().ok_or(MemberError::NotInstalled)?;
        let dir = tempfile::Builder::new()
            .prefix("rollwright-etcd")
            .tempdir()?;
        let mut members = Vec::with_capacity(size);
        for i in 0..size {
            members.push(Member {
                name: format!("m{i}"),
                client_url: format!("http://127.0.0.1:{}", free_port()?),
                peer_url: format!("http://127.0.0.1:{}", free_port()?),
                data_dir: dir.path().join(format!("m{i}")),
                process: None,
            });
        }
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Self {
            members,
            initial_cluster,
            binary,
            dir,
        };
        for i in 0..size {
            cluster.start_member(i)?;
        }
        cluster.ready(&cluster.client_urls()).await?;
        cluster.each_member_answers().await?;
        Ok(cluster)
    }

    /// Waits until every member answers a status request on its own client URL ([`Self::ready`]
    /// needs only a quorum); a member whose process has exited fails it at once.
    async fn each_member_answers(&mut self) -> Result<(), MemberError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        for m in &mut self.members {
            loop {
                if let Some(child) = m.process.as_mut()
                    && !matches!(child.try_wait(), Ok(None))
                {
                    m.process = None;
                    return Err(MemberError::Exited(
                        m.name.clone(),
                        self.dir.path().to_owned(),
                    ));
                }
                if answers(&m.client_url).await {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(MemberError::NotReady(
                        READY_TIMEOUT,
                        self.dir.path().to_owned(),
                    ));
                }
                // As in `ready`: nothing to wait on but the port.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// The members' client URLs, for `--etcd-servers`.
    pub fn client_urls(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// Where the members keep their data and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id of member `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].process.as_ref().map(Child::id)
    }

    /// Whether etcd still answers a read of `key` as of `revision`; false once that history was
    /// compacted away. etcd announces a compaction to no one, so a test of compaction asks this.
    pub async fn has_history_at(
        &self,
        key: &str,
        revision: i64,
    ) -> Result<bool, etcd_client::Error> {
        let mut client = etcd_client::Client::connect(self.client_urls(), None).await?;
        let options = etcd_client::GetOptions::new().with_revision(revision);
        match client.get(key, Some(options)).await {
            Ok(_) => Ok(true),
            Err(etcd_client::Error::GRpcStatus(status))
                if status.code() == tonic::Code::OutOfRange =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The member the others follow, as the running members report it (`None` while they have no
    /// leader). Tests use it to take down a follower or the leader on purpose.
    pub async fn leader(&self) -> Option<usize> {
        for m in self.members.iter().filter(|m| m.process.is_some()) {
            let Ok(mut client) = etcd_client::Client::connect([&m.client_url], None).await else {
                continue;
            };
            let Ok(Ok(status)) =
                tokio::time::timeout(Duration::from_secs(1), client.status()).await
            else {
                continue;
            };
            if status.leader() == 0 {
                continue;
            }
            let Ok(members) = client.member_list().await else {
                continue;
            };
            let leader = members
                .members()
                .iter()
                .find(|member| member.id() == status.leader())?;
            return self.members.iter().position(|m| m.name == leader.name());
        }
        None
    }

    /// Kills member `i` (SIGKILL: no goodbye to the others), keeping its data.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].process.take() {
            // Already gone is as good as killed.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` (again), on its ports and data; a restarted member rejoins the cluster.
    pub fn start_member(&mut self, i: usize) -> Result<(), MemberError> {
        if self.members[i].process.is_some() {
            return Ok(());
        }
        let m = &self.members[i];
        std::fs::create_dir_all(&m.data_dir)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))?;
        let child = Command::new(&self.binary)
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &m.client_url])
            .args(["--advertise-client-urls", &m.client_url])
            .args(["--listen-peer-urls", &m.peer_url])
            .args(["--initial-advertise-peer-urls", &m.peer_url])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "rollwright-test"])
            // etcd's largest recommended quota, as large clusters run it: a 65,000-node benchmark
            // writes past the 2 GiB default before the API server's first compaction (ten
            // minutes in), and etcd then refuses every write.
            .args(["--quota-backend-bytes", "8589934592"])
            // No metrics listener or HTTP gateway beyond the client port, and quiet logs.
            .args(["--log-level", "warn", "--logger", "zap"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.members[i].process = Some(child);
        Ok(())
    }

    /// Waits until the members at `urls` answer a linearizable read (so a quorum is up).
    pub async fn ready(&self, urls: &[String]) -> Result<(), MemberError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let opts = EtcdOptions {
            request_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_millis(500),
            ..EtcdOptions::default()
        };
        loop {
            if let Ok(store) = EtcdStore::connect(urls, opts.clone()).await
                && store.current_revision().await.is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(MemberError::NotReady(
                    READY_TIMEOUT,
                    self.dir.path().to_owned(),
                ));
            }
            // etcd offers nothing to wait on before it listens: poll its port until it answers.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// Whether the member at `url` answers a status request within a second.
async fn answers(url: &str) -> bool {
    let Ok(Ok(mut client)) = tokio::time::timeout(
        Duration::from_secs(1),
        etcd_client::Client::connect([url], None),
    )
    .await
    else {
        return false;
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), client.status()).await,
        Ok(Ok(_))
    )
}

/// A loopback port nothing listens on now (the OS's choice; it could be taken before etcd binds
/// it, which the readiness wait then reports).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
