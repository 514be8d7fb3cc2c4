//! A snapshot made into a cluster again: the objects a rehearsal starts from, created in a fresh
//! control plane before its scheduler, controllers and simulated nodes start, so that they wake
//! up to a cluster that already runs rather than build it.
//!
//! What changes on the way, and why:
//! - Every object gets the new server's uid, so owner references are rewritten to the new uids
//!   of their owners; a reference to an owner the snapshot does not hold (a Job's CronJob, a
//!   mirror pod's Node) is dropped, or the garbage collector would delete the dependent.
//! - Nodes carry the simulated label, so the node simulator runs them, and their allocatable
//!   resources as their capacity (what the scheduler fits pods into).
//! - Pods are created bound to their node and then given their recorded status, so the node
//!   simulator adopts a running pod as it stands instead of starting it again.
//! - Jobs are not created (their pods stay, as bare pods, so they still take their room): a Job's
//!   generated selector names its old uid. The snapshot never reads Secrets or ConfigMaps, so the
//!   ones pods and templates mount or read are created empty, by name, with the keys named.
//! - `spec.priority` is left to admission, which fills it from the PriorityClass again.

use crate::cli::snapshot::{Snapshot, resource_of};
use anyhow::Context;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    core::DynamicObject,
};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Creations in flight at once.
const CONCURRENCY: usize = 64;

/// What was loaded.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Nodes created.
    pub nodes: usize,
    /// Of them, those Ready in the snapshot (the others stay silent, as their kubelets were).
    pub ready_nodes: usize,
    /// Pods created (running, pending or bound).
    pub pods: usize,
    /// Of them, those Ready in the snapshot.
    pub ready: usize,
    /// Objects of the snapshot left out, with why (`pods/ns/name: finished`).
    pub left_out: Vec<String>,
}

/// Old uid to new uid.
type Uids = HashMap<String, String>;

fn items<'a>(snapshot: &'a Snapshot, key: &str) -> &'a [Value] {
    snapshot
        .objects
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// `object` ready to create on another server: no server-set metadata, no status, owner
/// references to the new uids (or none where the owner is not loaded).
pub fn fresh(object: &Value, uids: &Uids) -> Value {
    let mut out = object.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "selfLink",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            meta.remove(k);
        }
        if let Some(refs) = meta.remove("ownerReferences").and_then(|r| match r {
            Value::Array(a) => Some(a),
            _ => None,
        }) {
            let kept: Vec<Value> = refs
                .into_iter()
                .filter_map(|mut r| {
                    let new = uids.get(r.get("uid")?.as_str()?)?.clone();
                    r["uid"] = Value::String(new);
                    Some(r)
                })
                .collect();
            if !kept.is_empty() {
                meta.insert("ownerReferences".into(), Value::Array(kept));
            }
        }
    }
    if let Some(map) = out.as_object_mut() {
        map.remove("status");
    }
    out
}

/// Creates the snapshot's objects under `key`, each as `shape` makes it from the object and
/// the uids known so far, and records their new uids. An object that exists already (a
/// namespace or PriorityClass every cluster has) is taken as it is.
async fn create_all(
    client: &Client,
    snapshot: &Snapshot,
    key: &str,
    shape: fn(&Value, &Uids) -> Value,
    uids: &mut Uids,
) -> anyhow::Result<()> {
    let (resource, namespaced) =
        resource_of(key).with_context(|| format!("no resource for {key}"))?;
    let bodies: Vec<(String, Value)> = items(snapshot, key)
        .iter()
        .map(|o| (text(o, "/metadata/uid").to_string(), shape(o, uids)))
        .collect();
    let made: Vec<(String, DynamicObject)> = stream::iter(bodies)
        .map(|(old_uid, object)| {
            let (client, resource) = (client.clone(), resource.clone());
            async move {
                let name = text(&object, "/metadata/name").to_string();
                let ns = text(&object, "/metadata/namespace").to_string();
                let api: Api<DynamicObject> = if namespaced {
                    Api::namespaced_with(client, &ns, &resource)
                } else {
                    Api::all_with(client, &resource)
                };
                let body: DynamicObject = serde_json::from_value(object)?;
                let created = match api.create(&PostParams::default(), &body).await {
                    Ok(o) => o,
                    Err(kube::Error::Api(s)) if s.code == 409 => api.get(&name).await?,
                    Err(e) => {
                        return Err(
                            anyhow::Error::from(e).context(format!("creating {key} {ns}/{name}"))
                        );
                    }
                };
                Ok::<_, anyhow::Error>((old_uid, created))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    for (old, created) in made {
        if let Some(new) = created.metadata.uid {
            uids.insert(old, new);
        }
    }
    Ok(())
}

/// Loads `snapshot` through `client` (which may do anything: the rehearsal's own admin).
pub async fn load(client: &Client, snapshot: &Snapshot) -> anyhow::Result<Loaded> {
    let mut uids = Uids::new();
    let mut loaded = Loaded {
        nodes: items(snapshot, "nodes").len(),
        ready_nodes: items(snapshot, "nodes")
            .iter()
            .filter(|n| node_ready(n))
            .count(),
        ..Default::default()
    };
    for key in ["namespaces", "priorityClasses", "storageClasses"] {
        create_all(client, snapshot, key, fresh, &mut uids).await?;
    }
    create_all(client, snapshot, "nodes", simulated, &mut uids).await?;
    create_references(client, snapshot).await?;

    // Claims first: a volume's claimRef names its claim's new uid; both get their bound status.
    create_all(client, snapshot, "persistentVolumeClaims", fresh, &mut uids).await?;
    create_all(
        client,
        snapshot,
        "persistentVolumes",
        bound_volume,
        &mut uids,
    )
    .await?;
    write_statuses(client, snapshot, "persistentVolumeClaims").await?;
    write_statuses(client, snapshot, "persistentVolumes").await?;

    // Owners before what they own, so every reference finds its owner's new uid.
    for key in [
        "deployments",
        "daemonSets",
        "statefulSets",
        "replicaSets",
        "controllerRevisions",
        "podDisruptionBudgets",
        "resourceQuotas",
    ] {
        create_all(client, snapshot, key, fresh, &mut uids).await?;
    }
    for job in items(snapshot, "jobs") {
        loaded.left_out.push(format!(
            "job {}/{}: not created (its pods are kept as bare pods)",
            text(job, "/metadata/namespace"),
            text(job, "/metadata/name")
        ));
    }

    let mut pods = Vec::new();
    for pod in items(snapshot, "pods") {
        let phase = text(pod, "/status/phase");
        let name = format!(
            "{}/{}",
            text(pod, "/metadata/namespace"),
            text(pod, "/metadata/name")
        );
        if matches!(phase, "Succeeded" | "Failed") {
            loaded
                .left_out
                .push(format!("pod {name}: finished ({phase})"));
            continue;
        }
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            loaded.left_out.push(format!("pod {name}: being deleted"));
            continue;
        }
        if api::pod::is_ready(&serde_json::from_value::<Pod>(pod.clone())?) {
            loaded.ready += 1;
        }
        let mut fresh = fresh(pod, &uids);
        if let Some(spec) = fresh.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("priority");
        }
        pods.push((fresh, pod.get("status").cloned()));
    }
    loaded.pods = pods.len();
    let (resource, _) = resource_of("pods").context("pods")?;
    stream::iter(pods)
        .map(|(pod, status)| {
            let (client, resource) = (client.clone(), resource.clone());
            async move {
                let ns = text(&pod, "/metadata/namespace").to_string();
                let name = text(&pod, "/metadata/name").to_string();
                let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &resource);
                let body: DynamicObject = serde_json::from_value(pod)?;
                api.create(&PostParams::default(), &body)
                    .await
                    .with_context(|| format!("creating pod {ns}/{name}"))?;
                if let Some(status) = status {
                    api.patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({ "status": status })),
                    )
                    .await
                    .with_context(|| format!("writing the status of pod {ns}/{name}"))?;
                }
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(loaded)
}

/// A volume whose claim reference names its claim's new uid.
fn bound_volume(pv: &Value, uids: &Uids) -> Value {
    let mut out = fresh(pv, uids);
    if let Some(new) = pv
        .pointer("/spec/claimRef/uid")
        .and_then(Value::as_str)
        .and_then(|uid| uids.get(uid))
    {
        out["spec"]["claimRef"]["uid"] = Value::String(new.clone());
    }
    out
}

/// Whether the node reported `Ready=True`.
fn node_ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// A snapshot's node as the simulator runs it: labelled simulated, with its allocatable
/// resources as its capacity, its status otherwise left to the simulator. A node that was not
/// Ready has its simulated kubelet stopped, so it stays out of service as it was.
fn simulated(node: &Value, uids: &Uids) -> Value {
    let mut out = fresh(node, uids);
    out["metadata"]["labels"][nodesim::SIMULATED_LABEL] = Value::String("true".into());
    if !node_ready(node) {
        out["metadata"]["annotations"][nodesim::HEARTBEAT_ANNOTATION] =
            Value::String("stopped".into());
    }
    let resources = node
        .pointer("/status/allocatable")
        .or_else(|| node.pointer("/status/capacity"))
        .cloned();
    if let Some(r) = resources {
        out["status"] = json!({"capacity": r, "allocatable": r});
    }
    out
}

/// Writes the recorded status of the snapshot's `key` objects (volumes and claims keep their
/// binding).
async fn write_statuses(client: &Client, snapshot: &Snapshot, key: &str) -> anyhow::Result<()> {
    let (resource, namespaced) = resource_of(key).context("resource")?;
    for object in items(snapshot, key) {
        let Some(status) = object.get("status") else {
            continue;
        };
        let name = text(object, "/metadata/name");
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(
                client.clone(),
                text(object, "/metadata/namespace"),
                &resource,
            )
        } else {
            Api::all_with(client.clone(), &resource)
        };
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .with_context(|| format!("writing the status of {key} {name}"))?;
    }
    Ok(())
}

/// What pods and pod templates refer to by name that the snapshot does not hold.
#[derive(Debug, Default, PartialEq)]
pub struct References {
    /// ServiceAccounts, by namespace.
    pub accounts: BTreeMap<String, BTreeSet<String>>,
    /// ConfigMaps, by namespace, with the keys read from them.
    pub config_maps: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Secrets, likewise.
    pub secrets: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl References {
    /// Notes what a pod spec in `namespace` refers to.
    pub fn add(&mut self, namespace: &str, spec: &PodSpec) {
        let ns = namespace.to_string();
        let account = spec
            .service_account_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        self.accounts.entry(ns.clone()).or_default().insert(account);
        let pod = Pod {
            spec: Some(spec.clone()),
            ..Default::default()
        };
        for need in nodesim::mounts::needs(&pod) {
            let map = match need.kind {
                nodesim::mounts::Kind::Secret => &mut self.secrets,
                nodesim::mounts::Kind::ConfigMap => &mut self.config_maps,
            };
            map.entry(ns.clone())
                .or_default()
                .entry(need.name)
                .or_default();
        }
        for v in spec.volumes.iter().flatten() {
            let keys = |items: &Option<Vec<k8s_openapi::api::core::v1::KeyToPath>>| {
                items
                    .iter()
                    .flatten()
                    .map(|i| i.key.clone())
                    .collect::<Vec<_>>()
            };
            if let Some(c) = &v.config_map {
                self.key(true, &ns, &c.name, keys(&c.items));
            }
            if let Some(s) = &v.secret
                && let Some(name) = &s.secret_name
            {
                self.key(false, &ns, name, keys(&s.items));
            }
        }
        let containers = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten());
        for c in containers {
            for from in c.env_from.iter().flatten() {
                if let Some(r) = &from.config_map_ref
                    && r.optional != Some(true)
                {
                    self.key(true, &ns, &r.name, Vec::new());
                }
                if let Some(r) = &from.secret_ref
                    && r.optional != Some(true)
                {
                    self.key(false, &ns, &r.name, Vec::new());
                }
            }
            for e in c.env.iter().flatten() {
                let Some(source) = &e.value_from else {
                    continue;
                };
                if let Some(r) = &source.config_map_key_ref
                    && r.optional != Some(true)
                {
                    self.key(true, &ns, &r.name, vec![r.key.clone()]);
                }
                if let Some(r) = &source.secret_key_ref
                    && r.optional != Some(true)
                {
                    self.key(false, &ns, &r.name, vec![r.key.clone()]);
                }
            }
        }
    }

    fn key(&mut self, config_map: bool, ns: &str, name: &str, keys: Vec<String>) {
        if name.is_empty() {
            return;
        }
        let map = if config_map {
            &mut self.config_maps
        } else {
            &mut self.secrets
        };
        map.entry(ns.to_string())
            .or_default()
            .entry(name.to_string())
            .or_default()
            .extend(keys);
    }

    /// Every pod spec of `snapshot`: the pods' and the workloads' templates.
    pub fn of(snapshot: &Snapshot) -> anyhow::Result<Self> {
        let mut refs = References::default();
        for pod in items(snapshot, "pods") {
            if let Some(spec) = pod.get("spec") {
                let spec: PodSpec = serde_json::from_value(spec.clone())?;
                refs.add(text(pod, "/metadata/namespace"), &spec);
            }
        }
        for key in [
            "deployments",
            "replicaSets",
            "daemonSets",
            "statefulSets",
            "jobs",
        ] {
            for w in items(snapshot, key) {
                if let Some(spec) = w.pointer("/spec/template/spec") {
                    let spec: PodSpec = serde_json::from_value(spec.clone())?;
                    refs.add(text(w, "/metadata/namespace"), &spec);
                }
            }
        }
        Ok(refs)
    }
}

/// The ConfigMap with the cluster's CA that every namespace gets.
const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// Creates the ServiceAccounts, ConfigMaps and Secrets pods refer to (empty, by name).
async fn create_references(client: &Client, snapshot: &Snapshot) -> anyhow::Result<()> {
    let refs = References::of(snapshot)?;
    let mut objects: Vec<Value> = Vec::new();
    for (ns, names) in &refs.accounts {
        for name in names {
            objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": ns}}));
        }
    }
    for (kind, map) in [("ConfigMap", &refs.config_maps), ("Secret", &refs.secrets)] {
        for (ns, named) in map {
            for (name, keys) in named {
                // The control plane publishes its own CA in every namespace, as upstream's
                // root-CA publisher does; a placeholder would only be overwritten.
                if kind == "ConfigMap" && name == ROOT_CA_CONFIG_MAP {
                    continue;
                }
                let data: Map<String, Value> = keys
                    .iter()
                    .map(|k| (k.clone(), Value::String(String::new())))
                    .collect();
                objects.push(json!({"apiVersion": "v1", "kind": kind,
                    "metadata": {"name": name, "namespace": ns}, "data": data}));
            }
        }
    }
    stream::iter(objects)
        .map(|o| {
            let client = client.clone();
            async move {
                let kind = text(&o, "/kind");
                let plural = match kind {
                    "ServiceAccount" => "serviceaccounts",
                    "ConfigMap" => "configmaps",
                    _ => "secrets",
                };
                let resource = kube::core::ApiResource::from_gvk_with_plural(
                    &kube::core::GroupVersionKind::gvk("", "v1", kind),
                    plural,
                );
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client, text(&o, "/metadata/namespace"), &resource);
                let body: DynamicObject = serde_json::from_value(o.clone())?;
                match api.create(&PostParams::default(), &body).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(anyhow::Error::from(e).context(format!(
                        "creating {kind} {}/{}",
                        text(&o, "/metadata/namespace"),
                        text(&o, "/metadata/name")
                    ))),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_object_keeps_what_it_says_and_owners_that_are_loaded() {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "d", "uid": "old", "resourceVersion": "9",
                "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 3,
                "labels": {"app": "web"},
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-old",
                     "controller": true},
                    {"apiVersion": "v1", "kind": "Thing", "name": "gone", "uid": "unknown"}]},
            "spec": {"replicas": 3}, "status": {"replicas": 3}});
        let uids = Uids::from([("d-old".to_string(), "d-new".to_string())]);
        assert_eq!(
            fresh(&rs, &uids),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web-1", "namespace": "d", "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                        "name": "web", "uid": "d-new", "controller": true}]},
                "spec": {"replicas": 3}})
        );
        // No owner loaded: no references at all, rather than an empty list.
        let fresh = fresh(&rs, &Uids::new());
        assert!(fresh.pointer("/metadata/ownerReferences").is_none());
    }

    #[test]
    fn a_simulated_node_fits_pods_into_its_allocatable_resources() {
        let node = json!({"metadata": {"name": "n1", "uid": "u", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3800m"},
                "conditions": [{"type": "Ready", "status": "True"}]}});
        let out = simulated(&node, &Uids::new());
        assert_eq!(out["metadata"]["labels"][nodesim::SIMULATED_LABEL], "true");
        assert_eq!(out["metadata"]["labels"]["zone"], "a");
        assert_eq!(out["spec"], node["spec"]);
        assert_eq!(
            out["status"],
            json!({"capacity": {"cpu": "3800m"}, "allocatable": {"cpu": "3800m"}})
        );
        assert!(
            out.pointer("/metadata/annotations").is_none(),
            "a Ready node runs"
        );
        let mut down = node.clone();
        down["status"]["conditions"][0]["status"] = json!("Unknown");
        let out = simulated(&down, &Uids::new());
        assert_eq!(
            out["metadata"]["annotations"][nodesim::HEARTBEAT_ANNOTATION],
            "stopped"
        );
    }

    #[test]
    fn references_are_what_pods_mount_read_and_run_as() {
        let spec: PodSpec = serde_json::from_value(json!({
            "serviceAccountName": "agent",
            "containers": [{"name": "c", "image": "i",
                "envFrom": [{"configMapRef": {"name": "env"}},
                    {"secretRef": {"name": "maybe", "optional": true}}],
                "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}],
            "volumes": [{"name": "v", "configMap": {"name": "conf",
                "items": [{"key": "a.yaml", "path": "a.yaml"}]}}]
        }))
        .expect("spec");
        let mut refs = References::default();
        refs.add("ns", &spec);
        assert_eq!(refs.accounts["ns"], BTreeSet::from(["agent".to_string()]));
        let names = |m: &BTreeMap<String, BTreeSet<String>>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&refs.config_maps["ns"]), vec!["conf", "env"]);
        assert_eq!(
            refs.config_maps["ns"]["conf"],
            BTreeSet::from(["a.yaml".to_string()])
        );
        assert_eq!(names(&refs.secrets["ns"]), vec!["db"]);
        assert_eq!(refs.secrets["ns"]["db"], BTreeSet::from(["pw".to_string()]));
    }
}
