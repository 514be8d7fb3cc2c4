//! Upstream's `slowStartBatch` (`pkg/controller/replicaset/replica_set.go`, used by the Job and
//! DaemonSet controllers too): calls in batches of 1, 2, 4, ... so that a template the server
//! rejects fails once instead of once per pod, while a healthy one is created in a few rounds.

use std::future::Future;

/// What [`slow_start`] did with its items.
#[derive(Debug)]
pub struct Batches<T, E> {
    /// The answers of the calls that succeeded, in the order they were made.
    pub done: Vec<T>,
    /// The failures of the batch that stopped the run (one batch at most fails).
    pub errors: Vec<E>,
    /// Items never attempted because an earlier batch failed.
    pub skipped: usize,
}

/// Calls `call` on each of `items` in batches that start at `initial` (at least 1) and double,
/// each batch's calls running concurrently; stops after the first batch with a failure.
pub async fn slow_start<I, T, E, F, Fut>(items: Vec<I>, initial: usize, call: F) -> Batches<T, E>
where
    F: Fn(I) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let total = items.len();
    let mut items = items.into_iter();
    let mut batches = Batches {
        done: Vec::with_capacity(total),
        errors: Vec::new(),
        skipped: 0,
    };
    let mut remaining = total;
    let mut batch = initial.max(1).min(remaining);
    while batch > 0 {
        let calls: Vec<Fut> = items.by_ref().take(batch).map(&call).collect();
        for result in futures::future::join_all(calls).await {
            match result {
                Ok(v) => batches.done.push(v),
                Err(e) => batches.errors.push(e),
            }
        }
        remaining -= batch;
        if !batches.errors.is_empty() {
            batches.skipped = remaining;
            break;
        }
        batch = (2 * batch).min(remaining);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Items, first batch, the item that fails, the batch sizes made, successes, skipped.
    type Case = (usize, usize, Option<usize>, &'static [usize], usize, usize);

    #[tokio::test]
    async fn batches_double_and_stop_at_the_first_failing_one() {
        let cases: [Case; 9] = [
            (0, 1, None, &[], 0, 0),
            (1, 1, None, &[1], 1, 0),
            (10, 1, None, &[1, 2, 4, 3], 10, 0),
            (10, 1, Some(0), &[1], 0, 9),
            // The 2nd item fails: its batch (items 1-2) completes, then the run stops.
            (10, 1, Some(1), &[1, 2], 2, 7),
            // The 5th is in the batch of 4 (items 3-6).
            (10, 1, Some(4), &[1, 2, 4], 6, 3),
            (10, 1, Some(9), &[1, 2, 4, 3], 9, 0),
            // A first batch of all of them: everything is tried at once.
            (5, 5, Some(0), &[5], 4, 0),
            (5, 0, None, &[1, 2, 2], 5, 0),
        ];
        for (n, initial, fail_at, sizes, successes, skipped) in cases {
            // `true` when a call is made, `false` when its future runs: a batch is a run of calls.
            let log = Mutex::new(Vec::new());
            let run = slow_start((0..n).collect(), initial, |i| {
                log.lock().unwrap().push(true);
                let log = &log;
                async move {
                    log.lock().unwrap().push(false);
                    if Some(i) == fail_at { Err(i) } else { Ok(i) }
                }
            })
            .await;
            let log = log.into_inner().unwrap();
            let made: Vec<usize> = log
                .chunk_by(|a, b| a == b)
                .filter(|run| run[0])
                .map(<[bool]>::len)
                .collect();
            let case = format!("{n} from {initial} failing at {fail_at:?}");
            assert_eq!(made, sizes, "{case}");
            assert_eq!(run.done.len(), successes, "{case}");
            assert_eq!(run.skipped, skipped, "{case}");
            assert_eq!(
                run.errors,
                fail_at.into_iter().collect::<Vec<_>>(),
                "{case}"
            );
        }
    }
}
