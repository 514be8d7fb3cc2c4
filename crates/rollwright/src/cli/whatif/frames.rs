//! The nodes as the rollout moves over them: at moments through the run, what each node runs of
//! the changed workloads, old pods (there before the change), new ones, both, or none. The report
//! draws them as a grid per moment.

use serde::Serialize;
use std::{collections::HashSet, time::Duration};

/// What a node runs of the changed workloads, as one character of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// None of their pods.
    Empty,
    /// Only pods that were there before the change.
    Old,
    /// Only pods made since.
    New,
    /// Both.
    Both,
}

impl Cell {
    fn char(self) -> char {
        match self {
            Cell::Empty => '.',
            Cell::Old => 'o',
            Cell::New => 'n',
            Cell::Both => 'b',
        }
    }

    /// The cell a frame's character stands for.
    pub fn of(c: char) -> Cell {
        match c {
            'o' => Cell::Old,
            'n' => Cell::New,
            'b' => Cell::Both,
            _ => Cell::Empty,
        }
    }
}

/// One moment: seconds since the change, and a character per node in [`Frames::nodes`] order.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Frame {
    /// Seconds since the change.
    pub at: f64,
    /// `.`, `o`, `n` or `b` per node.
    pub cells: String,
}

/// The frames of a run, kept to at most [`MAX_FRAMES`]: when full, every other one goes and the
/// interval doubles, so they stay spread over the whole run however long it is.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Frames {
    /// Node names, in cell order.
    pub nodes: Vec<String>,
    /// The moments.
    pub frames: Vec<Frame>,
    #[serde(skip)]
    every: f64,
}

/// The most frames kept per run.
pub const MAX_FRAMES: usize = 48;
const FIRST_INTERVAL: Duration = Duration::from_millis(500);

impl Frames {
    /// Frames over `nodes` (sorted by the caller).
    pub fn new(nodes: Vec<String>) -> Self {
        Frames {
            nodes,
            frames: Vec::new(),
            every: FIRST_INTERVAL.as_secs_f64(),
        }
    }

    /// Whether a frame at `at` is due.
    pub fn due(&self, at: f64) -> bool {
        self.frames.last().is_none_or(|f| at - f.at >= self.every)
    }

    /// Records a frame at `at` from pods given as `(node, uid)`; `old` holds the uids there
    /// before the change.
    pub fn record<'a>(
        &mut self,
        at: f64,
        pods: impl Iterator<Item = (&'a str, &'a str)>,
        old: &HashSet<String>,
    ) {
        let mut cells = vec![Cell::Empty; self.nodes.len()];
        for (node, uid) in pods {
            let Ok(i) = self.nodes.binary_search_by(|n| n.as_str().cmp(node)) else {
                continue;
            };
            let this = if old.contains(uid) {
                Cell::Old
            } else {
                Cell::New
            };
            cells[i] = match (cells[i], this) {
                (Cell::Empty, c) => c,
                (c, d) if c == d => c,
                _ => Cell::Both,
            };
        }
        self.frames.push(Frame {
            at,
            cells: cells.into_iter().map(Cell::char).collect(),
        });
        if self.frames.len() > MAX_FRAMES {
            let kept: Vec<Frame> = self.frames.iter().step_by(2).cloned().collect();
            self.frames = kept;
            self.every *= 2.0;
        }
    }

    /// Up to `n` frames spread evenly, the first and the last among them.
    pub fn spread(&self, n: usize) -> Vec<&Frame> {
        let len = self.frames.len();
        if len <= n {
            return self.frames.iter().collect();
        }
        (0..n)
            .map(|i| &self.frames[i * (len - 1) / (n - 1).max(1)])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_tells_old_new_both_and_empty_nodes_apart() {
        let mut f = Frames::new(vec!["a".into(), "b".into(), "c".into(), "d".into()]);
        let old = HashSet::from(["p1".to_string(), "p2".to_string()]);
        let pods = [
            ("a", "p1"),
            ("b", "p2"),
            ("b", "p3"),
            ("c", "p4"),
            ("zz", "p5"),
        ];
        f.record(0.0, pods.iter().map(|&(n, u)| (n, u)), &old);
        assert_eq!(f.frames[0].cells, "obn.");
        assert!(!f.due(0.2));
        assert!(f.due(0.5));
    }

    #[test]
    fn frames_stay_few_and_spread_over_the_run() {
        let mut f = Frames::new(vec!["a".into()]);
        let mut at = 0.0;
        for _ in 0..500 {
            if f.due(at) {
                f.record(at, std::iter::empty(), &HashSet::new());
            }
            at += 0.1;
        }
        assert!(f.frames.len() <= MAX_FRAMES);
        assert_eq!(f.frames[0].at, 0.0);
        let spread = f.spread(6);
        assert_eq!(spread.len(), 6);
        assert_eq!(spread[0].at, 0.0);
        assert!(
            spread[5].at > 40.0,
            "the last is near the end: {}",
            spread[5].at
        );
    }
}
