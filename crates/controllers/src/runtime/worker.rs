//! The reconcile contract: a controller turns a key into an [`Action`] or an error, and
//! [`run_workers`] does the queue bookkeeping around it, so no controller repeats it.

use super::queue::WorkQueue;
use std::{fmt::Debug, future::Future, hash::Hash, time::Duration};

/// What to do with a key after a successful reconcile.
#[must_use = "an Action says whether the key comes back; ignoring it loses a requeue"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconcile the key again after `delay` even if nothing changes: for deadlines (a lease
    /// expiring, a toleration running out), never for polling.
    pub fn requeue(delay: Duration) -> Self {
        Self {
            requeue_after: Some(delay),
        }
    }

    /// Nothing more to do until a watch event queues the key again.
    pub fn await_change() -> Self {
        Self {
            requeue_after: None,
        }
    }

    /// The delay of a requeue, if one was asked for.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// Runs `workers` concurrent loops that take keys from `queue` and reconcile them until the queue
/// shuts down. A success forgets the key's failures and honours the [`Action`]; an error is logged
/// and the key retried with backoff, as upstream's `processNextWorkItem`.
pub async fn run_workers<K, F, Fut, E>(
    name: &str,
    queue: WorkQueue<K>,
    workers: usize,
    reconcile: F,
) where
    K: Clone + Eq + Hash + Debug,
    F: Fn(K) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
    E: std::fmt::Display,
{
    let one = || async {
        while let Some(key) = queue.next().await {
            match reconcile(key.clone()).await {
                Ok(action) => {
                    queue.forget(&key);
                    if let Some(delay) = action.requeue_after() {
                        queue.add_after(key.clone(), delay);
                    }
                }
                Err(error) => {
                    tracing::debug!(controller = name, ?key, %error, "reconcile failed; retrying with backoff");
                    queue.add_rate_limited(key.clone());
                }
            }
            queue.done(&key);
        }
    };
    futures::future::join_all((0..workers.max(1)).map(|_| one())).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test(start_paused = true)]
    async fn errors_retry_with_backoff_and_success_honours_the_action() {
        let q = WorkQueue::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        q.add("k");
        let runner = {
            let q = q.clone();
            let seen = Arc::clone(&seen);
            async move {
                run_workers("test", q.clone(), 2, |key: &'static str| {
                    let seen = Arc::clone(&seen);
                    let q = q.clone();
                    async move {
                        let n = {
                            let mut s = seen.lock().unwrap();
                            s.push(key);
                            s.len()
                        };
                        match n {
                            1 | 2 => Err("boom"),
                            3 => Ok(Action::requeue(Duration::from_secs(30))),
                            _ => {
                                q.shut_down();
                                Ok(Action::await_change())
                            }
                        }
                    }
                })
                .await
            }
        };
        let start = tokio::time::Instant::now();
        runner.await;
        assert_eq!(seen.lock().unwrap().len(), 4);
        // Two backoffs (5ms, 10ms) and the 30s requeue.
        let elapsed = tokio::time::Instant::now() - start;
        assert!(elapsed >= Duration::from_secs(30), "{elapsed:?}");
        assert_eq!(q.failures(&"k"), 0);
    }
}
