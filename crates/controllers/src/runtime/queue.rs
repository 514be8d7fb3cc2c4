//! A work queue with client-go's contract (`workqueue.RateLimitingInterface`):
//! - a key added while it is already pending is not added twice;
//! - a key is handed to one worker at a time: added while being processed, it is queued again
//!   only when that worker calls [`WorkQueue::done`], so reconciles of one key never overlap;
//! - [`WorkQueue::add_after`] delays a key (the earliest pending deadline wins);
//! - [`WorkQueue::add_rate_limited`] delays it by a per-key exponential backoff, reset by
//!   [`WorkQueue::forget`].
//!
//! Time is `tokio::time`, so tests with a paused clock see delays pass without sleeping.

use super::queue_metrics::{QueueMetrics, seconds};
use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    hash::Hash,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};
use tokio::{sync::Notify, time::Instant};

/// The per-key retry delays: `base * 2^(failures-1)`, capped at `max`. Upstream's controllers use
/// 5ms to 1000s; ours default to 5ms to 5 minutes so a cluster in a box recovers quickly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay before the retry that follows the `failures`-th consecutive failure.
    pub fn delay(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(40);
        let factor = 1u64 << exp;
        let nanos = (self.base.as_nanos() as u64).saturating_mul(factor);
        Duration::from_nanos(nanos).min(self.max)
    }
}

/// A deduplicating, rate-limited queue of keys; clones share the queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    backoff: Backoff,
    /// How many workers drain the queue ([`WorkQueue::workers`]).
    workers: usize,
}

struct State<K> {
    /// Keys ready to be handed out, in order.
    ready: VecDeque<K>,
    /// The keys in `ready`.
    queued: HashSet<K>,
    /// Keys a worker holds.
    processing: HashSet<K>,
    /// Keys added while being processed: queued again on `done`.
    dirty: HashSet<K>,
    /// Delayed keys by deadline (with a sequence number to keep equal deadlines apart).
    delayed: BTreeMap<(Instant, u64), K>,
    /// The pending deadline of each delayed key.
    deadlines: HashMap<K, (Instant, u64)>,
    seq: u64,
    failures: HashMap<K, u32>,
    shut_down: bool,
    /// The queue's metrics, once [`WorkQueue::instrument`] named it; with them, when each key in
    /// `ready` was queued.
    metrics: Option<QueueMetrics>,
    queued_at: HashMap<K, Instant>,
}

impl<K: Clone + Eq + Hash> State<K> {
    /// Queues `key` now; returns whether a worker should be woken.
    fn enqueue(&mut self, key: K) -> bool {
        if self.queued.contains(&key) {
            return false;
        }
        if self.processing.contains(&key) {
            // client-go counts an add once per key until it is processed again.
            if let Some(m) = &self.metrics
                && !self.dirty.contains(&key)
            {
                m.adds.inc();
                self.queued_at.insert(key.clone(), Instant::now());
            }
            self.dirty.insert(key);
            return false;
        }
        if let Some(m) = &self.metrics {
            m.adds.inc();
            self.queued_at.insert(key.clone(), Instant::now());
        }
        self.push_ready(key)
    }

    /// Puts `key` in line (its add already counted); returns whether a worker should be woken.
    fn push_ready(&mut self, key: K) -> bool {
        if !self.queued.insert(key.clone()) {
            return false;
        }
        self.ready.push_back(key);
        self.report_depth();
        true
    }

    fn report_depth(&self) {
        if let Some(m) = &self.metrics {
            m.depth
                .set(i64::try_from(self.ready.len()).unwrap_or(i64::MAX));
        }
    }

    /// Moves every delayed key whose deadline has passed to the ready queue.
    fn promote_due(&mut self, now: Instant) {
        while let Some((&(at, seq), _)) = self.delayed.first_key_value() {
            if at > now {
                break;
            }
            if let Some(key) = self.delayed.remove(&(at, seq)) {
                self.deadlines.remove(&key);
                self.enqueue(key);
            }
        }
    }
}

impl<K: Clone + Eq + Hash> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new(Backoff::default())
    }
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    /// An empty queue whose failed keys back off as `backoff` says, drained by one worker.
    pub fn new(backoff: Backoff) -> Self {
        Self::with_workers(backoff, 1)
    }

    /// An empty queue whose failed keys back off as `backoff` says, drained by `workers`
    /// concurrent workers (as a controller's [`super::Config`] makes it).
    pub fn with_workers(backoff: Backoff, workers: usize) -> Self {
        let state = State {
            ready: VecDeque::new(),
            queued: HashSet::new(),
            processing: HashSet::new(),
            dirty: HashSet::new(),
            delayed: BTreeMap::new(),
            deadlines: HashMap::new(),
            seq: 0,
            failures: HashMap::new(),
            shut_down: false,
            metrics: None,
            queued_at: HashMap::new(),
        };
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                notify: Notify::new(),
                backoff,
                workers,
            }),
        }
    }

    /// How many workers [`super::run`] starts on this queue: the number is the queue's so that
    /// the runtime, not each controller, reads it ([`super::Controller::workers`]).
    pub fn workers(&self) -> usize {
        self.inner.workers
    }

    /// Reports this queue's metrics under `name` (client-go's `workqueue_*{name}`) from now on.
    pub fn instrument(&self, name: &'static str) {
        let mut st = self.lock();
        st.metrics = Some(QueueMetrics::named(name));
        st.report_depth();
    }

    /// Counts the processing of a key that took `took` (`workqueue_work_duration_seconds`).
    pub fn observe_work(&self, took: Duration) {
        if let Some(m) = &self.lock().metrics {
            m.work_duration.observe(seconds(took));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // The state stays consistent even if a holder panicked: every method completes its
        // changes before it can panic, so a poisoned lock is safe to keep using.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `key` for processing as soon as a worker is free.
    pub fn add(&self, key: K) {
        let wake = {
            let mut st = self.lock();
            !st.shut_down && st.enqueue(key)
        };
        if wake {
            self.inner.notify.notify_one();
        }
    }

    /// Queues `key` once `delay` has passed; an earlier pending deadline for it is kept.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let at = Instant::now() + delay;
        {
            let mut st = self.lock();
            if st.shut_down {
                return;
            }
            if let Some(&(old, seq)) = st.deadlines.get(&key) {
                if old <= at {
                    return;
                }
                st.delayed.remove(&(old, seq));
            }
            st.seq += 1;
            let slot = (at, st.seq);
            st.deadlines.insert(key.clone(), slot);
            st.delayed.insert(slot, key);
        }
        // A sleeping worker may be waiting for a later deadline.
        self.inner.notify.notify_one();
    }

    /// Queues `key` after its backoff, and counts one more failure for it.
    pub fn add_rate_limited(&self, key: K) {
        let failures = {
            let mut st = self.lock();
            let n = st.failures.entry(key.clone()).or_insert(0);
            *n = n.saturating_add(1);
            let n = *n;
            if let Some(m) = &st.metrics {
                m.retries.inc();
            }
            n
        };
        self.add_after(key, self.inner.backoff.delay(failures));
    }

    /// Forgets the failures of `key`, so its next retry starts from the base delay.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many times in a row `key` has failed.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Marks `key` processed; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let wake = {
            let mut st = self.lock();
            st.processing.remove(key);
            // Queued again as client-go's `Done` does: its add was counted when it came.
            st.dirty.remove(key) && !st.shut_down && st.push_ready(key.clone())
        };
        if wake {
            self.inner.notify.notify_one();
        }
    }

    /// Keys ready now (not those delayed or being processed).
    pub fn len(&self) -> usize {
        self.lock().ready.len()
    }

    /// Whether no key is ready now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the queue: waiting workers get `None`, new keys are ignored.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.inner.notify.notify_waiters();
        self.inner.notify.notify_one();
    }

    /// Waits for the next ready key and hands it to the caller, who must call
    /// [`WorkQueue::done`] with it. `None` once the queue is shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.inner.notify.notified();
            let wake_at = {
                let mut st = self.lock();
                if st.shut_down {
                    drop(st);
                    // Pass the news on to the next waiting worker.
                    self.inner.notify.notify_one();
                    return None;
                }
                st.promote_due(Instant::now());
                if let Some(key) = st.ready.pop_front() {
                    st.queued.remove(&key);
                    st.processing.insert(key.clone());
                    st.report_depth();
                    if let (Some(since), Some(m)) = (st.queued_at.remove(&key), &st.metrics) {
                        m.queue_duration.observe(seconds(since.elapsed()));
                    }
                    let more = !st.ready.is_empty() || !st.delayed.is_empty();
                    drop(st);
                    if more {
                        // Another worker may take the rest (or watch the next deadline).
                        self.inner.notify.notify_one();
                    }
                    return Some(key);
                }
                st.delayed.first_key_value().map(|(&(at, _), _)| at)
            };
            match wake_at {
                Some(at) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1),
        };
        let table = [
            (0, 5),
            (1, 5),
            (2, 10),
            (3, 20),
            (8, 640),
            (9, 1000),
            (200, 1000),
        ];
        for (failures, ms) in table {
            assert_eq!(
                b.delay(failures),
                Duration::from_millis(ms),
                "failures {failures}"
            );
        }
    }

    #[tokio::test]
    async fn pending_keys_are_deduplicated_and_ordered() {
        let q = WorkQueue::default();
        for k in ["a", "b", "a", "c", "b"] {
            q.add(k);
        }
        assert_eq!(q.len(), 3);
        let mut got = Vec::new();
        for _ in 0..3 {
            let k = q.next().await.unwrap();
            q.done(&k);
            got.push(k);
        }
        assert_eq!(got, ["a", "b", "c"]);
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_processing_comes_back_after_done() {
        let q = WorkQueue::default();
        q.add("a");
        let k = q.next().await.unwrap();
        q.add("a");
        // Not handed out twice at once.
        assert!(q.is_empty());
        q.done(&k);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_waits_and_keeps_the_earliest_deadline() {
        let q = WorkQueue::default();
        let start = Instant::now();
        q.add_after("late", Duration::from_secs(10));
        q.add_after("x", Duration::from_secs(5));
        q.add_after("x", Duration::from_secs(8));
        assert_eq!(q.next().await, Some("x"));
        assert_eq!(Instant::now() - start, Duration::from_secs(5));
        q.done(&"x");
        assert_eq!(q.next().await, Some("late"));
        assert_eq!(Instant::now() - start, Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_replaces_a_later_one() {
        let q = WorkQueue::default();
        let start = Instant::now();
        q.add_after("x", Duration::from_secs(60));
        q.add_after("x", Duration::from_secs(1));
        assert_eq!(q.next().await, Some("x"));
        assert_eq!(Instant::now() - start, Duration::from_secs(1));
        q.done(&"x");
        // The replaced deadline does not fire again.
        let again = tokio::time::timeout(Duration::from_secs(120), q.next()).await;
        assert!(again.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_retries_back_off_until_forgotten() {
        let q = WorkQueue::new(Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        });
        let start = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..3 {
            q.add_rate_limited("k");
            let before = Instant::now();
            let k = q.next().await.unwrap();
            q.done(&k);
            waits.push((Instant::now() - before).as_secs());
        }
        assert_eq!(waits, [1, 2, 4]);
        assert_eq!(q.failures(&"k"), 3);
        q.forget(&"k");
        q.add_rate_limited("k");
        q.next().await.unwrap();
        assert_eq!((Instant::now() - start).as_secs(), 8);
    }

    #[tokio::test]
    async fn shut_down_releases_waiting_workers() {
        let q: WorkQueue<&str> = WorkQueue::default();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_named_queue_counts_adds_retries_and_depth_as_client_go() {
        let q = WorkQueue::new(Backoff::default());
        q.instrument("unit-test-queue");
        let m = QueueMetrics::named("unit-test-queue");
        q.add("a");
        q.add("a");
        q.add("b");
        // A key added twice before it is processed is one add.
        assert_eq!((m.adds.get(), m.depth.get()), (2, 2));
        let key = q.next().await;
        assert_eq!(key, Some("a"));
        assert_eq!(m.depth.get(), 1);
        // Added while processed: one more add, queued again when done.
        q.add("a");
        q.add("a");
        assert_eq!(m.adds.get(), 3);
        q.done(&"a");
        assert_eq!(m.depth.get(), 2);
        q.add_rate_limited("b");
        assert_eq!(m.retries.get(), 1);
        q.observe_work(Duration::from_millis(3));
        let mut registry = prometheus_client::registry::Registry::default();
        super::super::queue_metrics::register(&mut registry);
        let mut text = String::new();
        assert!(prometheus_client::encoding::text::encode(&mut text, &registry).is_ok());
        for series in [
            "workqueue_adds_total{name=\"unit-test-queue\"} 3",
            "workqueue_retries_total{name=\"unit-test-queue\"} 1",
            "workqueue_depth{name=\"unit-test-queue\"} 2",
            "workqueue_work_duration_seconds_count{name=\"unit-test-queue\"} 1",
            "workqueue_queue_duration_seconds_count{name=\"unit-test-queue\"} 1",
        ] {
            assert!(text.contains(series), "{series}: {text}");
        }
    }
}
