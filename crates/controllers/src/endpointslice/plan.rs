//! Which EndpointSlices to create, update and delete so that a Service's slices hold exactly
//! its desired endpoints: upstream's `reconcileByAddressType`, simplified but with its rules.
//! Endpoints are grouped by their resolved ports (one slice never mixes port sets); an
//! endpoint stays in the slice that holds it when it can, so that a pod's change rewrites one
//! slice; new endpoints fill the room of existing slices before new slices are made; a slice
//! holds at most [`MAX_ENDPOINTS`]; a slice left empty is deleted; and a Service without any
//! endpoint keeps exactly one empty placeholder slice, as upstream.

use k8s_openapi::{
    api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use std::collections::{BTreeMap, BTreeSet};

/// Most endpoints in one slice (upstream's `--max-endpoints-per-slice` default).
pub const MAX_ENDPOINTS: usize = 100;

/// The writes that bring the slices to the desired state.
#[derive(Debug, Default)]
pub struct Plan {
    /// New slices (with `generateName`).
    pub create: Vec<EndpointSlice>,
    /// Existing slices with new content (their `resourceVersion` kept).
    pub update: Vec<EndpointSlice>,
    /// Names of slices to delete.
    pub delete: Vec<String>,
}

impl Plan {
    /// Whether nothing needs writing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

type PortKey = Vec<(Option<String>, Option<i32>, Option<String>, Option<String>)>;

/// The comparable form of a port list (order does not matter).
fn ports_key(ports: &[EndpointPort]) -> PortKey {
    let mut key: PortKey = ports
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.port,
                p.protocol.clone(),
                p.app_protocol.clone(),
            )
        })
        .collect();
    key.sort();
    key
}

/// An endpoint's identity: its pod's UID, else its first address.
fn endpoint_key(e: &Endpoint) -> String {
    e.target_ref
        .as_ref()
        .and_then(|r| r.uid.clone())
        .or_else(|| e.addresses.first().cloned())
        .unwrap_or_default()
}

/// The plan turning `existing` (the Service's managed slices) into `desired`: endpoints per
/// port set. `meta` is what every slice's metadata says (namespace, `generateName`, labels,
/// owner reference); `address_type` is the slices' address family.
pub fn plan(
    existing: &[EndpointSlice],
    desired: Vec<(Vec<EndpointPort>, Vec<Endpoint>)>,
    meta: &ObjectMeta,
    address_type: &str,
) -> Plan {
    let mut out = Plan::default();
    let mut existing: Vec<&EndpointSlice> = existing.iter().collect();
    existing.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let new_slice = |ports: &[EndpointPort], endpoints: Vec<Endpoint>| EndpointSlice {
        metadata: ObjectMeta {
            name: None,
            resource_version: None,
            ..meta.clone()
        },
        address_type: address_type.to_string(),
        ports: (!ports.is_empty()).then(|| ports.to_vec()),
        endpoints,
    };
    let metadata_ok = |s: &EndpointSlice| {
        s.metadata.labels == meta.labels
            && s.metadata.owner_references == meta.owner_references
            && s.address_type == address_type
    };

    let desired: Vec<(Vec<EndpointPort>, Vec<Endpoint>)> =
        desired.into_iter().filter(|(_, e)| !e.is_empty()).collect();
    if desired.is_empty() {
        // The placeholder: one slice without ports or endpoints.
        let placeholder = existing
            .iter()
            .find(|s| s.endpoints.is_empty() && s.ports.as_deref().unwrap_or_default().is_empty());
        match placeholder {
            Some(p) if metadata_ok(p) => {}
            Some(p) => out
                .update
                .push(rewrite(p, meta, address_type, None, Vec::new())),
            None => out.create.push(new_slice(&[], Vec::new())),
        }
        let kept = placeholder.and_then(|p| p.metadata.name.clone());
        out.delete = existing
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .filter(|n| Some(n) != kept.as_ref())
            .collect();
        return out;
    }

    let mut used: BTreeSet<String> = BTreeSet::new();
    for (ports, endpoints) in desired {
        let key = ports_key(&ports);
        let mut wanted: BTreeMap<String, Endpoint> = BTreeMap::new();
        let mut order: Vec<String> = Vec::new();
        for e in endpoints {
            let k = endpoint_key(&e);
            if wanted.insert(k.clone(), e).is_none() {
                order.push(k);
            }
        }
        // Keep each wanted endpoint where it is.
        let mut slices: Vec<(&EndpointSlice, Vec<Endpoint>)> = Vec::new();
        for s in existing
            .iter()
            .filter(|s| ports_key(s.ports.as_deref().unwrap_or_default()) == key)
        {
            let mut kept = Vec::new();
            for e in &s.endpoints {
                if let Some(want) = wanted.remove(&endpoint_key(e)) {
                    kept.push(want);
                }
            }
            slices.push((s, kept));
        }
        // Fill the room of existing slices, then make new ones.
        let mut rest = order.into_iter().filter_map(|k| wanted.remove(&k));
        for (_, kept) in slices.iter_mut().filter(|(_, k)| !k.is_empty()) {
            while kept.len() < MAX_ENDPOINTS {
                match rest.next() {
                    Some(e) => kept.push(e),
                    None => break,
                }
            }
        }
        let rest: Vec<Endpoint> = rest.collect();
        for (s, kept) in slices {
            let Some(name) = s.metadata.name.clone() else {
                continue;
            };
            used.insert(name.clone());
            if kept.is_empty() {
                out.delete.push(name);
            } else if kept != s.endpoints || !metadata_ok(s) {
                out.update
                    .push(rewrite(s, meta, address_type, Some(&ports), kept));
            }
        }
        for chunk in rest.chunks(MAX_ENDPOINTS) {
            out.create.push(new_slice(&ports, chunk.to_vec()));
        }
    }
    // Slices of port sets no longer wanted.
    out.delete.extend(
        existing
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .filter(|n| !used.contains(n)),
    );
    out
}

/// `slice` with `endpoints`, the ports given and the metadata `meta` says, keeping its name
/// and version.
fn rewrite(
    slice: &EndpointSlice,
    meta: &ObjectMeta,
    address_type: &str,
    ports: Option<&[EndpointPort]>,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    let mut next = slice.clone();
    next.metadata.labels = meta.labels.clone();
    next.metadata.owner_references = meta.owner_references.clone();
    next.address_type = address_type.to_string();
    next.ports = ports
        .filter(|p| !p.is_empty())
        .map(<[EndpointPort]>::to_vec);
    next.endpoints = endpoints;
    next
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn ep(n: usize) -> Endpoint {
        Endpoint {
            addresses: vec![format!("10.0.{}.{}", n / 256, n % 256)],
            target_ref: Some(ObjectReference {
                uid: Some(format!("uid-{n}")),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn port(p: i32) -> Vec<EndpointPort> {
        vec![EndpointPort {
            port: Some(p),
            protocol: Some("TCP".into()),
            name: Some(String::new()),
            ..Default::default()
        }]
    }

    fn meta() -> ObjectMeta {
        ObjectMeta {
            generate_name: Some("web-".into()),
            labels: Some([("kubernetes.io/service-name".into(), "web".into())].into()),
            ..Default::default()
        }
    }

    /// The slices as the server would hold them after `plan` (names given to creates).
    fn apply(existing: Vec<EndpointSlice>, p: Plan) -> Vec<EndpointSlice> {
        let mut out: Vec<EndpointSlice> = existing
            .into_iter()
            .filter(|s| !p.delete.contains(s.metadata.name.as_ref().unwrap()))
            .map(|s| {
                p.update
                    .iter()
                    .find(|u| u.metadata.name == s.metadata.name)
                    .cloned()
                    .unwrap_or(s)
            })
            .collect();
        let n = out.len();
        for (i, mut c) in p.create.into_iter().enumerate() {
            c.metadata.name = Some(format!("web-{}", n + i));
            out.push(c);
        }
        out
    }

    #[test]
    fn endpoints_are_split_into_slices_of_at_most_100() {
        let desired = vec![(port(80), (0..250).map(ep).collect())];
        let p = plan(&[], desired, &meta(), "IPv4");
        let sizes: Vec<usize> = p.create.iter().map(|s| s.endpoints.len()).collect();
        assert_eq!(sizes, [100, 100, 50]);
        assert!(p.create.iter().all(
            |s| s.address_type == "IPv4" && s.metadata.generate_name.as_deref() == Some("web-")
        ));
    }

    #[test]
    fn a_changed_pod_rewrites_only_its_slice_and_new_pods_fill_room() {
        let slices = apply(
            Vec::new(),
            plan(
                &[],
                vec![(port(80), (0..150).map(ep).collect())],
                &meta(),
                "IPv4",
            ),
        );
        // Pod 120 changes (now not ready), pods 0..10 go, pod 150 arrives.
        let mut desired: Vec<Endpoint> = (10..151).map(ep).collect();
        desired[110].conditions = Some(Default::default());
        let p = plan(&slices, vec![(port(80), desired)], &meta(), "IPv4");
        assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
        assert_eq!(p.update.len(), 2);
        let after = apply(slices, p);
        let total: usize = after.iter().map(|s| s.endpoints.len()).sum();
        assert_eq!(total, 141);
        // Nothing to do the second time.
        let again: Vec<Endpoint> = after.iter().flat_map(|s| s.endpoints.clone()).collect();
        assert!(plan(&after, vec![(port(80), again)], &meta(), "IPv4").is_empty());
    }

    #[test]
    fn port_sets_get_their_own_slices_and_stale_ones_go() {
        let slices = apply(
            Vec::new(),
            plan(&[], vec![(port(80), vec![ep(1)])], &meta(), "IPv4"),
        );
        let p = plan(
            &slices,
            vec![(port(8080), vec![ep(1)]), (port(9090), vec![ep(2)])],
            &meta(),
            "IPv4",
        );
        assert_eq!(p.create.len(), 2);
        assert_eq!(p.delete, ["web-0"]);
    }

    #[test]
    fn no_endpoints_leaves_one_placeholder() {
        let p = plan(&[], vec![], &meta(), "IPv4");
        assert_eq!(p.create.len(), 1);
        assert!(p.create[0].endpoints.is_empty() && p.create[0].ports.is_none());
        let slices = apply(Vec::new(), p);
        assert!(plan(&slices, vec![(port(80), vec![])], &meta(), "IPv4").is_empty());
        // Once pods come, the placeholder (another port set) goes.
        let p = plan(&slices, vec![(port(80), vec![ep(1)])], &meta(), "IPv4");
        assert_eq!((p.create.len(), p.delete.len()), (1, 1));
        // And when they go, the last slice makes way for a placeholder.
        let slices = apply(slices, p);
        let p = plan(&slices, vec![], &meta(), "IPv4");
        assert_eq!((p.create.len(), p.delete.len()), (1, 1));
    }
}
