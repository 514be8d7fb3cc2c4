//! Simulated nodes as the rest of the control plane sees them: the label that marks one, and
//! the addresses that belong to one (its own and its pods'). Those addresses belong to no
//! process: nothing may dial them, since on a developer's machine the traffic would leave for
//! whatever answers on the network.

use std::net::IpAddr;

use serde_json::Value;

/// The label that marks a node as simulated: the node simulator drives every node carrying it,
/// including nodes created later by anyone through the API.
pub const LABEL: &str = "rollwright.io/simulated";

/// Whether `node` (a Node object) is simulated.
pub fn is_simulated(node: &Value) -> bool {
    node.pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL))
        .and_then(Value::as_str)
        == Some("true")
}

/// [`owns_address`] of a Node given as JSON, reading only the fields it needs (no whole
/// `Value` is built: the API server asks this of every node before each dial).
pub fn json_owns_address(node: &[u8], ip: IpAddr) -> bool {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Node {
        metadata: Meta,
        spec: Value,
        status: Status,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Meta {
        labels: Value,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Status {
        addresses: Value,
    }
    let Ok(n) = serde_json::from_slice::<Node>(node) else {
        return false;
    };
    let node = serde_json::json!({"metadata": {"labels": n.metadata.labels}, "spec": n.spec,
        "status": {"addresses": n.status.addresses}});
    owns_address(&node, ip)
}

/// Whether `ip` is an address of simulated node `node`: one of its `status.addresses`, or in
/// one of its pod CIDRs (`spec.podCIDRs`, or `spec.podCIDR` alone).
pub fn owns_address(node: &Value, ip: IpAddr) -> bool {
    if !is_simulated(node) {
        return false;
    }
    let addresses = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("address").and_then(Value::as_str));
    let cidrs = node
        .pointer("/spec/podCIDRs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .chain(node.pointer("/spec/podCIDR").and_then(Value::as_str));
    addresses
        .filter_map(|a| a.parse::<IpAddr>().ok())
        .any(|a| a == ip)
        || cidrs.into_iter().any(|c| in_cidr(c, ip))
}

/// Whether `ip` lies in `cidr` (`10.64.3.0/24`, `fd00::/64`); a malformed CIDR holds nothing.
fn in_cidr(cidr: &str, ip: IpAddr) -> bool {
    let Some((net, bits)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(simulated: bool) -> Value {
        json!({"metadata": {"name": "node-5", "labels": {LABEL: simulated.to_string()}},
               "spec": {"podCIDR": "10.64.5.0/24", "podCIDRs": ["10.64.5.0/24", "fd00:5::/64"]},
               "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                                        {"type": "Hostname", "address": "node-5"}]}})
    }

    #[test]
    fn a_simulated_node_owns_its_address_and_its_pods() {
        let n = node(true);
        for ip in ["10.64.5.2", "10.64.5.255", "10.0.0.7", "fd00:5::9"] {
            assert!(owns_address(&n, ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.64.6.2", "127.0.0.1", "10.0.0.8", "fd00:6::1"] {
            assert!(!owns_address(&n, ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn the_json_form_reads_the_same_fields() {
        let n = node(true);
        let bytes = serde_json::to_vec(&n).unwrap();
        for ip in ["10.64.5.2", "10.0.0.7", "10.64.6.2"] {
            let ip = ip.parse().unwrap();
            assert_eq!(json_owns_address(&bytes, ip), owns_address(&n, ip));
        }
        assert!(!json_owns_address(
            b"not json",
            "10.64.5.2".parse().unwrap()
        ));
    }

    #[test]
    fn a_real_node_owns_nothing_here() {
        assert!(!owns_address(&node(false), "10.64.5.2".parse().unwrap()));
        assert!(!in_cidr("10.64.5.0", "10.64.5.1".parse().unwrap()));
        assert!(in_cidr("0.0.0.0/0", "192.0.2.1".parse().unwrap()));
    }
}
