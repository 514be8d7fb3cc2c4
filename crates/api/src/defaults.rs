//! Defaulting, as upstream's `SetDefaults_*` functions (core/v1 and apps/v1) and the
//! `DefaultTolerationSeconds` admission plugin leave an object before it is validated and stored.
//!
//! kubectl relies on these exact defaults: `rollout status ds/x` reads `updateStrategy`,
//! `rollout history` prints container ports with their defaulted protocol, and `rollout undo`
//! sends back a template that must compare equal to the stored one. Every rule only fills a field
//! that is absent (or, for Go string and non-pointer int fields, empty or zero), so applying the
//! defaults twice changes nothing.

use serde_json::{Map, Value, json};

mod autoscaling;
mod batch;
mod core_kinds;
mod limit_range;
mod scheduling;

pub use autoscaling::horizontal_pod_autoscaler;
pub use batch::{cron_job, job};
pub use core_kinds::{replication_controller, secret, service};
pub use limit_range::limit_range;
pub use scheduling::priority_class;

/// Runs `f` on the object's top-level map (objects that are not JSON objects are left alone).
pub(crate) fn on_root(obj: &mut Value, f: fn(&mut Map<String, Value>)) {
    if let Some(root) = obj.as_object_mut() {
        f(root);
    }
}

/// Declares the public, per-kind entry point of a defaulting function over the root map.
macro_rules! kind_defaults {
    ($($(#[$doc:meta])* $name:ident => $inner:ident;)*) => {
        $($(#[$doc])* pub fn $name(obj: &mut Value) {
            on_root(obj, $inner)
        })*
    };
}

kind_defaults! {
    /// A Pod's defaults (`SetDefaults_Pod`, `SetDefaults_PodSpec`, containers, volumes, probes,
    /// and the `DefaultTolerationSeconds` admission plugin).
    pod => pod_root;
    /// A Namespace's: the `kubernetes.io/metadata.name` label, the `kubernetes` finalizer.
    namespace => namespace_root;
    /// A Node's: allocatable from capacity.
    node => node_root;
    /// A PersistentVolumeClaim's: volume mode, phase.
    persistent_volume_claim => persistent_volume_claim_root;
    /// A PersistentVolume's: reclaim policy, volume mode, phase.
    persistent_volume => persistent_volume_root;
    /// A StorageClass's: reclaim policy and binding mode.
    storage_class => storage_class_root;
    /// A Deployment's.
    deployment => deployment_root;
    /// A ReplicaSet's.
    replica_set => replica_set_root;
    /// A DaemonSet's, with rollwright's `paused` and `podUpdatePolicy`.
    daemon_set => daemon_set_root;
    /// A StatefulSet's, with rollwright's `paused` and `podUpdatePolicy`.
    stateful_set => stateful_set_root;
}

// ---- small helpers over JSON maps ----

/// The object at `key`, created if absent or null (Go's non-pointer structs always exist).
pub(crate) fn child<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let slot = map.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// The object at `key` only if present (Go pointer structs are defaulted only when set).
pub(crate) fn existing<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// Each object of the array at `key`, if any.
pub(crate) fn each<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

pub(crate) fn is_unset(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key).is_none_or(Value::is_null)
}

/// A pointer field: set when absent or null.
pub(crate) fn default_ptr(map: &mut Map<String, Value>, key: &str, value: Value) {
    if is_unset(map, key) {
        map.insert(key.to_string(), value);
    }
}

/// A Go string field: set when absent, null or empty.
pub(crate) fn default_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    if is_unset(map, key) || map.get(key).and_then(Value::as_str) == Some("") {
        map.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// A Go non-pointer integer: set when absent, null or zero.
pub(crate) fn default_int(map: &mut Map<String, Value>, key: &str, value: i64) {
    if is_unset(map, key) || map.get(key).and_then(Value::as_i64) == Some(0) {
        map.insert(key.to_string(), Value::from(value));
    }
}

// ---- core/v1 ----

fn pod_root(root: &mut Map<String, Value>) {
    let Some(spec) = child(root, "spec") else {
        return;
    };
    pod_spec(spec);
    // SetDefaults_Pod: only on Pods, never on templates (upstream issue 69445).
    for key in ["containers", "initContainers"] {
        for container in each(spec, key) {
            requests_from_limits(container);
        }
    }
    default_ptr(spec, "enableServiceLinks", Value::Bool(true));
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        for key in ["containers", "initContainers"] {
            for container in each(spec, key) {
                for port in each(container, "ports") {
                    let host_port_unset = port
                        .get("hostPort")
                        .is_none_or(|p| p.is_null() || p.as_i64() == Some(0));
                    if let Some(container_port) = port.get("containerPort").cloned()
                        && host_port_unset
                    {
                        port.insert("hostPort".into(), container_port);
                    }
                }
            }
        }
    }
    default_tolerations(spec);
}

/// Requests default to limits for resources that have a limit and no request.
fn requests_from_limits(container: &mut Map<String, Value>) {
    let Some(resources) = existing(container, "resources") else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let Some(requests) = child(resources, "requests") else {
        return;
    };
    for (name, quantity) in limits {
        requests.entry(name).or_insert(quantity);
    }
}

/// The `DefaultTolerationSeconds` admission plugin: pods tolerate a not-ready or unreachable
/// node for 300s unless they already say how they tolerate it.
fn default_tolerations(spec: &mut Map<String, Value>) {
    const KEYS: [&str; 2] = [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ];
    let existing: Vec<(String, String)> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            let s = |k: &str| {
                t.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (s("key"), s("effect"))
        })
        .collect();
    let missing: Vec<&str> = KEYS
        .into_iter()
        .filter(|key| {
            !existing.iter().any(|(k, effect)| {
                (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
            })
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let slot = spec.entry("tolerations").or_insert(Value::Null);
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    if let Some(list) = slot.as_array_mut() {
        for key in missing {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

/// SetDefaults_PodSpec and everything the generated defaulters reach inside a pod spec.
pub(crate) fn pod_spec(spec: &mut Map<String, Value>) {
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_ptr(spec, "securityContext", json!({}));
    default_ptr(spec, "terminationGracePeriodSeconds", json!(30));
    default_str(spec, "schedulerName", "default-scheduler");
    for volume in each(spec, "volumes") {
        volume_defaults(volume);
    }
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for container in each(spec, key) {
            container_defaults(container);
        }
    }
}

fn volume_defaults(volume: &mut Map<String, Value>) {
    // A volume with no source is an emptyDir (SetDefaults_Volume).
    if volume.iter().all(|(k, v)| k == "name" || v.is_null()) {
        volume.insert("emptyDir".into(), json!({}));
    }
    if let Some(host_path) = existing(volume, "hostPath") {
        default_ptr(host_path, "type", json!(""));
    }
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = existing(volume, key) {
            default_ptr(source, "defaultMode", json!(420));
        }
    }
    if let Some(downward) = existing(volume, "downwardAPI") {
        downward_items(downward);
    }
    if let Some(projected) = existing(volume, "projected") {
        for source in each(projected, "sources") {
            if let Some(downward) = existing(source, "downwardAPI") {
                downward_items(downward);
            }
            if let Some(token) = existing(source, "serviceAccountToken") {
                default_ptr(token, "expirationSeconds", json!(3600));
            }
        }
    }
    if let Some(claim_spec) = existing(volume, "ephemeral")
        .and_then(|e| existing(e, "volumeClaimTemplate"))
        .and_then(|t| existing(t, "spec"))
    {
        default_ptr(claim_spec, "volumeMode", json!("Filesystem"));
    }
}

fn downward_items(downward: &mut Map<String, Value>) {
    for item in each(downward, "items") {
        if let Some(field_ref) = existing(item, "fieldRef") {
            default_str(field_ref, "apiVersion", "v1");
        }
    }
}

fn container_defaults(container: &mut Map<String, Value>) {
    if container
        .get("imagePullPolicy")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let image = container
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let policy = if image_tag(image).as_deref() == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        container.insert("imagePullPolicy".into(), json!(policy));
    }
    default_str(container, "terminationMessagePath", "/dev/termination-log");
    default_str(container, "terminationMessagePolicy", "File");
    // Go serializes the non-pointer `resources` struct as `{}`; keeping it makes stored templates
    // compare equal to templates that typed clients (kubectl rollout undo) send back.
    default_ptr(container, "resources", json!({}));
    for port in each(container, "ports") {
        default_str(port, "protocol", "TCP");
    }
    for env in each(container, "env") {
        if let Some(field_ref) = existing(env, "valueFrom").and_then(|v| existing(v, "fieldRef")) {
            default_str(field_ref, "apiVersion", "v1");
        }
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = existing(container, key) {
            default_int(probe, "timeoutSeconds", 1);
            default_int(probe, "periodSeconds", 10);
            default_int(probe, "successThreshold", 1);
            default_int(probe, "failureThreshold", 3);
            if let Some(http) = existing(probe, "httpGet") {
                http_get_defaults(http);
            }
        }
    }
    if let Some(lifecycle) = existing(container, "lifecycle") {
        for key in ["postStart", "preStop"] {
            if let Some(http) = existing(lifecycle, key).and_then(|h| existing(h, "httpGet")) {
                http_get_defaults(http);
            }
        }
    }
}

fn http_get_defaults(http: &mut Map<String, Value>) {
    default_str(http, "path", "/");
    default_str(http, "scheme", "HTTP");
}

/// The tag of an image reference as upstream's `parsers.ParseImageName` sees it: `latest` when
/// neither tag nor digest is given, `None` for a digest-only or unparseable reference.
fn image_tag(image: &str) -> Option<String> {
    if image.is_empty() {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    // Docker references have a lowercase path; anything else fails to parse upstream.
    let path = repository
        .split_once('/')
        .map_or(repository, |(host, rest)| {
            if host.contains(['.', ':']) || host == "localhost" {
                rest
            } else {
                repository
            }
        });
    if path.is_empty() || path.chars().any(|c| c.is_ascii_uppercase()) {
        return None;
    }
    match (tag, digest) {
        (Some(tag), _) => Some(tag.to_string()),
        (None, None) => Some("latest".to_string()),
        (None, Some(_)) => None,
    }
}

fn namespace_root(root: &mut Map<String, Value>) {
    let name = root
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !name.is_empty()
        && let Some(labels) = child(root, "metadata").and_then(|m| child(m, "labels"))
    {
        labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
    }
    // The namespace strategy makes sure the `kubernetes` finalizer is there at creation.
    if let Some(spec) = child(root, "spec") {
        default_ptr(spec, "finalizers", json!(["kubernetes"]));
    }
    if let Some(status) = child(root, "status") {
        default_str(status, "phase", "Active");
    }
}

fn node_root(root: &mut Map<String, Value>) {
    let Some(status) = existing(root, "status") else {
        return;
    };
    if is_unset(status, "allocatable")
        && let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned()
    {
        status.insert("allocatable".into(), capacity);
    }
}

fn persistent_volume_claim_root(root: &mut Map<String, Value>) {
    if let Some(spec) = child(root, "spec") {
        default_ptr(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = child(root, "status") {
        default_str(status, "phase", "Pending");
    }
}

fn persistent_volume_root(root: &mut Map<String, Value>) {
    if let Some(spec) = child(root, "spec") {
        default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
        default_ptr(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = child(root, "status") {
        default_str(status, "phase", "Pending");
    }
}

// ---- storage.k8s.io/v1 ----

fn storage_class_root(root: &mut Map<String, Value>) {
    default_ptr(root, "reclaimPolicy", json!("Delete"));
    default_ptr(root, "volumeBindingMode", json!("Immediate"));
}

// ---- apps/v1 ----

/// Defaults of a workload's `spec.template`.
pub(crate) fn template(spec: &mut Map<String, Value>) {
    let Some(template) = child(spec, "template") else {
        return;
    };
    // A typed client sends `creationTimestamp: null` in template metadata; drop it so that a
    // template sent back by `kubectl rollout undo` equals the stored one.
    if let Some(meta) = existing(template, "metadata")
        && meta.get("creationTimestamp").is_some_and(Value::is_null)
    {
        meta.remove("creationTimestamp");
    }
    if let Some(pod_spec_map) = child(template, "spec") {
        pod_spec(pod_spec_map);
    }
}

fn deployment_root(root: &mut Map<String, Value>) {
    let Some(spec) = child(root, "spec") else {
        return;
    };
    default_ptr(spec, "replicas", json!(1));
    if let Some(strategy) = child(spec, "strategy") {
        default_str(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = child(strategy, "rollingUpdate")
        {
            default_ptr(rolling, "maxUnavailable", json!("25%"));
            default_ptr(rolling, "maxSurge", json!("25%"));
        }
    }
    default_ptr(spec, "revisionHistoryLimit", json!(10));
    default_ptr(spec, "progressDeadlineSeconds", json!(600));
    template(spec);
}

fn replica_set_root(root: &mut Map<String, Value>) {
    let Some(spec) = child(root, "spec") else {
        return;
    };
    default_ptr(spec, "replicas", json!(1));
    template(spec);
}

fn daemon_set_root(root: &mut Map<String, Value>) {
    let Some(spec) = child(root, "spec") else {
        return;
    };
    if let Some(strategy) = child(spec, "updateStrategy") {
        default_str(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = child(strategy, "rollingUpdate")
        {
            default_ptr(rolling, "maxUnavailable", json!(1));
            default_ptr(rolling, "maxSurge", json!(0));
            rollwright_extensions(rolling);
        }
    }
    default_ptr(spec, "revisionHistoryLimit", json!(10));
    template(spec);
}

/// rollwright's extension fields of a DaemonSet's or StatefulSet's `rollingUpdate`: pods are
/// recreated unless in-place updates are asked for, and a rollout is not paused.
fn rollwright_extensions(rolling: &mut Map<String, Value>) {
    default_str(rolling, "podUpdatePolicy", "Recreate");
    default_ptr(rolling, "paused", json!(false));
}

fn stateful_set_root(root: &mut Map<String, Value>) {
    let Some(spec) = child(root, "spec") else {
        return;
    };
    default_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = child(spec, "updateStrategy") {
        // Upstream creates `rollingUpdate` only when it defaults the type itself.
        if strategy
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            strategy.insert("type".into(), json!("RollingUpdate"));
            default_ptr(strategy, "rollingUpdate", json!({}));
        }
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = existing(strategy, "rollingUpdate")
        {
            default_ptr(rolling, "partition", json!(0));
            rollwright_extensions(rolling);
        }
    }
    if let Some(policy) = child(spec, "persistentVolumeClaimRetentionPolicy") {
        default_str(policy, "whenDeleted", "Retain");
        default_str(policy, "whenScaled", "Retain");
    }
    default_ptr(spec, "replicas", json!(1));
    default_ptr(spec, "revisionHistoryLimit", json!(10));
    template(spec);
    for claim in each(spec, "volumeClaimTemplates") {
        persistent_volume_claim_root(claim);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// Defaults `obj` as the registry entry of `group`/`kind` would.
    pub(crate) fn apply(group: &str, kind: &str, obj: &mut Value) {
        let f: fn(&mut Value) = match (group, kind) {
            ("", "Pod") => pod,
            ("", "Namespace") => namespace,
            ("", "Node") => node,
            ("", "PersistentVolumeClaim") => persistent_volume_claim,
            ("", "PersistentVolume") => persistent_volume,
            ("storage.k8s.io", "StorageClass") => storage_class,
            ("apps", "Deployment") => deployment,
            ("apps", "ReplicaSet") => replica_set,
            ("apps", "DaemonSet") => daemon_set,
            ("apps", "StatefulSet") => stateful_set,
            _ => |_: &mut Value| {},
        };
        f(obj)
    }

    fn defaulted(group: &str, kind: &str, mut obj: Value) -> Value {
        apply(group, kind, &mut obj);
        obj
    }

    /// The pod spec defaults every workload template gets.
    fn template_spec_defaults(containers: Value) -> Value {
        json!({
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler",
        })
    }

    fn nginx_container() -> Value {
        json!({
            "name": "nginx",
            "image": "nginx:1.25",
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        })
    }

    fn template_input() -> Value {
        json!({
            "metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
        })
    }

    fn template_output() -> Value {
        json!({
            "metadata": {"labels": {"app": "x"}},
            "spec": template_spec_defaults(json!([nginx_container()])),
        })
    }

    #[test]
    fn defaults_workloads_and_pods_as_upstream() {
        let cases: Vec<(&str, &str, Value, Value)> = vec![
            (
                "apps",
                "Deployment",
                json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template_input()}}),
                json!({"metadata": {"name": "d"}, "spec": {
                    "selector": {"matchLabels": {"app": "x"}},
                    "template": template_output(),
                    "replicas": 1,
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                    "revisionHistoryLimit": 10,
                    "progressDeadlineSeconds": 600,
                }}),
            ),
            (
                "apps",
                "Deployment",
                json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 2, "template": template_input()}}),
                json!({"spec": {
                    "replicas": 0,
                    "strategy": {"type": "Recreate"},
                    "revisionHistoryLimit": 2,
                    "template": template_output(),
                    "progressDeadlineSeconds": 600,
                }}),
            ),
            (
                "apps",
                "DaemonSet",
                json!({"spec": {"template": template_input()}}),
                json!({"spec": {
                    "template": template_output(),
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0, "podUpdatePolicy": "Recreate", "paused": false}},
                    "revisionHistoryLimit": 10,
                }}),
            ),
            (
                "apps",
                "DaemonSet",
                json!({"spec": {"updateStrategy": {"type": "OnDelete"}, "template": template_input()}}),
                json!({"spec": {
                    "updateStrategy": {"type": "OnDelete"},
                    "template": template_output(),
                    "revisionHistoryLimit": 10,
                }}),
            ),
            (
                "apps",
                "StatefulSet",
                json!({"spec": {
                    "template": template_input(),
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
                }}),
                json!({"spec": {
                    "template": template_output(),
                    "volumeClaimTemplates": [{
                        "metadata": {"name": "data"},
                        "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
                        "status": {"phase": "Pending"},
                    }],
                    "podManagementPolicy": "OrderedReady",
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "podUpdatePolicy": "Recreate", "paused": false}},
                    "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                    "replicas": 1,
                    "revisionHistoryLimit": 10,
                }}),
            ),
            (
                // An explicit RollingUpdate type without rollingUpdate stays without it.
                "apps",
                "StatefulSet",
                json!({"spec": {"updateStrategy": {"type": "RollingUpdate"}, "template": template_input()}}),
                json!({"spec": {
                    "updateStrategy": {"type": "RollingUpdate"},
                    "template": template_output(),
                    "podManagementPolicy": "OrderedReady",
                    "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                    "replicas": 1,
                    "revisionHistoryLimit": 10,
                }}),
            ),
            (
                "apps",
                "ReplicaSet",
                json!({"spec": {"template": template_input()}}),
                json!({"spec": {"template": template_output(), "replicas": 1}}),
            ),
            (
                "",
                "Pod",
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{
                    "name": "c",
                    "image": "busybox",
                    "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                    "readinessProbe": {"httpGet": {"port": 8080}},
                    "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}},
                }], "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "cfg"}}]}}),
                json!({"metadata": {"name": "p"}, "spec": {
                    "containers": [{
                        "name": "c",
                        "image": "busybox",
                        "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName", "apiVersion": "v1"}}}],
                        "readinessProbe": {
                            "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                            "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3,
                        },
                        "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi", "cpu": "1"}},
                        "imagePullPolicy": "Always",
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                    }],
                    "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}}],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "securityContext": {},
                    "schedulerName": "default-scheduler",
                    "enableServiceLinks": true,
                    "tolerations": [
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                    ],
                }}),
            ),
            (
                "",
                "Namespace",
                json!({"metadata": {"name": "team-a"}}),
                json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
                       "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
            ),
            (
                "",
                "PersistentVolumeClaim",
                json!({"spec": {"accessModes": ["ReadWriteOnce"]}}),
                json!({"spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}),
            ),
            (
                "",
                "Node",
                json!({"status": {"capacity": {"cpu": "4"}}}),
                json!({"status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}),
            ),
            ("", "ConfigMap", json!({"data": {}}), json!({"data": {}})),
        ];
        for (group, kind, input, want) in cases {
            let got = defaulted(group, kind, input.clone());
            assert_eq!(got, want, "{kind}: {input}");
            assert_eq!(
                defaulted(group, kind, got.clone()),
                got,
                "{kind} defaulting is not idempotent"
            );
        }
    }

    #[test]
    fn templates_do_not_get_pod_only_defaults() {
        let got = defaulted(
            "apps",
            "Deployment",
            json!({"spec": {"template": template_input()}}),
        );
        let spec = &got["spec"]["template"]["spec"];
        assert!(spec.get("enableServiceLinks").is_none());
        assert!(spec.get("tolerations").is_none());
    }

    #[test]
    fn template_creation_timestamp_null_is_dropped() {
        let mut input = template_input();
        input["metadata"]["creationTimestamp"] = Value::Null;
        let got = defaulted("apps", "ReplicaSet", json!({"spec": {"template": input}}));
        assert_eq!(got["spec"]["template"], template_output());
    }

    #[test]
    fn default_tolerations_respect_existing_ones() {
        let cases: Vec<(Value, usize)> = vec![
            (
                json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]),
                2,
            ),
            (json!([{"operator": "Exists"}]), 1),
            (
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]),
                2,
            ),
            (
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}]),
                3,
            ),
        ];
        for (tolerations, want) in cases {
            let got = defaulted(
                "",
                "Pod",
                json!({"spec": {"containers": [], "tolerations": tolerations}}),
            );
            assert_eq!(
                got["spec"]["tolerations"].as_array().map(Vec::len),
                Some(want),
                "{tolerations}"
            );
        }
    }

    #[test]
    fn host_network_pods_default_host_ports() {
        let got = defaulted(
            "",
            "Pod",
            json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 53}]}]}}),
        );
        assert_eq!(
            got["spec"]["containers"][0]["ports"][0],
            json!({"containerPort": 53, "protocol": "TCP", "hostPort": 53})
        );
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("localhost:5000/nginx", "Always"),
            ("localhost:5000/nginx:2", "IfNotPresent"),
            ("nginx@sha256:abcd", "IfNotPresent"),
            ("nginx:latest@sha256:abcd", "Always"),
            ("Nginx", "IfNotPresent"),
            ("", "IfNotPresent"),
        ];
        for (image, want) in cases {
            let got = defaulted(
                "",
                "Pod",
                json!({"spec": {"containers": [{"name": "c", "image": image}]}}),
            );
            assert_eq!(
                got["spec"]["containers"][0]["imagePullPolicy"],
                json!(want),
                "{image}"
            );
        }
    }
}
