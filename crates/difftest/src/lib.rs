//! Differential test of rollwright's API server against upstream kube-apiserver.
//!
//! The same seeded sequences of API requests ([`generate`]) run against two servers ([`run`]),
//! both answers are normalized ([`normalize`]) and compared ([`compare`]). Upstream's normalized
//! answers for a fixed set of seeds are recorded in a corpus ([`corpus`]) that CI replays against
//! an in-process rollwright, so CI needs no upstream binaries. README.md says how to run it and
//! what it found.

pub mod compare;
pub mod corpus;
pub mod generate;
pub mod normalize;
pub mod run;
pub mod sequence;

use compare::Difference;
use corpus::Recorded;
use normalize::Normalizer;
use run::Target;
use sequence::{Answer, Sequence};

/// Why a run could not be made (not a difference between servers).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Config(String),
    /// A request failed below HTTP (connection, timeout).
    #[error("request failed: {0}")]
    Request(String),
    /// Reading or writing the corpus failed.
    #[error("corpus {0}: {1}")]
    Io(String, std::io::Error),
    /// A corpus line is not a recorded sequence.
    #[error("corpus {0} line {1}: {2}")]
    Corpus(String, usize, serde_json::Error),
}

/// The namespace a sequence runs in: its canonical name plus the run's suffix, so that one server
/// can run the same seed again (a deleted namespace stays Terminating without controllers).
pub fn namespace(seq: &Sequence, suffix: &str) -> String {
    if suffix.is_empty() {
        seq.namespace.clone()
    } else {
        format!("{}-{suffix}", seq.namespace)
    }
}

/// Normalizes one side's answers to `seq`, run in namespace `actual`.
pub fn normalize(seq: &Sequence, answers: &[Answer], actual: &str) -> Vec<Answer> {
    let mut n = Normalizer::new(actual, &seq.namespace);
    seq.steps
        .iter()
        .zip(answers)
        .enumerate()
        .map(|(i, (s, a))| {
            n.answer(
                i,
                a,
                s.request.watch.as_ref().is_some_and(|w| w.sort_initial),
            )
        })
        .collect()
}

/// Runs `seq` on one side and normalizes the answers.
pub async fn run_normalized(
    target: &Target,
    seq: &Sequence,
    suffix: &str,
) -> Result<Vec<Answer>, Error> {
    let ns = namespace(seq, suffix);
    let raw = target.run(seq, &ns).await?;
    Ok(normalize(seq, &raw, &ns))
}

/// Runs `seq` on both sides at once and returns the differences (A first).
pub async fn compare_sequence(
    a: &Target,
    b: &Target,
    seq: &Sequence,
    suffix: &str,
) -> Result<Vec<Difference>, Error> {
    // B's namespaces carry a suffix of their own, so that A and B may be the same server (to
    // measure a server's own nondeterminism); normalization maps both to the canonical name.
    let suffix_b = format!("{suffix}b");
    let (x, y) = tokio::join!(
        run_normalized(a, seq, suffix),
        run_normalized(b, seq, &suffix_b)
    );
    Ok(compare::sequence(seq, &x?, &y?))
}

/// Runs `seq` against upstream and keeps its normalized answers.
pub async fn record_sequence(
    upstream: &Target,
    seq: Sequence,
    suffix: &str,
) -> Result<Recorded, Error> {
    let answers = run_normalized(upstream, &seq, suffix).await?;
    Ok(Recorded {
        sequence: seq,
        answers,
    })
}

/// Replays a recorded sequence against `target`; differences have the recording as A.
pub async fn replay_sequence(
    target: &Target,
    rec: &Recorded,
    suffix: &str,
) -> Result<Vec<Difference>, Error> {
    let answers = run_normalized(target, &rec.sequence, suffix).await?;
    Ok(compare::sequence(&rec.sequence, &rec.answers, &answers))
}
