//! Server-side printing: `meta.k8s.io/v1` Tables, as upstream's printers produce them.
//!
//! `kubectl get` asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever
//! columns the server sends, so the columns and cell formats here are upstream's
//! (pkg/printers/internalversion) for every served kind. Like upstream's server, every row carries
//! all cells, the `-o wide` ones (priority 1) included; kubectl hides those unless asked.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::openapi::property_description;
use crate::resource::ResourceDef;

/// The `includeObject` query parameter: how much of each object a row embeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A `PartialObjectMetadata` (upstream's default): enough for kubectl's `--show-labels` and
    /// name lookups without shipping whole objects.
    #[default]
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter's value; `None` for anything upstream rejects.
    pub fn parse(s: &str) -> Option<IncludeObject> {
        match s {
            "None" => Some(IncludeObject::None),
            "Metadata" | "" => Some(IncludeObject::Metadata),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }
}

/// Renders `objects` of resource `def` as a Table at time `now` (ages are relative to it);
/// `list_meta` becomes the table's metadata (resourceVersion, continue).
pub fn table(
    def: &ResourceDef,
    objects: &[&Value],
    now: Timestamp,
    include_object: IncludeObject,
    list_meta: Value,
) -> Value {
    let columns = columns(def);
    let column_definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.ty,
                "format": c.format,
                "description": c.description(),
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let (cells, conditions) = cells(def, obj, now);
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            if let Some(c) = conditions {
                row.insert("conditions".into(), c);
            }
            match include_object {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert(
                        "object".into(),
                        json!({
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                        }),
                    );
                }
                IncludeObject::Object => {
                    row.insert("object".into(), (*obj).clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

/// Where a column's description comes from.
enum Desc {
    /// A fixed text.
    Text(&'static str),
    /// Upstream's field doc: (component schema, property).
    Field(&'static str, &'static str),
}

struct Column {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: u8,
    desc: Desc,
}

impl Column {
    fn description(&self) -> &'static str {
        match self.desc {
            Desc::Text(t) => t,
            Desc::Field(s, p) => property_description(s, p).unwrap_or(""),
        }
    }
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

const fn col(name: &'static str, ty: &'static str, priority: u8, desc: Desc) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority,
        desc,
    }
}

const NAME: Column = Column {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    desc: Desc::Field(META, "name"),
};
const AGE: Column = col("Age", "string", 0, Desc::Field(META, "creationTimestamp"));
const CONTAINERS: Column = col(
    "Containers",
    "string",
    1,
    Desc::Text("Names of each container in the template."),
);
const IMAGES: Column = col(
    "Images",
    "string",
    1,
    Desc::Text("Images referenced by each container in the template."),
);

fn columns(def: &ResourceDef) -> Vec<Column> {
    use Desc::{Field, Text};
    match (def.group, def.kind) {
        ("", "Pod") => vec![
            NAME,
            col(
                "Ready",
                "string",
                0,
                Text("The aggregate readiness state of this pod for accepting traffic."),
            ),
            col(
                "Status",
                "string",
                0,
                Text("The aggregate status of the containers in this pod."),
            ),
            col(
                "Restarts",
                "string",
                0,
                Text(
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
            ),
            AGE,
            col(
                "IP",
                "string",
                1,
                Field("io.k8s.api.core.v1.PodStatus", "podIP"),
            ),
            col(
                "Node",
                "string",
                1,
                Field("io.k8s.api.core.v1.PodSpec", "nodeName"),
            ),
            col(
                "Nominated Node",
                "string",
                1,
                Field("io.k8s.api.core.v1.PodStatus", "nominatedNodeName"),
            ),
            col(
                "Readiness Gates",
                "string",
                1,
                Field("io.k8s.api.core.v1.PodSpec", "readinessGates"),
            ),
        ],
        ("apps", "Deployment") => vec![
            NAME,
            col(
                "Ready",
                "string",
                0,
                Text("Number of the pod with ready state"),
            ),
            col(
                "Up-to-date",
                "string",
                0,
                Field("io.k8s.api.apps.v1.DeploymentStatus", "updatedReplicas"),
            ),
            col(
                "Available",
                "string",
                0,
                Field("io.k8s.api.apps.v1.DeploymentStatus", "availableReplicas"),
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            col(
                "Selector",
                "string",
                1,
                Field("io.k8s.api.apps.v1.DeploymentSpec", "selector"),
            ),
        ],
        ("apps", "ReplicaSet") => vec![
            NAME,
            col(
                "Desired",
                "integer",
                0,
                Field("io.k8s.api.apps.v1.ReplicaSetSpec", "replicas"),
            ),
            col(
                "Current",
                "integer",
                0,
                Field("io.k8s.api.apps.v1.ReplicaSetStatus", "replicas"),
            ),
            col(
                "Ready",
                "integer",
                0,
                Field("io.k8s.api.apps.v1.ReplicaSetStatus", "readyReplicas"),
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            col(
                "Selector",
                "string",
                1,
                Field("io.k8s.api.apps.v1.ReplicaSetSpec", "selector"),
            ),
        ],
        ("apps", "DaemonSet") => vec![
            NAME,
            col(
                "Desired",
                "integer",
                0,
                Field(
                    "io.k8s.api.apps.v1.DaemonSetStatus",
                    "desiredNumberScheduled",
                ),
            ),
            col(
                "Current",
                "integer",
                0,
                Field(
                    "io.k8s.api.apps.v1.DaemonSetStatus",
                    "currentNumberScheduled",
                ),
            ),
            col(
                "Ready",
                "integer",
                0,
                Field("io.k8s.api.apps.v1.DaemonSetStatus", "numberReady"),
            ),
            col(
                "Up-to-date",
                "integer",
                0,
                Field(
                    "io.k8s.api.apps.v1.DaemonSetStatus",
                    "updatedNumberScheduled",
                ),
            ),
            col(
                "Available",
                "integer",
                0,
                Field("io.k8s.api.apps.v1.DaemonSetStatus", "numberAvailable"),
            ),
            col(
                "Node Selector",
                "string",
                0,
                Field("io.k8s.api.core.v1.PodSpec", "nodeSelector"),
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            col(
                "Selector",
                "string",
                1,
                Field("io.k8s.api.apps.v1.DaemonSetSpec", "selector"),
            ),
        ],
        ("apps", "StatefulSet") => vec![
            NAME,
            col(
                "Ready",
                "string",
                0,
                Text("Number of the pod with ready state"),
            ),
            AGE,
            CONTAINERS,
            IMAGES,
        ],
        ("apps", "ControllerRevision") => vec![
            NAME,
            col("Controller", "string", 0, Text("Controller of the object")),
            col(
                "Revision",
                "string",
                0,
                Field("io.k8s.api.apps.v1.ControllerRevision", "revision"),
            ),
            AGE,
        ],
        ("", "Node") => vec![
            NAME,
            col("Status", "string", 0, Text("The status of the node")),
            col("Roles", "string", 0, Text("The roles of the node")),
            AGE,
            col(
                "Version",
                "string",
                0,
                Field("io.k8s.api.core.v1.NodeSystemInfo", "kubeletVersion"),
            ),
            col(
                "Internal-IP",
                "string",
                1,
                Field("io.k8s.api.core.v1.NodeStatus", "addresses"),
            ),
            col(
                "External-IP",
                "string",
                1,
                Field("io.k8s.api.core.v1.NodeStatus", "addresses"),
            ),
            col(
                "OS-Image",
                "string",
                1,
                Field("io.k8s.api.core.v1.NodeSystemInfo", "osImage"),
            ),
            col(
                "Kernel-Version",
                "string",
                1,
                Field("io.k8s.api.core.v1.NodeSystemInfo", "kernelVersion"),
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                Field(
                    "io.k8s.api.core.v1.NodeSystemInfo",
                    "containerRuntimeVersion",
                ),
            ),
        ],
        ("", "Namespace") => {
            vec![
                NAME,
                col("Status", "string", 0, Text("The status of the namespace")),
                AGE,
            ]
        }
        ("", "Event") => vec![
            col(
                "Last Seen",
                "string",
                0,
                Field("io.k8s.api.core.v1.Event", "lastTimestamp"),
            ),
            col(
                "Type",
                "string",
                0,
                Field("io.k8s.api.core.v1.Event", "type"),
            ),
            col(
                "Reason",
                "string",
                0,
                Field("io.k8s.api.core.v1.Event", "reason"),
            ),
            col(
                "Object",
                "string",
                0,
                Field("io.k8s.api.core.v1.Event", "involvedObject"),
            ),
            col(
                "Subobject",
                "string",
                1,
                Field("io.k8s.api.core.v1.ObjectReference", "fieldPath"),
            ),
            col(
                "Source",
                "string",
                1,
                Field("io.k8s.api.core.v1.Event", "source"),
            ),
            col(
                "Message",
                "string",
                0,
                Field("io.k8s.api.core.v1.Event", "message"),
            ),
            col(
                "First Seen",
                "string",
                1,
                Field("io.k8s.api.core.v1.Event", "firstTimestamp"),
            ),
            col(
                "Count",
                "string",
                1,
                Field("io.k8s.api.core.v1.Event", "count"),
            ),
            Column {
                name: "Name",
                ty: "string",
                format: "name",
                priority: 1,
                desc: Field(META, "name"),
            },
        ],
        ("coordination.k8s.io", "Lease") => vec![
            NAME,
            col(
                "Holder",
                "string",
                0,
                Field("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity"),
            ),
            AGE,
        ],
        ("", "PersistentVolumeClaim") => vec![
            NAME,
            col(
                "Status",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "phase"),
            ),
            col(
                "Volume",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeClaimSpec", "volumeName"),
            ),
            col(
                "Capacity",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "capacity"),
            ),
            col(
                "Access Modes",
                "string",
                0,
                Field(
                    "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
                    "accessModes",
                ),
            ),
            col("StorageClass", "string", 0, Text("StorageClass of the pvc")),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                Text("VolumeAttributesClass of the pvc"),
            ),
            AGE,
            col(
                "VolumeMode",
                "string",
                1,
                Field("io.k8s.api.core.v1.PersistentVolumeClaimSpec", "volumeMode"),
            ),
        ],
        ("", "PersistentVolume") => vec![
            NAME,
            col(
                "Capacity",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeSpec", "capacity"),
            ),
            col(
                "Access Modes",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeSpec", "accessModes"),
            ),
            col(
                "Reclaim Policy",
                "string",
                0,
                Field(
                    "io.k8s.api.core.v1.PersistentVolumeSpec",
                    "persistentVolumeReclaimPolicy",
                ),
            ),
            col(
                "Status",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeStatus", "phase"),
            ),
            col(
                "Claim",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeSpec", "claimRef"),
            ),
            col("StorageClass", "string", 0, Text("StorageClass of the pv")),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                Text("VolumeAttributesClass of the pv"),
            ),
            col(
                "Reason",
                "string",
                0,
                Field("io.k8s.api.core.v1.PersistentVolumeStatus", "reason"),
            ),
            AGE,
            col(
                "VolumeMode",
                "string",
                1,
                Field("io.k8s.api.core.v1.PersistentVolumeSpec", "volumeMode"),
            ),
        ],
        ("storage.k8s.io", "StorageClass") => vec![
            NAME,
            col(
                "Provisioner",
                "string",
                0,
                Field("io.k8s.api.storage.v1.StorageClass", "provisioner"),
            ),
            col(
                "ReclaimPolicy",
                "string",
                0,
                Field("io.k8s.api.storage.v1.StorageClass", "reclaimPolicy"),
            ),
            col(
                "VolumeBindingMode",
                "string",
                0,
                Field("io.k8s.api.storage.v1.StorageClass", "volumeBindingMode"),
            ),
            col(
                "AllowVolumeExpansion",
                "string",
                0,
                Field("io.k8s.api.storage.v1.StorageClass", "allowVolumeExpansion"),
            ),
            AGE,
        ],
        // Upstream's fallback for kinds without a printer.
        _ => vec![
            NAME,
            col("Created At", "date", 0, Field(META, "creationTimestamp")),
        ],
    }
}

/// The cells of one row and, for finished pods, the row conditions.
fn cells(def: &ResourceDef, obj: &Value, now: Timestamp) -> (Vec<Value>, Option<Value>) {
    let name = json!(s(obj, &["metadata", "name"]));
    let age = json!(since(obj.pointer("/metadata/creationTimestamp"), now));
    let template_spec = &obj["spec"]["template"]["spec"];
    let cells = match (def.group, def.kind) {
        ("", "Pod") => return pod_cells(obj, now),
        ("apps", "Deployment") => {
            let (names, images) = container_cells(template_spec);
            let selector = match obj["spec"].get("selector") {
                None | Some(Value::Null) => String::new(),
                Some(sel) => selector_string(sel).unwrap_or_else(|| "<invalid>".into()),
            };
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    i(obj, &["status", "readyReplicas"]),
                    replicas(obj)
                )),
                json!(i(obj, &["status", "updatedReplicas"])),
                json!(i(obj, &["status", "availableReplicas"])),
                age,
                json!(names),
                json!(images),
                json!(selector),
            ]
        }
        ("apps", "ReplicaSet") => {
            let (names, images) = container_cells(template_spec);
            vec![
                name,
                json!(replicas(obj)),
                json!(i(obj, &["status", "replicas"])),
                json!(i(obj, &["status", "readyReplicas"])),
                age,
                json!(names),
                json!(images),
                json!(format_label_selector(obj["spec"].get("selector"))),
            ]
        }
        ("apps", "DaemonSet") => {
            let (names, images) = container_cells(template_spec);
            let st = |f: &str| json!(i(obj, &["status", f]));
            vec![
                name,
                st("desiredNumberScheduled"),
                st("currentNumberScheduled"),
                st("numberReady"),
                st("updatedNumberScheduled"),
                st("numberAvailable"),
                json!(format_labels(template_spec.get("nodeSelector"))),
                age,
                json!(names),
                json!(images),
                json!(format_label_selector(obj["spec"].get("selector"))),
            ]
        }
        ("apps", "StatefulSet") => {
            let (names, images) = container_cells(template_spec);
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    i(obj, &["status", "readyReplicas"]),
                    replicas(obj)
                )),
                age,
                json!(names),
                json!(images),
            ]
        }
        ("apps", "ControllerRevision") => {
            vec![
                name,
                json!(controller_name(obj)),
                json!(i(obj, &["revision"])),
                age,
            ]
        }
        ("", "Node") => node_cells(obj, name, age),
        ("", "Namespace") => vec![name, json!(s(obj, &["status", "phase"])), age],
        ("", "Event") => event_cells(obj, name, now),
        ("coordination.k8s.io", "Lease") => {
            vec![name, json!(s(obj, &["spec", "holderIdentity"])), age]
        }
        ("", "PersistentVolumeClaim") => pvc_cells(obj, name, age),
        ("", "PersistentVolume") => pv_cells(obj, name, age),
        ("storage.k8s.io", "StorageClass") => storage_class_cells(obj, age),
        _ => vec![
            name,
            obj.pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
        ],
    };
    (cells, None)
}

// ---------------------------------------------------------------------------------------------
// Field access.

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn i(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `spec.replicas`, which defaulting sets to 1 when absent.
fn replicas(obj: &Value) -> i64 {
    get(obj, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn timestamp(v: Option<&Value>) -> Option<Timestamp> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
}

/// Upstream's `translateTimestampSince`: the age of a timestamp, `<unknown>` when unset.
fn since(v: Option<&Value>, now: Timestamp) -> String {
    match timestamp(v) {
        Some(t) => human_duration_since(t, now),
        None => "<unknown>".into(),
    }
}

fn human_duration_since(t: Timestamp, now: Timestamp) -> String {
    let nanos = now.as_nanosecond() - t.as_nanosecond();
    human_duration(i64::try_from(nanos).unwrap_or(i64::MAX))
}

/// Upstream's `duration.HumanDuration` over a duration in nanoseconds: about two significant
/// figures ("5s", "3m2s", "10m", "2d3h", "3y45d"), with a two-second allowance for clock skew.
pub fn human_duration(nanos: i64) -> String {
    const SEC: i64 = 1_000_000_000;
    let seconds = nanos / SEC; // truncates toward zero, like Go's int(d.Seconds())
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / (60 * SEC);
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / (3600 * SEC);
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// Upstream's `layoutContainerCells`: names and images, comma-joined.
fn container_cells(pod_spec: &Value) -> (String, String) {
    let cs = arr(pod_spec, &["containers"]);
    let names: Vec<&str> = cs.iter().map(|c| s(c, &["name"])).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// `labels.FormatLabels`: `k=v` pairs sorted by key, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let pairs: BTreeMap<&str, &str> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A LabelSelector as upstream's `labels.Selector.String()`: requirements sorted by key, `k=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; `None` when the selector is invalid.
fn selector_string(sel: &Value) -> Option<String> {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str()?)));
        }
    }
    for e in arr(sel, &["matchExpressions"]) {
        let key = s(e, &["key"]);
        let mut values: Vec<&str> = arr(e, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match s(e, &["operator"]) {
            "In" | "NotIn" if values.is_empty() => return None,
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" | "DoesNotExist" if !values.is_empty() => return None,
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: like [`selector_string`] but `<none>` when empty and `<error>`
/// when invalid.
fn format_label_selector(sel: Option<&Value>) -> String {
    match sel.filter(|v| !v.is_null()) {
        None => "<none>".into(),
        Some(sel) => match selector_string(sel) {
            None => "<error>".into(),
            Some(s) if s.is_empty() => "<none>".into(),
            Some(s) => s,
        },
    }
}

/// `daemonset.apps/name` from the controller owner reference, `<none>` without one.
fn controller_name(obj: &Value) -> String {
    let Some(owner) = arr(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|o| o["controller"] == json!(true))
    else {
        return "<none>".into();
    };
    let api_version = s(owner, &["apiVersion"]);
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = s(owner, &["kind"]);
    let name = s(owner, &["name"]);
    if kind.is_empty() && group.is_empty() {
        return name.to_string();
    }
    let gk = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    format!("{}/{name}", gk.to_lowercase())
}

// ---------------------------------------------------------------------------------------------
// Pods.

fn pod_cells(pod: &Value, now: Timestamp) -> (Vec<Value>, Option<Value>) {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let mut restarts: i64 = 0;
    let mut restartable_restarts: i64 = 0;
    let mut total = arr(spec, &["containers"]).len();
    let mut ready = 0usize;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_restart: Option<Timestamp> = None;

    let phase = s(status, &["phase"]);
    let mut reason = phase.to_string();
    if !s(status, &["reason"]).is_empty() {
        reason = s(status, &["reason"]).to_string();
    }
    let conditions = arr(status, &["conditions"]);
    if conditions
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let row_conditions = match phase {
        "Succeeded" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully."}]),
        ),
        "Failed" => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Failed",
            "message": "The pod failed."}]),
        ),
        _ => None,
    };

    let init_specs = arr(spec, &["initContainers"]);
    let restartable: BTreeSet<&str> = init_specs
        .iter()
        .filter(|c| s(c, &["restartPolicy"]) == "Always")
        .map(|c| s(c, &["name"]))
        .collect();
    total += restartable.len();

    let later = |cur: Option<Timestamp>, t: Option<Timestamp>| match (cur, t) {
        (Some(c), Some(t)) if t > c => Some(t),
        (None, t) => t,
        (c, _) => c,
    };

    let mut initializing = false;
    for (idx, c) in arr(status, &["initContainerStatuses"]).iter().enumerate() {
        let count = i(c, &["restartCount"]);
        restarts += count;
        let finished = timestamp(get(c, &["lastState", "terminated", "finishedAt"]));
        last_restart = later(last_restart, finished);
        let is_restartable = restartable.contains(s(c, &["name"]));
        if is_restartable {
            restartable_restarts += count;
            last_restartable_restart = later(last_restartable_restart, finished);
        }
        let terminated = get(c, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting = get(c, &["state", "waiting"]).filter(|t| t.is_object());
        if terminated.is_some_and(|t| i(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_restartable && c["started"] == json!(true) {
            if c["ready"] == json!(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = if s(t, &["reason"]).is_empty() {
                if i(t, &["signal"]) != 0 {
                    format!("Init:Signal:{}", i(t, &["signal"]))
                } else {
                    format!("Init:ExitCode:{}", i(t, &["exitCode"]))
                }
            } else {
                format!("Init:{}", s(t, &["reason"]))
            };
        } else if let Some(w) = waiting
            .filter(|w| !s(w, &["reason"]).is_empty() && s(w, &["reason"]) != "PodInitializing")
        {
            reason = format!("Init:{}", s(w, &["reason"]));
        } else {
            reason = format!("Init:{idx}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }

    let initialized = conditions
        .iter()
        .find(|c| c["type"] == "Initialized")
        .is_some_and(|c| c["status"] == "True");
    if !initializing || initialized {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for c in arr(status, &["containerStatuses"]).iter().rev() {
            restarts += i(c, &["restartCount"]);
            last_restart = later(
                last_restart,
                timestamp(get(c, &["lastState", "terminated", "finishedAt"])),
            );
            let waiting = get(c, &["state", "waiting"]).filter(|t| t.is_object());
            let terminated = get(c, &["state", "terminated"]).filter(|t| t.is_object());
            let running = get(c, &["state", "running"]).filter(|t| t.is_object());
            if let Some(w) = waiting.filter(|w| !s(w, &["reason"]).is_empty()) {
                reason = s(w, &["reason"]).to_string();
            } else if let Some(t) = terminated {
                reason = if !s(t, &["reason"]).is_empty() {
                    s(t, &["reason"]).to_string()
                } else if i(t, &["signal"]) != 0 {
                    format!("Signal:{}", i(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", i(t, &["exitCode"]))
                };
            } else if c["ready"] == json!(true) && running.is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if pod_ready {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }

    let deleting = get(pod, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null());
    if deleting && s(status, &["reason"]) == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".into();
    }

    let restarts_str = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration_since(t, now)),
        _ => restarts.to_string(),
    };

    let none_if_empty = |v: &str| {
        if v.is_empty() {
            "<none>".to_string()
        } else {
            v.to_string()
        }
    };
    let ip = arr(status, &["podIPs"])
        .first()
        .map(|p| s(p, &["ip"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| s(status, &["podIP"]));
    let gates = arr(spec, &["readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_count = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .find(|c| c["type"] == g["conditionType"])
                    .is_some_and(|c| c["status"] == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };

    let cells = vec![
        json!(s(pod, &["metadata", "name"])),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_str),
        json!(since(pod.pointer("/metadata/creationTimestamp"), now)),
        json!(none_if_empty(ip)),
        json!(none_if_empty(s(spec, &["nodeName"]))),
        json!(none_if_empty(s(status, &["nominatedNodeName"]))),
        json!(readiness_gates),
    ];
    (cells, row_conditions)
}

// ---------------------------------------------------------------------------------------------
// Nodes, events, claims.

fn node_cells(node: &Value, name: Value, age: Value) -> Vec<Value> {
    // The last condition of each type wins, like upstream's map.
    let ready = arr(node, &["status", "conditions"])
        .iter()
        .rfind(|c| c["type"] == "Ready");
    let mut status: Vec<&str> = match ready {
        Some(c) if c["status"] == "True" => vec!["Ready"],
        Some(_) => vec!["NotReady"],
        None => vec!["Unknown"],
    };
    if get(node, &["spec", "unschedulable"]) == Some(&json!(true)) {
        status.push("SchedulingDisabled");
    }
    let mut roles: BTreeSet<&str> = BTreeSet::new();
    if let Some(labels) = get(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role);
                }
            } else if k == "kubernetes.io/role"
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v);
            }
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };
    let address = |ty: &str| {
        arr(node, &["status", "addresses"])
            .iter()
            .find(|a| a["type"] == ty)
            .map(|a| s(a, &["address"]).to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let info = |f: &str| {
        let v = s(node, &["status", "nodeInfo", f]);
        if v.is_empty() {
            "<unknown>".to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        name,
        json!(status.join(",")),
        json!(roles),
        age,
        json!(s(node, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn event_cells(ev: &Value, name: Value, now: Timestamp) -> Vec<Value> {
    let first = match timestamp(ev.get("firstTimestamp")) {
        Some(t) => human_duration_since(t, now),
        None => since(ev.get("eventTime"), now),
    };
    let mut last = match timestamp(ev.get("lastTimestamp")) {
        Some(t) => human_duration_since(t, now),
        None => first.clone(),
    };
    let mut count = i(ev, &["count"]);
    if let Some(series) = ev.get("series").filter(|s| s.is_object()) {
        last = since(series.get("lastObservedTime"), now);
        count = i(series, &["count"]);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(ev, &["involvedObject", "kind"]).to_lowercase();
    let obj_name = s(ev, &["involvedObject", "name"]);
    let target = if obj_name.is_empty() {
        kind
    } else {
        format!("{kind}/{obj_name}")
    };
    let component = Some(s(ev, &["source", "component"]))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| s(ev, &["reportingComponent"]));
    let host = Some(s(ev, &["source", "host"]))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| s(ev, &["reportingInstance"]));
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(s(ev, &["type"])),
        json!(s(ev, &["reason"])),
        json!(target),
        json!(s(ev, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(s(ev, &["message"]).trim()),
        json!(first),
        json!(count),
        name,
    ]
}

/// `GetAccessModesAsString`: the short forms in upstream's fixed order, duplicates dropped.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v == m);
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(long, _)| has(long))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn pvc_cells(pvc: &Value, name: Value, age: Value) -> Vec<Value> {
    let deleting = get(pvc, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null());
    let phase = if deleting {
        "Terminating"
    } else {
        s(pvc, &["status", "phase"])
    };
    let volume = s(pvc, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let cap = get(pvc, &["status", "capacity", "storage"])
            .and_then(Value::as_str)
            .unwrap_or("0")
            .to_string();
        (cap, access_modes(arr(pvc, &["status", "accessModes"])))
    };
    let class = get(
        pvc,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .and_then(Value::as_str)
    .unwrap_or_else(|| s(pvc, &["spec", "storageClassName"]));
    let or_unset = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| "<unset>".into())
    };
    vec![
        name,
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(or_unset(get(pvc, &["spec", "volumeAttributesClassName"]))),
        age,
        json!(or_unset(get(pvc, &["spec", "volumeMode"]))),
    ]
}

fn pv_cells(pv: &Value, name: Value, age: Value) -> Vec<Value> {
    let deleting = get(pv, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null());
    let phase = if deleting {
        "Terminating"
    } else {
        s(pv, &["status", "phase"])
    };
    let claim = match get(pv, &["spec", "claimRef"]).filter(|c| c.is_object()) {
        Some(c) => format!("{}/{}", s(c, &["namespace"]), s(c, &["name"])),
        None => String::new(),
    };
    let capacity = get(pv, &["spec", "capacity", "storage"])
        .and_then(Value::as_str)
        .unwrap_or("0")
        .to_string();
    let class = get(
        pv,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .and_then(Value::as_str)
    .unwrap_or_else(|| s(pv, &["spec", "storageClassName"]));
    let or_unset = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| "<unset>".into())
    };
    vec![
        name,
        json!(capacity),
        json!(access_modes(arr(pv, &["spec", "accessModes"]))),
        json!(s(pv, &["spec", "persistentVolumeReclaimPolicy"])),
        json!(phase),
        json!(claim),
        json!(class),
        json!(or_unset(get(pv, &["spec", "volumeAttributesClassName"]))),
        json!(s(pv, &["status", "reason"])),
        age,
        json!(or_unset(get(pv, &["spec", "volumeMode"]))),
    ]
}

/// The annotation that marks the cluster's default StorageClass.
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

fn storage_class_cells(sc: &Value, age: Value) -> Vec<Value> {
    let mut name = s(sc, &["metadata", "name"]).to_string();
    if s(sc, &["metadata", "annotations", DEFAULT_CLASS]) == "true" {
        name.push_str(" (default)");
    }
    let or = |v: &str, default: &str| {
        if v.is_empty() {
            default.to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        json!(name),
        json!(s(sc, &["provisioner"])),
        json!(or(s(sc, &["reclaimPolicy"]), "Delete")),
        json!(or(s(sc, &["volumeBindingMode"]), "Immediate")),
        json!(
            get(sc, &["allowVolumeExpansion"])
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .to_string()
        ),
        age,
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::resource::find_kind;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().unwrap()
    }

    fn row(group: &str, kind: &str, obj: Value) -> Vec<Value> {
        let def = find_kind(group, kind).unwrap();
        let t = table(def, &[&obj], now(), IncludeObject::None, json!({}));
        t["rows"][0]["cells"].as_array().unwrap().clone()
    }

    fn pod(status: Value) -> Value {
        json!({
            "metadata": {"name": "p", "creationTimestamp": "2024-05-01T11:59:55Z"},
            "spec": {"containers": [{"name": "a", "image": "x"}], "nodeName": "n1"},
            "status": status,
        })
    }

    #[test]
    fn human_duration_matches_upstream() {
        const S: i64 = 1_000_000_000;
        let cases = [
            (-2 * S, "<invalid>"),
            (-S, "0s"),
            (-S / 2, "0s"),
            (0, "0s"),
            (5 * S, "5s"),
            (119 * S, "119s"),
            (120 * S, "2m"),
            (182 * S, "3m2s"),
            (599 * S, "9m59s"),
            (600 * S, "10m"),
            (179 * 60 * S, "179m"),
            (3 * 3600 * S, "3h"),
            (3 * 3600 * S + 5 * 60 * S, "3h5m"),
            (8 * 3600 * S, "8h"),
            (47 * 3600 * S, "47h"),
            (51 * 3600 * S, "2d3h"),
            (48 * 3600 * S, "2d"),
            (8 * 24 * 3600 * S, "8d"),
            (729 * 24 * 3600 * S, "729d"),
            (730 * 24 * 3600 * S, "2y"),
            (775 * 24 * 3600 * S, "2y45d"),
            (8 * 365 * 24 * 3600 * S, "8y"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(d), want, "{d}");
        }
    }

    #[test]
    fn pod_status_cases() {
        let running = |ready: bool, restarts: i64| json!({"name": "a", "ready": ready, "restartCount": restarts, "state": {"running": {"startedAt": "2024-05-01T11:00:00Z"}}});
        let cases: Vec<(&str, Value, &str, &str, &str)> = vec![
            (
                "pending",
                json!({"phase": "Pending"}),
                "0/1",
                "Pending",
                "0",
            ),
            (
                "running",
                json!({"phase": "Running", "containerStatuses": [running(true, 0)], "conditions": [{"type": "Ready", "status": "True"}]}),
                "1/1",
                "Running",
                "0",
            ),
            (
                "image pull backoff",
                json!({"phase": "Pending", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}),
                "0/1",
                "ImagePullBackOff",
                "0",
            ),
            (
                "crash loop with last restart",
                json!({"phase": "Running", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2024-05-01T11:59:48Z"}}}]}),
                "0/1",
                "CrashLoopBackOff",
                "3 (12s ago)",
            ),
            (
                "completed",
                json!({"phase": "Succeeded", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
                "0/1",
                "Completed",
                "0",
            ),
            (
                "terminated without reason, signal",
                json!({"phase": "Failed", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
                "0/1",
                "Signal:9",
                "0",
            ),
            (
                "terminated without reason, exit code",
                json!({"phase": "Failed", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 2}}}]}),
                "0/1",
                "ExitCode:2",
                "0",
            ),
            (
                "evicted",
                json!({"phase": "Failed", "reason": "Evicted"}),
                "0/1",
                "Evicted",
                "0",
            ),
            (
                "scheduling gated",
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                "0/1",
                "SchedulingGated",
                "0",
            ),
        ];
        for (name, status, ready, reason, restarts) in cases {
            let cells = row("", "Pod", pod(status));
            assert_eq!(cells[0], "p", "{name}");
            assert_eq!(cells[1], ready, "{name}");
            assert_eq!(cells[2], reason, "{name}");
            assert_eq!(cells[3], restarts, "{name}");
            assert_eq!(cells[4], "5s", "{name}");
        }
    }

    #[test]
    fn pod_terminating_and_node_lost() {
        let mut p = pod(
            json!({"phase": "Running", "containerStatuses": [{"name": "a", "ready": true, "state": {"running": {}}}]}),
        );
        p["metadata"]["deletionTimestamp"] = json!("2024-05-01T12:00:00Z");
        assert_eq!(row("", "Pod", p.clone())[2], "Terminating");
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(row("", "Pod", p.clone())[2], "Unknown");
        let mut done = pod(json!({"phase": "Succeeded"}));
        done["metadata"]["deletionTimestamp"] = json!("2024-05-01T12:00:00Z");
        assert_eq!(row("", "Pod", done)[2], "Succeeded");
    }

    #[test]
    fn pod_init_containers() {
        let base = |init_statuses: Value, conditions: Value| {
            json!({
                "metadata": {"name": "p"},
                "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
                "status": {"phase": "Pending", "initContainerStatuses": init_statuses, "conditions": conditions,
                           "containerStatuses": [{"name": "a", "state": {"waiting": {"reason": "PodInitializing"}}}]},
            })
        };
        let cases = [
            (
                json!([{"name": "i1", "state": {"terminated": {"exitCode": 0}}}, {"name": "i2", "state": {"running": {}}}]),
                "Init:1/2",
            ),
            (
                json!([{"name": "i1", "state": {"waiting": {"reason": "ErrImagePull"}}}]),
                "Init:ErrImagePull",
            ),
            (
                json!([{"name": "i1", "state": {"terminated": {"exitCode": 3}}}]),
                "Init:ExitCode:3",
            ),
            (
                json!([{"name": "i1", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]),
                "Init:Error",
            ),
            (
                json!([{"name": "i1", "state": {"waiting": {"reason": "PodInitializing"}}}]),
                "Init:0/2",
            ),
            (
                json!([{"name": "i1", "state": {"terminated": {"exitCode": 0}}}, {"name": "i2", "state": {"terminated": {"exitCode": 0}}}]),
                "PodInitializing",
            ),
        ];
        for (statuses, want) in cases {
            assert_eq!(
                row("", "Pod", base(statuses.clone(), json!([])))[2],
                want,
                "{statuses}"
            );
        }
        // A restartable (sidecar) init container counts towards readiness once started.
        let sidecar = json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                "initContainerStatuses": [{"name": "s", "started": true, "ready": true, "restartCount": 2, "state": {"running": {}}}],
                "containerStatuses": [{"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}}]},
        });
        let cells = row("", "Pod", sidecar);
        assert_eq!(cells[1], "2/2");
        assert_eq!(cells[2], "Running");
        assert_eq!(cells[3], "3");
    }

    #[test]
    fn pod_completed_with_running_sibling_and_wide_cells() {
        let p = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "readinessGates": [{"conditionType": "x/gate"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
                "conditions": [{"type": "x/gate", "status": "True"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "state": {"running": {}}},
                    {"name": "b", "ready": false, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]},
        });
        let cells = row("", "Pod", p);
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "NotReady");
        assert_eq!(cells[4], "<unknown>");
        assert_eq!(cells[5], "10.0.0.5");
        assert_eq!(cells[6], "<none>");
        assert_eq!(cells[7], "<none>");
        assert_eq!(cells[8], "1/1");
    }

    #[test]
    fn workload_cells() {
        let template = json!({"spec": {"containers": [{"name": "web", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]}});
        let cases: Vec<(&str, &str, Value, Value)> = vec![
            (
                "apps",
                "Deployment",
                json!({"metadata": {"name": "d", "creationTimestamp": "2024-05-01T11:57:00Z"},
                       "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
                       "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}),
                json!([
                    "d",
                    "2/3",
                    3,
                    2,
                    "3m",
                    "web,side",
                    "nginx:1,busybox",
                    "app=web"
                ]),
            ),
            (
                "apps",
                "ReplicaSet",
                json!({"metadata": {"name": "rs"},
                       "spec": {"replicas": 2, "selector": {"matchLabels": {"b": "2", "a": "1"},
                                "matchExpressions": [{"key": "c", "operator": "In", "values": ["z", "y"]}]}, "template": template},
                       "status": {"replicas": 2, "readyReplicas": 1}}),
                json!([
                    "rs",
                    2,
                    2,
                    1,
                    "<unknown>",
                    "web,side",
                    "nginx:1,busybox",
                    "a=1,b=2,c in (y,z)"
                ]),
            ),
            (
                "apps",
                "DaemonSet",
                json!({"metadata": {"name": "ds"},
                       "spec": {"selector": {}, "template": {"spec": {"nodeSelector": {"zone": "a", "disk": "ssd"}, "containers": [{"name": "c", "image": "i"}]}}},
                       "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 1, "numberAvailable": 2}}),
                json!([
                    "ds",
                    3,
                    3,
                    2,
                    1,
                    2,
                    "disk=ssd,zone=a",
                    "<unknown>",
                    "c",
                    "i",
                    "<none>"
                ]),
            ),
            (
                "apps",
                "StatefulSet",
                json!({"metadata": {"name": "sts"}, "spec": {"replicas": 3, "template": template}, "status": {"readyReplicas": 3}}),
                json!(["sts", "3/3", "<unknown>", "web,side", "nginx:1,busybox"]),
            ),
            (
                "apps",
                "ControllerRevision",
                json!({"metadata": {"name": "ds-abc", "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x", "uid": "u", "controller": true}]}, "revision": 4}),
                json!(["ds-abc", "daemonset.apps/x", 4, "<unknown>"]),
            ),
            (
                "apps",
                "ControllerRevision",
                json!({"metadata": {"name": "orphan"}, "revision": 1}),
                json!(["orphan", "<none>", 1, "<unknown>"]),
            ),
            (
                "coordination.k8s.io",
                "Lease",
                json!({"metadata": {"name": "node-1"}, "spec": {"holderIdentity": "node-1"}}),
                json!(["node-1", "node-1", "<unknown>"]),
            ),
            (
                "",
                "Namespace",
                json!({"metadata": {"name": "default", "creationTimestamp": "2024-04-29T09:00:00Z"}, "status": {"phase": "Active"}}),
                json!(["default", "Active", "2d3h"]),
            ),
        ];
        for (group, kind, obj, want) in cases {
            assert_eq!(Value::Array(row(group, kind, obj)), want, "{kind}");
        }
    }

    #[test]
    fn selector_formats() {
        let cases = [
            (json!({}), Some("")),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "DoesNotExist"}]}),
                Some("a,!b"),
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}),
                Some("a notin (x)"),
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
                None,
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}),
                None,
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(selector_string(&sel).as_deref(), want, "{sel}");
        }
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(
            format_label_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
            )),
            "<error>"
        );
    }

    #[test]
    fn node_cells_cases() {
        let node = |conditions: Value, unschedulable: bool, labels: Value| {
            json!({"metadata": {"name": "n1", "labels": labels},
                   "spec": {"unschedulable": unschedulable},
                   "status": {"conditions": conditions,
                              "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
                              "nodeInfo": {"kubeletVersion": "v1.32.4", "osImage": "Linux"}}})
        };
        let cases = [
            (
                json!([{"type": "Ready", "status": "True"}]),
                false,
                json!({}),
                "Ready",
                "<none>",
            ),
            (
                json!([{"type": "Ready", "status": "False"}]),
                false,
                json!({"node-role.kubernetes.io/control-plane": ""}),
                "NotReady",
                "control-plane",
            ),
            (
                json!([{"type": "Ready", "status": "Unknown"}]),
                true,
                json!({"kubernetes.io/role": "worker", "node-role.kubernetes.io/infra": ""}),
                "NotReady,SchedulingDisabled",
                "infra,worker",
            ),
            (
                json!([]),
                true,
                json!({"node-role.kubernetes.io/": ""}),
                "Unknown,SchedulingDisabled",
                "<none>",
            ),
        ];
        for (conditions, unsched, labels, status, roles) in cases {
            let cells = row("", "Node", node(conditions, unsched, labels));
            assert_eq!(cells[1], status);
            assert_eq!(cells[2], roles);
            assert_eq!(cells[4], "v1.32.4");
            assert_eq!(cells[5], "10.0.0.1");
            assert_eq!(cells[6], "<none>");
            assert_eq!(cells[7], "Linux");
            assert_eq!(cells[8], "<unknown>");
        }
    }

    #[test]
    fn event_cells_cases() {
        let ev = json!({"metadata": {"name": "p.123"}, "type": "Normal", "reason": "Scheduled",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
            "source": {"component": "default-scheduler"}, "message": " Assigned \n",
            "firstTimestamp": "2024-05-01T11:50:00Z", "lastTimestamp": "2024-05-01T11:59:00Z", "count": 2});
        assert_eq!(
            Value::Array(row("", "Event", ev)),
            json!([
                "60s",
                "Normal",
                "Scheduled",
                "pod/p",
                "spec.containers{a}",
                "default-scheduler",
                "Assigned",
                "10m",
                2,
                "p.123"
            ])
        );
        let new_style = json!({"metadata": {"name": "e"}, "type": "Warning", "reason": "X",
            "involvedObject": {"kind": "Node"}, "eventTime": "2024-05-01T11:59:30.000000Z",
            "reportingComponent": "kubelet", "reportingInstance": "n1", "message": "m"});
        assert_eq!(
            Value::Array(row("", "Event", new_style)),
            json!([
                "30s",
                "Warning",
                "X",
                "node",
                "",
                "kubelet, n1",
                "m",
                "30s",
                1,
                "e"
            ])
        );
        let series = json!({"metadata": {"name": "s"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "eventTime": "2024-05-01T11:00:00.000000Z", "series": {"count": 7, "lastObservedTime": "2024-05-01T11:59:55.000000Z"}});
        let cells = row("", "Event", series);
        assert_eq!(cells[0], "5s");
        assert_eq!(cells[8], 7);
    }

    #[test]
    fn pvc_cells_cases() {
        let bound = json!({"metadata": {"name": "data"},
            "spec": {"volumeName": "pv-1", "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]}});
        assert_eq!(
            Value::Array(row("", "PersistentVolumeClaim", bound)),
            json!([
                "data",
                "Bound",
                "pv-1",
                "1Gi",
                "RWO,RWX",
                "standard",
                "<unset>",
                "<unknown>",
                "Filesystem"
            ])
        );
        let pending = json!({"metadata": {"name": "p", "deletionTimestamp": "2024-05-01T12:00:00Z",
            "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}}, "spec": {}, "status": {"phase": "Pending"}});
        assert_eq!(
            Value::Array(row("", "PersistentVolumeClaim", pending)),
            json!([
                "p",
                "Terminating",
                "",
                "",
                "",
                "old",
                "<unset>",
                "<unknown>",
                "<unset>"
            ])
        );
    }

    #[test]
    fn storage_cells_cases() {
        let pv = json!({"metadata": {"name": "pv-1", "creationTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
                "claimRef": {"namespace": "default", "name": "www-web-0"}, "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        assert_eq!(
            Value::Array(row("", "PersistentVolume", pv)),
            json!([
                "pv-1",
                "1Gi",
                "RWO",
                "Delete",
                "Bound",
                "default/www-web-0",
                "standard",
                "<unset>",
                "",
                "60s",
                "Filesystem"
            ])
        );
        let sc = json!({"metadata": {"name": "standard", "creationTimestamp": "2024-05-01T11:00:00Z",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rollwright.io/simulated", "volumeBindingMode": "WaitForFirstConsumer"});
        assert_eq!(
            Value::Array(row("storage.k8s.io", "StorageClass", sc)),
            json!([
                "standard (default)",
                "rollwright.io/simulated",
                "Delete",
                "WaitForFirstConsumer",
                "false",
                "60m"
            ])
        );
    }

    #[test]
    fn table_shape_and_include_object() {
        let def = find_kind("apps", "Deployment").unwrap();
        let obj =
            json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {}, "status": {}});
        let t = table(
            def,
            &[&obj],
            now(),
            IncludeObject::Metadata,
            json!({"resourceVersion": "7"}),
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({"resourceVersion": "7"}));
        let cols = t["columnDefinitions"].as_array().unwrap();
        let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(cols[0]["format"], "name");
        assert_eq!(cols[1]["format"], "");
        assert_eq!(cols[5]["priority"], 1);
        assert_eq!(cols[0]["priority"], 0);
        assert!(!cols[0]["description"].as_str().unwrap().is_empty());
        assert!(!cols[2]["description"].as_str().unwrap().is_empty());
        let row = &t["rows"][0];
        assert_eq!(
            row["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "d", "labels": {"a": "b"}}})
        );
        let full = table(def, &[&obj], now(), IncludeObject::Object, json!({}));
        assert_eq!(full["rows"][0]["object"], obj);
        let none = table(def, &[&obj], now(), IncludeObject::None, json!({}));
        assert!(none["rows"][0].get("object").is_none());
        let empty = table(def, &[], now(), IncludeObject::Metadata, json!({}));
        assert_eq!(empty["rows"], json!([]));
        assert_eq!(IncludeObject::parse("Object"), Some(IncludeObject::Object));
        assert_eq!(IncludeObject::parse("nope"), None);
        assert_eq!(IncludeObject::default(), IncludeObject::Metadata);
    }

    #[test]
    fn every_resource_has_matching_column_and_cell_counts() {
        for def in crate::resource::RESOURCES {
            let obj = json!({"metadata": {"name": "x"}});
            let t = table(def, &[&obj], now(), IncludeObject::None, json!({}));
            let cols = t["columnDefinitions"].as_array().unwrap().len();
            let cells = t["rows"][0]["cells"].as_array().unwrap().len();
            assert_eq!(cols, cells, "{}", def.kind);
            assert!(cols > 2, "{} uses the fallback printer", def.kind);
            for c in t["columnDefinitions"].as_array().unwrap() {
                assert!(
                    !c["description"].as_str().unwrap().is_empty(),
                    "{} {}",
                    def.kind,
                    c["name"]
                );
            }
        }
    }

    #[test]
    fn finished_pods_get_row_conditions() {
        let def = find_kind("", "Pod").unwrap();
        let p = pod(json!({"phase": "Succeeded"}));
        let t = table(def, &[&p], now(), IncludeObject::None, json!({}));
        assert_eq!(t["rows"][0]["conditions"][0]["reason"], "Succeeded");
        let p = pod(json!({"phase": "Running"}));
        let t = table(def, &[&p], now(), IncludeObject::None, json!({}));
        assert!(t["rows"][0].get("conditions").is_none());
    }
}
