//! The settings every controller has: how many keys it reconciles at once and how failed
//! reconciles back off. A controller with no other settings takes [`Config`] as its own; one with
//! more composes it as `Config { run: runtime::Config<N>, .. }`, so the two settings and their
//! defaults are written here once. The default number of workers is part of the type
//! (`Config<2>`), so that each controller's default stays its own while the settings table
//! derives its defaults.

use super::queue::{Backoff, WorkQueue};
use std::hash::Hash;

/// How a controller runs, with `WORKERS` concurrent syncs by default (upstream's
/// `--concurrent-*-syncs`: 5 for most controllers).
#[derive(Clone, Debug)]
pub struct Config<const WORKERS: usize = 5> {
    /// Concurrent syncs.
    pub workers: usize,
    /// Retry delays of failed syncs.
    pub backoff: Backoff,
}

impl<const WORKERS: usize> Default for Config<WORKERS> {
    fn default() -> Self {
        Self {
            workers: WORKERS,
            backoff: Backoff::default(),
        }
    }
}

impl<const WORKERS: usize> Config<WORKERS> {
    /// The controller's queue: failed keys back off as configured, and [`super::run`] starts the
    /// configured number of workers on it (the default of [`super::Controller::workers`]).
    pub fn queue<K: Clone + Eq + Hash>(&self) -> WorkQueue<K> {
        WorkQueue::with_workers(self.backoff, self.workers)
    }
}
