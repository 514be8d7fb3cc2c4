//! The volume controller, as upstream's PersistentVolume and PVC-protection controllers with a
//! simulated provisioner in place of a CSI driver: claims that name no class get the default
//! one ([`class`]); claims of a class whose provisioner is [`class::SIMULATED_PROVISIONER`] get
//! a volume of their size, pinned to their first pod's node for `WaitForFirstConsumer`
//! ([`provision`]); claims and volumes are bound both ways and volumes whose claim is gone are
//! released or deleted per their reclaim policy ([`binding`]); and a claim is kept while a pod
//! uses it ([`protection`]).

pub mod binding;
pub mod class;
pub mod protection;
pub mod provision;

use crate::{
    owner_index::{Key, key as make_key, key_of, split_key},
    runtime::{Action, Backoff, WorkQueue, run_workers},
};
use binding::{ClaimStep, VolumeStep};
use events::{EventType, Recorder};
use futures::StreamExt;
use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim, Pod},
    storage::v1::StorageClass,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, RwLock,
        atomic::{AtomicUsize, Ordering},
    },
};
use tokio::sync::Notify;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Concurrent syncs.
    pub workers: usize,
    /// Retry delays of failed syncs.
    pub backoff: Backoff,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: 4,
            backoff: Backoff::default(),
        }
    }
}

/// Why a sync failed (it is retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
}

/// What the queue holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    /// A claim, `namespace/name`.
    Claim(Key),
    /// A volume, by name.
    Volume(String),
}

#[derive(Default)]
struct Caches {
    claims: HashMap<Key, Arc<PersistentVolumeClaim>>,
    volumes: HashMap<String, Arc<PersistentVolume>>,
    classes: HashMap<String, Arc<StorageClass>>,
    /// The volume whose `claimRef` names each claim (`namespace/name`).
    volume_of_claim: HashMap<Key, String>,
    /// Claims naming each volume in `spec.volumeName`.
    claims_of_volume: HashMap<String, HashSet<Key>>,
    /// Pods that may still use each claim (`namespace/claim` -> pod keys).
    users: HashMap<Key, HashSet<Key>>,
    /// The claims each pod mounts, for removing it from `users`.
    mounts: HashMap<Key, Vec<Key>>,
}

fn claim_ref_key(v: &PersistentVolume) -> Option<Key> {
    let r = v.spec.as_ref()?.claim_ref.as_ref()?;
    Some(make_key(r.namespace.as_deref()?, r.name.as_deref()?))
}

fn bound_volume(c: &PersistentVolumeClaim) -> Option<String> {
    c.spec
        .as_ref()?
        .volume_name
        .clone()
        .filter(|n| !n.is_empty())
}

/// The controller: caches fed by four watches, one queue of claims and volumes.
pub struct Controller {
    client: Client,
    caches: RwLock<Caches>,
    queue: WorkQueue<Item>,
    recorder: Recorder,
}

impl Controller {
    /// A controller on `client`.
    pub fn new(client: Client, config: &Config) -> Self {
        Self {
            recorder: Recorder::new(client.clone(), "persistentvolume-controller", None),
            client,
            caches: RwLock::default(),
            queue: WorkQueue::new(config.backoff),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Caches> {
        self.caches.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Caches> {
        self.caches.write().unwrap_or_else(|e| e.into_inner())
    }

    fn put_claim(&self, claim: Option<PersistentVolumeClaim>, key: Key) {
        let mut c = self.write();
        let old = c.claims.remove(&key);
        if let Some(v) = old.as_deref().and_then(bound_volume)
            && let Some(set) = c.claims_of_volume.get_mut(&v)
        {
            set.remove(&key);
        }
        let mut queue = vec![Item::Claim(key.clone())];
        if let Some(claim) = claim {
            if let Some(v) = bound_volume(&claim) {
                c.claims_of_volume
                    .entry(v.clone())
                    .or_default()
                    .insert(key.clone());
                queue.push(Item::Volume(v));
            }
            c.claims.insert(key.clone(), Arc::new(claim));
        }
        if let Some(v) = c.volume_of_claim.get(&key) {
            queue.push(Item::Volume(v.clone()));
        }
        if let Some(v) = old.as_deref().and_then(bound_volume) {
            queue.push(Item::Volume(v));
        }
        drop(c);
        for item in queue {
            self.queue.add(item);
        }
    }

    fn put_volume(&self, volume: Option<PersistentVolume>, name: String) {
        let mut c = self.write();
        if let Some(old) = c.volumes.remove(&name)
            && let Some(k) = claim_ref_key(&old)
            && c.volume_of_claim.get(&k) == Some(&name)
        {
            c.volume_of_claim.remove(&k);
        }
        let mut queue = vec![Item::Volume(name.clone())];
        if let Some(v) = volume {
            if let Some(k) = claim_ref_key(&v) {
                c.volume_of_claim.insert(k.clone(), name.clone());
                queue.push(Item::Claim(k));
            }
            c.volumes.insert(name.clone(), Arc::new(v));
        }
        for k in c.claims_of_volume.get(&name).into_iter().flatten() {
            queue.push(Item::Claim(k.clone()));
        }
        drop(c);
        for item in queue {
            self.queue.add(item);
        }
    }

    fn put_class(&self, class: Option<StorageClass>, name: String) {
        let mut c = self.write();
        match class {
            Some(class) => c.classes.insert(name, Arc::new(class)),
            None => c.classes.remove(&name),
        };
        // A new (default) class may be what waiting claims need.
        let waiting: Vec<Key> = c
            .claims
            .iter()
            .filter(|(_, claim)| bound_volume(claim).is_none())
            .map(|(k, _)| k.clone())
            .collect();
        drop(c);
        for k in waiting {
            self.queue.add(Item::Claim(k));
        }
    }

    fn put_pod(&self, pod: Option<&Pod>, key: Key) {
        let ns = split_key(&key).0.to_string();
        let mut c = self.write();
        let before = c.mounts.remove(&key).unwrap_or_default();
        let after: Vec<Key> = pod
            .filter(|p| protection::may_use_volumes(p))
            .map(|p| protection::claims_of(p).map(|n| make_key(&ns, n)).collect())
            .unwrap_or_default();
        for k in &before {
            if let Some(users) = c.users.get_mut(k) {
                users.remove(&key);
                if users.is_empty() {
                    c.users.remove(k);
                }
            }
        }
        for k in &after {
            c.users.entry(k.clone()).or_default().insert(key.clone());
        }
        let changed: Vec<Key> = before
            .iter()
            .filter(|k| !after.contains(k))
            .chain(after.iter().filter(|k| !before.contains(k)))
            .cloned()
            .collect();
        if !after.is_empty() {
            c.mounts.insert(key, after);
        }
        drop(c);
        for k in changed {
            self.queue.add(Item::Claim(k));
        }
    }

    /// Brings one claim or volume a step closer to bound (or released).
    pub async fn reconcile(&self, item: Item) -> Result<Action, Error> {
        match item {
            Item::Claim(key) => self.sync_claim(&key).await,
            Item::Volume(name) => self.sync_volume(&name).await,
        }
        .map(|()| Action::await_change())
    }

    async fn sync_claim(&self, key: &str) -> Result<(), Error> {
        let (claim, class, default, volume, in_use) = {
            let c = self.read();
            let Some(claim) = c.claims.get(key).cloned() else {
                return Ok(());
            };
            let class = claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
                .and_then(|n| c.classes.get(n))
                .cloned();
            let default =
                class::default_class(c.classes.values().map(|c| c.as_ref())).map(str::to_string);
            let volume = bound_volume(&claim)
                .or_else(|| c.volume_of_claim.get(key).cloned())
                .and_then(|n| c.volumes.get(&n))
                .cloned();
            let in_use = c.users.get(key).is_some_and(|u| !u.is_empty());
            (claim, class, default, volume, in_use)
        };
        let (ns, name) = split_key(key);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let reference = events::reference(claim.as_ref());
        if let Some(finalizers) = protection::finalizers(&claim, in_use) {
            let patch = json!({"metadata": {
                "finalizers": finalizers,
                "resourceVersion": claim.metadata.resource_version,
            }});
            return ignore_gone(
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            );
        }
        match binding::claim_step(
            &claim,
            class.as_deref(),
            default.as_deref(),
            volume.as_deref(),
        ) {
            ClaimStep::Nothing => Ok(()),
            ClaimStep::SetClass(class) => {
                let patch = json!({"spec": {"storageClassName": class}});
                ignore_gone(
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )
            }
            ClaimStep::Provision(node) => {
                let Some(class) = class else { return Ok(()) };
                let volume = provision::new_volume(&claim, &class, node.as_deref());
                let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
                match volumes.create(&PostParams::default(), &volume).await {
                    Ok(v) => {
                        self.recorder.record(
                            &reference,
                            EventType::Normal,
                            "ProvisioningSucceeded",
                            format!("Successfully provisioned volume {}", v.name_any()),
                        );
                        Ok(())
                    }
                    Err(e) if is_status(&e, 409) => Ok(()),
                    Err(e) => {
                        self.recorder.record(
                            &reference,
                            EventType::Warning,
                            "ProvisioningFailed",
                            format!(
                                "failed to provision volume with StorageClass {:?}: {e}",
                                class.name_any()
                            ),
                        );
                        Err(e.into())
                    }
                }
            }
            ClaimStep::Bind(volume) => {
                let patch = json!({
                    "metadata": {
                        "annotations": {
                            binding::BIND_COMPLETED: "yes",
                            binding::BOUND_BY_CONTROLLER: "yes",
                            binding::STORAGE_PROVISIONER: class::SIMULATED_PROVISIONER,
                            binding::STORAGE_PROVISIONER_BETA: class::SIMULATED_PROVISIONER,
                        },
                        "resourceVersion": claim.metadata.resource_version,
                    },
                    "spec": {"volumeName": volume},
                });
                ignore_gone(
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )
            }
            ClaimStep::MarkBound => {
                let spec = volume.as_ref().and_then(|v| v.spec.as_ref());
                let patch = json!({"status": {
                    "phase": "Bound",
                    "accessModes": spec.and_then(|s| s.access_modes.clone()),
                    "capacity": spec.and_then(|s| s.capacity.clone()),
                }});
                ignore_gone(
                    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )
            }
            ClaimStep::MarkLost => {
                self.recorder.record(
                    &reference,
                    EventType::Warning,
                    "ClaimLost",
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                );
                let patch = json!({"status": {"phase": "Lost"}});
                ignore_gone(
                    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )
            }
            ClaimStep::Wait(reason) => {
                if reason == "WaitForFirstConsumer" {
                    self.recorder.record(
                        &reference,
                        EventType::Normal,
                        reason,
                        "waiting for first consumer to be created before binding",
                    );
                }
                Ok(())
            }
        }
    }

    async fn sync_volume(&self, name: &str) -> Result<(), Error> {
        let (volume, claim, waiting) = {
            let c = self.read();
            let Some(volume) = c.volumes.get(name).cloned() else {
                return Ok(());
            };
            let claim = claim_ref_key(&volume).and_then(|k| c.claims.get(&k).cloned());
            let waiting: Vec<Arc<PersistentVolumeClaim>> = c
                .claims_of_volume
                .get(name)
                .into_iter()
                .flatten()
                .filter_map(|k| c.claims.get(k).cloned())
                .collect();
            (volume, claim, waiting)
        };
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let refs: Vec<&PersistentVolumeClaim> = waiting.iter().map(|c| c.as_ref()).collect();
        match binding::volume_step(&volume, claim.as_deref(), &refs) {
            VolumeStep::Nothing => Ok(()),
            VolumeStep::MarkPhase(phase) => {
                let patch = json!({"status": {"phase": phase}});
                ignore_gone(
                    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )
            }
            VolumeStep::ClaimBy(i) => {
                let patch = json!({
                    "metadata": {"resourceVersion": volume.metadata.resource_version},
                    "spec": {"claimRef": provision::claim_ref(refs[i])},
                });
                ignore_gone(
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )
            }
            VolumeStep::Delete => match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) if is_status(&e, 404) => Ok(()),
                Err(e) => {
                    self.recorder.record(
                        &events::reference(volume.as_ref()),
                        EventType::Warning,
                        "VolumeFailedDelete",
                        e.to_string(),
                    );
                    Err(e.into())
                }
            },
        }
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// A write to an object that is gone, or changed under us (its next event brings us back),
/// is no error.
fn ignore_gone<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Follows a watch of `K`, passing each object (or its deletion) to `put`; `listed` is
/// notified once the first list is complete.
async fn follow<K>(
    api: Api<K>,
    what: &'static str,
    put: impl Fn(Option<K>, String),
    key: impl Fn(&K) -> String,
    listed: &AtomicUsize,
    notify: &Notify,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut seen: Option<HashSet<String>> = None;
    let mut known: HashSet<String> = HashSet::new();
    let mut counted = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => seen = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(o)) => {
                let k = key(&o);
                seen.get_or_insert_default().insert(k.clone());
                known.insert(k.clone());
                put(Some(o), k);
            }
            Ok(watcher::Event::InitDone) => {
                let seen = seen.take().unwrap_or_default();
                for gone in known
                    .iter()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect::<Vec<_>>()
                {
                    known.remove(&gone);
                    put(None, gone);
                }
                if !counted {
                    counted = true;
                    listed.fetch_add(1, Ordering::AcqRel);
                    notify.notify_waiters();
                }
            }
            Ok(watcher::Event::Apply(o)) => {
                let k = key(&o);
                known.insert(k.clone());
                put(Some(o), k);
            }
            Ok(watcher::Event::Delete(o)) => {
                let k = key(&o);
                known.remove(&k);
                put(None, k);
            }
            Err(e) => tracing::debug!(error = %e, watch = what, "watch failed; retrying"),
        }
    }
}

/// Runs the volume controller on `client` until dropped: watches of claims, volumes, classes
/// and pods feed the caches; workers start once all four have listed.
pub async fn run(client: Client, config: Config) {
    let ctl = Arc::new(Controller::new(client.clone(), &config));
    let listed = AtomicUsize::new(0);
    let notify = Notify::new();
    let claims = follow(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        "persistentvolumeclaim",
        |o, k| ctl.put_claim(o, k),
        key_of,
        &listed,
        &notify,
    );
    let volumes = follow(
        Api::<PersistentVolume>::all(client.clone()),
        "persistentvolume",
        |o, k| ctl.put_volume(o, k),
        |o| o.name_any(),
        &listed,
        &notify,
    );
    let classes = follow(
        Api::<StorageClass>::all(client.clone()),
        "storageclass",
        |o, k| ctl.put_class(o, k),
        |o| o.name_any(),
        &listed,
        &notify,
    );
    let pods = follow(
        Api::<Pod>::all(client.clone()),
        "pod",
        |o, k| ctl.put_pod(o.as_ref(), k),
        key_of,
        &listed,
        &notify,
    );
    let workers = async {
        loop {
            let wait = notify.notified();
            if listed.load(Ordering::Acquire) >= 4 {
                break;
            }
            wait.await;
        }
        run_workers(
            "volume-controller",
            ctl.queue.clone(),
            config.workers,
            |item| {
                let ctl = Arc::clone(&ctl);
                async move { ctl.reconcile(item).await }
            },
        )
        .await
    };
    tokio::join!(claims, volumes, classes, pods, workers);
}
