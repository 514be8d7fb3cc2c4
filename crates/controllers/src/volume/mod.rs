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
    runtime::{Action, Controller, WorkQueue},
    util::api_error::is_status,
    util::update,
};
use binding::{ClaimStep, VolumeStep};
use events::{EventType, Recorder};
use informer::{
    Change, Informer, Informers, Key, Shared, Subscription, key as make_key, split_key,
};
use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim, Pod},
    storage::v1::StorageClass,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams},
};
use serde_json::{Value, json};
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock},
};

/// How the controller runs (4 workers).
pub type Config = crate::runtime::Config<4>;

/// Why a sync failed (it is retried with back-off).
pub type Error = crate::runtime::ApiError;

/// What the queue holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    /// A claim, `namespace/name`.
    Claim(Key),
    /// A volume, by name.
    Volume(String),
}

/// What the handlers derive from the cache for the syncs.
#[derive(Default)]
struct Links {
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

/// The controller: its handles on the shared cache, the links between claims, volumes and pods,
/// and one queue of claims and volumes.
pub struct VolumeController {
    client: Client,
    claims: Informer<PersistentVolumeClaim>,
    volumes: Informer<PersistentVolume>,
    classes: Informer<StorageClass>,
    pods: Informer<Pod>,
    links: RwLock<Links>,
    queue: WorkQueue<Item>,
    recorder: Recorder,
}

impl Controller for VolumeController {
    const NAME: &'static str = "persistentvolume-binder";
    type Key = Item;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Item> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let (c, v, s, p) = (
            Arc::clone(self),
            Arc::clone(self),
            Arc::clone(self),
            Arc::clone(self),
        );
        vec![
            self.claims.subscribe(move |ch| c.on_claim(ch)),
            self.volumes.subscribe(move |ch| v.on_volume(ch)),
            self.classes.subscribe(move |_| s.on_class()),
            self.pods.subscribe(move |ch| p.on_pod(ch)),
        ]
    }

    async fn reconcile(self: &Arc<Self>, item: Item) -> Result<Action, Error> {
        match item {
            Item::Claim(key) => self.sync_claim(&key).await,
            Item::Volume(name) => self.sync_volume(&name).await,
        }
        .map(|()| Action::await_change())
    }
}

impl VolumeController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        let client = informers.client().clone();
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), "persistentvolume-controller", None),
            client,
            queue: config.queue(),
            claims: informers.get(),
            volumes: informers.get(),
            classes: informers.get(),
            pods: informers.get(),
            links: RwLock::default(),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Links> {
        self.links.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Links> {
        self.links.write().unwrap_or_else(|e| e.into_inner())
    }

    fn on_claim(&self, change: &Change<PersistentVolumeClaim>) {
        if change.is_resync() {
            return;
        }
        let key = change.object().key();
        let (old, new) = match change {
            Change::Added(n) => (None, Some(n)),
            Change::Updated { old, new } => (Some(old), Some(new)),
            Change::Deleted(o) => (Some(o), None),
        };
        let before = old.and_then(|o| bound_volume(o));
        let after = new.and_then(|n| bound_volume(n));
        let mut links = self.write();
        if before != after {
            if let Some(v) = &before
                && let Some(set) = links.claims_of_volume.get_mut(v)
            {
                set.remove(&key);
                if set.is_empty() {
                    links.claims_of_volume.remove(v);
                }
            }
            if let Some(v) = &after {
                links
                    .claims_of_volume
                    .entry(v.clone())
                    .or_default()
                    .insert(key.clone());
            }
        }
        let mut queue = vec![Item::Claim(key.clone())];
        queue.extend(before.into_iter().chain(after).map(Item::Volume));
        if let Some(v) = links.volume_of_claim.get(&key) {
            queue.push(Item::Volume(v.clone()));
        }
        drop(links);
        for item in queue {
            self.queue.add(item);
        }
    }

    fn on_volume(&self, change: &Change<PersistentVolume>) {
        if change.is_resync() {
            return;
        }
        let name = change.object().name_any();
        let (old, new) = match change {
            Change::Added(n) => (None, Some(n)),
            Change::Updated { old, new } => (Some(old), Some(new)),
            Change::Deleted(o) => (Some(o), None),
        };
        let before = old.and_then(|o| claim_ref_key(o));
        let after = new.and_then(|n| claim_ref_key(n));
        let mut links = self.write();
        if let Some(k) = &before
            && links.volume_of_claim.get(k) == Some(&name)
        {
            links.volume_of_claim.remove(k);
        }
        if let Some(k) = &after {
            links.volume_of_claim.insert(k.clone(), name.clone());
        }
        let mut queue = vec![Item::Volume(name.clone())];
        queue.extend(before.into_iter().chain(after).map(Item::Claim));
        for k in links.claims_of_volume.get(&name).into_iter().flatten() {
            queue.push(Item::Claim(k.clone()));
        }
        drop(links);
        for item in queue {
            self.queue.add(item);
        }
    }

    /// A class changed: waiting claims may have a (default) class now.
    fn on_class(&self) {
        for claim in self.claims.store().list() {
            if bound_volume(&claim).is_none() {
                self.queue.add(Item::Claim(claim.key()));
            }
        }
    }

    fn on_pod(&self, change: &Change<Pod>) {
        if change.is_resync() {
            return;
        }
        let pod = change.object();
        let key = pod.key();
        let ns = pod.namespace().unwrap_or_default();
        let after: Vec<Key> = match change {
            Change::Deleted(_) => Vec::new(),
            _ if !protection::may_use_volumes(pod) => Vec::new(),
            _ => protection::claims_of(pod)
                .map(|n| make_key(&ns, n))
                .collect(),
        };
        let mut links = self.write();
        let before = links.mounts.remove(&key).unwrap_or_default();
        if before.is_empty() && after.is_empty() {
            return;
        }
        for k in &before {
            if let Some(users) = links.users.get_mut(k) {
                users.remove(&key);
                if users.is_empty() {
                    links.users.remove(k);
                }
            }
        }
        for k in &after {
            links
                .users
                .entry(k.clone())
                .or_default()
                .insert(key.clone());
        }
        let changed: Vec<Key> = before
            .iter()
            .filter(|k| !after.contains(k))
            .chain(after.iter().filter(|k| !before.contains(k)))
            .cloned()
            .collect();
        if !after.is_empty() {
            links.mounts.insert(key, after);
        }
        drop(links);
        for k in changed {
            self.queue.add(Item::Claim(k));
        }
    }

    async fn sync_claim(&self, key: &str) -> Result<(), Error> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(());
        };
        let class: Option<Shared<StorageClass>> =
            binding::claim_class(&claim).and_then(|n| self.classes.get(n));
        let classes = self.classes.store().list();
        let default = class::default_class(classes.iter().map(|c| c.object())).map(str::to_string);
        let (volume_name, in_use) = {
            let links = self.read();
            (
                bound_volume(&claim).or_else(|| links.volume_of_claim.get(key).cloned()),
                links.users.get(key).is_some_and(|u| !u.is_empty()),
            )
        };
        let volume = volume_name.and_then(|n| self.volumes.get(&n));
        let (ns, _) = split_key(key);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let reference = events::reference(claim.object());
        if let Some(finalizers) = protection::finalizers(&claim, in_use) {
            let finalizers = json!(finalizers);
            let set = |v: &mut Value| v["metadata"]["finalizers"] = finalizers.clone();
            return ignore_gone(update::object_once(&api, claim.object(), set).await);
        }
        match binding::claim_step(
            &claim,
            class.as_ref().map(|c| c.object()),
            default.as_deref(),
            volume.as_ref().map(|v| v.object()),
        ) {
            ClaimStep::Nothing => Ok(()),
            ClaimStep::SetClass(class) => {
                let set = |v: &mut Value| v["spec"]["storageClassName"] = json!(class);
                ignore_gone(update::object_once(&api, claim.object(), set).await)
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
                                "failed to provision volume with StorageClass {:?}: {}",
                                class.name_any(),
                                crate::util::api_error::message(&e)
                            ),
                        );
                        Err(e.into())
                    }
                }
            }
            ClaimStep::Bind(volume) => {
                let set = |v: &mut Value| {
                    for key in [binding::BIND_COMPLETED, binding::BOUND_BY_CONTROLLER] {
                        v["metadata"]["annotations"][key] = json!("yes");
                    }
                    for key in [
                        binding::STORAGE_PROVISIONER,
                        binding::STORAGE_PROVISIONER_BETA,
                    ] {
                        v["metadata"]["annotations"][key] = json!(class::SIMULATED_PROVISIONER);
                    }
                    v["spec"]["volumeName"] = json!(volume);
                };
                ignore_gone(update::object_once(&api, claim.object(), set).await)
            }
            ClaimStep::MarkBound => {
                let spec = volume.as_ref().and_then(|v| v.spec.as_ref());
                let fields = json!({
                    "phase": "Bound",
                    "accessModes": spec.and_then(|s| s.access_modes.clone()),
                    "capacity": spec.and_then(|s| s.capacity.clone()),
                });
                let set = |v: &mut Value| update::set_status_fields(v, &fields);
                ignore_gone(update::status_once(&api, claim.object(), set).await)
            }
            ClaimStep::MarkLost => {
                self.recorder.record(
                    &reference,
                    EventType::Warning,
                    "ClaimLost",
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                );
                let set = |v: &mut Value| v["status"]["phase"] = json!("Lost");
                ignore_gone(update::status_once(&api, claim.object(), set).await)
            }
            ClaimStep::AwaitExternal(provisioner) => {
                // Upstream's setClaimProvisioner: both spellings name the provisioner, so that
                // an external provisioner knows the claim is its to serve.
                let marked = [
                    binding::STORAGE_PROVISIONER,
                    binding::STORAGE_PROVISIONER_BETA,
                ]
                .iter()
                .all(|k| claim.annotations().get(*k) == Some(&provisioner));
                if !marked {
                    let set = |v: &mut Value| {
                        for key in [
                            binding::STORAGE_PROVISIONER,
                            binding::STORAGE_PROVISIONER_BETA,
                        ] {
                            v["metadata"]["annotations"][key] = json!(provisioner);
                        }
                    };
                    ignore_gone(update::object_once(&api, claim.object(), set).await)?;
                }
                self.recorder.record(
                    &reference,
                    EventType::Normal,
                    "ExternalProvisioning",
                    format!(
                        "waiting for a volume to be created, either by external provisioner {provisioner:?} or manually created by system administrator"
                    ),
                );
                Ok(())
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
        let Some(volume) = self.volumes.get(name) else {
            return Ok(());
        };
        let claim = claim_ref_key(&volume).and_then(|k| self.claims.get(&k));
        let waiting: Vec<Shared<PersistentVolumeClaim>> = self
            .read()
            .claims_of_volume
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|k| self.claims.get(k))
            .collect();
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        if let Some(finalizers) = protection::volume_finalizers(&volume) {
            let finalizers = json!(finalizers);
            let set = |v: &mut Value| v["metadata"]["finalizers"] = finalizers.clone();
            return ignore_gone(update::object_once(&api, volume.object(), set).await);
        }
        let refs: Vec<&PersistentVolumeClaim> = waiting.iter().map(|c| c.object()).collect();
        match binding::volume_step(&volume, claim.as_ref().map(|c| c.object()), &refs) {
            VolumeStep::Nothing => Ok(()),
            VolumeStep::MarkPhase(phase) => {
                let set = |v: &mut Value| v["status"]["phase"] = json!(phase);
                ignore_gone(update::status_once(&api, volume.object(), set).await)
            }
            VolumeStep::ClaimBy(i) => {
                let claim_ref = json!(provision::claim_ref(refs[i]));
                let set = |v: &mut Value| v["spec"]["claimRef"] = claim_ref.clone();
                ignore_gone(update::object_once(&api, volume.object(), set).await)
            }
            VolumeStep::Delete => match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) if is_status(&e, 404) => Ok(()),
                Err(e) => {
                    self.recorder.record(
                        &events::reference(volume.object()),
                        EventType::Warning,
                        "VolumeFailedDelete",
                        crate::util::api_error::message(&e),
                    );
                    Err(e.into())
                }
            },
        }
    }
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
