//! `rollwright` subcommands as processes of their own, as they run on a real cluster: an API
//! server started apart, and the scheduler, controllers and simulated nodes against its
//! kubeconfig.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

/// Starts `rollwright apiserver --port 0 --data-dir DIR EXTRA...` and waits for its "listening"
/// line; the kubeconfig is then `DIR/kubeconfig`.
pub async fn spawn_apiserver(dir: &Path, extra: &[String]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rollwright"))
        .args(["apiserver", "--port", "0", "--data-dir"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("server starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("listening on https://") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(ready, "server printed its address");
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

/// Starts `rollwright ARGS... --kubeconfig KUBECONFIG` (a part against a cluster), its log in
/// `log` when given.
pub fn spawn_part(args: &[&str], kubeconfig: &Path, log: Option<PathBuf>) -> Child {
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path).expect("log file")),
        None => Stdio::null(),
    };
    Command::new(env!("CARGO_BIN_EXE_rollwright"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("part starts")
}

/// A `kube` client from the kubeconfig a server wrote into `dir`.
pub async fn client(dir: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfig")).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}
