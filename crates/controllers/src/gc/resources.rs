//! The kinds the garbage collector watches, and how an owner reference's `apiVersion`/`kind`
//! resolves to one of them. Upstream discovers every deletable resource; this server serves a
//! fixed set, so the table is fixed (and configurable for a real cluster).

use kube::{
    api::{ApiResource, GroupVersionKind},
    core::gvk::ParseGroupVersionError,
};

/// One kind the collector watches: owners and dependents of it are graph nodes.
#[derive(Clone, Debug)]
pub struct Kind {
    /// How to reach it through the API.
    pub resource: ApiResource,
    /// Whether its objects live in a namespace (a cluster-scoped owner is looked up without one).
    pub namespaced: bool,
}

impl Kind {
    /// A kind from its `apiVersion` (`v1`, `apps/v1`), `Kind`, plural and scope.
    pub fn new(
        api_version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
    ) -> Result<Self, ParseGroupVersionError> {
        let gv: kube::core::GroupVersion = api_version.parse()?;
        let gvk = GroupVersionKind::gvk(&gv.group, &gv.version, kind);
        Ok(Self {
            resource: ApiResource::from_gvk_with_plural(&gvk, plural),
            namespaced,
        })
    }

    /// Whether an owner reference with this `apiVersion` and `kind` points at this kind. Like
    /// upstream, only group and kind matter: a reference may name another version of the group.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        self.resource.kind == kind && self.resource.group == group
    }
}

/// The kinds this API server serves that take part in ownership: the workloads and what they
/// own, and nodes (cluster-scoped owners are allowed). Namespaces, events and leases are not
/// owned by anything here, as upstream's collector ignores them in practice. Jobs and CronJobs
/// are here because an owner the collector does not watch is never released: a Job deleted with
/// `Orphan` (batch/v1's default in upstream) or `Foreground` would keep its finalizer forever,
/// and a Job deleted in the background would leave its pods, tracking finalizer and all.
pub fn default_kinds() -> Vec<Kind> {
    let table = [
        ("v1", "Pod", "pods", true),
        (
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
        ),
        ("v1", "Node", "nodes", false),
        (
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            true,
        ),
        ("apps/v1", "ReplicaSet", "replicasets", true),
        ("apps/v1", "Deployment", "deployments", true),
        ("apps/v1", "StatefulSet", "statefulsets", true),
        ("apps/v1", "DaemonSet", "daemonsets", true),
        ("apps/v1", "ControllerRevision", "controllerrevisions", true),
        ("batch/v1", "Job", "jobs", true),
        ("batch/v1", "CronJob", "cronjobs", true),
    ];
    table
        .into_iter()
        .filter_map(|(v, k, p, n)| Kind::new(v, k, p, n).ok())
        .collect()
}

/// The watched kind an owner reference points at, if any.
pub fn resolve<'a>(kinds: &'a [Kind], api_version: &str, kind: &str) -> Option<&'a Kind> {
    kinds.iter().find(|k| k.matches(api_version, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_references_resolve_by_group_and_kind() {
        let kinds = default_kinds();
        assert_eq!(kinds.len(), 11);
        let table = [
            ("apps/v1", "ReplicaSet", Some(("apps", "replicasets", true))),
            (
                "apps/v1beta2",
                "Deployment",
                Some(("apps", "deployments", true)),
            ),
            ("v1", "Node", Some(("", "nodes", false))),
            ("v1", "Pod", Some(("", "pods", true))),
            ("batch/v1", "Job", Some(("batch", "jobs", true))),
            ("batch/v1", "CronJob", Some(("batch", "cronjobs", true))),
            ("v1", "Job", None),
            ("v1", "ReplicaSet", None),
        ];
        for (av, kind, want) in table {
            let got = resolve(&kinds, av, kind).map(|k| {
                (
                    k.resource.group.as_str(),
                    k.resource.plural.as_str(),
                    k.namespaced,
                )
            });
            assert_eq!(got, want, "{av} {kind}");
        }
    }
}
