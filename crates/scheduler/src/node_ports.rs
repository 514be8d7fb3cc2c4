//! Upstream's `NodePorts` filter (`pkg/scheduler/framework/plugins/nodeports`): a pod fits only
//! if none of its containers' `hostPort`s is already taken on the node for the same protocol and
//! an overlapping host IP: `0.0.0.0` (or an empty `hostIP`) overlaps every IP. The ports
//! themselves, and the per-node set they are checked against, are [`crate::host_ports`].

use crate::host_ports::{HostPort, UsedPorts};

/// The reason upstream gives for a node where a requested host port is taken.
pub const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The filter: every requested port must be free.
pub fn fits(want: &[HostPort], used: &UsedPorts) -> bool {
    want.iter().all(|p| !used.conflicts(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(ip: &str, protocol: &str, port: i32) -> HostPort {
        HostPort::new(ip, protocol, port)
    }

    fn used(ports: &[HostPort]) -> UsedPorts {
        let mut u = UsedPorts::default();
        u.add(ports);
        u
    }

    /// Upstream's `TestNodePorts` and `TestHostPortInfo_Check` cases.
    #[test]
    fn conflicts_as_upstream() {
        let cases = [
            ("nothing used", vec![], port("", "UDP", 8080), false),
            (
                "same udp port",
                vec![port("127.0.0.1", "UDP", 8080)],
                port("127.0.0.1", "UDP", 8080),
                true,
            ),
            (
                "other protocol",
                vec![port("127.0.0.1", "UDP", 8080)],
                port("127.0.0.1", "TCP", 8080),
                false,
            ),
            (
                "other port",
                vec![port("127.0.0.1", "TCP", 8001)],
                port("127.0.0.1", "TCP", 8080),
                false,
            ),
            (
                "other ip",
                vec![port("127.0.0.2", "TCP", 8080)],
                port("127.0.0.1", "TCP", 8080),
                false,
            ),
            (
                "any ip wanted conflicts with a specific one",
                vec![port("127.0.0.1", "TCP", 8080)],
                port("0.0.0.0", "TCP", 8080),
                true,
            ),
            (
                "any ip used conflicts with a specific one",
                vec![port("0.0.0.0", "TCP", 8080)],
                port("10.0.0.1", "TCP", 8080),
                true,
            ),
            (
                "empty ip and protocol mean any ip and tcp",
                vec![port("", "", 9100)],
                port("127.0.0.1", "TCP", 9100),
                true,
            ),
            (
                "sctp is its own protocol",
                vec![port("", "SCTP", 9100)],
                port("", "", 9100),
                false,
            ),
        ];
        for (name, held, want, conflict) in cases {
            assert_eq!(used(&held).conflicts(&want), conflict, "{name}");
            assert_eq!(fits(&[want], &used(&held)), !conflict, "{name}");
        }
    }
}
