//! An independent observer of a DaemonSet rollout, for tests (feature `test-support`), the
//! DaemonSet counterpart of [`crate::invariants`]: it watches the set's pods and checks, at
//! every event, what a RollingUpdate promises (seed 000, SEMANTICS.md, upstream's
//! `rollingUpdate` in `pkg/controller/daemon/update.go`), recording each violation with the
//! state that broke it.
//!
//! A pod is *live* when it is neither terminating nor finished; it sits on the node it is bound
//! to, or else the one its `matchFields metadata.name` affinity names.
//!
//! - **One pod per revision per node**: never two live pods of one revision on a node; never
//!   two live pods on a node without `maxSurge`, never three with it (one old, one new).
//! - **maxSurge**: at most `max_surge` nodes hold a new pod beside an old *available* one. A
//!   node whose old pod is not available gets its new pod at once, beyond the surge (upstream:
//!   "a node with an unavailable old pod is a candidate for immediate new pod creation"): it is
//!   not counted.
//! - **maxUnavailable**: once every node has had an available pod, at most `max_unavailable`
//!   nodes lack a live available pod.
//! - With `max_unavailable` 0, an available pod starts terminating only while its node has
//!   another live available pod.
//!
//! It knows nothing of the controller's code: it sees what any client sees.
//! [`DaemonWatcher::start`] returns only once its watch has listed, so everything the test does
//! after is seen. The nodes are fixed for the watcher's life.

use crate::daemonset::nodes::target_node;
use api::pod::is_available;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};
use tokio::{sync::oneshot, task::JoinHandle};

const REVISION: &str = "controller-revision-hash";

/// The promise being checked, its fenceposts resolved against the node count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The nodes that should run a daemon pod.
    pub nodes: BTreeSet<String>,
    /// `maxSurge`, resolved (0: no surge).
    pub max_surge: i32,
    /// `maxUnavailable`, resolved.
    pub max_unavailable: i32,
    /// `minReadySeconds`.
    pub min_ready_seconds: i32,
}

#[derive(Default)]
struct State {
    rule: Option<Rule>,
    pods: BTreeMap<String, Pod>,
    armed: bool,
    violations: Vec<String>,
    events: usize,
    max_surge_seen: i32,
    max_unavailable_seen: i32,
}

/// A running watcher; read it with [`DaemonWatcher::violations`] at the end.
pub struct DaemonWatcher {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Drop for DaemonWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn live(pod: &Pod) -> bool {
    api::pod::is_active(pod)
}

fn node_of(pod: &Pod) -> Option<String> {
    target_node(pod).map(str::to_string)
}

fn revision(pod: &Pod) -> &str {
    pod.labels().get(REVISION).map_or("", String::as_str)
}

impl DaemonWatcher {
    /// Watches the pods in `namespace` matching the label selector `selector` and checks `rule`
    /// at every event. Returns once the watch has listed.
    pub async fn start(client: Client, namespace: &str, selector: &str, rule: Rule) -> Self {
        let state = Arc::new(Mutex::new(State {
            rule: Some(rule),
            ..Default::default()
        }));
        let api: Api<Pod> = Api::namespaced(client, namespace);
        let cfg = watcher::Config::default().labels(selector);
        let s = Arc::clone(&state);
        let (listed_tx, listed_rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed_tx);
            let mut events = watcher(api, cfg).default_backoff().boxed();
            while let Some(e) = events.next().await {
                let mut st = lock(&s);
                match e {
                    Ok(watcher::Event::InitApply(p)) => {
                        st.pods.insert(p.name_any(), p);
                    }
                    Ok(watcher::Event::InitDone) => {
                        check(&mut st, None);
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Apply(p)) => {
                        let before = st.pods.insert(p.name_any(), p.clone());
                        check(&mut st, before.as_ref());
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        let before = st.pods.remove(&p.name_any());
                        check(&mut st, before.as_ref());
                    }
                    _ => {}
                }
            }
        });
        let watcher = Self { state, task };
        let _ = listed_rx.await;
        watcher
    }

    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// How many events were checked.
    pub fn events_seen(&self) -> usize {
        lock(&self.state).events
    }

    /// The most nodes seen surging at once (a new pod beside an old available one).
    pub fn max_surge_seen(&self) -> i32 {
        lock(&self.state).max_surge_seen
    }

    /// The most nodes seen without an available pod at once, while armed.
    pub fn max_unavailable_seen(&self) -> i32 {
        lock(&self.state).max_unavailable_seen
    }
}

/// The pods, one line each, by node: for a violation's message.
fn describe(pods: &BTreeMap<String, Pod>, now: jiff::Timestamp, min_ready: i32) -> String {
    let mut lines: Vec<String> = pods
        .values()
        .map(|p| {
            format!(
                "{}@{} {} {}{}{}",
                p.name_any(),
                node_of(p).unwrap_or_default(),
                revision(p),
                p.spec
                    .as_ref()
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.as_deref())
                    .unwrap_or_default(),
                if is_available(p, min_ready, now) {
                    " available"
                } else {
                    ""
                },
                if live(p) { "" } else { " gone" },
            )
        })
        .collect();
    lines.sort_by_key(|l| l.split('@').nth(1).map(str::to_string));
    lines.join("; ")
}

/// Checks the state after one event; `before` is the changed pod as it was before it.
fn check(st: &mut State, before: Option<&Pod>) {
    st.events += 1;
    let Some(rule) = st.rule.clone() else { return };
    let now = clock::now();
    let available = |p: &Pod| live(p) && is_available(p, rule.min_ready_seconds, now);
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in st.pods.values().filter(|p| live(p)) {
        if let Some(n) = node_of(p) {
            by_node.entry(n).or_default().push(p);
        }
    }
    let mut found = Vec::new();
    let mut surging = 0;
    for (node, pods) in &mut by_node {
        pods.sort_by(|a, b| {
            (&a.metadata.creation_timestamp, a.name_any())
                .cmp(&(&b.metadata.creation_timestamp, b.name_any()))
        });
        let revisions: BTreeSet<&str> = pods.iter().map(|p| revision(p)).collect();
        if revisions.len() < pods.len() {
            found.push(format!("two live pods of one revision on {node}"));
        }
        let most = if rule.max_surge > 0 { 2 } else { 1 };
        if pods.len() > most {
            found.push(format!("{} live pods on {node}", pods.len()));
        }
        // A new pod beside an old available one: the newest is the node's new pod.
        if pods.len() > 1 && pods[..pods.len() - 1].iter().any(|p| available(p)) {
            surging += 1;
        }
    }
    st.max_surge_seen = st.max_surge_seen.max(surging);
    if surging > rule.max_surge {
        found.push(format!(
            "{surging} nodes surging > maxSurge {}",
            rule.max_surge
        ));
    }
    let unavailable = rule
        .nodes
        .iter()
        .filter(|n| {
            !by_node
                .get(*n)
                .is_some_and(|ps| ps.iter().any(|p| available(p)))
        })
        .count();
    let unavailable = i32::try_from(unavailable).unwrap_or(i32::MAX);
    if unavailable == 0 {
        st.armed = true;
    }
    if st.armed {
        st.max_unavailable_seen = st.max_unavailable_seen.max(unavailable);
        if unavailable > rule.max_unavailable {
            found.push(format!(
                "{unavailable} nodes without an available pod > maxUnavailable {}",
                rule.max_unavailable
            ));
        }
    }
    // An available pod going (terminating or deleted) while its node has no other.
    if rule.max_unavailable == 0
        && st.armed
        && let Some(was) = before.filter(|p| available(p))
    {
        let name = was.name_any();
        let still = st.pods.get(&name).is_some_and(live);
        let node = node_of(was).unwrap_or_default();
        if !still
            && rule.nodes.contains(&node)
            && !by_node
                .get(&node)
                .is_some_and(|ps| ps.iter().any(|p| available(p)))
        {
            found.push(format!(
                "{name} went while {node} had no other available pod"
            ));
        }
    }
    if !found.is_empty() {
        let state = describe(&st.pods, now, rule.min_ready_seconds);
        for f in found {
            st.violations.push(format!("{f}: {state}"));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::core::v1::{PodCondition, PodSpec, PodStatus},
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    };

    fn pod(name: &str, node: &str, rev: &str, ready: bool, at: i64) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(REVISION.to_string(), rev.to_string())].into()),
                creation_timestamp: Some(Time(jiff::Timestamp::from_second(at).unwrap())),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    last_transition_time: Some(Time(jiff::Timestamp::UNIX_EPOCH)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn state(max_surge: i32, max_unavailable: i32) -> State {
        let mut st = State {
            rule: Some(Rule {
                nodes: ["a", "b", "c"].iter().map(|s| s.to_string()).collect(),
                max_surge,
                max_unavailable,
                min_ready_seconds: 0,
            }),
            ..Default::default()
        };
        for n in ["a", "b", "c"] {
            st.pods.insert(
                format!("old-{n}"),
                pod(&format!("old-{n}"), n, "1", true, 1),
            );
        }
        check(&mut st, None);
        st
    }

    fn apply(st: &mut State, p: Pod) {
        let before = st.pods.insert(p.name_any(), p);
        check(st, before.as_ref());
    }

    #[test]
    fn surge_beyond_max_is_caught_but_not_beside_an_unavailable_pod() {
        let mut st = state(1, 0);
        apply(&mut st, pod("new-a", "a", "2", false, 2));
        assert!(st.violations.is_empty(), "{:?}", st.violations);
        apply(&mut st, pod("old-b", "b", "1", false, 1));
        // b's old pod is no longer available: a new one beside it is not a surge.
        st.violations.clear();
        apply(&mut st, pod("new-b", "b", "2", false, 2));
        assert!(
            st.violations.iter().all(|v| !v.contains("surging")),
            "{:?}",
            st.violations
        );
        apply(&mut st, pod("new-c", "c", "2", false, 2));
        assert!(
            st.violations.iter().any(|v| v.contains("surging")),
            "{:?}",
            st.violations
        );
    }

    #[test]
    fn too_many_unavailable_and_duplicates_are_caught() {
        let mut st = state(0, 1);
        apply(&mut st, pod("old-a", "a", "1", false, 1));
        assert!(st.violations.is_empty(), "{:?}", st.violations);
        apply(&mut st, pod("old-b", "b", "1", false, 1));
        assert_eq!(st.violations.len(), 1, "{:?}", st.violations);
        apply(&mut st, pod("new-c", "c", "2", true, 2));
        assert!(
            st.violations.iter().any(|v| v.contains("2 live pods on c")),
            "{:?}",
            st.violations
        );
    }

    #[test]
    fn an_available_pod_going_alone_without_unavailability_is_caught() {
        let mut st = state(1, 0);
        let mut going = pod("old-a", "a", "1", true, 1);
        going.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        apply(&mut st, going);
        assert!(
            st.violations.iter().any(|v| v.contains("went while a")),
            "{:?}",
            st.violations
        );
    }
}
