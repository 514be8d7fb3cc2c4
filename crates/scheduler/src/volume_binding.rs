//! Volume binding, as upstream's `VolumeBinding` plugin does it for the cases rollwright has:
//! a pod whose claim is missing or unbound (and not `WaitForFirstConsumer`) waits; a pod whose
//! claim is bound to a volume pinned to a node goes to that node; and a pod with unbound
//! `WaitForFirstConsumer` claims goes anywhere, its claims annotated with the chosen node
//! (`volume.kubernetes.io/selected-node`) before the pod is bound, so the provisioner puts the
//! volume there.
//!
//! Unlike upstream, the pod is bound without waiting for its volumes: the kubelet (nodesim) does
//! not start it until its claims are bound.

use crate::{
    cache::Cache,
    filter::VolumeState,
    node_volume_limits::{Objects, VolumeLimits},
    pod_info::PodInfo,
    volume_restrictions::ReadWriteOncePod,
    volume_zone::VolumeZones,
};
use futures::{StreamExt, stream};
use k8s_openapi::api::{
    core::v1::{NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod},
    storage::v1::{CSINode, StorageClass},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::Notify;

/// The annotation naming the node chosen for a `WaitForFirstConsumer` claim's first pod.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// What a pod's volumes ask of its placement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodVolumes {
    /// The node affinity of each bound volume that has one (all must hold).
    pub affinities: Vec<Vec<NodeSelectorTerm>>,
    /// `(namespace, name)` of unbound `WaitForFirstConsumer` claims, to annotate with the node.
    pub to_select: Vec<(String, String)>,
}

/// Resolves the claims `pod` mounts through the lookups, or says why it cannot be scheduled
/// yet (upstream's messages).
pub fn resolve<'a>(
    pod: &Pod,
    claim: impl Fn(&str, &str) -> Option<Arc<PersistentVolumeClaim>>,
    volume: impl Fn(&str) -> Option<Arc<PersistentVolume>>,
    class: impl Fn(&str) -> Option<Arc<StorageClass>> + 'a,
) -> Result<PodVolumes, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let mut out = PodVolumes::default();
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    for name in volumes
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
    {
        let Some(c) = claim(ns, name) else {
            return Err(format!("persistentvolumeclaim \"{name}\" not found"));
        };
        if c.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        let spec = c.spec.as_ref();
        let bound = spec
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty());
        match bound {
            Some(v) => {
                let Some(pv) = volume(v) else {
                    return Err(format!("persistentvolume \"{v}\" not found"));
                };
                if let Some(terms) = pv
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_affinity.as_ref())
                    .and_then(|a| a.required.as_ref())
                    .map(|r| r.node_selector_terms.clone())
                {
                    out.affinities.push(terms);
                }
            }
            None => {
                // The class as upstream reads it: the beta annotation before the field.
                let waits = Some(crate::volume_zone::claim_class(&c))
                    .filter(|n| !n.is_empty())
                    .and_then(&class)
                    .is_some_and(|c| {
                        c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
                    });
                if !waits {
                    return Err("pod has unbound immediate PersistentVolumeClaims".into());
                }
                let selected = c
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(SELECTED_NODE));
                if !selected {
                    out.to_select.push((ns.to_string(), name.to_string()));
                }
            }
        }
    }
    Ok(out)
}

/// Both sets of terms at once: each term of `a` combined with each of `b` (terms are ORed, the
/// requirements inside a term ANDed).
fn and_terms(a: &[NodeSelectorTerm], b: &[NodeSelectorTerm]) -> Vec<NodeSelectorTerm> {
    let join = |x: &Option<Vec<_>>, y: &Option<Vec<_>>| {
        let v: Vec<_> = x.iter().chain(y).flatten().cloned().collect();
        (!v.is_empty()).then_some(v)
    };
    a.iter()
        .flat_map(|ta| {
            b.iter().map(move |tb| NodeSelectorTerm {
                match_expressions: join(&ta.match_expressions, &tb.match_expressions),
                match_fields: join(&ta.match_fields, &tb.match_fields),
            })
        })
        .collect()
}

impl PodVolumes {
    /// Narrows the pod's required node affinity to the nodes its volumes are pinned to, so the
    /// node affinity filter keeps it there.
    pub fn constrain(&self, info: &mut PodInfo) {
        for terms in &self.affinities {
            info.required_terms = Some(match info.required_terms.take() {
                None => terms.clone(),
                Some(own) => and_terms(&own, terms),
            });
        }
    }

    /// Annotates the pod's unbound `WaitForFirstConsumer` claims with `node`.
    pub async fn select_node(&self, client: &Client, node: &str) -> Result<(), kube::Error> {
        for (ns, name) in &self.to_select {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
            let patch = json!({"metadata": {"annotations": {SELECTED_NODE: node}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }
}

/// A reflector of every `K` into `writer` that rings `changed` at each event.
fn ringing<K>(
    client: Client,
    writer: reflector::store::Writer<K>,
    changed: Arc<Notify>,
) -> stream::BoxStream<'static, ()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    reflector::reflector(
        writer,
        watcher(Api::<K>::all(client), watcher::Config::default()).default_backoff(),
    )
    .map(move |_| changed.notify_one())
    .boxed()
}

/// The claims, volumes, classes and CSINodes the scheduler reads, each a reflector store; every
/// change rings [`VolumeBinding::changed`], since a pod waiting for a claim may fit now.
#[derive(Clone)]
pub struct VolumeBinding {
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    csi_nodes: Store<CSINode>,
    changed: Arc<Notify>,
}

impl VolumeBinding {
    /// The stores, and the future that keeps them current (run it beside the scheduler).
    pub fn start(client: Client) -> (Self, impl Future<Output = ()> + Send) {
        let changed = Arc::new(Notify::new());
        let (claims, claims_w) = reflector::store();
        let (volumes, volumes_w) = reflector::store();
        let (classes, classes_w) = reflector::store();
        let (csi_nodes, csi_nodes_w) = reflector::store();
        let streams = stream::select_all([
            ringing(client.clone(), claims_w, Arc::clone(&changed)),
            ringing(client.clone(), volumes_w, Arc::clone(&changed)),
            ringing(client.clone(), classes_w, Arc::clone(&changed)),
            ringing(client, csi_nodes_w, Arc::clone(&changed)),
        ]);
        let run = async move { streams.for_each(|()| async {}).await };
        (
            Self {
                claims,
                volumes,
                classes,
                csi_nodes,
                changed,
            },
            run,
        )
    }

    /// The notifier rung on every change of a claim, volume or class.
    pub fn changed(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    /// The volume PreFilters over the stores, in upstream's order (VolumeRestrictions,
    /// NodeVolumeLimits, VolumeBinding, VolumeZone): what binding asks of the placement and what
    /// the volume filters need, or the first PreFilter's reason the pod fits nowhere.
    pub fn prefilter(
        &self,
        pod: &Pod,
        info: &PodInfo,
        cache: &Cache,
    ) -> Result<(PodVolumes, VolumeState), String> {
        if info.claims.is_empty() && info.ephemeral_claims.is_empty() {
            return Ok(Default::default());
        }
        let claim = |ns: &str, n: &str| self.claims.get(&ObjectRef::new(n).within(ns));
        let volume = |n: &str| self.volumes.get(&ObjectRef::new(n));
        let class = |n: &str| self.classes.get(&ObjectRef::new(n));
        let read_write_once_pod = ReadWriteOncePod::new(info, cache, claim)?;
        let limits = VolumeLimits::new(
            info,
            cache,
            &Objects {
                claim: &claim,
                volume: &volume,
                class: &class,
                csi_node: &|n| self.csi_nodes.get(&ObjectRef::new(n)),
            },
        );
        let binding = resolve(pod, claim, volume, class)?;
        let zones = VolumeZones::new(info, claim, volume, |n| {
            class(n).map(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
        })?;
        Ok((
            binding,
            VolumeState {
                read_write_once_pod,
                limits,
                zones,
            },
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::core::v1::{
            NodeSelector, NodeSelectorRequirement, PersistentVolumeClaimSpec,
            PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, PodSpec, Volume,
            VolumeNodeAffinity,
        },
        apimachinery::pkg::apis::meta::v1::ObjectMeta,
    };
    use std::collections::HashMap;

    fn pod(claims: &[&str]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-0".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(
                    claims
                        .iter()
                        .map(|c| Volume {
                            name: c.to_string(),
                            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                                claim_name: c.to_string(),
                                read_only: None,
                            }),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn claim(class: &str, volume: Option<&str>, selected: bool) -> Arc<PersistentVolumeClaim> {
        Arc::new(PersistentVolumeClaim {
            metadata: ObjectMeta {
                annotations: selected
                    .then(|| [(SELECTED_NODE.to_string(), "n".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some(class.into()),
                volume_name: volume.map(str::to_string),
                ..Default::default()
            }),
            status: None,
        })
    }

    fn term(key: &str, value: &str) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(vec![value.into()]),
            }]),
            match_fields: None,
        }
    }

    fn pinned(node: &str) -> Arc<PersistentVolume> {
        Arc::new(PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                node_affinity: Some(VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![term("kubernetes.io/hostname", node)],
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn class(mode: &str) -> Arc<StorageClass> {
        Arc::new(StorageClass {
            volume_binding_mode: Some(mode.into()),
            ..Default::default()
        })
    }

    #[test]
    fn claims_decide_whether_and_where() {
        let claims: HashMap<&str, Arc<PersistentVolumeClaim>> = [
            ("wffc", claim("standard", None, false)),
            ("wffc-selected", claim("standard", None, true)),
            ("immediate", claim("fast", None, false)),
            ("bound", claim("standard", Some("pv-1"), false)),
            ("lost", claim("standard", Some("pv-9"), false)),
        ]
        .into();
        let volumes: HashMap<&str, Arc<PersistentVolume>> = [("pv-1", pinned("node-2"))].into();
        let classes: HashMap<&str, Arc<StorageClass>> = [
            ("standard", class("WaitForFirstConsumer")),
            ("fast", class("Immediate")),
        ]
        .into();
        let run = |names: &[&str]| {
            resolve(
                &pod(names),
                |_, n| claims.get(n).cloned(),
                |n| volumes.get(n).cloned(),
                |n| classes.get(n).cloned(),
            )
        };
        assert_eq!(run(&[]), Ok(PodVolumes::default()));
        assert_eq!(
            run(&["missing"]),
            Err("persistentvolumeclaim \"missing\" not found".into())
        );
        assert_eq!(
            run(&["immediate"]),
            Err("pod has unbound immediate PersistentVolumeClaims".into())
        );
        assert_eq!(
            run(&["lost"]),
            Err("persistentvolume \"pv-9\" not found".into())
        );
        let got = run(&["wffc", "wffc-selected", "bound"]).unwrap();
        assert_eq!(got.to_select, [("ns".to_string(), "wffc".to_string())]);
        assert_eq!(
            got.affinities,
            [vec![term("kubernetes.io/hostname", "node-2")]]
        );
    }

    #[test]
    fn a_pinned_volume_narrows_the_pods_own_affinity() {
        let v = PodVolumes {
            affinities: vec![vec![term("kubernetes.io/hostname", "node-2")]],
            to_select: vec![],
        };
        let mut free = PodInfo::default();
        v.constrain(&mut free);
        assert_eq!(
            free.required_terms,
            Some(vec![term("kubernetes.io/hostname", "node-2")])
        );
        let mut zoned = PodInfo {
            required_terms: Some(vec![term("zone", "a"), term("zone", "b")]),
            ..Default::default()
        };
        v.constrain(&mut zoned);
        let terms = zoned.required_terms.unwrap();
        assert_eq!(terms.len(), 2);
        assert!(
            terms
                .iter()
                .all(|t| t.match_expressions.as_ref().unwrap().len() == 2)
        );
    }
}
