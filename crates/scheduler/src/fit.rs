//! Upstream's `NodeResourcesFit` filter: the pod's requests must fit in what the node has left.

use crate::{node_info::Usage, resources::Resources};

/// The resources a pod lacks on a node, in upstream's order and words: `Too many pods`, then
/// `Insufficient cpu`, `memory`, `ephemeral-storage`, then each extended resource. Empty: it fits.
///
/// Like upstream, a pod that requests nothing is checked only against the pod count, and a
/// resource the pod requests zero of is never insufficient.
pub fn insufficient(
    pod: &Resources,
    allocatable: &Resources,
    allowed_pods: i64,
    used: &Usage,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if used.pods + 1 > allowed_pods {
        reasons.push("Too many pods".to_string());
    }
    if pod.is_zero() {
        return reasons;
    }
    let lacking = |want: i64, have: i64, taken: i64| want > 0 && want > have.saturating_sub(taken);
    if lacking(
        pod.milli_cpu,
        allocatable.milli_cpu,
        used.requested.milli_cpu,
    ) {
        reasons.push("Insufficient cpu".to_string());
    }
    if lacking(pod.memory, allocatable.memory, used.requested.memory) {
        reasons.push("Insufficient memory".to_string());
    }
    if lacking(
        pod.ephemeral_storage,
        allocatable.ephemeral_storage,
        used.requested.ephemeral_storage,
    ) {
        reasons.push("Insufficient ephemeral-storage".to_string());
    }
    for (name, want) in &pod.scalar {
        if lacking(*want, allocatable.scalar(name), used.requested.scalar(name)) {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_info::PodInfo;
    use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::api::resource::Quantity};

    fn res(cpu: i64, mem: i64, gpu: i64) -> Resources {
        let mut r = Resources {
            milli_cpu: cpu,
            memory: mem,
            ..Default::default()
        };
        if gpu > 0 {
            r.scalar.insert("example.com/gpu".into(), gpu);
        }
        r
    }

    fn used(cpu: i64, mem: i64, pods: i64) -> Usage {
        Usage {
            requested: res(cpu, mem, 0),
            pods,
            ..Default::default()
        }
    }

    #[test]
    fn fits_or_names_what_is_missing() {
        let node = res(4000, 8 << 30, 0);
        let cases: [(&str, Resources, Usage, i64, &[&str]); 9] = [
            (
                "fits on an empty node",
                res(1000, 1 << 30, 0),
                used(0, 0, 0),
                110,
                &[],
            ),
            ("fits exactly", res(1000, 0, 0), used(3000, 0, 3), 110, &[]),
            (
                "one millicore too many",
                res(1001, 0, 0),
                used(3000, 0, 3),
                110,
                &["Insufficient cpu"],
            ),
            (
                "memory",
                res(0, 1 << 30, 0),
                used(0, 8 << 30, 1),
                110,
                &["Insufficient memory"],
            ),
            (
                "several at once, in upstream order",
                res(5000, 9 << 30, 0),
                used(0, 0, 110),
                110,
                &["Too many pods", "Insufficient cpu", "Insufficient memory"],
            ),
            (
                "a pod without requests still takes a slot",
                res(0, 0, 0),
                used(4000, 8 << 30, 110),
                110,
                &["Too many pods"],
            ),
            (
                "a pod without requests fits a full node",
                res(0, 0, 0),
                used(4000, 8 << 30, 5),
                110,
                &[],
            ),
            (
                "an extended resource the node lacks",
                res(0, 0, 1),
                used(0, 0, 0),
                110,
                &["Insufficient example.com/gpu"],
            ),
            (
                "overcommitted node still fits a zero cpu request",
                res(0, 1, 0),
                used(9000, 0, 0),
                110,
                &[],
            ),
        ];
        for (name, pod, usage, allowed, want) in cases {
            assert_eq!(
                insufficient(&pod, &node, allowed, &usage),
                want.to_vec(),
                "{name}"
            );
        }
    }

    /// Every kind of resource upstream's `fitsRequest` checks, read from pods as the API serves
    /// them: ephemeral storage, hugepages and extended resources, an init container bigger than
    /// the app, and the pod overhead.
    #[test]
    fn every_resource_a_pod_spec_requests() {
        let node = Resources::from_list(
            &[
                ("cpu", "2"),
                ("memory", "4Gi"),
                ("ephemeral-storage", "10Gi"),
                ("hugepages-2Mi", "64Mi"),
                ("example.com/foo", "1"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect(),
        );
        let requesting = |requests: serde_json::Value, extra: serde_json::Value| {
            let mut spec = serde_json::json!({"containers": [
                {"name": "c", "image": "i", "resources": {"requests": requests}}]});
            if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
                s.extend(e.clone());
            }
            let pod: Pod = serde_json::from_value(serde_json::json!({"spec": spec})).unwrap();
            insufficient(&PodInfo::new(&pod).requests, &node, 110, &used(0, 0, 0))
        };
        use serde_json::json;
        let cases = [
            (
                "fits",
                json!({"cpu": "1", "example.com/foo": "1"}),
                json!({}),
                vec![],
            ),
            (
                "ephemeral storage",
                json!({"ephemeral-storage": "11Gi"}),
                json!({}),
                vec!["Insufficient ephemeral-storage"],
            ),
            (
                "hugepages",
                json!({"hugepages-2Mi": "128Mi", "memory": "1Gi"}),
                json!({}),
                vec!["Insufficient hugepages-2Mi"],
            ),
            (
                "extended resource",
                json!({"example.com/foo": "2"}),
                json!({}),
                vec!["Insufficient example.com/foo"],
            ),
            (
                "an init container bigger than the node",
                json!({"cpu": "100m"}),
                json!({"initContainers": [{"name": "init", "image": "i",
                    "resources": {"requests": {"cpu": "3"}}}]}),
                vec!["Insufficient cpu"],
            ),
            (
                "overhead tips it over",
                json!({"memory": "4Gi"}),
                json!({"overhead": {"memory": "1Mi"}}),
                vec!["Insufficient memory"],
            ),
        ];
        for (name, requests, extra, want) in cases {
            assert_eq!(requesting(requests, extra), want, "{name}");
        }
    }

    #[test]
    fn extended_resources_fit_when_offered() {
        let node = res(1000, 0, 2);
        let mut u = used(0, 0, 0);
        assert!(insufficient(&res(0, 0, 2), &node, 10, &u).is_empty());
        u.requested.scalar.insert("example.com/gpu".into(), 1);
        assert_eq!(
            insufficient(&res(0, 0, 2), &node, 10, &u),
            ["Insufficient example.com/gpu"]
        );
    }
}
