//! The `subsets` of an Endpoints object from the addresses the pods offer: upstream's
//! `RepackSubsets` (each set of ports with the addresses that serve all of them, an address
//! ready on a port if any pod offers it ready there) and `truncateEndpoints` (at most 1000
//! addresses, the `endpoints.kubernetes.io/over-capacity: truncated` annotation).
//!
//! Upstream orders subsets by a hash; here they are in a stable order (ports, then addresses)
//! so that an unchanged cluster writes nothing.

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset};
use std::collections::BTreeMap;

/// Most addresses an Endpoints object holds (upstream's `maxCapacity`).
pub const MAX_ADDRESSES: usize = 1000;

/// One pod's offer to a Service: its address, whether it counts as ready, and the ports it
/// serves (`None` for a headless Service without ports, upstream's sentinel port).
#[derive(Clone, Debug)]
pub struct Offer {
    /// The pod's address (IP, node, target reference, hostname).
    pub address: EndpointAddress,
    /// Ready (or published although not ready).
    pub ready: bool,
    /// The resolved ports, or `None` when the Service has no ports.
    pub ports: Option<Vec<EndpointPort>>,
}

/// Orders and compares ports (`EndpointPort` is neither `Ord` nor `Hash`).
type PortKey = (Option<String>, i32, Option<String>, Option<String>);
/// Identifies an address as upstream's `addressKey`: IP and the pod's UID.
type AddressKey = (String, Option<String>);

fn port_key(p: &EndpointPort) -> PortKey {
    (
        p.name.clone(),
        p.port,
        p.protocol.clone(),
        p.app_protocol.clone(),
    )
}

fn port_of(k: &PortKey) -> EndpointPort {
    EndpointPort {
        name: k.0.clone(),
        port: k.1,
        protocol: k.2.clone(),
        app_protocol: k.3.clone(),
    }
}

fn address_key(a: &EndpointAddress) -> AddressKey {
    (
        a.ip.clone(),
        a.target_ref.as_ref().and_then(|r| r.uid.clone()),
    )
}

/// The packed subsets of `offers`.
pub fn pack(offers: &[Offer]) -> Vec<EndpointSubset> {
    let mut addresses: BTreeMap<AddressKey, &EndpointAddress> = BTreeMap::new();
    // Port (None: the no-ports sentinel) -> address -> ready.
    let mut by_port: BTreeMap<Option<PortKey>, BTreeMap<AddressKey, bool>> = BTreeMap::new();
    for offer in offers {
        let key = address_key(&offer.address);
        addresses.entry(key.clone()).or_insert(&offer.address);
        let ports: Vec<Option<PortKey>> = match &offer.ports {
            None => vec![None],
            Some(ports) => ports.iter().map(|p| Some(port_key(p))).collect(),
        };
        for port in ports {
            let ready = by_port
                .entry(port)
                .or_default()
                .entry(key.clone())
                .or_insert(false);
            *ready |= offer.ready;
        }
    }
    // Ports that share exactly the same addresses (and readiness) share a subset.
    let mut by_addresses: BTreeMap<Vec<(AddressKey, bool)>, Vec<PortKey>> = BTreeMap::new();
    for (port, set) in by_port {
        let ports = by_addresses.entry(set.into_iter().collect()).or_default();
        if let Some(port) = port {
            ports.push(port);
        }
    }
    let mut subsets: Vec<(Vec<PortKey>, EndpointSubset)> = by_addresses
        .into_iter()
        .map(|(set, ports)| {
            let pick = |want: bool| {
                let list: Vec<EndpointAddress> = set
                    .iter()
                    .filter(|(_, ready)| *ready == want)
                    .filter_map(|(k, _)| addresses.get(k).map(|a| (*a).clone()))
                    .collect();
                (!list.is_empty()).then_some(list)
            };
            let subset = EndpointSubset {
                addresses: pick(true),
                not_ready_addresses: pick(false),
                ports: (!ports.is_empty()).then(|| ports.iter().map(port_of).collect()),
            };
            (ports, subset)
        })
        .collect();
    subsets.sort_by(|a, b| a.0.cmp(&b.0));
    subsets.into_iter().map(|(_, s)| s).collect()
}

/// Cuts `subsets` down to [`MAX_ADDRESSES`] as upstream's `truncateEndpoints`: not-ready
/// addresses go first; if the ready ones alone are too many, every not-ready one goes and the
/// ready ones are cut in proportion per subset. Returns whether anything was cut.
pub fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let count = |v: &Option<Vec<EndpointAddress>>| v.as_ref().map_or(0, Vec::len);
    let ready: usize = subsets.iter().map(|s| count(&s.addresses)).sum();
    let not_ready: usize = subsets.iter().map(|s| count(&s.not_ready_addresses)).sum();
    if ready + not_ready <= MAX_ADDRESSES {
        return false;
    }
    let cut_ready = ready > MAX_ADDRESSES;
    let (max, total) = if cut_ready {
        (MAX_ADDRESSES, ready)
    } else {
        (MAX_ADDRESSES - ready, not_ready)
    };
    let mut room = max;
    let last = subsets.len().saturating_sub(1);
    for (i, subset) in subsets.iter_mut().enumerate() {
        let here = if cut_ready {
            count(&subset.addresses)
        } else {
            count(&subset.not_ready_addresses)
        };
        // Each subset keeps its share (rounded up); the last takes what is left.
        let mut keep = if i < last {
            (here * max).div_ceil(total.max(1))
        } else {
            room
        };
        keep = keep.min(room);
        let list = if cut_ready {
            subset.not_ready_addresses = None;
            &mut subset.addresses
        } else {
            &mut subset.not_ready_addresses
        };
        if let Some(l) = list.as_mut() {
            l.truncate(keep);
            room -= l.len();
        }
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn offer(ip: &str, ready: bool, ports: &[(&str, i32)]) -> Offer {
        Offer {
            address: EndpointAddress {
                ip: ip.into(),
                ..Default::default()
            },
            ready,
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| EndpointPort {
                        name: Some(n.to_string()),
                        port: *p,
                        protocol: Some("TCP".into()),
                        app_protocol: None,
                    })
                    .collect(),
            ),
        }
    }

    fn ips(v: &Option<Vec<EndpointAddress>>) -> Vec<&str> {
        v.iter().flatten().map(|a| a.ip.as_str()).collect()
    }

    fn ports(s: &EndpointSubset) -> Vec<i32> {
        s.ports.iter().flatten().map(|p| p.port).collect()
    }

    #[test]
    fn pods_with_the_same_ports_share_a_subset_split_by_readiness() {
        let subsets = pack(&[
            offer("10.0.0.2", true, &[("http", 80), ("https", 443)]),
            offer("10.0.0.1", false, &[("http", 80), ("https", 443)]),
            offer("10.0.0.3", true, &[("http", 80), ("https", 443)]),
        ]);
        assert_eq!(subsets.len(), 1);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.2", "10.0.0.3"]);
        assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.0.0.1"]);
        assert_eq!(ports(&subsets[0]), [80, 443]);
    }

    #[test]
    fn a_named_port_resolving_differently_makes_its_own_subset() {
        // Two pods name "http" 8080, one names it 9090: two subsets.
        let subsets = pack(&[
            offer("10.0.0.1", true, &[("http", 8080)]),
            offer("10.0.0.2", true, &[("http", 8080)]),
            offer("10.0.0.3", true, &[("http", 9090)]),
        ]);
        assert_eq!(subsets.len(), 2);
        assert_eq!(ports(&subsets[0]), [8080]);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1", "10.0.0.2"]);
        assert_eq!(ports(&subsets[1]), [9090]);
        assert_eq!(ips(&subsets[1].addresses), ["10.0.0.3"]);
    }

    #[test]
    fn headless_without_ports_keeps_addresses_and_no_ports() {
        let mut o = offer("10.0.0.1", true, &[]);
        o.ports = None;
        let subsets = pack(&[o]);
        assert_eq!(subsets.len(), 1);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1"]);
        assert!(subsets[0].ports.is_none());
        assert!(pack(&[]).is_empty());
    }

    #[test]
    fn truncation_drops_not_ready_first_then_cuts_ready_in_proportion() {
        // n addresses in 10.<net>.0.0/16 offering `port`.
        let many = |n: usize, ready: bool, port: i32, net: u8| -> Vec<Offer> {
            (0..n)
                .map(|i| {
                    let ip = format!("10.{net}.{}.{}", i / 256, i % 256);
                    offer(&ip, ready, &[("p", port)])
                })
                .collect()
        };
        let mut offers = many(900, true, 80, 1);
        offers.extend(many(300, false, 80, 2));
        let mut subsets = pack(&offers);
        assert!(truncate(&mut subsets));
        assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), 900);
        assert_eq!(subsets[0].not_ready_addresses.as_ref().unwrap().len(), 100);

        let mut offers = many(900, true, 80, 1);
        offers.extend(many(300, true, 81, 2));
        offers.extend(many(10, false, 81, 3));
        let mut subsets = pack(&offers);
        assert!(truncate(&mut subsets));
        let total: usize = subsets.iter().map(|s| ips(&s.addresses).len()).sum();
        assert_eq!(total, MAX_ADDRESSES);
        assert_eq!(ips(&subsets[0].addresses).len(), 750);
        assert!(subsets.iter().all(|s| s.not_ready_addresses.is_none()));

        let mut small = pack(&many(3, true, 80, 1));
        assert!(!truncate(&mut small));
    }
}
