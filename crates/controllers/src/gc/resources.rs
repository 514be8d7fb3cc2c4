//! What the API server serves, as the garbage collector needs it (upstream's REST mapper and
//! `GetDeletableResources`): every served kind at every served version, to resolve an owner
//! reference's `apiVersion`/`kind` to a resource and a scope; and the kinds to watch, each
//! resource that supports `list`, `watch` and `delete` once, at its group's most preferred
//! version that serves it (discovery's `ServerPreferredResources`), events left out.
//!
//! Pure data built from discovery documents ([`ServedGroup`]); [`super::discovery`] reads them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
use kube::{
    api::{ApiResource, GroupVersionKind},
    core::gvk::ParseGroupVersionError,
};
use std::collections::HashSet;

/// One kind the server serves, at one version.
#[derive(Clone, Debug, PartialEq, Eq)]
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

    /// Whether an owner reference with this `apiVersion` and `kind` names this kind at this
    /// version (upstream's REST mapping of the reference's group, version and kind).
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        self.resource.kind == kind && self.resource.api_version == api_version
    }

    /// Whether this is the kind of `group`'s `kind`.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.resource.group == group && self.resource.kind == kind
    }
}

/// One API group as discovery shows it: its versions, the preferred one first, each with the
/// resources it serves (`GET /api/v1`, `GET /apis/GROUP/VERSION`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServedGroup {
    /// The group (`""` for the core group).
    pub name: String,
    /// `(version, resources)`, in order of preference.
    pub versions: Vec<(String, Vec<APIResource>)>,
}

/// Resources upstream's collector never watches (`DefaultIgnoredResources`): events are many,
/// short-lived and owned by nothing.
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// The verbs a resource must support to be watched (upstream's `SupportsAllVerbs`).
const VERBS: &[&str] = &["delete", "list", "watch"];

/// What discovery found: the served kinds and, among them, those the collector watches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Served {
    kinds: Vec<Kind>,
    deletable: Vec<Kind>,
}

impl Served {
    /// The served and watched kinds of these groups.
    pub fn new(groups: &[ServedGroup]) -> Self {
        let mut served = Self::default();
        for group in groups {
            // Each resource once, at the first version (in order of preference) serving it.
            let mut seen = HashSet::new();
            for (version, resources) in &group.versions {
                for r in resources.iter().filter(|r| !r.name.contains('/')) {
                    let g = r.group.as_deref().unwrap_or(&group.name);
                    let v = r.version.as_deref().unwrap_or(version);
                    let gvk = GroupVersionKind::gvk(g, v, &r.kind);
                    let kind = Kind {
                        resource: ApiResource::from_gvk_with_plural(&gvk, &r.name),
                        namespaced: r.namespaced,
                    };
                    let first = seen.insert(r.name.clone());
                    let ignored = IGNORED.contains(&(g, r.name.as_str()));
                    let verbs = VERBS.iter().all(|v| r.verbs.iter().any(|x| x == v));
                    if first && verbs && !ignored {
                        served.deletable.push(kind.clone());
                    }
                    served.kinds.push(kind);
                }
            }
        }
        served
    }

    /// The served kind an owner reference names (its `apiVersion` and `kind`), if any.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<&Kind> {
        self.kinds.iter().find(|k| k.matches(api_version, kind))
    }

    /// The kinds to watch.
    pub fn deletable(&self) -> &[Kind] {
        &self.deletable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(name: &str, kind: &str, namespaced: bool, verbs: &[&str]) -> APIResource {
        APIResource {
            name: name.into(),
            kind: kind.into(),
            namespaced,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }
    }

    const ALL: &[&str] = &[
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];

    fn groups() -> Vec<ServedGroup> {
        vec![
            ServedGroup {
                name: "".into(),
                versions: vec![(
                    "v1".into(),
                    vec![
                        resource("pods", "Pod", true, ALL),
                        resource("pods/status", "Pod", true, &["get", "patch", "update"]),
                        resource("nodes", "Node", false, ALL),
                        resource("events", "Event", true, ALL),
                        resource("bindings", "Binding", true, &["create"]),
                        resource(
                            "componentstatuses",
                            "ComponentStatus",
                            false,
                            &["get", "list"],
                        ),
                    ],
                )],
            },
            ServedGroup {
                name: "events.k8s.io".into(),
                versions: vec![("v1".into(), vec![resource("events", "Event", true, ALL)])],
            },
            ServedGroup {
                name: "stable.example.com".into(),
                versions: vec![
                    (
                        "v2".into(),
                        vec![resource("crontabs", "CronTab", true, ALL)],
                    ),
                    (
                        "v1".into(),
                        vec![
                            resource("crontabs", "CronTab", true, ALL),
                            resource("oldthings", "OldThing", false, ALL),
                        ],
                    ),
                ],
            },
        ]
    }

    #[test]
    fn watches_each_listable_watchable_deletable_resource_once_at_its_preferred_version() {
        let served = Served::new(&groups());
        let watched: Vec<(&str, &str, bool)> = served
            .deletable()
            .iter()
            .map(|k| {
                (
                    k.resource.api_version.as_str(),
                    k.resource.plural.as_str(),
                    k.namespaced,
                )
            })
            .collect();
        // No subresource, no events, nothing without list/watch/delete; a resource served only
        // by a less preferred version is watched at that version.
        assert_eq!(
            watched,
            [
                ("v1", "pods", true),
                ("v1", "nodes", false),
                ("stable.example.com/v2", "crontabs", true),
                ("stable.example.com/v1", "oldthings", false),
            ]
        );
    }

    #[test]
    fn owner_references_resolve_by_group_version_and_kind() {
        let served = Served::new(&groups());
        let table = [
            ("v1", "Pod", Some(("", "pods", true))),
            ("v1", "Node", Some(("", "nodes", false))),
            ("v1", "Event", Some(("", "events", true))),
            (
                "stable.example.com/v1",
                "CronTab",
                Some(("stable.example.com", "crontabs", true)),
            ),
            (
                "stable.example.com/v2",
                "CronTab",
                Some(("stable.example.com", "crontabs", true)),
            ),
            // A version the server does not serve does not map (upstream's restMappingError).
            ("stable.example.com/v3", "CronTab", None),
            ("apps/v1", "Pod", None),
            ("v1", "ReplicaSet", None),
        ];
        for (av, kind, want) in table {
            let got = served.resolve(av, kind).map(|k| {
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
