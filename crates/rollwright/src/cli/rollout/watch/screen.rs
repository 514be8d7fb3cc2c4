//! What `rollout watch` shows, as plain data computed from a [`Snapshot`]: one cell per node
//! (DaemonSet), per pod (Deployment) or per ordinal (StatefulSet), each with its revision and
//! state; the counts per revision; kubectl's verdict and what the rollout waits on. Rendering
//! (`view`) only lays this out, so everything a user reads is tested here without a terminal.

use crate::cli::{
    rollout::{
        model::{PodView, Snapshot},
        progress::{self, Progress, Verdict},
    },
    workload::{Kind, WorkloadRef},
};
use jiff::Timestamp;
use std::collections::HashMap;

/// A cell's state, in the order of the legend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CellState {
    /// An old revision's pod, ready.
    OldReady,
    /// An old revision's pod, not ready.
    OldNotReady,
    /// Being deleted.
    Terminating,
    /// A current revision's pod on its way (not available yet).
    NewPending,
    /// A current revision's pod, available.
    NewReady,
    /// A pod that is failing (image pull, crash loop, failed phase).
    Failed,
    /// No pod (a node without its daemon pod, a missing ordinal).
    Empty,
}

impl CellState {
    /// Every state, for the legend.
    pub const ALL: [CellState; 7] = [
        CellState::NewReady,
        CellState::NewPending,
        CellState::OldReady,
        CellState::OldNotReady,
        CellState::Terminating,
        CellState::Failed,
        CellState::Empty,
    ];

    /// The legend's word.
    pub fn label(self) -> &'static str {
        match self {
            CellState::OldReady => "old ready",
            CellState::OldNotReady => "old not ready",
            CellState::Terminating => "terminating",
            CellState::NewPending => "new pending",
            CellState::NewReady => "new ready",
            CellState::Failed => "failed",
            CellState::Empty => "no pod",
        }
    }
}

/// One node, pod or ordinal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The node name, pod name or ordinal.
    pub label: String,
    /// Its state.
    pub state: CellState,
    /// Its pod's revision, if known.
    pub revision: Option<i64>,
}

/// The whole screen.
#[derive(Clone, Debug, PartialEq)]
pub struct Screen {
    /// `ds/agent`.
    pub title: String,
    /// The current revision.
    pub revision: Option<i64>,
    /// kubectl's message.
    pub verdict: String,
    /// Done, failed or waiting.
    pub done: bool,
    /// What it waits on.
    pub waiting_on: String,
    /// One line per revision with its counts.
    pub counts: Vec<String>,
    /// What the cells are (`nodes`, `pods`, `ordinals`).
    pub cells_of: &'static str,
    /// The cells.
    pub cells: Vec<Cell>,
    /// How many cells are in each state.
    pub tally: Vec<(CellState, usize)>,
    /// Paused.
    pub paused: bool,
    /// The automatic rollback on record, told.
    pub rollback: Option<String>,
    /// The rollout's numbers, for the progress line and the sparkline.
    pub progress: Progress,
}

/// Failing, as opposed to on its way.
fn failing(p: &PodView) -> bool {
    p.phase == "Failed"
        || p.reason.as_deref().is_some_and(|r| {
            matches!(
                r,
                "ImagePullBackOff"
                    | "ErrImagePull"
                    | "CrashLoopBackOff"
                    | "InvalidImageName"
                    | "CreateContainerConfigError"
                    | "CreateContainerError"
                    | "RunContainerError"
                    | "Error"
                    | "OOMKilled"
                    | "Evicted"
            )
        })
}

fn state_of(p: &PodView, current: bool, min_ready: i32, now: Timestamp) -> CellState {
    if p.terminating {
        CellState::Terminating
    } else if failing(p) {
        CellState::Failed
    } else if current {
        if p.is_available(min_ready, now) {
            CellState::NewReady
        } else {
            CellState::NewPending
        }
    } else if p.is_ready() {
        CellState::OldReady
    } else {
        CellState::OldNotReady
    }
}

/// One line of counts per revision: the current one against its target, older ones by pods.
pub fn counts(p: &Progress) -> Vec<String> {
    p.revisions
        .iter()
        .map(|c| {
            let name = c
                .number
                .map_or("unknown revision".to_string(), |n| format!("revision {n}"));
            let terminating = if c.terminating > 0 {
                format!(", {} terminating", c.terminating)
            } else {
                String::new()
            };
            if c.current {
                format!(
                    "{name} (current): {}/{} updated, {} ready, {} available{terminating}",
                    c.pods, p.target, c.ready, c.available
                )
            } else {
                format!(
                    "{name}: {} pods, {} ready, {} available{terminating}",
                    c.pods, c.ready, c.available
                )
            }
        })
        .collect()
}

/// Computes the screen for `snap` at `now`.
pub fn screen(workload: &WorkloadRef, snap: &Snapshot, now: Timestamp) -> Screen {
    let p = progress::assess(snap, now);
    let w = &snap.workload;
    let current_key = snap.current_revision().map(|r| r.key.as_str());
    let number_of = |p: &PodView| {
        p.revision_key
            .as_deref()
            .and_then(|k| snap.revision_by_key(k))
            .map(|r| r.number)
    };
    let cell = |label: String, pod: Option<&PodView>| match pod {
        Some(pod) => Cell {
            label,
            state: state_of(
                pod,
                pod.revision_key.as_deref() == current_key && current_key.is_some(),
                w.min_ready_seconds,
                now,
            ),
            revision: number_of(pod),
        },
        None => Cell {
            label,
            state: CellState::Empty,
            revision: None,
        },
    };
    // Of several pods in one cell (an old one terminating beside its replacement), the live one.
    let prefer = |a: &PodView, b: &PodView| !b.terminating && a.terminating;
    let (cells_of, cells): (&'static str, Vec<Cell>) = match workload.kind {
        Kind::DaemonSet => {
            let mut by_node: HashMap<&str, &PodView> = HashMap::new();
            for pod in &snap.pods {
                if let Some(node) = pod.node.as_deref() {
                    let slot = by_node.entry(node).or_insert(pod);
                    if prefer(slot, pod) {
                        *slot = pod;
                    }
                }
            }
            let mut cells: Vec<Cell> = snap
                .nodes
                .iter()
                .map(|n| cell(n.name.clone(), by_node.get(n.name.as_str()).copied()))
                .collect();
            // Pods not bound yet have no node cell: show them too.
            cells.extend(
                snap.pods
                    .iter()
                    .filter(|p| p.node.is_none())
                    .map(|p| cell(p.name.clone(), Some(p))),
            );
            ("nodes", cells)
        }
        Kind::StatefulSet => {
            let mut by_ordinal: HashMap<i32, &PodView> = HashMap::new();
            for pod in &snap.pods {
                if let Some(o) = pod.ordinal {
                    let slot = by_ordinal.entry(o).or_insert(pod);
                    if prefer(slot, pod) {
                        *slot = pod;
                    }
                }
            }
            let top = by_ordinal
                .keys()
                .copied()
                .max()
                .map_or(w.desired, |m| (m + 1).max(w.desired));
            let cells = (0..top)
                .map(|o| cell(o.to_string(), by_ordinal.get(&o).copied()))
                .collect();
            ("ordinals", cells)
        }
        Kind::Deployment => {
            let mut pods: Vec<&PodView> = snap.pods.iter().map(AsRef::as_ref).collect();
            pods.sort_by_key(|p| {
                (
                    std::cmp::Reverse(number_of(p)),
                    p.terminating,
                    p.name.clone(),
                )
            });
            (
                "pods",
                pods.into_iter()
                    .map(|p| cell(p.name.clone(), Some(p)))
                    .collect(),
            )
        }
    };
    let tally = CellState::ALL
        .iter()
        .map(|s| (*s, cells.iter().filter(|c| c.state == *s).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    let (verdict, done) = match &p.verdict {
        Verdict::Done(m) => (m.clone(), true),
        Verdict::Waiting(m) | Verdict::Failed(m) | Verdict::Unsupported(m) => (m.clone(), false),
    };
    Screen {
        title: workload.short(),
        revision: p.revision,
        verdict,
        done,
        waiting_on: p.waiting_on.clone(),
        counts: counts(&p),
        cells_of,
        cells,
        tally,
        paused: w.paused,
        rollback: w.rollback.as_ref().map(|b| b.describe()),
        progress: p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::rollout::model::{NodeView, RevisionView, WorkloadView};
    use serde_json::json;
    use std::sync::Arc;

    fn t0() -> Timestamp {
        "2025-01-01T00:00:00Z".parse().expect("time")
    }

    fn pod(name: &str, node: Option<&str>, key: &str, state: &str) -> Arc<PodView> {
        Arc::new(PodView {
            name: name.into(),
            node: node.map(str::to_string),
            revision_key: Some(key.into()),
            phase: if state == "ready" {
                "Running"
            } else {
                "Pending"
            }
            .into(),
            ready_since: (state == "ready").then(t0),
            terminating: state == "terminating",
            reason: (state == "ImagePullBackOff").then(|| state.to_string()),
            ordinal: name.rsplit('-').next().and_then(|o| o.parse().ok()),
            ..Default::default()
        })
    }

    fn snapshot(kind: Kind, pods: Vec<Arc<PodView>>, nodes: &[&str]) -> Snapshot {
        let template =
            |image: &str| json!({"spec": {"containers": [{"name": "c", "image": image}]}});
        Snapshot {
            workload: WorkloadView {
                kind: Some(kind),
                name: "agent".into(),
                generation: 2,
                observed_generation: 2,
                desired: 4,
                rolling: true,
                template: template("v2"),
                ..Default::default()
            },
            revisions: vec![
                RevisionView {
                    number: 1,
                    key: "a".into(),
                    template: template("v1"),
                    ..Default::default()
                },
                RevisionView {
                    number: 2,
                    key: "b".into(),
                    template: template("v2"),
                    ..Default::default()
                },
            ],
            pods,
            nodes: nodes
                .iter()
                .map(|n| {
                    Arc::new(NodeView {
                        name: n.to_string(),
                        ready: true,
                    })
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_daemonset_has_a_cell_per_node() {
        let w = WorkloadRef {
            kind: Kind::DaemonSet,
            name: "agent".into(),
        };
        let snap = snapshot(
            Kind::DaemonSet,
            vec![
                pod("agent-1", Some("n1"), "b", "ready"),
                pod("agent-2", Some("n2"), "b", ""),
                pod("agent-3", Some("n3"), "a", "ready"),
                pod("agent-4", Some("n4"), "a", "terminating"),
                pod("agent-5", Some("n4"), "b", "ImagePullBackOff"),
            ],
            &["n1", "n2", "n3", "n4", "n5"],
        );
        let s = screen(&w, &snap, t0());
        let states: Vec<(&str, CellState)> = s
            .cells
            .iter()
            .map(|c| (c.label.as_str(), c.state))
            .collect();
        assert_eq!(
            states,
            vec![
                ("n1", CellState::NewReady),
                ("n2", CellState::NewPending),
                ("n3", CellState::OldReady),
                ("n4", CellState::Failed),
                ("n5", CellState::Empty),
            ]
        );
        assert_eq!(s.cells_of, "nodes");
        assert_eq!(
            s.counts,
            vec![
                "revision 2 (current): 3/4 updated, 1 ready, 1 available",
                "revision 1: 1 pods, 1 ready, 1 available, 1 terminating",
            ]
        );
        assert_eq!(s.revision, Some(2));
        assert!(!s.done);
        assert_eq!(
            s.tally,
            vec![
                (CellState::NewReady, 1),
                (CellState::NewPending, 1),
                (CellState::OldReady, 1),
                (CellState::Failed, 1),
                (CellState::Empty, 1)
            ]
        );
    }

    #[test]
    fn a_statefulset_has_a_cell_per_ordinal() {
        let w = WorkloadRef {
            kind: Kind::StatefulSet,
            name: "db".into(),
        };
        let snap = snapshot(
            Kind::StatefulSet,
            vec![
                pod("db-0", Some("n"), "a", "ready"),
                pod("db-2", Some("n"), "b", "ready"),
            ],
            &[],
        );
        let s = screen(&w, &snap, t0());
        let cells: Vec<(&str, CellState)> = s
            .cells
            .iter()
            .map(|c| (c.label.as_str(), c.state))
            .collect();
        assert_eq!(
            cells,
            vec![
                ("0", CellState::OldReady),
                ("1", CellState::Empty),
                ("2", CellState::NewReady),
                ("3", CellState::Empty)
            ]
        );
    }

    #[test]
    fn a_deployment_has_a_cell_per_pod_newest_revision_first() {
        let w = WorkloadRef {
            kind: Kind::Deployment,
            name: "web".into(),
        };
        let snap = snapshot(
            Kind::Deployment,
            vec![
                pod("web-a-1", Some("n"), "a", "ready"),
                pod("web-b-1", Some("n"), "b", ""),
            ],
            &[],
        );
        let s = screen(&w, &snap, t0());
        let cells: Vec<(&str, Option<i64>)> = s
            .cells
            .iter()
            .map(|c| (c.label.as_str(), c.revision))
            .collect();
        assert_eq!(cells, vec![("web-b-1", Some(2)), ("web-a-1", Some(1))]);
    }
}
