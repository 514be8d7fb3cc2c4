//! The Recreate strategy (upstream's `deployment/recreate.go`): scale every old ReplicaSet to
//! zero, wait until none of their pods exists any more (terminating ones included), then create
//! or scale up the new ReplicaSet to full size.

use super::{
    DeploymentController, Error, progress,
    sync::{self, ReplicaSets},
    util::Rollout,
};
use informer::Shared;
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::Pod,
};
use std::time::Duration;

/// One Recreate step; returns when to look again for the progress deadline.
pub async fn rollout(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    rs_list: &[ReplicaSet],
) -> Result<Option<Duration>, Error> {
    let mut rss = sync::replica_sets(dc, d, r, rs_list, false).await?;
    let mut scaled_down = false;
    for old in rss.active_old() {
        scaled_down |= sync::scale_named(dc, d, r, &mut rss, &old.name, 0).await?;
    }
    if scaled_down || old_pods_running(dc, &rss) {
        return sync::sync_rollout_status(dc, d, r, &rss).await;
    }
    if rss.new.is_none() {
        rss = sync::replica_sets(dc, d, r, rs_list, true).await?;
    }
    if let Some(new) = rss.new_view() {
        sync::scale_named(dc, d, r, &mut rss, &new.name, r.replicas).await?;
    }
    if d.status.as_ref().is_some_and(|s| progress::complete(d, s)) {
        sync::cleanup(dc, d, &rss.old).await?;
    }
    sync::sync_rollout_status(dc, d, r, &rss).await
}

fn old_pods_running(dc: &DeploymentController, rss: &ReplicaSets) -> bool {
    if rss
        .old
        .iter()
        .any(|rs| rs.status.as_ref().is_some_and(|s| s.replicas > 0))
    {
        return true;
    }
    rss.old.iter().any(|rs| {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        any_running(&dc.pods.store().controlled_by(&uid))
    })
}

/// Whether any of `pods` may still be running (upstream's `oldPodsRunning`): only pods that have
/// terminated (Succeeded or Failed) are known not to; Unknown ones might be.
pub fn any_running(pods: &[Shared<Pod>]) -> bool {
    pods.iter().any(|p| !p.facts().terminal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;

    #[test]
    fn only_terminated_pods_are_not_running() {
        let pod = |phase: &str| {
            informer::Cached::shared(Pod {
                status: Some(PodStatus {
                    phase: Some(phase.into()),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let cases: Vec<(&str, Vec<&str>, bool)> = vec![
            ("no pods", vec![], false),
            ("terminated only", vec!["Succeeded", "Failed"], false),
            ("a pending pod", vec!["Failed", "Pending"], true),
            ("a running pod", vec!["Running"], true),
            ("an unknown pod might run", vec!["Unknown"], true),
        ];
        for (name, phases, want) in cases {
            let pods: Vec<Shared<Pod>> = phases.into_iter().map(pod).collect();
            assert_eq!(any_running(&pods), want, "{name}");
        }
    }
}
