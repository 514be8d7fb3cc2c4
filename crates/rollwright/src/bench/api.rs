//! `rollwright bench api`: the API server and store under load.
//!
//! Creates pods through HTTPS with concurrent `kube` clients, lists them all, then fans one watch
//! out to many watchers and measures how long events take to reach them. By default it starts a
//! control plane in this process (SQLite store in a fresh directory) and creates in `default`.
//! With `--kubeconfig FILE` it runs the same phases against a server already running (upstream's
//! kube-apiserver + etcd, or `rollwright apiserver` as a process of its own; `tools/conformance
//! api-perf` starts both) in a namespace of its own, and measures the processes `--pid NAME=PID`
//! names from `/proc`, as `bench phases` does: issue 42 asks for the API's figures beside
//! upstream's, measured in one sitting, never against a reference from another machine.

use super::{
    meter::{ProcessUse, Watched, processes_json, round3},
    peak_rss, quantile, rss,
};
use crate::control_plane::{ControlPlane, Options, StoreKind};
use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use std::{
    path::PathBuf,
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
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite, conflicts_with = "kubeconfig")]
    store: StoreKind,
    /// With `--store etcd`: the members' client URLs (default: a one-member etcd on loopback,
    /// started for the run).
    #[arg(long, value_delimiter = ',', conflicts_with = "kubeconfig")]
    etcd_servers: Vec<String>,
    /// Data directory (default: a fresh temporary one, removed afterwards).
    #[arg(long, conflicts_with = "kubeconfig")]
    data_dir: Option<PathBuf>,
    /// Make every request as this user (a client certificate, bound to a ClusterRole of what
    /// the benchmark does to pods in `default`), so that RBAC decides each one; by default the
    /// admin token, whom `system:masters` lets through before any authorizer.
    #[arg(long, conflicts_with = "kubeconfig")]
    as_user: Option<String>,
    /// Run against the API server this kubeconfig names (as its user) instead of a control plane
    /// in this process; the pods go to a fresh namespace, deleted at the end.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// With `--kubeconfig`: a process of that server to measure, as NAME=PID (repeat for each):
    /// its CPU seconds (utime + stime) over the three phases and its peak RSS (VmHWM, reset at
    /// the start, which needs root or the process's owner).
    #[arg(long = "pid", value_name = "NAME=PID", requires = "kubeconfig")]
    pids: Vec<Watched>,
    /// Also print the run's figures as one JSON line (what `tools/api-perf-table.py` reads).
    #[arg(long)]
    json: bool,
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

/// What the three phases measured.
#[derive(Clone, Debug, PartialEq)]
struct Figures {
    pods: usize,
    create: Duration,
    create_p50: Duration,
    create_p99: Duration,
    list: Duration,
    list_bytes: usize,
    /// Items in the list's answer; `None` when it did not parse as a list.
    list_items: Option<usize>,
    watchers: usize,
    fanout_pods: usize,
    fanout_p50: Duration,
    fanout_p99: Duration,
    fanout_max: Duration,
}

impl Figures {
    fn creates_per_second(&self) -> f64 {
        self.pods as f64 / self.create.as_secs_f64().max(1e-9)
    }

    /// The run as one JSON line for `tools/api-perf-table.py`; `processes` in `--pid` order.
    fn json(&self, processes: &[(String, ProcessUse)]) -> serde_json::Value {
        let ms = |d: Duration| round3(d.as_secs_f64() * 1e3);
        json!({
            "bench": "api",
            "pods": self.pods,
            "create_s": round3(self.create.as_secs_f64()),
            "creates_per_s": round3(self.creates_per_second()),
            "create_p50_ms": ms(self.create_p50),
            "create_p99_ms": ms(self.create_p99),
            "list_s": round3(self.list.as_secs_f64()),
            "list_bytes": self.list_bytes,
            "list_items": self.list_items,
            "watchers": self.watchers,
            "fanout_pods": self.fanout_pods,
            "fanout_p50_ms": ms(self.fanout_p50),
            "fanout_p99_ms": ms(self.fanout_p99),
            "fanout_max_ms": ms(self.fanout_max),
            "processes": processes_json(processes, "peak_of_run"),
        })
    }
}

/// The items of a list's JSON answer, counted without decoding them: upstream's items carry no
/// `kind`, so counting `"kind":"Pod"` (as this benchmark once did) reads 0 there.
fn list_items(text: &str) -> Option<usize> {
    #[derive(serde::Deserialize)]
    struct List {
        items: Vec<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<List>(text)
        .ok()
        .map(|l| l.items.len())
}

/// The namespace of a run against another server: fresh for each run (the seconds since the
/// epoch and this process's id), so that a run never counts a previous one's pods.
fn namespace_name(epoch_secs: u64, pid: u32) -> String {
    format!("bench-api-{epoch_secs}-{pid}")
}

/// Runs the benchmark and prints its figures.
pub async fn run(b: ApiBench) -> anyhow::Result<()> {
    match b.kubeconfig.clone() {
        Some(kubeconfig) => run_against(&b, &kubeconfig).await,
        None => run_in_process(b).await,
    }
}

/// The benchmark on a control plane this process starts (what `bench api` always did).
async fn run_in_process(b: ApiBench) -> anyhow::Result<()> {
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
    println!(
        "rollwright bench api: {} pods, {} clients, {} watchers, store {:?}, as {}",
        b.pods,
        b.clients,
        b.watchers,
        b.store,
        b.as_user.as_deref().unwrap_or("the admin (system:masters)")
    );
    let rss_before = rss().unwrap_or(0);
    let figures = measure(&client, "default", &b).await?;
    if b.json {
        println!("{}", figures.json(&[]));
    }

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

/// The benchmark on the server `kubeconfig` names, measuring the processes `--pid` names.
async fn run_against(b: &ApiBench, kubeconfig: &std::path::Path) -> anyhow::Result<()> {
    let (config, source) = restclient::config::Inference::from_env(Some(kubeconfig.to_path_buf()))
        .load()
        .await?;
    let server = config.cluster_url.clone();
    let client = kube::Client::try_from(config)?;
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let namespace = namespace_name(epoch, std::process::id());
    prepare_namespace(&client, &namespace).await?;
    let names: Vec<String> = b.pids.iter().map(ToString::to_string).collect();
    println!(
        "rollwright bench api: the server at {server} ({source}), namespace {namespace}, {} pods, {} clients, {} watchers; measuring {}",
        b.pods,
        b.clients,
        b.watchers,
        if names.is_empty() {
            "no process (give --pid NAME=PID)".to_string()
        } else {
            names.join(", ")
        },
    );
    let starts = Watched::start_all(&b.pids)?;
    let figures = measure(&client, &namespace, b).await;
    // Read the processes before anything else can fail, and before the namespace's deletion
    // adds its own work.
    let processes = Watched::finish_all(&b.pids, starts)?;
    let figures = figures?;
    for (name, u) in &processes {
        println!(
            "{name}: CPU {:.2} s, peak RSS {:.0} MiB{}",
            u.cpu,
            u.peak_rss_mib,
            if u.peak_of_window {
                ""
            } else {
                " (since it started: its peak could not be reset)"
            }
        );
    }
    if !processes.is_empty() {
        println!(
            "total: CPU {:.2} s, peak RSS {:.0} MiB (the sum of each process's peak)",
            processes.iter().map(|(_, u)| u.cpu).sum::<f64>(),
            processes.iter().map(|(_, u)| u.peak_rss_mib).sum::<f64>()
        );
    }
    if b.json {
        println!("{}", figures.json(&processes));
    }
    // The delete only marks the namespace; its pods go when the server's namespace controller
    // gets to them, which a bare kube-apiserver (no controller manager) never does.
    match Api::<Namespace>::all(client.clone())
        .delete(&namespace, &DeleteParams::default())
        .await
    {
        Ok(_) => println!(
            "namespace {namespace} marked for deletion; its pods go when the cluster's namespace controller runs (a bare kube-apiserver has none)"
        ),
        Err(e) => println!("note: namespace {namespace} left in place: deleting it failed: {e}"),
    }
    Ok(())
}

/// Creates `namespace` and makes sure its `default` ServiceAccount exists: upstream's
/// ServiceAccount admission refuses a namespace's pods until it does, and with kube-apiserver
/// alone no controller manager makes it, so after a short wait the benchmark makes it itself.
async fn prepare_namespace(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating the namespace {namespace}"))?;
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace);
    let made = embedded::wait_until(
        &accounts,
        "the namespace's default ServiceAccount",
        Duration::from_secs(3),
        |sa: &ServiceAccount| sa.metadata.name.as_deref() == Some("default"),
    )
    .await;
    if made.is_err() {
        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}}))?;
        match accounts.create(&PostParams::default(), &sa).await {
            Ok(_) => {
                println!("made the ServiceAccount default in {namespace} (no controller made it)")
            }
            // A controller made it meanwhile.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("creating the namespace's default ServiceAccount"),
        }
    }
    Ok(())
}

/// The three phases in `namespace`: concurrent creates, a list of all the pods, a watch fanned
/// out; prints each phase's line.
async fn measure(client: &kube::Client, namespace: &str, b: &ApiBench) -> anyhow::Result<Figures> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);

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
    let create = started.elapsed();
    lat.sort();
    let mut figures = Figures {
        pods: b.pods,
        create,
        create_p50: quantile(&lat, 0.5),
        create_p99: quantile(&lat, 0.99),
        list: Duration::ZERO,
        list_bytes: 0,
        list_items: None,
        watchers: b.watchers,
        fanout_pods: b.fanout_pods,
        fanout_p50: Duration::ZERO,
        fanout_p99: Duration::ZERO,
        fanout_max: Duration::ZERO,
    };
    println!(
        "create: {} pods in {:.2}s = {:.0} creates/s; latency p50 {:.2}ms p99 {:.2}ms",
        b.pods,
        create.as_secs_f64(),
        figures.creates_per_second(),
        figures.create_p50.as_secs_f64() * 1e3,
        figures.create_p99.as_secs_f64() * 1e3
    );

    // Phase 2: list everything (raw bytes, so client-side decoding is not measured).
    let list_started = Instant::now();
    let req = http::Request::get(format!("/api/v1/namespaces/{namespace}/pods")).body(Vec::new())?;
    let text = client.request_text(req).await?;
    figures.list = list_started.elapsed();
    figures.list_bytes = text.len();
    figures.list_items = list_items(&text);
    println!(
        "list: {} pods, {:.1} MB in {:.3}s",
        figures
            .list_items
            .map_or_else(|| "?".to_string(), |n| n.to_string()),
        text.len() as f64 / 1e6,
        figures.list.as_secs_f64()
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
    figures.fanout_p50 = quantile(&delays, 0.5);
    figures.fanout_p99 = quantile(&delays, 0.99);
    figures.fanout_max = delays.last().copied().unwrap_or_default();
    println!(
        "watch fan-out: {} watchers x {} events; delay create->event p50 {:.2}ms p99 {:.2}ms max {:.2}ms",
        b.watchers,
        b.fanout_pods,
        figures.fanout_p50.as_secs_f64() * 1e3,
        figures.fanout_p99.as_secs_f64() * 1e3,
        figures.fanout_max.as_secs_f64() * 1e3
    );
    Ok(figures)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_are_counted_whether_or_not_they_carry_their_kind() {
        // Upstream's list items have no kind; rollwright's do.
        let upstream = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
        let rollwright = r#"{"kind":"PodList","items":[{"kind":"Pod","metadata":{"name":"a"}}]}"#;
        assert_eq!(list_items(upstream), Some(2));
        assert_eq!(list_items(rollwright), Some(1));
        assert_eq!(list_items(r#"{"kind":"Status","code":403}"#), None);
        assert_eq!(list_items("not json"), None);
    }

    #[test]
    fn each_run_has_a_namespace_of_its_own() {
        let a = namespace_name(1_700_000_000, 42);
        assert_eq!(a, "bench-api-1700000000-42");
        assert_ne!(a, namespace_name(1_700_000_000, 43));
        // A DNS label: at most 63 lowercase alphanumerics and '-'.
        let long = namespace_name(u64::MAX, u32::MAX);
        assert!(long.len() <= 63, "{long}");
        assert!(
            long.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }

    #[test]
    fn a_run_is_one_json_line_for_the_side_by_side_table() {
        let ms = Duration::from_millis;
        let f = Figures {
            pods: 1_000,
            create: ms(2_000),
            create_p50: Duration::from_micros(1_234_567),
            create_p99: ms(20),
            list: ms(150),
            list_bytes: 3_000_000,
            list_items: Some(1_000),
            watchers: 10,
            fanout_pods: 100,
            fanout_p50: ms(1),
            fanout_p99: ms(5),
            fanout_max: ms(9),
        };
        let used = ProcessUse {
            cpu: 1.5,
            peak_rss_mib: 300.0,
            peak_of_window: true,
        };
        let line = f.json(&[("kube-apiserver".into(), used)]).to_string();
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["bench"], "api");
        assert_eq!(v["creates_per_s"], 500.0);
        assert_eq!(v["create_p50_ms"], 1234.567);
        assert_eq!(v["list_s"], 0.15);
        assert_eq!(v["list_items"], 1_000);
        assert_eq!(v["fanout_p99_ms"], 5.0);
        assert_eq!(v["processes"][0]["name"], "kube-apiserver");
        assert_eq!(v["processes"][0]["cpu_s"], 1.5);
        assert_eq!(v["processes"][0]["peak_of_run"], true);
        let unparsed = Figures {
            list_items: None,
            ..f
        };
        assert!(unparsed.json(&[])["list_items"].is_null());
    }

    #[test]
    fn another_server_is_named_by_kubeconfig_and_measured_by_pid() {
        let parse = super::super::parse_options::<ApiBench>;
        assert!(parse(&["api", "--pid", "etcd=1"]).is_err());
        assert!(parse(&["api", "--kubeconfig", "k", "--store", "etcd"]).is_err());
        assert!(parse(&["api", "--kubeconfig", "k", "--as-user", "u"]).is_err());
        let b = parse(&[
            "api",
            "--kubeconfig",
            "k",
            "--pid",
            "etcd=1",
            "--pid",
            "kube-apiserver=2",
            "--pods",
            "20000",
            "--json",
        ])
        .unwrap();
        assert_eq!(b.pids.len(), 2);
        assert_eq!(b.pods, 20_000);
        assert!(b.json);
        let plain = parse(&["api"]).unwrap();
        assert!(plain.kubeconfig.is_none() && plain.pods == 100_000);
    }
}
