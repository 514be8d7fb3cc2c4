//! An independent observer of a rollout, for tests (feature `test-support`): it watches every
//! pod and ReplicaSet event of one workload and checks, at each event, the promises a strategy
//! makes, recording every violation with the state that broke it.
//!
//! - Rolling: active pods never exceed `replicas + maxSurge` (nor do the ReplicaSets'
//!   `spec.replicas`), and once `replicas - maxUnavailable` pods have been available, available
//!   pods never drop below that again.
//! - Recreate: pods of two templates (two `pod-template-hash` values) never exist at once,
//!   terminating ones included.
//!
//! It knows nothing of the controllers' code: it sees what any client sees, so tests in
//! `crates/rollwright` can use it against the full cluster. Limits can change mid-test
//! ([`InvariantWatcher::set_rule`]) for scaling steps.

use api::pod::{is_active, is_available};
use futures::StreamExt;
use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex},
};
use tokio::{sync::oneshot, task::JoinHandle};

/// The promise being checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// RollingUpdate with resolved fenceposts.
    Rolling {
        /// `replicas + maxSurge`.
        max_pods: i32,
        /// `replicas - maxUnavailable`.
        min_available: i32,
        /// The pods' `minReadySeconds`.
        min_ready_seconds: i32,
    },
    /// Recreate.
    Recreate,
    /// Nothing (between phases of a test).
    None,
}

#[derive(Default)]
struct State {
    rule: Option<Rule>,
    pods: HashMap<String, Pod>,
    replica_sets: HashMap<String, ReplicaSet>,
    armed: bool,
    violations: Vec<String>,
    events: usize,
    max_pods_seen: i32,
}

/// A running watcher; drop it or call [`InvariantWatcher::violations`] at the end.
pub struct InvariantWatcher {
    state: Arc<Mutex<State>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for InvariantWatcher {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl InvariantWatcher {
    /// Watches the pods and ReplicaSets in `namespace` matching `selector` (a label selector
    /// string such as `app=web`) and checks `rule` at every event. Returns once both watches
    /// have listed, so that nothing the caller does next can go unseen.
    pub async fn start(client: Client, namespace: &str, selector: &str, rule: Rule) -> Self {
        let state = Arc::new(Mutex::new(State {
            rule: Some(rule),
            ..Default::default()
        }));
        let cfg = watcher::Config::default().labels(selector);
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let rss: Api<ReplicaSet> = Api::namespaced(client, namespace);
        let s = Arc::clone(&state);
        let (pods_listed, pods_listed_rx) = oneshot::channel();
        let pod_task = tokio::spawn({
            let cfg = cfg.clone();
            async move {
                let mut listed = Some(pods_listed);
                let mut events = watcher(pods, cfg).default_backoff().boxed();
                while let Some(e) = events.next().await {
                    let mut st = lock(&s);
                    match e {
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = listed.take() {
                                let _ = tx.send(());
                            }
                            continue;
                        }
                        Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                            st.pods.insert(p.name_any(), p);
                        }
                        Ok(watcher::Event::Delete(p)) => {
                            st.pods.remove(&p.name_any());
                        }
                        _ => continue,
                    }
                    check(&mut st);
                }
            }
        });
        let s = Arc::clone(&state);
        let (rss_listed, rss_listed_rx) = oneshot::channel();
        let rs_task = tokio::spawn(async move {
            let mut listed = Some(rss_listed);
            let mut events = watcher(rss, cfg).default_backoff().boxed();
            while let Some(e) = events.next().await {
                let mut st = lock(&s);
                match e {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) => {
                        st.replica_sets.insert(r.name_any(), r);
                    }
                    Ok(watcher::Event::Delete(r)) => {
                        st.replica_sets.remove(&r.name_any());
                    }
                    _ => continue,
                }
                check(&mut st);
            }
        });
        let watcher = Self {
            state,
            tasks: vec![pod_task, rs_task],
        };
        // A watch that never lists leaves the test to fail on its own deadline.
        let _ = tokio::join!(pods_listed_rx, rss_listed_rx);
        watcher
    }

    /// Changes the promise (a scaling step changes the limits). Availability is re-armed: it is
    /// checked again once the new floor has been reached.
    pub fn set_rule(&self, rule: Rule) {
        let mut st = lock(&self.state);
        st.rule = Some(rule);
        st.armed = false;
    }

    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// How many events were checked (a test can assert the watcher saw the rollout at all).
    pub fn events_seen(&self) -> usize {
        lock(&self.state).events
    }

    /// The most active pods seen at once.
    pub fn max_pods_seen(&self) -> i32 {
        lock(&self.state).max_pods_seen
    }
}

fn check(st: &mut State) {
    st.events += 1;
    let now = clock::now();
    let active: Vec<&Pod> = st.pods.values().filter(|p| is_active(p)).collect();
    let active_count = active.len() as i32;
    st.max_pods_seen = st.max_pods_seen.max(active_count);
    match st.rule {
        Some(Rule::Rolling {
            max_pods,
            min_available,
            min_ready_seconds,
        }) => {
            if active_count > max_pods {
                let by_rs = count_by_hash(active.iter().copied());
                st.violations.push(format!(
                    "{active_count} active pods > {max_pods} allowed: {by_rs:?}"
                ));
            }
            let spec_total: i32 = st
                .replica_sets
                .values()
                .map(|r| r.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0))
                .sum();
            if spec_total > max_pods {
                st.violations.push(format!(
                    "replica sets ask for {spec_total} pods > {max_pods} allowed"
                ));
            }
            let available = active
                .iter()
                .filter(|p| is_available(p, min_ready_seconds, now))
                .count() as i32;
            if available >= min_available {
                st.armed = true;
            } else if st.armed {
                let by_rs = count_by_hash(active.iter().copied());
                st.violations.push(format!(
                    "{available} available pods < {min_available} required: {by_rs:?}"
                ));
            }
        }
        Some(Rule::Recreate) => {
            let hashes: BTreeSet<String> = st
                .pods
                .values()
                .filter(|p| !matches!(api::pod::phase(p), "Succeeded" | "Failed"))
                .filter_map(|p| p.labels().get("pod-template-hash").cloned())
                .collect();
            if hashes.len() > 1 {
                st.violations
                    .push(format!("pods of several templates at once: {hashes:?}"));
            }
        }
        Some(Rule::None) | None => {}
    }
}

fn count_by_hash<'a>(pods: impl Iterator<Item = &'a Pod>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in pods {
        *m.entry(
            p.labels()
                .get("pod-template-hash")
                .cloned()
                .unwrap_or_default(),
        )
        .or_default() += 1;
    }
    m
}
