//! What the runs of a rehearsal add up to: the predicted duration (the median run, with the
//! spread), per workload the lowest availability against what its strategy allows, the stall
//! reasons, and the API requests the rollout cost.

use super::{measure::Outcome, pace::Rates, timing::Derived};
use crate::cli::snapshot::pace::{Stretch, paced};
use serde::Serialize;
use std::{collections::BTreeMap, fmt::Write};

/// One run: how it went and what it cost.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The seed of the run's simulated timing.
    pub seed: u64,
    /// The rollout.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// API requests served from the change to the end.
    pub api_requests: u64,
    /// The pods the rollout created, and how fast.
    pub pace: RunPace,
}

/// How fast a run created pods, measured as the snapshot measures a real cluster's rollout
/// (whole seconds of the pods' `creationTimestamp`, on the run's clock).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunPace {
    /// Pods created from the change to the end (and still there).
    pub pods_created: usize,
    /// The most created in one second.
    pub busiest_second: usize,
    /// The creates' paced stretch, if they had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paced: Option<Stretch>,
}

impl RunPace {
    /// Of the creation seconds `created`.
    pub fn of(created: &[i64]) -> Self {
        let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
        for s in created {
            *counts.entry(*s).or_default() += 1;
        }
        RunPace {
            pods_created: created.len(),
            busiest_second: counts.into_values().max().unwrap_or(0),
            paced: paced(created),
        }
    }
}

/// A workload over every run.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSummary {
    /// `kind/namespace/name`.
    pub workload: String,
    /// Pods it wants.
    pub desired: i32,
    /// The fewest available pods in any run.
    pub lowest_available: i32,
    /// What its strategy allows to be unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<i32>,
    /// The fewest available pods its PodDisruptionBudget allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_min_available: Option<i32>,
    /// The median seconds to done, over the runs where it got done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_seconds: Option<f64>,
    /// In how many runs it got done.
    pub done_in_runs: usize,
    /// What held its rollout back in the first run held at all (a budget, pacing): seconds per
    /// reason, with the last message.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<Held>,
}

/// How long one reason held a workload's rollout back in a run.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// The condition's reason (`DisruptionBudget`, `MaxUpdating`, `MinUpdateInterval`).
    pub reason: String,
    /// Seconds, all spells together.
    pub seconds: f64,
    /// The last message ("waiting on pdb/web (0 disruptions allowed)").
    pub message: String,
}

/// `waits` added up per reason, in the order each reason first held.
fn held(waits: &[super::measure::Wait]) -> Vec<Held> {
    let mut out: Vec<Held> = Vec::new();
    for w in waits {
        let seconds = w.to - w.from;
        match out.iter_mut().find(|h| h.reason == w.reason) {
            Some(h) => {
                h.seconds += seconds;
                h.message.clone_from(&w.message);
            }
            None => out.push(Held {
                reason: w.reason.clone(),
                seconds,
                message: w.message.clone(),
            }),
        }
    }
    out
}

/// The whole prediction, as printed and as the JSON report holds it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The snapshot file.
    pub snapshot: String,
    /// The changes, as given.
    pub changes: Vec<String>,
    /// Median seconds of the runs.
    pub predicted_seconds: f64,
    /// Fastest and slowest run.
    pub spread_seconds: (f64, f64),
    /// Whether every run finished.
    pub finished: bool,
    /// Median API requests per run.
    pub api_requests: u64,
    /// Per changed workload.
    pub workloads: Vec<WorkloadSummary>,
    /// Stall reasons, from the runs that stalled (the first such run's).
    pub stalls: Vec<super::measure::Stall>,
    /// Where the timing came from, per workload.
    pub timing: Vec<TimingSource>,
    /// The client limits the control plane ran under, and what they were assumed from.
    pub control_plane: Rates,
    /// Every run.
    pub runs: Vec<Run>,
}

/// What a workload's simulated timing was derived from.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimingSource {
    /// The workload.
    pub workload: String,
    /// Pods measured.
    pub pods: usize,
    /// Fastest and slowest, seconds.
    pub seconds: (f64, f64),
    /// `start` (probes decide readiness) or `ready`.
    pub to: &'static str,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl Report {
    /// Adds up `runs`.
    pub fn of(
        snapshot: String,
        changes: Vec<String>,
        derived: &[Derived],
        control_plane: Rates,
        runs: Vec<Run>,
    ) -> Self {
        let seconds: Vec<f64> = runs.iter().map(|r| r.outcome.seconds).collect();
        let spread = (
            seconds.iter().copied().fold(f64::INFINITY, f64::min),
            seconds.iter().copied().fold(0.0, f64::max),
        );
        let mut requests: Vec<u64> = runs.iter().map(|r| r.api_requests).collect();
        requests.sort_unstable();
        let mut workloads: BTreeMap<String, (WorkloadSummary, Vec<f64>)> = BTreeMap::new();
        for f in runs.iter().flat_map(|r| &r.outcome.workloads) {
            let (w, done) = workloads.entry(f.workload.clone()).or_insert_with(|| {
                (
                    WorkloadSummary {
                        workload: f.workload.clone(),
                        desired: f.desired,
                        lowest_available: f.lowest_available,
                        max_unavailable: f.max_unavailable,
                        budget_min_available: f.budget_min_available,
                        median_seconds: None,
                        done_in_runs: 0,
                        held: Vec::new(),
                    },
                    Vec::new(),
                )
            });
            w.lowest_available = w.lowest_available.min(f.lowest_available);
            if w.held.is_empty() {
                w.held = held(&f.waits);
            }
            if let Some(s) = f.done_after_seconds {
                done.push(s);
                w.done_in_runs += 1;
            }
        }
        Report {
            snapshot,
            changes,
            predicted_seconds: median(seconds).unwrap_or(0.0),
            spread_seconds: if runs.is_empty() { (0.0, 0.0) } else { spread },
            finished: runs.iter().all(|r| r.outcome.finished),
            api_requests: requests.get(requests.len() / 2).copied().unwrap_or(0),
            workloads: workloads
                .into_values()
                .map(|(mut w, done)| {
                    w.median_seconds = median(done);
                    w
                })
                .collect(),
            stalls: runs
                .iter()
                .find(|r| !r.outcome.finished)
                .map(|r| r.outcome.stalls.clone())
                .unwrap_or_default(),
            timing: derived
                .iter()
                .map(|d| TimingSource {
                    workload: d.workload.clone(),
                    pods: d.pods,
                    seconds: d.range,
                    to: if d.to_start { "start" } else { "ready" },
                })
                .collect(),
            control_plane,
            runs,
        }
    }

    /// The report as printed.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let n = self.runs.len();
        let verdict = if self.finished {
            "predicted duration:"
        } else {
            "stalls: nothing moves after"
        };
        let _ = writeln!(
            out,
            "{verdict} {:.1} s (median of {n} run{}; {:.1}-{:.1} s)",
            self.predicted_seconds,
            if n == 1 { "" } else { "s" },
            self.spread_seconds.0,
            self.spread_seconds.1
        );
        let _ = writeln!(out, "API requests: {} (median per run)", self.api_requests);
        let _ = writeln!(out, "control plane ({}):", self.control_plane.mode);
        for c in &self.control_plane.components {
            let _ = writeln!(out, "  {}: {}", c.component, c.summary);
        }
        if let Some(first) = self.runs.first().map(|r| &r.pace)
            && first.pods_created > 0
        {
            let paced = first.paced.as_ref().map_or(String::new(), |s| {
                format!(", {} a second over {} s", s.per_second, s.seconds)
            });
            let _ = writeln!(
                out,
                "rehearsed pace: {} pods created, at most {} in one second{paced} (run 1)",
                first.pods_created, first.busiest_second
            );
        }
        let _ = writeln!(
            out,
            "\n{:<44} {:>7} {:>13} {:>12} {:>8} {:>10}",
            "WORKLOAD", "DESIRED", "LOWEST AVAIL.", "MAX UNAVAIL.", "PDB MIN", "DONE AFTER"
        );
        for w in &self.workloads {
            let _ = writeln!(
                out,
                "{:<44} {:>7} {:>13} {:>12} {:>8} {:>10}",
                w.workload,
                w.desired,
                w.lowest_available,
                w.max_unavailable.map_or("-".into(), |m| m.to_string()),
                w.budget_min_available.map_or("-".into(), |m| m.to_string()),
                w.median_seconds
                    .map_or("never".into(), |s| format!("{s:.1} s")),
            );
        }
        if self.workloads.iter().any(|w| !w.held.is_empty()) {
            let _ = writeln!(out, "\nheld back by its controller (a budget, pacing):");
            for w in &self.workloads {
                for h in &w.held {
                    let _ = writeln!(
                        out,
                        "  {}: {} for {:.1} s: {}",
                        w.workload, h.reason, h.seconds, h.message
                    );
                }
            }
        }
        if !self.stalls.is_empty() {
            let _ = writeln!(out, "\nwhy it stalls:");
            for s in &self.stalls {
                let pods = if s.pods == 0 {
                    String::new()
                } else {
                    format!(" ({} pod{})", s.pods, if s.pods == 1 { "" } else { "s" })
                };
                let _ = writeln!(out, "  {}: {}{pods}: {}", s.workload, s.reason, s.message);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::whatif::measure::{Followed, Outcome, Stall};

    fn run(seed: u64, seconds: f64, finished: bool, lowest: i32) -> Run {
        Run {
            seed,
            api_requests: seed * 100,
            pace: RunPace::of(&[0, 1, 1, 2, 2, 3]),
            outcome: Outcome {
                seconds,
                finished,
                workloads: vec![Followed {
                    workload: "deployment/shop/web".into(),
                    desired: 10,
                    lowest_available: lowest,
                    max_unavailable: Some(2),
                    budget_min_available: None,
                    done_after_seconds: finished.then_some(seconds),
                    timeline: vec![],
                    revisions: vec![],
                    waits: vec![],
                }],
                nodes: Default::default(),
                stalls: if finished {
                    vec![]
                } else {
                    vec![Stall {
                        workload: "deployment/shop/web".into(),
                        reason: "ImagePullBackOff".into(),
                        message: "Back-off pulling image".into(),
                        pods: 3,
                    }]
                },
            },
        }
    }

    #[test]
    fn what_held_a_rollout_back_is_added_up_per_reason_and_printed() {
        let wait =
            |reason: &str, message: &str, from: f64, to: f64| crate::cli::whatif::measure::Wait {
                reason: reason.into(),
                message: message.into(),
                from,
                to,
            };
        let mut held_run = run(1, 30.0, true, 8);
        held_run.outcome.workloads[0].waits = vec![
            wait(
                "DisruptionBudget",
                "waiting on pdb/web (0 disruptions allowed)",
                1.0,
                4.0,
            ),
            wait("MinUpdateInterval", "paced: next update in 2s", 4.0, 6.0),
            wait(
                "DisruptionBudget",
                "waiting on pdb/web (0 disruptions allowed)",
                9.0,
                10.5,
            ),
        ];
        let r = Report::of(
            "s.json".into(),
            vec![],
            &[],
            Rates::unlimited(),
            vec![run(2, 20.0, true, 8), held_run],
        );
        assert_eq!(
            r.workloads[0].held,
            vec![
                Held {
                    reason: "DisruptionBudget".into(),
                    seconds: 4.5,
                    message: "waiting on pdb/web (0 disruptions allowed)".into(),
                },
                Held {
                    reason: "MinUpdateInterval".into(),
                    seconds: 2.0,
                    message: "paced: next update in 2s".into(),
                },
            ]
        );
        let text = r.text();
        assert!(
            text.contains(
                "held back by its controller (a budget, pacing):\n  deployment/shop/web: \
                 DisruptionBudget for 4.5 s: waiting on pdb/web (0 disruptions allowed)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn runs_add_up_to_the_median_the_spread_and_the_worst_dip() {
        let r = Report::of(
            "s.json".into(),
            vec!["set image deploy/web web=x".into()],
            &[],
            Rates::unlimited(),
            vec![
                run(1, 30.0, true, 8),
                run(2, 40.0, true, 9),
                run(3, 35.0, true, 8),
            ],
        );
        assert_eq!(r.predicted_seconds, 35.0);
        assert_eq!(r.spread_seconds, (30.0, 40.0));
        assert_eq!(r.api_requests, 200);
        assert_eq!(
            r.workloads,
            vec![WorkloadSummary {
                workload: "deployment/shop/web".into(),
                desired: 10,
                lowest_available: 8,
                max_unavailable: Some(2),
                budget_min_available: None,
                median_seconds: Some(35.0),
                done_in_runs: 3,
                held: vec![],
            }]
        );
        let text = r.text();
        assert!(
            text.starts_with("predicted duration: 35.0 s (median of 3 runs; 30.0-40.0 s)"),
            "{text}"
        );
        // What the control plane ran under, and how fast the first run created pods.
        assert!(
            text.contains(
                "control plane (unlimited):\n  controllers: pods created unpaced: no client \
                 limit, as --control-plane unlimited says\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rehearsed pace: 6 pods created, at most 2 in one second, 2 a second over 4 s \
                 (run 1)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_stalled_rollout_says_why() {
        let r = Report::of(
            "s.json".into(),
            vec![],
            &[],
            Rates::unlimited(),
            vec![run(1, 60.0, false, 8)],
        );
        assert!(!r.finished);
        let text = r.text();
        assert!(
            text.starts_with("stalls: nothing moves after 60.0 s"),
            "{text}"
        );
        assert!(
            text.contains("deployment/shop/web: ImagePullBackOff (3 pods): Back-off pulling image"),
            "{text}"
        );
        assert!(text.contains("never"), "{text}");
    }
}
