//! The host ports a pod asks for and the per-node set of ports in use (upstream's `HostPortInfo`
//! in `framework/types.go`): a pod's are read once into its `PodInfo`, a node's kept in its
//! `Usage`, and the `NodePorts` filter compares the two. A leaf below the pod and node infos.
//!
//! As upstream, only `spec.containers` count (not init containers), a missing protocol is TCP,
//! and ports below 1 are not host ports. The used set is keyed by protocol and port first, so one
//! check costs one lookup per requested port however many pods or IPs the node has. Unlike
//! upstream's set, each entry counts its users, so that when two pods hold the same port (bound
//! with `nodeName`, past the scheduler) the port stays taken until both are gone.

use k8s_openapi::api::core::v1::PodSpec;
use std::collections::HashMap;

/// Upstream's `DefaultBindAllHostIP`.
const ANY_IP: &str = "0.0.0.0";

/// One host port a container asks for, with upstream's defaults applied.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// `hostIP`, `0.0.0.0` when unset.
    pub ip: String,
    /// `protocol`, `TCP` when unset.
    pub protocol: String,
    /// `hostPort`, always positive.
    pub port: i32,
}

impl HostPort {
    /// A host port with upstream's defaults for an empty IP or protocol.
    pub fn new(ip: &str, protocol: &str, port: i32) -> Self {
        let or = |v: &str, default: &str| if v.is_empty() { default } else { v }.to_string();
        Self {
            ip: or(ip, ANY_IP),
            protocol: or(protocol, "TCP"),
            port,
        }
    }
}

/// The host ports a pod's containers request (upstream's `getContainerPorts`).
pub fn requested(spec: &PodSpec) -> Vec<HostPort> {
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|h| *h > 0)?;
            Some(HostPort::new(
                p.host_ip.as_deref().unwrap_or(""),
                p.protocol.as_deref().unwrap_or(""),
                port,
            ))
        })
        .collect()
}

/// The host ports the pods on one node hold: protocol and port, then host IP, then how many
/// pods hold it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsedPorts(HashMap<(String, i32), HashMap<String, u32>>);

impl UsedPorts {
    /// Takes `ports` (one pod's).
    pub fn add(&mut self, ports: &[HostPort]) {
        for p in ports {
            *self
                .0
                .entry((p.protocol.clone(), p.port))
                .or_default()
                .entry(p.ip.clone())
                .or_insert(0) += 1;
        }
    }

    /// Releases `ports` (one pod's).
    pub fn remove(&mut self, ports: &[HostPort]) {
        for p in ports {
            let key = (p.protocol.clone(), p.port);
            let Some(ips) = self.0.get_mut(&key) else {
                continue;
            };
            if let Some(n) = ips.get_mut(&p.ip) {
                *n -= 1;
                if *n == 0 {
                    ips.remove(&p.ip);
                }
            }
            if ips.is_empty() {
                self.0.remove(&key);
            }
        }
    }

    /// Upstream's `CheckConflict`: whether `want` overlaps a port in use.
    pub fn conflicts(&self, want: &HostPort) -> bool {
        let Some(ips) = self.0.get(&(want.protocol.clone(), want.port)) else {
            return false;
        };
        want.ip == ANY_IP || ips.contains_key(ANY_IP) || ips.contains_key(&want.ip)
    }

    /// Whether no port is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use serde_json::json;

    fn port(ip: &str, protocol: &str, port: i32) -> HostPort {
        HostPort::new(ip, protocol, port)
    }

    #[test]
    fn a_port_stays_taken_until_its_last_holder_leaves() {
        let p = [port("", "", 9100)];
        let mut u = UsedPorts::default();
        u.add(&p);
        u.add(&p);
        u.remove(&p);
        assert!(u.conflicts(&p[0]));
        u.remove(&p);
        assert!(!u.conflicts(&p[0]));
        assert!(u.is_empty(), "releasing every port leaves nothing behind");
    }

    #[test]
    fn reads_container_host_ports_only() {
        let spec: PodSpec = serde_json::from_value(json!({
            "initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 7000}]}],
            "containers": [
                {"name": "a", "ports": [
                    {"containerPort": 9100, "hostPort": 9100},
                    {"containerPort": 8080},
                    {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                ]},
                {"name": "b"},
            ],
        }))
        .unwrap();
        assert_eq!(
            requested(&spec),
            [port("0.0.0.0", "TCP", 9100), port("10.0.0.1", "UDP", 53)]
        );
    }
}
