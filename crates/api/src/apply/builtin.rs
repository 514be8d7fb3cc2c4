//! Upstream's list and map types for the built-in kinds' OpenAPI component schemas
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, and the
//! defaults of key fields), which k8s-openapi's schemas lack.
//!
//! Every granular list of the built-in kinds is listed, so the schemas say it without their
//! strategic-merge tags (which [`super::OpenApi`] also reads, for CRDs that only have those);
//! every other list is atomic. The keys are upstream's `+listMapKey`s, which differ from the
//! merge keys where one field is not unique (container and service ports are keyed by port *and*
//! protocol). Also listed: the structs and maps upstream replaces as a whole
//! (`+structType=atomic`, `+mapType=atomic`), and the defaults of key fields.

use serde_json::{Map, Value, json};

/// (component, property, list type, map keys).
const LISTS: &[(&str, &str, &str, &[&str])] = &[
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        "set",
        &[],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "map",
        &["uid"],
    ),
    ("io.k8s.api.core.v1.PodSpec", "containers", "map", &["name"]),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        "map",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        "map",
        &["name"],
    ),
    ("io.k8s.api.core.v1.PodSpec", "volumes", "map", &["name"]),
    ("io.k8s.api.core.v1.Container", "env", "map", &["name"]),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        "map",
        &["mountPath"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        "map",
        &["devicePath"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        "map",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        "map",
        &["mountPath"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        "map",
        &["devicePath"],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        "map",
        &["type"],
    ),
    ("io.k8s.api.core.v1.PodStatus", "podIPs", "map", &["ip"]),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs", "map", &["ip"]),
    (
        "io.k8s.api.core.v1.PodStatus",
        "resourceClaimStatuses",
        "map",
        &["name"],
    ),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", "set", &[]),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "addresses",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        "map",
        &["containerPort", "protocol"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        "map",
        &["containerPort", "protocol"],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ports",
        "map",
        &["port", "protocol"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        "map",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        "map",
        &["name"],
    ),
    ("io.k8s.api.core.v1.PodSpec", "hostAliases", "map", &["ip"]),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        "map",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        "map",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "secrets",
        "map",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.ServiceStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "clusterIPs",
        "atomic",
        &[],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ipFamilies",
        "atomic",
        &[],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "resizePolicy",
        "atomic",
        &[],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        "conditions",
        "map",
        &["type"],
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        "conditions",
        "map",
        &["type"],
    ),
    ("io.k8s.api.batch.v1.JobStatus", "conditions", "atomic", &[]),
];

/// Structs replaced as a whole (`+structType=atomic`).
const ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.core.v1.TypedObjectReference",
    "io.k8s.api.core.v1.SecretReference",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.TopologySelectorTerm",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
];

/// Free-form maps replaced as a whole (`+mapType=atomic`): (component, property).
const ATOMIC_MAPS: &[(&str, &str)] = &[
    ("io.k8s.api.core.v1.PodSpec", "nodeSelector"),
    ("io.k8s.api.core.v1.ServiceSpec", "selector"),
    ("io.k8s.api.core.v1.ReplicationControllerSpec", "selector"),
];

/// Defaults of key fields (an item that omits them is keyed as if it had them).
const KEY_DEFAULTS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

/// Adds upstream's list and map types to the component schemas that are present; returns how
/// many were placed.
pub fn decorate(schemas: &mut Map<String, Value>) -> usize {
    let mut placed = 0;
    for (component, prop, ty, keys) in LISTS {
        if let Some(p) = property_mut(schemas, component, prop) {
            p.insert("x-kubernetes-list-type".into(), json!(ty));
            if !keys.is_empty() {
                p.insert("x-kubernetes-list-map-keys".into(), json!(keys));
            }
            placed += 1;
        }
    }
    for component in ATOMIC_STRUCTS {
        if let Some(Value::Object(s)) = schemas.get_mut(*component) {
            s.insert("x-kubernetes-map-type".into(), json!("atomic"));
            placed += 1;
        }
    }
    for (component, prop) in ATOMIC_MAPS {
        if let Some(p) = property_mut(schemas, component, prop) {
            p.insert("x-kubernetes-map-type".into(), json!("atomic"));
            placed += 1;
        }
    }
    for (component, prop, default) in KEY_DEFAULTS {
        if let Some(p) = property_mut(schemas, component, prop) {
            p.insert("default".into(), json!(default));
            placed += 1;
        }
    }
    placed
}

fn property_mut<'a>(
    schemas: &'a mut Map<String, Value>,
    component: &str,
    prop: &str,
) -> Option<&'a mut Map<String, Value>> {
    schemas
        .get_mut(component)?
        .get_mut("properties")?
        .get_mut(prop)?
        .as_object_mut()
}
