//! DaemonSets end to end (issue 5): real `kubectl` against a whole in-process cluster — API
//! server, simulated nodes with short fixed delays and a fault profile, the scheduler (which
//! binds daemon pods through their `matchFields metadata.name` affinity and checks resource fit)
//! and the controllers — with an independent invariant watcher on every rolling update and the
//! DaemonSet's status checked against a count of its own, made from `kubectl get -o json`.
//!
//! Mid-rollout states are made deterministic, never timed: an image matching the profile's
//! `*:stuck` rule (neverReady) or `*:broken` rule (imagePullFailure) freezes a rolling update
//! exactly where its `maxUnavailable` budget runs out; stopping the scheduler freezes it with new
//! pods Pending. Waits are watches or `kubectl rollout status --timeout`.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use common::Rig;
use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Event, Node, Pod},
};
use kube::{Api, ResourceExt, runtime::watcher};
use nodesim::{NodeSim, distribution::Distribution};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::task::JoinHandle;

/// How long a watch waits for a state a working cluster reaches in a few seconds.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Images ending in `:stuck` run but never get ready; `:broken` never pull; `:flaky` fails 300ms
/// after starting, on node-1 only.
const PROFILE: &str = r#"
seed: 1
rules:
  - name: stuck
    match: {image: "*:stuck"}
    fault: neverReady
  - name: broken
    match: {image: "*:broken"}
    fault: imagePullFailure
  - name: flaky
    match: {image: "*:flaky", node: "node-1"}
    fault: {failAfter: {after: 300ms}}
"#;

const HASH: &str = "controller-revision-hash";
const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// A cluster whose scheduler and controllers the test can stop and start again.
struct Env {
    rig: Rig,
    sim: NodeSim,
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
    /// `nodes` simulated nodes (`node-0` ...; 8 CPUs each) whose pods start after 50ms and get
    /// ready 50ms later, with `labels` on every node; the scheduler and controllers run beside
    /// them as in `rollwright up`. Returns once every node is Ready.
    async fn start(nodes: usize, labels: &[(&str, &str)]) -> Env {
        let sim = NodeSim {
            nodes,
            start_delay: Distribution::Fixed(Duration::from_millis(50)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(50)),
            extra_labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let mut env = Env {
            rig: Rig::start(sim.clone(), PROFILE).await,
            sim,
        };
        env.wait_nodes_ready(nodes).await;
        env.start_scheduler_and_controllers();
        env
    }

    async fn stop(self) {
        self.rig.stop().await;
    }

    async fn wait_nodes_ready(&self, n: usize) {
        let mut ready = BTreeSet::new();
        embedded::wait_until(
            &self.nodes(),
            &format!("{n} nodes ready"),
            TIMEOUT,
            |node: &Node| {
                if node_ready(node) {
                    ready.insert(node.name_any());
                }
                ready.len() >= n
            },
        )
        .await
        .unwrap();
    }

    async fn set_image(&self, name: &str, image: &str) {
        let out = self
            .kubectl(&[
                "set",
                "image",
                &format!("ds/{name}"),
                &format!("app={image}"),
            ])
            .await;
        assert!(out.contains("image updated"), "{out}");
    }

    async fn annotate_cause(&self, name: &str, cause: &str) {
        self.kubectl(&[
            "annotate",
            "ds",
            name,
            &format!("{CHANGE_CAUSE}={cause}"),
            "--overwrite",
        ])
        .await;
    }

    /// `kubectl rollout status`, which must report success.
    async fn rollout_status(&self, name: &str) {
        let out = self
            .kubectl(&["rollout", "status", &format!("ds/{name}"), "--timeout=60s"])
            .await;
        assert!(
            out.contains(&format!("daemon set \"{name}\" successfully rolled out")),
            "{out}"
        );
    }

    /// `kubectl rollout history` as (revision, change cause) rows.
    async fn history(&self, name: &str) -> Vec<(i64, String)> {
        let out = self
            .kubectl(&["rollout", "history", &format!("ds/{name}")])
            .await;
        out.lines()
            .skip_while(|l| !l.starts_with("REVISION"))
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let (rev, cause) = l
                    .trim()
                    .split_once(char::is_whitespace)
                    .unwrap_or((l.trim(), ""));
                (rev.parse().unwrap(), cause.trim().to_string())
            })
            .collect()
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn daemonsets(&self) -> Api<DaemonSet> {
        Api::default_namespaced(self.client.clone())
    }

    fn pod_api(&self) -> Api<Pod> {
        Api::default_namespaced(self.client.clone())
    }

    /// Waits until the pods labelled `app=<app>` satisfy `pred` (checked after every pod event,
    /// never polled); returns them.
    async fn wait_pods(&self, app: &str, what: &str, pred: impl Fn(&[Pod]) -> bool) -> Vec<Pod> {
        let config = watcher::Config::default().labels(&format!("app={app}"));
        let mut events = watcher(self.pod_api(), config).boxed();
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        let mut synced = false;
        let found = tokio::time::timeout(TIMEOUT, async {
            while let Some(event) = events.next().await {
                match event.unwrap() {
                    watcher::Event::Init => pods.clear(),
                    watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                        pods.insert(p.name_any(), p);
                    }
                    watcher::Event::Delete(p) => {
                        pods.remove(&p.name_any());
                    }
                    watcher::Event::InitDone => synced = true,
                }
                let now: Vec<Pod> = pods.values().cloned().collect();
                if synced && pred(&now) {
                    return Some(now);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(p)) => p,
            _ => panic!(
                "timed out waiting for {what}; pods of {app}:\n{}",
                describe(&pods.values().cloned().collect::<Vec<_>>())
            ),
        }
    }

    /// Waits until the DaemonSet's pods are settled: exactly one on each of `on`, all ready, on
    /// the current revision when `current`, none terminating and none elsewhere (pods on nodes
    /// that no longer exist aside). Returns them.
    async fn settled(&self, app: &str, on: &[&str], current: bool) -> Vec<Pod> {
        let hash = if current {
            Some(self.current_hash(app).await)
        } else {
            None
        };
        let existing: BTreeSet<String> = self
            .nodes()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|n| n.name_any())
            .collect();
        let want: BTreeSet<String> = on.iter().map(|s| s.to_string()).collect();
        self.wait_pods(app, &format!("one ready pod on each of {on:?}"), |pods| {
            let live: Vec<&Pod> = pods
                .iter()
                .filter(|p| target(p).is_some_and(|n| existing.contains(&n)))
                .collect();
            let nodes: Vec<String> = live.iter().filter_map(|p| target(p)).collect();
            let distinct: BTreeSet<String> = nodes.iter().cloned().collect();
            nodes.len() == want.len()
                && distinct == want
                && live.iter().all(|p| {
                    api::pod::is_ready(p)
                        && p.metadata.deletion_timestamp.is_none()
                        && hash.as_ref().is_none_or(|h| hash_of(p) == *h)
                })
        })
        .await
    }

    /// The hash of the DaemonSet's current revision (its highest), read with kubectl once the
    /// controller has observed the latest spec (it records the revision before the status).
    async fn current_hash(&self, app: &str) -> String {
        self.wait_ds(app, "latest spec observed", |d| {
            d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
        })
        .await;
        let revs = self.revisions(app).await;
        revs.last().unwrap().1.clone()
    }

    /// The DaemonSet's ControllerRevisions as (revision, hash), by revision, read with kubectl.
    async fn revisions(&self, app: &str) -> Vec<(i64, String)> {
        let list = self
            .c
            .kubectl_json(&[
                "get",
                "controllerrevisions",
                "-l",
                &format!("app={app}"),
                "-o",
                "json",
            ])
            .await;
        let mut out: Vec<(i64, String)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["revision"].as_i64().unwrap(),
                    r["metadata"]["labels"][HASH].as_str().unwrap().to_string(),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// Counts the status fields from `kubectl get nodes/pods/controllerrevisions -o json` alone,
    /// then waits until the DaemonSet's status says the same and has observed its generation.
    /// Call it at a quiescent point (after [`Env::settled`] or an equivalent wait).
    async fn check_status(&self, app: &str) -> Counts {
        let ds = self.c.kubectl_json(&["get", "ds", app, "-o", "json"]).await;
        let nodes = self.c.kubectl_json(&["get", "nodes", "-o", "json"]).await;
        let pods = self
            .c
            .kubectl_json(&["get", "pods", "-l", &format!("app={app}"), "-o", "json"])
            .await;
        let hash = self.current_hash(app).await;
        let want = independent_counts(&ds, &nodes, &pods, &hash);
        let mut last = None;
        let found = embedded::wait_until(
            &self.daemonsets(),
            &format!("status of {app} = {want:?}"),
            TIMEOUT,
            |d: &DaemonSet| {
                if d.name_any() != app {
                    return false;
                }
                let got = Counts::of(d);
                last = Some(got);
                got == want
                    && d.status.as_ref().and_then(|s| s.observed_generation)
                        == d.metadata.generation
            },
        )
        .await;
        assert!(
            found.is_ok(),
            "status of {app}: want {want:?}, last seen {last:?}"
        );
        want
    }

    /// Waits until the DaemonSet `app` satisfies `pred`.
    async fn wait_ds(&self, app: &str, what: &str, pred: impl Fn(&DaemonSet) -> bool) -> DaemonSet {
        embedded::wait_until(&self.daemonsets(), what, TIMEOUT, |d: &DaemonSet| {
            d.name_any() == app && pred(d)
        })
        .await
        .unwrap()
    }

    async fn watch(&self, app: &str, eligible: &[&str], limits: Limits) -> Invariants {
        Invariants::start(self.client.clone(), app, eligible, limits).await
    }
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// The node a daemon pod is on, or (still Pending) the one its required node affinity names.
fn target(p: &Pod) -> Option<String> {
    let spec = p.spec.as_ref()?;
    if let Some(n) = spec.node_name.clone().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

fn is_bound(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
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

fn is_terminal(p: &Pod) -> bool {
    matches!(api::pod::phase(p), "Failed" | "Succeeded")
}

/// Pods by the node they target, as (node -> uid).
fn uids_by_node(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| (target(p).unwrap(), p.uid().unwrap()))
        .collect()
}

fn describe(pods: &[Pod]) -> String {
    pods.iter()
        .map(|p| {
            format!(
                "  {} on {:?} bound={} phase={} ready={} deleting={} hash={} image={}",
                p.name_any(),
                target(p),
                is_bound(p),
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

/// The status counts `kubectl rollout status` and `kubectl get ds` read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    desired: i64,
    current: i64,
    misscheduled: i64,
    ready: i64,
    available: i64,
    unavailable: i64,
    updated: i64,
}

impl Counts {
    fn of(ds: &DaemonSet) -> Counts {
        let s = ds.status.clone().unwrap_or_default();
        Counts {
            desired: s.desired_number_scheduled.into(),
            current: s.current_number_scheduled.into(),
            misscheduled: s.number_misscheduled.into(),
            ready: s.number_ready.into(),
            available: s.number_available.unwrap_or(0).into(),
            unavailable: s.number_unavailable.unwrap_or(0).into(),
            updated: s.updated_number_scheduled.unwrap_or(0).into(),
        }
    }
}

/// The taints (key, effect) every daemon pod tolerates (upstream's
/// `AddOrUpdateDaemonPodTolerations`, without the host-network one).
const AUTO_TOLERATED: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];

/// The DaemonSet's status as this test counts it from kubectl's JSON, without the controller's
/// code: per existing node, whether it should run the pod (node selector matches, no taint the
/// pod does not tolerate) and which daemon pod targets it.
fn independent_counts(ds: &Value, nodes: &Value, pods: &Value, hash: &str) -> Counts {
    let uid = ds["metadata"]["uid"].as_str().unwrap();
    let selector = ds["spec"]["template"]["spec"]["nodeSelector"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut by_node: HashMap<String, Vec<Pod>> = HashMap::new();
    for item in pods["items"].as_array().unwrap() {
        let pod: Pod = serde_json::from_value(item.clone()).unwrap();
        let owned = pod
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == uid);
        if !owned || (is_terminal(&pod) && pod.metadata.deletion_timestamp.is_some()) {
            continue;
        }
        if let Some(n) = target(&pod) {
            by_node.entry(n).or_default().push(pod);
        }
    }
    let mut c = Counts::default();
    for node in nodes["items"].as_array().unwrap() {
        let name = node["metadata"]["name"].as_str().unwrap();
        let labels = &node["metadata"]["labels"];
        let selected = selector.iter().all(|(k, v)| labels[k] == *v);
        let untolerated = |effect: &str| {
            node["spec"]["taints"].as_array().is_some_and(|ts| {
                ts.iter().any(|t| {
                    t["effect"] == effect
                        && !AUTO_TOLERATED
                            .iter()
                            .any(|(k, e)| t["key"] == *k && t["effect"] == *e)
                })
            })
        };
        let should_run = selected && !untolerated("NoSchedule") && !untolerated("NoExecute");
        let pods = by_node.get(name).filter(|p| !p.is_empty());
        if !should_run {
            c.misscheduled += i64::from(pods.is_some());
            continue;
        }
        c.desired += 1;
        let Some(pods) = pods else { continue };
        c.current += 1;
        let oldest = pods
            .iter()
            .min_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0))
            .unwrap();
        if api::pod::is_ready(oldest) {
            c.ready += 1;
            c.available += 1;
        }
        c.updated += i64::from(hash_of(oldest) == hash);
    }
    c.unavailable = c.desired - c.available;
    c
}

/// The promises of a rolling update.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Eligible nodes without an available daemon pod, at most.
    pub(crate) max_unavailable: usize,
    /// Nodes with two daemon pods, at most: terminating ones included without surge; with surge
    /// (an old pod may still be terminating after its replacement became available) only pods
    /// not terminating count.
    pub(crate) max_doubled: usize,
    pub(crate) surge: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) violations: Vec<String>,
    pub(crate) max_unavailable: usize,
    pub(crate) max_doubled: usize,
    pub(crate) events: usize,
}

/// An independent observer of one DaemonSet's pods: after every pod event (the watch delivers
/// them in the server's order, so each state it rebuilds is one the cluster was in) it checks
/// [`Limits`], and that a pod starts terminating only while its node has another available pod
/// when no unavailability is allowed.
pub(crate) struct Invariants {
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl Invariants {
    pub(crate) async fn start(
        client: kube::Client,
        app: &str,
        eligible: &[&str],
        limits: Limits,
    ) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let eligible: BTreeSet<String> = eligible.iter().map(|s| s.to_string()).collect();
        let api: Api<Pod> = Api::default_namespaced(client);
        let config = watcher::Config::default().labels(&format!("app={app}"));
        let out = Arc::clone(&seen);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            let mut pods: HashMap<String, Pod> = HashMap::new();
            let mut synced = false;
            let mut events = watcher(api, config).boxed();
            while let Some(Ok(event)) = events.next().await {
                // (pod, node) of a pod that was live before this event and is terminating or
                // gone after it.
                let mut going: Option<(String, Option<String>)> = None;
                match event {
                    watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                        let was_live = pods
                            .get(&p.name_any())
                            .is_some_and(|o| o.metadata.deletion_timestamp.is_none());
                        if synced && was_live && p.metadata.deletion_timestamp.is_some() {
                            going = Some((p.name_any(), target(&p)));
                        }
                        pods.insert(p.name_any(), p);
                    }
                    watcher::Event::Delete(p) => {
                        if let Some(old) = pods.remove(&p.name_any())
                            && old.metadata.deletion_timestamp.is_none()
                            && !is_terminal(&old)
                        {
                            going = Some((p.name_any(), target(&old)));
                        }
                    }
                    watcher::Event::InitDone => {
                        synced = true;
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    watcher::Event::Init => {}
                }
                if !synced {
                    continue;
                }
                let mut per_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
                for p in pods.values().filter(|p| !is_terminal(p)) {
                    if let Some(n) = target(p) {
                        per_node.entry(n).or_default().push(p);
                    }
                }
                let available_on = |n: &str| {
                    per_node.get(n).is_some_and(|ps| {
                        ps.iter().any(|p| {
                            p.metadata.deletion_timestamp.is_none()
                                && is_bound(p)
                                && api::pod::is_ready(p)
                        })
                    })
                };
                let unavailable = eligible.iter().filter(|n| !available_on(n)).count();
                let doubled = per_node
                    .values()
                    .filter(|ps| {
                        ps.iter()
                            .filter(|p| !limits.surge || p.metadata.deletion_timestamp.is_none())
                            .count()
                            > 1
                    })
                    .count();
                let mut s = out.lock().unwrap();
                s.events += 1;
                s.max_unavailable = s.max_unavailable.max(unavailable);
                s.max_doubled = s.max_doubled.max(doubled);
                let state = || describe(&pods.values().cloned().collect::<Vec<_>>());
                if unavailable > limits.max_unavailable {
                    let msg = format!(
                        "{unavailable} eligible nodes without an available pod (max {}):\n{}",
                        limits.max_unavailable,
                        state()
                    );
                    s.violations.push(msg);
                }
                if doubled > limits.max_doubled {
                    let msg = format!(
                        "{doubled} nodes with two pods (max {}):\n{}",
                        limits.max_doubled,
                        state()
                    );
                    s.violations.push(msg);
                }
                if limits.max_unavailable == 0
                    && let Some((name, Some(node))) = going
                    && eligible.contains(&node)
                    && !available_on(&node)
                {
                    let msg = format!(
                        "{name} went while {node} had no other available pod:\n{}",
                        state()
                    );
                    s.violations.push(msg);
                }
            }
        });
        // The watch has listed before the test changes anything.
        tokio::time::timeout(TIMEOUT, ready_rx)
            .await
            .unwrap()
            .unwrap();
        Invariants { seen, task }
    }

    /// Stops watching and returns what was seen, failing the test on any violation.
    pub(crate) fn finish(self) -> Seen {
        self.task.abort();
        let seen = std::mem::take(&mut *self.seen.lock().unwrap());
        assert!(
            seen.violations.is_empty(),
            "{} violations, the first:\n{}",
            seen.violations.len(),
            seen.violations[0]
        );
        seen
    }
}

/// A DaemonSet manifest for kubectl (JSON is YAML): pods labelled `app: <name>`, one container
/// `app`, a 1s grace period; `extra` is merged into `spec`.
fn daemonset(name: &str, image: &str, extra: Value) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": image}],
            },
        },
    });
    merge(&mut spec, extra);
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": spec})
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

fn rolling(unavailable: Value, surge: Value) -> Value {
    json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": surge}}})
}

/// `manifest` with its container requesting `cpu`.
fn requesting(mut manifest: Value, cpu: &str) -> Value {
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": cpu}});
    manifest
}

/// A plain pod on `node` (through its hostname label, so the scheduler places and accounts it)
/// requesting `cpu`.
fn filler(name: &str, node: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"role": "filler"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "c", "image": "filler:1", "resources": {"requests": {"cpu": cpu}}}],
        },
    })
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("node-{i}")).collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn no_surge(max_unavailable: usize) -> Limits {
    Limits {
        max_unavailable,
        max_doubled: 0,
        surge: false,
    }
}

/// The daemon pod (not terminating) targeting `node`.
fn on_node<'a>(pods: &'a [Pod], node: &str) -> Option<&'a Pod> {
    pods.iter()
        .find(|p| target(p).as_deref() == Some(node) && p.metadata.deletion_timestamp.is_none())
}

/// Whether the pod is Pending, unbound, with the scheduler's `PodScheduled=False Unschedulable`
/// whose message names `reason`.
fn unschedulable_for(p: &Pod, reason: &str) -> bool {
    !is_bound(p)
        && api::pod::phase(p) == "Pending"
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .is_some_and(|c| {
                c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
                    && c.message.as_deref().is_some_and(|m| m.contains(reason))
            })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_per_eligible_node_following_nodes_added_removed_labelled_and_tainted() {
    let env = Env::start(4, &[("role", "worker")]).await;
    env.apply(&daemonset(
        "agent",
        "agent:1",
        json!({"template": {"spec": {"nodeSelector": {"role": "worker"}}}}),
    ))
    .await;
    env.rollout_status("agent").await;
    let pods = env
        .settled("agent", &["node-0", "node-1", "node-2", "node-3"], true)
        .await;
    let c = env.check_status("agent").await;
    assert_eq!(
        (c.desired, c.current, c.ready, c.available, c.updated),
        (4, 4, 4, 4, 4)
    );
    // Each pod: generateName, pinned by node affinity and bound by the scheduler, the automatic
    // tolerations, the revision labels, a controller reference.
    for p in &pods {
        assert_eq!(p.metadata.generate_name.as_deref(), Some("agent-"));
        assert!(p.name_any().starts_with("agent-"));
        let spec = p.spec.as_ref().unwrap();
        let terms = &spec
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap()
            .node_selector_terms;
        let field = &terms[0].match_fields.as_ref().unwrap()[0];
        assert_eq!(
            (field.key.as_str(), field.operator.as_str()),
            ("metadata.name", "In")
        );
        assert_eq!(
            field.values.as_ref().unwrap(),
            &vec![spec.node_name.clone().unwrap()]
        );
        let tolerated: BTreeSet<(String, String)> = spec
            .tolerations
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t.key.clone().unwrap_or_default(),
                    t.effect.clone().unwrap_or_default(),
                )
            })
            .collect();
        for (k, e) in AUTO_TOLERATED {
            assert!(
                tolerated.contains(&(k.into(), e.into())),
                "{k}:{e} in {tolerated:?}"
            );
        }
        assert_eq!(
            p.labels()
                .get("pod-template-generation")
                .map(String::as_str),
            Some("1")
        );
        let owner = api::pod::controller_of(&p.metadata).unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("DaemonSet", "agent")
        );
    }

    // A node added gets a pod.
    let added = nodesim::ops::add(&env.client, &env.sim, 1).await.unwrap();
    assert_eq!(added, ["node-4"]);
    env.rollout_status("agent").await;
    env.settled(
        "agent",
        &["node-0", "node-1", "node-2", "node-3", "node-4"],
        true,
    )
    .await;
    assert_eq!(env.check_status("agent").await.desired, 5);

    // A node removed is no longer counted.
    nodesim::ops::remove(&env.client, "node-4").await.unwrap();
    env.wait_ds("agent", "node-4 gone from the status", |d| {
        Counts::of(d).desired == 4
    })
    .await;
    env.settled("agent", &["node-0", "node-1", "node-2", "node-3"], true)
        .await;
    let c = env.check_status("agent").await;
    assert_eq!((c.desired, c.current, c.available), (4, 4, 4));

    // Labelled out, a node loses its pod; labelled back in, it gets one again.
    env.kubectl(&["label", "node", "node-2", "role=infra", "--overwrite"])
        .await;
    env.settled("agent", &["node-0", "node-1", "node-3"], true)
        .await;
    let c = env.check_status("agent").await;
    assert_eq!((c.desired, c.current, c.misscheduled), (3, 3, 0));
    env.kubectl(&["label", "node", "node-2", "role=worker", "--overwrite"])
        .await;
    env.rollout_status("agent").await;
    let pods = env
        .settled("agent", &["node-0", "node-1", "node-2", "node-3"], true)
        .await;
    assert_eq!(env.check_status("agent").await.desired, 4);

    // NoSchedule not tolerated: the pod stays (misscheduled), no longer desired; once deleted it
    // is not recreated.
    let kept = on_node(&pods, "node-0").unwrap().uid();
    env.kubectl(&["taint", "node", "node-0", "dedicated=db:NoSchedule"])
        .await;
    env.wait_ds("agent", "node-0 misscheduled", |d| {
        Counts::of(d).misscheduled == 1
    })
    .await;
    let c = env.check_status("agent").await;
    assert_eq!(
        (c.desired, c.current, c.misscheduled, c.available),
        (3, 3, 1, 3)
    );
    let pods = env.pod_api().list(&Default::default()).await.unwrap().items;
    let on0 = on_node(&pods, "node-0").unwrap();
    assert_eq!(
        on0.uid(),
        kept,
        "the NoSchedule taint did not evict the pod"
    );
    env.kubectl(&["delete", "pod", &on0.name_any(), "--wait=false"])
        .await;

    // NoExecute not tolerated: the pod is removed.
    env.kubectl(&["taint", "node", "node-3", "dedicated=db:NoExecute"])
        .await;
    env.settled("agent", &["node-1", "node-2"], true).await;
    let c = env.check_status("agent").await;
    assert_eq!(
        (
            c.desired,
            c.current,
            c.misscheduled,
            c.available,
            c.unavailable
        ),
        (2, 2, 0, 2, 0)
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_pod_that_does_not_fit_stays_pending_with_the_schedulers_reason() {
    let env = Env::start(4, &[]).await;
    env.apply(&filler("big", "node-2", "7500m")).await;
    embedded::wait_until(&env.pod_api(), "filler ready", TIMEOUT, |p: &Pod| {
        p.name_any() == "big" && api::pod::is_ready(p)
    })
    .await
    .unwrap();
    env.apply(&requesting(daemonset("agent", "agent:1", json!({})), "1"))
        .await;
    let pods = env
        .wait_pods("agent", "three ready, node-2's unschedulable", |pods| {
            pods.len() == 4
                && pods.iter().all(|p| {
                    if target(p).as_deref() == Some("node-2") {
                        unschedulable_for(p, "Insufficient cpu")
                    } else {
                        api::pod::is_ready(p)
                    }
                })
        })
        .await;
    let pending = on_node(&pods, "node-2").unwrap().name_any();
    // kubectl shows the scheduler's reason.
    let shown = env
        .c
        .kubectl_json(&["get", "pod", &pending, "-o", "json"])
        .await;
    let cond = shown["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .unwrap()
        .clone();
    assert_eq!(cond["reason"], "Unschedulable", "{cond}");
    let message = cond["message"].as_str().unwrap();
    assert!(
        message.starts_with("0/4 nodes are available: 1 Insufficient cpu"),
        "{message}"
    );
    embedded::wait_until(
        &Api::<Event>::default_namespaced(env.client.clone()),
        "FailedScheduling event",
        TIMEOUT,
        |e: &Event| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.involved_object.name.as_deref() == Some(pending.as_str())
        },
    )
    .await
    .unwrap();
    // Counted in desired (and as scheduled: it targets node-2), not available.
    let c = env.check_status("agent").await;
    assert_eq!(
        (
            c.desired,
            c.current,
            c.ready,
            c.available,
            c.unavailable,
            c.updated
        ),
        (4, 4, 3, 3, 1, 4)
    );

    // Room made, it is placed and the DaemonSet is complete.
    env.kubectl(&["delete", "pod", "big"]).await;
    env.rollout_status("agent").await;
    let after = env
        .settled("agent", &["node-0", "node-1", "node-2", "node-3"], true)
        .await;
    assert_eq!(
        on_node(&after, "node-2").unwrap().name_any(),
        pending,
        "the same pod was placed"
    );
    let c = env.check_status("agent").await;
    assert_eq!((c.desired, c.available, c.unavailable), (4, 4, 0));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_updates_stay_within_max_unavailable_as_a_number_and_a_rounded_up_percentage() {
    let env = Env::start(5, &[]).await;
    let all = names(5);
    env.apply(&daemonset("web", "web:1", rolling(json!(2), json!(0))))
        .await;
    env.rollout_status("web").await;
    env.settled("web", &strs(&all), true).await;
    env.check_status("web").await;

    let watch = env.watch("web", &strs(&all), no_surge(2)).await;
    let conflicts = env.c.conflicts("daemonsets/status").await;
    env.set_image("web", "web:2").await;
    env.rollout_status("web").await;
    let pods = env.settled("web", &strs(&all), true).await;
    let seen = watch.finish();
    assert!(
        seen.max_unavailable >= 1,
        "the rollout was observed: {seen:?}"
    );
    assert!(pods.iter().all(|p| api::image::same(&image_of(p), "web:2")));
    let c = env.check_status("web").await;
    assert_eq!((c.desired, c.updated, c.available), (5, 5, 5));
    // With nobody else writing the DaemonSet, its controller writes each status over the one
    // it wrote last, never over a copy the server has moved past (issue 39: each 409 costs a
    // GET and a second write from the controller's rate limit; upstream's has them).
    assert_eq!(
        env.c.conflicts("daemonsets/status").await - conflicts,
        0.0,
        "status writes refused with 409 during the update"
    );

    // 30% of 5 nodes is 1.5: rounded up, 2 (the broken-rollout test shows it is not 1).
    let watch = env.watch("web", &strs(&all), no_surge(2)).await;
    env.apply(&daemonset("web", "web:3", rolling(json!("30%"), json!(0))))
        .await;
    env.rollout_status("web").await;
    let pods = env.settled("web", &strs(&all), true).await;
    let seen = watch.finish();
    assert!(
        seen.max_unavailable >= 1,
        "the rollout was observed: {seen:?}"
    );
    assert!(pods.iter().all(|p| api::image::same(&image_of(p), "web:3")));
    env.check_status("web").await;
    let revs: Vec<i64> = env.revisions("web").await.iter().map(|r| r.0).collect();
    assert_eq!(revs, [1, 2, 3]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surge_starts_the_new_pod_beside_the_old_which_goes_only_once_the_new_is_available() {
    let env = Env::start(5, &[]).await;
    let all = names(5);
    env.apply(&daemonset("web", "web:1", rolling(json!(0), json!(2))))
        .await;
    env.rollout_status("web").await;
    let before = uids_by_node(&env.settled("web", &strs(&all), true).await);

    let surge = |n| Limits {
        max_unavailable: 0,
        max_doubled: n,
        surge: true,
    };
    let watch = env.watch("web", &strs(&all), surge(2)).await;
    env.set_image("web", "web:2").await;
    env.rollout_status("web").await;
    let after = uids_by_node(&env.settled("web", &strs(&all), true).await);
    let seen = watch.finish();
    assert!(
        seen.max_doubled >= 1,
        "new pods started beside old ones: {seen:?}"
    );
    assert!(
        before.iter().all(|(n, u)| after.get(n) != Some(u)),
        "every pod replaced: {before:?} {after:?}"
    );
    env.check_status("web").await;

    // 10% of 5 nodes rounds up to 1.
    let watch = env.watch("web", &strs(&all), surge(1)).await;
    env.apply(&daemonset("web", "web:3", rolling(json!(0), json!("10%"))))
        .await;
    env.rollout_status("web").await;
    env.settled("web", &strs(&all), true).await;
    let seen = watch.finish();
    assert_eq!(seen.max_doubled, 1, "{seen:?}");
    env.check_status("web").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_replaces_nothing_until_a_pod_is_deleted_and_the_replacement_is_new() {
    let env = Env::start(4, &[]).await;
    let all = names(4);
    env.apply(&daemonset(
        "log",
        "log:1",
        json!({"updateStrategy": {"type": "OnDelete"}}),
    ))
    .await;
    env.wait_ds("log", "rolled out", |d| Counts::of(d).available == 4)
        .await;
    let before = uids_by_node(&env.settled("log", &strs(&all), true).await);
    env.set_image("log", "log:2").await;
    let ds = env
        .wait_ds("log", "template change observed", |d| {
            d.status.as_ref().and_then(|s| s.observed_generation) == Some(2)
        })
        .await;
    assert_eq!(Counts::of(&ds).updated, 0);
    let c = env.check_status("log").await;
    assert_eq!((c.desired, c.updated, c.available), (4, 0, 4));
    let now = env.settled("log", &strs(&all), false).await;
    assert_eq!(uids_by_node(&now), before, "nothing replaced");

    let victim = on_node(&now, "node-1").unwrap().name_any();
    env.kubectl(&["delete", "pod", &victim]).await;
    let hash = env.current_hash("log").await;
    let after = env
        .wait_pods("log", "node-1 replaced", |pods| {
            pods.len() == 4
                && pods.iter().all(api::pod::is_ready)
                && on_node(pods, "node-1").is_some_and(|p| hash_of(p) == hash)
        })
        .await;
    for p in &after {
        let node = target(p).unwrap();
        let want = if node == "node-1" { "log:2" } else { "log:1" };
        assert!(
            api::image::same(&image_of(p), want),
            "{node}: {}",
            image_of(p)
        );
        if node != "node-1" {
            assert_eq!(Some(&p.uid().unwrap()), before.get(&node));
        }
    }
    let c = env.check_status("log").await;
    assert_eq!((c.desired, c.updated, c.available), (4, 1, 4));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_selector_targets_the_selected_nodes_and_updates_touch_only_them() {
    let env = Env::start(5, &[]).await;
    env.kubectl(&["label", "node", "node-0", "node-1", "node-2", "pool=a"])
        .await;
    env.kubectl(&["label", "node", "node-3", "node-4", "pool=b"])
        .await;
    for (name, pool) in [("a", "a"), ("b", "b")] {
        env.apply(&daemonset(
            name,
            &format!("{name}:1"),
            json!({"template": {"spec": {"nodeSelector": {"pool": pool}}}}),
        ))
        .await;
    }
    env.rollout_status("a").await;
    env.rollout_status("b").await;
    env.settled("a", &["node-0", "node-1", "node-2"], true)
        .await;
    let b_before = uids_by_node(&env.settled("b", &["node-3", "node-4"], true).await);
    assert_eq!(env.check_status("a").await.desired, 3);
    assert_eq!(env.check_status("b").await.desired, 2);

    env.set_image("a", "a:2").await;
    env.rollout_status("a").await;
    let a = env
        .settled("a", &["node-0", "node-1", "node-2"], true)
        .await;
    assert!(a.iter().all(|p| api::image::same(&image_of(p), "a:2")));
    let b = env.settled("b", &["node-3", "node-4"], true).await;
    assert_eq!(
        uids_by_node(&b),
        b_before,
        "the other nodes' daemon untouched"
    );
    let c = env.check_status("a").await;
    assert_eq!((c.desired, c.updated, c.misscheduled), (3, 3, 0));
    env.check_status("b").await;
    env.stop().await;
}

/// Waits until `n` pods of `app` run the current revision and are not ready (frozen by a fault).
async fn wait_stuck(env: &Env, app: &str, n: usize) -> Vec<Pod> {
    let hash = env.current_hash(app).await;
    env.wait_pods(app, &format!("{n} stuck pods"), |pods| {
        pods.iter()
            .filter(|p| hash_of(p) == hash && is_bound(p) && !api::pod::is_ready(p))
            .count()
            >= n
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_rollout_stops_at_max_unavailable_and_rollout_undo_fixes_it() {
    let env = Env::start(5, &[]).await;
    let all = names(5);
    let mut manifest = daemonset("app", "app:v1", rolling(json!("30%"), json!(0)));
    manifest["metadata"]["annotations"] = json!({CHANGE_CAUSE: "create v1"});
    env.apply(&manifest).await;
    env.rollout_status("app").await;
    env.annotate_cause("app", "image v2").await;
    env.set_image("app", "app:v2").await;
    env.rollout_status("app").await;
    let v2 = uids_by_node(&env.settled("app", &strs(&all), true).await);
    let v2_hash = env.current_hash("app").await;

    // neverReady: stops after ceil(30% of 5) = 2 nodes.
    let watch = env.watch("app", &strs(&all), no_surge(2)).await;
    env.annotate_cause("app", "stuck").await;
    env.set_image("app", "app:stuck").await;
    wait_stuck(&env, "app", 2).await;
    let ds = env
        .wait_ds("app", "stalled status", |d| {
            let c = Counts::of(d);
            c.updated == 2 && c.unavailable == 2
        })
        .await;
    assert_eq!(Counts::of(&ds).available, 3);
    // `kubectl rollout status` waits on it (and gives up: it cannot finish).
    let out = env
        .c
        .kubectl_raw(&["rollout", "status", "ds/app", "--timeout=1s"], None)
        .await;
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("Waiting for daemon set \"app\" rollout to finish: 2 out of 5 new pods have been updated"),
        "{said}"
    );
    let history = env.history("app").await;
    assert_eq!(
        history,
        [
            (1, "create v1".to_string()),
            (2, "image v2".to_string()),
            (3, "stuck".to_string())
        ]
    );

    // Undo: revision 2 becomes current as 4; the three pods still on it keep their UIDs.
    let out = env.kubectl(&["rollout", "undo", "ds/app"]).await;
    assert!(out.contains("rolled back"), "{out}");
    env.rollout_status("app").await;
    let pods = env.settled("app", &strs(&all), true).await;
    let revs = env.revisions("app").await;
    assert_eq!(
        revs.iter().map(|r| r.0).collect::<Vec<_>>(),
        [1, 3, 4],
        "{revs:?}"
    );
    assert_eq!(revs[2].1, v2_hash, "the old revision is current again");
    let now = uids_by_node(&pods);
    let kept = v2.iter().filter(|(n, u)| now.get(*n) == Some(u)).count();
    assert_eq!(kept, 3, "untouched pods were not restarted: {v2:?} {now:?}");
    assert!(
        pods.iter()
            .all(|p| api::image::same(&image_of(p), "app:v2"))
    );
    let seen = watch.finish();
    assert_eq!(seen.max_unavailable, 2, "{seen:?}");
    env.check_status("app").await;
    let history = env.history("app").await;
    assert_eq!(
        history.iter().map(|h| h.0).collect::<Vec<_>>(),
        [1, 3, 4],
        "{history:?}"
    );
    assert_eq!(history[2].1, "image v2");
    let shown = env
        .kubectl(&["rollout", "history", "ds/app", "--revision=4"])
        .await;
    assert!(shown.contains("app:v2"), "{shown}");
    let shown = env
        .kubectl(&["rollout", "history", "ds/app", "--revision=3"])
        .await;
    assert!(shown.contains("app:stuck"), "{shown}");

    // imagePullFailure, then undo to an explicit revision.
    let watch = env.watch("app", &strs(&all), no_surge(2)).await;
    env.set_image("app", "app:broken").await;
    wait_stuck(&env, "app", 2).await;
    let out = env
        .kubectl(&["rollout", "undo", "ds/app", "--to-revision=4"])
        .await;
    assert!(out.contains("rolled back"), "{out}");
    env.rollout_status("app").await;
    let pods = env.settled("app", &strs(&all), true).await;
    let again = uids_by_node(&pods);
    let kept = now.iter().filter(|(n, u)| again.get(*n) == Some(u)).count();
    assert_eq!(kept, 3, "{now:?} {again:?}");
    watch.finish();
    let revs = env.revisions("app").await;
    assert_eq!(revs.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 3, 5, 6]);
    assert_eq!(revs[3].1, v2_hash);

    // And back to the first revision: every pod replaced, revision 1 becomes 7.
    let watch = env.watch("app", &strs(&all), no_surge(2)).await;
    env.kubectl(&["rollout", "undo", "ds/app", "--to-revision=1"])
        .await;
    env.rollout_status("app").await;
    let pods = env.settled("app", &strs(&all), true).await;
    assert!(
        pods.iter()
            .all(|p| api::image::same(&image_of(p), "app:v1"))
    );
    watch.finish();
    let history = env.history("app").await;
    assert_eq!(
        history.iter().map(|h| h.0).collect::<Vec<_>>(),
        [3, 5, 6, 7],
        "{history:?}"
    );
    assert_eq!(history[3].1, "create v1");
    env.check_status("app").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_mid_rollout_rolls_over_and_replaces_the_middle_revision_too() {
    let env = Env::start(5, &[]).await;
    let all = names(5);
    env.apply(&daemonset("app", "app:1", rolling(json!(2), json!(0))))
        .await;
    env.rollout_status("app").await;
    env.settled("app", &strs(&all), true).await;
    let watch = env.watch("app", &strs(&all), no_surge(2)).await;
    env.set_image("app", "app:stuck").await;
    let middle = env.current_hash("app").await;
    wait_stuck(&env, "app", 2).await;
    env.set_image("app", "app:3").await;
    env.rollout_status("app").await;
    let pods = env.settled("app", &strs(&all), true).await;
    watch.finish();
    assert!(pods.iter().all(|p| api::image::same(&image_of(p), "app:3")));
    assert!(pods.iter().all(|p| hash_of(p) != middle));
    let revs: Vec<i64> = env.revisions("app").await.iter().map(|r| r.0).collect();
    assert_eq!(revs, [1, 2, 3]);
    env.check_status("app").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_beyond_the_limit_is_cleaned_up_but_never_a_revision_pods_use() {
    let env = Env::start(3, &[]).await;
    let all = names(3);
    env.apply(&daemonset(
        "log",
        "log:1",
        json!({"revisionHistoryLimit": 1, "updateStrategy": {"type": "OnDelete"}}),
    ))
    .await;
    env.settled("log", &strs(&all), true).await;
    let rev1 = env.current_hash("log").await;
    for i in 2..=4 {
        env.set_image("log", &format!("log:{i}")).await;
        env.wait_ds("log", "template observed", |d| {
            d.status.as_ref().and_then(|s| s.observed_generation) == Some(i)
        })
        .await;
    }
    // Old: 1 (every pod still runs it), 2, 3; the limit keeps one old revision, and 1 may not go.
    let revs = env.revisions("log").await;
    assert_eq!(
        revs.iter().map(|r| r.0).collect::<Vec<_>>(),
        [1, 4],
        "{revs:?}"
    );
    assert_eq!(revs[0].1, rev1);
    let history = env.history("log").await;
    assert_eq!(history.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 4]);

    // Rolled onto revision 4 (a strategy change, no new revision), revision 1 is unused but
    // within the limit; after revision 5 it is beyond it.
    env.apply(&daemonset(
        "log",
        "log:4",
        json!({"revisionHistoryLimit": 1, "updateStrategy": {"type": "RollingUpdate"}}),
    ))
    .await;
    env.rollout_status("log").await;
    env.settled("log", &strs(&all), true).await;
    let revs: Vec<i64> = env.revisions("log").await.iter().map(|r| r.0).collect();
    assert_eq!(revs, [1, 4]);
    env.set_image("log", "log:5").await;
    env.rollout_status("log").await;
    env.settled("log", &strs(&all), true).await;
    let history = env.history("log").await;
    assert_eq!(history.iter().map(|h| h.0).collect::<Vec<_>>(), [4, 5]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_daemon_pods_are_deleted_and_recreated() {
    let env = Env::start(3, &[]).await;
    env.apply(&daemonset("agent", "agent:flaky", json!({})))
        .await;
    // node-1's pod fails 300ms after starting, every time: watch two of them fail and be replaced.
    let failed: Mutex<BTreeSet<String>> = Mutex::default();
    env.wait_pods("agent", "two failed pods on node-1 replaced", |pods| {
        let mut f = failed.lock().unwrap();
        for p in pods {
            if target(p).as_deref() == Some("node-1") && api::pod::phase(p) == "Failed" {
                f.insert(p.uid().unwrap());
            }
        }
        f.len() >= 2
            && pods
                .iter()
                .all(|p| !f.contains(&p.uid().unwrap()) || target(p).as_deref() != Some("node-1"))
    })
    .await;
    embedded::wait_until(
        &Api::<Event>::default_namespaced(env.client.clone()),
        "FailedDaemonPod event",
        TIMEOUT,
        |e: &Event| {
            e.reason.as_deref() == Some("FailedDaemonPod")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("on node node-1"))
        },
    )
    .await
    .unwrap();
    // The other nodes' pods were never touched.
    let pods = env.pod_api().list(&Default::default()).await.unwrap().items;
    for n in ["node-0", "node-2"] {
        assert!(on_node(&pods, n).is_some_and(api::pod::is_ready), "{n}");
    }
    // A healthy image: the failing pod is replaced and the rollout completes.
    env.set_image("agent", "agent:2").await;
    env.rollout_status("agent").await;
    env.settled("agent", &["node-0", "node-1", "node-2"], true)
        .await;
    env.check_status("agent").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_pod_that_no_longer_fits_after_an_update_is_placed_once_room_is_made() {
    let env = Env::start(4, &[]).await;
    let all = names(4);
    env.apply(&requesting(
        daemonset("agent", "agent:1", rolling(json!(1), json!(0))),
        "1",
    ))
    .await;
    env.rollout_status("agent").await;
    env.settled("agent", &strs(&all), true).await;
    // 6.5 + 1 CPUs of 8 used on node-1.
    env.apply(&filler("big", "node-1", "6500m")).await;
    embedded::wait_until(&env.pod_api(), "filler ready", TIMEOUT, |p: &Pod| {
        p.name_any() == "big" && api::pod::is_ready(p)
    })
    .await
    .unwrap();

    let watch = env.watch("agent", &strs(&all), no_surge(1)).await;
    env.kubectl(&[
        "set",
        "resources",
        "ds/agent",
        "-c",
        "app",
        "--requests=cpu=2",
    ])
    .await;
    let hash = env.current_hash("agent").await;
    env.wait_pods("agent", "node-1's new pod unschedulable", |pods| {
        on_node(pods, "node-1")
            .is_some_and(|p| hash_of(p) == hash && unschedulable_for(p, "Insufficient cpu"))
    })
    .await;
    let ds = env
        .wait_ds("agent", "stalled", |d| Counts::of(d).unavailable == 1)
        .await;
    assert_eq!(Counts::of(&ds).desired, 4);

    env.kubectl(&["delete", "pod", "big"]).await;
    env.rollout_status("agent").await;
    let pods = env.settled("agent", &strs(&all), true).await;
    watch.finish();
    for p in &pods {
        let cpu = p.spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["cpu"]
            .0
            .clone();
        assert_eq!(cpu, "2");
    }
    env.check_status("agent").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_mid_rollout_recovers_and_finishes_within_the_invariants() {
    let mut env = Env::start(5, &[]).await;
    let all = names(5);
    env.apply(&daemonset("app", "app:1", rolling(json!(2), json!(0))))
        .await;
    env.rollout_status("app").await;
    env.settled("app", &strs(&all), true).await;
    let watch = env.watch("app", &strs(&all), no_surge(2)).await;

    // Without a scheduler the rollout freezes with two new pods Pending.
    env.stop_scheduler().await;
    env.set_image("app", "app:2").await;
    let hash = env.current_hash("app").await;
    env.wait_pods("app", "two new pods pending", |pods| {
        pods.iter()
            .filter(|p| hash_of(p) == hash && !is_bound(p))
            .count()
            == 2
    })
    .await;
    env.stop_controllers().await;
    env.start_scheduler();
    env.wait_pods("app", "the two new pods ready", |pods| {
        pods.iter()
            .filter(|p| hash_of(p) == hash && api::pod::is_ready(p))
            .count()
            == 2
    })
    .await;
    env.start_controllers();
    env.rollout_status("app").await;
    let pods = env.settled("app", &strs(&all), true).await;
    watch.finish();
    assert!(pods.iter().all(|p| api::image::same(&image_of(p), "app:2")));
    env.check_status("app").await;
    env.stop().await;
}

/// A daemon pod the API server refuses (a quota of no pods) makes a `FailedCreate` event that
/// says what the server said, as upstream's DaemonSet controller prints the error: `Error
/// creating: pods "NAME" is forbidden: exceeded quota: ...`, not a dump of the error's
/// structure.
#[tokio::test]
async fn a_refused_daemon_pod_is_reported_with_the_servers_message() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let c = common::Cluster::start_with(rollwright::components::Components {
        nodes: Some(NodeSim {
            nodes: 1,
            ..Default::default()
        }),
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
        profile: None,
    })
    .await;
    let client = c.client().await;
    c.kubectl(&["create", "quota", "none", "--hard=pods=0"])
        .await;
    // Quota admission refuses everything until the quota controller has filled its status.
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
    embedded::wait_until(&quotas, "the quota's status", common::DEADLINE, |q| {
        q.status.as_ref().and_then(|s| s.used.as_ref()).is_some()
    })
    .await
    .unwrap();
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: agent
        image: busybox:1.36
"#,
    )
    .await;
    let event = common::wait_event(client, "default", Some("agent"), "FailedCreate", "").await;
    let message = event.message.unwrap_or_default();
    let rest = message
        .strip_prefix("Error creating: pods \"")
        .unwrap_or_else(|| panic!("{message}"));
    let (name, rest) = rest.split_once('"').unwrap_or_else(|| panic!("{message}"));
    assert!(name.starts_with("agent-"), "{message}");
    assert_eq!(
        rest,
        " is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, limited: pods=0",
        "{message}"
    );
    c.stop().await;
}
