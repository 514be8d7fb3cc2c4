//! Supervision: a controller whose task panics is started again after a back-off, counted and
//! logged, instead of vanishing silently from its `JoinSet` (issue 11).
//!
//! Each incarnation is a fresh controller (new queue, new expectations) on the same shared
//! cache; the dead one's handlers unsubscribe as its task unwinds, and the new one resyncs
//! every object from the cache, as a restarted kube-controller-manager would from its informers.

use super::queue::Backoff;
use std::{
    collections::BTreeMap,
    future::Future,
    sync::{Mutex, MutexGuard},
    time::Duration,
};
use tokio::{task::JoinSet, time::Instant};

/// Restart delays: 1s doubling to a minute.
pub const RESTART_BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(1),
    max: Duration::from_secs(60),
};

/// An incarnation that ran this long without panicking resets the back-off.
const HEALTHY_RUN: Duration = Duration::from_secs(120);

static RESTARTS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

fn restarts_guard() -> MutexGuard<'static, BTreeMap<&'static str, u64>> {
    RESTARTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many times each controller has been restarted after a panic in this process
/// (`controller_restarts_total`).
pub fn restarts() -> BTreeMap<&'static str, u64> {
    restarts_guard().clone()
}

/// The restart counters in the Prometheus text format, for a `/metrics` endpoint.
pub fn encode_restarts() -> String {
    let mut out = String::from(
        "# HELP controller_restarts_total Controller tasks restarted after a panic.\n\
         # TYPE controller_restarts_total counter\n",
    );
    for (name, n) in restarts() {
        out.push_str(&format!(
            "controller_restarts_total{{controller=\"{name}\"}} {n}\n"
        ));
    }
    out
}

/// Runs the controller that `start` makes until it returns or this future is dropped; restarts
/// it after each panic, `backoff` apart.
pub async fn supervise<F, Fut>(name: &'static str, backoff: Backoff, mut start: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut failures = 0u32;
    loop {
        // A set of one: dropping this future (the controllers stopping) aborts the incarnation.
        let mut task = JoinSet::new();
        task.spawn(start());
        let began = Instant::now();
        let Some(result) = task.join_next().await else {
            return;
        };
        match result {
            Err(e) if e.is_panic() => {
                if began.elapsed() >= HEALTHY_RUN {
                    failures = 0;
                }
                failures = failures.saturating_add(1);
                let total = {
                    let mut counts = restarts_guard();
                    let n = counts.entry(name).or_insert(0);
                    *n += 1;
                    *n
                };
                let delay = backoff.delay(failures);
                tracing::error!(
                    controller = name,
                    restarts = total,
                    ?delay,
                    "controller panicked; restarting"
                );
                tokio::time::sleep(delay).await;
            }
            // Finished, or cancelled from outside: nothing to restart.
            _ => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    };

    #[tokio::test(start_paused = true)]
    async fn a_panicking_controller_is_restarted_with_backoff_and_counted() {
        let runs = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        supervise("test-panics", RESTART_BACKOFF, || {
            let runs = Arc::clone(&runs);
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) < 3 {
                    panic!("boom");
                }
            }
        })
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        assert_eq!(restarts().get("test-panics"), Some(&3));
        // 1s + 2s + 4s of back-off.
        assert_eq!(start.elapsed().as_secs(), 7);
        assert!(
            encode_restarts().contains("controller_restarts_total{controller=\"test-panics\"} 3")
        );
    }
}
