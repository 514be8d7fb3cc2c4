//! The `PodScheduled=False` message and `FailedScheduling` event text, built as upstream's
//! `FitError` builds it: `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated
//! taint {node.kubernetes.io/unreachable: }. preemption: 0/3 nodes are available: 1 No preemption
//! victims found for incoming pod, 2 Preemption is not helpful for scheduling..` (sic: two full
//! stops, as kube-scheduler v1.28.4 writes it).
//!
//! Each reason is counted over nodes, and the "count reason" strings are sorted as strings, as
//! upstream sorts them. The part after `preemption:` is the preemption attempt's own diagnosis
//! (see [`crate::preemption`]), or why the pod may not preempt.

use crate::filter::Rejection;
use std::collections::HashMap;

/// Upstream's `ErrNoNodesAvailable`.
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";
/// Preemption's status for a node no eviction can make fit.
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// Preemption's status for a node without pods of lower priority.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Why a pod with `preemptionPolicy: Never` does not preempt.
pub const NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// Why a pod whose earlier preemption is still under way does not preempt again.
pub const TERMINATING_ON_NOMINATED: &str =
    "not eligible due to a terminating pod on the nominated node.";

/// Why a pod fits no node, collected while filtering.
#[derive(Clone, Debug, Default)]
pub struct Diagnosis {
    histogram: HashMap<String, usize>,
    prefilter: Option<String>,
}

impl Diagnosis {
    /// Counts one rejected node.
    pub fn add(&mut self, rejection: Rejection) {
        for r in rejection.reasons {
            self.add_count(r, 1);
        }
    }

    /// Counts `count` nodes for one reason.
    pub fn add_count(&mut self, reason: impl Into<String>, count: usize) {
        if count > 0 {
            *self.histogram.entry(reason.into()).or_insert(0) += count;
        }
    }

    /// Records that a PreFilter rejected the pod outright (no node was filtered).
    pub fn prefilter_rejected(&mut self, message: &str) {
        self.prefilter = Some(message.to_string());
    }

    /// `0/N nodes are available: <count reason, ...>.`
    pub fn summary(&self, all_nodes: usize) -> String {
        let mut msg = format!("0/{all_nodes} nodes are available:");
        match &self.prefilter {
            Some(p) => msg.push_str(&format!(" {p}.")),
            None => {
                let parts = sorted_counts(self.histogram.iter().map(|(r, n)| (*n, r.as_str())));
                msg.push_str(&format!(" {}.", parts.join(", ")));
            }
        }
        msg
    }

    /// The whole message: the summary, then ` preemption: <why>.` when preemption was tried and
    /// did not place the pod. Upstream's `FitError` appends each part with `" %v."`, so a reason
    /// that ends in a full stop, as preemption's all do, ends in two (`...for incoming pod..`),
    /// as kube-scheduler v1.28.4 writes it.
    pub fn message(&self, all_nodes: usize, preemption: Option<&str>) -> String {
        let mut msg = self.summary(all_nodes);
        if let Some(p) = preemption {
            msg.push_str(&format!(" preemption: {p}."));
        }
        msg
    }
}

fn sorted_counts<'a>(counts: impl IntoIterator<Item = (usize, &'a str)>) -> Vec<String> {
    let mut parts: Vec<String> = counts
        .into_iter()
        .map(|(n, r)| format!("{n} {r}"))
        .collect();
    parts.sort();
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rej(reasons: &[&str], resolvable: bool) -> Rejection {
        Rejection {
            reasons: reasons.iter().map(|s| s.to_string()).collect(),
            resolvable,
        }
    }

    #[test]
    fn messages_match_upstream() {
        let taint = "node(s) had untolerated taint {node.kubernetes.io/unreachable: }";
        let affinity = "node(s) didn't match Pod's node affinity/selector";
        struct Case {
            name: &'static str,
            rejections: Vec<Rejection>,
            never: bool,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "all lack cpu",
                rejections: (0..20).map(|_| rej(&["Insufficient cpu"], true)).collect(),
                never: false,
                want: "0/20 nodes are available: 20 Insufficient cpu. preemption: 0/20 nodes are available: 20 No preemption victims found for incoming pod..",
            },
            Case {
                name: "affinity and taints",
                rejections: vec![
                    rej(&[affinity], false),
                    rej(&[taint], false),
                    rej(&[taint], false),
                ],
                never: false,
                want: "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling..",
            },
            Case {
                name: "several resources on one node, mixed resolvability",
                rejections: vec![
                    rej(&["Insufficient cpu", "Insufficient memory"], true),
                    rej(&["Insufficient memory"], true),
                    rej(&["node(s) were unschedulable"], false),
                ],
                never: false,
                want: "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, 2 Insufficient memory. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod..",
            },
            Case {
                name: "preemptionPolicy Never",
                rejections: vec![rej(&["Insufficient cpu"], true)],
                never: true,
                want: "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never..",
            },
        ];
        for c in cases {
            let mut d = Diagnosis::default();
            let all = c.rejections.len();
            // Without victims anywhere, preemption reports each node as upstream's dry run does.
            let mut p = Diagnosis::default();
            for r in &c.rejections {
                p.add_count(
                    if r.resolvable {
                        NO_VICTIMS
                    } else {
                        NOT_HELPFUL
                    },
                    1,
                );
            }
            c.rejections.into_iter().for_each(|r| d.add(r));
            let post = if c.never {
                NEVER.to_string()
            } else {
                p.summary(all)
            };
            assert_eq!(d.message(all, Some(&post)), c.want, "{}", c.name);
        }
    }

    #[test]
    fn prefilter_rejection() {
        let mut d = Diagnosis::default();
        d.prefilter_rejected("pod affinity terms conflict");
        let mut p = Diagnosis::default();
        p.add_count(NOT_HELPFUL, 2);
        assert_eq!(
            d.message(2, Some(&p.summary(2))),
            "0/2 nodes are available: pod affinity terms conflict. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
        );
    }
}
