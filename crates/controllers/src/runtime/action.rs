//! What a reconcile asks of the runtime after it succeeds.

use std::time::Duration;

/// What to do with a key after a successful reconcile.
#[must_use = "an Action says whether the key comes back; ignoring it loses a requeue"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconcile the key again after `delay` even if nothing changes: for deadlines (a lease
    /// expiring, a toleration running out, a pod becoming available after `minReadySeconds`),
    /// never for polling.
    pub fn requeue(delay: Duration) -> Self {
        Self {
            requeue_after: Some(delay),
        }
    }

    /// Nothing more to do until an event handler queues the key again.
    pub fn await_change() -> Self {
        Self {
            requeue_after: None,
        }
    }

    /// The delay of a requeue, if one was asked for.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// Asks for a requeue no later than `delay` from now (a sync with several deadlines keeps
    /// the soonest).
    pub fn requeue_by(&mut self, delay: Duration) {
        *self = self.min(Action::requeue(delay));
    }

    /// The sooner of two actions: a requeue wins over waiting, the earlier requeue over the later.
    pub fn min(self, other: Action) -> Action {
        match (self.requeue_after, other.requeue_after) {
            (Some(a), Some(b)) => Action::requeue(a.min(b)),
            (Some(_), None) => self,
            (None, _) => other,
        }
    }
}
