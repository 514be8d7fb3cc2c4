//! A StatefulSet pod's identity and the order pods are created and deleted in (upstream's
//! `stateful_set_utils.go` identity helpers and the `processReplica` / `processCondemned` loops of
//! `stateful_set_control.go`).
//!
//! Identity: pod `<set>-<ordinal>`, labelled `statefulset.kubernetes.io/pod-name` and
//! `apps.kubernetes.io/pod-index`, with `hostname` = the pod's name and `subdomain` = the set's
//! `serviceName`, and one volume per claim template naming the claim `<claim>-<set>-<ordinal>`.
//!
//! Order ([`plan_scaling`]): under `OrderedReady` ("monotonic") ordinals are handled from the
//! lowest up and the first one that is missing, failed, terminating or not available ends the
//! pass; surplus pods go from the highest ordinal down, one at a time, each once the previous one
//! is gone. Under `Parallel` everything happens at once.

use super::volumes;
use crate::history::CONTROLLER_REVISION_HASH;
use api::pod::controller_ref;
use k8s_openapi::{
    api::{
        apps::v1::StatefulSet,
        core::v1::{PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use std::collections::BTreeMap;

/// The label naming the pod itself, which a headless Service's per-pod selector can use.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label holding the pod's ordinal (upstream's `PodIndexLabel`, GA since 1.32).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// The name of the pod with `ordinal` in set `set`.
pub fn pod_name(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// The parent set's name and the ordinal a pod name encodes (upstream's regex `(.*)-([0-9]+)$`),
/// or `None` for a name that is not `<something>-<digits>` or whose ordinal overflows `int32`.
pub fn parent_and_ordinal(name: &str) -> Option<(&str, i32)> {
    let (parent, digits) = name.rsplit_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, digits.parse().ok()?))
}

/// The ordinal of a pod of `set`, if its name is one of the set's.
pub fn ordinal_of(set: &str, pod: &Pod) -> Option<i32> {
    let (parent, ordinal) = parent_and_ordinal(pod.metadata.name.as_deref()?)?;
    (parent == set).then_some(ordinal)
}

/// The ordinals a set keeps: `[start, start + replicas)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ordinals {
    /// `spec.ordinals.start` (0 when unset).
    pub start: i32,
    /// `spec.replicas`.
    pub replicas: i32,
}

impl Ordinals {
    /// Whether `ordinal` is one the set keeps (upstream's `podInOrdinalRange`).
    pub fn contains(self, ordinal: i32) -> bool {
        ordinal >= self.start && ordinal < self.end()
    }

    /// One past the highest ordinal kept.
    pub fn end(self) -> i32 {
        self.start.saturating_add(self.replicas.max(0))
    }

    /// The ordinals kept, lowest first.
    pub fn iter(self) -> impl DoubleEndedIterator<Item = i32> {
        self.start..self.end()
    }
}

/// Whether a pod carries the identity of its ordinal: its name is the set's and its pod-name
/// label agrees (upstream's `identityMatches`; hostname and subdomain are immutable and set at
/// creation only).
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let Some(name) = pod.metadata.name.as_deref() else {
        return false;
    };
    parent_and_ordinal(name).is_some_and(|(parent, _)| parent == set_name)
        && pod.metadata.namespace == set.metadata.namespace
        && pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_NAME_LABEL))
            .is_some_and(|v| v == name)
}

/// Whether a pod mounts every claim the set's templates call for, by the right name
/// (upstream's `storageMatches`).
pub fn storage_matches(set: &StatefulSet, pod: &Pod, ordinal: i32) -> bool {
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    volumes::template_names(set).all(|claim| {
        let want = volumes::claim_name(claim, set_name, ordinal);
        volumes.iter().any(|v| {
            v.name == claim
                && v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == want)
        })
    })
}

/// Sets the labels that carry a pod's identity (upstream's `updateIdentity`).
pub fn set_identity_labels(labels: &mut BTreeMap<String, String>, name: &str, ordinal: i32) {
    labels.insert(POD_NAME_LABEL.into(), name.into());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
}

/// Replaces the pod's volumes named like claim templates by the ordinal's claims, keeping the
/// others (upstream's `updateStorage`).
pub fn set_storage(volumes: &mut Vec<Volume>, set: &StatefulSet, ordinal: i32) {
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let claims: Vec<&str> = volumes::template_names(set).collect();
    volumes.retain(|v| !claims.contains(&v.name.as_str()));
    let mut mounted: Vec<Volume> = claims
        .iter()
        .map(|claim| Volume {
            name: (*claim).to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: volumes::claim_name(claim, set_name, ordinal),
                read_only: None,
            }),
            ..Default::default()
        })
        .collect();
    mounted.append(volumes);
    *volumes = mounted;
}

/// The pod for `ordinal` cut from `template` (the template of revision `revision`, the name
/// its pods are labelled with): the template's labels, annotations and finalizers, the set's
/// controller reference, the identity and the claims (upstream's `newVersionedStatefulSetPod`).
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, revision: &str, ordinal: i32) -> Pod {
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let name = pod_name(set_name, ordinal);
    let source = template.metadata.clone().unwrap_or_default();
    let mut labels = source.labels.unwrap_or_default();
    set_identity_labels(&mut labels, &name, ordinal);
    labels.insert(CONTROLLER_REVISION_HASH.into(), revision.into());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    spec.subdomain = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty());
    let mut volumes = spec.volumes.take().unwrap_or_default();
    set_storage(&mut volumes, set, ordinal);
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: source.annotations,
            finalizers: source.finalizers,
            owner_references: Some(vec![controller_ref(
                "apps/v1",
                "StatefulSet",
                &set.metadata,
            )]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// What ordering decides on about one ordinal's pod, derived once per sync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Phase `Failed` or `Succeeded`: it must be replaced, whatever its exit code.
    pub finished: bool,
    /// It has a `deletionTimestamp`.
    pub terminating: bool,
    /// Phase `Running`, `Ready`, and not restarting in place.
    pub ready: bool,
    /// Ready for `minReadySeconds`.
    pub available: bool,
    /// Its identity, storage or claims' ownership need fixing.
    pub needs_repair: bool,
    /// Not ready on a revision the set is leaving, at or above the partition, while a rolling
    /// update may replace it: rollwright replaces such a pod at once (upstream #67250 leaves
    /// an `OrderedReady` set stuck on it until someone deletes it by hand).
    pub replaceable: bool,
}

impl Facts {
    /// Whether the pod counts against `maxUnavailable` (upstream's `isUnavailable`).
    pub fn unavailable(&self) -> bool {
        !self.available || self.terminating
    }
}

/// One ordinal and what exists there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The ordinal.
    pub ordinal: i32,
    /// Its pod, if any.
    pub pod: Option<Facts>,
}

/// What to do with one ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Create its claims, then its pod.
    Create(i32),
    /// Delete its failed or succeeded pod, to be recreated with the same identity.
    Recreate(i32),
    /// Fix its pod's identity and storage, or its claims' ownership.
    Repair(i32),
    /// Replace its not-ready pod of an old revision (beyond upstream: #67250).
    Replace(i32),
    /// Delete its pod: the ordinal is no longer kept.
    Condemn(i32),
}

/// The scaling pass of one sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScalePlan {
    /// What to do, in order: everything but [`Step::Condemn`] before any condemnation.
    pub steps: Vec<Step>,
    /// Under `OrderedReady`, the ordinal the pass stopped at (nothing after it may happen this
    /// sync, and no rolling update step either).
    pub blocked_at: Option<i32>,
}

/// The scaling pass (upstream's `processReplica` over `replicas`, ascending, then
/// `processCondemned` over `condemned`, descending). `replicas` are the ordinals kept, lowest
/// first; `condemned` the pods beyond them, highest first. `ordered` is `OrderedReady`.
pub fn plan_scaling(ordered: bool, replicas: &[Slot], condemned: &[Slot]) -> ScalePlan {
    let mut plan = ScalePlan::default();
    for slot in replicas {
        let o = slot.ordinal;
        let Some(pod) = slot.pod else {
            plan.steps.push(Step::Create(o));
            if ordered {
                plan.blocked_at = Some(o);
                return plan;
            }
            continue;
        };
        if pod.finished {
            if !pod.terminating {
                plan.steps.push(Step::Recreate(o));
            }
            // The new pod comes on a later sync, once this one is gone from the store.
            if ordered {
                plan.blocked_at = Some(o);
                return plan;
            }
            continue;
        }
        if pod.replaceable && !pod.terminating && !pod.ready {
            plan.steps.push(Step::Replace(o));
            if ordered {
                plan.blocked_at = Some(o);
                return plan;
            }
            continue;
        }
        if ordered && (pod.terminating || !pod.ready || !pod.available) {
            plan.blocked_at = Some(o);
            return plan;
        }
        if pod.needs_repair {
            plan.steps.push(Step::Repair(o));
        }
    }
    // Claims of condemned pods get their retention ownership before the pods go.
    for slot in condemned {
        if slot.pod.is_some_and(|p| p.needs_repair) {
            plan.steps.push(Step::Repair(slot.ordinal));
        }
    }
    // Under OrderedReady the pod to delete next must be healthy, unless it is the lowest
    // unhealthy one (upstream's `firstUnavailablePod`: every kept pod is healthy by now).
    let first_unhealthy = condemned
        .iter()
        .rev()
        .find(|s| s.pod.is_some_and(|p| p.unavailable()))
        .map(|s| s.ordinal);
    for slot in condemned {
        let Some(pod) = slot.pod else { continue };
        if pod.terminating {
            if ordered {
                plan.blocked_at = Some(slot.ordinal);
                return plan;
            }
            continue;
        }
        if ordered && pod.unavailable() && first_unhealthy != Some(slot.ordinal) {
            plan.blocked_at = first_unhealthy;
            return plan;
        }
        plan.steps.push(Step::Condemn(slot.ordinal));
        if ordered {
            plan.blocked_at = Some(slot.ordinal);
            return plan;
        }
    }
    plan
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use k8s_openapi::api::{
        apps::v1::StatefulSetSpec,
        core::v1::{Container, PersistentVolumeClaim, PodSpec},
    };

    fn set(volume_claims: &[&str]) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("uid-1".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                service_name: Some("nginx".into()),
                volume_claim_templates: Some(
                    volume_claims
                        .iter()
                        .map(|n| PersistentVolumeClaim {
                            metadata: ObjectMeta {
                                name: Some(n.to_string()),
                                ..Default::default()
                            },
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn template() -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "nginx".to_string())].into()),
                annotations: Some([("a".to_string(), "b".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "nginx".into(),
                    image: Some("nginx:1.27".into()),
                    ..Default::default()
                }],
                volumes: Some(vec![
                    Volume {
                        name: "www".into(),
                        ..Default::default()
                    },
                    Volume {
                        name: "config".into(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn names_parse_back_to_parent_and_ordinal() {
        let cases = [
            ("web-0", Some(("web", 0))),
            ("web-12", Some(("web", 12))),
            ("my-web-3", Some(("my-web", 3))),
            ("web-", None),
            ("web", None),
            ("web-x1", None),
            ("web-99999999999", None),
            ("-4", Some(("", 4))),
        ];
        for (name, want) in cases {
            assert_eq!(parent_and_ordinal(name), want, "{name}");
        }
        assert_eq!(pod_name("web", 7), "web-7");
    }

    #[test]
    fn ordinals_start_where_the_spec_says() {
        let o = Ordinals {
            start: 3,
            replicas: 2,
        };
        assert_eq!(o.iter().collect::<Vec<_>>(), [3, 4]);
        assert!(!o.contains(2) && o.contains(3) && o.contains(4) && !o.contains(5));
        let none = Ordinals {
            start: 0,
            replicas: 0,
        };
        assert_eq!(none.iter().count(), 0);
    }

    #[test]
    fn a_new_pod_carries_its_identity_revision_and_claims() {
        let s = set(&["www"]);
        let pod = new_pod(&s, &template(), "web-abc", 2);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels["app"], "nginx");
        assert_eq!(labels[POD_NAME_LABEL], "web-2");
        assert_eq!(labels[POD_INDEX_LABEL], "2");
        assert_eq!(labels[CONTROLLER_REVISION_HASH], "web-abc");
        assert_eq!(pod.metadata.annotations.clone().unwrap()["a"], "b");
        let owner = &pod.metadata.owner_references.clone().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("StatefulSet", "uid-1", Some(true))
        );
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let volumes = spec.volumes.unwrap();
        let names: Vec<_> = volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["www", "config"]);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "www-web-2"
        );
        assert!(identity_matches(&s, &pod));
        assert!(storage_matches(&s, &pod, 2));
        assert!(!storage_matches(&s, &pod, 3));
    }

    #[test]
    fn identity_needs_the_name_and_its_label() {
        let s = set(&[]);
        let mut pod = new_pod(&s, &template(), "r", 0);
        assert!(identity_matches(&s, &pod));
        pod.metadata.labels.as_mut().unwrap().remove(POD_NAME_LABEL);
        assert!(!identity_matches(&s, &pod));
        let mut other = new_pod(&s, &template(), "r", 0);
        other.metadata.name = Some("db-0".into());
        assert!(!identity_matches(&s, &other));
        other.metadata.name = Some("web-0".into());
        other.metadata.namespace = Some("elsewhere".into());
        assert!(!identity_matches(&s, &other));
    }

    // ---- ordering ----

    /// One slot per character, ordinals from `start`: `_` missing, `R` ready and available,
    /// `r` ready but not yet available, `p` not ready, `x` terminating, `F` failed, `f` failed
    /// and terminating, `!` ready but needing repair, `o` not ready on an old revision that may
    /// be replaced.
    fn slots(start: i32, spec: &str) -> Vec<Slot> {
        spec.chars()
            .enumerate()
            .map(|(i, c)| {
                let ordinal = start + i as i32;
                let healthy = Facts {
                    ready: true,
                    available: true,
                    ..Default::default()
                };
                let pod = match c {
                    '_' => None,
                    'R' => Some(healthy),
                    'r' => Some(Facts {
                        available: false,
                        ..healthy
                    }),
                    'p' => Some(Facts::default()),
                    'x' => Some(Facts {
                        terminating: true,
                        ..healthy
                    }),
                    'F' => Some(Facts {
                        finished: true,
                        ..Default::default()
                    }),
                    'f' => Some(Facts {
                        finished: true,
                        terminating: true,
                        ..Default::default()
                    }),
                    '!' => Some(Facts {
                        needs_repair: true,
                        ..healthy
                    }),
                    'o' => Some(Facts {
                        replaceable: true,
                        ..Default::default()
                    }),
                    other => panic!("unknown slot {other}"),
                };
                Slot { ordinal, pod }
            })
            .collect()
    }

    /// Condemned slots are listed from the highest ordinal down, as the controller passes them.
    fn condemned(start: i32, spec: &str) -> Vec<Slot> {
        let mut s = slots(start, spec);
        s.reverse();
        s
    }

    #[test]
    fn ordered_ready_creates_and_deletes_one_ordinal_at_a_time() {
        use Step::*;
        // (case, replicas from 0, condemned from replicas.len(), want steps, want blocked)
        let cases: Vec<(&str, &str, &str, Vec<Step>, Option<i32>)> = vec![
            ("empty set: create 0", "___", "", vec![Create(0)], Some(0)),
            ("0 not ready: wait", "p__", "", vec![], Some(0)),
            (
                "0 ready, not available (minReadySeconds): wait",
                "r__",
                "",
                vec![],
                Some(0),
            ),
            ("0 available: create 1", "R__", "", vec![Create(1)], Some(1)),
            ("a gap is filled first", "R_R", "", vec![Create(1)], Some(1)),
            ("all there", "RRR", "", vec![], None),
            (
                "a failed pod is deleted, its successors wait",
                "RFR",
                "",
                vec![Recreate(1)],
                Some(1),
            ),
            (
                "a failed pod being deleted: wait",
                "RfR",
                "",
                vec![],
                Some(1),
            ),
            ("a terminating pod: wait", "Rx_", "", vec![], Some(1)),
            (
                "repairs happen in passing",
                "!R!",
                "",
                vec![Repair(0), Repair(2)],
                None,
            ),
            (
                "an old not-ready pod is replaced, not waited for",
                "RoR",
                "",
                vec![Replace(1)],
                Some(1),
            ),
            (
                "scale down from the highest ordinal, one at a time",
                "RR",
                "RRR",
                vec![Condemn(4)],
                Some(4),
            ),
            (
                "the next only once the previous is gone",
                "RR",
                "RRx",
                vec![],
                Some(4),
            ),
            (
                "nothing condemned while a kept pod is unhealthy",
                "Rp",
                "RR",
                vec![],
                Some(1),
            ),
            (
                "a healthy highest condemned pod goes even if one below is unhealthy",
                "RR",
                "pR",
                vec![Condemn(3)],
                Some(3),
            ),
            (
                "an unhealthy condemned pod waits for the lowest unhealthy one",
                "RR",
                "pp",
                vec![],
                Some(2),
            ),
            (
                "unless it is the first unhealthy one",
                "RR",
                "Rp",
                vec![Condemn(3)],
                Some(3),
            ),
            (
                "claims of condemned pods are fixed before they go",
                "RR",
                "R!",
                vec![Repair(3), Condemn(3)],
                Some(3),
            ),
        ];
        for (name, replicas, gone, want, blocked) in cases {
            let r = slots(0, replicas);
            let c = condemned(r.len() as i32, gone);
            let got = plan_scaling(true, &r, &c);
            assert_eq!(got.steps, want, "{name}");
            assert_eq!(got.blocked_at, blocked, "{name}");
        }
    }

    #[test]
    fn parallel_creates_and_deletes_everything_at_once() {
        use Step::*;
        let cases: Vec<(&str, &str, &str, Vec<Step>)> = vec![
            (
                "empty set: create all",
                "___",
                "",
                vec![Create(0), Create(1), Create(2)],
            ),
            (
                "unhealthy pods do not block",
                "p_x_",
                "",
                vec![Create(1), Create(3)],
            ),
            ("failed pods are deleted", "FfR", "", vec![Recreate(0)]),
            (
                "old not-ready pods are replaced",
                "oRo",
                "",
                vec![Replace(0), Replace(2)],
            ),
            (
                "scale down everything at once, skipping terminating ones",
                "Rp",
                "RxpR",
                vec![Condemn(5), Condemn(4), Condemn(2)],
            ),
            (
                "repairs too",
                "!",
                "!",
                vec![Repair(0), Repair(1), Condemn(1)],
            ),
        ];
        for (name, replicas, gone, want) in cases {
            let r = slots(0, replicas);
            let c = condemned(r.len() as i32, gone);
            let got = plan_scaling(false, &r, &c);
            assert_eq!(got.steps, want, "{name}");
            assert_eq!(got.blocked_at, None, "{name}");
        }
    }

    #[test]
    fn ordinals_start_anywhere() {
        let r = slots(5, "R_");
        let got = plan_scaling(true, &r, &[]);
        assert_eq!(got.steps, [Step::Create(6)]);
    }
}
