//! The controller contract and the one function that runs any controller on it.
//!
//! A controller is a value holding its handles on the shared cache ([`informer::Informer`]s), its
//! [`WorkQueue`] and whatever its syncs share. It says how cache changes map to its keys
//! ([`Controller::watch`]) and how to bring one key closer to its spec
//! ([`Controller::reconcile`]); [`run`] does the rest, the same way for all of them: subscribe,
//! wait until the cache has listed, then run the workers with the queue's bookkeeping
//! (deduplication, one worker per key, per-key back-off).

use super::{action::Action, queue::WorkQueue};
use informer::{Informers, Subscription};
use std::{fmt::Debug, future::Future, hash::Hash, sync::Arc, time::Duration};

/// What to do with a key whose reconcile failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Retry after the key's exponential back-off (the default, as upstream's
    /// `AddRateLimited`).
    Backoff,
    /// Retry after this delay (and count no failure).
    After(Duration),
}

/// One controller on the shared cache.
///
/// The contract, as kube-rs's and upstream's:
/// - `reconcile` is level-based: it reads the cache, not the event that queued the key, and
///   brings the key's object one step closer to its spec; running it twice is harmless;
/// - it never polls: it returns [`Action::requeue`] only for what time alone changes
///   (availability after `minReadySeconds`, a deadline), else [`Action::await_change`];
/// - an error is retried by [`Controller::error_policy`] (with back-off by default);
/// - event handlers are quick and synchronous: they map a change to keys (and note
///   expectations), never call the API.
pub trait Controller: Send + Sync + Sized + 'static {
    /// The controller's name, as `--controllers` selects it and logs and metrics show it.
    const NAME: &'static str;
    /// What the queue holds (most controllers: the object's `namespace/name`).
    type Key: Clone + Eq + Hash + Debug + Send + Sync + 'static;
    /// Why a reconcile failed.
    type Error: std::fmt::Display + Send + 'static;

    /// The controller's queue (made by its [`Config::queue`](super::Config::queue), with its
    /// back-off and number of workers).
    fn queue(&self) -> &WorkQueue<Self::Key>;

    /// How many keys are reconciled concurrently: by default the number the queue was made for,
    /// so a controller states it once, in its `Config`.
    fn workers(&self) -> usize {
        self.queue().workers()
    }

    /// Subscribes the controller's event handlers to the shared cache; each maps a change to the
    /// keys to queue. The subscriptions end when the controller stops.
    fn watch(self: &Arc<Self>) -> Vec<Subscription>;

    /// Brings the object under `key` one step closer to its spec.
    fn reconcile(
        self: &Arc<Self>,
        key: Self::Key,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// What to do after `reconcile` failed for `key`.
    fn error_policy(&self, _key: &Self::Key, _error: &Self::Error) -> Retry {
        Retry::Backoff
    }
}

/// Runs `controller` until dropped: subscribes its handlers, waits until every informer of
/// `informers` has listed (upstream's `WaitForCacheSync`), then runs its workers. A success
/// forgets the key's failures and honours the [`Action`]; a failure is logged and retried as
/// [`Controller::error_policy`] says.
pub async fn run<C: Controller>(controller: Arc<C>, informers: Informers) {
    let _subscriptions = controller.watch();
    informers.wait_synced().await;
    tracing::debug!(controller = C::NAME, "caches synced; starting workers");
    let queue = controller.queue().clone();
    queue.instrument(C::NAME);
    let worker = || async {
        while let Some(key) = queue.next().await {
            let started = tokio::time::Instant::now();
            let result = controller.reconcile(key.clone()).await;
            queue.observe_work(started.elapsed());
            match result {
                Ok(action) => {
                    queue.forget(&key);
                    if let Some(delay) = action.requeue_after() {
                        queue.add_after(key.clone(), delay);
                    }
                }
                Err(error) => {
                    tracing::debug!(controller = C::NAME, ?key, %error, "reconcile failed; retrying");
                    match controller.error_policy(&key, &error) {
                        Retry::Backoff => queue.add_rate_limited(key.clone()),
                        Retry::After(delay) => queue.add_after(key.clone(), delay),
                    }
                }
            }
            queue.done(&key);
        }
    };
    futures::future::join_all((0..controller.workers().max(1)).map(|_| worker())).await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Fails twice, then asks for a requeue, then shuts the queue down.
    struct Flaky {
        queue: WorkQueue<&'static str>,
        seen: Mutex<Vec<&'static str>>,
    }

    impl Controller for Flaky {
        const NAME: &'static str = "flaky";
        type Key = &'static str;
        type Error = &'static str;

        fn queue(&self) -> &WorkQueue<&'static str> {
            &self.queue
        }

        fn watch(self: &Arc<Self>) -> Vec<Subscription> {
            self.queue.add("k");
            Vec::new()
        }

        async fn reconcile(self: &Arc<Self>, key: &'static str) -> Result<Action, &'static str> {
            let n = {
                let mut s = self.seen.lock().unwrap();
                s.push(key);
                s.len()
            };
            match n {
                1 | 2 => Err("boom"),
                3 => Ok(Action::requeue(Duration::from_secs(30))),
                _ => {
                    self.queue.shut_down();
                    Ok(Action::await_change())
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn errors_retry_with_backoff_and_success_honours_the_action() {
        let server = embedded::Embedded::memory().await.unwrap();
        let flaky = Arc::new(Flaky {
            queue: WorkQueue::with_workers(Default::default(), 2),
            seen: Mutex::new(Vec::new()),
        });
        let start = tokio::time::Instant::now();
        run(Arc::clone(&flaky), Informers::new(server.client())).await;
        assert_eq!(flaky.seen.lock().unwrap().len(), 4);
        // Two back-offs (5ms, 10ms) and the 30s requeue.
        let elapsed = tokio::time::Instant::now() - start;
        assert!(elapsed >= Duration::from_secs(30), "{elapsed:?}");
        assert_eq!(flaky.queue.failures(&"k"), 0);
    }

    #[test]
    fn the_sooner_action_wins() {
        let s = Action::requeue(Duration::from_secs(1));
        let l = Action::requeue(Duration::from_secs(9));
        let w = Action::await_change();
        assert_eq!(s.min(l), s);
        assert_eq!(l.min(s), s);
        assert_eq!(w.min(l), l);
        assert_eq!(l.min(w), l);
        assert_eq!(w.min(w), w);
    }
}
