//! Resource amounts as the scheduler compares them: what a pod requests and what a node offers.
//!
//! Upstream's `NodeResourcesFit` reads CPU in millicores, memory and ephemeral storage in bytes, and
//! every other named resource (extended resources such as `example.com/gpu`, `hugepages-2Mi`) as a
//! "scalar" count. A pod's request is the larger of what its containers need together and what any
//! init container needs while it runs, plus the pod overhead.

use api::quantity::Quantity as Exact;
use k8s_openapi::{
    api::core::v1::{Container, PodSpec},
    apimachinery::pkg::api::resource::Quantity,
};
use std::collections::BTreeMap;

/// Upstream's `DefaultMilliCPURequest`: what scoring assumes a container without a CPU request uses.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Upstream's `DefaultMemoryRequest` (200 MB): the memory counterpart.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// An amount of every resource the scheduler checks, so requests and capacity can be summed and
/// compared without re-parsing quantity strings on every filter call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// CPU in thousandths of a core.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Every other resource by name, in whole units.
    pub scalar: BTreeMap<String, i64>,
}

impl Resources {
    /// Reads a `ResourceList` (requests, allocatable, overhead); malformed quantities count as
    /// zero since the API server has validated them already.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Self {
        let mut r = Resources::default();
        for (name, q) in list {
            let Ok(q) = Exact::parse(&q.0) else { continue };
            match name.as_str() {
                "cpu" => r.milli_cpu = q.milli_value(),
                "memory" => r.memory = q.value(),
                "ephemeral-storage" => r.ephemeral_storage = q.value(),
                // The pod count is a node property, checked separately.
                "pods" => {}
                other => {
                    r.scalar.insert(other.to_string(), q.value());
                }
            }
        }
        r
    }

    /// Adds `other` to these amounts.
    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        for (name, v) in &other.scalar {
            let e = self.scalar.entry(name.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }

    /// Takes `other` away from these amounts (used when a pod leaves a node).
    pub fn subtract(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_sub(other.milli_cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        for (name, v) in &other.scalar {
            let e = self.scalar.entry(name.clone()).or_insert(0);
            *e = e.saturating_sub(*v);
            if *e == 0 {
                self.scalar.remove(name);
            }
        }
    }

    /// Raises every amount to at least `other`'s (init containers run one at a time).
    pub fn raise_to(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (name, v) in &other.scalar {
            let e = self.scalar.entry(name.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// Whether nothing at all is requested; upstream then checks only the pod count.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }

    /// The amount of a scalar resource (zero when absent).
    pub fn scalar(&self, name: &str) -> i64 {
        self.scalar.get(name).copied().unwrap_or(0)
    }
}

/// What a pod needs on a node for filtering: the exact requests.
pub fn pod_requests(spec: &PodSpec) -> Resources {
    combine(spec, |c| container_requests(c, false))
}

/// What scoring assumes a pod uses: like [`pod_requests`], but a container without a CPU or
/// memory request counts upstream's defaults, so best-effort pods still spread.
pub fn pod_non_zero_requests(spec: &PodSpec) -> (i64, i64) {
    let r = combine(spec, |c| container_requests(c, true));
    (r.milli_cpu, r.memory)
}

/// Upstream's `PodRequests`: containers together (plus sidecars, i.e. restartable init
/// containers, which keep running), or the biggest init container step, whichever is larger;
/// then the overhead.
fn combine(spec: &PodSpec, per_container: impl Fn(&Container) -> Resources) -> Resources {
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(&per_container(c));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let r = per_container(c);
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
            init_peak.raise_to(&sidecars);
        } else {
            let mut step = r;
            step.add(&sidecars);
            init_peak.raise_to(&step);
        }
    }
    total.add(&sidecars);
    total.raise_to(&init_peak);
    if let Some(overhead) = &spec.overhead {
        total.add(&Resources::from_list(overhead));
    }
    total
}

fn container_requests(c: &Container, non_zero: bool) -> Resources {
    let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut r = requests.map(Resources::from_list).unwrap_or_default();
    if non_zero {
        if !requests.is_some_and(|q| q.contains_key("cpu")) {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !requests.is_some_and(|q| q.contains_key("memory")) {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn container(requests: &[(&str, &str)], sidecar: bool) -> Container {
        Container {
            name: "c".into(),
            resources: (!requests.is_empty()).then(|| ResourceRequirements {
                requests: Some(list(requests)),
                ..Default::default()
            }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    fn res(cpu: i64, mem: i64) -> Resources {
        Resources {
            milli_cpu: cpu,
            memory: mem,
            ..Default::default()
        }
    }

    #[test]
    fn reads_resource_lists() {
        let r = Resources::from_list(&list(&[
            ("cpu", "1500m"),
            ("memory", "1Gi"),
            ("ephemeral-storage", "10Gi"),
            ("pods", "110"),
            ("example.com/gpu", "2"),
        ]));
        assert_eq!(r.milli_cpu, 1500);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.ephemeral_storage, 10 << 30);
        assert_eq!(r.scalar("example.com/gpu"), 2);
        assert_eq!(
            r.scalar("pods"),
            0,
            "the pod count is not a scalar resource"
        );
    }

    #[test]
    fn pod_requests_follow_upstream() {
        struct Case {
            name: &'static str,
            containers: Vec<Container>,
            init: Vec<Container>,
            overhead: &'static [(&'static str, &'static str)],
            want: Resources,
        }
        let cases = [
            Case {
                name: "containers add up",
                containers: vec![
                    container(&[("cpu", "100m"), ("memory", "1Mi")], false),
                    container(&[("cpu", "200m")], false),
                ],
                init: vec![],
                overhead: &[],
                want: res(300, 1 << 20),
            },
            Case {
                name: "a bigger init container wins",
                containers: vec![container(&[("cpu", "100m")], false)],
                init: vec![
                    container(&[("cpu", "1")], false),
                    container(&[("cpu", "500m")], false),
                ],
                overhead: &[],
                want: res(1000, 0),
            },
            Case {
                name: "smaller init containers do not add",
                containers: vec![container(&[("cpu", "2")], false)],
                init: vec![container(&[("cpu", "1")], false)],
                overhead: &[],
                want: res(2000, 0),
            },
            Case {
                name: "sidecars run alongside later init containers and the app",
                containers: vec![container(&[("cpu", "100m")], false)],
                init: vec![
                    container(&[("cpu", "200m")], true),
                    container(&[("cpu", "1")], false),
                ],
                overhead: &[],
                want: res(1200, 0),
            },
            Case {
                name: "overhead is added",
                containers: vec![container(&[("cpu", "100m")], false)],
                init: vec![],
                overhead: &[("cpu", "50m"), ("memory", "10Mi")],
                want: res(150, 10 << 20),
            },
            Case {
                name: "nothing requested",
                containers: vec![container(&[], false)],
                init: vec![],
                overhead: &[],
                want: res(0, 0),
            },
        ];
        for c in cases {
            let spec = PodSpec {
                containers: c.containers,
                init_containers: Some(c.init),
                overhead: (!c.overhead.is_empty()).then(|| list(c.overhead)),
                ..Default::default()
            };
            assert_eq!(pod_requests(&spec), c.want, "{}", c.name);
        }
    }

    #[test]
    fn non_zero_requests_default_what_is_missing() {
        type Case = (&'static [(&'static str, &'static str)], (i64, i64));
        let cases: [Case; 3] = [
            (&[], (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)),
            (&[("cpu", "1")], (1000, DEFAULT_MEMORY_REQUEST)),
            (&[("cpu", "0"), ("memory", "1Gi")], (0, 1 << 30)),
        ];
        for (requests, want) in cases {
            let spec = PodSpec {
                containers: vec![container(requests, false)],
                ..Default::default()
            };
            assert_eq!(pod_non_zero_requests(&spec), want, "{requests:?}");
        }
    }

    #[test]
    fn arithmetic_keeps_scalars() {
        let mut a = Resources::from_list(&list(&[("cpu", "1"), ("example.com/gpu", "1")]));
        let b = Resources::from_list(&list(&[("cpu", "1"), ("example.com/gpu", "2")]));
        a.add(&b);
        assert_eq!((a.milli_cpu, a.scalar("example.com/gpu")), (2000, 3));
        a.subtract(&b);
        a.subtract(&Resources::from_list(&list(&[("example.com/gpu", "1")])));
        assert!(a.scalar.is_empty(), "zeroed scalars are dropped");
        assert!(!a.is_zero());
    }
}
