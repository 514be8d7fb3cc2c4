//! Where CEL runs: on a few threads of its own with large stacks, never on the async workers.
//!
//! The `cel` crate evaluates by recursion, one frame per level of the expression (up to the
//! 250 levels [`super::parse_limits`] lets through), which a worker's 2 MiB stack does not
//! always hold; and an expensive expression would otherwise hold a worker, and every request
//! queued behind it, for as long as it runs. Here it holds one of [`threads`] evaluators while
//! the other requests go on; admissions that need CEL queue for an evaluator. How long it holds
//! one is bounded by cel-go's cost limits ([`super::cost`]).

use std::{
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex, OnceLock},
};

use tokio::sync::{mpsc, oneshot};

use crate::error::{ApiError, ApiResult};

/// An evaluator's stack: virtual memory, touched only as deep as an expression goes.
const STACK_BYTES: usize = 64 * 1024 * 1024;

/// How many evaluations may wait for an evaluator before a caller waits to queue.
const QUEUE: usize = 1024;

type Job = Box<dyn FnOnce() + Send>;

/// How many evaluators run: one per core, at least two, so that one long evaluation leaves
/// another evaluator free.
fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, usize::from)
        .clamp(2, 8)
}

fn queue() -> Option<&'static mpsc::Sender<Job>> {
    static QUEUE_TX: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    QUEUE_TX
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>(QUEUE);
            let rx = Arc::new(Mutex::new(rx));
            let mut started = 0;
            for i in 0..threads() {
                let rx = rx.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("cel-{i}"))
                    .stack_size(STACK_BYTES)
                    .spawn(move || evaluate(&rx));
                match spawned {
                    Ok(_) => started += 1,
                    Err(e) => tracing::error!(error = %e, "could not start a CEL evaluator"),
                }
            }
            (started > 0).then_some(tx)
        })
        .as_ref()
}

/// An evaluator: runs jobs until the queue closes (never, in a running server).
fn evaluate(rx: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        let job = match rx.lock() {
            Ok(mut rx) => rx.blocking_recv(),
            Err(_) => return,
        };
        let Some(job) = job else { return };
        // A panicking job drops its answer's sender; its caller sees an error, the evaluator
        // lives on.
        if std::panic::catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!("a CEL evaluation panicked");
        }
    }
}

/// Runs `f` on an evaluator and waits for its answer without holding an async worker.
pub(crate) async fn run<R, F>(f: F) -> ApiResult<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let queue = queue().ok_or_else(|| ApiError::internal("no CEL evaluator is running"))?;
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    queue
        .send(job)
        .await
        .map_err(|_| ApiError::internal("the CEL evaluators stopped"))?;
    rx.await
        .map_err(|_| ApiError::internal("a CEL evaluation failed"))
}

/// Runs `f`, which may recurse as deep as an evaluation, on a thread with an evaluator's
/// stack, and waits for it: for compiling, which is short and is asked for where nothing can
/// be awaited (validating a policy, compiling the stored ones).
pub(crate) fn on_large_stack<R: Send>(f: impl FnOnce() -> R + Send) -> Option<R> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-compile".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, f)
            .ok()?
            .join()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_on_evaluators_with_large_stacks() {
        let name = run(|| std::thread::current().name().map(str::to_string))
            .await
            .unwrap();
        assert!(name.is_some_and(|n| n.starts_with("cel-")));
        // Deeper recursion than a 2 MiB stack holds.
        fn deep(n: u32) -> u32 {
            let pad = std::hint::black_box([0u8; 4096]);
            if n == 0 {
                u32::from(pad[0])
            } else {
                deep(n - 1) + 1
            }
        }
        assert_eq!(run(|| deep(2_000)).await.unwrap(), 2_000);
        assert_eq!(on_large_stack(|| deep(2_000)), Some(2_000));
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_evaluators_live_on() {
        let e = run(|| -> u32 { panic!("boom") }).await.unwrap_err();
        assert_eq!(e.code, 500);
        for _ in 0..threads() * 2 {
            assert_eq!(run(|| 7).await.unwrap(), 7);
        }
    }
}
