//! Fuzz targets for rollwright's parsers and for the API server's request handling, and a small
//! random-mutation driver that runs them on stable Rust for a bounded time.
//!
//! Why not cargo-fuzz: it needs nightly-only compiler flags (`-Zsanitizer`, coverage
//! instrumentation) and rebuilds the whole dependency graph with them; only stable Rust is
//! installed here and CI must run each target for a short, bounded time. So each target is a
//! plain function over bytes (the same shape cargo-fuzz uses, so the targets can move to it), and
//! the driver feeds it mutations of a corpus of valid inputs (byte flips, inserted tokens,
//! deletions, duplications, splices). It is not coverage-guided; what it finds is panics, and for
//! the HTTP targets any 5xx answer or a request that does not finish.
//!
//! Every finding becomes a regression test in the crate it belongs to.

pub mod targets;

use rand::{Rng, SeedableRng, rngs::StdRng};
use std::time::{Duration, Instant};

/// What one target does with one input: `Err` describes a finding (a panic is caught and
/// reported the same way).
pub type Target = fn(&[u8]) -> Result<(), String>;

/// What a run found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Inputs tried.
    pub executions: u64,
    /// Inputs that failed, with why (at most a few of each kind are kept).
    pub findings: Vec<(Vec<u8>, String)>,
}

/// Tokens that matter to the formats under test, inserted by the mutator.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"0.5",
    b"9223372036854775808",
    b"\\u0000",
    b"$patch",
    b"$retainKeys",
    b"$deleteFromPrimitiveList/",
    b"$setElementOrder/",
    b"replace",
    b"delete",
    b"merge",
    b" in (",
    b" notin (",
    b")",
    b"!",
    b"=",
    b"==",
    b"!=",
    b"%",
    b"Ki",
    b"Mi",
    b"Ei",
    b"m",
    b"n",
    b"e",
    b"E",
    b"+",
    b"-",
    b".",
    b"\n",
    b"- ",
    b"&a",
    b"*a",
    b"!!binary",
    b"~",
    b"\xff",
    b"\x00",
    b"k8s\x00",
];

/// Runs `target` on mutations of `corpus` until `budget` has passed; `seed` makes it repeatable.
pub fn run(target: Target, corpus: &[Vec<u8>], budget: Duration, seed: u64) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Outcome::default();
    let started = Instant::now();
    // Quiet the default panic message: findings are reported with their input.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    while started.elapsed() < budget {
        let input = mutate(&mut rng, corpus);
        out.executions += 1;
        let result = std::panic::catch_unwind(|| target(&input))
            .unwrap_or_else(|p| Err(format!("panic: {}", panic_message(&p))));
        if let Err(why) = result
            && out.findings.iter().filter(|(_, w)| *w == why).count() < 3
        {
            out.findings.push((input, why));
        }
    }
    std::panic::set_hook(hook);
    out
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

/// One input: a corpus entry (sometimes nothing, sometimes random bytes) with a few mutations.
fn mutate(rng: &mut StdRng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut data = match rng.random_range(0..20) {
        0 => (0..rng.random_range(0..64)).map(|_| rng.random()).collect(),
        _ if corpus.is_empty() => Vec::new(),
        _ => corpus[rng.random_range(0..corpus.len())].clone(),
    };
    for _ in 0..rng.random_range(0..6) {
        let at = if data.is_empty() {
            0
        } else {
            rng.random_range(0..=data.len())
        };
        match rng.random_range(0..6) {
            0 if !data.is_empty() => {
                let i = rng.random_range(0..data.len());
                data[i] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let token = TOKENS[rng.random_range(0..TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
            2 if !data.is_empty() => {
                let end = (at + rng.random_range(1..8)).min(data.len());
                data.drain(at.min(end)..end);
            }
            3 if !data.is_empty() => {
                let start = rng.random_range(0..data.len());
                let end = (start + rng.random_range(1..16)).min(data.len());
                let piece: Vec<u8> = data[start..end].to_vec();
                data.splice(at..at, piece);
            }
            4 if !corpus.is_empty() => {
                let other = &corpus[rng.random_range(0..corpus.len())];
                if !other.is_empty() {
                    let start = rng.random_range(0..other.len());
                    data.truncate(at);
                    data.extend_from_slice(&other[start..]);
                }
            }
            _ => data.insert(at, rng.random()),
        }
    }
    data.truncate(1 << 16);
    data
}
