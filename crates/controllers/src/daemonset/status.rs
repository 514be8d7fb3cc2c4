//! The DaemonSet's status counts (upstream's `updateDaemonSetStatus`; seed 002 section 3.4),
//! counted per node: on a node with several daemon pods only the oldest counts.

use super::{
    Daemon,
    nodes::{ByNode, Placement, oldest_first},
};
use crate::progress::{self, report::Report, rollout::Rollout};
use informer::Cached;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use std::time::Duration;

/// The counts `kubectl get ds` and `kubectl rollout status` read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes that should run the pod.
    pub desired_number_scheduled: i32,
    /// Of those, nodes that have one.
    pub current_number_scheduled: i32,
    /// Nodes that have one but should not run it.
    pub number_misscheduled: i32,
    /// Nodes that should run it whose (oldest) pod is ready.
    pub number_ready: i32,
    /// ... and available (ready for `minReadySeconds`).
    pub number_available: i32,
    /// `desired - available`.
    pub number_unavailable: i32,
    /// Nodes that should run it whose (oldest) pod runs the current template.
    pub updated_number_scheduled: i32,
}

impl Counts {
    /// The status fields as JSON, for a merge patch.
    pub fn to_json(self) -> Value {
        json!({
            "desiredNumberScheduled": self.desired_number_scheduled,
            "currentNumberScheduled": self.current_number_scheduled,
            "numberMisscheduled": self.number_misscheduled,
            "numberReady": self.number_ready,
            "numberAvailable": self.number_available,
            "numberUnavailable": self.number_unavailable,
            "updatedNumberScheduled": self.updated_number_scheduled,
        })
    }

    /// The counts a stored status holds (absent fields are 0).
    pub fn of_status(status: Option<&k8s_openapi::api::apps::v1::DaemonSetStatus>) -> Self {
        let Some(s) = status else {
            return Self::default();
        };
        Counts {
            desired_number_scheduled: s.desired_number_scheduled,
            current_number_scheduled: s.current_number_scheduled,
            number_misscheduled: s.number_misscheduled,
            number_ready: s.number_ready,
            number_available: s.number_available.unwrap_or(0),
            number_unavailable: s.number_unavailable.unwrap_or(0),
            updated_number_scheduled: s.updated_number_scheduled.unwrap_or(0),
        }
    }
}

/// The `Progressing` condition after a sync that counted `after` ([`crate::progress`]):
/// progress is more nodes running an updated, ready or available daemon pod, or fewer running
/// an old one; the rollout is complete when every node that should run one runs an available
/// updated pod, as `kubectl rollout status` judges it.
pub fn progress(daemon: &Daemon, hash: &str, after: Counts, now: jiff::Timestamp) -> Report {
    let ds = &daemon.ds;
    let stored = ds.status.as_ref();
    let conditions = progress::stored_conditions(stored.and_then(|s| s.conditions.as_ref()));
    let measure = |c: Counts| progress::Counts {
        replicas: c.current_number_scheduled,
        updated: c.updated_number_scheduled,
        ready: c.number_ready,
        available: c.number_available,
    };
    let revision = format!("{}-{hash}", ds.metadata.name.as_deref().unwrap_or(""));
    let desired = after.desired_number_scheduled;
    let rollout = Rollout {
        kind: "DaemonSet",
        revision: &revision,
        deadline: None,
        paused: daemon.paused,
        before: measure(Counts::of_status(stored)),
        after: measure(after),
        complete: after.updated_number_scheduled >= desired && after.number_available >= desired,
        all_updated: after.updated_number_scheduled >= after.current_number_scheduled,
    };
    Report::new(
        &ds.metadata,
        daemon.is_rolling_update(),
        &conditions,
        rollout,
        now,
    )
}

/// Counts over `nodes` (name and placement) and the pods grouped by node. `until_available`
/// says how long until a ready pod becomes available (`Some(0)`: available; `None`: not ready).
/// Also returns the shortest wait until a ready pod becomes available, so the controller
/// requeues itself then instead of polling.
pub fn count<'a>(
    nodes: impl IntoIterator<Item = (&'a str, Placement)>,
    nodes_to_pods: &ByNode,
    is_updated: impl Fn(&Cached<Pod>) -> bool,
    until_available: impl Fn(&Cached<Pod>) -> Option<Duration>,
) -> (Counts, Option<Duration>) {
    let mut c = Counts::default();
    let mut next: Option<Duration> = None;
    for (node, placement) in nodes {
        let pods = nodes_to_pods.get(node).filter(|p| !p.is_empty());
        if !placement.should_run {
            if pods.is_some() {
                c.number_misscheduled += 1;
            }
            continue;
        }
        c.desired_number_scheduled += 1;
        let Some(pods) = pods else {
            continue;
        };
        c.current_number_scheduled += 1;
        let Some(pod) = pods.iter().min_by(|a, b| oldest_first(a, b)) else {
            continue;
        };
        if let Some(wait) = until_available(pod) {
            c.number_ready += 1;
            if wait.is_zero() {
                c.number_available += 1;
            } else {
                next = Some(next.map_or(wait, |n| n.min(wait)));
            }
        }
        if is_updated(pod) {
            c.updated_number_scheduled += 1;
        }
    }
    c.number_unavailable = c.desired_number_scheduled - c.number_available;
    (c, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use informer::{Cached, Shared};
    use k8s_openapi::{
        api::core::v1::PodSpec,
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    };

    /// Pods as `name:created:state` where state is `a` available, `r` ready (5s to go), `n` not
    /// ready; names starting with `u` are updated.
    fn pods(spec: &[&str]) -> Vec<Shared<Pod>> {
        spec.iter()
            .map(|s| {
                let parts: Vec<&str> = s.split(':').collect();
                Cached::shared(Pod {
                    metadata: ObjectMeta {
                        name: Some(parts[0].into()),
                        creation_timestamp: Some(Time(
                            jiff::Timestamp::from_second(parts[1].parse().unwrap()).unwrap(),
                        )),
                        labels: Some([("state".to_string(), parts[2].to_string())].into()),
                        ..Default::default()
                    },
                    spec: Some(PodSpec {
                        node_name: Some("n".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            })
            .collect()
    }

    #[test]
    fn counts_per_node_from_the_oldest_pod() {
        let run = Placement {
            should_run: true,
            should_continue_running: true,
        };
        let stay = Placement {
            should_run: false,
            should_continue_running: true,
        };
        let nodes = [
            ("n1", run),
            ("n2", run),
            ("n3", run),
            ("n4", run),
            ("n5", stay),
            ("n6", stay),
            ("n7", run),
        ];
        let layout: ByNode = [
            ("n1", pods(&["u1:1:a"])),
            ("n2", pods(&["o2:1:a"])),
            ("n3", pods(&["u3:5:a", "o3:2:n"])), // the older, not-ready pod counts
            ("n4", pods(&["u4:1:r"])),
            ("n5", pods(&["o5:1:a"])),
            ("n6", vec![]),
            ("gone", pods(&["o9:1:a"])),
        ]
        .into_iter()
        .map(|(n, p)| (n.to_string(), p))
        .collect();
        let state = |p: &Pod| p.metadata.labels.as_ref().unwrap()["state"].clone();
        let (c, next) = count(
            nodes.iter().map(|(n, p)| (*n, *p)),
            &layout,
            |p| p.metadata.name.as_deref().unwrap().starts_with('u'),
            |p| match state(p).as_str() {
                "a" => Some(Duration::ZERO),
                "r" => Some(Duration::from_secs(5)),
                _ => None,
            },
        );
        assert_eq!(
            c,
            Counts {
                desired_number_scheduled: 5,
                current_number_scheduled: 4,
                number_misscheduled: 1,
                number_ready: 3,
                number_available: 2,
                number_unavailable: 3,
                updated_number_scheduled: 2,
            }
        );
        assert_eq!(next, Some(Duration::from_secs(5)));
        assert_eq!(c.to_json()["numberUnavailable"], 3);
    }
}
