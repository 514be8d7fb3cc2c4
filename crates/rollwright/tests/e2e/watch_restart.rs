//! A `kube::runtime::watcher` across server restarts: it must end up with exactly the objects the
//! server holds, by resuming where it was when the server still has that history, and by relisting
//! after the server's `410 Expired` when it does not.

use crate::common;

use common::DEADLINE;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client,
    api::{
        DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent,
        WatchParams,
    },
    runtime::{WatchStreamExt, reflector, watcher},
};
use serde_json::json;
use std::{
    collections::BTreeSet,
    path::Path,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};
use tokio::io::{AsyncBufReadExt, BufReader};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    }))
    .expect("pod")
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn client_from(kubeconfig: &Path) -> Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    Client::try_from(cfg).expect("client")
}

/// A reflector over the pods of `default`, driven in the background. The receiver holds the names
/// in its store after every event; the counter counts the (re)lists the watcher started.
struct Reflected {
    names: tokio::sync::watch::Receiver<BTreeSet<String>>,
    store: reflector::Store<Pod>,
    lists: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Reflected {
    fn start(client: Client) -> Self {
        let pods: Api<Pod> = Api::default_namespaced(client);
        let (store, writer) = reflector::store::<Pod>();
        let (tx, names) = tokio::sync::watch::channel(BTreeSet::new());
        let lists = Arc::new(AtomicUsize::new(0));
        let counted = lists.clone();
        let reader = store.clone();
        let task = tokio::spawn(async move {
            let events = watcher(pods, watcher::Config::default())
                .default_backoff()
                .inspect_ok(|ev| {
                    if matches!(ev, watcher::Event::Init) {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                });
            let mut events = reflector(writer, events).boxed();
            while let Some(ev) = events.next().await {
                if ev.is_ok() {
                    tx.send_replace(
                        reader
                            .state()
                            .iter()
                            .filter_map(|p| p.metadata.name.clone())
                            .collect(),
                    );
                }
            }
        });
        Self {
            names,
            store,
            lists,
            task,
        }
    }

    /// Waits until the store holds exactly `want`.
    async fn until(&mut self, want: &BTreeSet<String>) {
        let reached =
            tokio::time::timeout(DEADLINE, self.names.wait_for(|have| have == want)).await;
        assert!(
            reached.is_ok_and(|r| r.is_ok()),
            "the watcher's store never became {want:?}; it has {:?}",
            *self.names.borrow()
        );
    }
}

impl Drop for Reflected {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A `rollwright apiserver` child process.
struct Server {
    child: tokio::process::Child,
    port: u16,
}

impl Server {
    /// Starts the server on `port` (0: a free one) and waits for its "listening" line.
    async fn start(dir: &Path, port: u16) -> Server {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rollwright"))
            .args(["apiserver", "--port", &port.to_string(), "--data-dir"])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("server starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let listening = tokio::time::timeout(DEADLINE, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(addr) = line.split("listening on https://").nth(1) {
                    return addr
                        .rsplit(':')
                        .next()
                        .and_then(|p| p.trim().parse::<u16>().ok());
                }
            }
            None
        })
        .await;
        let port = match listening {
            Ok(Some(p)) => p,
            other => panic!("the server did not say where it listens: {other:?}"),
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Server { child, port }
    }

    /// SIGTERM, and waits for the clean exit.
    async fn terminate(mut self) {
        let pid = self.child.id().expect("running").to_string();
        let sent = tokio::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("kill runs");
        assert!(sent.success());
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("exits on SIGTERM")
            .expect("wait");
        assert!(status.success(), "a clean shutdown exits 0: {status:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_survives_server_restarts() {
    let dir = tempfile::tempdir().expect("dir");
    let server = Server::start(dir.path(), 0).await;
    let port = server.port;
    let kubeconfig = dir.path().join("kubeconfig");
    let client = client_from(&kubeconfig).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut reflected = Reflected::start(client.clone());

    for name in ["a0", "a1", "a2"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .expect("create");
    }
    reflected.until(&names(&["a0", "a1", "a2"])).await;

    // Restart with nothing written in between: the watcher resumes from where it was.
    server.terminate().await;
    let server = Server::start(dir.path(), port).await;
    assert_eq!(server.port, port, "restarted on the same port");
    pods.create(&PostParams::default(), &pod("b0"))
        .await
        .expect("create after restart");
    pods.delete("a1", &DeleteParams::default())
        .await
        .expect("delete after restart");
    pods.patch(
        "a0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"after": "restart"}}})),
    )
    .await
    .expect("label after restart");
    reflected.until(&names(&["a0", "a2", "b0"])).await;
    let labelled = tokio::time::timeout(DEADLINE, async {
        loop {
            let a0 = reflected
                .store
                .get(&reflector::ObjectRef::new("a0").within("default"));
            if a0.is_some_and(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key("after"))
            }) {
                return;
            }
            reflected.names.changed().await.expect("reflector running");
        }
    })
    .await;
    assert!(
        labelled.is_ok(),
        "the watcher saw the change made after the restart"
    );

    // Restart after a write the pod watcher does not see: its revision is now older than the
    // restarted server's history, so it gets 410 and must relist. More pods change meanwhile.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n1"}})).expect("node"),
        )
        .await
        .expect("node");
    server.terminate().await;
    let server = Server::start(dir.path(), port).await;
    pods.delete("a2", &DeleteParams::default())
        .await
        .expect("delete after second restart");
    for name in ["c0", "c1"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .expect("create after second restart");
    }
    let want = names(&["a0", "b0", "c0", "c1"]);
    reflected.until(&want).await;
    let listed: BTreeSet<String> = pods
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(listed, want, "the server agrees");
    server.terminate().await;
}

/// An API server in this process with a short watch history, served on two ports: the watcher's,
/// which the test cuts and restores, and the writers', which stays up.
struct InProcess {
    server: apiserver::ApiServer,
    credentials: apiserver::tls::Credentials,
    dir: tempfile::TempDir,
}

struct Serving {
    port: u16,
    shutdown: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl InProcess {
    async fn start(history: usize) -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let credentials = apiserver::tls::Credentials::load_or_create(&dir.path().join("pki"))
            .expect("credentials");
        let server = apiserver::ApiServer::start(
            Arc::new(store::memory::MemoryStore::new()),
            apiserver::ServerOptions {
                token: Some(credentials.token.clone()),
                history,
                ..Default::default()
            },
        )
        .await
        .expect("server starts");
        Self {
            server,
            credentials,
            dir,
        }
    }

    async fn serve(&self, port: u16) -> Serving {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (shutdown, rx) = tokio::sync::oneshot::channel::<()>();
        let tls = self.credentials.server_config().expect("tls");
        let task = tokio::spawn(apiserver::serve_tls(
            listener,
            self.server.router(),
            tls,
            async {
                let _ = rx.await;
            },
        ));
        Serving {
            port,
            shutdown,
            task,
        }
    }

    async fn client(&self, port: u16) -> Client {
        let path = self.dir.path().join(format!("kubeconfig-{port}"));
        std::fs::write(&path, self.credentials.kubeconfig("127.0.0.1", port)).expect("kubeconfig");
        client_from(&path).await
    }
}

impl Serving {
    /// Stops serving; returns once every connection (the watcher's too) is closed.
    async fn stop(self) -> u16 {
        let _ = self.shutdown.send(());
        self.task.await.expect("server task");
        self.port
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_too_old_revision_is_gone_and_the_watcher_relists() {
    let ip = InProcess::start(16).await;
    let watched = ip.serve(0).await;
    let writers = ip.serve(0).await;
    let pods: Api<Pod> = Api::default_namespaced(ip.client(writers.port).await);
    let mut reflected = Reflected::start(ip.client(watched.port).await);

    let first = pods
        .create(&PostParams::default(), &pod("keep-0"))
        .await
        .expect("create");
    let old_rv = first.metadata.resource_version.clone().expect("rv");
    reflected.until(&names(&["keep-0"])).await;
    assert_eq!(reflected.lists.load(Ordering::SeqCst), 1);

    // Cut the watcher off, and change more than the history holds while it is away.
    let port = watched.stop().await;
    let mut want = BTreeSet::new();
    for i in 0..40 {
        let name = format!("x{i:02}");
        pods.create(&PostParams::default(), &pod(&name))
            .await
            .expect("create");
        want.insert(name);
    }
    pods.delete("keep-0", &DeleteParams::default())
        .await
        .expect("delete");

    // A watch from the old revision is answered with one 410 Expired error event.
    let mut stream = pods
        .watch(&WatchParams::default(), &old_rv)
        .await
        .expect("watch")
        .boxed();
    let first_event = tokio::time::timeout(DEADLINE, stream.try_next())
        .await
        .expect("an event")
        .expect("decodes");
    match first_event {
        Some(WatchEvent::Error(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (410, "Expired"),
                "{status:?}"
            );
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    // So is an exact list at it: the history that would rebuild it is gone.
    let err = pods
        .list(
            &ListParams::default()
                .at(&old_rv)
                .matching(VersionMatch::Exact),
        )
        .await;
    match err {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{s:?}")
        }
        other => panic!("expected 410, got {other:?}"),
    }
    // From a recent revision the same watch replays what followed it.
    let recent = pods
        .list(&ListParams::default().labels("nothing=here"))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    pods.create(&PostParams::default(), &pod("x99"))
        .await
        .expect("create");
    want.insert("x99".into());
    let mut stream = pods
        .watch(&WatchParams::default(), &recent)
        .await
        .expect("watch")
        .boxed();
    match tokio::time::timeout(DEADLINE, stream.try_next())
        .await
        .expect("an event")
        .expect("decodes")
    {
        Some(WatchEvent::Added(p)) => assert_eq!(p.metadata.name.as_deref(), Some("x99")),
        other => panic!("expected x99 ADDED, got {other:?}"),
    }

    // Back on the same port: the watcher's resume gets 410, it relists, and its store is exact.
    let watched = ip.serve(port).await;
    reflected.until(&want).await;
    assert_eq!(
        reflected.lists.load(Ordering::SeqCst),
        2,
        "one relist after the 410"
    );
    watched.stop().await;
    writers.stop().await;
}
