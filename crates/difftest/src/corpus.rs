//! The recorded corpus: one JSON line per sequence, its requests and upstream's normalized
//! answers. Requests are stored, not regenerated from the seed, so a change to the generator does
//! not silently invalidate the recording.

use crate::Error;
use crate::sequence::{Answer, Sequence};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// The file in a corpus directory.
pub const FILE: &str = "corpus.jsonl";

/// A sequence and upstream's normalized answers to it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Recorded {
    /// What was sent.
    pub sequence: Sequence,
    /// Upstream's answers, normalized, one per step.
    pub answers: Vec<Answer>,
}

/// Reads `dir/corpus.jsonl`.
pub fn read(dir: &Path) -> Result<Vec<Recorded>, Error> {
    let path = dir.join(FILE);
    let name = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| Error::Io(name.clone(), e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| Error::Corpus(name.clone(), i + 1, e)))
        .collect()
}

/// Writes `dir/corpus.jsonl`, sequences in seed order.
pub fn write(dir: &Path, recorded: &mut [Recorded]) -> Result<(), Error> {
    let path = dir.join(FILE);
    let name = path.display().to_string();
    std::fs::create_dir_all(dir).map_err(|e| Error::Io(name.clone(), e))?;
    recorded.sort_by_key(|r| r.sequence.seed);
    let mut out = Vec::new();
    for r in recorded.iter() {
        serde_json::to_writer(&mut out, r)
            .map_err(|e| Error::Io(name.clone(), std::io::Error::other(e)))?;
        out.push(b'\n');
    }
    let mut f = std::fs::File::create(&path).map_err(|e| Error::Io(name.clone(), e))?;
    f.write_all(&out).map_err(|e| Error::Io(name, e))
}
