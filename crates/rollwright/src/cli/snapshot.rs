//! `rollwright snapshot`: what a rollout rehearsal needs to know of a real cluster, read with
//! `list` alone and written as one JSON document.
//!
//! It reads the nodes, namespaces, workloads (Deployments, ReplicaSets, DaemonSets, StatefulSets,
//! ControllerRevisions, Jobs), their pods, PodDisruptionBudgets, PriorityClasses, ResourceQuotas
//! and the storage objects (claims, volumes, classes). It never lists Secrets or ConfigMaps, so no
//! secret data can end up in the file. A resource the user may not list (403), or one the
//! cluster does not serve (404), is recorded under `unreadable` with the server's message instead
//! of being guessed; any other failure ends the command.
//!
//! Each pod also gets what the rehearsal derives its timing from, when the pod's own timestamps
//! say so: seconds from scheduling to the first container running, and to Ready.
//!
//! `--from FILE` makes the same document from a cluster recorded with `kubectl get ... -o json`
//! instead (see [`recorded`]): the same kinds under the same keys, the same `-n` scope and the
//! same timings, for a cluster this machine cannot reach or a recording shipped as test data.
//!
//! The document also says how fast the cluster's control plane worked ([`pace`]): the rate its
//! controllers created each workload's pods at in its latest rollout, how soon its scheduler
//! bound them, and, where the history says nothing, which of upstream's defaults it assumes.

pub mod pace;
mod recorded;

use super::kubeconfig::Target;
use anyhow::Context;
use jiff::Timestamp;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The document's `apiVersion` and `kind`.
pub const API_VERSION: &str = "rollwright.io/v1alpha1";
/// See [`API_VERSION`].
pub const KIND: &str = "ClusterSnapshot";

/// `snapshot` flags.
#[derive(clap::Args, Debug)]
pub struct SnapshotArgs {
    /// Read a recorded cluster instead of a live one: the JSON List that `kubectl get
    /// nodes,namespaces,deployments,... -A -o json` prints (Secrets and ConfigMaps in it are
    /// dropped).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub from: Option<PathBuf>,
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then ./.rollwright/kubeconfig).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Only these namespaces' objects (repeat for several; default: every namespace).
    #[arg(short = 'n', long = "namespace")]
    pub namespaces: Vec<String>,
    /// Write the snapshot to this file instead of standard output.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// One kind the snapshot reads.
struct Source {
    /// The key it is stored under in [`Snapshot::objects`].
    key: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
}

const fn source(
    key: &'static str,
    (group, version): (&'static str, &'static str),
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Source {
    Source {
        key,
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

const CORE: (&str, &str) = ("", "v1");
const APPS: (&str, &str) = ("apps", "v1");

/// What is read, in the order it is read. Secrets and ConfigMaps are not among them on purpose.
const SOURCES: [Source; 15] = [
    source("nodes", CORE, "Node", "nodes", false),
    source("namespaces", CORE, "Namespace", "namespaces", false),
    source("deployments", APPS, "Deployment", "deployments", true),
    source("replicaSets", APPS, "ReplicaSet", "replicasets", true),
    source("daemonSets", APPS, "DaemonSet", "daemonsets", true),
    source("statefulSets", APPS, "StatefulSet", "statefulsets", true),
    source(
        "controllerRevisions",
        APPS,
        "ControllerRevision",
        "controllerrevisions",
        true,
    ),
    source("jobs", ("batch", "v1"), "Job", "jobs", true),
    source("pods", CORE, "Pod", "pods", true),
    source(
        "podDisruptionBudgets",
        ("policy", "v1"),
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    source(
        "priorityClasses",
        ("scheduling.k8s.io", "v1"),
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    source(
        "resourceQuotas",
        CORE,
        "ResourceQuota",
        "resourcequotas",
        true,
    ),
    source(
        "persistentVolumeClaims",
        CORE,
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    source(
        "persistentVolumes",
        CORE,
        "PersistentVolume",
        "persistentvolumes",
        false,
    ),
    source(
        "storageClasses",
        ("storage.k8s.io", "v1"),
        "StorageClass",
        "storageclasses",
        false,
    ),
];

/// The snapshot document.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// [`API_VERSION`].
    pub api_version: String,
    /// [`KIND`].
    pub kind: String,
    /// When the reading started (with `--from`, the reading of the recording).
    pub taken_at: Timestamp,
    /// The API server it was read from (with `--from`, the recording's path as given).
    pub server: String,
    /// The namespaces asked for; empty means all.
    pub namespaces: Vec<String>,
    /// The objects by kind (see [`SOURCES`]), each list in the server's order, without
    /// `metadata.managedFields` (bookkeeping a rehearsal never reads).
    pub objects: Map<String, Value>,
    /// Per pod (`namespace/name`), the timing its timestamps show.
    pub timings: Map<String, Value>,
    /// What could not be read, and the server's reason.
    pub unreadable: Vec<Unreadable>,
    /// The control plane's pace, measured from the objects ([`pace::measure`]). Absent from
    /// snapshots written before it was measured; they still load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<pace::Pace>,
}

/// A resource the snapshot could not read.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Unreadable {
    /// `plural.group` (core resources: the plural).
    pub resource: String,
    /// The namespace it was read in, if one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The server's message.
    pub reason: String,
}

/// How long a pod took, by its own timestamps.
#[derive(Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodTiming {
    /// From `PodScheduled` to the latest start of its containers' current run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_after_seconds: Option<f64>,
    /// From `PodScheduled` to `Ready` (only when it is Ready now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_after_seconds: Option<f64>,
}

/// Runs `rollwright snapshot`.
pub async fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    let snapshot = match &args.from {
        Some(file) => recorded::read(file, &args.namespaces)?,
        None => {
            let target = Target {
                kubeconfig: args.kubeconfig.clone(),
                context: args.context.clone(),
                ..Default::default()
            };
            let session = target.connect().await?;
            take(&session.client, &session.server, &args.namespaces).await?
        }
    };
    let text = serde_json::to_string_pretty(&snapshot)?;
    match &args.output {
        Some(path) => std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => println!("{text}"),
    }
    Ok(())
}

/// Reads the cluster `client` reaches (`namespaces` only, or all of them when empty).
pub async fn take(
    client: &kube::Client,
    server: &str,
    namespaces: &[String],
) -> anyhow::Result<Snapshot> {
    let taken_at = Timestamp::now();
    let mut objects = Map::new();
    let mut unreadable = Vec::new();
    for source in &SOURCES {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(source.group, source.version, source.kind),
            source.plural,
        );
        // Cluster-scoped kinds are read whole, except namespaces themselves when some are asked.
        let scopes: Vec<Option<&str>> = if source.namespaced && !namespaces.is_empty() {
            namespaces.iter().map(|n| Some(n.as_str())).collect()
        } else {
            vec![None]
        };
        let mut items = Vec::new();
        for scope in scopes {
            let api: kube::Api<DynamicObject> = match scope {
                Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &resource),
                None => kube::Api::all_with(client.clone(), &resource),
            };
            match api.list(&Default::default()).await {
                Ok(list) => items.extend(list.items.into_iter().map(|o| plain(o, source))),
                Err(kube::Error::Api(status)) if matches!(status.code, 403 | 404) => {
                    unreadable.push(Unreadable {
                        resource: resource_name(source),
                        namespace: scope.map(str::to_string),
                        reason: status.message.clone(),
                    });
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot list {} on {server}", resource_name(source))
                    });
                }
            }
        }
        items.retain(|item| in_scope(source, item, namespaces));
        objects.insert(source.key.to_string(), Value::Array(items));
    }
    Ok(document(taken_at, server, namespaces, objects, unreadable))
}

/// Whether `item`, one of `source`'s, belongs in a snapshot of `namespaces` (all when empty):
/// a namespaced object in one of them, a namespace among them, or any cluster-scoped object.
fn in_scope(source: &Source, item: &Value, namespaces: &[String]) -> bool {
    let field = match (source.key, source.namespaced) {
        _ if namespaces.is_empty() => return true,
        ("namespaces", _) => "/metadata/name",
        (_, true) => "/metadata/namespace",
        (_, false) => return true,
    };
    item.pointer(field)
        .and_then(Value::as_str)
        .is_some_and(|name| namespaces.iter().any(|n| n == name))
}

/// The document for `objects` (keyed as [`SOURCES`]), with the pods' timings: what a live
/// reading and a recorded one both end in.
fn document(
    taken_at: Timestamp,
    server: &str,
    namespaces: &[String],
    objects: Map<String, Value>,
    unreadable: Vec<Unreadable>,
) -> Snapshot {
    let timings = objects
        .get("pods")
        .and_then(Value::as_array)
        .map(|pods| timings_of(pods))
        .unwrap_or_default();
    let control_plane = Some(pace::measure(&objects));
    Snapshot {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        taken_at,
        server: server.to_string(),
        namespaces: namespaces.to_vec(),
        objects,
        timings,
        unreadable,
        control_plane,
    }
}

/// The API resource the snapshot stores under `key` (`"pods"`, `"replicaSets"`...), and whether
/// it is namespaced: what a rehearsal creates the objects again with.
pub fn resource_of(key: &str) -> Option<(ApiResource, bool)> {
    let source = SOURCES.iter().find(|s| s.key == key)?;
    let gvk = GroupVersionKind::gvk(source.group, source.version, source.kind);
    Some((
        ApiResource::from_gvk_with_plural(&gvk, source.plural),
        source.namespaced,
    ))
}

/// `plural.group`, as kubectl names a resource in messages.
fn resource_name(source: &Source) -> String {
    if source.group.is_empty() {
        source.plural.to_string()
    } else {
        format!("{}.{}", source.plural, source.group)
    }
}

/// `group/version` (core: the version), as an object's `apiVersion` says it.
fn api_version(source: &Source) -> String {
    if source.group.is_empty() {
        source.version.to_string()
    } else {
        format!("{}/{}", source.group, source.version)
    }
}

/// The object as JSON with its type filled in (lists leave it out) and no managed fields.
fn plain(mut object: DynamicObject, source: &Source) -> Value {
    object.metadata.managed_fields = None;
    let mut value = serde_json::to_value(&object).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(api_version(source)));
        map.insert("kind".into(), Value::String(source.kind.to_string()));
    }
    value
}

/// The timings of the pods that have any, keyed `namespace/name`.
pub fn timings_of(pods: &[Value]) -> Map<String, Value> {
    pods.iter()
        .filter_map(|pod| {
            let timing = timing(pod);
            if timing.started_after_seconds.is_none() && timing.ready_after_seconds.is_none() {
                return None;
            }
            let meta = pod.get("metadata")?;
            let key = format!(
                "{}/{}",
                meta.get("namespace")?.as_str()?,
                meta.get("name")?.as_str()?
            );
            Some((key, serde_json::to_value(timing).ok()?))
        })
        .collect()
}

/// One pod's timing: scheduled → running and scheduled → Ready, from its conditions and its
/// containers' `state.running.startedAt`. A clock skew that would make either negative (the
/// kubelet's clock behind the scheduler's) gives nothing rather than a wrong figure.
pub fn timing(pod: &Value) -> PodTiming {
    let condition = |kind: &str| {
        pod.pointer("/status/conditions")
            .and_then(Value::as_array)?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    };
    let at = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(|s| s.parse::<Timestamp>().ok())
    };
    let Some(scheduled) = condition("PodScheduled")
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|c| at(c.get("lastTransitionTime")))
    else {
        return PodTiming::default();
    };
    let since = |t: Timestamp| {
        let seconds = t.duration_since(scheduled).as_secs_f64();
        (seconds >= 0.0).then_some(seconds)
    };
    let started = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|statuses| {
            statuses
                .iter()
                .map(|s| at(s.pointer("/state/running/startedAt")))
                .collect::<Option<Vec<_>>>()
        })
        .and_then(|starts| starts.into_iter().max())
        .and_then(since);
    let ready = condition("Ready")
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|c| at(c.get("lastTransitionTime")))
        .and_then(since);
    PodTiming {
        started_after_seconds: started,
        ready_after_seconds: ready,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(conditions: Value, containers: Value) -> Value {
        json!({
            "metadata": {"namespace": "shop", "name": "web-1"},
            "status": {"conditions": conditions, "containerStatuses": containers},
        })
    }

    #[test]
    fn timing_is_measured_from_scheduling_to_running_and_ready() {
        let p = pod(
            json!([
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T10:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T10:00:07Z"},
            ]),
            json!([
                {"name": "a", "state": {"running": {"startedAt": "2026-01-01T10:00:02Z"}}},
                {"name": "b", "state": {"running": {"startedAt": "2026-01-01T10:00:03Z"}}},
            ]),
        );
        assert_eq!(
            timing(&p),
            PodTiming {
                started_after_seconds: Some(3.0),
                ready_after_seconds: Some(7.0)
            }
        );
        let all = timings_of(&[p]);
        assert_eq!(
            all["shop/web-1"],
            json!({"startedAfterSeconds": 3.0, "readyAfterSeconds": 7.0})
        );
    }

    #[test]
    fn what_the_timestamps_do_not_say_is_left_out() {
        // Not Ready, one container waiting: no ready time and no start time.
        let waiting = pod(
            json!([
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T10:00:00Z"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T10:00:00Z"},
            ]),
            json!([
                {"name": "a", "state": {"running": {"startedAt": "2026-01-01T10:00:02Z"}}},
                {"name": "b", "state": {"waiting": {"reason": "ImagePullBackOff"}}},
            ]),
        );
        assert_eq!(timing(&waiting), PodTiming::default());
        assert!(timings_of(&[waiting]).is_empty());
        // A kubelet clock behind the scheduler's: no negative figure.
        let skewed = pod(
            json!([
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T10:00:05Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T10:00:04Z"},
            ]),
            json!([]),
        );
        assert_eq!(timing(&skewed).ready_after_seconds, None);
        // Never scheduled: nothing.
        let pending = pod(json!([]), json!([]));
        assert_eq!(timing(&pending).started_after_seconds, None);
    }

    #[test]
    fn a_snapshot_without_the_control_planes_pace_still_loads_and_a_new_one_keeps_it() {
        // As written before the pace was measured.
        let old = json!({"apiVersion": API_VERSION, "kind": KIND,
            "takenAt": "2026-01-01T10:00:00Z", "server": "https://x", "namespaces": [],
            "objects": {"pods": []}, "timings": {}, "unreadable": []});
        let loaded: Snapshot = serde_json::from_value(old.clone()).expect("an old snapshot loads");
        assert_eq!(loaded.control_plane, None);
        // Written again, it says nothing it did not measure.
        assert_eq!(serde_json::to_value(&loaded).expect("serializes"), old);
        let new = document(
            Timestamp::UNIX_EPOCH,
            "https://x",
            &[],
            Map::new(),
            Vec::new(),
        );
        let pace = new.control_plane.clone().expect("measured");
        assert_eq!(pace.controllers.basis, pace::Basis::Assumed);
        let text = serde_json::to_string(&new).expect("serializes");
        let back: Snapshot = serde_json::from_str(&text).expect("loads");
        assert_eq!(back, new);
    }

    #[test]
    fn secrets_and_config_maps_are_never_read() {
        for source in &SOURCES {
            assert!(
                !matches!(source.plural, "secrets" | "configmaps"),
                "{}",
                source.plural
            );
        }
    }
}
