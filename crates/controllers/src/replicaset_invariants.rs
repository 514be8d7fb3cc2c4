//! An independent observer of one ReplicaSet's scaling, for tests (feature `test-support`):
//! what upstream's ReplicaSet controller promises under scale changes in quick succession.
//!
//! A sync reads `spec.replicas` from its cache, counts the active pods (its expectations make
//! sure every pod it created or deleted before is in that count) and creates or deletes the
//! difference. So a pod creation never brings the active pods (neither terminating nor
//! finished) above the `spec.replicas` of a generation that sync may have read: one no older
//! than the newest generation the controller has reported observed (`status.observedGeneration`
//! is written by a sync after its creates and deletes, and syncs of one ReplicaSet never
//! overlap), and no newer than the current one. A scale-down leaves the surplus until the
//! deletions are issued; that is not a breach, and nothing but a creation is checked.
//! Convergence (exactly `spec.replicas` active pods in the end) is the test's to wait for.
//!
//! Pod and ReplicaSet events come on two watches whose relative order is not the server's: the
//! watcher logs both with their `resourceVersion` (one global counter on rollwright's stores)
//! and replays them in the server's order when asked ([`ReplicaWatcher::violations`]). Every
//! event is checked. [`ReplicaWatcher::start`] returns only once both watches have listed.

use futures::StreamExt;
use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};
use tokio::{sync::oneshot, task::JoinHandle};

#[derive(Clone, Debug)]
enum Logged {
    Pod { pod: Pod, deleted: bool },
    Set(ReplicaSet),
}

#[derive(Default)]
struct Log {
    events: Vec<(u64, Logged)>,
}

/// A running watcher; read it with [`ReplicaWatcher::violations`] at the end.
pub struct ReplicaWatcher {
    log: Arc<Mutex<Log>>,
    name: String,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for ReplicaWatcher {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

fn rv(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl ReplicaWatcher {
    /// Watches ReplicaSet `name` in `namespace` and its pods (those matching the label selector
    /// `selector`). Returns once both watches have listed.
    pub async fn start(client: Client, namespace: &str, name: &str, selector: &str) -> Self {
        let log = Arc::new(Mutex::new(Log::default()));
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let sets: Api<ReplicaSet> = Api::namespaced(client, namespace);
        let (pods_tx, pods_rx) = oneshot::channel();
        let l = Arc::clone(&log);
        let pod_cfg = watcher::Config::default().labels(selector);
        let pod_task = tokio::spawn(async move {
            let mut listed = Some(pods_tx);
            let mut events = watcher(pods, pod_cfg).default_backoff().boxed();
            while let Some(e) = events.next().await {
                let (pod, deleted) = match e {
                    Ok(watcher::Event::InitApply(p) | watcher::Event::Apply(p)) => (p, false),
                    Ok(watcher::Event::Delete(p)) => (p, true),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                lock(&l)
                    .events
                    .push((rv(&pod.metadata), Logged::Pod { pod, deleted }));
            }
        });
        let (sets_tx, sets_rx) = oneshot::channel();
        let l = Arc::clone(&log);
        let set_cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let set_task = tokio::spawn(async move {
            let mut listed = Some(sets_tx);
            let mut events = watcher(sets, set_cfg).default_backoff().boxed();
            while let Some(e) = events.next().await {
                let rs = match e {
                    Ok(watcher::Event::InitApply(r) | watcher::Event::Apply(r)) => r,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                lock(&l).events.push((rv(&rs.metadata), Logged::Set(rs)));
            }
        });
        let watcher = Self {
            log,
            name: name.to_string(),
            tasks: vec![pod_task, set_task],
        };
        let _ = tokio::join!(pods_rx, sets_rx);
        watcher
    }

    /// How many events were logged.
    pub fn events_seen(&self) -> usize {
        lock(&self.log).events.len()
    }

    /// Every violation in the events so far, replayed in the server's order.
    pub fn violations(&self) -> Vec<String> {
        let mut events = lock(&self.log).events.clone();
        if events.iter().any(|(v, _)| *v == 0) {
            // Without versions there is no server order to replay.
            return vec!["an event without a numeric resourceVersion".to_string()];
        }
        // Stable: a relist may log an object again at the same version.
        events.sort_by_key(|(v, _)| *v);
        replay(&self.name, &events)
    }
}

/// Replays `events` (in the server's order) and returns every creation that breaks the promise.
fn replay(name: &str, events: &[(u64, Logged)]) -> Vec<String> {
    let mut violations = Vec::new();
    let mut pods: HashMap<String, Pod> = HashMap::new();
    // spec.replicas by generation, and the newest generation reported observed.
    let mut replicas: BTreeMap<i64, i32> = BTreeMap::new();
    let mut observed: i64 = 0;
    let mut uid: Option<String> = None;
    for (version, e) in events {
        match e {
            Logged::Set(rs) => {
                if rs.name_any() != name {
                    continue;
                }
                uid = rs.metadata.uid.clone();
                let generation = rs.metadata.generation.unwrap_or(0);
                replicas.insert(
                    generation,
                    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                );
                if let Some(o) = rs.status.as_ref().and_then(|s| s.observed_generation) {
                    observed = observed.max(o);
                }
            }
            Logged::Pod { pod, deleted } => {
                let key = pod.name_any();
                if *deleted {
                    pods.remove(&key);
                    continue;
                }
                let created = !pods.contains_key(&key);
                let owned = uid.is_some()
                    && api::pod::controller_of(&pod.metadata).map(|r| &r.uid) == uid.as_ref();
                pods.insert(key.clone(), pod.clone());
                if !created || !owned || !api::pod::is_active(pod) {
                    continue;
                }
                let active = pods.values().filter(|p| api::pod::is_active(p)).count();
                let active = i32::try_from(active).unwrap_or(i32::MAX);
                // The generations a sync may have read: from the newest observed to the current.
                let bound = replicas
                    .range(observed.min(replicas.keys().last().copied().unwrap_or(0))..)
                    .map(|(_, r)| *r)
                    .max()
                    .unwrap_or(0);
                if active > bound {
                    let window: Vec<String> = replicas
                        .range(observed..)
                        .map(|(g, r)| format!("generation {g}: {r}"))
                        .collect();
                    violations.push(format!(
                        "{key} created at version {version}: {active} active pods > {bound}, \
                         the most any generation since the observed {observed} asked for \
                         ({window:?})"
                    ));
                }
            }
        }
    }
    violations
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn set(generation: i64, replicas: i32, observed: i64) -> Logged {
        Logged::Set(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "uid": "u", "generation": generation},
                "spec": {"replicas": replicas, "selector": {}, "template": {}},
                "status": {"replicas": 0, "observedGeneration": observed},
            }))
            .unwrap(),
        )
    }

    fn pod(name: &str) -> Logged {
        Logged::Pod {
            pod: Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    owner_references: Some(vec![OwnerReference {
                        uid: "u".into(),
                        controller: Some(true),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
                ..Default::default()
            },
            deleted: false,
        }
    }

    #[test]
    fn creations_beyond_every_spec_the_sync_may_have_read_are_caught() {
        // Scaled 2 -> 1 -> 3 quickly: three pods are within generation 3's spec.
        let events: Vec<(u64, Logged)> = vec![
            (1, set(1, 2, 1)),
            (2, pod("a")),
            (3, pod("b")),
            (4, set(2, 1, 1)),
            (5, set(3, 3, 1)),
            (6, pod("c")),
        ];
        assert!(replay("web", &events).is_empty());
        // Scaled down to 1 and observed: a third pod is beyond every spec it may have read.
        let events: Vec<(u64, Logged)> = vec![
            (1, set(1, 2, 1)),
            (2, pod("a")),
            (3, pod("b")),
            (4, set(2, 1, 2)),
            (5, pod("c")),
        ];
        assert_eq!(replay("web", &events).len(), 1);
    }
}
