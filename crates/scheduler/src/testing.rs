//! Builders shared by the unit tests of the plugins: pods from JSON, nodes with labels, a cache
//! with pods placed.

#![allow(clippy::unwrap_used, reason = "test builders")]

use crate::{
    cache::{Cache, Placement},
    node_info::NodeInfo,
    pod_info::PodInfo,
    resources::Resources,
};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// A pod named `name` in `default` (uid = name) with `labels`, the `spec` fields given merged
/// over a container requesting `cpu` millicores.
pub fn pod(name: &str, labels: Value, cpu: i64, spec: Value) -> PodInfo {
    let mut full = json!({
        "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": format!("{cpu}m")}}}],
    });
    if let (Some(f), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
        f.extend(extra.clone());
    }
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels},
        "spec": full,
    }))
    .unwrap();
    PodInfo::new(&p)
}

/// A node with 4 CPUs, 110 pods, `kubernetes.io/hostname` and the given zone.
pub fn node(name: &str, zone: &str) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        labels: [
            ("kubernetes.io/hostname".to_string(), name.to_string()),
            ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
        ]
        .into(),
        allocatable: Resources {
            milli_cpu: 4000,
            memory: 1 << 34,
            ..Default::default()
        },
        allowed_pods: 110,
        ..Default::default()
    }
}

/// A cache of `nodes` with each `(pod, node)` bound.
pub fn cache(nodes: Vec<NodeInfo>, pods: &[(&PodInfo, &str)]) -> Cache {
    let mut c = Cache::default();
    for n in nodes {
        c.upsert_node(n);
    }
    for (p, n) in pods {
        c.set_bound(&p.uid, Placement::new(p, n));
    }
    c
}
