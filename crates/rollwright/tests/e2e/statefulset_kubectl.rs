//! StatefulSets end to end (issue 8): real `kubectl` against a whole in-process cluster — API
//! server, simulated nodes with short fixed delays and a fault profile, the scheduler and the
//! controllers (StatefulSet and volume controllers among them) — with an independent invariant
//! watcher ([`controllers::stateful_invariants`]) on every rolling update: unavailable pods never
//! exceed `maxUnavailable`, no pod below the partition is touched, and `OrderedReady` never
//! starts an update out of order.
//!
//! Every test case of seed 003 is a test of its own, in both pod management policies (a module
//! per case, `ordered_ready` and `parallel` inside). Mid-rollout states are made deterministic,
//! never timed: an image matching the profile's `*:stuck` rule runs but never gets ready.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use common::Rig;
use controllers::stateful_invariants::{Rule, StatefulWatcher};
use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod},
};
use kube::{Api, ResourceExt, runtime::watcher};
use nodesim::{NodeSim, distribution::Distribution};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

/// How long a watch waits for a state a working cluster reaches in a few seconds.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Images ending in `:stuck` run but never get ready; `:failing` fail 300ms after starting.
const PROFILE: &str = r#"
seed: 1
rules:
  - name: stuck
    match: {image: "*:stuck"}
    fault: neverReady
  - name: failing
    match: {image: "*:failing"}
    fault: {failAfter: {after: 300ms}}
"#;

const HASH: &str = "controller-revision-hash";

/// A cluster whose scheduler and controllers the test can stop and start again.
struct Env {
    rig: Rig,
}

impl std::ops::Deref for Env {
    type Target = Rig;
    fn deref(&self) -> &Rig {
        &self.rig
    }
}

impl std::ops::DerefMut for Env {
    fn deref_mut(&mut self) -> &mut Rig {
        &mut self.rig
    }
}

impl Env {
    /// Three simulated nodes whose pods start after 50ms and get ready 50ms later, with the
    /// scheduler and controllers running beside them as in `rollwright up`.
    async fn start() -> Env {
        let mut env = Self::without_controllers().await;
        env.start_scheduler_and_controllers();
        env
    }

    /// The same with neither scheduler nor controllers running.
    async fn without_controllers() -> Env {
        let sim = NodeSim {
            nodes: 3,
            start_delay: Distribution::Fixed(Duration::from_millis(50)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(50)),
            ..Default::default()
        };
        let env = Env {
            rig: Rig::start(sim, PROFILE).await,
        };
        env.wait_nodes_ready(3).await;
        env
    }

    async fn stop(self) {
        self.rig.stop().await;
    }

    async fn wait_nodes_ready(&self, n: usize) {
        let mut ready = BTreeSet::new();
        let nodes: Api<Node> = Api::all(self.client.clone());
        embedded::wait_until(
            &nodes,
            &format!("{n} nodes ready"),
            TIMEOUT,
            |node: &Node| {
                let is_ready = node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                    .is_some_and(|c| c.status == "True");
                if is_ready {
                    ready.insert(node.name_any());
                }
                ready.len() >= n
            },
        )
        .await
        .unwrap();
    }

    fn sets(&self) -> Api<StatefulSet> {
        Api::default_namespaced(self.client.clone())
    }

    fn pod_api(&self) -> Api<Pod> {
        Api::default_namespaced(self.client.clone())
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::default_namespaced(self.client.clone())
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// `kubectl set image sts/NAME app=IMAGE`.
    async fn set_image(&self, name: &str, image: &str) {
        let out = self
            .kubectl(&[
                "set",
                "image",
                &format!("sts/{name}"),
                &format!("app={image}"),
            ])
            .await;
        assert!(out.contains("image updated"), "{out}");
    }

    /// `kubectl patch sts NAME -p PATCH` (a strategic merge patch).
    async fn patch(&self, name: &str, patch: Value) {
        self.kubectl(&["patch", "sts", name, "-p", &patch.to_string()])
            .await;
    }

    /// `kubectl rollout status`, which must report success.
    async fn rollout_status(&self, name: &str) -> String {
        let out = self
            .kubectl(&["rollout", "status", &format!("sts/{name}"), "--timeout=60s"])
            .await;
        assert!(
            out.contains("roll out complete") || out.contains("rolling update complete"),
            "{out}"
        );
        out
    }

    /// Waits until the pods of set `app` (by name) satisfy `pred` (checked after every pod
    /// event, never polled); returns them by name.
    async fn wait_pods(
        &self,
        app: &str,
        what: &str,
        mut pred: impl FnMut(&BTreeMap<String, Pod>) -> bool,
    ) -> BTreeMap<String, Pod> {
        let mut events = watcher(self.pod_api(), watcher::Config::default()).boxed();
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        let mut synced = false;
        let found = tokio::time::timeout(TIMEOUT, async {
            while let Some(event) = events.next().await {
                match event.unwrap() {
                    watcher::Event::Init => pods.clear(),
                    watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                        if member_of(app, &p) {
                            pods.insert(p.name_any(), p);
                        }
                    }
                    watcher::Event::Delete(p) => {
                        pods.remove(&p.name_any());
                    }
                    watcher::Event::InitDone => synced = true,
                }
                if synced && pred(&pods) {
                    return true;
                }
            }
            false
        })
        .await;
        match found {
            Ok(true) => pods,
            _ => panic!(
                "timed out waiting for {what}; pods of {app}:\n{}",
                describe(&pods)
            ),
        }
    }

    /// Waits until the set `name` satisfies `pred`.
    async fn wait_sts(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(&StatefulSet) -> bool,
    ) -> StatefulSet {
        embedded::wait_until(&self.sets(), what, TIMEOUT, |s: &StatefulSet| {
            s.name_any() == name && pred(s)
        })
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// The set's update revision, once its latest spec is observed.
    async fn update_revision(&self, name: &str) -> String {
        let s = self
            .wait_sts(name, "latest spec observed", |s| {
                s.status.as_ref().and_then(|st| st.observed_generation) == s.metadata.generation
            })
            .await;
        s.status.unwrap().update_revision.unwrap()
    }

    /// Waits until ordinals `0..replicas` of `name` all run ready on `revision` (and nothing
    /// else of the set exists); returns them.
    async fn settled(
        &self,
        name: &str,
        replicas: i32,
        revisions: &[(i32, &str)],
    ) -> BTreeMap<String, Pod> {
        let want: BTreeSet<String> = (0..replicas).map(|o| format!("{name}-{o}")).collect();
        let revision_of = |o: i32| {
            revisions
                .iter()
                .rev()
                .find(|(from, _)| o >= *from)
                .map(|(_, r)| r.to_string())
        };
        self.wait_pods(
            name,
            &format!("{replicas} pods settled on {revisions:?}"),
            |pods| {
                pods.keys().cloned().collect::<BTreeSet<_>>() == want
                    && pods.values().all(|p| {
                        let o: i32 = p.name_any().rsplit_once('-').unwrap().1.parse().unwrap();
                        api::pod::is_ready(p)
                            && p.metadata.deletion_timestamp.is_none()
                            && revision_of(o).is_none_or(|r| hash_of(p) == r)
                    })
            },
        )
        .await
    }

    async fn watch(&self, name: &str, rule: Rule) -> StatefulWatcher {
        StatefulWatcher::start(
            self.client.clone(),
            "default",
            name,
            &format!("app={name}"),
            rule,
        )
        .await
    }
}

/// Whether `p` is a pod of set `set` by its name (`<set>-<ordinal>`).
fn member_of(set: &str, p: &Pod) -> bool {
    p.name_any()
        .rsplit_once('-')
        .is_some_and(|(parent, o)| parent == set && o.parse::<u32>().is_ok())
}

fn hash_of(p: &Pod) -> String {
    p.labels().get(HASH).cloned().unwrap_or_default()
}

fn image_of(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

fn describe(pods: &BTreeMap<String, Pod>) -> String {
    pods.values()
        .map(|p| {
            format!(
                "  {} uid={} phase={} ready={} deleting={} hash={} image={}",
                p.name_any(),
                p.uid().unwrap_or_default(),
                api::pod::phase(p),
                api::pod::is_ready(p),
                p.metadata.deletion_timestamp.is_some(),
                hash_of(p),
                image_of(p)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A StatefulSet `name` of `replicas` pods running `image` (container `app`), under `policy`,
/// with `extra` merged into its spec.
fn statefulset(name: &str, replicas: i32, image: &str, ordered: bool, extra: Value) -> Value {
    let mut s = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": if ordered { "OrderedReady" } else { "Parallel" },
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 10,
                         "containers": [{"name": "app", "image": image}]}
            }
        }
    });
    merge(&mut s["spec"], extra);
    as_the_server_takes_it(s)
}

/// Upstream's API has no `podUpdatePolicy`; on its kube-apiserver (a cross-run) the same switch is
/// the annotation a user of a real cluster sets (`controllers::switches`).
fn as_the_server_takes_it(mut s: Value) -> Value {
    if common::upstream::reference().is_none() {
        return s;
    }
    let policy = s
        .pointer_mut("/spec/updateStrategy/rollingUpdate")
        .and_then(Value::as_object_mut)
        .and_then(|r| r.remove("podUpdatePolicy"));
    if let Some(policy) = policy {
        s["metadata"]["annotations"][controllers::switches::POD_UPDATE_POLICY] = policy;
    }
    s
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

fn rolling(partition: i32, max_unavailable: Value) -> Value {
    json!({"updateStrategy": {"type": "RollingUpdate",
        "rollingUpdate": {"partition": partition, "maxUnavailable": max_unavailable}}})
}

// ---- seed 003: maxUnavailable and partition ----

/// One seed-003 case: a set of `replicas` pods under `policy` rolls from `app:1` to `app:2`
/// with `partition` and `max_unavailable`; the pods at or above the partition are replaced from
/// the top, as many at once as maxUnavailable allows and no more, those below stay as they are.
async fn rollout_case(
    ordered: bool,
    replicas: i32,
    partition: i32,
    max_unavailable: Value,
    resolved: i32,
) {
    let env = Env::start().await;
    env.apply(&statefulset(
        "app",
        replicas,
        "app:1",
        ordered,
        rolling(partition, max_unavailable),
    ))
    .await;
    env.rollout_status("app").await;
    let old = env.update_revision("app").await;
    let before = env.settled("app", replicas, &[(0, &old)]).await;
    let rule = Rule {
        start: 0,
        replicas,
        partition,
        max_unavailable: resolved,
        ordered,
        min_ready_seconds: 0,
    };
    let watch = env.watch("app", rule).await;
    let conflicts = env.c.conflicts("statefulsets/status").await;

    env.set_image("app", "app:2").await;
    let new = env.update_revision("app").await;
    assert_ne!(old, new);
    env.rollout_status("app").await;
    let after = env
        .settled("app", replicas, &[(0, &old), (partition, &new)])
        .await;

    assert_eq!(watch.violations(), Vec::<String>::new());
    // Nobody else writes the set: each status write goes over the controller's own last one.
    assert_eq!(
        env.c.conflicts("statefulsets/status").await - conflicts,
        0.0,
        "status writes refused with 409 during the update"
    );
    let staged: Vec<i32> = (partition..replicas).rev().collect();
    let mut order = watch.update_order();
    if !ordered {
        // Parallel: each wave from the top, but one wave's deletions race each other.
        order.sort_by(|a, b| b.cmp(a));
    }
    assert_eq!(order, staged, "replaced from the top down");
    let in_flight = resolved.min(replicas - partition);
    assert_eq!(
        watch.max_unavailable_seen(),
        in_flight,
        "{in_flight} pods out at once, no more and no fewer"
    );
    for o in 0..replicas {
        let n = format!("app-{o}");
        let (b, a) = (&before[&n], &after[&n]);
        if o < partition {
            assert_eq!(
                (b.uid(), image_of(b)),
                (a.uid(), image_of(a)),
                "{n} untouched"
            );
        } else {
            assert_ne!(b.uid(), a.uid(), "{n} recreated");
            assert_eq!(image_of(a), "app:2");
        }
    }
    let st = env.sets().get("app").await.unwrap().status.unwrap();
    assert_eq!(st.updated_replicas, Some(replicas - partition));
    assert_eq!(st.ready_replicas, Some(replicas));
    if partition == 0 {
        assert_eq!(st.current_revision.as_deref(), Some(new.as_str()));
    } else {
        assert_eq!(st.current_revision.as_deref(), Some(old.as_str()));
        assert_eq!(st.current_replicas, Some(partition));
    }
    env.stop().await;
}

/// A module per seed-003 case with a test per pod management policy.
macro_rules! both_policies {
    ($(#[$doc:meta])* $case:ident: $replicas:expr, $partition:expr, $max:expr => $resolved:expr) => {
        $(#[$doc])*
        mod $case {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ordered_ready() {
                super::rollout_case(true, $replicas, $partition, serde_json::json!($max), $resolved).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn parallel() {
                super::rollout_case(false, $replicas, $partition, serde_json::json!($max), $resolved).await;
            }
        }
    };
}

both_policies!(
    /// maxUnavailable 1: one pod at a time, exactly as before the field existed.
    max_unavailable_1: 5, 0, 1 => 1
);
both_policies!(
    /// maxUnavailable greater than 1 without a partition.
    max_unavailable_above_1: 5, 0, 2 => 2
);
both_policies!(
    /// maxUnavailable greater than replicas without a partition: every pod at once.
    max_unavailable_above_replicas: 4, 0, 7 => 7
);
both_policies!(
    /// A percentage rounds down: 50% of 5 is 2.
    max_unavailable_percent_rounds_down: 5, 0, "50%" => 2
);
both_policies!(
    /// Partition with fewer staged pods (2) than maxUnavailable (3).
    partition_staged_fewer_than_max_unavailable: 5, 3, 3 => 3
);
both_policies!(
    /// Partition with as many staged pods (3) as maxUnavailable (3).
    partition_staged_as_many_as_max_unavailable: 5, 2, 3 => 3
);
both_policies!(
    /// Partition with more staged pods (4) than maxUnavailable (2).
    partition_staged_more_than_max_unavailable: 5, 1, 2 => 2
);
both_policies!(
    /// Partition with maxUnavailable greater than replicas.
    partition_and_max_unavailable_above_replicas: 5, 2, 9 => 9
);

// ---- the StatefulSet basics tutorial, on its own manifest ----

/// What happened to each pod, in the order the watch saw it: `("web-0", "created")`, `"ready"`,
/// `"terminating"`, `"deleted"` (each once per pod incarnation).
struct Timeline {
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, &'static str)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Timeline {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Timeline {
    /// Starts watching pods labelled `selector`; returns once the watch has listed.
    async fn start(client: kube::Client, selector: &str) -> Timeline {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let api: Api<Pod> = Api::default_namespaced(client);
        let cfg = watcher::Config::default().labels(selector);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let log = std::sync::Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut state: BTreeMap<String, (String, bool, bool)> = BTreeMap::new();
            let mut events = watcher(api, cfg).boxed();
            while let Some(Ok(e)) = events.next().await {
                let mut log = log.lock().unwrap();
                match e {
                    watcher::Event::InitDone => {
                        if let Some(tx) = tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    watcher::Event::InitApply(p) => {
                        state.insert(
                            p.name_any(),
                            (
                                p.uid().unwrap_or_default(),
                                api::pod::is_ready(&p),
                                p.metadata.deletion_timestamp.is_some(),
                            ),
                        );
                    }
                    watcher::Event::Apply(p) => {
                        let name = p.name_any();
                        let uid = p.uid().unwrap_or_default();
                        let (ready, deleting) = (
                            api::pod::is_ready(&p),
                            p.metadata.deletion_timestamp.is_some(),
                        );
                        let entry = state.entry(name.clone()).or_insert_with(|| {
                            log.push((name.clone(), "created"));
                            (uid.clone(), false, false)
                        });
                        if entry.0 != uid {
                            log.push((name.clone(), "created"));
                            *entry = (uid, false, false);
                        }
                        if ready && !entry.1 {
                            log.push((name.clone(), "ready"));
                        }
                        if deleting && !entry.2 {
                            log.push((name.clone(), "terminating"));
                        }
                        entry.1 |= ready;
                        entry.2 |= deleting;
                    }
                    watcher::Event::Delete(p) => {
                        state.remove(&p.name_any());
                        log.push((p.name_any(), "deleted"));
                    }
                    watcher::Event::Init => {}
                }
            }
        });
        let _ = rx.await;
        Timeline { seen, task }
    }

    fn events(&self) -> Vec<(String, &'static str)> {
        self.seen.lock().unwrap().clone()
    }

    /// The position of the first `what` of `pod`.
    fn at(&self, pod: &str, what: &str) -> usize {
        let events = self.events();
        events
            .iter()
            .position(|(p, w)| p == pod && *w == what)
            .unwrap_or_else(|| panic!("no {what} of {pod} in {events:?}"))
    }

    fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }
}

fn web_yaml() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realworld/web.yaml")
}

impl Env {
    /// Waits until claim `name` is Bound to a volume whose `claimRef` names it back; returns
    /// the volume's name.
    async fn wait_bound(&self, name: &str) -> String {
        let claim = embedded::wait_until(
            &self.claims(),
            &format!("{name} bound"),
            TIMEOUT,
            |c: &PersistentVolumeClaim| {
                c.name_any() == name
                    && c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
            },
        )
        .await
        .unwrap();
        let volume = claim.spec.unwrap().volume_name.unwrap();
        let pv = self.volumes().get(&volume).await.unwrap();
        let r = pv.spec.as_ref().unwrap().claim_ref.clone().unwrap();
        assert_eq!(
            (r.name.as_deref(), r.uid.as_deref()),
            (Some(name), claim.metadata.uid.as_deref())
        );
        assert_eq!(pv.status.unwrap().phase.as_deref(), Some("Bound"));
        volume
    }

    /// The names of the claims in the default namespace.
    async fn claim_names(&self) -> BTreeSet<String> {
        self.claims()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .map(|c| c.name_any())
            .collect()
    }

    /// Waits until the default namespace holds exactly the claims `want`.
    async fn wait_claims(&self, want: &[&str]) {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        let mut names: BTreeSet<String> = BTreeSet::new();
        let config = watcher::Config::default();
        let mut events = watcher(self.claims(), config).boxed();
        let mut synced = false;
        let ok = tokio::time::timeout(TIMEOUT, async {
            while let Some(Ok(e)) = events.next().await {
                match e {
                    watcher::Event::InitApply(c) | watcher::Event::Apply(c) => {
                        if c.metadata.deletion_timestamp.is_none() {
                            names.insert(c.name_any());
                        } else {
                            names.remove(&c.name_any());
                        }
                    }
                    watcher::Event::Delete(c) => {
                        names.remove(&c.name_any());
                    }
                    watcher::Event::InitDone => synced = true,
                    watcher::Event::Init => names.clear(),
                }
                if synced && names == want {
                    return;
                }
            }
        })
        .await;
        assert!(
            ok.is_ok(),
            "claims: want {want:?}, have {:?}",
            self.claim_names().await
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statefulset_basics_tutorial_on_web_yaml() {
    let env = Env::start().await;
    let timeline = Timeline::start(env.client.clone(), "app=nginx").await;

    // Creating a StatefulSet: web-0 first, web-1 only once web-0 runs and is ready.
    let path = web_yaml();
    // TODO(services): apply the whole file once the API server serves Services.
    let manifest = std::fs::read_to_string(&path).unwrap();
    let sts = manifest
        .split("\n---\n")
        .find(|d| d.contains("kind: StatefulSet"))
        .unwrap();
    let out = env.c.kubectl_stdin(&["apply", "-f", "-"], sts).await;
    assert!(out.contains("statefulset.apps/web created"), "{out}");
    env.rollout_status("web").await;
    assert!(
        timeline.at("web-0", "ready") < timeline.at("web-1", "created"),
        "{:?}",
        timeline.events()
    );
    let pods = env.settled("web", 2, &[]).await;
    for (o, (name, p)) in pods.iter().enumerate() {
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(name.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let labels = p.labels();
        assert_eq!(labels["statefulset.kubernetes.io/pod-name"], *name);
        assert_eq!(labels["apps.kubernetes.io/pod-index"], o.to_string());
    }

    // Stable storage: a claim per pod, bound to a volume on the pod's node.
    for o in 0..2 {
        let volume = env.wait_bound(&format!("www-web-{o}")).await;
        let pv = env.volumes().get(&volume).await.unwrap();
        let node = pods[&format!("web-{o}")]
            .spec
            .as_ref()
            .unwrap()
            .node_name
            .clone();
        let pinned = &pv
            .spec
            .unwrap()
            .node_affinity
            .unwrap()
            .required
            .unwrap()
            .node_selector_terms[0]
            .match_expressions
            .clone()
            .unwrap()[0];
        assert_eq!(pinned.values.as_deref(), node.map(|n| vec![n]).as_deref());
    }
    let out = env.kubectl(&["get", "pvc", "-l", "app=nginx"]).await;
    assert!(
        out.contains("www-web-0") && out.contains("Bound") && out.contains("standard"),
        "{out}"
    );

    // Scaling up: in order, each after its predecessor is ready.
    timeline.clear();
    env.kubectl(&["scale", "sts", "web", "--replicas=5"]).await;
    env.rollout_status("web").await;
    env.settled("web", 5, &[]).await;
    for o in 2..4 {
        assert!(
            timeline.at(&format!("web-{o}"), "ready")
                < timeline.at(&format!("web-{}", o + 1), "created"),
            "{:?}",
            timeline.events()
        );
    }
    for o in 2..5 {
        env.wait_bound(&format!("www-web-{o}")).await;
    }

    // Scaling down: the highest first, each once the previous is gone; the claims stay.
    timeline.clear();
    env.kubectl(&["scale", "sts", "web", "--replicas=3"]).await;
    env.settled("web", 3, &[]).await;
    assert!(
        timeline.at("web-4", "deleted") < timeline.at("web-3", "terminating"),
        "{:?}",
        timeline.events()
    );
    env.wait_claims(&[
        "www-web-0",
        "www-web-1",
        "www-web-2",
        "www-web-3",
        "www-web-4",
    ])
    .await;

    // Staging an update: a partition of 3 leaves all three pods on the old revision, even one
    // deleted and recreated.
    let old = env.update_revision("web").await;
    env.patch("web", json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 3}}}}))
        .await;
    env.kubectl(&[
        "patch", "statefulset", "web", "--type=json",
        "-p=[{\"op\": \"replace\", \"path\": \"/spec/template/spec/containers/0/image\", \"value\":\"registry.k8s.io/nginx-slim:0.24\"}]",
    ])
    .await;
    let new = env.update_revision("web").await;
    assert_ne!(old, new);
    let out = env.rollout_status("web").await;
    assert!(out.contains("partitioned roll out complete"), "{out}");
    let before = env.settled("web", 3, &[(0, &old)]).await;
    env.kubectl(&["delete", "pod", "web-2"]).await;
    let after = env
        .wait_pods("web", "web-2 recreated on the old revision", |pods| {
            pods.get("web-2").is_some_and(|p| {
                p.uid() != before["web-2"].uid() && api::pod::is_ready(p) && hash_of(p) == old
            })
        })
        .await;
    assert_eq!(image_of(&after["web-2"]), "registry.k8s.io/nginx-slim:0.7");

    // A canary: partition 2 updates web-2 only.
    env.patch(
        "web",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}),
    )
    .await;
    env.rollout_status("web").await;
    let pods = env.settled("web", 3, &[(0, &old), (2, &new)]).await;
    assert_eq!(image_of(&pods["web-2"]), "registry.k8s.io/nginx-slim:0.24");
    assert_eq!(image_of(&pods["web-1"]), "registry.k8s.io/nginx-slim:0.7");

    // A phased roll out: partition 0 updates the rest, from the highest ordinal down.
    timeline.clear();
    env.patch(
        "web",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
    )
    .await;
    env.rollout_status("web").await;
    env.settled("web", 3, &[(0, &new)]).await;
    assert!(
        timeline.at("web-1", "ready") < timeline.at("web-0", "terminating"),
        "{:?}",
        timeline.events()
    );
    let sts = env.sets().get("web").await.unwrap();
    assert_eq!(
        sts.status.as_ref().unwrap().current_revision.as_deref(),
        Some(new.as_str())
    );

    // History and undo.
    let out = env.kubectl(&["rollout", "history", "sts/web"]).await;
    let revisions: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(revisions.len(), 2, "{out}");
    let out = env.kubectl(&["rollout", "undo", "sts/web"]).await;
    assert!(out.contains("rolled back"), "{out}");
    env.rollout_status("web").await;
    let pods = env.settled("web", 3, &[(0, &old)]).await;
    assert!(
        pods.values()
            .all(|p| image_of(p) == "registry.k8s.io/nginx-slim:0.7")
    );
    assert_eq!(
        env.update_revision("web").await,
        old,
        "the old revision is current again"
    );

    // Deleting with the default retention (Retain): pods go, claims and volumes stay.
    env.kubectl(&["delete", "sts", "web"]).await;
    env.wait_pods("web", "every pod gone", |pods| pods.is_empty())
        .await;
    env.wait_claims(&[
        "www-web-0",
        "www-web-1",
        "www-web-2",
        "www-web-3",
        "www-web-4",
    ])
    .await;
    env.stop().await;
}

// ---- in-place updates (seed 004) ----

fn in_place() -> Value {
    json!({"updateStrategy": {"type": "RollingUpdate",
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2}}})
}

fn with_claims() -> Value {
    json!({"volumeClaimTemplates": [{"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]})
}

/// What must not change when a pod is updated in place.
fn identity(p: &Pod) -> (String, String, Option<String>, Option<String>, Vec<String>) {
    let spec = p.spec.as_ref().unwrap();
    let status = p.status.as_ref().unwrap();
    let claims = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect();
    (
        p.name_any(),
        p.uid().unwrap(),
        spec.node_name.clone(),
        status.pod_ip.clone(),
        claims,
    )
}

fn restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .restart_count
}

async fn in_place_rollout(ordered: bool) {
    let env = Env::start().await;
    let mut extra = in_place();
    merge(&mut extra, with_claims());
    env.apply(&statefulset("app", 4, "app:1", ordered, extra))
        .await;
    env.rollout_status("app").await;
    let old = env.update_revision("app").await;
    let before = env.settled("app", 4, &[(0, &old)]).await;
    let rule = Rule {
        start: 0,
        replicas: 4,
        partition: 0,
        max_unavailable: 2,
        ordered,
        min_ready_seconds: 0,
    };
    let watch = env.watch("app", rule).await;

    env.set_image("app", "app:2").await;
    let new = env.update_revision("app").await;
    env.rollout_status("app").await;
    let after = env.settled("app", 4, &[(0, &new)]).await;
    assert_eq!(watch.violations(), Vec::<String>::new());
    assert_eq!(watch.max_unavailable_seen(), 2);
    for (name, b) in &before {
        let a = &after[name];
        assert_eq!(identity(a), identity(b), "{name} updated in place");
        assert_eq!(image_of(a), "app:2");
        assert_eq!(
            restarts(a),
            restarts(b) + 1,
            "{name}'s container restarted once"
        );
        let status = a
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .clone();
        assert!(api::image::same(&status.image, "app:2"), "{status:?}");
    }
    common::wait_event(
        env.client.clone(),
        "default",
        None,
        "SuccessfulUpdatePodInPlace",
        "in place",
    )
    .await;
    let out = env
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "reason=SuccessfulUpdatePodInPlace",
        ])
        .await;
    assert!(out.contains("in place"), "{out}");
    env.stop().await;
}

/// An image change under `InPlaceIfPossible` patches every pod in place: same UID, name, node,
/// IP and claims, the container restarted once, within maxUnavailable and from the top down.
mod in_place_image_update {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ordered_ready() {
        super::in_place_rollout(true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parallel() {
        super::in_place_rollout(false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_falls_back_to_recreate_for_other_changes_and_history_stays_right() {
    let env = Env::start().await;
    env.apply(&statefulset("app", 3, "app:1", false, in_place()))
        .await;
    env.rollout_status("app").await;
    let first = env.update_revision("app").await;
    let before = env.settled("app", 3, &[(0, &first)]).await;

    // An env var: recreated.
    env.kubectl(&["set", "env", "sts/app", "MODE=fast"]).await;
    let second = env.update_revision("app").await;
    env.rollout_status("app").await;
    let after = env.settled("app", 3, &[(0, &second)]).await;
    for (name, b) in &before {
        assert_ne!(
            b.uid(),
            after[name].uid(),
            "{name} recreated for an env change"
        );
    }

    // An image and a label together: recreated too.
    env.kubectl(&[
        "patch",
        "sts",
        "app",
        "-p",
        &json!({"spec": {"template": {"metadata": {"labels": {"tier": "x"}},
            "spec": {"containers": [{"name": "app", "image": "app:2"}]}}}})
        .to_string(),
    ])
    .await;
    let third = env.update_revision("app").await;
    env.rollout_status("app").await;
    let last = env.settled("app", 3, &[(0, &third)]).await;
    for (name, a) in &after {
        assert_ne!(
            a.uid(),
            last[name].uid(),
            "{name} recreated for a label change"
        );
    }

    // An image alone after that: in place again.
    env.set_image("app", "app:3").await;
    let fourth = env.update_revision("app").await;
    env.rollout_status("app").await;
    let end = env.settled("app", 3, &[(0, &fourth)]).await;
    for (name, a) in &last {
        assert_eq!(a.uid(), end[name].uid(), "{name} updated in place");
    }
    let out = env.kubectl(&["rollout", "history", "sts/app"]).await;
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    let sts = env.sets().get("app").await.unwrap();
    let st = sts.status.unwrap();
    assert_eq!(st.current_revision.as_deref(), Some(fourth.as_str()));
    assert_eq!(
        (st.updated_replicas, st.current_replicas),
        (Some(3), Some(3))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_restart_onto_a_never_ready_image_stalls_and_undo_restores_it_in_place() {
    let env = Env::start().await;
    env.apply(&statefulset("app", 4, "app:1", true, in_place()))
        .await;
    env.rollout_status("app").await;
    let good = env.update_revision("app").await;
    let before = env.settled("app", 4, &[(0, &good)]).await;
    let rule = Rule {
        start: 0,
        replicas: 4,
        partition: 0,
        max_unavailable: 2,
        ordered: true,
        min_ready_seconds: 0,
    };
    let watch = env.watch("app", rule).await;

    env.set_image("app", "app:stuck").await;
    let bad = env.update_revision("app").await;
    // The first batch (app-3, app-2) restarts onto the bad image and never gets ready.
    let stuck = env
        .wait_pods("app", "the first batch stuck on the bad image", |pods| {
            ["app-3", "app-2"].iter().all(|n| {
                pods.get(*n).is_some_and(|p| {
                    hash_of(p) == bad && !api::pod::is_ready(p) && restarts(p) == 1
                })
            })
        })
        .await;
    // The status follows the pods it counts: wait for it, do not read it once.
    env.wait_sts("app", "two pods counted as updated", |s| {
        s.status.as_ref().and_then(|s| s.updated_replicas) == Some(2)
    })
    .await;
    for n in ["app-0", "app-1"] {
        assert_eq!(
            hash_of(&stuck[n]),
            good,
            "{n} waits below the stalled batch"
        );
    }

    let out = env.kubectl(&["rollout", "undo", "sts/app"]).await;
    assert!(out.contains("rolled back"), "{out}");
    env.rollout_status("app").await;
    assert_eq!(env.update_revision("app").await, good);
    let after = env.settled("app", 4, &[(0, &good)]).await;
    for (name, b) in &before {
        let a = &after[name];
        assert_eq!(identity(a), identity(b), "{name} kept its identity");
        assert_eq!(image_of(a), "app:1");
    }
    for n in ["app-3", "app-2"] {
        assert_eq!(
            restarts(&after[n]),
            2,
            "{n} restarted twice: onto the bad image and back"
        );
    }
    assert_eq!(watch.violations(), Vec::<String>::new());
    env.stop().await;
}

// ---- beyond upstream: recovery from a bad revision (upstream #67250) ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_replaces_a_pod_stuck_on_a_bad_revision_once_the_template_is_fixed() {
    let env = Env::start().await;
    env.apply(&statefulset("app", 3, "app:1", true, json!({})))
        .await;
    env.rollout_status("app").await;
    let good = env.update_revision("app").await;
    env.settled("app", 3, &[(0, &good)]).await;

    env.set_image("app", "app:stuck").await;
    let bad = env.update_revision("app").await;
    let stuck = env
        .wait_pods("app", "app-2 stuck on the bad revision", |pods| {
            pods.get("app-2")
                .is_some_and(|p| hash_of(p) == bad && api::pod::phase(p) == "Running")
        })
        .await;
    let stuck_uid = stuck["app-2"].uid();

    // Upstream waits here for ever, until someone deletes app-2 by hand.
    env.set_image("app", "app:2").await;
    let fixed = env.update_revision("app").await;
    env.rollout_status("app").await;
    let after = env.settled("app", 3, &[(0, &fixed)]).await;
    assert_ne!(after["app-2"].uid(), stuck_uid, "app-2 was replaced");
    assert!(after.values().all(|p| image_of(p) == "app:2"));
    env.stop().await;
}

// ---- a controller killed mid-rollout ----

/// Starts `rollwright controllers --kubeconfig ...` as a child process.
fn spawn_controllers(env: &Env) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rollwright"));
    command.arg("controllers");
    if let Some(ca) = env.c.root_ca_file() {
        command.arg("--root-ca-file").arg(ca);
    }
    command
        // No status endpoint: tests run side by side on one machine.
        .arg("--secure-port=0")
        .arg("--kubeconfig")
        .arg(env.c.kubeconfig())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("controllers start")
}

async fn controller_crash(ordered: bool) {
    let mut env = Env::without_controllers().await;
    env.start_scheduler();
    let mut child = spawn_controllers(&env);
    let mut extra = rolling(0, json!(2));
    merge(&mut extra, with_claims());
    env.apply(&statefulset("app", 5, "app:1", ordered, extra))
        .await;
    env.rollout_status("app").await;
    let old = env.update_revision("app").await;
    env.settled("app", 5, &[(0, &old)]).await;
    let rule = Rule {
        start: 0,
        replicas: 5,
        partition: 0,
        max_unavailable: 2,
        ordered,
        min_ready_seconds: 0,
    };
    let watch = env.watch("app", rule).await;

    // Without a scheduler the rollout freezes with the first new pod Pending.
    env.stop_scheduler().await;
    env.set_image("app", "app:2").await;
    let new = env.update_revision("app").await;
    env.wait_pods("app", "a new pod pending", |pods| {
        pods.values().any(|p| hash_of(p) == new && !is_bound(p))
    })
    .await;
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("the controllers are gone");
    env.start_scheduler();

    // New controllers on the same server finish the rollout within the invariants.
    let _child = spawn_controllers(&env);
    env.rollout_status("app").await;
    let pods = env.settled("app", 5, &[(0, &new)]).await;
    assert!(pods.values().all(|p| image_of(p) == "app:2"));
    assert_eq!(watch.violations(), Vec::<String>::new());
    for o in 0..5 {
        env.wait_bound(&format!("data-app-{o}")).await;
    }
    env.stop().await;
}

fn is_bound(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// `kill -9` of a child `rollwright controllers` mid-rollout; a new one finishes the job.
mod controller_killed_mid_rollout {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ordered_ready() {
        super::controller_crash(true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parallel() {
        super::controller_crash(false).await;
    }
}

// ---- volumes: retention, failed pods ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_follow_the_retention_policy_on_scale_down_and_deletion() {
    let env = Env::start().await;
    let mut extra = with_claims();
    merge(
        &mut extra,
        json!({"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete", "whenDeleted": "Delete"}}),
    );
    env.apply(&statefulset("app", 3, "app:1", false, extra))
        .await;
    env.rollout_status("app").await;
    let mut volumes = BTreeMap::new();
    for o in 0..3 {
        volumes.insert(o, env.wait_bound(&format!("data-app-{o}")).await);
    }
    let claim = env.claims().get("data-app-0").await.unwrap();
    let owner = &claim.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("StatefulSet", Some(true))
    );

    // whenScaled: Delete — the condemned ordinals' claims go with their pods, and their
    // volumes (reclaim policy Delete) with the claims.
    env.kubectl(&["scale", "sts", "app", "--replicas=1"]).await;
    env.settled("app", 1, &[]).await;
    env.wait_claims(&["data-app-0"]).await;
    for o in 1..3 {
        let name = volumes[&o].clone();
        embedded::wait_until(
            &env.volumes(),
            "volume deleted",
            TIMEOUT,
            |_: &PersistentVolume| true,
        )
        .await
        .ok();
        wait_gone(&env.volumes(), &name).await;
    }

    // whenDeleted: Delete — the rest goes with the set.
    env.kubectl(&["delete", "sts", "app"]).await;
    env.wait_claims(&[]).await;
    wait_gone(&env.volumes(), &volumes[&0]).await;

    // whenScaled: Retain (the default) with whenDeleted: Delete — scale-down keeps claims, the
    // set's deletion takes them all.
    let mut extra = with_claims();
    merge(
        &mut extra,
        json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}),
    );
    env.apply(&statefulset("kept", 2, "app:1", false, extra))
        .await;
    env.rollout_status("kept").await;
    env.kubectl(&["scale", "sts", "kept", "--replicas=1"]).await;
    env.settled("kept", 1, &[]).await;
    env.wait_claims(&["data-kept-0", "data-kept-1"]).await;
    env.kubectl(&["delete", "sts", "kept"]).await;
    env.wait_claims(&[]).await;
    env.stop().await;
}

/// Waits until the named object is gone.
async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api.clone(), cfg).boxed();
    let mut present = true;
    let mut synced = false;
    let ok = tokio::time::timeout(TIMEOUT, async {
        while let Some(Ok(e)) = events.next().await {
            match e {
                watcher::Event::Init => present = false,
                watcher::Event::InitApply(_) | watcher::Event::Apply(_) => present = true,
                watcher::Event::Delete(_) => present = false,
                watcher::Event::InitDone => synced = true,
            }
            if synced && !present {
                return;
            }
        }
    })
    .await;
    assert!(ok.is_ok(), "{name} still exists");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pod_is_recreated_with_the_same_identity_and_claims() {
    let env = Env::start().await;
    env.apply(&statefulset("app", 2, "app:1", true, with_claims()))
        .await;
    env.rollout_status("app").await;
    let volume = env.wait_bound("data-app-1").await;
    let before = env.settled("app", 2, &[]).await;
    let timeline = Timeline::start(env.client.clone(), "app=app").await;

    // app-1's new image fails 300ms after starting: it is deleted and recreated, again and
    // again, always as app-1 on data-app-1.
    env.kubectl(&[
        "patch",
        "sts",
        "app",
        "-p",
        &json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}}}}).to_string(),
    ])
    .await;
    env.set_image("app", "app:failing").await;
    let mut uids = BTreeSet::new();
    env.wait_pods("app", "app-1 failed and recreated twice", |pods| {
        if let Some(p) = pods.get("app-1") {
            uids.insert(p.uid().unwrap());
        }
        uids.len() >= 3
    })
    .await;
    common::wait_event(
        env.client.clone(),
        "default",
        None,
        "RecreatingFailedPod",
        "recreating failed Pod app-1",
    )
    .await;
    let events = env
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "reason=RecreatingFailedPod",
        ])
        .await;
    assert!(events.contains("recreating failed Pod app-1"), "{events}");
    let recreated = timeline
        .events()
        .iter()
        .filter(|(p, w)| p == "app-1" && *w == "created")
        .count();
    assert!(recreated >= 2, "{:?}", timeline.events());

    // A good image again: app-1 settles, on the same claim and volume; app-0 never moved.
    env.set_image("app", "app:2").await;
    env.rollout_status("app").await;
    let after = env.settled("app", 2, &[]).await;
    assert_eq!(after["app-0"].uid(), before["app-0"].uid());
    assert_eq!(identity(&after["app-1"]).4, vec!["data-app-1".to_string()]);
    assert_eq!(env.wait_bound("data-app-1").await, volume);
    env.stop().await;
}

// ---- pause, OnDelete, ordinals, history ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_set_replaces_no_old_pod_but_still_creates_missing_ordinals() {
    let env = Env::start().await;
    env.apply(&statefulset("app", 3, "app:1", false, rolling(0, json!(3))))
        .await;
    env.rollout_status("app").await;
    let old = env.update_revision("app").await;
    let before = env.settled("app", 3, &[(0, &old)]).await;

    env.patch(
        "app",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": true}}}}),
    )
    .await;
    env.set_image("app", "app:2").await;
    let new = env.update_revision("app").await;
    // A missing ordinal is created (on the new revision) while old pods stay.
    env.kubectl(&["scale", "sts", "app", "--replicas=4"]).await;
    let during = env
        .wait_pods("app", "app-3 created while paused", |pods| {
            pods.get("app-3")
                .is_some_and(|p| api::pod::is_ready(p) && hash_of(p) == new)
        })
        .await;
    for o in 0..3 {
        let n = format!("app-{o}");
        assert_eq!(
            during[&n].uid(),
            before[&n].uid(),
            "{n} untouched while paused"
        );
    }
    // Deleted by hand while paused: recreated, as a missing ordinal.
    env.kubectl(&["delete", "pod", "app-0"]).await;
    env.wait_pods("app", "app-0 back", |pods| {
        pods.get("app-0")
            .is_some_and(|p| p.uid() != before["app-0"].uid() && api::pod::is_ready(p))
    })
    .await;
    let still = env.settled("app", 4, &[]).await;
    for o in 1..3 {
        let n = format!("app-{o}");
        assert_eq!(
            still[&n].uid(),
            before[&n].uid(),
            "{n} untouched while paused"
        );
    }

    // The annotation pauses too (a real cluster lacks the field).
    env.patch(
        "app",
        json!({"metadata": {"annotations": {"rollwright.io/paused": "true"}},
        "spec": {"updateStrategy": {"rollingUpdate": {"paused": false}}}}),
    )
    .await;
    env.update_revision("app").await;
    env.patch(
        "app",
        json!({"metadata": {"annotations": {"rollwright.io/paused": null}}}),
    )
    .await;
    env.rollout_status("app").await;
    env.settled("app", 4, &[(0, &new)]).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_replaces_only_pods_deleted_by_hand() {
    let env = Env::start().await;
    env.apply(&statefulset(
        "app",
        3,
        "app:1",
        false,
        json!({"updateStrategy": {"type": "OnDelete"}}),
    ))
    .await;
    env.wait_sts("app", "3 ready", |s| {
        s.status.as_ref().and_then(|st| st.ready_replicas) == Some(3)
    })
    .await;
    let old = env.update_revision("app").await;
    let before = env.settled("app", 3, &[(0, &old)]).await;
    env.set_image("app", "app:2").await;
    let new = env.update_revision("app").await;
    env.kubectl(&["delete", "pod", "app-1"]).await;
    let after = env
        .wait_pods("app", "app-1 recreated on the new revision", |pods| {
            pods.get("app-1")
                .is_some_and(|p| hash_of(p) == new && api::pod::is_ready(p))
        })
        .await;
    for n in ["app-0", "app-2"] {
        assert_eq!(after[n].uid(), before[n].uid());
    }
    let st = env
        .wait_sts("app", "counts", |s| {
            s.status.as_ref().and_then(|st| st.updated_replicas) == Some(1)
        })
        .await
        .status
        .unwrap();
    assert_eq!(st.current_replicas, Some(2));
    assert_eq!(st.current_revision.as_deref(), Some(old.as_str()));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinals_start_where_the_spec_says_and_history_is_cleaned_up() {
    let env = Env::start().await;
    env.apply(&statefulset(
        "app",
        2,
        "app:1",
        true,
        json!({"ordinals": {"start": 5}, "revisionHistoryLimit": 1}),
    ))
    .await;
    env.rollout_status("app").await;
    let pods = env
        .wait_pods("app", "app-5 and app-6", |pods| {
            pods.keys().cloned().collect::<Vec<_>>() == ["app-5", "app-6"]
                && pods.values().all(api::pod::is_ready)
        })
        .await;
    assert_eq!(pods["app-6"].labels()["apps.kubernetes.io/pod-index"], "6");
    for image in ["app:2", "app:3", "app:4"] {
        env.set_image("app", image).await;
        env.rollout_status("app").await;
    }
    let list = env
        .c
        .kubectl_json(&["get", "controllerrevisions", "-o", "json"])
        .await;
    let revisions: Vec<i64> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_i64().unwrap())
        .collect();
    assert_eq!(
        revisions.len(),
        2,
        "the current revision and one more: {revisions:?}"
    );
    assert!(
        revisions.contains(&4) && revisions.contains(&3),
        "{revisions:?}"
    );
    env.stop().await;
}
