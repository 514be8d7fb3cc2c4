//! What every rollout step shares (upstream's `deployment/sync.go`): finding or creating the new
//! ReplicaSet and keeping revisions in step, scaling ReplicaSets (proportionally while a rollout
//! is under way or paused), cleaning up old revisions, and writing the status.

use super::{
    DeploymentController, Error, progress,
    rollback::set_new_rs_annotations,
    util::{
        self, POD_TEMPLATE_HASH, REVISION, Rollout, RsView, by_revision, by_size_newer,
        by_size_older, spec_replicas,
    },
};
use api::{
    hash::template_hash,
    pod::{controller_of, controller_ref},
};
use events::EventType;
use informer::key;
use k8s_openapi::{
    api::apps::v1::{Deployment, DeploymentCondition, ReplicaSet, ReplicaSetSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, PostParams},
};
use std::{collections::BTreeMap, time::Duration};

/// A Deployment's ReplicaSets split as a rollout sees them.
#[derive(Clone, Debug, Default)]
pub struct ReplicaSets {
    /// The ReplicaSet of the current template, if it exists.
    pub new: Option<ReplicaSet>,
    /// Every other ReplicaSet (with replicas or not).
    pub old: Vec<ReplicaSet>,
}

impl ReplicaSets {
    /// Views of the old ReplicaSets that still have replicas.
    pub fn active_old(&self) -> Vec<RsView> {
        self.old
            .iter()
            .map(RsView::of)
            .filter(|v| v.replicas > 0)
            .collect()
    }

    /// Views of all of them, old first.
    pub fn all(&self) -> Vec<RsView> {
        self.old
            .iter()
            .chain(self.new.as_ref())
            .map(RsView::of)
            .collect()
    }

    /// The view of the new one.
    pub fn new_view(&self) -> Option<RsView> {
        self.new.as_ref().map(RsView::of)
    }

    /// The ReplicaSet named `name`, mutably.
    fn named_mut(&mut self, name: &str) -> Option<&mut ReplicaSet> {
        self.old
            .iter_mut()
            .chain(self.new.as_mut())
            .find(|rs| rs.metadata.name.as_deref() == Some(name))
    }
}

fn rs_api(dc: &DeploymentController, d: &Deployment) -> Api<ReplicaSet> {
    Api::namespaced(dc.client.clone(), &d.namespace().unwrap_or_default())
}

fn deployment_api(dc: &DeploymentController, d: &Deployment) -> Api<Deployment> {
    Api::namespaced(dc.client.clone(), &d.namespace().unwrap_or_default())
}

/// Writes `d.status`, keeping `d` current with what the server stored.
pub async fn write_status(dc: &DeploymentController, d: &mut Deployment) -> Result<(), Error> {
    let written = deployment_api(dc, d)
        .replace_status(&d.name_any(), &PostParams::default(), d)
        .await?;
    *d = written;
    Ok(())
}

/// Sets the Deployment's revision annotation in `d`; whether it changed (upstream's
/// `SetDeploymentRevision`). The caller writes it with the status, as upstream does: the status
/// subresource keeps the request's annotations and never moves `metadata.generation`, where a
/// write of the main resource would (a Deployment's generation follows its annotations).
fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let annotations = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if annotations.get(REVISION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION.into(), revision.into());
    true
}

fn template_of(d: &Deployment) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    d.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// Splits `rs_list` into the new ReplicaSet and the old ones, creating the new one if `create`
/// and bringing revisions up to date (upstream's `getAllReplicaSetsAndSyncRevision`).
pub async fn replica_sets(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    rs_list: &[ReplicaSet],
    create: bool,
) -> Result<ReplicaSets, Error> {
    let new_index = util::find_new(&template_of(d), rs_list);
    let old: Vec<ReplicaSet> = rs_list
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != new_index)
        .map(|(_, rs)| rs.clone())
        .collect();
    let existing = new_index.map(|i| rs_list[i].clone());
    let new = new_replica_set(dc, d, r, existing, &old, create).await?;
    Ok(ReplicaSets { new, old })
}

async fn new_replica_set(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    existing: Option<ReplicaSet>,
    old: &[ReplicaSet],
    create: bool,
) -> Result<Option<ReplicaSet>, Error> {
    let old_views: Vec<RsView> = old.iter().map(RsView::of).collect();
    let new_revision = util::max_revision(&old_views) + 1;
    let min_ready = d
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let now = clock::now();

    if let Some(mut rs) = existing {
        let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
        let changed = set_new_rs_annotations(
            d.metadata.annotations.as_ref(),
            &mut annotations,
            new_revision,
            true,
            0,
            0,
        );
        let spec = rs.spec.get_or_insert_with(ReplicaSetSpec::default);
        if changed || spec.min_ready_seconds.unwrap_or(0) != min_ready {
            spec.min_ready_seconds = Some(min_ready);
            rs.metadata.annotations = Some(annotations);
            let updated = rs_api(dc, d)
                .replace(&rs.name_any(), &PostParams::default(), &rs)
                .await?;
            dc.written.record(&updated);
            return Ok(Some(updated));
        }
        // The Deployment's revision follows the one its new ReplicaSet already has.
        let mut needs_update = match rs.annotations().get(REVISION).cloned() {
            Some(revision) => set_deployment_revision(d, &revision),
            None => false,
        };
        if progress::progress_deadline(d).is_some()
            && progress::get(d.status.as_ref(), progress::PROGRESSING).is_none()
        {
            let msg = format!("Found new replica set {:?}", rs.name_any());
            let cond = progress::condition(
                progress::PROGRESSING,
                true,
                progress::reason::FOUND_NEW_RS,
                msg,
                now,
            );
            progress::set(d.status.get_or_insert_with(Default::default), cond);
            needs_update = true;
        }
        if needs_update {
            write_status(dc, d).await?;
        }
        return Ok(Some(rs));
    }
    if !create {
        return Ok(None);
    }

    let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
    let mut template = template_of(d);
    let hash = template_hash(
        &serde_json::to_value(&template).unwrap_or_default(),
        collision_count,
    );
    template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.into(), hash.clone());
    let mut selector = d
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.into(), hash.clone());
    let name = format!("{}-{}", d.name_any(), hash);
    let mut new_rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: d.namespace(),
            owner_references: Some(vec![controller_ref("apps/v1", "Deployment", &d.metadata)]),
            labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: Some(min_ready),
            selector,
            template: Some(template),
        }),
        status: None,
    };
    let mut all = old_views.clone();
    let view = RsView::of(&new_rs);
    all.push(view.clone());
    let replicas = util::new_rs_replicas(r, &all, &view);
    if let Some(spec) = new_rs.spec.as_mut() {
        spec.replicas = Some(replicas);
    }
    let mut annotations = BTreeMap::new();
    set_new_rs_annotations(
        d.metadata.annotations.as_ref(),
        &mut annotations,
        new_revision,
        false,
        r.replicas,
        r.replicas + r.max_surge,
    );
    new_rs.metadata.annotations = Some(annotations);

    let api = rs_api(dc, d);
    let reference = events::reference(d);
    let (created, already_existed) = match api.create(&PostParams::default(), &new_rs).await {
        Ok(created) => {
            dc.written.record(&created);
            (created, false)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let found = match dc
                .replica_sets
                .get(&key(&d.namespace().unwrap_or_default(), &name))
            {
                Some(rs) => (*rs).clone(),
                None => api.get(&name).await?,
            };
            let ours = controller_of(&found.metadata)
                .is_some_and(|r| Some(&r.uid) == d.metadata.uid.as_ref());
            let same = found
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|t| util::equal_ignore_hash(t, &template_of(d)));
            if !(ours && same) {
                // Another template already owns this name: salt the hash and try again.
                let status = d.status.get_or_insert_with(Default::default);
                status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                write_status(dc, d).await?;
                return Err(Error::HashCollision(name));
            }
            (found, true)
        }
        Err(e) => {
            let msg = format!(
                "Failed to create new replica set {name:?}: {}",
                crate::util::api_error::message(&e)
            );
            if progress::progress_deadline(d).is_some() {
                let cond = progress::condition(
                    progress::PROGRESSING,
                    false,
                    progress::reason::FAILED_RS_CREATE,
                    msg.clone(),
                    now,
                );
                progress::set(d.status.get_or_insert_with(Default::default), cond);
                // The create error is what matters; a failed status write is retried with it.
                let _ = write_status(dc, d).await;
            }
            dc.recorder.record(
                &reference,
                EventType::Warning,
                progress::reason::FAILED_RS_CREATE,
                msg,
            );
            return Err(e.into());
        }
    };
    if !already_existed && replicas > 0 {
        dc.recorder.record(
            &reference,
            EventType::Normal,
            "ScalingReplicaSet",
            format!("Scaled up replica set {name} from 0 to {replicas}"),
        );
    }
    let mut needs_update = set_deployment_revision(d, &new_revision.to_string());
    if !already_existed && progress::progress_deadline(d).is_some() {
        let msg = format!("Created new replica set {name:?}");
        let cond = progress::condition(
            progress::PROGRESSING,
            true,
            progress::reason::NEW_RS_CREATED,
            msg,
            now,
        );
        progress::set(d.status.get_or_insert_with(Default::default), cond);
        needs_update = true;
    }
    if needs_update {
        write_status(dc, d).await?;
    }
    Ok(Some(created))
}

/// Scales `rs` to `new_scale` and brings its `desired-replicas`/`max-replicas` up to date,
/// recording a `ScalingReplicaSet` event when the size changes. Returns the stored ReplicaSet.
pub async fn scale_replica_set(
    dc: &DeploymentController,
    d: &Deployment,
    r: &Rollout,
    rs: &ReplicaSet,
    new_scale: i32,
    operation: &str,
) -> Result<ReplicaSet, Error> {
    let old_scale = spec_replicas(rs);
    let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
    let annotations_changed =
        util::set_replicas_annotations(&mut annotations, r.replicas, r.replicas + r.max_surge);
    if old_scale == new_scale && !annotations_changed {
        return Ok(rs.clone());
    }
    let mut next = rs.clone();
    next.metadata.annotations = Some(annotations);
    next.spec
        .get_or_insert_with(ReplicaSetSpec::default)
        .replicas = Some(new_scale);
    let updated = rs_api(dc, d)
        .replace(&rs.name_any(), &PostParams::default(), &next)
        .await?;
    dc.written.record(&updated);
    if old_scale != new_scale {
        dc.recorder.record(
            &events::reference(d),
            EventType::Normal,
            "ScalingReplicaSet",
            format!(
                "Scaled {operation} replica set {} from {old_scale} to {new_scale}",
                rs.name_any()
            ),
        );
    }
    Ok(updated)
}

/// Scales `name` in `rss` to `new_scale` (up or down as it turns out); whether the size changed.
pub async fn scale_named(
    dc: &DeploymentController,
    d: &Deployment,
    r: &Rollout,
    rss: &mut ReplicaSets,
    name: &str,
    new_scale: i32,
) -> Result<bool, Error> {
    let Some(rs) = rss.named_mut(name) else {
        return Ok(false);
    };
    let old_scale = spec_replicas(rs);
    if old_scale == new_scale {
        return Ok(false);
    }
    let operation = if old_scale < new_scale { "up" } else { "down" };
    *rs = scale_replica_set(dc, d, r, rs, new_scale, operation).await?;
    Ok(true)
}

/// The sizes proportional scaling gives the active ReplicaSets `rss` (upstream's `scale` for
/// RollingUpdate): the difference between `replicas + maxSurge` and their total is spread in
/// proportion to each one's share of its `max-replicas`, the largest first (newest first when
/// growing, oldest first when shrinking), and what rounding leaves over goes to the first.
/// Returns `(name, size)` for every one of them, and whether it is a scale "up" or "down".
pub fn proportional_sizes(r: &Rollout, rss: &[RsView]) -> (Vec<(String, i32)>, &'static str) {
    let total: i32 = rss.iter().map(|rs| rs.replicas).sum();
    let allowed = if r.replicas > 0 {
        r.replicas + r.max_surge
    } else {
        0
    };
    let to_add = allowed - total;
    let mut sorted = rss.to_vec();
    let operation = match to_add.signum() {
        1 => {
            sorted.sort_by(by_size_newer);
            "up"
        }
        -1 => {
            sorted.sort_by(by_size_older);
            "down"
        }
        _ => "",
    };
    let mut added = 0;
    let mut sizes: Vec<(String, i32)> = Vec::with_capacity(sorted.len());
    for rs in &sorted {
        let proportion = proportion(rs, r, to_add, added);
        added += proportion;
        sizes.push((rs.name.clone(), rs.replicas + proportion));
    }
    let leftover = to_add - added;
    if leftover != 0
        && let Some(first) = sizes.first_mut()
    {
        first.1 = (first.1 + leftover).max(0);
    }
    (sizes, operation)
}

/// How many replicas `rs` gains (or loses) of `to_add`, `added` of which are already given out
/// (upstream's `GetProportion`).
fn proportion(rs: &RsView, r: &Rollout, to_add: i32, added: i32) -> i32 {
    if rs.replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if r.replicas == 0 {
        -rs.replicas
    } else {
        let base = rs.max_replicas.unwrap_or(r.status_replicas);
        if base <= 0 {
            0
        } else {
            let scaled =
                f64::from(rs.replicas) * f64::from(r.replicas + r.max_surge) / f64::from(base);
            scaled.round() as i32 - rs.replicas
        }
    };
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// Scales the ReplicaSets to the Deployment's size (upstream's `scale`): the only active one (or
/// the newest) takes all of it; a saturated new one empties the old ones; during a rolling
/// rollout the change is spread proportionally.
pub async fn scale(
    dc: &DeploymentController,
    d: &Deployment,
    r: &Rollout,
    rss: &mut ReplicaSets,
) -> Result<(), Error> {
    let new_view = rss.new_view();
    let old_views: Vec<RsView> = rss.old.iter().map(RsView::of).collect();
    if let Some(target) = util::active_or_latest(new_view.as_ref(), &old_views) {
        let name = target.name.clone();
        if target.replicas != r.replicas {
            scale_named(dc, d, r, rss, &name, r.replicas).await?;
        }
        return Ok(());
    }
    if util::is_saturated(r.replicas, new_view.as_ref()) {
        for old in rss.active_old() {
            scale_named(dc, d, r, rss, &old.name, 0).await?;
        }
        return Ok(());
    }
    if r.rolling {
        let active: Vec<RsView> = rss.all().into_iter().filter(|v| v.replicas > 0).collect();
        let (sizes, operation) = proportional_sizes(r, &active);
        for (name, size) in sizes {
            if let Some(rs) = rss.named_mut(&name) {
                *rs = scale_replica_set(dc, d, r, rs, size, operation).await?;
            }
        }
    }
    Ok(())
}

/// Deletes the oldest old ReplicaSets beyond `revisionHistoryLimit` that are fully scaled down
/// and settled (upstream's `cleanupDeployment`).
pub async fn cleanup(
    dc: &DeploymentController,
    d: &Deployment,
    old: &[ReplicaSet],
) -> Result<(), Error> {
    let Some(limit) = d
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .filter(|l| *l != i32::MAX)
    else {
        return Ok(());
    };
    let mut alive: Vec<&ReplicaSet> = old
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let excess = alive.len() as i64 - i64::from(limit);
    if excess <= 0 {
        return Ok(());
    }
    alive.sort_by(|a, b| by_revision(&RsView::of(a), &RsView::of(b)));
    let api = rs_api(dc, d);
    for rs in alive.into_iter().take(excess as usize) {
        let status = rs.status.as_ref();
        let settled = status.is_some_and(|s| {
            s.observed_generation.unwrap_or(0) >= rs.metadata.generation.unwrap_or(0)
        });
        if status.map_or(0, |s| s.replicas) != 0 || spec_replicas(rs) != 0 || !settled {
            continue;
        }
        match api.delete(&rs.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Writes the status the ReplicaSets add up to, if it changed (upstream's
/// `syncDeploymentStatus`).
pub async fn sync_status(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    rss: &ReplicaSets,
) -> Result<(), Error> {
    let status = progress::calculate(d, r, &rss.all(), rss.new_view().as_ref(), clock::now());
    if d.status.as_ref() != Some(&status) {
        d.status = Some(status);
        write_status(dc, d).await?;
    }
    Ok(())
}

/// The `ReplicaFailure` of the new ReplicaSet, else of an old one, as a Deployment condition.
fn replica_failure(rss: &ReplicaSets) -> Option<DeploymentCondition> {
    rss.new.iter().chain(rss.old.iter()).find_map(|rs| {
        let c = rs
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == progress::REPLICA_FAILURE)?;
        Some(DeploymentCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_update_time: c.last_transition_time.clone(),
            last_transition_time: c.last_transition_time.clone(),
        })
    })
}

/// Writes the status after a rollout step with its `Progressing` condition (upstream's
/// `syncRolloutStatus`), and says when to look again for the progress deadline.
pub async fn sync_rollout_status(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    rss: &ReplicaSets,
) -> Result<Option<Duration>, Error> {
    sync_rollout_status_held(dc, d, r, rss, None).await
}

/// [`sync_rollout_status`] after a rolling step that asked the disruption budgets (`held`:
/// `Some` with what holds the rollout back, if anything), which sets or clears the
/// [`crate::disruption_gate::CONDITION`] condition.
pub async fn sync_rollout_status_held(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    rss: &ReplicaSets,
    held: Option<Option<&crate::disruption_gate::Refusal>>,
) -> Result<Option<Duration>, Error> {
    let now = clock::now();
    let mut status = progress::rollout_status(
        d,
        r,
        &rss.all(),
        rss.new_view().as_ref(),
        replica_failure(rss),
        now,
    );
    if let Some(held) = held {
        crate::disruption_gate::set_deployment_condition(&mut status.conditions, held, now);
    }
    let requeue = progress::requeue_after(d, &status, now);
    if d.status.as_ref() != Some(&status) {
        d.status = Some(status);
        write_status(dc, d).await?;
    }
    Ok(requeue)
}

/// Scaling while paused or between rollouts (upstream's `sync`): no new ReplicaSet, sizes
/// follow `spec.replicas`, old revisions are cleaned up while paused.
pub async fn sync(
    dc: &DeploymentController,
    d: &mut Deployment,
    r: &Rollout,
    rs_list: &[ReplicaSet],
) -> Result<(), Error> {
    let mut rss = replica_sets(dc, d, r, rs_list, false).await?;
    scale(dc, d, r, &mut rss).await?;
    if d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false) {
        cleanup(dc, d, &rss.old).await?;
    }
    sync_status(dc, d, r, &rss).await
}

/// Whether `spec.replicas` changed since the active ReplicaSets were last sized (upstream's
/// `isScalingEvent`).
pub fn is_scaling_event(r: &Rollout, rs_list: &[ReplicaSet]) -> bool {
    rs_list
        .iter()
        .map(RsView::of)
        .filter(|v| v.replicas > 0)
        .any(|v| {
            v.desired_replicas
                .is_some_and(|desired| desired != r.replicas)
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    fn rs(name: &str, created: i64, replicas: i32, max: Option<i32>) -> RsView {
        RsView {
            name: name.into(),
            created: Some(Timestamp::from_second(created).unwrap()),
            replicas,
            status_replicas: replicas,
            max_replicas: max,
            settled: true,
            ..Default::default()
        }
    }

    #[test]
    fn scaling_mid_rollout_is_proportional() {
        let r = |replicas, surge, status| Rollout {
            replicas,
            rolling: true,
            max_surge: surge,
            max_unavailable: 2,
            status_replicas: status,
        };
        // (case, rollout, replica sets (name, created, replicas, max-replicas), want sizes, operation)
        type Case = (
            &'static str,
            Rollout,
            Vec<RsView>,
            Vec<(&'static str, i32)>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                // Upstream's documented example: 10 replicas, surge 3, old 8 / new 5, scaled to 15.
                "upstream example: 3 to the old RS, 2 to the new",
                r(15, 3, 13),
                vec![rs("old", 1, 8, Some(13)), rs("new", 2, 5, Some(13))],
                vec![("old", 11), ("new", 7)],
                "up",
            ),
            (
                "scaling down takes from the larger first",
                r(5, 1, 13),
                vec![rs("old", 1, 8, Some(13)), rs("new", 2, 5, Some(13))],
                // old: round(8 * 6 / 13) = 4; new: round(5 * 6 / 13) = 2.
                vec![("old", 4), ("new", 2)],
                "down",
            ),
            (
                // Each share rounds to 0 (3 * 10 / 9 = 3.3); the one left over goes to the
                // first of equal sizes, the newest when growing.
                "rounding leftovers go to the largest",
                r(10, 0, 9),
                vec![
                    rs("a", 1, 3, Some(9)),
                    rs("b", 2, 3, Some(9)),
                    rs("c", 3, 3, Some(9)),
                ],
                vec![("c", 4), ("b", 3), ("a", 3)],
                "up",
            ),
            (
                "to zero: everything goes",
                r(0, 3, 13),
                vec![rs("old", 1, 8, Some(13)), rs("new", 2, 5, Some(13))],
                vec![("old", 0), ("new", 0)],
                "down",
            ),
            (
                "without max-replicas the status replicas are the base",
                r(20, 0, 10),
                vec![rs("old", 1, 6, None), rs("new", 2, 4, None)],
                vec![("old", 12), ("new", 8)],
                "up",
            ),
            (
                "already at size: unchanged",
                r(10, 3, 13),
                vec![rs("old", 1, 8, Some(13)), rs("new", 2, 5, Some(13))],
                vec![("old", 8), ("new", 5)],
                "",
            ),
        ];
        for (name, rollout, rss, want, want_op) in cases {
            let (mut got, op) = proportional_sizes(&rollout, &rss);
            got.sort();
            let mut want: Vec<(String, i32)> =
                want.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
            want.sort();
            assert_eq!(got, want, "{name}");
            assert_eq!(op, want_op, "{name}");
            let total: i32 = got.iter().map(|(_, s)| s).sum();
            let allowed = if rollout.replicas > 0 {
                rollout.replicas + rollout.max_surge
            } else {
                0
            };
            assert_eq!(total, allowed, "{name}: the total is replicas + maxSurge");
        }
    }
}
