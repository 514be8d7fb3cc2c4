//! The RollingUpdate strategy (upstream's `deployment/rolling.go`): grow the new ReplicaSet
//! within `replicas + maxSurge`, shrink old ones so that available pods stay at or above
//! `replicas - maxUnavailable` (unhealthy old pods first, then available ones, oldest ReplicaSet
//! first, never counting the new ReplicaSet's unavailable pods as spare), and clean up old
//! revisions once complete.

use super::{
    DeploymentController, Error, progress,
    sync::{self, ReplicaSets},
    util::{Rollout, RsView, by_creation, new_rs_replicas},
};
use crate::disruption_gate::{self, Refusal};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use std::time::Duration;

/// One rolling step; returns when to look again for the progress deadline.
pub async fn rollout(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    rs_list: &[ReplicaSet],
) -> Result<Option<Duration>, Error> {
    let mut rss = sync::replica_sets(dc, d, r, rs_list, true).await?;
    if reconcile_new(dc, d, r, &mut rss).await? {
        return sync::sync_rollout_status(dc, d, r, &rss).await;
    }
    // What a disruption budget holds back of the old ReplicaSets' scale-down.
    let mut held = None;
    if reconcile_old(dc, d, r, &mut rss, &mut held).await? {
        return sync::sync_rollout_status_held(dc, d, r, &rss, Some(held.as_ref())).await;
    }
    if d.status.as_ref().is_some_and(|s| progress::complete(d, s)) {
        sync::cleanup(dc, d, &rss.old).await?;
    }
    sync::sync_rollout_status_held(dc, d, r, &rss, Some(held.as_ref())).await
}

/// Scales the new ReplicaSet toward `replicas` within the surge; whether it changed.
async fn reconcile_new(
    dc: &DeploymentController,
    d: &Deployment,
    r: &Rollout,
    rss: &mut ReplicaSets,
) -> Result<bool, Error> {
    let Some(new) = rss.new_view() else {
        return Ok(false);
    };
    if new.replicas == r.replicas {
        return Ok(false);
    }
    let target = if new.replicas > r.replicas {
        r.replicas
    } else {
        new_rs_replicas(r, &rss.all(), &new)
    };
    sync::scale_named(dc, d, r, rss, &new.name, target).await
}

/// Scales old ReplicaSets down as far as availability allows; whether any changed.
async fn reconcile_old(
    dc: &DeploymentController,
    d: &Deployment,
    r: &Rollout,
    rss: &mut ReplicaSets,
    held: &mut Option<Refusal>,
) -> Result<bool, Error> {
    let Some(new) = rss.new_view() else {
        return Ok(false);
    };
    let mut plan = old_scale_down(r, &rss.active_old(), &new, &rss.all());
    if dc.gate.honors(d.metadata.annotations.as_ref()) {
        (plan, *held) = within_budgets(dc, d, rss, &plan);
        if let Some(refusal) = held.as_ref() {
            dc.recorder.record(
                &events::reference(d),
                events::EventType::Normal,
                disruption_gate::EVENT,
                refusal.message(),
            );
        }
    }
    let mut changed = false;
    for (name, size) in plan {
        changed |= sync::scale_named(dc, d, r, rss, &name, size).await?;
    }
    Ok(changed)
}

/// `plan` capped by what the disruption budgets selecting the old ReplicaSets' pods allow now
/// ([`disruption_gate::cap_scale_down`]; the ReplicaSet controller then spends a disruption for
/// each pod it deletes, which makes the check atomic), and the refusal that holds the rest.
fn within_budgets(
    dc: &DeploymentController,
    d: &Deployment,
    rss: &ReplicaSets,
    plan: &[(String, i32)],
) -> (Vec<(String, i32)>, Option<Refusal>) {
    fn labels(rs: &ReplicaSet) -> Option<&std::collections::BTreeMap<String, String>> {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref())
    }
    let planned: Vec<(&ReplicaSet, i32)> = plan
        .iter()
        .filter_map(|(name, to)| {
            let rs = rss
                .old
                .iter()
                .find(|rs| rs.metadata.name.as_deref() == Some(name))?;
            Some((rs, *to))
        })
        .collect();
    let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
    let workload = informer::key(namespace, d.metadata.name.as_deref().unwrap_or_default());
    let allowances = dc.gate.allowances(
        &workload,
        namespace,
        planned
            .iter()
            .map(|(rs, _)| (rs.metadata.name.as_deref().unwrap_or_default(), labels(rs))),
    );
    let shrinks: Vec<disruption_gate::Shrink> = planned
        .iter()
        .map(|(rs, to)| {
            let view = RsView::of(rs);
            disruption_gate::Shrink {
                name: view.name.clone(),
                from: view.replicas,
                to: *to,
                // Budgets count ready pods: an unready one costs nothing.
                unavailable: (view.replicas - view.ready.min(view.replicas)).max(0),
            }
        })
        .collect();
    disruption_gate::cap_scale_down(&shrinks, &allowances)
}

/// The new sizes of old ReplicaSets for one rolling step (upstream's `reconcileOldReplicaSets`,
/// `cleanupUnhealthyReplicas` and `scaleDownOldReplicaSetsForRollingUpdate`), in the order to
/// apply them. `old` are the old ReplicaSets with replicas, `all` every ReplicaSet.
///
/// At most `spec total - (replicas - maxUnavailable) - new RS unavailable` replicas go, unhealthy
/// ones first; available ones only while more than `replicas - maxUnavailable` are available.
/// Two hardenings over upstream, which change nothing when statuses are current: an old
/// ReplicaSet counts at most `spec.replicas` available pods (pods above it are on their way
/// out), and the second phase also stays within the first phase's bound, so a ReplicaSet
/// status that lags behind its deletions cannot make the controller scale down twice.
pub fn old_scale_down(
    r: &Rollout,
    old: &[RsView],
    new: &RsView,
    all: &[RsView],
) -> Vec<(String, i32)> {
    let old_total: i32 = old.iter().map(|rs| rs.replicas).sum();
    if old_total == 0 {
        return Vec::new();
    }
    let all_total: i32 = all.iter().map(|rs| rs.replicas).sum();
    let min_available = r.replicas - r.max_unavailable;
    let new_unavailable = (new.replicas - new.available).max(0);
    let max_scaled_down = all_total - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut olds = old.to_vec();
    olds.sort_by(by_creation);
    let mut plan: Vec<(String, i32)> = Vec::new();
    let record = |plan: &mut Vec<(String, i32)>, name: &str, size: i32| match plan
        .iter_mut()
        .find(|(n, _)| n == name)
    {
        Some(entry) => entry.1 = size,
        None => plan.push((name.to_string(), size)),
    };

    // Unhealthy old replicas cost no availability: they go first.
    let mut cleaned = 0;
    for rs in olds.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        let unhealthy = rs.replicas - rs.available;
        if rs.replicas == 0 || unhealthy <= 0 {
            continue;
        }
        let down = unhealthy.min(max_scaled_down - cleaned);
        rs.replicas -= down;
        cleaned += down;
        record(&mut plan, &rs.name, rs.replicas);
    }

    let available: i32 = olds
        .iter()
        .map(|rs| rs.available.min(rs.replicas))
        .sum::<i32>()
        + new.available;
    if available <= min_available {
        return plan;
    }
    let budget = (available - min_available).min(max_scaled_down - cleaned);
    let mut scaled = 0;
    for rs in olds.iter_mut() {
        if scaled >= budget {
            break;
        }
        if rs.replicas == 0 {
            continue;
        }
        let down = rs.replicas.min(budget - scaled);
        rs.replicas -= down;
        scaled += down;
        record(&mut plan, &rs.name, rs.replicas);
    }
    plan
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    /// An RS created at `created` with `replicas`, `available` of them available.
    fn rs(name: &str, created: i64, replicas: i32, available: i32) -> RsView {
        RsView {
            name: name.into(),
            created: Some(Timestamp::from_second(created).unwrap()),
            replicas,
            status_replicas: replicas,
            ready: available,
            available,
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
            status_replicas: replicas,
        }
    }

    #[test]
    fn old_replica_sets_shrink_within_max_unavailable() {
        // (case, rollout, old RSs, new RS, want plan)
        type Case = (
            &'static str,
            Rollout,
            Vec<RsView>,
            RsView,
            Vec<(&'static str, i32)>,
        );
        let cases: Vec<Case> = vec![
            (
                "rollout start: maxUnavailable old pods may go",
                rolling(10, 3, 2),
                vec![rs("old", 1, 10, 10)],
                rs("new", 9, 3, 0),
                vec![("old", 8)],
            ),
            (
                "new pods not yet available are no spare capacity",
                rolling(10, 3, 2),
                vec![rs("old", 1, 8, 8)],
                rs("new", 9, 5, 0),
                vec![],
            ),
            (
                "as new pods become available, old ones go",
                rolling(10, 3, 2),
                vec![rs("old", 1, 8, 8)],
                rs("new", 9, 5, 3),
                vec![("old", 5)],
            ),
            (
                "unhealthy old pods go first, even below the availability floor",
                rolling(10, 3, 2),
                vec![rs("old", 1, 10, 6)],
                rs("new", 9, 3, 0),
                // 13 - 8 - 3 = 2 may go: both from the 4 unhealthy; none available may.
                vec![("old", 8)],
            ),
            (
                "then available ones, oldest RS first",
                rolling(10, 0, 4),
                vec![rs("v2", 2, 5, 5), rs("v1", 1, 5, 5)],
                rs("v3", 9, 0, 0),
                vec![("v1", 1)],
            ),
            (
                "rollover: unhealthy of every old RS, then the oldest available",
                rolling(10, 2, 3),
                vec![rs("v1", 1, 5, 5), rs("v2", 2, 5, 2)],
                rs("v3", 9, 2, 0),
                // max down 12 - 7 - 2 = 3: v2's 3 unhealthy; available 7 = floor 7: no more.
                vec![("v2", 2)],
            ),
            (
                "zero surge: one old pod at a time",
                rolling(4, 0, 1),
                vec![rs("old", 1, 4, 4)],
                rs("new", 9, 0, 0),
                vec![("old", 3)],
            ),
            (
                "nothing old left",
                rolling(4, 1, 1),
                vec![],
                rs("new", 9, 4, 4),
                vec![],
            ),
            (
                "a lagging status never takes availability below the floor",
                rolling(10, 3, 2),
                // The old RS was scaled to 8 but its status still counts 10 available.
                vec![rs("old", 1, 8, 10)],
                rs("new", 9, 5, 2),
                // 13 - 8 - 3 = 2 may go, not 10 + 2 - 8 = 4.
                vec![("old", 6)],
            ),
        ];
        for (name, r, old, new, want) in cases {
            let mut all = old.clone();
            all.push(new.clone());
            let got = old_scale_down(&r, &old, &new, &all);
            let want: Vec<(String, i32)> =
                want.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
            assert_eq!(got, want, "{name}");
        }
    }
}
