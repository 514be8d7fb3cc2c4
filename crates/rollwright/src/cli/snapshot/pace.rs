//! The control plane's pace, measured from what a user may list: how fast the cluster's
//! controllers created each workload's pods in its latest rollout, and how soon its scheduler
//! bound them. A rehearsal paces its own controllers, scheduler and simulated kubelets by it
//! (`whatif --control-plane measured`), because at hundreds of pods a client's rate limit, not
//! readiness, sets a rollout's pace: kube-controller-manager's 20 requests a second make 500
//! creates 25 s.
//!
//! What the timestamps can and cannot say:
//! - A pod's `creationTimestamp` is kept to the second. The pods of a workload's latest revision
//!   (its newest ReplicaSet, or the pods of its newest ControllerRevision) are counted per
//!   second. A controller waiting on its rate limiter creates pods in a *paced stretch*: every
//!   second for several seconds in a row, about as many each second ([`steady`]). The median of
//!   such a stretch's inner seconds (the first may hold the bucket's burst, the last is cut
//!   short) is the controller's rate. Uneven seconds are a controller bound by the server's
//!   latency instead (slow-start batches), which no limit paced. A stretch shorter than [`PACED_SECONDS`] is no pace: an unlimited
//!   controller creates a wave of pods in one second, and readiness-paced waves leave seconds
//!   without a create between them.
//! - A burst cannot be seen in whole seconds: it is assumed (upstream's default), and said so.
//!   More creates in one second than the assumed rate and burst allow do show a faster
//!   cluster: its rate is then at least that many less the burst ([`Basis::AtLeast`]).
//! - Scheduling latency is `creationTimestamp` to the `PodScheduled` condition's
//!   `lastTransitionTime`. While the scheduler keeps up (every pod bound within
//!   [`LAG_SECONDS`]), its limit never showed, and upstream's default is assumed; when it fell
//!   behind, its bindings' paced stretch is its rate.
//! - Deletions are not measured: the pods an update deleted are gone from every list, and the
//!   Events that name them are aggregated and spam-filtered (25 per object) before they are
//!   stored. A controller's deletes wait on the same client's bucket as its creates, though, so
//!   the rate measured from creates paces them in the rehearsal too.
//! - A kubelet's requests (status updates) leave no timestamp a user can list: its limit is
//!   always assumed.
//! - How long the last update took ([`last_update`]) is kept, though: `whatif` replays it to
//!   check the controllers' limit read here (`whatif::calibrate`).

use jiff::Timestamp;
use restclient::Limit;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Seconds in a row with creates (or bindings) that make a paced stretch: a first second that
/// may hold a burst, at least one whole second inside, a last second cut short.
pub const PACED_SECONDS: usize = 3;

/// How far from the median an inner second of a paced stretch may be, as a share of it, and
/// still count as the limiter's pace ([`steady`]).
pub const STEADY: f64 = 0.25;

/// Seconds from creation to binding within which the scheduler counts as keeping up: two
/// truncated timestamps are each off by up to a second.
pub const LAG_SECONDS: f64 = 2.0;

/// What a snapshot says of its cluster's control plane (the `controlPlane` field).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Pace {
    /// The controllers' client limit (one bucket per controller, as kube-controller-manager).
    pub controllers: Rate,
    /// The scheduler's.
    pub scheduler: Rate,
    /// Each kubelet's.
    pub kubelet: Rate,
    /// What each workload's latest rollout showed, the figures above came from.
    #[serde(default)]
    pub rollouts: Vec<Rollout>,
}

/// One component's client limit, and where it came from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rate {
    /// Requests a second.
    pub qps: f32,
    /// Requests at once after a quiet spell (always assumed: whole seconds cannot show it).
    pub burst: u32,
    /// How `qps` was found.
    pub basis: Basis,
    /// The workload whose latest rollout showed it (`deployment/shop/web`), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Why, in a sentence: what was seen, or why nothing could be.
    pub why: String,
}

/// How a [`Rate`]'s `qps` was found.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Basis {
    /// A paced stretch's rate.
    Measured,
    /// More in one second than the default allows: at least this fast, maybe faster.
    AtLeast,
    /// Upstream's default: the history says nothing.
    Assumed,
}

/// A workload's latest rollout as its pods' timestamps show it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// `kind/namespace/name`.
    pub workload: String,
    /// Its latest revision: the ReplicaSet's or the ControllerRevision's name.
    pub revision: String,
    /// The revision's pods.
    pub pods: usize,
    /// The most created in one second.
    pub busiest_second: usize,
    /// The creates' paced stretch, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Stretch>,
    /// Median seconds from creation to binding, of the pods bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_after_median: Option<f64>,
    /// The most seconds from creation to binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_after_max: Option<f64>,
    /// The most bound in one second.
    #[serde(default)]
    pub busiest_binding_second: usize,
    /// The bindings' paced stretch, if the scheduler fell behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Stretch>,
}

/// A paced stretch: seconds in a row, each with at least one event.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Stretch {
    /// Its length in (whole) seconds.
    pub seconds: usize,
    /// Events in it.
    pub pods: usize,
    /// The median count of its inner seconds.
    pub per_second: f64,
}

/// The longest-lived paced stretch (the most events; the later on a tie) among `seconds` (Unix
/// seconds of each event).
pub fn paced(seconds: &[i64]) -> Option<Stretch> {
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for s in seconds {
        *counts.entry(*s).or_default() += 1;
    }
    let mut stretches: Vec<Vec<usize>> = Vec::new();
    let mut previous: Option<i64> = None;
    for (second, count) in counts {
        match (previous, stretches.last_mut()) {
            (Some(p), Some(run)) if second == p + 1 => run.push(count),
            _ => stretches.push(vec![count]),
        }
        previous = Some(second);
    }
    stretches
        .into_iter()
        .filter(|run| run.len() >= PACED_SECONDS)
        .filter_map(|run| {
            let mut inner = run[1..run.len() - 1].to_vec();
            inner.sort_unstable();
            let n = inner.len();
            let median = if n % 2 == 1 {
                inner[n / 2] as f64
            } else {
                (inner[n / 2 - 1] + inner[n / 2]) as f64 / 2.0
            };
            steady(&inner, median).then(|| Stretch {
                seconds: run.len(),
                pods: run.iter().sum(),
                per_second: median,
            })
        })
        .fold(None, |best: Option<Stretch>, s| match best {
            Some(b) if b.pods > s.pods => Some(b),
            _ => Some(s),
        })
}

/// Whether a stretch's inner seconds (`inner`, of median `median`) keep a limiter's even pace:
/// two thirds of them within [`STEADY`] of the median. A client's bucket hands out tokens
/// evenly, so a limited controller creates about as many pods each second (20, 21, 19, 20); a
/// controller bound by the server's latency creates them in slow-start batches that double
/// (upstream's `slowStartBatch`) and land unevenly (33, 222, 101, 144 in issue 39's run at
/// 1000/2000), which read as a limit of 161.5/s made a fast cluster's rehearsal 81% slow.
fn steady(inner: &[usize], median: f64) -> bool {
    let near = inner
        .iter()
        .filter(|&&n| (n as f64 - median).abs() <= (median * STEADY).max(1.0))
        .count();
    near * 3 >= inner.len() * 2
}

fn busiest(seconds: &[i64]) -> usize {
    let mut counts: HashMap<i64, usize> = HashMap::new();
    for s in seconds {
        *counts.entry(*s).or_default() += 1;
    }
    counts.into_values().max().unwrap_or(0)
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn at(v: &Value, pointer: &str) -> Option<Timestamp> {
    v.pointer(pointer)?.as_str()?.parse().ok()
}

fn owned_by(object: &Value, uid: &str) -> bool {
    !uid.is_empty()
        && object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

fn items<'a>(objects: &'a serde_json::Map<String, Value>, key: &str) -> &'a [Value] {
    objects
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A workload's latest revision and its pods.
struct Revision<'a> {
    /// `kind/namespace/name`.
    workload: String,
    /// The ReplicaSet's or ControllerRevision's name.
    name: String,
    /// Its number: 1 for the workload's creation, more for an update.
    number: i64,
    /// The workload's `minReadySeconds`.
    min_ready_seconds: i64,
    pods: Vec<&'a Value>,
}

/// The pods of each workload's latest revision, with the workload's name and the revision's:
/// a Deployment's ReplicaSet of the highest `deployment.kubernetes.io/revision`, a DaemonSet's or
/// StatefulSet's ControllerRevision of the highest `revision` (its pods carry its name, or its
/// hash, as `controller-revision-hash`).
fn latest_revisions(objects: &serde_json::Map<String, Value>) -> Vec<Revision<'_>> {
    let pods = items(objects, "pods");
    let min_ready = |w: &Value| {
        w.pointer("/spec/minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let mut out = Vec::new();
    for d in items(objects, "deployments") {
        let uid = text(d, "/metadata/uid");
        let number = |rs: &Value| {
            text(
                rs,
                "/metadata/annotations/deployment.kubernetes.io~1revision",
            )
            .parse::<i64>()
            .unwrap_or(0)
        };
        let latest = items(objects, "replicaSets")
            .iter()
            .filter(|rs| owned_by(rs, uid))
            .max_by_key(|rs| number(rs));
        if let Some(rs) = latest {
            let rs_uid = text(rs, "/metadata/uid");
            out.push(Revision {
                workload: format!(
                    "deployment/{}/{}",
                    text(d, "/metadata/namespace"),
                    text(d, "/metadata/name")
                ),
                name: text(rs, "/metadata/name").to_string(),
                number: number(rs),
                min_ready_seconds: min_ready(d),
                pods: pods.iter().filter(|p| owned_by(p, rs_uid)).collect(),
            });
        }
    }
    for (key, kind) in [("daemonSets", "daemonset"), ("statefulSets", "statefulset")] {
        for w in items(objects, key) {
            let uid = text(w, "/metadata/uid");
            let number = |r: &Value| r.get("revision").and_then(Value::as_i64).unwrap_or(0);
            let latest = items(objects, "controllerRevisions")
                .iter()
                .filter(|r| owned_by(r, uid))
                .max_by_key(|r| number(r));
            if let Some(r) = latest {
                let name = text(r, "/metadata/name");
                let hash = text(r, "/metadata/labels/controller-revision-hash");
                let mine = pods
                    .iter()
                    .filter(|p| owned_by(p, uid))
                    .filter(|p| {
                        let label = text(p, "/metadata/labels/controller-revision-hash");
                        !label.is_empty() && (label == name || label == hash)
                    })
                    .collect();
                out.push(Revision {
                    workload: format!(
                        "{kind}/{}/{}",
                        text(w, "/metadata/namespace"),
                        text(w, "/metadata/name")
                    ),
                    name: name.to_string(),
                    number: number(r),
                    min_ready_seconds: min_ready(w),
                    pods: mine,
                });
            }
        }
    }
    out
}

/// A workload's last update as its pods' timestamps show it: from its new revision's first pod
/// created to its last available. A rehearsal replays it (a `rollout restart` makes the same
/// pods anew the same way) to learn the pace of a control plane whose limit the timestamps
/// cannot show: an update that fits in one burst, or that readiness paces, looks the same under
/// 20 requests a second as under none, but does not take as long.
#[derive(Clone, Debug, PartialEq)]
pub struct LastUpdate {
    /// `kind/namespace/name`.
    pub workload: String,
    /// The new revision's pods.
    pub pods: usize,
    /// Seconds from the first created to the last available. Each end is kept to the second,
    /// so the figure is off by up to a second either way.
    pub seconds: f64,
}

impl LastUpdate {
    /// The `rollwright` change that replays it.
    pub fn replay(&self) -> String {
        let mut parts = self.workload.splitn(3, '/');
        let (kind, namespace, name) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        format!("rollout restart {kind}/{name} -n {namespace}")
    }
}

/// The last update among `objects`' workloads that a rehearsal can replay: a revision after the
/// first (a creation is no update: a restart does not replay it), every one of its pods Ready;
/// the one with the most pods, the longest look at the pace.
pub fn last_update(objects: &serde_json::Map<String, Value>) -> Option<LastUpdate> {
    latest_revisions(objects)
        .into_iter()
        .filter(|r| r.number > 1 && !r.pods.is_empty())
        .filter_map(|r| {
            let first = r
                .pods
                .iter()
                .map(|p| at(p, "/metadata/creationTimestamp"))
                .min()??;
            let ready: Option<Vec<Timestamp>> = r
                .pods
                .iter()
                .map(|p| {
                    let condition = p
                        .pointer("/status/conditions")?
                        .as_array()?
                        .iter()
                        .find(|c| c["type"] == "Ready" && c["status"] == "True")?;
                    at(condition, "/lastTransitionTime")
                })
                .collect();
            let last = ready?.into_iter().max()?;
            let seconds = last.duration_since(first).as_secs_f64() + r.min_ready_seconds as f64;
            (seconds >= 0.0).then_some(LastUpdate {
                workload: r.workload,
                pods: r.pods.len(),
                seconds,
            })
        })
        .max_by_key(|u| u.pods)
}

/// What a revision's `pods` show.
fn rollout(workload: String, revision: String, pods: &[&Value]) -> Rollout {
    let created: Vec<Timestamp> = pods
        .iter()
        .filter_map(|p| at(p, "/metadata/creationTimestamp"))
        .collect();
    let created_seconds: Vec<i64> = created.iter().map(|t| t.as_second()).collect();
    // (created, bound) of the pods bound, a clock skew that puts binding first left out.
    let scheduled: Vec<(Timestamp, Timestamp)> = pods
        .iter()
        .filter_map(|p| {
            let created = at(p, "/metadata/creationTimestamp")?;
            let condition = p
                .pointer("/status/conditions")?
                .as_array()?
                .iter()
                .find(|c| c["type"] == "PodScheduled" && c["status"] == "True")?;
            let bound = at(condition, "/lastTransitionTime")?;
            (bound >= created).then_some((created, bound))
        })
        .collect();
    let mut lags: Vec<f64> = scheduled
        .iter()
        .map(|(c, b)| b.duration_since(*c).as_secs_f64())
        .collect();
    lags.sort_by(f64::total_cmp);
    let bound_seconds: Vec<i64> = scheduled.iter().map(|(_, b)| b.as_second()).collect();
    let lagged = lags.last().is_some_and(|max| *max > LAG_SECONDS);
    Rollout {
        workload,
        revision,
        pods: pods.len(),
        busiest_second: busiest(&created_seconds),
        created: paced(&created_seconds),
        scheduled_after_median: lags.get(lags.len() / 2).copied(),
        scheduled_after_max: lags.last().copied(),
        busiest_binding_second: busiest(&bound_seconds),
        bound: lagged.then(|| paced(&bound_seconds)).flatten(),
    }
}

/// Requests a workload's controller sends per pod it creates while its client's bucket paces
/// it, and why, for the controllers' rate: the ReplicaSet and StatefulSet controllers' creates
/// are about all they send (a status update per sync, their Events spam-filtered at 25 per
/// object), but the DaemonSet controller writes the DaemonSet's status on every sync, and it
/// syncs on every pod it created while its expectations wait for them (v1.28's
/// `syncDaemonSet`): upstream's at 20/s creates 9-10 pods a second. Pacing a rehearsal's
/// controllers at the creates' rate would halve it.
pub fn requests_per_create(workload: &str) -> (f64, Option<&'static str>) {
    if workload.starts_with("daemonset/") {
        (
            2.0,
            Some("the DaemonSet controller writes its status after each pod it creates"),
        )
    } else {
        (1.0, None)
    }
}

/// The rate of a component whose default is `default`, from each rollout's `stretch` and
/// `busiest` second, of `what` ("pods created"), each event costing `per_event(workload)`
/// requests; `nothing` says why the default is assumed.
fn rate(
    rollouts: &[Rollout],
    default: Limit,
    what: &str,
    stretch: fn(&Rollout) -> Option<&Stretch>,
    busiest: fn(&Rollout) -> usize,
    per_event: fn(&str) -> (f64, Option<&'static str>),
    nothing: &str,
) -> Rate {
    // The paced stretch with the most pods: the longest look at the limit.
    let measured = rollouts
        .iter()
        .filter_map(|r| stretch(r).map(|s| (r, s)))
        .max_by_key(|(_, s)| s.pods);
    if let Some((r, s)) = measured {
        let (factor, because) = per_event(&r.workload);
        let seen = format!(
            "{what} {} a second over {} s ({} pods)",
            s.per_second, s.seconds, s.pods
        );
        return Rate {
            qps: (s.per_second * factor) as f32,
            burst: default.burst,
            basis: Basis::Measured,
            from: Some(r.workload.clone()),
            why: match because {
                Some(b) => format!("{seen}, {} requests a second: {b}", s.per_second * factor),
                None => seen,
            },
        };
    }
    // More in one second than the default's burst and a second's refill: the cluster is faster.
    let allowance = default.burst as usize + default.qps as usize;
    let fastest = rollouts
        .iter()
        .max_by_key(|r| busiest(r))
        .filter(|r| busiest(r) > allowance);
    if let Some(r) = fastest {
        return Rate {
            qps: (busiest(r) - default.burst as usize) as f32,
            burst: default.burst,
            basis: Basis::AtLeast,
            from: Some(r.workload.clone()),
            why: format!("{} {what} in one second", busiest(r)),
        };
    }
    Rate {
        qps: default.qps,
        burst: default.burst,
        basis: Basis::Assumed,
        from: None,
        why: nothing.to_string(),
    }
}

/// The pace `objects` (a snapshot's, by key) show.
pub fn measure(objects: &serde_json::Map<String, Value>) -> Pace {
    let rollouts: Vec<Rollout> = latest_revisions(objects)
        .into_iter()
        .map(|r| rollout(r.workload, r.name, &r.pods))
        .filter(|r| r.pods > 0)
        .collect();
    let controllers = rate(
        &rollouts,
        Limit::CONTROLLER_MANAGER,
        "pods created",
        |r| r.created.as_ref(),
        |r| r.busiest_second,
        requests_per_create,
        "no workload's latest rollout created pods at a steady pace (3 s or more) or faster than the default allows",
    );
    let scheduler = rate(
        &rollouts,
        Limit::SCHEDULER,
        "pods bound",
        |r| r.bound.as_ref(),
        |r| r.busiest_binding_second,
        |_| (1.0, None),
        "the scheduler kept up with every rollout (each pod bound within 2 s of its creation)",
    );
    let kubelet = Rate {
        qps: Limit::KUBELET.qps,
        burst: Limit::KUBELET.burst,
        basis: Basis::Assumed,
        from: None,
        why: "a kubelet's requests leave no timestamp a user can list".into(),
    };
    Pace {
        controllers,
        scheduler,
        kubelet,
        rollouts,
    }
}

impl Rate {
    /// The client limit a rehearsal runs under.
    pub fn limit(&self) -> Option<Limit> {
        Limit::new(self.qps, self.burst).ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `n` seconds' worth of events, `per[i]` in second `i`.
    fn events(per: &[usize]) -> Vec<i64> {
        per.iter()
            .enumerate()
            .flat_map(|(i, n)| std::iter::repeat_n(1_700_000_000 + i as i64, *n))
            .collect()
    }

    #[test]
    fn a_rate_limited_controller_shows_its_rate_in_the_inner_seconds() {
        // 20/s with a burst of 30: 50 in the first second, 20 a second after, a short last.
        let s = paced(&events(&[50, 20, 20, 21, 19, 20, 7])).expect("paced");
        assert_eq!(
            s,
            Stretch {
                seconds: 7,
                pods: 157,
                per_second: 20.0
            }
        );
    }

    #[test]
    fn waves_and_one_second_bursts_are_no_pace() {
        // An unlimited controller: every pod in one or two seconds.
        assert_eq!(paced(&events(&[300, 200])), None);
        // Readiness-paced waves: seconds without a create between them.
        assert_eq!(paced(&events(&[25, 0, 0, 25, 0, 0, 25, 1])), None);
        assert_eq!(paced(&[]), None);
        // Slow-start batches bound by the server's latency, not a limiter (issue 39's
        // 500-replica Deployment on upstream at 1000/2000).
        assert_eq!(paced(&events(&[33, 222, 101, 144])), None);
        // Of two stretches, the one with more pods.
        let s = paced(&events(&[5, 5, 5, 0, 9, 10, 11, 10])).expect("paced");
        assert_eq!((s.seconds, s.pods, s.per_second), (4, 40, 10.5));
    }

    fn ts(second: i64) -> String {
        Timestamp::from_second(1_700_000_000 + second)
            .map(|t| t.to_string())
            .unwrap_or_default()
    }

    fn pod(owner: &str, i: usize, created: i64, bound: Option<i64>) -> Value {
        let mut p = json!({"metadata": {"name": format!("p{i}"), "namespace": "shop",
            "uid": format!("pod-{owner}-{i}"), "creationTimestamp": ts(created),
            "ownerReferences": [{"uid": owner}]}, "status": {}});
        if let Some(b) = bound {
            p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True",
                "lastTransitionTime": ts(b)}]);
        }
        p
    }

    /// A Deployment `web` with an old ReplicaSet (revision 1, 10 pods at once) and a new one
    /// (revision 2) whose pods were created `per` a second, each bound `lag(i)` later.
    fn cluster(per: &[usize], lag: impl Fn(usize) -> i64) -> serde_json::Map<String, Value> {
        let mut pods: Vec<Value> = (0..10)
            .map(|i| pod("rs-old", i, -100, Some(-100)))
            .collect();
        for (i, second) in events(per).iter().enumerate() {
            let created = second - 1_700_000_000;
            pods.push(pod("rs-new", 100 + i, created, Some(created + lag(i))));
        }
        let rs = |uid: &str, name: &str, revision: &str| {
            json!({"metadata": {"name": name, "namespace": "shop", "uid": uid,
                "annotations": {"deployment.kubernetes.io/revision": revision},
                "ownerReferences": [{"uid": "d-web"}]}})
        };
        json!({
            "deployments": [{"metadata": {"name": "web", "namespace": "shop", "uid": "d-web"}}],
            "replicaSets": [rs("rs-old", "web-1", "1"), rs("rs-new", "web-2", "2")],
            "pods": pods,
        })
        .as_object()
        .cloned()
        .unwrap_or_default()
    }

    #[test]
    fn a_paced_rollout_measures_the_controllers_and_a_prompt_scheduler_is_assumed() {
        let pace = measure(&cluster(&[50, 20, 20, 20, 20, 10], |_| 0));
        assert_eq!(pace.controllers.basis, Basis::Measured);
        assert_eq!(pace.controllers.qps, 20.0);
        assert_eq!(pace.controllers.burst, 30);
        assert_eq!(
            pace.controllers.from.as_deref(),
            Some("deployment/shop/web")
        );
        assert_eq!(
            pace.controllers.why,
            "pods created 20 a second over 6 s (140 pods)"
        );
        let r = &pace.rollouts[0];
        assert_eq!((r.revision.as_str(), r.pods), ("web-2", 140));
        assert_eq!(r.scheduled_after_max, Some(0.0));
        // Bound as soon as created: the scheduler's limit never showed.
        assert_eq!(pace.scheduler.basis, Basis::Assumed);
        assert_eq!(pace.scheduler.limit(), Some(Limit::SCHEDULER));
        assert_eq!(pace.kubelet.limit(), Some(Limit::KUBELET));
    }

    #[test]
    fn an_unlimited_burst_says_at_least_and_a_small_one_nothing() {
        // 400 pods in one second: more than 20/s and a burst of 30 allow.
        let pace = measure(&cluster(&[400], |_| 0));
        assert_eq!(pace.controllers.basis, Basis::AtLeast);
        assert_eq!(pace.controllers.qps, 370.0);
        assert_eq!(pace.controllers.why, "400 pods created in one second");
        // Uneven seconds are the server's latency, not a limit: the busiest says how fast.
        let pace = measure(&cluster(&[33, 222, 101, 144], |_| 0));
        assert_eq!(pace.controllers.basis, Basis::AtLeast);
        assert_eq!(pace.controllers.why, "222 pods created in one second");
        // 40 in a second fits the defaults: nothing to say, the default assumed.
        let pace = measure(&cluster(&[40], |_| 0));
        assert_eq!(pace.controllers.basis, Basis::Assumed);
        assert_eq!(pace.controllers.limit(), Some(Limit::CONTROLLER_MANAGER));
        assert!(
            pace.controllers
                .why
                .starts_with("no workload's latest rollout")
        );
    }

    #[test]
    fn a_scheduler_that_falls_behind_is_measured_by_its_bindings() {
        // 200 pods created in one second, bound 10 a second after (pod i at i/10 s).
        let pace = measure(&cluster(&[200], |i| (i / 10) as i64));
        let r = &pace.rollouts[0];
        assert_eq!(r.scheduled_after_max, Some(19.0));
        assert_eq!(r.scheduled_after_median, Some(10.0));
        assert_eq!(pace.scheduler.basis, Basis::Measured);
        assert_eq!(pace.scheduler.qps, 10.0);
        assert_eq!(pace.scheduler.burst, 100);
    }

    #[test]
    fn a_daemon_sets_creates_count_its_status_writes_too() {
        // Upstream's DaemonSet controller at 20/s (burst 30): 21 pods in the first second, then
        // 8-10 a second, its status written after each.
        let per = [21, 10, 10, 8, 8, 8, 10, 10, 6, 9];
        let mut pods = Vec::new();
        for (i, second) in events(&per).iter().enumerate() {
            let created = second - 1_700_000_000;
            let mut p = pod("ds", i, created, Some(created));
            p["metadata"]["labels"] = json!({"controller-revision-hash": "agent-aaa"});
            pods.push(p);
        }
        let objects = json!({
            "daemonSets": [{"metadata": {"name": "agent", "namespace": "shop", "uid": "ds"}}],
            "controllerRevisions": [{"metadata": {"name": "agent-aaa", "uid": "r1",
                "ownerReferences": [{"uid": "ds"}],
                "labels": {"controller-revision-hash": "aaa"}}, "revision": 1}],
            "pods": pods,
        });
        let pace = measure(objects.as_object().expect("an object"));
        assert_eq!(
            pace.rollouts[0].created.as_ref().map(|s| s.per_second),
            Some(9.0)
        );
        assert_eq!(pace.controllers.basis, Basis::Measured);
        assert_eq!(pace.controllers.qps, 18.0);
        assert_eq!(
            pace.controllers.why,
            "pods created 9 a second over 10 s (100 pods), 18 requests a second: the \
             DaemonSet controller writes its status after each pod it creates"
        );
        // A Deployment's creates are its ReplicaSet controller's requests.
        assert_eq!(requests_per_create("deployment/shop/web").0, 1.0);
        assert_eq!(requests_per_create("statefulset/shop/db").0, 1.0);
    }

    #[test]
    fn revisions_of_daemon_sets_and_stateful_sets_pick_their_pods_by_hash() {
        let objects = json!({
            "statefulSets": [{"metadata": {"name": "db", "namespace": "shop", "uid": "s"}}],
            "controllerRevisions": [
                {"metadata": {"name": "db-aaa", "uid": "r1", "ownerReferences": [{"uid": "s"}],
                    "labels": {"controller-revision-hash": "aaa"}}, "revision": 1},
                {"metadata": {"name": "db-bbb", "uid": "r2", "ownerReferences": [{"uid": "s"}],
                    "labels": {"controller-revision-hash": "bbb"}}, "revision": 2}],
            "pods": [
                {"metadata": {"name": "db-0", "uid": "p0", "ownerReferences": [{"uid": "s"}],
                    "labels": {"controller-revision-hash": "db-bbb"},
                    "creationTimestamp": ts(0)}},
                {"metadata": {"name": "db-1", "uid": "p1", "ownerReferences": [{"uid": "s"}],
                    "labels": {"controller-revision-hash": "db-aaa"},
                    "creationTimestamp": ts(0)}}],
        });
        let pace = measure(objects.as_object().expect("an object"));
        assert_eq!(pace.rollouts.len(), 1);
        assert_eq!(pace.rollouts[0].workload, "statefulset/shop/db");
        assert_eq!(pace.rollouts[0].revision, "db-bbb");
        assert_eq!(pace.rollouts[0].pods, 1);
        assert_eq!(pace.rollouts[0].scheduled_after_max, None);
    }

    /// `cluster`'s Deployment with its new pods Ready `ready(i)` seconds after their creation
    /// (none: not Ready).
    fn ready_after(
        mut objects: serde_json::Map<String, Value>,
        ready: impl Fn(usize) -> Option<i64>,
    ) -> serde_json::Map<String, Value> {
        let pods = objects.get_mut("pods").and_then(Value::as_array_mut);
        for (i, p) in pods.into_iter().flatten().skip(10).enumerate() {
            let created: Timestamp = p["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("a creation time");
            if let Some(after) = ready(i) {
                let at = Timestamp::from_second(created.as_second() + after)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                p["status"]["conditions"]
                    .as_array_mut()
                    .expect("conditions")
                    .push(json!({"type": "Ready", "status": "True", "lastTransitionTime": at}));
            }
        }
        objects
    }

    #[test]
    fn the_last_update_runs_from_its_first_pod_created_to_its_last_ready() {
        // 40 pods in three seconds, each Ready 2 s after its creation: 0 s to 4 s.
        let objects = ready_after(cluster(&[30, 8, 2], |_| 0), |_| Some(2));
        let update = last_update(&objects).expect("an update");
        assert_eq!(
            update,
            LastUpdate {
                workload: "deployment/shop/web".into(),
                pods: 40,
                seconds: 4.0
            }
        );
        assert_eq!(update.replay(), "rollout restart deployment/web -n shop");
        // minReadySeconds counts: a pod is available that much after Ready.
        let mut slow = objects.clone();
        slow["deployments"][0]["spec"] = json!({"minReadySeconds": 5});
        assert_eq!(last_update(&slow).map(|u| u.seconds), Some(9.0));
        // An update not yet done, or a workload only created, is nothing to replay.
        let unready = ready_after(cluster(&[30, 8, 2], |_| 0), |i| (i != 39).then_some(2));
        assert_eq!(last_update(&unready), None);
        let mut created = objects;
        created["replicaSets"][1]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] =
            json!("1");
        created["replicaSets"]
            .as_array_mut()
            .expect("replica sets")
            .remove(0);
        assert_eq!(last_update(&created), None);
    }
}
