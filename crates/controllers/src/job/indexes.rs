//! Indexed Jobs: a pod's completion index and the `completedIndexes` interval list
//! (`"1,3-5,7"`), as upstream's `indexed_job_utils.go`.

use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeSet;

/// The annotation (and label) carrying a pod's completion index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// A pod's completion index: the annotation first, else the label (upstream reads both).
pub fn index_of(pod: &Pod) -> Option<i32> {
    let meta = &pod.metadata;
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(COMPLETION_INDEX))
        .or_else(|| meta.labels.as_ref().and_then(|l| l.get(COMPLETION_INDEX)))
        .and_then(|v| v.parse().ok())
        .filter(|i: &i32| *i >= 0)
}

/// Parses an interval list; indexes at or beyond `completions` and malformed parts are dropped,
/// as upstream drops them when the job's completions shrink.
pub fn parse(list: &str, completions: i32) -> BTreeSet<i32> {
    let mut set = BTreeSet::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (from, to) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse(), part.parse()),
        };
        if let (Ok(from), Ok(to)) = (from, to) {
            set.extend((from.max(0)..=to.min(completions - 1)).filter(|i| *i >= 0));
        }
    }
    set
}

/// Formats a set as an interval list: a run of consecutive indexes becomes `a-b` (upstream
/// writes `1-2` for two), a lone index stays `a`.
pub fn format(set: &BTreeSet<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(i32, i32)> = None;
    for &i in set {
        run = match run {
            Some((a, b)) if i == b + 1 => Some((a, i)),
            Some(r) => {
                parts.push(interval(r));
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some(r) = run {
        parts.push(interval(r));
    }
    parts.join(",")
}

fn interval((a, b): (i32, i32)) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

/// The lowest `count` indexes below `completions` that are neither completed nor held by a pod.
pub fn to_create(
    completions: i32,
    completed: &BTreeSet<i32>,
    held: &BTreeSet<i32>,
    count: usize,
) -> Vec<i32> {
    (0..completions.max(0))
        .filter(|i| !completed.contains(i) && !held.contains(i))
        .take(count)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_lists_round_trip() {
        let cases = [
            ("", vec![]),
            ("0", vec![0]),
            ("1-2", vec![1, 2]),
            ("0,2-4,7", vec![0, 2, 3, 4, 7]),
        ];
        for (text, want) in cases {
            let set = parse(text, 10);
            assert_eq!(set.iter().copied().collect::<Vec<_>>(), want, "{text}");
            assert_eq!(format(&set), text);
        }
        assert_eq!(
            format(&parse("3-12,x,1", 5)),
            "1,3-4",
            "out of range and junk dropped"
        );
    }

    #[test]
    fn the_lowest_free_indexes_are_created() {
        let completed = BTreeSet::from([0, 2]);
        let held = BTreeSet::from([1]);
        assert_eq!(to_create(6, &completed, &held, 2), vec![3, 4]);
        assert_eq!(to_create(3, &completed, &held, 2), Vec::<i32>::new());
    }
}
