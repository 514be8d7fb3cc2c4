//! Pure helpers of the Deployment controller (upstream's `deployment/util`): the plain view of a
//! ReplicaSet the rollout arithmetic works on, the orders ReplicaSets are visited in, revisions,
//! finding the new ReplicaSet by template, and the fenceposts.

use api::intstr::{IntOrPercentError, resolve_fenceposts};
use jiff::Timestamp;
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::PodTemplateSpec,
};
use std::{cmp::Ordering, collections::BTreeMap};

/// The label (and selector term) that tells a Deployment's ReplicaSets apart.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The revision of a ReplicaSet, and of the Deployment (its new ReplicaSet's).
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a ReplicaSet had before a rollback made it new again.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's `spec.replicas` when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `replicas + maxSurge` when the ReplicaSet was last scaled: the base of proportional scaling.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Why the Deployment changed (`kubectl annotate` / `--record`), copied to its ReplicaSets.
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// Upstream caps `revision-history` at this many characters.
pub const MAX_REVISION_HISTORY_CHARS: usize = 2000;

/// Deployment annotations never copied onto ReplicaSets (upstream's `annotationsToSkip`).
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// What the rollout arithmetic knows about a ReplicaSet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RsView {
    /// Its name (names are unique among a Deployment's ReplicaSets).
    pub name: String,
    /// `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.replicas`.
    pub status_replicas: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
    /// `status.availableReplicas`.
    pub available: i32,
    /// The `max-replicas` annotation.
    pub max_replicas: Option<i32>,
    /// The `desired-replicas` annotation.
    pub desired_replicas: Option<i32>,
    /// The `revision` annotation.
    pub revision: Option<i64>,
    /// Whether its status has observed its latest spec (`status.observedGeneration` at least
    /// `metadata.generation`). Until then pods the ReplicaSet controller is still creating for
    /// an earlier, larger size may exist beyond both `spec.replicas` and `status.replicas`.
    pub settled: bool,
}

fn annotation<T: std::str::FromStr>(rs: &ReplicaSet, key: &str) -> Option<T> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

impl RsView {
    /// The view of `rs`.
    pub fn of(rs: &ReplicaSet) -> Self {
        let status = rs.status.as_ref();
        RsView {
            name: rs.metadata.name.clone().unwrap_or_default(),
            created: rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            replicas: spec_replicas(rs),
            status_replicas: status.map_or(0, |s| s.replicas),
            ready: status.and_then(|s| s.ready_replicas).unwrap_or(0),
            available: status.and_then(|s| s.available_replicas).unwrap_or(0),
            max_replicas: annotation(rs, MAX_REPLICAS),
            desired_replicas: annotation(rs, DESIRED_REPLICAS),
            revision: annotation(rs, REVISION),
            settled: status.and_then(|s| s.observed_generation).unwrap_or(0)
                >= rs.metadata.generation.unwrap_or(0),
        }
    }
}

/// A ReplicaSet's `spec.replicas` (defaulted to 1 by the server).
pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// The parameters of a Deployment the arithmetic needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// `spec.replicas`.
    pub replicas: i32,
    /// Whether the strategy is RollingUpdate.
    pub rolling: bool,
    /// maxSurge resolved against `replicas` (0 for Recreate).
    pub max_surge: i32,
    /// maxUnavailable resolved against `replicas`, at most `replicas` (0 for Recreate).
    pub max_unavailable: i32,
    /// `status.replicas`, the base of proportions when an RS lacks `max-replicas`.
    pub status_replicas: i32,
}

impl Rollout {
    /// The parameters of `d` (upstream's `MaxSurge`/`MaxUnavailable` over `ResolveFenceposts`).
    pub fn of(d: &Deployment) -> Result<Self, IntOrPercentError> {
        let spec = d.spec.as_ref();
        let replicas = spec.and_then(|s| s.replicas).unwrap_or(1);
        let strategy = spec.and_then(|s| s.strategy.as_ref());
        let rolling = strategy
            .and_then(|s| s.type_.as_deref())
            .unwrap_or("RollingUpdate")
            == "RollingUpdate";
        let (mut max_surge, mut max_unavailable) = (0, 0);
        if rolling {
            let ru = strategy.and_then(|s| s.rolling_update.as_ref());
            let to_json =
                |v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>| {
                    v.map(|v| serde_json::to_value(v).unwrap_or(serde_json::Value::Null))
                };
            let surge = to_json(ru.and_then(|r| r.max_surge.as_ref()));
            let unavailable = to_json(ru.and_then(|r| r.max_unavailable.as_ref()));
            (max_surge, max_unavailable) =
                resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), replicas)?;
            max_unavailable = if replicas == 0 {
                0
            } else {
                max_unavailable.min(replicas)
            };
        }
        Ok(Rollout {
            replicas,
            rolling,
            max_surge,
            max_unavailable,
            status_replicas: d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0),
        })
    }
}

/// Oldest first; equal times by name (upstream's `ReplicaSetsByCreationTimestamp`).
pub fn by_creation(a: &RsView, b: &RsView) -> Ordering {
    a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name))
}

/// Larger first, then older first (upstream's `ReplicaSetsBySizeOlder`): who loses replicas first.
pub fn by_size_older(a: &RsView, b: &RsView) -> Ordering {
    b.replicas.cmp(&a.replicas).then_with(|| by_creation(a, b))
}

/// Larger first, then newer first (upstream's `ReplicaSetsBySizeNewer`): who gains first.
pub fn by_size_newer(a: &RsView, b: &RsView) -> Ordering {
    b.replicas.cmp(&a.replicas).then_with(|| by_creation(b, a))
}

/// Lower revision first, unknown revisions by creation (upstream's `ReplicaSetsByRevision`).
pub fn by_revision(a: &RsView, b: &RsView) -> Ordering {
    match (a.revision, b.revision) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        _ => by_creation(a, b),
    }
}

/// The highest revision among `rss` (0 if none has one).
pub fn max_revision<'a>(rss: impl IntoIterator<Item = &'a RsView>) -> i64 {
    rss.into_iter()
        .filter_map(|r| r.revision)
        .max()
        .unwrap_or(0)
}

/// Whether two pod templates are equal once the `pod-template-hash` label is ignored (upstream's
/// `EqualIgnoreHash`): how a Deployment recognises the ReplicaSet of its current template,
/// including one left from an earlier revision (that is what a rollback finds).
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    fn strip(t: &PodTemplateSpec) -> PodTemplateSpec {
        let mut t = t.clone();
        if let Some(meta) = t.metadata.as_mut()
            && let Some(labels) = meta.labels.as_mut()
        {
            labels.remove(POD_TEMPLATE_HASH);
            if labels.is_empty() {
                meta.labels = None;
            }
        }
        t
    }
    strip(a) == strip(b)
}

/// Index of the new ReplicaSet: the oldest whose template equals the Deployment's.
pub fn find_new(template: &PodTemplateSpec, rss: &[ReplicaSet]) -> Option<usize> {
    let mut order: Vec<usize> = (0..rss.len()).collect();
    let views: Vec<RsView> = rss.iter().map(RsView::of).collect();
    order.sort_by(|&a, &b| by_creation(&views[a], &views[b]));
    order.into_iter().find(|&i| {
        rss[i]
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| equal_ignore_hash(t, template))
    })
}

/// Whether the Deployment has reached its size with the new ReplicaSet alone (upstream's
/// `IsSaturated`).
pub fn is_saturated(replicas: i32, new: Option<&RsView>) -> bool {
    new.is_some_and(|rs| {
        rs.replicas == replicas && rs.desired_replicas == Some(replicas) && rs.available == replicas
    })
}

/// The only ReplicaSet with replicas, or the newest one if none has any; `None` when several
/// are active (upstream's `FindActiveOrLatest`). `new` is the new RS, `old` the old ones.
pub fn active_or_latest<'a>(new: Option<&'a RsView>, old: &'a [RsView]) -> Option<&'a RsView> {
    let mut sorted: Vec<&RsView> = old.iter().collect();
    sorted.sort_by(|a, b| by_creation(a, b));
    let active: Vec<&RsView> = sorted
        .iter()
        .copied()
        .chain(new)
        .filter(|r| r.replicas > 0)
        .collect();
    match active.len() {
        0 => new.or(sorted.last().copied()),
        1 => Some(active[0]),
        _ => None,
    }
}

/// How many replicas a new ReplicaSet should have now (upstream's `NewRSNewReplicas`): Recreate
/// goes to full size at once; RollingUpdate grows until the Deployment has
/// `replicas + maxSurge` pods (counted by `spec.replicas`, or by pods not yet gone when more).
///
/// Stricter than upstream: it does not grow while any ReplicaSet's status has yet to observe
/// its spec. A ReplicaSet just scaled down may still have creates in flight for its earlier size
/// that neither its spec nor its status counts (issue 43: two quick template changes made 10
/// pods where 8 were allowed, upstream too); once observed, its status counts them.
pub fn new_rs_replicas(r: &Rollout, all: &[RsView], new: &RsView) -> i32 {
    if !r.rolling {
        return r.replicas;
    }
    if all.iter().any(|rs| !rs.settled) {
        return new.replicas;
    }
    let current: i32 = all
        .iter()
        .map(|rs| rs.replicas.max(rs.status_replicas))
        .sum();
    let max_total = r.replicas + r.max_surge;
    if current >= max_total {
        return new.replicas;
    }
    let up = (max_total - current).min(r.replicas - new.replicas);
    new.replicas + up.max(0)
}

/// `annotations` with the Deployment's copied in (all but [`NOT_COPIED`]); whether any changed.
pub fn copy_deployment_annotations(
    deployment: Option<&BTreeMap<String, String>>,
    rs: &mut BTreeMap<String, String>,
) -> bool {
    let mut changed = false;
    for (k, v) in deployment.into_iter().flatten() {
        if NOT_COPIED.contains(&k.as_str()) || rs.get(k) == Some(v) {
            continue;
        }
        rs.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// Sets `desired-replicas` and `max-replicas`; whether any changed.
pub fn set_replicas_annotations(
    annotations: &mut BTreeMap<String, String>,
    desired: i32,
    max: i32,
) -> bool {
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if annotations.get(k) != Some(&v) {
            annotations.insert(k.into(), v);
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn rs(name: &str, created: i64, replicas: i32) -> RsView {
        RsView {
            name: name.into(),
            created: Some(Timestamp::from_second(created).unwrap()),
            replicas,
            status_replicas: replicas,
            ready: replicas,
            available: replicas,
            settled: true,
            ..Default::default()
        }
    }

    fn rolling(replicas: i32, surge: i32, unavailable: i32) -> Rollout {
        Rollout {
            replicas,
            rolling: true,
            max_surge: surge,
            max_unavailable: unavailable,
            status_replicas: 0,
        }
    }

    #[test]
    fn the_new_replica_set_grows_up_to_replicas_plus_surge() {
        // (case, rollout, old RS sizes, new RS size, want)
        let cases = [
            (
                "fresh deployment: surge above nothing",
                rolling(10, 3, 2),
                vec![],
                0,
                10,
            ),
            (
                "rollout start: only the surge",
                rolling(10, 3, 2),
                vec![10],
                0,
                3,
            ),
            ("surge used up: wait", rolling(10, 3, 2), vec![10], 3, 3),
            (
                "old scaled down by 2: two more",
                rolling(10, 3, 2),
                vec![8],
                3,
                5,
            ),
            ("never beyond replicas", rolling(10, 3, 2), vec![1], 8, 10),
            (
                "two old RSs count together",
                rolling(10, 2, 0),
                vec![4, 5],
                2,
                3,
            ),
            (
                "zero surge: only as old ones go",
                rolling(4, 0, 1),
                vec![3],
                0,
                1,
            ),
            (
                "recreate: full size at once",
                Rollout {
                    replicas: 5,
                    ..Default::default()
                },
                vec![5],
                0,
                5,
            ),
        ];
        for (name, r, old, new, want) in cases {
            let mut all: Vec<RsView> = old
                .iter()
                .enumerate()
                .map(|(i, &n)| rs(&format!("old{i}"), i as i64, n))
                .collect();
            let new = rs("new", 100, new);
            all.push(new.clone());
            assert_eq!(new_rs_replicas(&r, &all, &new), want, "{name}");
        }
    }

    #[test]
    fn nothing_grows_while_a_status_has_yet_to_observe_its_spec() {
        // v2 was scaled from 2 to 0 while its two creates were in flight: its status (0) and
        // spec (0) count none of them until its status observes generation 2.
        let v1 = rs("v1", 1, 6);
        let v2 = RsView {
            status_replicas: 0,
            settled: false,
            ..rs("v2", 2, 0)
        };
        let v3 = rs("v3", 3, 0);
        let all = [v1.clone(), v2.clone(), v3.clone()];
        assert_eq!(new_rs_replicas(&rolling(6, 2, 0), &all, &v3), 0);
        let observed = RsView {
            status_replicas: 2,
            settled: true,
            ..v2
        };
        let all = [v1, observed, v3.clone()];
        assert_eq!(new_rs_replicas(&rolling(6, 2, 0), &all, &v3), 0);
        let gone = [rs("v1", 1, 6), rs("v2", 2, 0), v3.clone()];
        assert_eq!(new_rs_replicas(&rolling(6, 2, 0), &gone, &v3), 2);
    }

    #[test]
    fn pods_not_yet_gone_count_against_the_surge() {
        // The old RS was scaled to 7 but still has 9 pods: the new one may not grow yet.
        let old = RsView {
            status_replicas: 9,
            ..rs("old", 1, 7)
        };
        let new = rs("new", 2, 3);
        assert_eq!(
            new_rs_replicas(&rolling(10, 2, 0), &[old, new.clone()], &new),
            3
        );
    }

    #[test]
    fn fenceposts_resolve_from_the_deployment() {
        let d = |strategy: serde_json::Value, replicas: i32| -> Deployment {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "d"},
                "spec": {"replicas": replicas, "selector": {}, "template": {}, "strategy": strategy}
            }))
            .unwrap()
        };
        // (strategy, replicas, surge, unavailable)
        let cases = [
            (
                serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
                10,
                3,
                2,
            ),
            (
                serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}),
                10,
                3,
                2,
            ),
            (
                serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
                10,
                0,
                1,
            ),
            (
                serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 5}}),
                3,
                1,
                3,
            ),
            (
                serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}),
                0,
                1,
                0,
            ),
            (serde_json::json!({"type": "Recreate"}), 10, 0, 0),
        ];
        for (strategy, replicas, surge, unavailable) in cases {
            let r = Rollout::of(&d(strategy.clone(), replicas)).unwrap();
            assert_eq!(
                (r.max_surge, r.max_unavailable),
                (surge, unavailable),
                "{strategy} x{replicas}"
            );
        }
    }

    #[test]
    fn orders_visit_replica_sets_as_upstream() {
        let a = rs("a", 1, 5);
        let b = rs("b", 2, 5);
        let c = rs("c", 3, 7);
        let names = |mut v: Vec<RsView>, f: fn(&RsView, &RsView) -> Ordering| {
            v.sort_by(f);
            v.into_iter().map(|r| r.name).collect::<Vec<_>>()
        };
        assert_eq!(
            names(vec![c.clone(), b.clone(), a.clone()], by_creation),
            ["a", "b", "c"]
        );
        assert_eq!(
            names(vec![a.clone(), b.clone(), c.clone()], by_size_older),
            ["c", "a", "b"]
        );
        assert_eq!(
            names(vec![a.clone(), b.clone(), c.clone()], by_size_newer),
            ["c", "b", "a"]
        );
        let r = |name: &str, created, revision| RsView {
            revision,
            ..rs(name, created, 0)
        };
        assert_eq!(
            names(
                vec![r("x", 1, Some(3)), r("y", 2, Some(1)), r("z", 0, None)],
                by_revision
            ),
            ["z", "y", "x"]
        );
        assert_eq!(
            max_revision(&[r("x", 1, Some(3)), r("y", 2, Some(11)), r("z", 0, None)]),
            11
        );
        assert_eq!(max_revision(&[]), 0);
    }

    #[test]
    fn active_or_latest_picks_the_only_active_one() {
        let old = vec![rs("o1", 1, 0), rs("o2", 2, 0)];
        let new = rs("n", 3, 0);
        type Case = (
            &'static str,
            Option<RsView>,
            Vec<RsView>,
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "nothing active: the new one",
                Some(new.clone()),
                old.clone(),
                Some("n"),
            ),
            (
                "nothing active, no new: the latest old",
                None,
                old.clone(),
                Some("o2"),
            ),
            (
                "one active old",
                Some(new.clone()),
                vec![rs("o1", 1, 3), rs("o2", 2, 0)],
                Some("o1"),
            ),
            (
                "only the new active",
                Some(rs("n", 3, 4)),
                old.clone(),
                Some("n"),
            ),
            (
                "two active: none",
                Some(rs("n", 3, 4)),
                vec![rs("o1", 1, 3)],
                None,
            ),
            ("no replica sets at all", None, vec![], None),
        ];
        for (name, new, old, want) in cases {
            let got = active_or_latest(new.as_ref(), &old).map(|r| r.name.as_str());
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn saturation_needs_size_annotation_and_availability() {
        let full = RsView {
            desired_replicas: Some(5),
            ..rs("n", 1, 5)
        };
        assert!(is_saturated(5, Some(&full)));
        assert!(!is_saturated(6, Some(&full)));
        assert!(!is_saturated(
            5,
            Some(&RsView {
                available: 4,
                ..full.clone()
            })
        ));
        assert!(!is_saturated(
            5,
            Some(&RsView {
                desired_replicas: None,
                ..full.clone()
            })
        ));
        assert!(!is_saturated(5, None));
    }

    #[test]
    fn templates_compare_without_the_hash_label() {
        let t = |labels: &[(&str, &str)], image: &str| -> PodTemplateSpec {
            serde_json::from_value(serde_json::json!({
                "metadata": {"labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
                "spec": {"containers": [{"name": "c", "image": image}]}
            }))
            .unwrap()
        };
        assert!(equal_ignore_hash(
            &t(&[("app", "w")], "v1"),
            &t(&[("app", "w"), (POD_TEMPLATE_HASH, "abc")], "v1")
        ));
        assert!(!equal_ignore_hash(
            &t(&[("app", "w")], "v1"),
            &t(&[("app", "w"), (POD_TEMPLATE_HASH, "abc")], "v2")
        ));
        assert!(!equal_ignore_hash(
            &t(&[("app", "w")], "v1"),
            &t(&[("app", "x")], "v1")
        ));
        // The oldest equal one is the new RS.
        let make = |name: &str, created: i64, tmpl: PodTemplateSpec| -> ReplicaSet {
            ReplicaSet {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    creation_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        Timestamp::from_second(created).unwrap(),
                    )),
                    ..Default::default()
                },
                spec: Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
                    template: Some(tmpl),
                    ..Default::default()
                }),
                status: None,
            }
        };
        let rss = vec![
            make("b", 5, t(&[("app", "w"), (POD_TEMPLATE_HASH, "2")], "v1")),
            make("a", 1, t(&[("app", "w"), (POD_TEMPLATE_HASH, "1")], "v2")),
            make("c", 3, t(&[("app", "w"), (POD_TEMPLATE_HASH, "3")], "v1")),
        ];
        assert_eq!(find_new(&t(&[("app", "w")], "v1"), &rss), Some(2));
        assert_eq!(find_new(&t(&[("app", "w")], "v2"), &rss), Some(1));
        assert_eq!(find_new(&t(&[("app", "w")], "v3"), &rss), None);
    }

    #[test]
    fn annotations_copy_all_but_the_controllers_own() {
        let d: BTreeMap<String, String> = [
            (CHANGE_CAUSE, "kubectl set image"),
            (REVISION, "7"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
            ("team", "a"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let mut rs: BTreeMap<String, String> = [(REVISION.to_string(), "2".to_string())].into();
        assert!(copy_deployment_annotations(Some(&d), &mut rs));
        assert_eq!(
            rs.get(CHANGE_CAUSE).map(String::as_str),
            Some("kubectl set image")
        );
        assert_eq!(rs.get("team").map(String::as_str), Some("a"));
        assert_eq!(rs.get(REVISION).map(String::as_str), Some("2"));
        assert!(!rs.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert!(!copy_deployment_annotations(Some(&d), &mut rs));
        assert!(set_replicas_annotations(&mut rs, 10, 13));
        assert!(!set_replicas_annotations(&mut rs, 10, 13));
        assert_eq!(rs.get(MAX_REPLICAS).map(String::as_str), Some("13"));
    }
}
