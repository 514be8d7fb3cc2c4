//! The independent watcher: a process of its own that makes the rollouts' writes, records every
//! write the API server acknowledged, watches everything the rollouts touch and checks the
//! invariants at each event. It runs until its stdin closes (the orchestrator's "stop") and then
//! prints its [`Report`] as one JSON line.
//!
//! Besides the rollouts' own writes it keeps a steady stream of small writes (a Lease every
//! 100 ms, holding its sequence number), so that some acknowledged write is in flight at almost every kill; at the end each
//! acknowledged write must be found, whole.

use super::{
    invariants::{Breach, Checker, Snapshot},
    workload::{self, NAMESPACE, Rollable, Workload},
};
use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet},
    coordination::v1::Lease,
    core::v1::{Namespace, Pod},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::sync::watch;

/// The watcher's arguments (`rollwright chaos watch`, started by the orchestrator).
#[derive(clap::Args, Debug, Clone)]
pub struct WatchArgs {
    /// Kubeconfig of the chaos cluster.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Simulated nodes in the cluster (a DaemonSet is rolled out when it runs on all of them).
    #[arg(long)]
    nodes: i32,
    /// Seed for which rollouts use a failing image.
    #[arg(long)]
    seed: u64,
    /// Rollouts to start at least (more follow until stdin closes).
    #[arg(long)]
    rollouts: usize,
}

/// What the watcher found, printed as JSON when it ends.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// Rollouts started.
    pub rollouts_started: usize,
    /// Rollouts that reached their image on every replica or node.
    pub rollouts_completed: usize,
    /// Rollouts that did not, with the workload's status when the run gave up on them.
    pub rollouts_stuck: Vec<String>,
    /// Of them, rollouts that first went to a failing image, then were rolled forward.
    pub rollouts_through_failing_images: usize,
    /// Writes the API server acknowledged.
    pub writes_acknowledged: usize,
    /// Acknowledged writes not found (or not whole) at the end.
    pub writes_lost: Vec<String>,
    /// Broken invariants (each time one went from kept to broken).
    pub breaches: Vec<Breach>,
    /// Watch events checked.
    pub events_checked: usize,
}

/// What the watcher's tasks share.
struct Shared {
    snapshot: Mutex<Snapshot>,
    checker: Mutex<Checker>,
    events: Mutex<usize>,
    /// Bumped on every event, so waiters wake on change rather than poll.
    changed: watch::Sender<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn changed(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn check(&self) {
        let mut snap = lock(&self.snapshot);
        let mut checker = lock(&self.checker);
        let before = checker.breaches.len();
        checker.observe(&snap);
        snap.relisted.clear();
        for b in &checker.breaches[before..] {
            tracing::warn!(
                workload = b.workload,
                rule = b.rule,
                detail = b.detail,
                "invariant broken"
            );
        }
        *lock(&self.events) += 1;
    }
}

/// Runs the watcher until stdin closes; prints the report.
pub async fn run(args: WatchArgs) -> anyhow::Result<()> {
    let client = connect(&args.kubeconfig).await?;
    let (changed, _) = watch::channel(0);
    let shared = Arc::new(Shared {
        snapshot: Mutex::new(Snapshot::default()),
        checker: Mutex::new(Checker::new(usize::try_from(args.nodes).unwrap_or(0))),
        events: Mutex::new(0),
        changed,
    });
    acked(|| async {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
        match Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    })
    .await;
    // Every watch has its initial list before anything is written, so nothing is missed.
    let mut synced = Vec::new();
    synced.push(follow::<Pod>(&client, &shared, |s| &mut s.pods));
    synced.push(follow::<ReplicaSet>(&client, &shared, |s| {
        &mut s.replica_sets
    }));
    synced.push(follow::<Deployment>(&client, &shared, |s| {
        &mut s.deployments
    }));
    synced.push(follow::<DaemonSet>(&client, &shared, |s| {
        &mut s.daemon_sets
    }));
    synced.push(follow::<StatefulSet>(&client, &shared, |s| {
        &mut s.stateful_sets
    }));
    for mut rx in synced {
        let _ = rx.wait_for(|done| *done).await;
    }

    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        // The orchestrator closes stdin to say "stop".
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
        let _ = stop_tx.send(true);
    });

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    // The stream of small writes goes on until the last rollout is done.
    let (rolled_tx, rolled) = watch::channel(false);
    let stream = tokio::spawn(write_stream(client.clone(), ledger.clone(), rolled));
    let workloads = workload::all();
    let per_workload = args.rollouts.div_ceil(workloads.len().max(1));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, w) in workloads.into_iter().enumerate() {
        let roller = Roller {
            client: client.clone(),
            shared: shared.clone(),
            ledger: ledger.clone(),
            nodes: args.nodes,
            rng: StdRng::seed_from_u64(args.seed.wrapping_add(i as u64)),
        };
        tasks.spawn(roller.roll(w, per_workload, stop.clone()));
    }
    let mut report = Report::default();
    while let Some(done) = tasks.join_next().await {
        let (started, completed, failing, stuck) = done.unwrap_or_default();
        report.rollouts_started += started;
        report.rollouts_completed += completed;
        report.rollouts_through_failing_images += failing;
        report.rollouts_stuck.extend(stuck);
    }
    let _ = rolled_tx.send(true);
    let _ = stream.await;

    let ledger = std::mem::take(&mut *lock(&ledger));
    report.writes_acknowledged = ledger.leases.len() + ledger.images.len();
    report.writes_lost = ledger.verify(&client).await;
    report.breaches = lock(&shared.checker).breaches.clone();
    report.events_checked = *lock(&shared.events);
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// A client for the kubeconfig, retried until the API answers (the server may be restarting).
async fn connect(kubeconfig: &std::path::Path) -> anyhow::Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(Client::try_from(cfg)?)
}

/// Retries `write` until the API server acknowledges it: a write that failed (the server was
/// being killed) is not acknowledged, and trying again is what any client does.
async fn acked<T, F, Fut>(mut write: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut delay = Duration::from_millis(50);
    loop {
        match write().await {
            Ok(v) => return v,
            Err(e) => {
                // A refusal (not a failure to reach the server) would repeat: say so.
                match e.downcast_ref::<kube::Error>() {
                    Some(kube::Error::Api(s)) if s.code < 500 && s.code != 429 => {
                        tracing::warn!(error = %e, "write refused; retrying")
                    }
                    _ => tracing::debug!(error = %e, "write not acknowledged; retrying"),
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Follows one kind in the chaos namespace into the snapshot, relisting (and so dropping objects
/// deleted while the server was down) after every reconnect. The returned flag turns true once
/// the first list is in.
fn follow<K>(
    client: &Client,
    shared: &Arc<Shared>,
    map: fn(&mut Snapshot) -> &mut BTreeMap<String, K>,
) -> watch::Receiver<bool>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (tx, rx) = watch::channel(false);
    let api: Api<K> = Api::namespaced(client.clone(), NAMESPACE);
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut relist: Option<BTreeMap<String, K>> = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => relist = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(obj)) => {
                    if let Some(fresh) = relist.as_mut() {
                        fresh.insert(obj.name_any(), obj);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(fresh) = relist.take() {
                        let mut snap = lock(&shared.snapshot);
                        let uids = fresh.values().filter_map(|o| o.meta().uid.clone());
                        snap.relisted.extend(uids);
                        *map(&mut snap) = fresh;
                    }
                    let _ = tx.send(true);
                    shared.check();
                }
                Ok(watcher::Event::Apply(obj)) => {
                    map(&mut lock(&shared.snapshot)).insert(obj.name_any(), obj);
                    shared.check();
                }
                Ok(watcher::Event::Delete(obj)) => {
                    map(&mut lock(&shared.snapshot)).remove(&obj.name_any());
                    shared.check();
                }
                Err(e) => tracing::debug!(error = %e, "watch interrupted; resuming"),
            }
            shared.changed();
        }
    });
    rx
}

/// Every write the API server acknowledged, to look for at the end.
#[derive(Default)]
struct Ledger {
    /// Leases created, by name, with the sequence number they hold.
    leases: BTreeMap<String, u64>,
    /// Image writes to workloads, in order: (workload id, image).
    images: Vec<(String, String)>,
}

impl Ledger {
    /// The acknowledged writes that are not there (whole) now.
    async fn verify(&self, client: &Client) -> Vec<String> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
        let found = acked(|| async {
            Ok(leases
                .list(&ListParams::default().labels("chaos=ledger"))
                .await?)
        })
        .await;
        let found: BTreeMap<String, Option<String>> = found
            .items
            .into_iter()
            .map(|l| {
                let seq = l.spec.as_ref().and_then(|s| s.holder_identity.clone());
                (l.name_any(), seq)
            })
            .collect();
        let mut lost = Vec::new();
        for (name, seq) in &self.leases {
            match found.get(name) {
                Some(Some(s)) if *s == seq.to_string() => {}
                Some(other) => lost.push(format!("Lease/{name}: holds {other:?}, wrote {seq}")),
                None => lost.push(format!("Lease/{name}: missing")),
            }
        }
        // The last acknowledged image of each workload is the one in its spec now.
        let mut last: BTreeMap<&str, &str> = BTreeMap::new();
        for (id, image) in &self.images {
            last.insert(id, image);
        }
        for (id, image) in last {
            let now = current_image(client, id).await;
            if now.as_deref() != Some(image) {
                lost.push(format!("{id}: image {now:?}, last acknowledged {image}"));
            }
        }
        lost
    }
}

/// The image in a workload's spec now.
async fn current_image(client: &Client, id: &str) -> Option<String> {
    let (kind, name) = id.split_once('/')?;
    match kind {
        "Deployment" => image_now::<Deployment>(client, name).await,
        "DaemonSet" => image_now::<DaemonSet>(client, name).await,
        _ => image_now::<StatefulSet>(client, name).await,
    }
}

async fn image_now<K: Rollable>(client: &Client, name: &str) -> Option<String> {
    acked(|| async {
        let obj = Api::<K>::namespaced(client.clone(), NAMESPACE)
            .get(name)
            .await?;
        Ok(workload::image_of(obj.template()).map(str::to_string))
    })
    .await
}

/// Creates `manifest` as a `K`; an earlier try that seemed to fail but got through is fine.
async fn create_as<K: Rollable>(client: Client, manifest: serde_json::Value) -> anyhow::Result<()> {
    let obj: K = serde_json::from_value(manifest)?;
    match Api::<K>::namespaced(client, NAMESPACE)
        .create(&PostParams::default(), &obj)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Merge-patches a `K`; its generation after the patch.
async fn patch_as<K: Rollable>(
    client: Client,
    name: &str,
    patch: &serde_json::Value,
) -> anyhow::Result<Option<i64>> {
    let patched = Api::<K>::namespaced(client, NAMESPACE)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(patched.meta().generation)
}

/// A workload's generation and status in the watcher's snapshot.
fn status_in<K: Rollable>(
    objects: &BTreeMap<String, K>,
    name: &str,
) -> (Option<i64>, serde_json::Value) {
    objects.get(name).map_or((None, json!(null)), |o| {
        (o.meta().generation, o.status_json())
    })
}

/// Creates a Lease every 100 ms until `stop`; records the acknowledged ones.
async fn write_stream(client: Client, ledger: Arc<Mutex<Ledger>>, mut stop: watch::Receiver<bool>) {
    let leases: Api<Lease> = Api::namespaced(client, NAMESPACE);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for seq in 0u64.. {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let name = format!("ledger-{seq}");
        let lease: Lease = match serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"chaos": "ledger"}},
            "spec": {"holderIdentity": seq.to_string()}
        })) {
            Ok(lease) => lease,
            Err(_) => continue,
        };
        // Each is tried once: one that fails is not acknowledged, and is not looked for.
        let params = PostParams::default();
        let write = tokio::time::timeout(Duration::from_secs(5), leases.create(&params, &lease));
        if let Ok(Ok(_)) = write.await {
            lock(&ledger).leases.insert(name, seq);
        }
    }
}

/// Rolls one workload out, again and again.
struct Roller {
    client: Client,
    shared: Arc<Shared>,
    ledger: Arc<Mutex<Ledger>>,
    nodes: i32,
    rng: StdRng,
}

/// How long one rollout may take before it counts as not completed.
const ROLLOUT_DEADLINE: Duration = Duration::from_secs(120);
/// How long a failing image is left to fail before the rollout is rolled forward.
const FAILING_FOR: Duration = Duration::from_secs(20);

impl Roller {
    /// Creates the workload, then rolls it to a new image `at_least` times and on until `stop`;
    /// returns (rollouts started, completed, through a failing image, what the stuck ones showed).
    async fn roll(
        mut self,
        w: Workload,
        at_least: usize,
        stop: watch::Receiver<bool>,
    ) -> (usize, usize, usize, Vec<String>) {
        let (mut started, mut completed, mut failing) = (0, 0, 0);
        let mut stuck = Vec::new();
        let first = "app:v0".to_string();
        self.create(&w, &first).await;
        self.wait_done(&w, &first, &stop).await;
        for version in 1.. {
            if *stop.borrow() && started >= at_least {
                break;
            }
            started += 1;
            let image = format!("app:v{version}");
            let through_failure = self.rng.random_bool(0.25);
            if through_failure {
                // An image that never pulls: the rollout stalls within its bounds, then is fixed
                // by rolling forward.
                let broken = format!("app:broken-{version}");
                self.set_image(&w, &broken).await;
                self.wait_failing(&w, &stop).await;
            }
            self.set_image(&w, &image).await;
            if self.wait_done(&w, &image, &stop).await {
                completed += 1;
                failing += usize::from(through_failure);
            } else {
                let status = self.status_of(&w);
                tracing::warn!(workload = w.id(), image, status, "rollout did not complete");
                stuck.push(format!("{} to {image}: {status}", w.id()));
            }
        }
        (started, completed, failing, stuck)
    }

    async fn create(&self, w: &Workload, image: &str) {
        let manifest = w.manifest(image);
        acked(|| {
            let (client, manifest) = (self.client.clone(), manifest.clone());
            async move {
                match w.kind {
                    workload::Kind::Deployment { .. } => {
                        create_as::<Deployment>(client, manifest).await
                    }
                    workload::Kind::DaemonSet { .. } => {
                        create_as::<DaemonSet>(client, manifest).await
                    }
                    workload::Kind::StatefulSet { .. } => {
                        create_as::<StatefulSet>(client, manifest).await
                    }
                }
            }
        })
        .await;
        lock(&self.ledger).images.push((w.id(), image.to_string()));
    }

    async fn set_image(&self, w: &Workload, image: &str) {
        let patch = Workload::set_image(image);
        let generation = acked(|| {
            let client = self.client.clone();
            let patch = &patch;
            async move {
                match w.kind {
                    workload::Kind::Deployment { .. } => {
                        patch_as::<Deployment>(client, w.name, patch).await
                    }
                    workload::Kind::DaemonSet { .. } => {
                        patch_as::<DaemonSet>(client, w.name, patch).await
                    }
                    workload::Kind::StatefulSet { .. } => {
                        patch_as::<StatefulSet>(client, w.name, patch).await
                    }
                }
            }
        })
        .await;
        lock(&self.ledger).images.push((w.id(), image.to_string()));
        if w.on_delete() {
            // OnDelete: the operator replaces the pods; delete every pod of an older template.
            let generation = generation.unwrap_or(0).to_string();
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), NAMESPACE);
            let selector = format!("app={},pod-template-generation!={generation}", w.name);
            acked(|| async {
                pods.delete_collection(
                    &DeleteParams::default(),
                    &ListParams::default().labels(&selector),
                )
                .await?;
                Ok(())
            })
            .await;
        }
    }

    /// The workload's generation and status, and its pods, as the watcher sees them.
    fn status_of(&self, w: &Workload) -> String {
        let snap = lock(&self.shared.snapshot);
        let (generation, status) = match w.kind {
            workload::Kind::Deployment { .. } => status_in(&snap.deployments, w.name),
            workload::Kind::DaemonSet { .. } => status_in(&snap.daemon_sets, w.name),
            workload::Kind::StatefulSet { .. } => status_in(&snap.stateful_sets, w.name),
        };
        let pods: Vec<String> = snap
            .pods
            .values()
            .filter(|p| p.labels().get("app").map(String::as_str) == Some(w.name))
            .map(|p| {
                let image = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.clone());
                format!(
                    "{}:{}:{}{}",
                    p.name_any(),
                    image.unwrap_or_default(),
                    api::pod::phase(p),
                    if api::pod::is_ready(p) { "+ready" } else { "" }
                )
            })
            .collect();
        format!("generation {generation:?} status {status} pods {pods:?}")
    }

    /// Waits until a pod of `w` fails to pull its image (or the time for failing is up).
    async fn wait_failing(&self, w: &Workload, stop: &watch::Receiver<bool>) {
        let failing = |snap: &Snapshot| {
            snap.pods.values().any(|p| {
                p.labels().get("app").map(String::as_str) == Some(w.name)
                    && api::pod::fails_to_pull(p)
            })
        };
        self.wait(FAILING_FOR, stop, failing).await;
    }

    /// Waits until `w` is rolled out to `image`; whether it got there in time.
    async fn wait_done(&self, w: &Workload, image: &str, stop: &watch::Receiver<bool>) -> bool {
        let nodes = self.nodes;
        self.wait(ROLLOUT_DEADLINE, stop, |snap: &Snapshot| match w.kind {
            workload::Kind::Deployment { .. } => snap
                .deployments
                .get(w.name)
                .is_some_and(|d| workload::deployment_done(d, image)),
            workload::Kind::DaemonSet { .. } => snap
                .daemon_sets
                .get(w.name)
                .is_some_and(|ds| workload::daemon_set_done(ds, image, nodes)),
            workload::Kind::StatefulSet { .. } => snap
                .stateful_sets
                .get(w.name)
                .is_some_and(|sts| workload::stateful_set_done(sts, image)),
        })
        .await
    }

    /// Waits on the watcher's events until `pred` holds, `limit` passes, or (once stopping) a
    /// minute has passed since the stop.
    async fn wait(
        &self,
        limit: Duration,
        stop: &watch::Receiver<bool>,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> bool {
        let mut changed = self.shared.changed.subscribe();
        let mut stop = stop.clone();
        let deadline = tokio::time::Instant::now() + limit;
        let wait = async {
            loop {
                if pred(&lock(&self.shared.snapshot)) {
                    return true;
                }
                if changed.changed().await.is_err() {
                    return false;
                }
            }
        };
        let stopping = async {
            let _ = stop.wait_for(|s| *s).await;
            tokio::time::sleep(STOP_GRACE).await;
        };
        tokio::select! {
            done = wait => done,
            _ = tokio::time::sleep_until(deadline) => false,
            _ = stopping => false,
        }
    }
}

/// How long rollouts in progress may still finish after the orchestrator says stop.
const STOP_GRACE: Duration = Duration::from_secs(60);
