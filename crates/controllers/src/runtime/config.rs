//! The settings every controller has: how many keys it reconciles at once and how failed
//! reconciles back off. A controller with no other settings takes [`Config`] as its own; one with
//! more keeps a struct of its own with these two fields among them.

use super::queue::Backoff;

/// How a controller runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Concurrent syncs (upstream's `--concurrent-*-syncs`; 5 for most controllers).
    pub workers: usize,
    /// Retry delays of failed syncs.
    pub backoff: Backoff,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: 5,
            backoff: Backoff::default(),
        }
    }
}
