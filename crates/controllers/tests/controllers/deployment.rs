//! The Deployment controller (with the ReplicaSet controller and the garbage collector) against
//! an in-process API server; a stand-in kubelet makes pods ready, and an independent invariant
//! watcher checks every pod and ReplicaSet event of each rollout.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::support;

use controllers::invariants::{InvariantWatcher, Rule};
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::Pod,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;
use std::collections::BTreeSet;
use support::*;

async fn replica_sets(c: &Cluster, app: &str) -> Vec<ReplicaSet> {
    let api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    let mut v = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items;
    v.sort_by_key(|rs| {
        rs.annotations()
            .get("deployment.kubernetes.io/revision")
            .and_then(|r| r.parse::<i64>().ok())
    });
    v
}

fn size(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn revision(rs: &ReplicaSet) -> String {
    rs.annotations()
        .get("deployment.kubernetes.io/revision")
        .cloned()
        .unwrap_or_default()
}

async fn pods(c: &Cluster, app: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::default_namespaced(c.client.clone());
    api.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

fn rolling_rule(replicas: i32, surge: i32, unavailable: i32) -> Rule {
    Rule::Rolling {
        max_pods: replicas + surge,
        min_available: replicas - unavailable,
        min_ready_seconds: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_deployment_gets_a_hashed_replica_set_pods_and_status() {
    let c = Cluster::start().await;
    let api = c.deployments();
    let mut d = deployment("web", 3, "nginx:1", rolling(json!("25%"), json!("25%")));
    d.metadata.annotations = Some(
        [(
            "kubernetes.io/change-cause".to_string(),
            "first".to_string(),
        )]
        .into(),
    );
    create(&api, &d).await;
    let done = wait_rolled_out(&api, "web", 3).await;

    let rss = replica_sets(&c, "web").await;
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs.labels().get("pod-template-hash").cloned().unwrap();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    let spec = rs.spec.clone().unwrap();
    assert_eq!(
        spec.selector.match_labels.unwrap().get("pod-template-hash"),
        Some(&hash)
    );
    assert_eq!(
        spec.template
            .unwrap()
            .metadata
            .unwrap()
            .labels
            .unwrap()
            .get("pod-template-hash"),
        Some(&hash)
    );
    let ann = rs.annotations();
    assert_eq!(
        ann.get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        ann.get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        ann.get("deployment.kubernetes.io/max-replicas")
            .map(String::as_str),
        Some("4")
    );
    assert_eq!(
        ann.get("kubernetes.io/change-cause").map(String::as_str),
        Some("first")
    );
    let owner = api::pod::controller_of(&rs.metadata).unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "web")
    );

    let ps = pods(&c, "web").await;
    assert_eq!(ps.len(), 3);
    for p in &ps {
        assert_eq!(p.labels().get("pod-template-hash"), Some(&hash));
        assert!(p.name_any().starts_with(&format!("web-{hash}-")));
    }

    let done = embedded::wait_until(&api, "conditions settle", TIMEOUT, |d: &Deployment| {
        d.name_any() == "web"
            && condition(d, "Progressing").is_some_and(|(_, r)| r == "NewReplicaSetAvailable")
    })
    .await
    .unwrap_or(done);
    assert_eq!(
        condition(&done, "Available"),
        Some(("True".into(), "MinimumReplicasAvailable".into()))
    );
    assert_eq!(
        condition(&done, "Progressing"),
        Some(("True".into(), "NewReplicaSetAvailable".into()))
    );
    assert_eq!(
        done.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    let status = done.status.unwrap();
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.ready_replicas,
            status.available_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3))
    );
    assert_eq!(status.unavailable_replicas, None);
}

/// The controller records the revision with the status, as upstream's does, so a new
/// Deployment stays at generation 1: only a change of its spec or annotations by a client moves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_deployment_stays_at_generation_1() {
    let c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment("gen", 1, "nginx:1", rolling(json!(1), json!(0))),
    )
    .await;
    let d = embedded::wait_until(&api, "revision recorded", TIMEOUT, |d: &Deployment| {
        let observed = d.status.as_ref().and_then(|s| s.observed_generation);
        d.name_any() == "gen"
            && d.annotations()
                .contains_key("deployment.kubernetes.io/revision")
            && observed.is_some()
            && observed >= d.metadata.generation
    })
    .await
    .unwrap();
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(d.status.and_then(|s| s.observed_generation), Some(1));
}

async fn rolling_update_keeps_its_bounds(
    surge: serde_json::Value,
    unavailable: serde_json::Value,
    replicas: i32,
    max_surge: i32,
    max_unavailable: i32,
) {
    let c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment("web", replicas, "nginx:1", rolling(surge, unavailable)),
    )
    .await;
    wait_rolled_out(&api, "web", replicas).await;
    let watcher = InvariantWatcher::start(
        c.client.clone(),
        "default",
        "app=web",
        rolling_rule(replicas, max_surge, max_unavailable),
    )
    .await;
    set_image(&api, "web", "nginx:2").await;
    wait_rolled_out(&api, "web", replicas).await;
    let rss = replica_sets(&c, "web").await;
    assert_eq!(rss.iter().map(size).collect::<Vec<_>>(), vec![0, replicas]);
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert!(
        watcher.events_seen() > 2 * replicas as usize,
        "the watcher saw the rollout"
    );
    // The surge was used (the rollout did not degrade into one pod at a time).
    assert!(
        watcher.max_pods_seen() > replicas,
        "max pods {}",
        watcher.max_pods_seen()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_with_numbers_stays_within_surge_and_unavailable() {
    rolling_update_keeps_its_bounds(json!(3), json!(2), 10, 3, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_with_percentages_stays_within_surge_and_unavailable() {
    // 25% of 10: surge rounds up to 3, unavailable down to 2.
    rolling_update_keeps_its_bounds(json!("25%"), json!("25%"), 10, 3, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_never_runs_old_and_new_pods_together() {
    let c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment("web", 4, "nginx:1", json!({"type": "Recreate"})),
    )
    .await;
    wait_rolled_out(&api, "web", 4).await;
    let watcher =
        InvariantWatcher::start(c.client.clone(), "default", "app=web", Rule::Recreate).await;
    set_image(&api, "web", "nginx:2").await;
    wait_rolled_out(&api, "web", 4).await;
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert_eq!(
        replica_sets(&c, "web")
            .await
            .iter()
            .map(size)
            .collect::<Vec<_>>(),
        vec![0, 4]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollover_scales_down_the_half_rolled_replica_set_too() {
    rollover_keeps_its_bounds(Cluster::start().await).await;
}

/// The rollover again on a cache whose ReplicaSet watch runs 300 ms behind its Deployment
/// watch: the sync for the third template runs before the cache shows the second one's last
/// scale-up, and must count by what the controller wrote, not by the older size (CI once saw
/// 15 pods asked for, 13 allowed, as the ReplicaSet watch fell behind under load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollover_on_a_slow_watch_counts_by_its_own_writes() {
    let lag = std::time::Duration::from_millis(300);
    rollover_keeps_its_bounds(Cluster::start_with_lag(lag, &["ReplicaSet"]).await).await;
}

async fn rollover_keeps_its_bounds(c: Cluster) {
    let api = c.deployments();
    create(
        &api,
        &deployment("web", 10, "nginx:1", rolling(json!(3), json!(2))),
    )
    .await;
    wait_rolled_out(&api, "web", 10).await;
    let watcher = InvariantWatcher::start(
        c.client.clone(),
        "default",
        "app=web",
        rolling_rule(10, 3, 2),
    )
    .await;
    // v2 never becomes ready: its rollout stalls half way (old 8, new 5).
    c.kubelet.block("nginx:2");
    set_image(&api, "web", "nginx:2").await;
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(&rs_api, "v2 at 5", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "2" && size(rs) == 5
    })
    .await
    .unwrap();
    set_image(&api, "web", "nginx:3").await;
    wait_rolled_out(&api, "web", 10).await;
    let rss = replica_sets(&c, "web").await;
    assert_eq!(
        rss.iter()
            .map(|r| (revision(r), size(r)))
            .collect::<Vec<_>>(),
        vec![("1".into(), 0), ("2".into(), 0), ("3".into(), 10)]
    );
    assert_eq!(watcher.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_back_by_template_revives_the_old_replica_set_without_restarting_its_pods() {
    let c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment("web", 4, "nginx:1", rolling(json!(1), json!(1))),
    )
    .await;
    wait_rolled_out(&api, "web", 4).await;
    // A bad v2 stalls with most v1 pods still running.
    c.kubelet.block("nginx:2");
    set_image(&api, "web", "nginx:2").await;
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(&rs_api, "v2 surged", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "2" && size(rs) == 2
    })
    .await
    .unwrap();
    let v1_pods_before: BTreeSet<String> = pods(&c, "web")
        .await
        .into_iter()
        .filter(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:1"))
        .map(|p| p.uid().unwrap())
        .collect();
    assert_eq!(v1_pods_before.len(), 3);

    // `kubectl rollout undo`: the template goes back to v1's.
    set_image(&api, "web", "nginx:1").await;
    let done = wait_rolled_out(&api, "web", 4).await;
    let rss = replica_sets(&c, "web").await;
    assert_eq!(rss.len(), 2);
    let v1 = rss
        .iter()
        .find(|r| {
            r.spec
                .as_ref()
                .unwrap()
                .template
                .as_ref()
                .unwrap()
                .spec
                .as_ref()
                .unwrap()
                .containers[0]
                .image
                .as_deref()
                == Some("nginx:1")
        })
        .unwrap();
    assert_eq!(revision(v1), "3");
    assert_eq!(
        v1.annotations()
            .get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(size(v1), 4);
    let done = embedded::wait_until(&api, "revision 3", TIMEOUT, |d: &Deployment| {
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str)
            == Some("3")
    })
    .await
    .unwrap_or(done);
    assert_eq!(
        done.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("3")
    );
    // The v1 pods that ran are still there: only the missing one was created.
    let after: BTreeSet<String> = pods(&c, "web")
        .await
        .into_iter()
        .map(|p| p.uid().unwrap())
        .collect();
    assert!(v1_pods_before.is_subset(&after), "v1 pods were restarted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_deployments_scale_but_do_not_roll_until_resumed() {
    let c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment("web", 4, "nginx:1", rolling(json!(1), json!(1))),
    )
    .await;
    wait_rolled_out(&api, "web", 4).await;
    merge(&api, "web", json!({"spec": {"paused": true}})).await;
    embedded::wait_until(&api, "paused condition", TIMEOUT, |d: &Deployment| {
        condition(d, "Progressing") == Some(("Unknown".into(), "DeploymentPaused".into()))
    })
    .await
    .unwrap();
    set_image(&api, "web", "nginx:2").await;
    merge(&api, "web", json!({"spec": {"replicas": 6}})).await;
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(
        &rs_api,
        "scaled while paused",
        TIMEOUT,
        |rs: &ReplicaSet| size(rs) == 6,
    )
    .await
    .unwrap();
    embedded::wait_until(&api, "status observed", TIMEOUT, |d: &Deployment| {
        d.status.as_ref().and_then(|s| s.available_replicas) == Some(6)
            && d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
    })
    .await
    .unwrap();
    assert_eq!(
        replica_sets(&c, "web").await.len(),
        1,
        "no new replica set while paused"
    );

    let watcher = InvariantWatcher::start(
        c.client.clone(),
        "default",
        "app=web",
        rolling_rule(6, 1, 1),
    )
    .await;
    merge(&api, "web", json!({"spec": {"paused": false}})).await;
    let done = wait_rolled_out(&api, "web", 6).await;
    assert_eq!(
        replica_sets(&c, "web")
            .await
            .iter()
            .map(size)
            .collect::<Vec<_>>(),
        vec![0, 6]
    );
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert_ne!(
        condition(&done, "Progressing").map(|c| c.1),
        Some("DeploymentPaused".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_mid_rollout_is_proportional_as_in_the_upstream_example() {
    let c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment("web", 10, "nginx:1", rolling(json!(3), json!(2))),
    )
    .await;
    wait_rolled_out(&api, "web", 10).await;
    c.kubelet.block("nginx:2");
    set_image(&api, "web", "nginx:2").await;
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(&rs_api, "v2 at 5", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "2" && size(rs) == 5
    })
    .await
    .unwrap();
    embedded::wait_until(&rs_api, "v1 at 8", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "1" && size(rs) == 8
    })
    .await
    .unwrap();
    merge(&api, "web", json!({"spec": {"replicas": 15}})).await;
    // 5 more: 3 to the old ReplicaSet, 2 to the new one.
    embedded::wait_until(&rs_api, "v1 at 11", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "1" && size(rs) == 11
    })
    .await
    .unwrap();
    embedded::wait_until(&rs_api, "v2 at 7", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "2" && size(rs) == 7
    })
    .await
    .unwrap();
    let watcher = InvariantWatcher::start(
        c.client.clone(),
        "default",
        "app=web",
        rolling_rule(15, 3, 3),
    )
    .await;
    c.kubelet.unblock("nginx:2");
    wait_rolled_out(&api, "web", 15).await;
    assert_eq!(watcher.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_rollout_exceeds_its_progress_deadline_and_a_fixed_image_completes_it() {
    let c = Cluster::start().await;
    let api = c.deployments();
    let mut d = deployment("web", 3, "nginx:1", rolling(json!(1), json!(1)));
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(2);
    create(&api, &d).await;
    wait_rolled_out(&api, "web", 3).await;
    let watcher = InvariantWatcher::start(
        c.client.clone(),
        "default",
        "app=web",
        rolling_rule(3, 1, 1),
    )
    .await;
    c.kubelet.block("bad:image");
    set_image(&api, "web", "bad:image").await;
    let timed_out = embedded::wait_until(&api, "deadline exceeded", TIMEOUT, |d: &Deployment| {
        condition(d, "Progressing") == Some(("False".into(), "ProgressDeadlineExceeded".into()))
    })
    .await
    .unwrap();
    let msg = timed_out
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap()
        .message
        .unwrap();
    assert!(
        msg.starts_with("ReplicaSet \"web-") && msg.ends_with("\" has timed out progressing."),
        "{msg}"
    );
    // Stalled within maxUnavailable: 2 old pods still available.
    let available: usize = pods(&c, "web")
        .await
        .iter()
        .filter(|p| api::pod::is_ready(p))
        .count();
    assert!(available >= 2, "{available} available");

    set_image(&api, "web", "nginx:2").await;
    let done = wait_rolled_out(&api, "web", 3).await;
    let done = embedded::wait_until(&api, "progressing again", TIMEOUT, |d: &Deployment| {
        condition(d, "Progressing").is_some_and(|c| c.1 == "NewReplicaSetAvailable")
    })
    .await
    .unwrap_or(done);
    assert_eq!(
        condition(&done, "Progressing"),
        Some(("True".into(), "NewReplicaSetAvailable".into()))
    );
    assert_eq!(watcher.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_ready_seconds_delays_availability() {
    let c = Cluster::start().await;
    let api = c.deployments();
    let mut d = deployment("web", 2, "nginx:1", rolling(json!(1), json!(0)));
    d.spec.as_mut().unwrap().min_ready_seconds = Some(2);
    create(&api, &d).await;
    let ready = embedded::wait_until(&api, "ready", TIMEOUT, |d: &Deployment| {
        d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
    })
    .await
    .unwrap();
    assert_eq!(
        ready.status.unwrap().available_replicas,
        None,
        "available before minReadySeconds"
    );
    // The ReplicaSet controller requeues itself for the remaining time.
    wait_rolled_out(&api, "web", 2).await;
    let pods = pods(&c, "web").await;
    let now = jiff::Timestamp::now();
    assert!(pods.iter().all(|p| api::pod::is_available(p, 2, now)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_history_limit_deletes_the_oldest_replica_sets() {
    let c = Cluster::start().await;
    let api = c.deployments();
    let mut d = deployment("web", 2, "nginx:1", rolling(json!(1), json!(0)));
    d.spec.as_mut().unwrap().revision_history_limit = Some(1);
    create(&api, &d).await;
    for image in ["nginx:2", "nginx:3", "nginx:4"] {
        wait_rolled_out(&api, "web", 2).await;
        set_image(&api, "web", image).await;
    }
    wait_rolled_out(&api, "web", 2).await;
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    let mut left = Vec::new();
    for _ in 0..100 {
        left = replica_sets(&c, "web")
            .await
            .iter()
            .map(revision)
            .collect::<Vec<_>>();
        if left.len() == 2 {
            break;
        }
        // Wait for the next ReplicaSet event (a deletion) instead of sleeping.
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            embedded::wait_until(&rs_api, "change", TIMEOUT, |_| true),
        )
        .await;
    }
    assert_eq!(left, vec!["3".to_string(), "4".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_replica_sets_are_adopted_by_a_recreated_deployment_which_finishes_the_rollout() {
    let c = Cluster::start().await;
    let api = c.deployments();
    let d = deployment("web", 4, "nginx:1", rolling(json!(1), json!(1)));
    create(&api, &d).await;
    wait_rolled_out(&api, "web", 4).await;
    c.kubelet.block("nginx:2");
    set_image(&api, "web", "nginx:2").await;
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(&rs_api, "v2 surged", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "2" && size(rs) == 2
    })
    .await
    .unwrap();

    // `kubectl delete deploy web --cascade=orphan`.
    api.delete(
        "web",
        &DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for rs in replica_sets(&c, "web").await {
        embedded::wait_until(&rs_api, "orphaned", TIMEOUT, |r: &ReplicaSet| {
            r.name_any() == rs.name_any() && api::pod::controller_of(&r.metadata).is_none()
        })
        .await
        .unwrap();
    }
    let uid = api.get("web").await.map(|d| d.uid().unwrap()).ok();
    if let Some(uid) = uid {
        tokio::time::timeout(
            TIMEOUT,
            kube::runtime::wait::await_condition(
                api.clone(),
                "web",
                kube::runtime::wait::conditions::is_deleted(&uid),
            ),
        )
        .await
        .unwrap()
        .unwrap();
    }
    let sizes: Vec<i32> = replica_sets(&c, "web").await.iter().map(size).collect();
    assert_eq!(sizes, vec![3, 2], "both replica sets left as they were");

    // Recreating the same Deployment (v2) adopts both and finishes.
    let mut again = d.clone();
    again
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("nginx:2".into());
    let again = create(&api, &again).await;
    c.kubelet.unblock("nginx:2");
    wait_rolled_out(&api, "web", 4).await;
    let rss = replica_sets(&c, "web").await;
    assert_eq!(rss.len(), 2, "no third replica set");
    for rs in &rss {
        assert_eq!(
            api::pod::controller_of(&rs.metadata).map(|r| r.uid.clone()),
            again.uid()
        );
    }
    assert_eq!(rss.iter().map(size).collect::<Vec<_>>(), vec![0, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_collision_bumps_the_collision_count_and_converges() {
    let c = Cluster::start().await;
    let api = c.deployments();
    let mut d = deployment("web", 2, "nginx:1", rolling(json!(1), json!(0)));
    d.spec.as_mut().unwrap().paused = Some(true);
    let created = create(&api, &d).await;
    // Occupy the name the first ReplicaSet would get with another template.
    let template = serde_json::to_value(&created.spec.as_ref().unwrap().template).unwrap();
    let hash = api::hash::template_hash(&template, None);
    let squatter: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": format!("web-{hash}"), "labels": {"other": "x"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"other": "x"}},
                 "template": {"metadata": {"labels": {"other": "x"}}, "spec": {"containers": [{"name": "c", "image": "other"}]}}},
    }))
    .unwrap();
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    rs_api
        .create(&PostParams::default(), &squatter)
        .await
        .unwrap();
    merge(&api, "web", json!({"spec": {"paused": false}})).await;
    let done = wait_rolled_out(&api, "web", 2).await;
    assert_eq!(done.status.unwrap().collision_count, Some(1));
    let rss = replica_sets(&c, "web").await;
    assert_eq!(rss.len(), 1);
    assert_eq!(
        rss[0].name_any(),
        format!("web-{}", api::hash::template_hash(&template, Some(1)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_survives_a_controller_restart() {
    let mut c = Cluster::start().await;
    let api = c.deployments();
    create(
        &api,
        &deployment("web", 10, "nginx:1", rolling(json!(2), json!(2))),
    )
    .await;
    wait_rolled_out(&api, "web", 10).await;
    let watcher = InvariantWatcher::start(
        c.client.clone(),
        "default",
        "app=web",
        rolling_rule(10, 2, 2),
    )
    .await;
    c.kubelet.block("nginx:2");
    set_image(&api, "web", "nginx:2").await;
    let rs_api: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    embedded::wait_until(&rs_api, "mid-rollout", TIMEOUT, |rs: &ReplicaSet| {
        revision(rs) == "2" && size(rs) >= 2
    })
    .await
    .unwrap();
    c.kill_controllers();
    c.kubelet.unblock("nginx:2");
    // Pods become ready while no controller runs; then the controllers come back.
    c.start_controllers();
    wait_rolled_out(&api, "web", 10).await;
    assert_eq!(watcher.violations(), Vec::<String>::new());
    assert_eq!(
        replica_sets(&c, "web")
            .await
            .iter()
            .map(size)
            .collect::<Vec<_>>(),
        vec![0, 10]
    );
}
