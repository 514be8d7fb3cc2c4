//! What a simulated node looks like: its registration object, its status (conditions, addresses,
//! nodeInfo, capacity) and its Lease, as a kubelet would write them. Pure builders over plain data.

use crate::config::{LEASE_NAMESPACE, NodeSim, SIMULATED_LABEL};
use crate::distribution::stable_hash;
use serde_json::{Value, json};
use std::net::Ipv4Addr;

/// The pressures a node reports, from the `rollwright.io/pressure` annotation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pressure {
    /// `MemoryPressure=True`.
    pub memory: bool,
    /// `DiskPressure=True`.
    pub disk: bool,
    /// `PIDPressure=True`.
    pub pid: bool,
}

impl Pressure {
    /// Reads `memory,disk,pid` (any subset, any order; unknown words are ignored).
    pub fn parse(s: &str) -> Pressure {
        let mut p = Pressure::default();
        for word in s.split(',').map(|w| w.trim().to_ascii_lowercase()) {
            match word.as_str() {
                "memory" => p.memory = true,
                "disk" => p.disk = true,
                "pid" => p.pid = true,
                _ => {}
            }
        }
        p
    }

    /// The annotation value for these pressures (empty when none).
    pub fn to_annotation(self) -> String {
        let mut parts = Vec::new();
        if self.memory {
            parts.push("memory");
        }
        if self.disk {
            parts.push("disk");
        }
        if self.pid {
            parts.push("pid");
        }
        parts.join(",")
    }
}

/// A node condition as the kubelet sets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `Ready`, `MemoryPressure`, ...
    pub kind: &'static str,
    /// `True` / `False`.
    pub status: &'static str,
    /// Upstream's reason.
    pub reason: &'static str,
    /// Upstream's message.
    pub message: &'static str,
}

/// The conditions a live kubelet reports, in upstream's order, with upstream's reasons.
pub fn conditions(p: Pressure) -> [Condition; 4] {
    let c = |kind, on: bool, t: (&'static str, &'static str), f: (&'static str, &'static str)| {
        let (reason, message) = if on { t } else { f };
        Condition {
            kind,
            status: if on { "True" } else { "False" },
            reason,
            message,
        }
    };
    [
        c(
            "MemoryPressure",
            p.memory,
            (
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
            ),
            (
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
        ),
        c(
            "DiskPressure",
            p.disk,
            ("KubeletHasDiskPressure", "kubelet has disk pressure"),
            ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ),
        c(
            "PIDPressure",
            p.pid,
            (
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
            ),
            (
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
        ),
        Condition {
            kind: "Ready",
            status: "True",
            reason: "KubeletReady",
            message: "kubelet is posting ready status",
        },
    ]
}

/// A condition as last seen on the Node object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Its type.
    pub kind: String,
    /// Its status.
    pub status: String,
    /// When it last changed.
    pub last_transition: Option<String>,
}

/// Whether the node's stored status differs from what its kubelet would report (a condition
/// with another status, or no nodeInfo yet): then the kubelet posts at once.
pub fn needs_post(observed: &[Observed], has_node_info: bool, p: Pressure) -> bool {
    !has_node_info
        || conditions(p).iter().any(|c| {
            !observed
                .iter()
                .any(|o| o.kind == c.kind && o.status == c.status)
        })
}

/// The node's InternalIP: 10.0.x.y, one per index; past 64,000 nodes (250 hosts times 256
/// subnets) the second octet counts on (10.1.x.y), so a 65,000-node cluster has no two nodes on
/// one address. Still below the pod CIDRs, which start at 10.64.
pub fn node_ip(index: u32) -> Ipv4Addr {
    let subnet = index / 250;
    Ipv4Addr::new(
        10,
        (subnet / 256).min(63) as u8,
        (subnet % 256) as u8,
        (index % 250 + 2) as u8,
    )
}

/// The node's pod CIDR, a /24 per index from 10.64.0.0.
pub fn pod_cidr(index: u32) -> (u8, u8) {
    (
        64u32.saturating_add(index / 256).min(255) as u8,
        (index % 256) as u8,
    )
}

/// Reads back an index from a pod CIDR we assigned (`10.A.B.0/24`).
pub fn index_from_cidr(cidr: &str) -> Option<u32> {
    let addr = cidr.strip_suffix("/24")?;
    let octets: Vec<u32> = addr
        .split('.')
        .map(|o| o.parse().ok())
        .collect::<Option<_>>()?;
    match octets.as_slice() {
        [10, a, b, 0] if (64..=255).contains(a) && *b < 256 => Some((a - 64) * 256 + b),
        _ => None,
    }
}

/// The Node object `run` and `ops::add` create.
pub fn registration(cfg: &NodeSim, name: &str, index: u32) -> Value {
    let zone = if cfg.zones.is_empty() {
        String::new()
    } else {
        cfg.zones[index as usize % cfg.zones.len()].clone()
    };
    let mut labels = serde_json::Map::new();
    labels.insert("beta.kubernetes.io/arch".into(), json!("amd64"));
    labels.insert("beta.kubernetes.io/os".into(), json!("linux"));
    labels.insert("kubernetes.io/arch".into(), json!("amd64"));
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    labels.insert("kubernetes.io/os".into(), json!("linux"));
    if !zone.is_empty() {
        labels.insert("topology.kubernetes.io/zone".into(), json!(zone));
    }
    labels.insert(SIMULATED_LABEL.into(), json!("true"));
    for (k, v) in &cfg.extra_labels {
        labels.insert(k.clone(), json!(v));
    }
    let (a, b) = pod_cidr(index);
    let cidr = format!("10.{a}.{b}.0/24");
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        // The registering side's capacity travels with the Node, so the simulator that runs it
        // (maybe another process, configured otherwise) keeps it.
        "status": {"capacity": default_capacity(cfg), "allocatable": default_capacity(cfg)},
    })
}

/// The capacity (and allocatable) of a node registered with `cfg`.
pub fn default_capacity(cfg: &NodeSim) -> Value {
    json!({
        "cpu": cfg.cpu,
        "memory": cfg.memory,
        "ephemeral-storage": cfg.ephemeral_storage,
        "pods": cfg.max_pods.to_string(),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    })
}

/// The conditions a kubelet posts, keeping `lastTransitionTime` of those whose status is
/// unchanged (upstream's rule), with `now` as heartbeat: all a report sends once the node has
/// its addresses, capacity and info (upstream's kubelet patches what differs from the node it
/// read, which is then the conditions' heartbeat times).
pub fn condition_list(p: Pressure, observed: &[Observed], now: &str) -> Vec<Value> {
    conditions(p)
        .iter()
        .map(|c| {
            let since = observed
                .iter()
                .find(|o| o.kind == c.kind && o.status == c.status)
                .and_then(|o| o.last_transition.clone())
                .unwrap_or_else(|| now.to_string());
            json!({"type": c.kind, "status": c.status, "reason": c.reason, "message": c.message,
                   "lastHeartbeatTime": now, "lastTransitionTime": since})
        })
        .collect()
}

/// The whole status a kubelet posts first: [`condition_list`] and the node's addresses,
/// capacity and info.
pub fn status(
    cfg: &NodeSim,
    name: &str,
    index: u32,
    p: Pressure,
    observed: &[Observed],
    now: &str,
    capacity: Option<&Value>,
) -> Value {
    let conds = condition_list(p, observed, now);
    let resources = capacity.cloned().unwrap_or_else(|| default_capacity(cfg));
    let id = |salt: &str| {
        format!(
            "{:016x}{:016x}",
            stable_hash(&[name.as_bytes(), salt.as_bytes()]),
            stable_hash(&[salt.as_bytes(), name.as_bytes()])
        )
    };
    let boot = id("boot");
    json!({
        "conditions": conds,
        "addresses": [
            {"type": "InternalIP", "address": node_ip(index).to_string()},
            {"type": "Hostname", "address": name},
        ],
        "capacity": resources.clone(),
        "allocatable": resources,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": id("machine"),
            "systemUUID": id("system"),
            "bootID": format!("{}-{}-{}-{}-{}", &boot[0..8], &boot[8..12], &boot[12..16], &boot[16..20], &boot[20..32]),
            "kernelVersion": "6.8.0-rollwright",
            "osImage": "Ubuntu 24.04.1 LTS",
            "containerRuntimeVersion": "containerd://1.7.24",
            "kubeletVersion": cfg.kubelet_version,
            "kubeProxyVersion": cfg.kubelet_version,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

/// The node's Lease as the kubelet first creates it, owned by the Node so the garbage collector
/// removes it with the node.
pub fn lease(cfg: &NodeSim, name: &str, node_uid: &str, now: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}],
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": cfg.lease_duration_seconds, "renewTime": now},
    })
}

/// `renewTime`'s MicroTime format.
pub fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

/// A Time field's format (seconds).
pub fn time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_round_trips() {
        let cases = [
            ("", Pressure::default(), ""),
            (
                "memory",
                Pressure {
                    memory: true,
                    ..Default::default()
                },
                "memory",
            ),
            (
                "pid, DISK",
                Pressure {
                    disk: true,
                    pid: true,
                    ..Default::default()
                },
                "disk,pid",
            ),
            (
                "memory,disk,pid,bogus",
                Pressure {
                    memory: true,
                    disk: true,
                    pid: true,
                },
                "memory,disk,pid",
            ),
        ];
        for (s, want, back) in cases {
            assert_eq!(Pressure::parse(s), want, "{s}");
            assert_eq!(want.to_annotation(), back);
        }
    }

    #[test]
    fn conditions_follow_pressure() {
        let c = conditions(Pressure {
            disk: true,
            ..Default::default()
        });
        let by = |k: &str| c.iter().find(|c| c.kind == k).unwrap().clone();
        assert_eq!(by("DiskPressure").status, "True");
        assert_eq!(by("DiskPressure").reason, "KubeletHasDiskPressure");
        assert_eq!(by("MemoryPressure").status, "False");
        assert_eq!(by("Ready").status, "True");
    }

    #[test]
    fn posting_is_needed_only_on_change() {
        let obs = |ready: &str, mem: &str| -> Vec<Observed> {
            [
                ("MemoryPressure", mem),
                ("DiskPressure", "False"),
                ("PIDPressure", "False"),
                ("Ready", ready),
            ]
            .iter()
            .map(|(k, s)| Observed {
                kind: k.to_string(),
                status: s.to_string(),
                last_transition: None,
            })
            .collect()
        };
        let none = Pressure::default();
        let mem = Pressure {
            memory: true,
            ..Default::default()
        };
        let cases = [
            (obs("True", "False"), true, none, false),
            (obs("True", "False"), false, none, true),
            (obs("Unknown", "Unknown"), true, none, true),
            (obs("True", "False"), true, mem, true),
            (obs("True", "True"), true, mem, false),
            (vec![], true, none, true),
        ];
        for (observed, info, p, want) in cases {
            assert_eq!(needs_post(&observed, info, p), want, "{observed:?} {p:?}");
        }
    }

    #[test]
    fn transition_times_survive_unchanged_conditions() {
        let cfg = NodeSim::default();
        let observed = vec![
            Observed {
                kind: "Ready".into(),
                status: "True".into(),
                last_transition: Some("then".into()),
            },
            Observed {
                kind: "MemoryPressure".into(),
                status: "False".into(),
                last_transition: Some("then".into()),
            },
        ];
        let s = status(
            &cfg,
            "node-0",
            0,
            Pressure {
                memory: true,
                ..Default::default()
            },
            &observed,
            "now",
            None,
        );
        let cond = |k: &str| {
            s["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == k)
                .unwrap()
                .clone()
        };
        assert_eq!(cond("Ready")["lastTransitionTime"], "then");
        assert_eq!(cond("Ready")["lastHeartbeatTime"], "now");
        assert_eq!(
            cond("MemoryPressure")["lastTransitionTime"],
            "now",
            "False -> True is a transition"
        );
        assert_eq!(s["capacity"]["pods"], "110");
        assert_eq!(s["nodeInfo"]["kubeletVersion"], "v1.32.4");
        let big = json!({"cpu": "64", "memory": "256Gi", "pods": "250"});
        let kept = status(
            &cfg,
            "node-0",
            0,
            Pressure::default(),
            &observed,
            "now",
            Some(&big),
        );
        assert_eq!(kept["capacity"], big, "a node's own capacity is kept");
        assert_eq!(kept["allocatable"], big);
    }

    #[test]
    fn addresses_and_cidrs_are_unique_per_index() {
        let mut ips = std::collections::HashSet::new();
        let mut cidrs = std::collections::HashSet::new();
        for i in 0..6000 {
            assert!(ips.insert(node_ip(i)));
            let (a, b) = pod_cidr(i);
            assert!(cidrs.insert((a, b)));
            assert_eq!(index_from_cidr(&format!("10.{a}.{b}.0/24")), Some(i));
        }
        assert_eq!(index_from_cidr("10.1.2.0/24"), None);
        assert_eq!(index_from_cidr("nonsense"), None);
        // The largest cluster the benchmark runs: every node on an address of its own.
        let all: std::collections::HashSet<_> = (0..65_000).map(node_ip).collect();
        assert_eq!(all.len(), 65_000);
    }

    #[test]
    fn registration_carries_the_labels() {
        let cfg = NodeSim::default();
        let n = registration(&cfg, "node-4", 4);
        let l = &n["metadata"]["labels"];
        assert_eq!(l["kubernetes.io/hostname"], "node-4");
        assert_eq!(l["kubernetes.io/os"], "linux");
        assert_eq!(l["kubernetes.io/arch"], "amd64");
        assert_eq!(l["topology.kubernetes.io/zone"], "zone-b");
        assert_eq!(l[SIMULATED_LABEL], "true");
        assert_eq!(n["spec"]["podCIDR"], "10.64.4.0/24");
    }
}
