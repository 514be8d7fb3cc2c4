//! CI's differential test: the checked-in corpus (upstream kube-apiserver v1.28.4's normalized
//! answers) replayed against rollwright's API server in this process. Every difference must be
//! listed in KNOWN-DIFFERENCES.md with its reason; a new one fails the test.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use difftest::compare::{Difference, Known};
use difftest::corpus::{self, Recorded};
use difftest::run::Target;
use futures::StreamExt;
use std::path::Path;

fn corpus() -> Vec<Recorded> {
    corpus::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")).unwrap()
}

fn known() -> Known {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("KNOWN-DIFFERENCES.md");
    Known::parse(&std::fs::read_to_string(path).unwrap())
}

async fn replay(target: &Target, recorded: &[Recorded]) -> Vec<Difference> {
    futures::stream::iter(recorded)
        .map(|rec| async move { difftest::replay_sequence(target, rec, "").await.unwrap() })
        .buffer_unordered(8)
        .flat_map(futures::stream::iter)
        .collect()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_replays_against_rollwright_with_only_known_differences() {
    let recorded = corpus();
    assert!(
        recorded.len() >= 100,
        "the corpus has {} sequences",
        recorded.len()
    );
    let known = known();
    let target = Target::in_process().await.unwrap();
    let diffs = replay(&target, &recorded).await;
    let unknown_in = |diffs: &[Difference]| -> Vec<Difference> {
        diffs
            .iter()
            .filter(|d| !d.consequential && known.reason(d).is_none())
            .cloned()
            .collect()
    };
    let mut unknown = unknown_in(&diffs);
    // A read with resourceVersion=0 may be served from a watch cache a write behind, on either
    // server (the API allows it); a sequence whose only unknown differences are at such reads is
    // replayed again, twice at most, in fresh namespaces.
    let mut retried = std::collections::BTreeSet::new();
    for rec in &recorded {
        let seed = rec.sequence.seed;
        let mine: Vec<&Difference> = unknown.iter().filter(|d| d.seed == seed).collect();
        let any_freshness = |d: &&Difference| {
            rec.sequence.steps[d.step]
                .request
                .query
                .iter()
                .any(|(k, v)| k == "resourceVersion" && v == "0")
        };
        if mine.is_empty() || !mine.iter().all(any_freshness) {
            continue;
        }
        for attempt in ["again1", "again2"] {
            let again = difftest::replay_sequence(&target, rec, attempt)
                .await
                .unwrap();
            if unknown_in(&again).is_empty() {
                retried.insert(seed);
                break;
            }
        }
    }
    unknown.retain(|d| !retried.contains(&d.seed));
    let unknown: Vec<&Difference> = unknown.iter().collect();
    // One example per class: a new kind of difference shows once, however often it occurs.
    let mut classes: std::collections::BTreeMap<String, (usize, &Difference)> = Default::default();
    for d in &unknown {
        classes.entry(d.class()).or_insert((0, d)).0 += 1;
    }
    let mut report = String::new();
    for (class, (n, d)) in &classes {
        report.push_str(&format!(
            "{n:4} x {class}\n     e.g. seed {} step {}: {}\n     upstream:   {}\n     rollwright: {}\n",
            d.seed,
            d.step,
            d.request,
            clip(&d.a.to_string()),
            clip(&d.b.to_string())
        ));
    }
    assert!(
        unknown.is_empty(),
        "{} differences from upstream, in {} classes, not in KNOWN-DIFFERENCES.md (see one with \
         `difftest show --seeds N` and `difftest compare --seeds N`):\n{report}",
        unknown.len(),
        classes.len()
    );
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(400) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

/// The replay must be able to fail: a recording that no longer matches what rollwright answers
/// is reported, and not as a known difference.
#[tokio::test]
async fn a_recording_that_does_not_match_is_reported() {
    let mut rec = corpus().into_iter().next().unwrap();
    rec.answers[0].status = 500;
    let step = rec.answers.len() - 1;
    rec.answers[step].body["metadata"]["name"] = "not-what-rollwright-says".into();
    let target = Target::in_process().await.unwrap();
    let diffs = replay(&target, std::slice::from_ref(&rec)).await;
    let status = diffs.iter().find(|d| d.step == 0).unwrap();
    assert_eq!(status.aspect, "status:500/201");
    assert!(known().reason(status).is_none());
    assert!(
        diffs
            .iter()
            .any(|d| d.step == step && d.aspect.starts_with("body:metadata.name"))
    );
}
