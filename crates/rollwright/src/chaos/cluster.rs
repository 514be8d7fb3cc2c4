//! The cluster under fire: a child `rollwright up --controllers=` (no controllers) (API server over SQLite,
//! scheduler, simulated nodes) and a child `rollwright controllers`, on one data directory, each
//! killed with SIGKILL and started again on demand. Their logs go to files in the data directory,
//! appended across restarts.

use anyhow::Context;
use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

/// How long a restarted API server may take to answer before the run gives up.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The children and what is needed to start them again.
pub(crate) struct Cluster {
    bin: PathBuf,
    pub dir: PathBuf,
    nodes: usize,
    profile: PathBuf,
    /// The port, fixed after the first start so that the kubeconfig stays valid.
    port: u16,
    control_plane: Option<Child>,
    controllers: Option<Child>,
}

impl Cluster {
    /// Starts both children on `dir` and waits until the API server answers.
    pub async fn start(dir: &Path, nodes: usize, profile: PathBuf) -> anyhow::Result<Self> {
        let mut c = Self {
            bin: std::env::current_exe().context("finding the rollwright binary")?,
            dir: dir.to_path_buf(),
            nodes,
            profile,
            port: 0,
            control_plane: None,
            controllers: None,
        };
        c.start_control_plane().await?;
        c.start_controllers()?;
        Ok(c)
    }

    /// The kubeconfig the control plane wrote.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    fn log(&self, name: &str) -> anyhow::Result<std::fs::File> {
        let path = self.dir.join(name);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))
    }

    /// Starts `rollwright up` and waits for its "listening" line.
    async fn start_control_plane(&mut self) -> anyhow::Result<()> {
        let mut child = Command::new(&self.bin)
            .arg("up")
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--port", &self.port.to_string()])
            .args(["--nodes", &self.nodes.to_string()])
            .arg("--profile")
            .arg(&self.profile)
            .arg("--controllers=")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(self.log("control-plane.log")?)
            .kill_on_drop(true)
            .spawn()
            .context("starting rollwright up")?;
        let stdout = child.stdout.take().context("control plane stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(START_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(addr) = line.strip_prefix("rollwright API server listening on https://")
                {
                    return Some(addr.to_string());
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .with_context(|| {
            format!(
                "the control plane did not start; see {}",
                self.dir.join("control-plane.log").display()
            )
        })?;
        // Keep draining stdout so that the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.port = addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .context("the control plane printed no port")?;
        self.control_plane = Some(child);
        Ok(())
    }

    fn start_controllers(&mut self) -> anyhow::Result<()> {
        let child = Command::new(&self.bin)
            .arg("controllers")
            // One controllers process at a time: waiting out a killed leader's Lease (15 s) at
            // every restart would leave the rollouts without controllers between kills.
            .arg("--leader-elect=false")
            // No status endpoint: a killed process's successor must not wait for its port.
            .arg("--secure-port=0")
            // Unlimited, as before client rate limits existed, so that recovery times stay
            // comparable with RELIABILITY.md's: chaos measures recovery, not client pacing.
            .arg("--kube-api-qps=-1")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log("controllers.log")?)
            .kill_on_drop(true)
            .spawn()
            .context("starting rollwright controllers")?;
        self.controllers = Some(child);
        Ok(())
    }

    /// SIGKILLs the whole control plane (and the controllers with it), starts it again on the
    /// same data directory, and returns how long after the kill the API server answered again.
    pub async fn kill_control_plane(&mut self, client: &kube::Client) -> anyhow::Result<Duration> {
        let killed = Instant::now();
        kill(self.control_plane.take()).await;
        kill(self.controllers.take()).await;
        self.start_control_plane().await?;
        self.start_controllers()?;
        wait_ready(client).await?;
        Ok(killed.elapsed())
    }

    /// SIGKILLs the controllers alone and starts them again.
    pub async fn kill_controllers(&mut self) -> anyhow::Result<()> {
        kill(self.controllers.take()).await;
        self.start_controllers()
    }

    /// Stops both children.
    pub async fn stop(mut self) {
        kill(self.controllers.take()).await;
        kill(self.control_plane.take()).await;
    }
}

/// SIGKILL, and wait until the process is gone (its data directory lock released).
async fn kill(child: Option<Child>) {
    if let Some(mut child) = child {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// Waits until the API server's `/readyz` says ok (it polls: the server is not there to be
/// watched until it answers).
pub(crate) async fn wait_ready(client: &kube::Client) -> anyhow::Result<()> {
    tokio::time::timeout(START_TIMEOUT, async {
        loop {
            let req = http::Request::get("/readyz").body(Vec::new());
            if let Ok(req) = req
                && let Ok(Ok(body)) =
                    tokio::time::timeout(Duration::from_secs(2), client.request_text(req)).await
                && body == "ok"
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .context("the API server did not become ready within a minute")
}
