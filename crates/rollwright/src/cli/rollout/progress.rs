//! How far a rollout is and what it waits on: kubectl's done conditions over the workload's
//! status (so `rollwright rollout status` ends exactly when `kubectl rollout status` does), and
//! the pods behind the numbers (so it can say *which* pod it waits for, and why).

use super::model::{PodView, RevisionView, Snapshot, WorkloadView};
use crate::cli::workload::Kind;
use jiff::Timestamp;

/// Pods of one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevisionCount {
    /// The revision number (`None` for pods whose revision is unknown).
    pub number: Option<i64>,
    /// Whether it is the workload's current revision.
    pub current: bool,
    /// Pods not being deleted.
    pub pods: i32,
    /// Of those, ready.
    pub ready: i32,
    /// Of those, available.
    pub available: i32,
    /// Pods being deleted.
    pub terminating: i32,
}

/// Where the rollout stands by kubectl's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Rolled out (kubectl's closing message).
    Done(String),
    /// Still going (kubectl's progress message).
    Waiting(String),
    /// Will not finish by itself: the rollout exceeded its progress deadline.
    Failed(String),
    /// kubectl reports rollouts of the RollingUpdate strategy only.
    Unsupported(String),
}

/// A rollout at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// The current revision's number, once its controller has made it.
    pub revision: Option<i64>,
    /// Pods wanted.
    pub desired: i32,
    /// Pods wanted on the current revision (`desired - partition` for a StatefulSet).
    pub target: i32,
    /// Pods of the current revision (not being deleted).
    pub updated: i32,
    /// Of those, ready.
    pub ready: i32,
    /// Of those, available.
    pub available: i32,
    /// Pods per revision: the current one first, then older ones, newest first.
    pub revisions: Vec<RevisionCount>,
    /// kubectl's judgement.
    pub verdict: Verdict,
    /// What it waits on, named (empty once done).
    pub waiting_on: String,
}

/// kubectl's `rollout status` message for the workload's status, and whether it is done.
pub fn kubectl_verdict(w: &WorkloadView) -> Verdict {
    let name = &w.name;
    match w.kind() {
        Kind::Deployment => {
            if w.generation > w.observed_generation {
                return Verdict::Waiting(
                    "Waiting for deployment spec update to be observed...".into(),
                );
            }
            if w.deadline_exceeded {
                return Verdict::Failed(format!(
                    "deployment {name:?} exceeded its progress deadline"
                ));
            }
            if w.updated < w.desired {
                Verdict::Waiting(format!(
                    "Waiting for deployment {name:?} rollout to finish: {} out of {} new replicas have been updated...",
                    w.updated, w.desired
                ))
            } else if w.replicas > w.updated {
                Verdict::Waiting(format!(
                    "Waiting for deployment {name:?} rollout to finish: {} old replicas are pending termination...",
                    w.replicas - w.updated
                ))
            } else if w.available < w.updated {
                Verdict::Waiting(format!(
                    "Waiting for deployment {name:?} rollout to finish: {} of {} updated replicas are available...",
                    w.available, w.updated
                ))
            } else {
                Verdict::Done(format!("deployment {name:?} successfully rolled out"))
            }
        }
        Kind::DaemonSet => {
            if !w.rolling {
                return Verdict::Unsupported(
                    "rollout status is only available for RollingUpdate strategy type".into(),
                );
            }
            if w.generation > w.observed_generation {
                return Verdict::Waiting(
                    "Waiting for daemon set spec update to be observed...".into(),
                );
            }
            if w.deadline_exceeded {
                return Verdict::Failed(format!(
                    "daemon set {name:?} exceeded its progress deadline"
                ));
            }
            if w.updated < w.desired {
                Verdict::Waiting(format!(
                    "Waiting for daemon set {name:?} rollout to finish: {} out of {} new pods have been updated...",
                    w.updated, w.desired
                ))
            } else if w.available < w.desired {
                Verdict::Waiting(format!(
                    "Waiting for daemon set {name:?} rollout to finish: {} of {} updated pods are available...",
                    w.available, w.desired
                ))
            } else {
                Verdict::Done(format!("daemon set {name:?} successfully rolled out"))
            }
        }
        Kind::StatefulSet => {
            if !w.rolling {
                return Verdict::Unsupported(
                    "rollout status is only available for RollingUpdate strategy type".into(),
                );
            }
            if w.observed_generation == 0 || w.generation > w.observed_generation {
                return Verdict::Waiting(
                    "Waiting for statefulset spec update to be observed...".into(),
                );
            }
            if w.deadline_exceeded {
                return Verdict::Failed(format!(
                    "statefulset {name:?} exceeded its progress deadline"
                ));
            }
            if w.ready < w.desired {
                return Verdict::Waiting(format!(
                    "Waiting for {} pods to be ready...",
                    w.desired - w.ready
                ));
            }
            if w.partition > 0 {
                if w.updated < w.desired - w.partition {
                    return Verdict::Waiting(format!(
                        "Waiting for partitioned roll out to finish: {} out of {} new pods have been updated...",
                        w.updated,
                        w.desired - w.partition
                    ));
                }
                return Verdict::Done(format!(
                    "partitioned roll out complete: {} new pods have been updated...",
                    w.updated
                ));
            }
            let update = w.update_revision.clone().unwrap_or_default();
            if w.update_revision != w.current_revision {
                Verdict::Waiting(format!(
                    "waiting for statefulset rolling update to complete {} pods at revision {update}...",
                    w.updated
                ))
            } else {
                Verdict::Done(format!(
                    "statefulset rolling update complete {} pods at revision {update}...",
                    w.updated
                ))
            }
        }
    }
}

/// How a pod that is not available looks: its name, state and node, e.g.
/// `web-7c9-xk2p9 ImagePullBackOff on node-12`.
pub fn describe_pod(p: &PodView, min_ready_seconds: i32, now: Timestamp) -> String {
    let state = if p.terminating {
        "Terminating".to_string()
    } else if let Some(reason) = &p.reason {
        reason.clone()
    } else if p.is_ready() {
        match p.ready_since {
            Some(since) if min_ready_seconds > 0 => {
                let at = since + jiff::SignedDuration::from_secs(i64::from(min_ready_seconds));
                let left = now.duration_until(at).as_secs().max(0);
                format!("Ready, available in {left}s (minReadySeconds {min_ready_seconds})")
            }
            _ => "Ready".to_string(),
        }
    } else if p.node.is_none() {
        "Pending, not scheduled".to_string()
    } else if p.phase == "Running" {
        "Running, not ready".to_string()
    } else {
        p.phase.clone()
    };
    match &p.node {
        Some(node) => format!("{} {state} on {node}", p.name),
        None => format!("{} {state}", p.name),
    }
}

/// How far from available a pod is, worst first: failing, unscheduled, starting, not ready,
/// ready but not yet for long enough.
fn severity(p: &PodView) -> u8 {
    match (&p.reason, &p.node) {
        (Some(r), _) if r == "Unschedulable" => 1,
        (Some(r), _) if r != "ContainerCreating" && r != "PodInitializing" => 0,
        (_, None) => 1,
        (Some(_), _) => 2,
        _ if p.phase != "Running" => 2,
        _ if !p.is_ready() => 3,
        _ => 4,
    }
}

/// At most three pods, named, then how many more.
fn name_some(pods: &[&PodView], min_ready_seconds: i32, now: Timestamp) -> String {
    const SHOWN: usize = 3;
    let mut text: Vec<String> = pods
        .iter()
        .take(SHOWN)
        .map(|p| describe_pod(p, min_ready_seconds, now))
        .collect();
    if pods.len() > SHOWN {
        text.push(format!("and {} more", pods.len() - SHOWN));
    }
    text.join(", ")
}

fn pods(n: i32) -> &'static str {
    if n == 1 { "pod" } else { "pods" }
}

/// Judges the rollout in `snap` at `now`.
pub fn assess(snap: &Snapshot, now: Timestamp) -> Progress {
    let w = &snap.workload;
    let current = snap.current_revision();
    let min_ready = w.min_ready_seconds;
    let revision_of = |p: &PodView| -> Option<&RevisionView> {
        p.revision_key
            .as_deref()
            .and_then(|k| snap.revision_by_key(k))
    };
    let is_current =
        |p: &PodView| current.is_some_and(|c| p.revision_key.as_deref() == Some(&c.key));

    let mut counts: Vec<RevisionCount> = Vec::new();
    for p in &snap.pods {
        let number = revision_of(p).map(|r| r.number);
        let idx = match counts.iter().position(|c| c.number == number) {
            Some(i) => i,
            None => {
                counts.push(RevisionCount {
                    number,
                    current: is_current(p),
                    ..Default::default()
                });
                counts.len() - 1
            }
        };
        let c = &mut counts[idx];
        if p.terminating {
            c.terminating += 1;
        } else {
            c.pods += 1;
            c.ready += i32::from(p.is_ready());
            c.available += i32::from(p.is_available(min_ready, now));
        }
    }
    if let Some(cur) = current
        && !counts.iter().any(|c| c.current)
    {
        counts.push(RevisionCount {
            number: Some(cur.number),
            current: true,
            ..Default::default()
        });
    }
    counts.sort_by(|a, b| {
        b.current
            .cmp(&a.current)
            .then(b.number.unwrap_or(-1).cmp(&a.number.unwrap_or(-1)))
    });
    let now_current = counts
        .iter()
        .find(|c| c.current)
        .cloned()
        .unwrap_or_default();
    let target = match w.kind() {
        Kind::StatefulSet => (w.desired - w.partition).max(0),
        _ => w.desired,
    };
    let verdict = kubectl_verdict(w);
    let waiting_on = match &verdict {
        Verdict::Done(_) | Verdict::Unsupported(_) => String::new(),
        Verdict::Waiting(_) | Verdict::Failed(_) => {
            let text = waiting_on(snap, current, &now_current, target, now);
            // A paced rollout says first what paces it: the pods it waits on are then those
            // in flight, or none while the interval runs.
            let text = match w.paced.as_ref().filter(|_| !w.paused) {
                Some(hold) => format!("{}; {text}", hold.describe(now)),
                None => text,
            };
            // A rollout a disruption budget holds says so before anything else.
            match w.budget_held.as_ref().filter(|_| !w.paused) {
                Some(held) => format!("{held}; {text}"),
                None => text,
            }
        }
    };
    Progress {
        revision: current.map(|c| c.number),
        desired: w.desired,
        target,
        updated: now_current.pods,
        ready: now_current.ready,
        available: now_current.available,
        revisions: counts,
        verdict,
        waiting_on,
    }
}

/// What the rollout waits on, named.
fn waiting_on(
    snap: &Snapshot,
    current: Option<&RevisionView>,
    counts: &RevisionCount,
    target: i32,
    now: Timestamp,
) -> String {
    let w = &snap.workload;
    let min_ready = w.min_ready_seconds;
    if w.generation > w.observed_generation {
        return format!(
            "waiting for the {} controller to observe generation {} (it has seen {})",
            w.kind().kind(),
            w.generation,
            w.observed_generation
        );
    }
    let Some(current) = current else {
        return format!(
            "waiting for the {} controller to record the new template as a revision",
            w.kind().kind()
        );
    };
    let is_current = |p: &PodView| p.revision_key.as_deref() == Some(current.key.as_str());
    // A StatefulSet keeps ordinals below its partition on the old revision on purpose.
    let below_partition = |p: &PodView| {
        w.kind() == Kind::StatefulSet
            && w.partition > 0
            && p.ordinal.is_some_and(|o| o < w.partition)
    };
    let old: Vec<&PodView> = snap
        .pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| !is_current(p) && !below_partition(p))
        .collect();
    if w.paused {
        let live = old.iter().filter(|p| !p.terminating).count();
        return format!(
            "rollout paused with {live} {} on older revisions (resume it with `rollwright rollout resume {}/{}`)",
            pods(i32::try_from(live).unwrap_or(i32::MAX)),
            w.kind().short(),
            w.name
        );
    }
    let mut unavailable: Vec<&PodView> = snap
        .pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| is_current(p) && !p.terminating && !p.is_available(min_ready, now))
        .collect();
    unavailable.sort_by_key(|p| (severity(p), p.name.clone()));
    if !unavailable.is_empty() {
        let n = i32::try_from(unavailable.len()).unwrap_or(i32::MAX);
        return format!(
            "waiting for {n} {} of revision {} to become available: {}",
            pods(n),
            current.number,
            name_some(&unavailable, min_ready, now)
        );
    }
    let live_old: Vec<&PodView> = old.iter().copied().filter(|p| !p.terminating).collect();
    if counts.pods < target {
        let missing = target - counts.pods;
        if live_old.is_empty() {
            return format!(
                "waiting for the {} controller to create {missing} {} of revision {}",
                w.kind().kind(),
                pods(missing),
                current.number
            );
        }
        let olds = i32::try_from(live_old.len()).unwrap_or(i32::MAX);
        return format!(
            "waiting for {missing} more {} of revision {}: {olds} {} of older revisions still to be replaced",
            pods(missing),
            current.number,
            pods(olds)
        );
    }
    if !old.is_empty() {
        let mut sorted = old.clone();
        sorted.sort_by_key(|p| (!p.terminating, p.name.clone()));
        let n = i32::try_from(sorted.len()).unwrap_or(i32::MAX);
        return format!(
            "waiting for {n} old {} to go: {}",
            pods(n),
            name_some(&sorted, min_ready, now)
        );
    }
    format!(
        "waiting for the {} controller to report the rollout ({} of {} updated, {} available in its status)",
        w.kind().kind(),
        w.updated,
        w.desired,
        w.available
    )
}

/// One line for the rollout: the current revision's counts against the target, the older
/// revisions' pods, and what it waits on, e.g. `revision 2: 1/3 updated, 1/3 ready, 0/3
/// available; revision 1: 3 pods; waiting for ...`.
pub fn summary(p: &Progress) -> String {
    let mut parts = Vec::new();
    let t = p.target;
    let head = match p.revision {
        Some(r) => format!("revision {r}"),
        None => "new revision".to_string(),
    };
    let partition = if p.target != p.desired {
        format!(" (of {}, partitioned)", p.desired)
    } else {
        String::new()
    };
    parts.push(format!(
        "{head}: {}/{t} updated, {}/{t} ready, {}/{t} available{partition}",
        p.updated, p.ready, p.available
    ));
    for c in p.revisions.iter().filter(|c| !c.current) {
        let name = c
            .number
            .map_or("unknown revision".to_string(), |n| format!("revision {n}"));
        let mut text = format!("{name}: {} {}", c.pods, pods(c.pods));
        if c.terminating > 0 {
            text.push_str(&format!(" (+{} terminating)", c.terminating));
        }
        parts.push(text);
    }
    let mut line = parts.join("; ");
    if !p.waiting_on.is_empty() {
        line.push_str("; ");
        line.push_str(&p.waiting_on);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn t0() -> Timestamp {
        "2025-01-01T00:00:00Z".parse().expect("time")
    }

    fn template(image: &str) -> serde_json::Value {
        json!({"spec": {"containers": [{"name": "c", "image": image}]}})
    }

    fn revision(number: i64, key: &str, image: &str) -> RevisionView {
        RevisionView {
            number,
            name: format!("web-{key}"),
            key: key.into(),
            template: template(image),
            ..Default::default()
        }
    }

    /// A pod of revision `key`: `state` is `ready`, `terminating`, or a waiting reason.
    fn pod(name: &str, key: &str, state: &str, node: &str) -> Arc<PodView> {
        Arc::new(PodView {
            name: name.into(),
            node: (!node.is_empty()).then(|| node.to_string()),
            revision_key: Some(key.into()),
            phase: if state == "ready" {
                "Running"
            } else {
                "Pending"
            }
            .into(),
            ready_since: (state == "ready").then(t0),
            terminating: state == "terminating",
            reason: (!["ready", "terminating", ""].contains(&state)).then(|| state.to_string()),
            ..Default::default()
        })
    }

    fn deployment(desired: i32, updated: i32, replicas: i32, available: i32) -> WorkloadView {
        WorkloadView {
            kind: Some(Kind::Deployment),
            name: "web".into(),
            generation: 2,
            observed_generation: 2,
            desired,
            replicas,
            updated,
            ready: available,
            available,
            rolling: true,
            template: template("v2"),
            ..Default::default()
        }
    }

    #[test]
    fn kubectl_messages_and_done_conditions() {
        let cases: Vec<(WorkloadView, Verdict)> = vec![
            (
                WorkloadView { generation: 3, ..deployment(3, 3, 3, 3) },
                Verdict::Waiting("Waiting for deployment spec update to be observed...".into()),
            ),
            (
                deployment(3, 1, 4, 3),
                Verdict::Waiting("Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...".into()),
            ),
            (
                deployment(3, 3, 4, 3),
                Verdict::Waiting("Waiting for deployment \"web\" rollout to finish: 1 old replicas are pending termination...".into()),
            ),
            (
                deployment(3, 3, 3, 2),
                Verdict::Waiting("Waiting for deployment \"web\" rollout to finish: 2 of 3 updated replicas are available...".into()),
            ),
            (
                deployment(3, 3, 3, 3),
                Verdict::Done("deployment \"web\" successfully rolled out".into()),
            ),
            (
                WorkloadView { deadline_exceeded: true, ..deployment(3, 1, 4, 3) },
                Verdict::Failed("deployment \"web\" exceeded its progress deadline".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::DaemonSet), ..deployment(5, 4, 5, 4) },
                Verdict::Waiting("Waiting for daemon set \"web\" rollout to finish: 4 out of 5 new pods have been updated...".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::DaemonSet), ..deployment(5, 5, 5, 4) },
                Verdict::Waiting("Waiting for daemon set \"web\" rollout to finish: 4 of 5 updated pods are available...".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::DaemonSet), ..deployment(5, 5, 5, 5) },
                Verdict::Done("daemon set \"web\" successfully rolled out".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::DaemonSet), deadline_exceeded: true, ..deployment(5, 4, 5, 4) },
                Verdict::Failed("daemon set \"web\" exceeded its progress deadline".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::StatefulSet), deadline_exceeded: true, ..deployment(3, 1, 3, 2) },
                Verdict::Failed("statefulset \"web\" exceeded its progress deadline".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::DaemonSet), rolling: false, ..deployment(5, 5, 5, 5) },
                Verdict::Unsupported("rollout status is only available for RollingUpdate strategy type".into()),
            ),
            (
                WorkloadView {
                    kind: Some(Kind::StatefulSet),
                    current_revision: Some("web-a".into()),
                    update_revision: Some("web-b".into()),
                    ..deployment(3, 1, 3, 3)
                },
                Verdict::Waiting("waiting for statefulset rolling update to complete 1 pods at revision web-b...".into()),
            ),
            (
                WorkloadView {
                    kind: Some(Kind::StatefulSet),
                    current_revision: Some("web-b".into()),
                    update_revision: Some("web-b".into()),
                    ..deployment(3, 3, 3, 3)
                },
                Verdict::Done("statefulset rolling update complete 3 pods at revision web-b...".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::StatefulSet), partition: 2, ..deployment(3, 1, 3, 3) },
                Verdict::Done("partitioned roll out complete: 1 new pods have been updated...".into()),
            ),
            (
                WorkloadView { kind: Some(Kind::StatefulSet), ..deployment(3, 3, 3, 2) },
                Verdict::Waiting("Waiting for 1 pods to be ready...".into()),
            ),
        ];
        for (w, want) in cases {
            assert_eq!(kubectl_verdict(&w), want, "{w:?}");
        }
    }

    fn snapshot(w: WorkloadView, pods: Vec<Arc<PodView>>) -> Snapshot {
        Snapshot {
            workload: w,
            revisions: vec![revision(6, "a", "v1"), revision(7, "b", "v2")],
            pods,
            ..Default::default()
        }
    }

    #[test]
    fn names_the_pods_it_waits_for() {
        let snap = snapshot(
            deployment(3, 3, 3, 1),
            vec![
                pod("web-b-1", "b", "ready", "node-1"),
                pod("web-b-2", "b", "ContainerCreating", "node-2"),
                pod("web-b-3", "b", "ImagePullBackOff", "node-12"),
            ],
        );
        let p = assess(&snap, t0());
        assert_eq!(p.revision, Some(7));
        assert_eq!((p.updated, p.ready, p.available), (3, 1, 1));
        assert_eq!(
            p.waiting_on,
            "waiting for 2 pods of revision 7 to become available: web-b-3 ImagePullBackOff on node-12, web-b-2 ContainerCreating on node-2"
        );
        assert_eq!(
            summary(&p),
            format!(
                "revision 7: 3/3 updated, 1/3 ready, 1/3 available; {}",
                p.waiting_on
            )
        );
    }

    #[test]
    fn waits_for_old_pods_and_replacements() {
        // Two new pods available, one old pod still to be replaced.
        let snap = snapshot(
            deployment(3, 2, 3, 3),
            vec![
                pod("web-a-1", "a", "ready", "node-1"),
                pod("web-b-1", "b", "ready", "node-2"),
                pod("web-b-2", "b", "ready", "node-3"),
                pod("web-a-2", "a", "terminating", "node-3"),
            ],
        );
        let p = assess(&snap, t0());
        assert_eq!(
            p.waiting_on,
            "waiting for 1 more pod of revision 7: 1 pod of older revisions still to be replaced"
        );
        assert_eq!(
            summary(&p),
            format!(
                "revision 7: 2/3 updated, 2/3 ready, 2/3 available; revision 6: 1 pod (+1 terminating); {}",
                p.waiting_on
            )
        );
        // All new pods there, an old one terminating.
        let snap = snapshot(
            deployment(2, 2, 3, 2),
            vec![
                pod("web-b-1", "b", "ready", "node-2"),
                pod("web-b-2", "b", "ready", "node-3"),
                pod("web-a-2", "a", "terminating", "node-3"),
            ],
        );
        assert_eq!(
            assess(&snap, t0()).waiting_on,
            "waiting for 1 old pod to go: web-a-2 Terminating on node-3"
        );
    }

    #[test]
    fn a_paused_rollout_says_so() {
        let snap = snapshot(
            WorkloadView {
                kind: Some(Kind::DaemonSet),
                paused: true,
                ..deployment(2, 1, 2, 2)
            },
            vec![
                pod("web-b-1", "b", "ready", "n1"),
                pod("web-a-1", "a", "ready", "n2"),
            ],
        );
        assert_eq!(
            assess(&snap, t0()).waiting_on,
            "rollout paused with 1 pod on older revisions (resume it with `rollwright rollout resume ds/web`)"
        );
    }

    #[test]
    fn a_paced_rollout_says_what_paces_it() {
        use controllers::pacing::Hold;
        let pods = vec![
            pod("web-b-1", "b", "ready", "n1"),
            pod("web-b-2", "b", "ContainerCreating", "n2"),
            pod("web-a-1", "a", "ready", "n3"),
        ];
        let held = |paced| WorkloadView {
            kind: Some(Kind::DaemonSet),
            paced: Some(paced),
            ..deployment(3, 2, 3, 1)
        };
        let by_max = snapshot(
            held(Hold::MaxUpdating {
                updating: 1,
                max: 1,
            }),
            pods.clone(),
        );
        assert_eq!(
            assess(&by_max, t0()).waiting_on,
            "paced: 1 updating (max-updating 1); waiting for 1 pod of revision 7 to become available: web-b-2 ContainerCreating on n2"
        );
        let next = t0() + jiff::SignedDuration::from_millis(1500);
        let by_interval = snapshot(
            held(Hold::MinUpdateInterval {
                next,
                interval: "2s".into(),
            }),
            vec![pods[0].clone(), pods[2].clone()],
        );
        assert_eq!(
            assess(&by_interval, t0()).waiting_on,
            "paced: next update in 2s (min-update-interval 2s); waiting for 2 more pods of revision 7: 1 pod of older revisions still to be replaced"
        );
        // Read from the condition the controller writes.
        let ds = json!({"metadata": {"name": "web"}, "status": {"conditions": [
            {"type": "RolloutPaced", "status": "True", "reason": "MaxUpdating",
             "message": "paced: 2 updating (max-updating 2)", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}});
        assert_eq!(
            WorkloadView::from_json(Kind::DaemonSet, &ds).paced,
            Some(Hold::MaxUpdating {
                updating: 2,
                max: 2
            })
        );
        assert_eq!(WorkloadView::from_json(Kind::Deployment, &ds).paced, None);
    }

    #[test]
    fn a_rollout_held_by_a_budget_names_it() {
        let pods = vec![
            pod("web-b-1", "b", "ready", "n1"),
            pod("web-a-1", "a", "ready", "n3"),
        ];
        let sts = json!({"metadata": {"name": "web"}, "status": {"conditions": [
            {"type": "RolloutHeld", "status": "True", "reason": "DisruptionBudget",
             "message": "waiting on pdb/db (0 disruptions allowed): The disruption budget db needs 2 healthy pods and has 2 currently",
             "lastTransitionTime": "2025-01-01T00:00:00Z"}]}});
        let budget_held = WorkloadView::from_json(Kind::StatefulSet, &sts).budget_held;
        assert_eq!(
            budget_held.as_deref(),
            Some("waiting on pdb/db (0 disruptions allowed)")
        );
        let held = snapshot(
            WorkloadView {
                budget_held,
                ..deployment(3, 2, 3, 1)
            },
            pods,
        );
        assert!(
            assess(&held, t0())
                .waiting_on
                .starts_with("waiting on pdb/db (0 disruptions allowed); "),
            "{}",
            assess(&held, t0()).waiting_on
        );
    }

    #[test]
    fn unobserved_spec_and_missing_revision() {
        let snap = snapshot(
            WorkloadView {
                generation: 3,
                ..deployment(3, 3, 3, 3)
            },
            vec![],
        );
        assert!(
            assess(&snap, t0())
                .waiting_on
                .contains("observe generation 3")
        );
        let mut snap = snapshot(
            deployment(3, 0, 3, 3),
            vec![pod("web-a-1", "a", "ready", "n")],
        );
        snap.workload.template = template("v3");
        let p = assess(&snap, t0());
        assert_eq!(p.revision, None);
        assert!(
            p.waiting_on.contains("record the new template"),
            "{}",
            p.waiting_on
        );
    }

    #[test]
    fn statefulset_partitions_keep_low_ordinals_old() {
        let mut w = deployment(3, 1, 3, 3);
        w.kind = Some(Kind::StatefulSet);
        w.partition = 1;
        w.update_revision = Some("web-b".into());
        w.current_revision = Some("web-a".into());
        w.ready = 3;
        let mut a = revision(1, "web-a", "v1");
        a.name = "web-a".into();
        let mut b = revision(2, "web-b", "v2");
        b.name = "web-b".into();
        let mut p0 = (*pod("web-0", "web-a", "ready", "n")).clone();
        p0.ordinal = Some(0);
        let mut p2 = (*pod("web-2", "web-b", "ready", "n")).clone();
        p2.ordinal = Some(2);
        let mut p1 = (*pod("web-1", "web-a", "ready", "n")).clone();
        p1.ordinal = Some(1);
        let snap = Snapshot {
            workload: w,
            revisions: vec![a, b],
            pods: vec![Arc::new(p0), Arc::new(p1), Arc::new(p2)],
            ..Default::default()
        };
        let p = assess(&snap, t0());
        assert_eq!(p.target, 2);
        assert_eq!(
            p.waiting_on,
            "waiting for 1 more pod of revision 2: 1 pod of older revisions still to be replaced"
        );
    }

    #[test]
    fn pods_described_by_state() {
        let now = t0() + jiff::SignedDuration::from_secs(4);
        let ready = PodView {
            name: "p".into(),
            node: Some("n".into()),
            phase: "Running".into(),
            ready_since: Some(t0()),
            ..Default::default()
        };
        assert_eq!(
            describe_pod(&ready, 10, now),
            "p Ready, available in 6s (minReadySeconds 10) on n"
        );
        let unscheduled = PodView {
            name: "p".into(),
            phase: "Pending".into(),
            ..Default::default()
        };
        assert_eq!(
            describe_pod(&unscheduled, 0, now),
            "p Pending, not scheduled"
        );
        let running = PodView {
            phase: "Running".into(),
            ..ready.clone()
        };
        let running = PodView {
            ready_since: None,
            ..running
        };
        assert_eq!(describe_pod(&running, 0, now), "p Running, not ready on n");
    }
}
