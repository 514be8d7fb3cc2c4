//! Upstream's `NodeVolumeLimits` filter (`pkg/scheduler/framework/plugins/nodevolumelimits/csi.go`):
//! a node may attach only so many volumes of each CSI driver, as its CSINode says
//! (`spec.drivers[].allocatable.count`) or, from older kubelets, its allocatable
//! `attachable-volumes-csi-<driver>`. A pod whose new volumes would pass a driver's limit does not
//! fit (`node(s) exceed max volume count`); volumes the node already attaches (the same claim in
//! another pod) do not count twice.
//!
//! Each claim (or generic ephemeral volume's claim) is resolved to its driver and volume handle
//! through its bound PersistentVolume's `csi` source, or, while unbound, its StorageClass's
//! provisioner. Unlike upstream, in-tree volumes are not translated to their CSI drivers (no
//! simulated node runs in-tree plugins), and limits are keyed by driver name, so an allocatable
//! limit for a driver name too long for a resource name (hashed by upstream) is not read.

use crate::{cache::Cache, node_info::NodeInfo, pod_info::PodInfo};
use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::{CSINode, StorageClass},
};
use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

/// Upstream's `ErrReasonMaxVolumeCountExceeded`.
pub const REASON: &str = "node(s) exceed max volume count";

/// Upstream's `CSIAttachLimitPrefix`.
const ALLOCATABLE_PREFIX: &str = "attachable-volumes-csi-";

/// The objects a claim resolves through.
pub struct Objects<'a> {
    /// A claim by namespace and name.
    pub claim: &'a dyn Fn(&str, &str) -> Option<Arc<PersistentVolumeClaim>>,
    /// A volume by name.
    pub volume: &'a dyn Fn(&str) -> Option<Arc<PersistentVolume>>,
    /// A storage class by name.
    pub class: &'a dyn Fn(&str) -> Option<Arc<StorageClass>>,
    /// A node's CSINode by node name.
    pub csi_node: &'a dyn Fn(&str) -> Option<Arc<CSINode>>,
}

/// A volume as the limit counts it: its unique name (`driver/handle`) and its driver.
type Attachable = (String, String);

/// What the PreFilter computed: the pod's own volumes, the CSINode limits, and the volumes each
/// node attaches for its pods (kept per pod so that preemption can take pods away).
#[derive(Clone, Debug, Default)]
pub struct VolumeLimits {
    new: Vec<Attachable>,
    csi_limits: HashMap<String, HashMap<String, i64>>,
    attached: HashMap<String, HashMap<String, (String, u32)>>,
    by_pod: HashMap<String, Vec<Attachable>>,
}

/// The claims a pod attaches: its `persistentVolumeClaim`s and, for each generic ephemeral
/// volume, the claim named `<pod>-<volume>`.
fn attachable_claims(pod: &PodInfo) -> impl Iterator<Item = &String> {
    pod.claims.iter().chain(&pod.ephemeral_claims)
}

/// Upstream's `getCSIDriverInfo`: the driver and volume handle of a claim.
fn resolve(namespace: &str, name: &str, objects: &Objects) -> Option<Attachable> {
    let claim = (objects.claim)(namespace, name)?;
    let bound = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .filter(|v| !v.is_empty());
    if let Some(pv) = bound.and_then(|v| (objects.volume)(v)) {
        let csi = pv.spec.as_ref()?.csi.as_ref()?;
        return Some((
            format!("{}/{}", csi.driver, csi.volume_handle),
            csi.driver.clone(),
        ));
    }
    let class = crate::volume_zone::claim_class(&claim);
    let provisioner = (objects.class)(class)?.provisioner.clone();
    // Upstream prefixes a random string per scheduler; only equality between uses matters.
    Some((
        format!("{provisioner}/unbound-{namespace}/{name}"),
        provisioner,
    ))
}

impl VolumeLimits {
    /// Upstream's PreFilter and the lookups its Filter makes: `None` when the pod attaches no
    /// claim (the plugin skips it).
    pub fn new(pod: &PodInfo, cache: &Cache, objects: &Objects) -> Option<Self> {
        attachable_claims(pod).next()?;
        let mut state = Self {
            new: attachable_claims(pod)
                .filter_map(|c| resolve(&pod.namespace, c, objects))
                .collect(),
            ..Default::default()
        };
        for node in cache.nodes() {
            let Some(csi) = (objects.csi_node)(&node.info.name) else {
                continue;
            };
            let limits: HashMap<String, i64> = csi
                .spec
                .drivers
                .iter()
                .filter_map(|d| {
                    let count = d.allocatable.as_ref()?.count?;
                    Some((d.name.clone(), i64::from(count)))
                })
                .collect();
            if !limits.is_empty() {
                state.csi_limits.insert(node.info.name.clone(), limits);
            }
        }
        for (existing, node) in cache.pods_with_claims() {
            let volumes: Vec<Attachable> = attachable_claims(existing)
                .filter_map(|c| resolve(&existing.namespace, c, objects))
                .collect();
            state.by_pod.insert(existing.uid.clone(), volumes);
            state.update(existing, node, 1);
        }
        Some(state)
    }

    /// Takes `existing`'s volumes off `node` (`delta` -1) or puts them back (+1).
    pub fn update(&mut self, existing: &PodInfo, node: &str, delta: i64) {
        let Some(volumes) = self.by_pod.get(&existing.uid) else {
            return;
        };
        let attached = self.attached.entry(node.to_string()).or_default();
        for (unique, driver) in volumes {
            if delta > 0 {
                attached
                    .entry(unique.clone())
                    .or_insert_with(|| (driver.clone(), 0))
                    .1 += 1;
            } else if let Some(e) = attached.get_mut(unique) {
                e.1 -= 1;
                if e.1 == 0 {
                    attached.remove(unique);
                }
            }
        }
    }

    /// The filter: for every driver with a limit on `node`, the volumes it attaches plus the
    /// pod's new ones must stay within it.
    pub fn fits(&self, node: &NodeInfo) -> bool {
        let mut limits: HashMap<&str, i64> = node
            .allocatable
            .scalar
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(ALLOCATABLE_PREFIX)?, *v)))
            .collect();
        if let Some(csi) = self.csi_limits.get(&node.name) {
            limits.extend(csi.iter().map(|(k, v)| (k.as_str(), *v)));
        }
        if limits.is_empty() {
            return true;
        }
        let attached = self.attached.get(&node.name);
        let mut new: HashMap<&str, HashSet<&str>> = HashMap::new();
        for (unique, driver) in &self.new {
            if !attached.is_some_and(|a| a.contains_key(unique)) {
                new.entry(driver).or_default().insert(unique);
            }
        }
        new.iter().all(|(driver, volumes)| {
            let Some(max) = limits.get(driver) else {
                return true;
            };
            let current = attached.map_or(0, |a| a.values().filter(|(d, _)| d == driver).count());
            (current + volumes.len()) as i64 <= *max
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::testing;
    use serde_json::json;

    fn claim(volume: &str, class: &str) -> Arc<PersistentVolumeClaim> {
        Arc::new(
            serde_json::from_value(
                json!({"spec": {"volumeName": volume, "storageClassName": class}}),
            )
            .unwrap(),
        )
    }

    fn mounting(name: &str, claims: &[&str]) -> PodInfo {
        let volumes: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        testing::pod(name, json!({}), 100, json!({"volumes": volumes}))
    }

    #[test]
    fn csinode_counts_limit_attachments() {
        let claims: HashMap<&str, Arc<PersistentVolumeClaim>> = [
            ("one", claim("pv-1", "")),
            ("two", claim("pv-2", "")),
            ("three", claim("pv-3", "")),
            ("fresh", claim("", "fast")),
            ("other", claim("pv-other", "")),
        ]
        .into();
        let pv = |driver: &str, handle: &str| {
            Arc::new(
                serde_json::from_value::<PersistentVolume>(json!({
                    "spec": {"csi": {"driver": driver, "volumeHandle": handle}}
                }))
                .unwrap(),
            )
        };
        let volumes: HashMap<&str, Arc<PersistentVolume>> = [
            ("pv-1", pv("ebs.csi.aws.com", "vol-1")),
            ("pv-2", pv("ebs.csi.aws.com", "vol-2")),
            ("pv-3", pv("ebs.csi.aws.com", "vol-3")),
            ("pv-other", pv("other.csi", "x")),
        ]
        .into();
        let class = Arc::new(
            serde_json::from_value::<StorageClass>(json!({"provisioner": "ebs.csi.aws.com"}))
                .unwrap(),
        );
        let csi = Arc::new(
            serde_json::from_value::<CSINode>(
                json!({"metadata": {"name": "a"}, "spec": {"drivers": [
                    {"name": "ebs.csi.aws.com", "nodeID": "a", "allocatable": {"count": 2}},
                ]}}),
            )
            .unwrap(),
        );
        let objects = Objects {
            claim: &|_, n| claims.get(n).cloned(),
            volume: &|n| volumes.get(n).cloned(),
            class: &|_| Some(class.clone()),
            csi_node: &|n| (n == "a").then(|| csi.clone()),
        };
        let holder = mounting("holder", &["one"]);
        let c = testing::cache(
            vec![testing::node("a", "z"), testing::node("b", "z")],
            &[(&holder, "a")],
        );
        let verdict = |p: &PodInfo, node: usize| {
            VolumeLimits::new(p, &c, &objects)
                .unwrap()
                .fits(&c.nodes()[node].info)
        };
        assert!(
            verdict(&mounting("p", &["two"]), 0),
            "one attached, one new: 2 of 2"
        );
        assert!(!verdict(&mounting("p", &["two", "three"]), 0), "3 of 2");
        assert!(
            verdict(&mounting("p", &["one", "two"]), 0),
            "a volume the node attaches already does not count twice"
        );
        assert!(
            !verdict(&mounting("p", &["two", "fresh"]), 0),
            "unbound claims count by class"
        );
        assert!(
            verdict(&mounting("p", &["other", "two"]), 0),
            "other drivers have no limit"
        );
        assert!(
            verdict(&mounting("p", &["two", "three"]), 1),
            "no CSINode, no limit"
        );
        assert!(VolumeLimits::new(&PodInfo::default(), &c, &objects).is_none());

        let mut state = VolumeLimits::new(&mounting("p", &["two", "three"]), &c, &objects).unwrap();
        state.update(&holder, "a", -1);
        assert!(
            state.fits(&c.nodes()[0].info),
            "preempting the holder detaches its volume"
        );

        let mut legacy = testing::node("b", "z");
        legacy
            .allocatable
            .scalar
            .insert("attachable-volumes-csi-ebs.csi.aws.com".into(), 1);
        assert!(
            !VolumeLimits::new(&mounting("p", &["two", "three"]), &c, &objects)
                .unwrap()
                .fits(&legacy),
            "an allocatable limit counts too"
        );
    }
}
