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
    let unknown: Vec<&Difference> = diffs
        .iter()
        .filter(|d| !d.consequential && known.reason(d).is_none())
        .collect();
    let mut report = String::new();
    for d in unknown.iter().take(40) {
        report.push_str(&format!(
            "seed {} step {} [{}] {} -- {}\n  upstream:   {}\n  rollwright: {}\n",
            d.seed, d.step, d.label, d.request, d.aspect, d.a, d.b
        ));
    }
    assert!(
        unknown.is_empty(),
        "{} differences from upstream not in KNOWN-DIFFERENCES.md (replay one with `difftest \
         compare --seeds N`):\n{report}",
        unknown.len()
    );
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
    assert_eq!(status.aspect, "status");
    assert!(known().reason(status).is_none());
    assert!(
        diffs
            .iter()
            .any(|d| d.step == step && d.aspect.starts_with("body:metadata.name"))
    );
}
