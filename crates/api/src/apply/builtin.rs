//! Upstream's merge facts about the built-in kinds' fields, which k8s-openapi's component
//! schemas lack: how server-side apply merges a list (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, the defaults of key fields) and how a
//! strategic merge patch does (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`).
//!
//! Both come from one table, [`FIELDS`], a row per field with upstream's tags on it side by side,
//! so the two cannot drift apart. Every granular list of the built-in kinds is listed; every
//! other list is atomic. The list keys are upstream's `+listMapKey`s, which differ from the
//! merge keys where one field is not unique (container and service ports are keyed by port *and*
//! protocol). Also listed: the structs and maps upstream replaces as a whole
//! (`+structType=atomic`, `+mapType=atomic`), and the defaults of key fields.

use serde_json::{Map, Value, json};

/// Upstream's tags on one field of a component schema.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// The component schema (`io.k8s.api.core.v1.PodSpec`).
    pub component: &'static str,
    /// The property (`containers`).
    pub property: &'static str,
    /// `+listType` and its `+listMapKey`s; `None` where upstream tags only the patch strategy.
    pub list: Option<(&'static str, &'static [&'static str])>,
    /// `patchStrategy` and `patchMergeKey`; `None` where upstream tags only the list type.
    pub patch: Option<(&'static str, Option<&'static str>)>,
}

/// Every field upstream tags with a list type or a patch strategy.
pub const FIELDS: &[Field] = &[
    Field {
        component: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        property: "finalizers",
        list: Some(("set", &[])),
        patch: Some(("merge", None)),
    },
    Field {
        component: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        property: "ownerReferences",
        list: Some(("map", &["uid"])),
        patch: Some(("merge", Some("uid"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "containers",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "initContainers",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "ephemeralContainers",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "volumes",
        list: Some(("map", &["name"])),
        patch: Some(("merge,retainKeys", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "topologySpreadConstraints",
        list: Some(("map", &["topologyKey", "whenUnsatisfiable"])),
        patch: Some(("merge", Some("topologyKey"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "imagePullSecrets",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "hostAliases",
        list: Some(("map", &["ip"])),
        patch: Some(("merge", Some("ip"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "resourceClaims",
        list: Some(("map", &["name"])),
        patch: Some(("merge,retainKeys", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodSpec",
        property: "schedulingGates",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.Container",
        property: "env",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.Container",
        property: "volumeMounts",
        list: Some(("map", &["mountPath"])),
        patch: Some(("merge", Some("mountPath"))),
    },
    Field {
        component: "io.k8s.api.core.v1.Container",
        property: "volumeDevices",
        list: Some(("map", &["devicePath"])),
        patch: Some(("merge", Some("devicePath"))),
    },
    Field {
        component: "io.k8s.api.core.v1.Container",
        property: "ports",
        list: Some(("map", &["containerPort", "protocol"])),
        patch: Some(("merge", Some("containerPort"))),
    },
    Field {
        component: "io.k8s.api.core.v1.Container",
        property: "resizePolicy",
        list: Some(("atomic", &[])),
        patch: None,
    },
    Field {
        component: "io.k8s.api.core.v1.EphemeralContainer",
        property: "env",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.EphemeralContainer",
        property: "volumeMounts",
        list: Some(("map", &["mountPath"])),
        patch: Some(("merge", Some("mountPath"))),
    },
    Field {
        component: "io.k8s.api.core.v1.EphemeralContainer",
        property: "volumeDevices",
        list: Some(("map", &["devicePath"])),
        patch: Some(("merge", Some("devicePath"))),
    },
    Field {
        component: "io.k8s.api.core.v1.EphemeralContainer",
        property: "ports",
        list: Some(("map", &["containerPort", "protocol"])),
        patch: Some(("merge", Some("containerPort"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodStatus",
        property: "podIPs",
        list: Some(("map", &["ip"])),
        patch: Some(("merge", Some("ip"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodStatus",
        property: "hostIPs",
        list: Some(("map", &["ip"])),
        patch: Some(("merge", Some("ip"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PodStatus",
        property: "resourceClaimStatuses",
        list: Some(("map", &["name"])),
        patch: Some(("merge,retainKeys", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.NodeSpec",
        property: "podCIDRs",
        list: Some(("set", &[])),
        patch: Some(("merge", None)),
    },
    Field {
        component: "io.k8s.api.core.v1.NodeStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.core.v1.NodeStatus",
        property: "addresses",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.core.v1.NamespaceStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.apps.v1.DeploymentStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.apps.v1.ReplicaSetStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.apps.v1.StatefulSetStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.apps.v1.DaemonSetStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.core.v1.ServiceSpec",
        property: "ports",
        list: Some(("map", &["port", "protocol"])),
        patch: Some(("merge", Some("port"))),
    },
    Field {
        component: "io.k8s.api.core.v1.ServiceSpec",
        property: "clusterIPs",
        list: Some(("atomic", &[])),
        patch: None,
    },
    Field {
        component: "io.k8s.api.core.v1.ServiceSpec",
        property: "ipFamilies",
        list: Some(("atomic", &[])),
        patch: None,
    },
    Field {
        component: "io.k8s.api.core.v1.ServiceAccount",
        property: "secrets",
        list: Some(("map", &["name"])),
        patch: Some(("merge", Some("name"))),
    },
    Field {
        component: "io.k8s.api.core.v1.ServiceStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        property: "conditions",
        list: Some(("map", &["type"])),
        patch: None,
    },
    Field {
        component: "io.k8s.api.batch.v1.JobStatus",
        property: "conditions",
        list: Some(("atomic", &[])),
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.core.v1.ReplicationControllerStatus",
        property: "conditions",
        list: None,
        patch: Some(("merge", Some("type"))),
    },
    Field {
        component: "io.k8s.api.apps.v1.DeploymentSpec",
        property: "strategy",
        list: None,
        patch: Some(("retainKeys", None)),
    },
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
    for f in FIELDS {
        let Some((ty, keys)) = f.list else { continue };
        if let Some(p) = property_mut(schemas, f.component, f.property) {
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

/// Adds upstream's strategic-merge tags to the component schemas that are present; returns how
/// many were placed (all, unless k8s-openapi's schemas changed shape).
pub fn place_patch_strategies(schemas: &mut Map<String, Value>) -> usize {
    let mut placed = 0;
    for f in FIELDS {
        let Some((strategy, key)) = f.patch else {
            continue;
        };
        if let Some(p) = property_mut(schemas, f.component, f.property) {
            p.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
            if let Some(key) = key {
                p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
            }
            placed += 1;
        }
    }
    placed
}

/// How many fields carry a patch strategy (what [`place_patch_strategies`] places when every
/// component is present).
pub fn patch_strategy_count() -> usize {
    FIELDS.iter().filter(|f| f.patch.is_some()).count()
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
