//! The end-to-end harness: a control plane on a free loopback port, real `kubectl` and `kube`
//! clients against it.

#![allow(dead_code)]

use rollwright::control_plane::{ControlPlane, Options, StoreKind};
use std::{path::PathBuf, process::Output, time::Duration};

/// The kubectl every machine of this kind has (a dispatcher that picks a bundled kubectl close to
/// the server's version).
pub const KUBECTL: &str = "/usr/bin/kubectl";

/// A control plane started for one test, with its own data directory.
pub struct Cluster {
    pub cp: ControlPlane,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts a control plane on a free loopback port with a SQLite store in a temporary directory.
    pub async fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let cp = ControlPlane::start(Options {
            data_dir: dir.path().to_path_buf(),
            port: 0,
            store: StoreKind::Sqlite,
            ..Default::default()
        })
        .await
        .expect("control plane starts");
        Cluster { cp, dir }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.cp.kubeconfig.clone()
    }

    pub async fn client(&self) -> kube::Client {
        self.cp.client().await.expect("kube client")
    }

    /// Runs kubectl with this cluster's kubeconfig; stdin is fed when given.
    pub async fn kubectl_raw(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = tokio::process::Command::new(KUBECTL);
        cmd.args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path())
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(if stdin.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(input) = stdin {
            use tokio::io::AsyncWriteExt;
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(input.as_bytes()).await.expect("write stdin");
            drop(pipe);
        }
        tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finishes within a minute")
            .expect("kubectl output")
    }

    /// Runs kubectl and returns stdout, failing the test with kubectl's stderr if it fails.
    pub async fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_raw(args, None).await;
        assert!(
            out.status.success(),
            "kubectl {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl with `input` on stdin (`-f -`), expecting success.
    pub async fn kubectl_stdin(&self, args: &[&str], input: &str) -> String {
        let out = self.kubectl_raw(args, Some(input)).await;
        assert!(
            out.status.success(),
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub async fn kubectl_fails(&self, args: &[&str], input: Option<&str>) -> String {
        let out = self.kubectl_raw(args, input).await;
        assert!(!out.status.success(), "kubectl {} unexpectedly succeeded: {}", args.join(" "), String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    pub async fn stop(self) {
        self.cp.stop().await;
    }
}

/// A Deployment manifest.
pub fn deployment_yaml(name: &str, replicas: u32, image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: app
        image: {image}
        ports:
        - containerPort: 80
"#
    )
}
