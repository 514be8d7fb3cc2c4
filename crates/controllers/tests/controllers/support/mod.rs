//! What the workload tests share: an in-process API server with the controllers, and a tiny
//! kubelet that marks pods Running and Ready (through the `pods/status` subresource, as a
//! kubelet does) unless their image is blocked.

#![allow(
    clippy::unwrap_used,
    dead_code,
    reason = "test support: a test fails by panicking"
)]

use futures::StreamExt;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::{sync::Notify, task::JoinHandle};

pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The server, a client, and the controller tasks (abort them to "kill" the controllers).
pub struct Cluster {
    pub server: embedded::Embedded,
    pub client: Client,
    pub controllers: Vec<JoinHandle<()>>,
    pub kubelet: Kubelet,
}

impl Cluster {
    pub async fn start() -> Self {
        Self::start_with_lag(Duration::ZERO, &[]).await
    }

    /// The workload controllers on a cache whose watch events of `kinds` (every kind if empty)
    /// arrive `lag` late.
    pub async fn start_with_lag(lag: Duration, kinds: &[&str]) -> Self {
        let server = embedded::Embedded::memory().await.unwrap();
        let client = server.client();
        let mut c = Cluster {
            server,
            client: client.clone(),
            controllers: Vec::new(),
            kubelet: Kubelet::start(client),
        };
        c.start_controllers_with_lag(lag, kinds);
        c
    }

    /// The ReplicaSet controller only.
    pub async fn replicaset_only() -> Self {
        Self::replicaset_with_lag(Duration::ZERO).await
    }

    /// The ReplicaSet controller only, on a cache whose watch events arrive `lag` late.
    pub async fn replicaset_with_lag(lag: Duration) -> Self {
        let server = embedded::Embedded::memory().await.unwrap();
        let client = server.client();
        let settings = controllers::Settings {
            enabled: controllers::Selection::only(["replicaset"]),
            ..Default::default()
        };
        let rs = spawn_controllers(&client, &settings, lag);
        Cluster {
            server,
            client: client.clone(),
            controllers: vec![rs],
            kubelet: Kubelet::start(client),
        }
    }

    pub fn start_controllers(&mut self) {
        self.start_controllers_with_lag(Duration::ZERO, &[]);
    }

    fn start_controllers_with_lag(&mut self, lag: Duration, kinds: &[&str]) {
        let settings = controllers::Settings {
            enabled: controllers::Selection::only(["replicaset", "deployment", "garbagecollector"]),
            ..Default::default()
        };
        let informers = informer::Informers::with_lag_on(self.client.clone(), lag, kinds);
        self.controllers.push(tokio::spawn(
            controllers::run(&informers, &settings).unwrap(),
        ));
    }

    pub fn kill_controllers(&mut self) {
        for t in self.controllers.drain(..) {
            t.abort();
        }
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::default_namespaced(self.client.clone())
    }
}

/// Runs the controllers `settings` enables on a shared cache of `client` whose watch events
/// arrive `lag` late; aborting the task stops them and their watches.
pub fn spawn_controllers(
    client: &Client,
    settings: &controllers::Settings,
    lag: Duration,
) -> JoinHandle<()> {
    let informers = informer::Informers::with_lag(client.clone(), lag);
    tokio::spawn(controllers::run(&informers, settings).unwrap())
}

/// A kubelet stand-in: every pod whose image is not blocked becomes Running and Ready.
#[derive(Clone)]
pub struct Kubelet {
    blocked: Arc<Mutex<HashSet<String>>>,
    rescan: Arc<Notify>,
    task: Arc<JoinHandle<()>>,
}

fn images(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.image.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn is_ready(pod: &Pod) -> bool {
    api::pod::is_ready(pod)
}

impl Kubelet {
    fn start(client: Client) -> Self {
        let blocked: Arc<Mutex<HashSet<String>>> = Arc::default();
        let rescan = Arc::new(Notify::new());
        let task = tokio::spawn({
            let blocked = Arc::clone(&blocked);
            let rescan = Arc::clone(&rescan);
            async move {
                let api: Api<Pod> = Api::all(client.clone());
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                let mut pending: HashMap<(String, String), Pod> = HashMap::new();
                loop {
                    let fresh = tokio::select! {
                        e = events.next() => match e {
                            Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => {
                                let k = (p.namespace().unwrap_or_default(), p.name_any());
                                if is_ready(&p) || p.metadata.deletion_timestamp.is_some() {
                                    pending.remove(&k);
                                } else {
                                    pending.insert(k, p);
                                }
                                true
                            }
                            Some(Ok(watcher::Event::Delete(p))) => {
                                pending.remove(&(p.namespace().unwrap_or_default(), p.name_any()));
                                continue;
                            }
                            Some(_) => continue,
                            None => return,
                        },
                        _ = rescan.notified() => true,
                    };
                    if !fresh {
                        continue;
                    }
                    let ready: Vec<Pod> = {
                        let blocked = blocked.lock().unwrap();
                        pending
                            .values()
                            .filter(|p| !images(p).iter().any(|i| blocked.contains(i)))
                            .cloned()
                            .collect()
                    };
                    for p in ready {
                        pending.remove(&(p.namespace().unwrap_or_default(), p.name_any()));
                        let api: Api<Pod> =
                            Api::namespaced(client.clone(), &p.namespace().unwrap_or_default());
                        let now = jiff::Timestamp::now().to_string();
                        let status = json!({"status": {"phase": "Running", "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": now},
                            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                        ]}});
                        // A pod deleted meanwhile is fine.
                        let _ = api
                            .patch_status(
                                &p.name_any(),
                                &PatchParams::default(),
                                &Patch::Merge(&status),
                            )
                            .await;
                    }
                }
            }
        });
        Kubelet {
            blocked,
            rescan,
            task: Arc::new(task),
        }
    }

    /// Pods with `image` stay not ready (a failing image).
    pub fn block(&self, image: &str) {
        self.blocked.lock().unwrap().insert(image.to_string());
    }

    /// Pods with `image` become ready, those waiting included.
    pub fn unblock(&self, image: &str) {
        self.blocked.lock().unwrap().remove(image);
        self.rescan.notify_one();
    }
}

/// A Deployment `name` with `replicas` pods of `image` (labels `app: name`).
pub fn deployment(name: &str, replicas: i32, image: &str, strategy: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }))
    .unwrap()
}

pub fn rolling(surge: Value, unavailable: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

pub async fn create(api: &Api<Deployment>, d: &Deployment) -> Deployment {
    api.create(&PostParams::default(), d).await.unwrap()
}

pub async fn set_image(api: &Api<Deployment>, name: &str, image: &str) {
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}});
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
}

pub async fn merge(api: &Api<Deployment>, name: &str, patch: Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// `kubectl rollout status`'s notion of done, for replicas `replicas`.
pub fn rolled_out(d: &Deployment, replicas: i32) -> bool {
    let s = d.status.clone().unwrap_or_default();
    s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas.unwrap_or(0) == replicas
        && s.replicas.unwrap_or(0) == replicas
        && s.available_replicas.unwrap_or(0) == replicas
}

/// Waits until the Deployment `name` has rolled out with `replicas`.
pub async fn wait_rolled_out(api: &Api<Deployment>, name: &str, replicas: i32) -> Deployment {
    embedded::wait_until(
        api,
        &format!("{name} rolled out"),
        TIMEOUT,
        |d: &Deployment| d.name_any() == name && rolled_out(d, replicas),
    )
    .await
    .unwrap()
}

/// The condition `type_` of a Deployment as (status, reason).
pub fn condition(d: &Deployment, type_: &str) -> Option<(String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// The node side the [`Kubelet`] leaves out, for tests that want pods on nodes: binds every
/// unbound pod (to the node its `matchFields metadata.name` affinity names, else to
/// `default_node`), so a deletion is graceful as on a real node, and finishes each graceful
/// deletion after a short random delay (0-`max_delay`), so pods linger terminating as they do.
pub fn node_agent(client: Client, default_node: &str, max_delay: Duration) -> JoinHandle<()> {
    use rand::Rng;
    let default_node = default_node.to_string();
    tokio::spawn(async move {
        let api: Api<Pod> = Api::all(client.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        let mut finishing: HashSet<String> = HashSet::new();
        while let Some(Ok(pod)) = events.next().await {
            let ns = pod.namespace().unwrap_or_default();
            let name = pod.name_any();
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            if pod.metadata.deletion_timestamp.is_some() {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if !finishing.insert(uid.clone()) {
                    continue;
                }
                let delay = rand::rng().random_range(Duration::ZERO..=max_delay);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let params = kube::api::DeleteParams {
                        grace_period_seconds: Some(0),
                        preconditions: Some(kube::api::Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    let _ = api.delete(&name, &params).await;
                });
                continue;
            }
            let bound = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            if bound {
                continue;
            }
            let node = controllers::daemonset::nodes::target_node(&pod)
                .unwrap_or(&default_node)
                .to_string();
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"kind": "Node", "name": node}});
            // Bound meanwhile, or deleted: fine.
            let _: Result<Value, _> = api
                .create_subresource("binding", &name, &PostParams::default(), &binding)
                .await;
        }
    })
}

/// Waits until the pods in the default namespace matching `selector`, taken together, satisfy
/// `pred` (checked after each event once listed); returns them.
pub async fn wait_pods(
    client: &Client,
    selector: &str,
    what: &str,
    pred: impl Fn(&[Pod]) -> bool,
) -> Vec<Pod> {
    let api: Api<Pod> = Api::default_namespaced(client.clone());
    let mut events = watcher(api, watcher::Config::default().labels(selector)).boxed();
    let mut pods: HashMap<String, Pod> = HashMap::new();
    let mut listed = false;
    let found = tokio::time::timeout(TIMEOUT, async {
        while let Some(Ok(e)) = events.next().await {
            match e {
                watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                    pods.insert(p.name_any(), p);
                }
                watcher::Event::Delete(p) => {
                    pods.remove(&p.name_any());
                }
                watcher::Event::InitDone => listed = true,
                watcher::Event::Init => {}
            }
            let now: Vec<Pod> = pods.values().cloned().collect();
            if listed && pred(&now) {
                return Some(now);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(pods)) => pods,
        _ => panic!(
            "timed out waiting for {what}: {:?}",
            pods.keys().collect::<Vec<_>>()
        ),
    }
}

/// A number from the environment variable `name`, if set.
pub fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `round` for `ROLLWRIGHT_SEED` alone if set, else for `ROLLWRIGHT_RANDOM_ROUNDS`
/// (default `rounds`) consecutive seeds from `ROLLWRIGHT_SEED_BASE`. Without a base the seeds
/// are fixed (1, 2, ...): CI runs the same sequences every time, so a run fails for what the
/// change did, not for a sequence nobody tried before. `ROLLWRIGHT_SEED_BASE=random` explores
/// from a fresh random base, printed with each round, so any failure is replayable.
pub async fn random_rounds<F, Fut>(rounds: u64, round: F)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use rand::Rng;
    if let Some(seed) = env_number("ROLLWRIGHT_SEED") {
        round(seed).await;
        return;
    }
    let rounds = env_number("ROLLWRIGHT_RANDOM_ROUNDS").unwrap_or(rounds);
    let base: u64 = match std::env::var("ROLLWRIGHT_SEED_BASE").as_deref() {
        Ok("random") => rand::rng().random_range(0..1_000_000),
        _ => env_number("ROLLWRIGHT_SEED_BASE").unwrap_or(1),
    };
    for i in 0..rounds {
        round(base + i).await;
    }
}

/// The images a random sequence has used: `img:0` first, each new one `img:N`.
pub struct Images(Vec<String>);

impl Images {
    /// A new image, and whether its pods become ready (7 times in 10).
    pub fn fresh(&mut self, rng: &mut rand::rngs::StdRng) -> (String, bool) {
        use rand::Rng;
        let image = format!("img:{}", self.0.len());
        self.0.push(image.clone());
        (image, rng.random_bool(0.7))
    }

    /// One of the images used so far, for a rollback by template.
    pub fn earlier(&self, rng: &mut rand::rngs::StdRng) -> String {
        use rand::Rng;
        self.0[rng.random_range(0..self.0.len())].clone()
    }
}

/// A random sequence of `len` steps, each drawn by `draw` from a roll in `0..10` and the images
/// used so far, half of them followed by a short `wait` (up to 40 ms): the shape every
/// randomized rollout test shares, so a seed names the same sequence in each.
pub fn random_steps<S>(
    rng: &mut rand::rngs::StdRng,
    len: usize,
    mut draw: impl FnMut(&mut rand::rngs::StdRng, u32, &mut Images) -> S,
    wait: impl Fn(Duration) -> S,
) -> Vec<S> {
    use rand::Rng;
    let mut images = Images(vec!["img:0".to_string()]);
    let mut steps = Vec::new();
    for _ in 0..len {
        let roll = rng.random_range(0..10);
        steps.push(draw(rng, roll, &mut images));
        if rng.random_bool(0.5) {
            steps.push(wait(Duration::from_millis(rng.random_range(0..40))));
        }
    }
    steps
}
