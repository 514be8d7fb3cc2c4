//! The scheduling queue, after upstream's: an *active* heap (higher priority first, then first
//! come), a *backoff* heap for pods that failed recently, and the *unschedulable* set of pods
//! that fit nowhere and wait for the cluster to change (or for the periodic flush).

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, HashSet},
    time::Duration,
};
use tokio::time::Instant;

/// A pod waiting to be scheduled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedPod {
    /// Its UID.
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Active(u64),
    InFlight,
    Backoff(Instant),
    Unschedulable { since: Instant, fingerprint: u64 },
}

struct Entry {
    pod: QueuedPod,
    priority: i32,
    attempts: u32,
    last_attempt: Option<Instant>,
    state: State,
}

/// Backoff after failures: `initial * 2^(attempts-1)`, capped at `max`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// After the first failure (upstream: 1s).
    pub initial: Duration,
    /// The cap (upstream: 10s).
    pub max: Duration,
}

impl Backoff {
    /// How long to wait after `attempts` failed attempts.
    pub fn after(&self, attempts: u32) -> Duration {
        let mut d = self.initial;
        for _ in 1..attempts {
            d = d.saturating_mul(2);
            if d >= self.max {
                return self.max;
            }
        }
        d.min(self.max)
    }
}

/// Pods waiting for a scheduling attempt. Heaps may hold stale items; an item counts only
/// while its entry is still in the state that pushed it.
pub struct SchedulingQueue {
    entries: HashMap<String, Entry>,
    active: BinaryHeap<(i32, Reverse<u64>, String)>,
    backoff_heap: BinaryHeap<Reverse<(Instant, String)>>,
    unschedulable: HashSet<String>,
    next_seq: u64,
    backoff: Backoff,
}

impl SchedulingQueue {
    /// An empty queue.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            entries: HashMap::new(),
            active: BinaryHeap::new(),
            backoff_heap: BinaryHeap::new(),
            unschedulable: HashSet::new(),
            next_seq: 0,
            backoff,
        }
    }

    /// Adds a new pending pod to the active heap; a pod already queued is left where it is.
    pub fn add(&mut self, pod: QueuedPod, priority: i32) {
        if self.entries.contains_key(&pod.uid) {
            return;
        }
        let uid = pod.uid.clone();
        self.entries.insert(
            uid.clone(),
            Entry {
                pod,
                priority,
                attempts: 0,
                last_attempt: None,
                state: State::InFlight,
            },
        );
        self.activate(&uid);
    }

    /// Whether `uid` is queued in any state (including being scheduled right now).
    pub fn contains(&self, uid: &str) -> bool {
        self.entries.contains_key(uid)
    }

    /// Whether a pod may be ready to pop (the heap can hold stale items, which `pop` discards).
    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// How many pods are queued in any state.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes the highest-priority, oldest active pod for an attempt.
    pub fn pop(&mut self) -> Option<QueuedPod> {
        while let Some((_, Reverse(seq), uid)) = self.active.pop() {
            if let Some(e) = self.entries.get_mut(&uid)
                && e.state == State::Active(seq)
            {
                e.state = State::InFlight;
                return Some(e.pod.clone());
            }
        }
        None
    }

    /// The attempt found no node: wait in the unschedulable set. `fingerprint` identifies the
    /// pod's spec, so an update that changes it (not our own status write) retries the pod.
    pub fn unschedulable(&mut self, uid: &str, now: Instant, fingerprint: u64) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.attempts += 1;
            e.last_attempt = Some(now);
            e.state = State::Unschedulable {
                since: now,
                fingerprint,
            };
            self.unschedulable.insert(uid.to_string());
        }
    }

    /// The attempt failed for another reason (e.g. the bind request): retry after backoff.
    pub fn retry_later(&mut self, uid: &str, now: Instant) {
        let Some(e) = self.entries.get_mut(uid) else {
            return;
        };
        e.attempts += 1;
        e.last_attempt = Some(now);
        let until = now + self.backoff.after(e.attempts);
        e.state = State::Backoff(until);
        self.backoff_heap.push(Reverse((until, uid.to_string())));
    }

    /// Forgets a pod (bound, deleted, no longer ours).
    pub fn remove(&mut self, uid: &str) {
        self.entries.remove(uid);
        self.unschedulable.remove(uid);
    }

    /// The pod changed; if it waits as unschedulable and its spec changed, retry it.
    pub fn pod_updated(&mut self, uid: &str, fingerprint: impl FnOnce() -> u64, now: Instant) {
        let Some(e) = self.entries.get(uid) else {
            return;
        };
        if let State::Unschedulable {
            fingerprint: old, ..
        } = e.state
            && old != fingerprint()
        {
            self.unschedulable.remove(uid);
            self.activate_or_backoff(uid, now);
        }
    }

    /// Whether `uid` waits in the unschedulable set.
    pub fn is_unschedulable(&self, uid: &str) -> bool {
        self.unschedulable.contains(uid)
    }

    /// The cluster changed so that waiting pods might fit: move them all to active (or to backoff
    /// when they failed very recently).
    pub fn move_all_unschedulable(&mut self, now: Instant) {
        for uid in std::mem::take(&mut self.unschedulable) {
            self.activate_or_backoff(&uid, now);
        }
    }

    /// Upstream's `flushUnschedulablePodsLeftover`: pods that waited longer than `max` are
    /// retried even without a cluster change.
    pub fn flush_unschedulable_leftover(&mut self, now: Instant, max: Duration) {
        let due: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|uid| {
                self.entries
                    .get(*uid)
                    .is_some_and(|e| matches!(e.state, State::Unschedulable { since, .. } if now.duration_since(since) >= max))
            })
            .cloned()
            .collect();
        for uid in due {
            self.unschedulable.remove(&uid);
            self.activate_or_backoff(&uid, now);
        }
    }

    /// Moves pods whose backoff has expired to active.
    pub fn flush_backoff(&mut self, now: Instant) {
        while let Some(Reverse((until, _))) = self.backoff_heap.peek() {
            if *until > now {
                break;
            }
            let Some(Reverse((until, uid))) = self.backoff_heap.pop() else {
                break;
            };
            if self
                .entries
                .get(&uid)
                .is_some_and(|e| e.state == State::Backoff(until))
            {
                self.activate(&uid);
            }
        }
    }

    /// When the next backoff expires, if any pod is backing off.
    pub fn next_backoff(&self) -> Option<Instant> {
        self.backoff_heap.peek().map(|Reverse((until, _))| *until)
    }

    fn activate_or_backoff(&mut self, uid: &str, now: Instant) {
        let Some(e) = self.entries.get_mut(uid) else {
            return;
        };
        let until = e.last_attempt.map(|t| t + self.backoff.after(e.attempts));
        match until {
            Some(until) if until > now => {
                e.state = State::Backoff(until);
                self.backoff_heap.push(Reverse((until, uid.to_string())));
            }
            _ => self.activate(uid),
        }
    }

    fn activate(&mut self, uid: &str) {
        let Some(e) = self.entries.get_mut(uid) else {
            return;
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        e.state = State::Active(seq);
        self.active
            .push((e.priority, Reverse(seq), uid.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> QueuedPod {
        QueuedPod {
            uid: uid.into(),
            namespace: "default".into(),
            name: uid.into(),
        }
    }

    fn queue() -> SchedulingQueue {
        SchedulingQueue::new(Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(10),
        })
    }

    fn drain(q: &mut SchedulingQueue) -> Vec<String> {
        std::iter::from_fn(|| q.pop().map(|p| p.uid)).collect()
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        let got: Vec<u64> = (1..=6).map(|a| b.after(a).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn priority_then_arrival() {
        let mut q = queue();
        q.add(pod("low-1"), 0);
        q.add(pod("high"), 100);
        q.add(pod("low-2"), 0);
        q.add(pod("low-1"), 0);
        assert_eq!(drain(&mut q), ["high", "low-1", "low-2"]);
        assert_eq!(
            q.len(),
            3,
            "popped pods stay queued until their attempt ends"
        );
    }

    #[test]
    fn unschedulable_pods_wait_for_a_change() {
        let mut q = queue();
        let t0 = Instant::now();
        q.add(pod("p"), 0);
        q.pop();
        q.unschedulable("p", t0, 1);
        assert!(drain(&mut q).is_empty());
        q.pod_updated("p", || 1, t0 + Duration::from_secs(5));
        assert!(
            drain(&mut q).is_empty(),
            "our own status write does not retry the pod"
        );
        q.move_all_unschedulable(t0 + Duration::from_millis(100));
        assert!(drain(&mut q).is_empty(), "still backing off");
        assert_eq!(q.next_backoff(), Some(t0 + Duration::from_secs(1)));
        q.flush_backoff(t0 + Duration::from_secs(1));
        assert_eq!(drain(&mut q), ["p"]);
    }

    #[test]
    fn spec_changes_and_leftover_flush_retry() {
        let mut q = queue();
        let t0 = Instant::now();
        for uid in ["a", "b"] {
            q.add(pod(uid), 0);
            q.pop();
            q.unschedulable(uid, t0, 1);
        }
        q.pod_updated("a", || 2, t0 + Duration::from_secs(2));
        assert_eq!(drain(&mut q), ["a"]);
        q.flush_unschedulable_leftover(t0 + Duration::from_secs(60), Duration::from_secs(300));
        assert!(drain(&mut q).is_empty());
        q.flush_unschedulable_leftover(t0 + Duration::from_secs(300), Duration::from_secs(300));
        assert_eq!(drain(&mut q), ["b"]);
    }

    #[test]
    fn retry_later_and_remove() {
        let mut q = queue();
        let t0 = Instant::now();
        q.add(pod("p"), 0);
        q.add(pod("gone"), 0);
        assert_eq!(q.pop().map(|p| p.uid).as_deref(), Some("p"));
        q.retry_later("p", t0);
        q.remove("gone");
        assert!(drain(&mut q).is_empty(), "removed pods are not handed out");
        q.flush_backoff(t0 + Duration::from_secs(1));
        assert_eq!(drain(&mut q), ["p"]);
        q.remove("p");
        assert!(q.is_empty());
    }
}
