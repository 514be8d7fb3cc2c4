//! The end-to-end harness: a control plane on a free loopback port, real `kubectl` and `kube`
//! clients against it.

#![allow(dead_code)]

pub mod etcd;
pub mod pod_watch;
pub mod process;
pub mod upstream;

use rollwright::control_plane::{ControlPlane, Options, StoreKind};
use std::{path::PathBuf, process::Output, time::Duration};

/// The kubectl every machine of this kind has (a dispatcher that picks a bundled kubectl close to
/// the server's version).
pub const KUBECTL: &str = "/usr/bin/kubectl";

/// A control plane started for one test, with its own data directory: rollwright's own, or in a
/// cross-run ([`upstream`]) upstream's kube-apiserver with rollwright's parts as its clients.
pub struct Cluster {
    own: Option<ControlPlane>,
    upstream: Option<Upstream>,
    pub dir: tempfile::TempDir,
}

/// Upstream's API server and the parts a test started against it.
struct Upstream {
    server: upstream::ApiServer,
    parts: Option<upstream::Parts>,
}

impl Cluster {
    /// Starts a control plane on a free loopback port with a SQLite store in a temporary directory.
    pub async fn start() -> Cluster {
        Cluster::start_with(Default::default()).await
    }

    /// A cluster on rollwright's own control plane.
    pub fn own(cp: ControlPlane, dir: tempfile::TempDir) -> Cluster {
        Cluster {
            own: Some(cp),
            upstream: None,
            dir,
        }
    }

    /// Rollwright's control plane, for the tests that reach into it (its in-process server, its
    /// token, a restart); such tests are not part of a cross-run.
    pub fn cp(&self) -> &ControlPlane {
        self.own
            .as_ref()
            .expect("this test needs rollwright's own API server, not upstream's")
    }

    /// Stops what rollwright runs of this cluster and starts it again with `components`: the
    /// whole control plane on its (SQLite) data directory, or on upstream's API server the parts.
    pub async fn restart_with(self, components: rollwright::components::Components) -> Cluster {
        let Cluster { own, upstream, dir } = self;
        if let Some(mut u) = upstream {
            if let Some(parts) = u.parts.take() {
                parts.stop().await;
            }
            u.parts = Some(u.server.start(&components));
            return Cluster {
                own: None,
                upstream: Some(u),
                dir,
            };
        }
        // Only SQLite keeps its data in the directory across a restart.
        let cp = own.expect("a cluster has a control plane");
        cp.stop().await;
        let cp = ControlPlane::start(Options {
            data_dir: dir.path().to_path_buf(),
            port: 0,
            store: StoreKind::Sqlite,
            components,
            ..Default::default()
        })
        .await
        .expect("control plane restarts");
        Cluster::own(cp, dir)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        match (&self.own, &self.upstream) {
            (Some(cp), _) => cp.kubeconfig.clone(),
            (None, Some(u)) => u.server.kubeconfig.clone(),
            (None, None) => unreachable!("a cluster has a control plane"),
        }
    }

    /// The CA a controller process started by a test publishes as `kube-root-ca.crt` when its
    /// kubeconfig names none (upstream's server, reached without verifying its certificate):
    /// `--root-ca-file`, as a cluster's controller manager is given it.
    pub fn root_ca_file(&self) -> Option<PathBuf> {
        self.upstream
            .as_ref()
            .map(|u| u.server.root_ca_file.clone())
    }

    /// A client over HTTPS, as any client connects.
    pub async fn client(&self) -> kube::Client {
        match (&self.own, &self.upstream) {
            (Some(cp), _) => cp.client().await.expect("kube client"),
            (None, Some(u)) => u.server.client.clone(),
            (None, None) => unreachable!("a cluster has a control plane"),
        }
    }

    /// An admin client the test itself uses: in-process on rollwright's own server (cheaper),
    /// over HTTPS on upstream's.
    pub fn admin_client(&self) -> kube::Client {
        match (&self.own, &self.upstream) {
            (Some(cp), _) => embedded::client_for(&cp.server),
            (None, Some(u)) => u.server.client.clone(),
            (None, None) => unreachable!("a cluster has a control plane"),
        }
    }

    /// Runs kubectl with this cluster's kubeconfig; stdin is fed when given.
    pub async fn kubectl_raw(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.run_raw(KUBECTL, args, stdin).await
    }

    /// Runs `program` with this cluster's kubeconfig and a home of its own; stdin is fed when
    /// given.
    pub async fn run_raw(&self, program: &str, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path())
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(if stdin.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("the program runs");
        if let Some(input) = stdin {
            use tokio::io::AsyncWriteExt;
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(input.as_bytes()).await.expect("write stdin");
            drop(pipe);
        }
        // A bound so a hung program fails the test instead of CI, generous because a 2-core
        // machine running the suite's tests two at a time can take a while over a rollout.
        tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
            .await
            .expect("the program finishes within three minutes")
            .expect("its output")
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

    /// Writes to `resource` (`daemonsets/status`) the server has refused with 409 Conflict so
    /// far, from its `/metrics`.
    pub async fn conflicts(&self, resource: &str) -> f64 {
        let metrics = self.kubectl(&["get", "--raw", "/metrics"]).await;
        let resource = format!("resource=\"{resource}\"");
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("apiserver_request_total{")
                    && l.contains(&resource)
                    && l.contains(r#"code="409""#)
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
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
        assert!(
            !out.status.success(),
            "kubectl {} unexpectedly succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Runs kubectl and parses its stdout as JSON (for `-o json`).
    pub async fn kubectl_json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.kubectl(args).await;
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("kubectl {} printed no JSON ({e}): {out}", args.join(" ")))
    }

    /// Starts a long-running kubectl (`get -w`) whose stdout the test reads line by line.
    pub fn kubectl_spawn(&self, args: &[&str]) -> LineReader {
        self.spawn(KUBECTL, args)
    }

    /// Starts a long-running `program` whose stdout the test reads line by line.
    pub fn spawn(&self, program: &str, args: &[&str]) -> LineReader {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path())
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the program runs");
        let stdout = child.stdout.take().expect("stdout");
        LineReader {
            lines: tokio::io::BufReader::new(stdout).lines(),
            seen: Vec::new(),
            _child: child,
        }
    }

    pub async fn stop(self) {
        if let Some(cp) = self.own {
            cp.stop().await;
        }
        if let Some(parts) = self.upstream.and_then(|u| u.parts) {
            parts.stop().await;
        }
    }
}

use tokio::io::AsyncBufReadExt as _;

/// The stdout of a child process, read line by line up to a deadline.
pub struct LineReader {
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    /// Every line read so far.
    pub seen: Vec<String>,
    _child: tokio::process::Child,
}

impl LineReader {
    /// Reads lines until one satisfies `want`; fails the test with what was read if the deadline
    /// passes or the child ends first.
    pub async fn until(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let found = tokio::time::timeout(DEADLINE, async {
            while let Ok(Some(line)) = self.lines.next_line().await {
                self.seen.push(line.clone());
                if want(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!(
                "no line for {what} arrived; read so far:\n{}",
                self.seen.join("\n")
            ),
        }
    }
}

/// How long a test waits for something that should happen promptly.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Waits for an event in `namespace` with `reason` whose message contains `message`, about the
/// object named `object` if given. Recorders write events on their own queue, as upstream's do, so
/// an event may land just after the change it describes: a test waits for it rather than reading
/// once.
pub async fn wait_event(
    client: kube::Client,
    namespace: &str,
    object: Option<&str>,
    reason: &str,
    message: &str,
) -> k8s_openapi::api::core::v1::Event {
    let api: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(client, namespace);
    let what = format!("a {reason} event on {object:?} saying {message:?}");
    embedded::wait_until(&api, &what, DEADLINE, |e| {
        object.is_none_or(|o| e.involved_object.name.as_deref() == Some(o))
            && e.reason.as_deref() == Some(reason)
            && e.message.as_deref().is_some_and(|m| m.contains(message))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A Pod manifest with labels.
pub fn pod_yaml(name: &str, labels: &[(&str, &str)]) -> String {
    let labels: String = labels
        .iter()
        .map(|(k, v)| format!("    {k}: \"{v}\"\n"))
        .collect();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n{labels}    pod: {name}\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n"
    )
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

impl Cluster {
    /// Starts a control plane that runs `components` in-process beside the API server, as
    /// `rollwright up` does (with the test's choice of nodes, delays and fault profile).
    pub async fn start_with(components: rollwright::components::Components) -> Cluster {
        Cluster::start_with_options(components, |_| {}).await
    }

    /// [`Cluster::start_with`], with `adjust` changing the other options (an audit log...).
    pub async fn start_with_options(
        components: rollwright::components::Components,
        adjust: impl FnOnce(&mut Options),
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        if let Some(reference) = upstream::reference() {
            let server = reference.start(dir.path()).await;
            let parts = server.start(&components);
            return Cluster {
                own: None,
                upstream: Some(Upstream {
                    server,
                    parts: Some(parts),
                }),
                dir,
            };
        }
        let mut options = Options {
            data_dir: dir.path().to_path_buf(),
            port: 0,
            store: StoreKind::Sqlite,
            components,
            ..Default::default()
        };
        adjust(&mut options);
        let cp = ControlPlane::start(options)
            .await
            .expect("control plane starts");
        Cluster::own(cp, dir)
    }

    /// Starts a control plane running only the controllers named (no nodes, no scheduler).
    pub async fn with_controllers(names: &[&str]) -> Cluster {
        Cluster::start_with(rollwright::components::Components {
            controllers: Some(rollwright::components::ControllerSettings {
                enabled: controllers::Selection::only(names.iter().copied()),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
    }

    /// Starts more parts on this cluster's in-process API, apart from the control plane's own,
    /// so that a test can stop them (a crash) and start new ones on the same server. Each part
    /// acts as its own user, as in `rollwright up`, so that it holds only its role's rights.
    pub fn start_parts(&self, what: &rollwright::components::Components) -> upstream::Parts {
        if let Some(u) = &self.upstream {
            return u.server.start(what);
        }
        let users = embedded::Users::new(&self.cp().server);
        upstream::Parts::one(
            rollwright::components::start_with_identities(
                what,
                std::sync::Arc::new(move |user| users.client(user)),
            )
            .expect("parts start"),
        )
    }
}

/// A whole cluster — simulated nodes under a fault profile, the scheduler and the controllers —
/// whose scheduler and controllers a test can stop and start again (to freeze a rollout with pods
/// Pending, or to crash the controllers mid-rollout).
pub struct Rig {
    pub c: Cluster,
    /// An in-process client of the cluster's API server.
    pub client: kube::Client,
    scheduler: Option<upstream::Parts>,
    controllers: Option<upstream::Parts>,
    _profile: tempfile::TempDir,
}

impl Rig {
    /// Starts `nodes` with the fault profile `profile` (YAML), then the scheduler and controllers.
    pub async fn start(nodes: nodesim::NodeSim, profile: &str) -> Rig {
        let dir = tempfile::tempdir().expect("profile dir");
        let path = dir.path().join("faults.yaml");
        std::fs::write(&path, profile).expect("profile written");
        let c = Cluster::start_with(rollwright::components::Components {
            nodes: Some(nodes),
            profile: Some(path),
            ..Default::default()
        })
        .await;
        let client = c.admin_client();
        Rig {
            c,
            client,
            scheduler: None,
            controllers: None,
            _profile: dir,
        }
    }

    /// Starts the scheduler and the controllers (a fresh instance of each).
    pub fn start_scheduler_and_controllers(&mut self) {
        self.start_scheduler();
        self.start_controllers();
    }

    pub fn start_scheduler(&mut self) {
        assert!(self.scheduler.is_none(), "the scheduler is already running");
        self.scheduler = Some(self.c.start_parts(&rollwright::components::Components {
            scheduler: Some(Default::default()),
            ..Default::default()
        }));
    }

    pub async fn stop_scheduler(&mut self) {
        self.scheduler
            .take()
            .expect("the scheduler runs")
            .stop()
            .await;
    }

    pub fn start_controllers(&mut self) {
        assert!(
            self.controllers.is_none(),
            "the controllers are already running"
        );
        self.controllers = Some(self.c.start_parts(&rollwright::components::Components {
            controllers: Some(Default::default()),
            ..Default::default()
        }));
    }

    pub async fn stop_controllers(&mut self) {
        self.controllers
            .take()
            .expect("the controllers run")
            .stop()
            .await;
    }

    pub async fn stop(mut self) {
        if let Some(c) = self.controllers.take() {
            c.stop().await;
        }
        if let Some(s) = self.scheduler.take() {
            s.stop().await;
        }
        self.c.stop().await;
    }

    pub async fn kubectl(&self, args: &[&str]) -> String {
        self.c.kubectl(args).await
    }

    /// `kubectl apply -f -` of a manifest.
    pub async fn apply(&self, manifest: &serde_json::Value) {
        self.c
            .kubectl_stdin(&["apply", "-f", "-"], &manifest.to_string())
            .await;
    }
}

/// The rollwright binary under test.
pub const ROLLWRIGHT: &str = env!("CARGO_BIN_EXE_rollwright");

impl Cluster {
    /// Runs the rollwright CLI against this cluster.
    pub async fn rollwright_raw(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.run_raw(ROLLWRIGHT, args, stdin).await
    }

    /// Runs the rollwright CLI and returns stdout, failing the test with stderr if it fails.
    pub async fn rollwright(&self, args: &[&str]) -> String {
        let out = self.rollwright_raw(args, None).await;
        assert!(
            out.status.success(),
            "rollwright {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the rollwright CLI expecting failure; returns (stdout, stderr).
    pub async fn rollwright_fails(&self, args: &[&str], stdin: Option<&str>) -> (String, String) {
        let out = self.rollwright_raw(args, stdin).await;
        assert!(
            !out.status.success(),
            "rollwright {} unexpectedly succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Starts a long-running rollwright CLI command whose stdout the test reads line by line.
    pub fn rollwright_spawn(&self, args: &[&str]) -> LineReader {
        self.spawn(ROLLWRIGHT, args)
    }
}

impl LineReader {
    /// Waits for the child to exit (after its output was read) and returns its exit status.
    pub async fn exit_status(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(DEADLINE, self._child.wait())
            .await
            .expect("the program exits in time")
            .expect("its exit status")
    }
}
