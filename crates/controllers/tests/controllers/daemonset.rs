//! The DaemonSet controller against an in-process API server. The test plays scheduler and
//! kubelet: it binds each daemon pod to the node its `matchFields metadata.name` affinity names
//! (through `pods/binding`), marks bound pods Running and Ready through `pods/status` (never
//! ready if an image contains `broken`), finishes graceful deletions, and deletes the pods of
//! removed nodes (the pod GC's job). An independent watcher of every pod event checks the
//! rolling-update promises at each event.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use controllers::{
    daemonset::{self, nodes::target_node},
    history::CONTROLLER_REVISION_HASH,
};
use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, DaemonSet},
    core::v1::{Node, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::task::JoinHandle;

const TIMEOUT: Duration = Duration::from_secs(60);

struct Cluster {
    _server: embedded::Embedded,
    client: Client,
    controller: Option<JoinHandle<()>>,
    _kubelet: JoinHandle<()>,
    _podgc: JoinHandle<()>,
}

impl Cluster {
    async fn start() -> Self {
        let server = embedded::Embedded::memory().await.unwrap();
        let client = server.client();
        let mut c = Cluster {
            _kubelet: tokio::spawn(kubelet(client.clone())),
            _podgc: tokio::spawn(pod_gc(client.clone())),
            _server: server,
            client,
            controller: None,
        };
        c.start_controller();
        c
    }

    fn start_controller(&mut self) {
        let config = daemonset::Config {
            failed_pod_backoff: controllers::runtime::Backoff {
                base: Duration::from_millis(50),
                max: Duration::from_secs(1),
            },
            ..Default::default()
        };
        let settings = controllers::Settings {
            enabled: controllers::Selection::only(["daemonset"]),
            daemonset: config,
            ..Default::default()
        };
        let informers = informer::Informers::new(self.client.clone());
        self.controller = Some(tokio::spawn(
            controllers::run(&informers, &settings).unwrap(),
        ));
    }

    /// Kills the controller the hard way, mid-whatever, as a crash would.
    fn kill_controller(&mut self) {
        if let Some(h) = self.controller.take() {
            h.abort();
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn pods(&self) -> Api<Pod> {
        Api::default_namespaced(self.client.clone())
    }

    fn daemonsets(&self) -> Api<DaemonSet> {
        Api::default_namespaced(self.client.clone())
    }

    fn revisions(&self) -> Api<ControllerRevision> {
        Api::default_namespaced(self.client.clone())
    }

    async fn add_node(&self, name: &str, labels: Value) {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
    }

    async fn patch_node(&self, name: &str, patch: Value) {
        self.nodes()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    async fn create_ds(&self, name: &str, image: &str, extra_spec: Value) -> DaemonSet {
        let mut spec = json!({
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}},
        });
        merge(&mut spec, extra_spec);
        // Through a dynamic object: the typed API would drop rollwright's `podUpdatePolicy`.
        let obj: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": spec}),
        )
        .unwrap();
        let api: Api<DynamicObject> = Api::default_namespaced_with(
            self.client.clone(),
            &ApiResource::erase::<DaemonSet>(&()),
        );
        api.create(&PostParams::default(), &obj).await.unwrap();
        self.daemonsets().get(name).await.unwrap()
    }

    async fn set_image(&self, name: &str, image: &str) {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}});
        self.daemonsets()
            .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
    }

    /// Waits until the status says the rollout is complete over `desired` nodes (what
    /// `kubectl rollout status` checks) and every pod of the DaemonSet runs the current revision.
    async fn wait_rolled_out(&self, name: &str, desired: i32) -> DaemonSet {
        let ds = embedded::wait_until(
            &self.daemonsets(),
            &format!("{name} rolled out over {desired}"),
            TIMEOUT,
            |ds: &DaemonSet| {
                let s = ds.status.clone().unwrap_or_default();
                ds.name_any() == name
                    && s.observed_generation >= ds.metadata.generation
                    && s.desired_number_scheduled == desired
                    && s.updated_number_scheduled == Some(desired)
                    && s.number_available == Some(desired)
                    && s.current_number_scheduled == desired
            },
        )
        .await
        .unwrap();
        let hash = self.current_hash(name).await;
        wait_for(self.pods(), "only current pods left", || async {
            self.pods_of(name).await.iter().all(|p| hash_of(p) == hash)
        })
        .await;
        ds
    }

    async fn current_hash(&self, name: &str) -> String {
        let revs = self.revisions_of(name).await;
        let cur = revs.iter().max_by_key(|r| r.revision).unwrap();
        cur.labels()[CONTROLLER_REVISION_HASH].clone()
    }

    async fn revisions_of(&self, name: &str) -> Vec<ControllerRevision> {
        let list = self
            .revisions()
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await
            .unwrap();
        list.items
    }

    async fn pods_of(&self, name: &str) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await
            .unwrap()
            .items
    }
}

/// Waits until `check` holds, checking now and after every event of kind `K` (no polling).
async fn wait_for<K, F, Fut>(api: Api<K>, what: &str, check: F)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut events = watcher(api, watcher::Config::default()).boxed();
    let done = tokio::time::timeout(TIMEOUT, async {
        loop {
            if check().await {
                return;
            }
            if events.next().await.is_none() {
                return;
            }
        }
    })
    .await;
    assert!(done.is_ok(), "timed out waiting for {what}");
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

fn hash_of(p: &Pod) -> String {
    p.labels()
        .get(CONTROLLER_REVISION_HASH)
        .cloned()
        .unwrap_or_default()
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone())
}

fn is_ready(p: &Pod) -> bool {
    api::pod::is_ready(p)
}

/// The scheduler and kubelets of the test cluster.
async fn kubelet(client: Client) {
    let all: Api<Pod> = Api::all(client.clone());
    let mut events = watcher(all, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(Ok(pod)) = events.next().await {
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap());
        let name = pod.name_any();
        if pod.metadata.deletion_timestamp.is_some() {
            let _ = api
                .delete(
                    &name,
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..Default::default()
                    },
                )
                .await;
            continue;
        }
        let Some(node) = node_of(&pod) else {
            if let Some(target) = target_node(&pod) {
                let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": target}});
                let _: Result<Value, _> = api
                    .create_subresource("binding", &name, &PostParams::default(), &binding)
                    .await;
            }
            continue;
        };
        let _ = node;
        let phase = api::pod::phase(&pod).to_string();
        if phase == "Failed" || phase == "Succeeded" {
            continue;
        }
        let containers = &pod.spec.as_ref().unwrap().containers;
        let ready = !containers
            .iter()
            .any(|c| c.image.as_deref().unwrap_or("").contains("broken"));
        let images: Vec<(String, String)> = containers
            .iter()
            .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
            .collect();
        let have: Vec<(String, String)> = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| (c.name.clone(), c.image.clone()))
                    .collect()
            })
            .unwrap_or_default();
        if phase == "Running" && is_ready(&pod) == ready && have == images {
            continue;
        }
        let statuses: Vec<Value> = images
            .iter()
            .map(|(n, i)| json!({"name": n, "image": i, "imageID": "", "ready": ready, "restartCount": 0, "started": true}))
            .collect();
        let status = json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": jiff::Timestamp::now().to_string()}],
            "containerStatuses": statuses,
        }});
        let _ = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await;
    }
}

/// Deletes the pods of removed nodes, as the pod GC does.
async fn pod_gc(client: Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut events = watcher(nodes, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(Ok(event)) = events.next().await {
        if let watcher::Event::Delete(node) = event {
            let pods: Api<Pod> = Api::all(client.clone());
            for p in pods.list(&ListParams::default()).await.unwrap().items {
                if node_of(&p).as_deref() == Some(node.name_any().as_str()) {
                    let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace().unwrap());
                    let _ = api
                        .delete(
                            &p.name_any(),
                            &DeleteParams {
                                grace_period_seconds: Some(0),
                                ..Default::default()
                            },
                        )
                        .await;
                }
            }
        }
    }
}

/// What the invariant watcher found.
#[derive(Default, Debug)]
struct Seen {
    violations: Vec<String>,
    max_unavailable: usize,
    max_doubled: usize,
    events: usize,
}

/// Watches every pod event of DaemonSet `name` and checks, after each, that at most
/// `max_unavailable` of the `eligible` nodes lack an available (ready, not terminating) daemon
/// pod, and that at most `max_doubled` nodes have two daemon pods (terminating ones included).
fn watch_invariants(
    client: Client,
    name: &str,
    eligible: BTreeSet<String>,
    max_unavailable: usize,
    max_doubled: usize,
) -> (Arc<Mutex<Seen>>, JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let api: Api<Pod> = Api::default_namespaced(client);
    let config = watcher::Config::default().labels(&format!("app={name}"));
    let out = Arc::clone(&seen);
    let handle = tokio::spawn(async move {
        let mut pods: HashMap<String, Pod> = HashMap::new();
        let mut synced = false;
        let mut events = watcher(api, config).boxed();
        while let Some(Ok(event)) = events.next().await {
            match event {
                watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                    pods.insert(p.name_any(), p);
                }
                watcher::Event::Delete(p) => {
                    pods.remove(&p.name_any());
                }
                watcher::Event::InitDone => synced = true,
                watcher::Event::Init => {}
            }
            if !synced {
                continue;
            }
            let mut per_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
            for p in pods
                .values()
                .filter(|p| !matches!(api::pod::phase(p), "Failed" | "Succeeded"))
            {
                if let Some(n) = target_node(p) {
                    per_node.entry(n.to_string()).or_default().push(p);
                }
            }
            let available = |n: &String| {
                per_node.get(n).is_some_and(|ps| {
                    ps.iter().any(|p| {
                        p.metadata.deletion_timestamp.is_none()
                            && node_of(p).is_some()
                            && is_ready(p)
                    })
                })
            };
            let unavailable = eligible.iter().filter(|n| !available(n)).count();
            let doubled = per_node.values().filter(|ps| ps.len() > 1).count();
            let mut s = out.lock().unwrap();
            s.events += 1;
            s.max_unavailable = s.max_unavailable.max(unavailable);
            s.max_doubled = s.max_doubled.max(doubled);
            if unavailable > max_unavailable {
                s.violations.push(format!(
                    "{unavailable} nodes without an available pod (max {max_unavailable})"
                ));
            }
            if doubled > max_doubled {
                s.violations
                    .push(format!("{doubled} nodes with two pods (max {max_doubled})"));
            }
        }
    });
    (seen, handle)
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

async fn cluster_with_nodes(n: usize) -> Cluster {
    let c = Cluster::start().await;
    for name in names("node-", n) {
        c.add_node(&name, json!({"pool": "a"})).await;
    }
    c
}

fn uids(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| (node_of(p).unwrap_or_default(), p.uid().unwrap()))
        .collect()
}

#[tokio::test]
async fn one_pod_per_eligible_node_following_the_nodes() {
    let c = Cluster::start().await;
    for i in 0..3 {
        c.add_node(&format!("w{i}"), json!({"role": "worker"}))
            .await;
    }
    c.add_node("m0", json!({"role": "master"})).await;
    c.create_ds(
        "agent",
        "agent:1",
        json!({"template": {"spec": {"nodeSelector": {"role": "worker"}}}}),
    )
    .await;
    c.wait_rolled_out("agent", 3).await;

    let pods = c.pods_of("agent").await;
    assert_eq!(pods.len(), 3);
    let hash = c.current_hash("agent").await;
    for p in &pods {
        assert!(
            p.metadata.generate_name.as_deref() == Some("agent-"),
            "{:?}",
            p.metadata.generate_name
        );
        assert_eq!(hash_of(p), hash);
        assert_eq!(p.labels()["pod-template-generation"], "1");
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(target_node(p), node_of(p).as_deref());
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
        assert_eq!(
            terms[0].match_fields.as_ref().unwrap()[0].key,
            "metadata.name"
        );
        let keys: BTreeSet<String> = spec
            .tolerations
            .as_ref()
            .unwrap()
            .iter()
            .filter_map(|t| t.key.clone())
            .collect();
        for k in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
            "node.kubernetes.io/unschedulable",
            "node.kubernetes.io/disk-pressure",
        ] {
            assert!(keys.contains(k), "{k} missing from {keys:?}");
        }
        let owner = &p.owner_references()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("DaemonSet", Some(true), Some(true))
        );
    }
    let on: BTreeSet<String> = pods.iter().filter_map(node_of).collect();
    assert_eq!(on, ["w0", "w1", "w2"].map(String::from).into());

    // Labelled in, a node gets a pod.
    c.patch_node("m0", json!({"metadata": {"labels": {"role": "worker"}}}))
        .await;
    c.wait_rolled_out("agent", 4).await;
    // A NoSchedule taint: no longer desired, but the pod stays (misscheduled).
    c.patch_node(
        "w0",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}}),
    )
    .await;
    let ds = embedded::wait_until(
        &c.daemonsets(),
        "w0 misscheduled",
        TIMEOUT,
        |ds: &DaemonSet| {
            let s = ds.status.clone().unwrap_or_default();
            s.desired_number_scheduled == 3 && s.number_misscheduled == 1
        },
    )
    .await
    .unwrap();
    assert!(
        c.pods_of("agent")
            .await
            .iter()
            .any(|p| node_of(p).as_deref() == Some("w0"))
    );
    assert_eq!(ds.status.unwrap().current_number_scheduled, 3);
    // A NoExecute taint: the pod goes.
    c.patch_node(
        "w1",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}),
    )
    .await;
    wait_for(c.pods(), "w1 emptied", || async {
        !c.pods_of("agent")
            .await
            .iter()
            .any(|p| node_of(p).as_deref() == Some("w1"))
    })
    .await;
    // A new node and a removed node.
    c.add_node("w3", json!({"role": "worker"})).await;
    c.nodes()
        .delete("w2", &DeleteParams::default())
        .await
        .unwrap();
    let ds = embedded::wait_until(
        &c.daemonsets(),
        "final placement",
        TIMEOUT,
        |ds: &DaemonSet| {
            let s = ds.status.clone().unwrap_or_default();
            s.desired_number_scheduled == 2
                && s.number_available == Some(2)
                && s.number_misscheduled == 1
                && s.current_number_scheduled == 2
        },
    )
    .await
    .unwrap();
    // An independent count: m0 and w3 should run it (desired), w0 keeps its pod (misscheduled).
    wait_for(c.pods(), "pods on m0, w0, w3", || async {
        let on: BTreeSet<String> = c
            .pods_of("agent")
            .await
            .iter()
            .filter_map(node_of)
            .collect();
        on == ["m0", "w0", "w3"].map(String::from).into()
    })
    .await;
    let s = ds.status.unwrap();
    assert_eq!(
        (
            s.number_ready,
            s.updated_number_scheduled,
            s.number_unavailable
        ),
        (2, Some(2), Some(0))
    );
}

#[tokio::test]
async fn rolling_update_stays_within_max_unavailable() {
    let c = cluster_with_nodes(6).await;
    c.create_ds("web", "web:1", json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "34%"}}})).await;
    c.wait_rolled_out("web", 6).await;
    let (seen, watcher) = watch_invariants(
        c.client.clone(),
        "web",
        names("node-", 6).into_iter().collect(),
        3,
        0,
    );
    c.set_image("web", "web:2").await;
    c.wait_rolled_out("web", 6).await;
    watcher.abort();
    {
        let seen = seen.lock().unwrap();
        assert!(seen.violations.is_empty(), "{:?}", seen.violations);
        assert!(
            seen.max_unavailable >= 1,
            "the rollout was observed: {seen:?}"
        );
    }
    let pods = c.pods_of("web").await;
    assert!(
        pods.iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("web:2"))
    );
    let revs = c.revisions_of("web").await;
    let mut numbers: Vec<i64> = revs.iter().map(|r| r.revision).collect();
    numbers.sort();
    assert_eq!(numbers, [1, 2]);
}

#[tokio::test]
async fn surge_starts_new_pods_beside_old_ones() {
    let c = cluster_with_nodes(5).await;
    let strategy = json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 2}}});
    c.create_ds("web", "web:1", strategy).await;
    c.wait_rolled_out("web", 5).await;
    let (seen, watcher) = watch_invariants(
        c.client.clone(),
        "web",
        names("node-", 5).into_iter().collect(),
        0,
        2,
    );
    c.set_image("web", "web:2").await;
    c.wait_rolled_out("web", 5).await;
    watcher.abort();
    let seen = seen.lock().unwrap();
    assert!(seen.violations.is_empty(), "{:?}", seen.violations);
    assert!(
        seen.max_doubled >= 1,
        "new pods started beside old ones: {seen:?}"
    );
}

/// Upstream's surge spec: `maxSurge` 20% (one node at a time), `maxUnavailable` 0 and
/// `minReadySeconds`. Each node's old pod goes once the new one beside it is available, which
/// only time makes it: the controller must come back then, no event will wake it.
#[tokio::test]
async fn surge_with_min_ready_seconds_moves_on_once_new_pods_are_available() {
    let c = cluster_with_nodes(3).await;
    let spec = json!({"minReadySeconds": 1, "updateStrategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "20%"}}});
    c.create_ds("web", "web:1", spec).await;
    c.wait_rolled_out("web", 3).await;
    let (seen, watcher) = watch_invariants(
        c.client.clone(),
        "web",
        names("node-", 3).into_iter().collect(),
        0,
        1,
    );
    c.set_image("web", "web:2").await;
    c.wait_rolled_out("web", 3).await;
    watcher.abort();
    let seen = seen.lock().unwrap();
    assert!(seen.violations.is_empty(), "{:?}", seen.violations);
    assert!(seen.max_doubled >= 1, "surged: {seen:?}");
}

#[tokio::test]
async fn on_delete_replaces_only_deleted_pods() {
    let c = cluster_with_nodes(3).await;
    c.create_ds(
        "log",
        "log:1",
        json!({"updateStrategy": {"type": "OnDelete"}}),
    )
    .await;
    c.wait_rolled_out("log", 3).await;
    let before = uids(&c.pods_of("log").await);
    c.set_image("log", "log:2").await;
    embedded::wait_until(&c.daemonsets(), "observed", TIMEOUT, |ds: &DaemonSet| {
        let s = ds.status.clone().unwrap_or_default();
        s.observed_generation == Some(2) && s.updated_number_scheduled == Some(0)
    })
    .await
    .unwrap();
    assert_eq!(uids(&c.pods_of("log").await), before, "nothing replaced");
    let victim = c
        .pods_of("log")
        .await
        .into_iter()
        .find(|p| node_of(p).as_deref() == Some("node-1"))
        .unwrap();
    c.pods()
        .delete(&victim.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    embedded::wait_until(&c.daemonsets(), "one updated", TIMEOUT, |ds: &DaemonSet| {
        let s = ds.status.clone().unwrap_or_default();
        s.updated_number_scheduled == Some(1) && s.number_available == Some(3)
    })
    .await
    .unwrap();
    let after = c.pods_of("log").await;
    for p in &after {
        let image = p.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap();
        let want = if node_of(p).as_deref() == Some("node-1") {
            "log:2"
        } else {
            "log:1"
        };
        assert_eq!(image, want, "{:?}", node_of(p));
    }
}

/// Waits until `n` pods of the DaemonSet run the current revision and are not ready.
async fn wait_broken(c: &Cluster, name: &str, n: usize) {
    let hash = c.current_hash(name).await;
    wait_for(c.pods(), "broken pods", || async {
        let pods = c.pods_of(name).await;
        pods.iter()
            .filter(|p| {
                hash_of(p) == hash
                    && node_of(p).is_some()
                    && !is_ready(p)
                    && api::pod::phase(p) == "Running"
            })
            .count()
            >= n
    })
    .await;
}

#[tokio::test]
async fn a_broken_rollout_stops_and_is_rolled_back_by_reverting_the_template() {
    let c = cluster_with_nodes(6).await;
    let ds = c.create_ds("app", "app:1", json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}})).await;
    c.wait_rolled_out("app", 6).await;
    let v1 = uids(&c.pods_of("app").await);
    let (seen, watcher) = watch_invariants(
        c.client.clone(),
        "app",
        names("node-", 6).into_iter().collect(),
        2,
        0,
    );
    c.set_image("app", "app:broken").await;
    wait_broken(&c, "app", 2).await;
    let status = embedded::wait_until(
        &c.daemonsets(),
        "stalled status",
        TIMEOUT,
        |ds: &DaemonSet| {
            let s = ds.status.clone().unwrap_or_default();
            s.updated_number_scheduled == Some(2) && s.number_unavailable == Some(2)
        },
    )
    .await
    .unwrap();
    assert_eq!(status.status.unwrap().number_available, Some(4));

    // `kubectl rollout undo`: patch the DaemonSet with revision 1's data.
    let rev1 = c
        .revisions_of("app")
        .await
        .into_iter()
        .find(|r| r.revision == 1)
        .unwrap();
    let data = rev1.data.clone().unwrap().0;
    c.daemonsets()
        .patch("app", &PatchParams::default(), &Patch::Strategic(&data))
        .await
        .unwrap();
    c.wait_rolled_out("app", 6).await;
    watcher.abort();
    assert!(
        seen.lock().unwrap().violations.is_empty(),
        "{:?}",
        seen.lock().unwrap().violations
    );

    let revs = c.revisions_of("app").await;
    assert_eq!(revs.len(), 2);
    let back = revs
        .iter()
        .find(|r| r.name_any() == rev1.name_any())
        .unwrap();
    assert_eq!(
        back.revision, 3,
        "the old revision became current with max + 1"
    );
    assert_eq!(
        c.current_hash("app").await,
        rev1.labels()[CONTROLLER_REVISION_HASH]
    );
    // The four pods never touched were not restarted.
    let after = uids(&c.pods_of("app").await);
    let kept = v1.iter().filter(|(n, u)| after.get(*n) == Some(u)).count();
    assert_eq!(kept, 4, "before {v1:?} after {after:?}");
    let _ = ds;
}

#[tokio::test]
async fn rollover_mid_rollout_replaces_the_middle_revision_too() {
    let c = cluster_with_nodes(6).await;
    c.create_ds("app", "app:1", json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}})).await;
    c.wait_rolled_out("app", 6).await;
    let (seen, watcher) = watch_invariants(
        c.client.clone(),
        "app",
        names("node-", 6).into_iter().collect(),
        2,
        0,
    );
    c.set_image("app", "app:broken").await;
    wait_broken(&c, "app", 2).await;
    c.set_image("app", "app:3").await;
    c.wait_rolled_out("app", 6).await;
    watcher.abort();
    assert!(
        seen.lock().unwrap().violations.is_empty(),
        "{:?}",
        seen.lock().unwrap().violations
    );
    let pods = c.pods_of("app").await;
    assert_eq!(pods.len(), 6);
    assert!(
        pods.iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("app:3"))
    );
    let mut numbers: Vec<i64> = c
        .revisions_of("app")
        .await
        .iter()
        .map(|r| r.revision)
        .collect();
    numbers.sort();
    assert_eq!(numbers, [1, 2, 3]);
}

#[tokio::test]
async fn history_beyond_the_limit_is_cleaned_up_but_not_revisions_pods_use() {
    let c = cluster_with_nodes(2).await;
    c.create_ds(
        "log",
        "log:1",
        json!({"revisionHistoryLimit": 1, "updateStrategy": {"type": "OnDelete"}}),
    )
    .await;
    c.wait_rolled_out("log", 2).await;
    let rev1 = c.revisions_of("log").await[0].name_any();
    for i in 2..=4 {
        c.set_image("log", &format!("log:{i}")).await;
        embedded::wait_until(
            &c.revisions(),
            "a revision per template",
            TIMEOUT,
            |r: &ControllerRevision| r.revision == i,
        )
        .await
        .unwrap();
    }
    // Old revisions: 1 (live: the pods still run it), 2, 3; the limit keeps one of them besides
    // the live one... 2 and 3 go, oldest first, but only as many as exceed the limit.
    let current = c.current_hash("log").await;
    wait_for(c.revisions(), "truncated", || async {
        c.revisions_of("log").await.len() == 2
    })
    .await;
    let left: BTreeSet<String> = c
        .revisions_of("log")
        .await
        .iter()
        .map(|r| r.name_any())
        .collect();
    assert_eq!(left, [rev1, format!("log-{current}")].into());
}

#[tokio::test]
async fn failed_pods_are_recreated_and_duplicates_keep_the_oldest() {
    let c = cluster_with_nodes(2).await;
    let ds = c.create_ds("agent", "agent:1", json!({})).await;
    c.wait_rolled_out("agent", 2).await;
    let pods = c.pods_of("agent").await;
    let victim = pods
        .iter()
        .find(|p| node_of(p).as_deref() == Some("node-0"))
        .unwrap();
    let failed = json!({"status": {"phase": "Failed"}});
    c.pods()
        .patch_status(
            &victim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&failed),
        )
        .await
        .unwrap();
    let victim_uid = victim.uid().unwrap();
    embedded::wait_until(&c.pods(), "replacement on node-0", TIMEOUT, |p: &Pod| {
        node_of(p).as_deref() == Some("node-0")
            && p.uid() != Some(victim_uid.clone())
            && is_ready(p)
    })
    .await
    .unwrap();

    // A duplicate on node-1: an orphan matching the selector, adopted and then deleted, since
    // the DaemonSet's own pod is older.
    let keep = c
        .pods_of("agent")
        .await
        .into_iter()
        .find(|p| node_of(p).as_deref() == Some("node-1"))
        .unwrap();
    let dup: Pod = serde_json::from_value(json!({
        "metadata": {"name": "zz-duplicate", "labels": {"app": "agent"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "agent:1"}]}
    }))
    .unwrap();
    c.pods().create(&PostParams::default(), &dup).await.unwrap();
    wait_for(c.pods(), "duplicate gone", || async {
        !c.pods_of("agent")
            .await
            .iter()
            .any(|p| p.name_any() == "zz-duplicate")
    })
    .await;
    let still = c.pods().get(&keep.name_any()).await.unwrap();
    assert_eq!(still.uid(), keep.uid());
    let _ = ds;
}

#[tokio::test]
async fn a_controller_killed_mid_rollout_recovers_within_the_invariants() {
    let mut c = cluster_with_nodes(8).await;
    c.create_ds("app", "app:1", json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}})).await;
    c.wait_rolled_out("app", 8).await;
    let (seen, watcher) = watch_invariants(
        c.client.clone(),
        "app",
        names("node-", 8).into_iter().collect(),
        2,
        0,
    );
    c.set_image("app", "app:2").await;
    embedded::wait_until(&c.daemonsets(), "mid-rollout", TIMEOUT, |ds: &DaemonSet| {
        ds.status
            .as_ref()
            .and_then(|s| s.updated_number_scheduled)
            .is_some_and(|u| u >= 2)
    })
    .await
    .unwrap();
    c.kill_controller();
    c.start_controller();
    c.wait_rolled_out("app", 8).await;
    watcher.abort();
    assert!(
        seen.lock().unwrap().violations.is_empty(),
        "{:?}",
        seen.lock().unwrap().violations
    );
}

#[tokio::test]
async fn image_only_updates_happen_in_place_when_asked() {
    let c = cluster_with_nodes(3).await;
    let strategy = json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "podUpdatePolicy": "InPlaceIfPossible"}}});
    c.create_ds("app", "app:1", strategy).await;
    c.wait_rolled_out("app", 3).await;
    let before = uids(&c.pods_of("app").await);
    c.set_image("app", "app:2").await;
    c.wait_rolled_out("app", 3).await;
    let pods = c.pods_of("app").await;
    assert_eq!(uids(&pods), before, "same pods");
    let hash = c.current_hash("app").await;
    for p in &pods {
        assert_eq!(hash_of(p), hash);
        assert_eq!(
            p.spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("app:2")
        );
    }
}
