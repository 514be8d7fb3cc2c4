//! The workloads a chaos run rolls out: one of each rollout strategy the controllers implement,
//! and what "rolled out" means for each (`kubectl rollout status`'s notion of done).

use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        core::v1::PodTemplateSpec,
    },
};
use serde_json::{Value, json};

/// The namespace every chaos workload lives in.
pub(crate) const NAMESPACE: &str = "chaos";

/// A workload's kind and update strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A Deployment with `replicas` and a strategy (`RollingUpdate` with surge/unavailable, or
    /// `Recreate` when `strategy` is `None`).
    Deployment {
        replicas: i32,
        strategy: Option<(&'static str, &'static str)>,
    },
    /// A DaemonSet, `RollingUpdate` with (maxSurge, maxUnavailable) or `OnDelete` when `None`.
    DaemonSet {
        rolling: Option<(&'static str, &'static str)>,
    },
    /// A StatefulSet, `RollingUpdate` with `maxUnavailable`, pods `OrderedReady` or `Parallel`.
    StatefulSet {
        replicas: i32,
        parallel: bool,
        max_unavailable: &'static str,
    },
}

/// The workload kinds as the watcher handles them alike: an object with a pod template.
pub(crate) trait Rollable:
    kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + serde::Serialize
    + Send
    + Sync
    + 'static
{
    /// The pod template of the spec.
    fn template(&self) -> Option<&PodTemplateSpec>;

    /// The status as JSON (`null` without one), to compare and print whatever the kind.
    fn status_json(&self) -> Value {
        serde_json::to_value(self)
            .ok()
            .and_then(|mut v| v.get_mut("status").map(Value::take))
            .unwrap_or_default()
    }
}

impl Rollable for Deployment {
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Rollable for DaemonSet {
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Rollable for StatefulSet {
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

/// One workload of the run.
#[derive(Clone, Debug)]
pub(crate) struct Workload {
    pub name: &'static str,
    pub kind: Kind,
}

/// The workloads, one per strategy: Deployments RollingUpdate (surge only, percentages,
/// unavailable only) and Recreate; DaemonSets RollingUpdate (unavailable, surge) and OnDelete;
/// StatefulSets RollingUpdate, OrderedReady and Parallel with maxUnavailable.
pub(crate) fn all() -> Vec<Workload> {
    let d = |name, replicas, strategy| Workload {
        name,
        kind: Kind::Deployment { replicas, strategy },
    };
    let ds = |name, rolling| Workload {
        name,
        kind: Kind::DaemonSet { rolling },
    };
    vec![
        d("roll-surge", 3, Some(("1", "0"))),
        d("roll-percent", 4, Some(("25%", "25%"))),
        d("roll-unavailable", 3, Some(("0", "1"))),
        d("recreate", 2, None),
        ds("ds-unavailable", Some(("0", "1"))),
        ds("ds-surge", Some(("1", "0"))),
        ds("ds-on-delete", None),
        Workload {
            name: "sts-ordered",
            kind: Kind::StatefulSet {
                replicas: 3,
                parallel: false,
                max_unavailable: "1",
            },
        },
        Workload {
            name: "sts-parallel",
            kind: Kind::StatefulSet {
                replicas: 4,
                parallel: true,
                max_unavailable: "50%",
            },
        },
    ]
}

/// An int-or-percent flag as JSON: a number, or the percentage string.
fn int_or_percent(s: &str) -> Value {
    s.parse::<i64>().map_or_else(|_| json!(s), |n| json!(n))
}

impl Workload {
    /// The object to create, with `image`.
    pub fn manifest(&self, image: &str) -> Value {
        let template = json!({
            "metadata": {"labels": {"app": self.name}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": image}]
            }
        });
        let selector = json!({"matchLabels": {"app": self.name}});
        let metadata = json!({"name": self.name, "namespace": NAMESPACE});
        match self.kind {
            Kind::Deployment { replicas, strategy } => {
                let strategy = match strategy {
                    Some((surge, unavailable)) => {
                        json!({"type": "RollingUpdate", "rollingUpdate": {
                        "maxSurge": int_or_percent(surge),
                        "maxUnavailable": int_or_percent(unavailable)}})
                    }
                    None => json!({"type": "Recreate"}),
                };
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
                    "spec": {"replicas": replicas, "selector": selector, "strategy": strategy,
                        "template": template}})
            }
            Kind::DaemonSet { rolling } => {
                let strategy = match rolling {
                    Some((surge, unavailable)) => {
                        json!({"type": "RollingUpdate", "rollingUpdate": {
                        "maxSurge": int_or_percent(surge),
                        "maxUnavailable": int_or_percent(unavailable)}})
                    }
                    None => json!({"type": "OnDelete"}),
                };
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata,
                    "spec": {"selector": selector, "updateStrategy": strategy,
                        "template": template}})
            }
            Kind::StatefulSet {
                replicas,
                parallel,
                max_unavailable,
            } => {
                let policy = if parallel { "Parallel" } else { "OrderedReady" };
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": metadata,
                    "spec": {"replicas": replicas, "serviceName": self.name, "selector": selector,
                        "podManagementPolicy": policy,
                        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                            "maxUnavailable": int_or_percent(max_unavailable)}},
                        "template": template}})
            }
        }
    }

    /// The merge patch that rolls the workload to `image`.
    pub fn set_image(image: &str) -> Value {
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}})
    }

    /// `Deployment/<name>`, `DaemonSet/<name>` or `StatefulSet/<name>`.
    pub fn id(&self) -> String {
        let kind = match self.kind {
            Kind::Deployment { .. } => "Deployment",
            Kind::DaemonSet { .. } => "DaemonSet",
            Kind::StatefulSet { .. } => "StatefulSet",
        };
        format!("{kind}/{}", self.name)
    }

    /// Whether an operator replaces the pods (OnDelete): the run deletes old pods itself.
    pub fn on_delete(&self) -> bool {
        matches!(self.kind, Kind::DaemonSet { rolling: None })
    }
}

/// The image of the first container of a pod template in `obj`'s spec.
pub(crate) fn image_of(spec: Option<&k8s_openapi::api::core::v1::PodTemplateSpec>) -> Option<&str> {
    spec?.spec.as_ref()?.containers.first()?.image.as_deref()
}

/// A Deployment is rolled out to `image` (`kubectl rollout status`): the latest spec observed,
/// every replica updated and available, no old pods left.
pub(crate) fn deployment_done(d: &Deployment, image: &str) -> bool {
    let Some(spec) = &d.spec else { return false };
    let Some(s) = &d.status else { return false };
    let want = spec.replicas.unwrap_or(1);
    image_of(Some(&spec.template)) == Some(image)
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == want
        && s.available_replicas.unwrap_or(0) == want
}

/// A DaemonSet is rolled out to `image` on `nodes` nodes: the latest spec observed, every node
/// running an updated, available pod.
pub(crate) fn daemon_set_done(ds: &DaemonSet, image: &str, nodes: i32) -> bool {
    let Some(spec) = &ds.spec else { return false };
    let Some(s) = &ds.status else { return false };
    image_of(Some(&spec.template)) == Some(image)
        && s.observed_generation.unwrap_or(0) >= ds.metadata.generation.unwrap_or(0)
        && s.desired_number_scheduled == nodes
        && s.updated_number_scheduled == Some(nodes)
        && s.number_available == Some(nodes)
}

/// A StatefulSet is rolled out to `image` (`kubectl rollout status`): the latest spec observed,
/// every replica updated, ready and available, and the current revision the update revision.
pub(crate) fn stateful_set_done(sts: &StatefulSet, image: &str) -> bool {
    let Some(spec) = &sts.spec else { return false };
    let Some(s) = &sts.status else { return false };
    let want = spec.replicas.unwrap_or(1);
    image_of(Some(&spec.template)) == Some(image)
        && s.observed_generation.unwrap_or(0) >= sts.metadata.generation.unwrap_or(0)
        && s.replicas == want
        && s.updated_replicas == Some(want)
        && s.ready_replicas == Some(want)
        && s.available_replicas == Some(want)
        && s.update_revision.is_some()
        && s.current_revision == s.update_revision
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_parse_as_their_kinds() {
        for w in all() {
            let m = w.manifest("app:v1");
            match w.kind {
                Kind::Deployment { .. } => {
                    let d: Deployment = serde_json::from_value(m).unwrap_or_default();
                    assert_eq!(
                        image_of(d.spec.as_ref().map(|s| &s.template)),
                        Some("app:v1")
                    );
                }
                Kind::DaemonSet { .. } => {
                    let ds: DaemonSet = serde_json::from_value(m).unwrap_or_default();
                    assert_eq!(image_of(ds.template()), Some("app:v1"));
                }
                Kind::StatefulSet { .. } => {
                    let sts: StatefulSet = serde_json::from_value(m).unwrap_or_default();
                    assert_eq!(image_of(sts.template()), Some("app:v1"));
                }
            }
        }
    }

    #[test]
    fn done_needs_the_image_observed_and_every_replica_updated_and_available() {
        let d = |image: &str,
                 observed: i64,
                 updated: i32,
                 replicas: i32,
                 available: i32|
         -> Deployment {
            serde_json::from_value(json!({
                "metadata": {"name": "d", "generation": 2},
                "spec": {"replicas": 3, "selector": {}, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}},
                "status": {"observedGeneration": observed, "updatedReplicas": updated,
                    "replicas": replicas, "availableReplicas": available}
            }))
            .unwrap_or_default()
        };
        let cases = [
            (d("app:v2", 2, 3, 3, 3), true),
            (d("app:v1", 2, 3, 3, 3), false),
            (d("app:v2", 1, 3, 3, 3), false),
            (d("app:v2", 2, 2, 3, 3), false),
            (d("app:v2", 2, 3, 4, 3), false),
            (d("app:v2", 2, 3, 3, 2), false),
        ];
        for (i, (d, want)) in cases.iter().enumerate() {
            assert_eq!(deployment_done(d, "app:v2"), *want, "case {i}");
        }
    }
}
