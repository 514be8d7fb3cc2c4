//! `rollwright bench api`: the API server and store under load.
//!
//! Starts a control plane in this process (SQLite store in a fresh directory), creates pods through
//! HTTPS with concurrent `kube` clients, lists them all, then fans one watch out to many watchers and
//! measures how long events take to reach them.

use super::{peak_rss, quantile, rss};
use crate::control_plane::{ControlPlane, Options, StoreKind};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

/// Options of the API benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct ApiBench {
    /// Pods to create.
    #[arg(long, default_value_t = 100_000)]
    pods: usize,
    /// Concurrent clients creating them.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Watchers for the fan-out phase.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Pods created during the fan-out phase.
    #[arg(long, default_value_t = 1_000)]
    fanout_pods: usize,
    /// Store backend.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// With `--store etcd`: the members' client URLs (default: a one-member etcd on loopback,
    /// started for the run).
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
    /// Data directory (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Make every request as this user (a client certificate, bound to a ClusterRole of what
    /// the benchmark does to pods in `default`), so that RBAC decides each one; by default the
    /// admin token, whom `system:masters` lets through before any authorizer.
    #[arg(long)]
    as_user: Option<String>,
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench", "shard": (name.len() % 7).to_string()}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .unwrap_or_default()
}

/// Runs the benchmark and prints its figures.
pub async fn run(b: ApiBench) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = b
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let etcd = match (b.store, b.etcd_servers.is_empty()) {
        (StoreKind::Etcd, true) => Some(super::meter::BenchEtcd::start().await?),
        _ => None,
    };
    let cp = ControlPlane::start(Options {
        data_dir: dir.clone(),
        port: 0,
        store: b.store,
        etcd_servers: etcd.as_ref().map_or(b.etcd_servers.clone(), |e| e.urls()),
        ..Default::default()
    })
    .await?;
    let client = match &b.as_user {
        None => cp.client().await?,
        Some(user) => user_client(&cp, &dir, user).await?,
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    println!(
        "rollwright bench api: {} pods, {} clients, {} watchers, store {:?}, as {}",
        b.pods,
        b.clients,
        b.watchers,
        b.store,
        b.as_user.as_deref().unwrap_or("the admin (system:masters)")
    );
    let rss_before = rss().unwrap_or(0);

    // Phase 1: concurrent creates.
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..b.clients {
        let pods = pods.clone();
        let next = next.clone();
        let total = b.pods;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                pods.create(&PostParams::default(), &pod(&format!("bench-{i}")))
                    .await?;
                lat.push(t.elapsed());
            }
            anyhow::Ok(lat)
        }));
    }
    let mut lat = Vec::with_capacity(b.pods);
    for t in tasks {
        lat.extend(t.await??);
    }
    let create_time = started.elapsed();
    lat.sort();
    println!(
        "create: {} pods in {:.2}s = {:.0} creates/s; latency p50 {:.2}ms p99 {:.2}ms",
        b.pods,
        create_time.as_secs_f64(),
        b.pods as f64 / create_time.as_secs_f64(),
        quantile(&lat, 0.5).as_secs_f64() * 1e3,
        quantile(&lat, 0.99).as_secs_f64() * 1e3
    );

    // Phase 2: list everything (raw bytes, so client-side decoding is not measured).
    let list_started = Instant::now();
    let req = http::Request::get("/api/v1/namespaces/default/pods").body(Vec::new())?;
    let text = client.request_text(req).await?;
    let list_time = list_started.elapsed();
    let count = text.matches("\"kind\":\"Pod\"").count();
    println!(
        "list: {count} pods, {:.1} MB in {:.3}s",
        text.len() as f64 / 1e6,
        list_time.as_secs_f64()
    );
    drop(text);

    // Phase 3: watch fan-out.
    let list = pods
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await?;
    let rv = list.metadata.resource_version.unwrap_or_default();
    let created_at = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        String,
        Instant,
    >::new()));
    let mut watchers = Vec::new();
    for _ in 0..b.watchers {
        let pods = pods.clone();
        let rv = rv.clone();
        let created_at = created_at.clone();
        let want = b.fanout_pods;
        watchers.push(tokio::spawn(async move {
            let mut stream = pods
                .watch(&WatchParams::default().labels("app=fanout"), &rv)
                .await?
                .boxed();
            let mut delays = Vec::with_capacity(want);
            while delays.len() < want {
                match stream.try_next().await? {
                    Some(WatchEvent::Added(p)) => {
                        let name = p.metadata.name.unwrap_or_default();
                        let at = created_at.lock().ok().and_then(|m| m.get(&name).copied());
                        if let Some(at) = at {
                            delays.push(at.elapsed());
                        }
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            anyhow::Ok(delays)
        }));
    }
    // Let every watcher's request reach the server before creating (a watch from `rv` loses nothing,
    // so this only keeps the first delays from counting connection set-up).
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..b.fanout_pods {
        let mut p = pod(&format!("fanout-{i}"));
        p.metadata
            .labels
            .get_or_insert_default()
            .insert("app".into(), "fanout".into());
        if let Ok(mut m) = created_at.lock() {
            m.insert(format!("fanout-{i}"), Instant::now());
        }
        pods.create(&PostParams::default(), &p).await?;
    }
    let mut delays = Vec::new();
    for w in watchers {
        delays.extend(tokio::time::timeout(Duration::from_secs(120), w).await???);
    }
    delays.sort();
    println!(
        "watch fan-out: {} watchers x {} events; delay create->event p50 {:.2}ms p99 {:.2}ms max {:.2}ms",
        b.watchers,
        b.fanout_pods,
        quantile(&delays, 0.5).as_secs_f64() * 1e3,
        quantile(&delays, 0.99).as_secs_f64() * 1e3,
        delays.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );

    let db_bytes: u64 = ["store.db", "store.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let total = (b.pods + b.fanout_pods) as u64;
    println!(
        "memory: peak RSS {:.0} MiB (before load {:.0} MiB; server and clients share this process); store {:.1} MB = {} bytes per pod",
        peak_rss().unwrap_or(0) as f64 / 1048576.0,
        rss_before as f64 / 1048576.0,
        db_bytes as f64 / 1e6,
        db_bytes / total.max(1)
    );
    if let Some(etcd) = &etcd {
        println!("{}", etcd.report());
    }
    cp.stop().await;
    Ok(())
}

/// A client for `user` (a client certificate), allowed by a ClusterRole of what the benchmark
/// does to pods in `default` and a RoleBinding there, made by the admin; returns once the
/// authorizer allows it.
async fn user_client(
    cp: &ControlPlane,
    dir: &std::path::Path,
    user: &str,
) -> anyhow::Result<kube::Client> {
    let admin = cp.client().await?;
    let name = format!("bench-{user}");
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "rules": [{"apiGroups": [""], "resources": ["pods"],
                           "verbs": ["create", "get", "list", "watch", "delete"]}],
            }))?,
        )
        .await?;
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(admin.clone(), "default");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            }))?,
        )
        .await?;
    let text = crate::user_kubeconfig::kubeconfig(dir, user, &[])?;
    let kc = kube::config::Kubeconfig::from_yaml(&text)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    let client = kube::Client::try_from(cfg)?;
    // The authorizer follows RBAC objects through the watch cache: ask it until it agrees.
    let reviews: Api<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview> =
        Api::all(client.clone());
    let review: k8s_openapi::api::authorization::v1::SelfSubjectAccessReview =
        serde_json::from_value(serde_json::json!({
            "spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}}
        }))?;
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let answer = reviews.create(&PostParams::default(), &review).await?;
        if answer.status.is_some_and(|s| s.allowed) {
            return Ok(client);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "user {user} never became allowed to create pods"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
