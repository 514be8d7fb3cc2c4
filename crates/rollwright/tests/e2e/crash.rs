//! Crash safety of the whole server: a child `rollwright apiserver` takes 1,000 concurrent creates,
//! is killed with SIGKILL half-way, and is started again on the same data directory. Every create
//! it acknowledged must be there, whole, and it must take writes again at once. On etcd, the etcd
//! members are killed with the server.

use crate::common;

use futures::{StreamExt, stream::FuturesUnordered};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use std::{collections::HashSet, path::Path, time::Duration};

/// The store under the server, and how it crashes with it.
trait Backend {
    /// The `rollwright apiserver` flags that select it.
    fn args(&self) -> Vec<String>;
    /// Kills what runs beside the server (SIGKILL), at the moment the server is killed.
    fn crash(&mut self) {}
    /// Starts it again before the server restarts.
    async fn recover(&mut self) {}
}

/// SQLite in the data directory.
struct Sqlite;

impl Backend for Sqlite {
    fn args(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A one-member etcd, killed with the server.
struct Etcd(store::etcd::member::LocalCluster);

impl Backend for Etcd {
    fn args(&self) -> Vec<String> {
        vec![
            "--store".into(),
            "etcd".into(),
            "--etcd-servers".into(),
            self.0.client_urls().join(","),
        ]
    }

    fn crash(&mut self) {
        self.0.kill(0);
    }

    async fn recover(&mut self) {
        self.0.start_member(0).expect("etcd restarts");
        self.0
            .ready(&self.0.client_urls())
            .await
            .expect("etcd answers again");
    }
}

/// Starts `rollwright apiserver` on a free port on `store`.
async fn spawn_server(dir: &Path, store: &impl Backend) -> tokio::process::Child {
    common::process::spawn_apiserver(dir, &store.args()).await
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("crash-{i}"), "labels": {"i": i.to_string()}},
        "spec": {"containers": [{"name": "c", "image": format!("img:{i}")}]}
    }))
    .expect("pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_creates_survive_kill_9() {
    acknowledged_creates_survive(Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_creates_survive_kill_9_on_etcd() {
    let Some(etcd) = common::etcd::start_etcd(1).await else {
        return;
    };
    acknowledged_creates_survive(Etcd(etcd)).await;
}

async fn acknowledged_creates_survive(mut store: impl Backend) {
    let dir = tempfile::tempdir().expect("dir");
    let mut child = spawn_server(dir.path(), &store).await;
    let pods: Api<Pod> = Api::namespaced(common::process::client(dir.path()).await, "default");

    let (acked_tx, mut acked_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let creator = tokio::spawn(async move {
        let mut inflight = FuturesUnordered::new();
        for i in 0..1000 {
            let pods = pods.clone();
            let acked = acked_tx.clone();
            inflight.push(async move {
                if pods.create(&PostParams::default(), &pod(i)).await.is_ok() {
                    let _ = acked.send(i);
                }
            });
            // At most 64 in flight, as many concurrent clients would be.
            if inflight.len() >= 64 {
                inflight.next().await;
            }
        }
        while inflight.next().await.is_some() {}
    });

    let mut acked = HashSet::new();
    while acked.len() < 300 {
        let i = tokio::time::timeout(Duration::from_secs(60), acked_rx.recv())
            .await
            .expect("creates are acknowledged")
            .expect("creator alive");
        acked.insert(i);
    }
    child.start_kill().expect("SIGKILL");
    store.crash();
    child.wait().await.expect("child reaped");
    // Whatever else was acknowledged before the kill counts too.
    let _ = creator.await;
    while let Ok(i) = acked_rx.try_recv() {
        acked.insert(i);
    }
    assert!(
        acked.len() < 1000,
        "the kill came mid-way ({} acknowledged)",
        acked.len()
    );

    store.recover().await;
    let _child = spawn_server(dir.path(), &store).await;
    let pods: Api<Pod> = Api::namespaced(common::process::client(dir.path()).await, "default");
    let list = pods
        .list(&ListParams::default())
        .await
        .expect("list after restart");
    let present: HashSet<String> = list
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    for i in &acked {
        assert!(
            present.contains(&format!("crash-{i}")),
            "acknowledged pod crash-{i} was lost"
        );
    }
    for p in &list.items {
        let i: usize = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("i"))
            .and_then(|v| v.parse().ok())
            .expect("label intact");
        let image = p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone());
        assert_eq!(image, Some(format!("img:{i}")), "pod is whole");
    }
    pods.create(&PostParams::default(), &pod(5000))
        .await
        .expect("writes accepted again");
}
