//! One priority level's seats and queues: upstream's `fairqueuing/queueset`.
//!
//! A level serves requests while their seats fit its concurrency limit. A request that does not
//! fit waits in one of the level's queues, chosen by shuffle sharding: the flow (FlowSchema and
//! distinguisher) is dealt a hand of `handSize` queues out of `queues` by its hash, and the
//! request joins the hand's queue with the fewest seats waiting, so one flow fills at most its
//! hand while others are dealt other queues. When seats free, the next request is taken from
//! the queue that has been served least (fair queuing: each queue's virtual dispatch time grows
//! by the seats it is given, and the waiting queue with the earliest one goes next), so a flood
//! in one queue does not starve another. A request is refused (429) when its queue is full, or
//! when it waited past the level's wait limit; a level whose limit response is `Reject` has no
//! queues and refuses whatever does not fit at once.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::oneshot;

/// How a level answers requests past its limit (`spec.limited.limitResponse`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Queuing {
    /// `queues`.
    pub queues: usize,
    /// `handSize`.
    pub hand_size: usize,
    /// `queueLengthLimit`: requests waiting in one queue.
    pub queue_length_limit: usize,
}

/// A level's settings, from its PriorityLevelConfiguration and the server's total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelConfig {
    /// Seats served at once (upstream's nominal concurrency limit).
    pub concurrency: u32,
    /// `None`: limit response `Reject`.
    pub queuing: Option<Queuing>,
    /// How long a request may wait in a queue (upstream: a quarter of the request timeout).
    pub wait_limit: Duration,
}

/// Why a request was not served (upstream's `reason` label of `rejected_requests_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// Its queue held `queueLengthLimit` requests.
    QueueFull,
    /// The level rejects rather than queues, and had no seats.
    ConcurrencyLimit,
    /// It waited past the wait limit.
    TimeOut,
}

impl Rejection {
    /// The label value upstream uses.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Rejection::QueueFull => "queue-full",
            Rejection::ConcurrencyLimit => "concurrency-limit",
            Rejection::TimeOut => "time-out",
        }
    }
}

/// One level's queues and seats.
pub(crate) struct QueueSet {
    state: Mutex<State>,
}

struct State {
    config: LevelConfig,
    seats_in_use: u32,
    queues: Vec<Queue>,
    /// Requests waiting, over all queues.
    waiting: usize,
    /// Rotates where a hand is looked at first (upstream's `enqueues`), so ties do not always
    /// go to the same queue.
    enqueues: usize,
    /// The virtual time of the last dispatch: a queue that was idle starts from here, so idling
    /// earns no credit over queues that kept working.
    virtual_now: f64,
    next_id: u64,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiter>,
    /// The virtual time at which this queue's next request is due.
    next_dispatch: f64,
    seats_in_use: u32,
}

struct Waiter {
    id: u64,
    width: u32,
    reply: oneshot::Sender<Seats>,
}

/// Seats held by one request; given back when dropped.
pub(crate) struct Seats {
    set: Arc<QueueSet>,
    width: u32,
    queue: Option<usize>,
}

impl Seats {
    /// How many seats.
    pub(crate) fn width(&self) -> u32 {
        self.width
    }
}

impl Drop for Seats {
    fn drop(&mut self) {
        let replies = {
            let mut st = self.set.lock();
            st.seats_in_use = st.seats_in_use.saturating_sub(self.width);
            if let Some(q) = self.queue.and_then(|i| st.queues.get_mut(i)) {
                q.seats_in_use = q.seats_in_use.saturating_sub(self.width);
            }
            st.dispatch(&self.set)
        };
        send(replies);
    }
}

impl QueueSet {
    pub(crate) fn new(config: LevelConfig) -> Arc<Self> {
        let queues = config.queuing.map_or(0, |q| q.queues);
        Arc::new(Self {
            state: Mutex::new(State {
                config,
                seats_in_use: 0,
                queues: (0..queues).map(|_| Queue::default()).collect(),
                waiting: 0,
                enqueues: 0,
                virtual_now: 0.0,
                next_id: 0,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a changed PriorityLevelConfiguration. Requests waiting keep their places when the
    /// number of queues stays; otherwise they are dealt again over the new queues.
    pub(crate) fn reconfigure(self: &Arc<Self>, config: LevelConfig) {
        let replies = {
            let mut st = self.lock();
            let queues = config.queuing.map_or(0, |q| q.queues);
            if queues != st.queues.len() {
                let old: Vec<Queue> = std::mem::take(&mut st.queues);
                st.queues = (0..queues.max(1)).map(|_| Queue::default()).collect();
                // Waiters move to queue `i % queues`; with no queues, they wait in one until
                // seats free (none are refused by a configuration change).
                for (i, q) in old.into_iter().enumerate() {
                    let n = st.queues.len();
                    st.queues[i % n].waiting.extend(q.waiting);
                }
            }
            st.config = config;
            st.dispatch(self)
        };
        send(replies);
    }

    /// Seats in use and requests waiting.
    #[cfg(test)]
    pub(crate) fn load(&self) -> (u32, usize) {
        let st = self.lock();
        (st.seats_in_use, st.waiting)
    }

    /// Takes `width` seats for a request of the flow hashed to `flow_hash`: at once if they are
    /// free and nobody waits, else after waiting in the flow's queue.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        flow_hash: u64,
        width: u32,
    ) -> Result<Seats, Rejection> {
        let (rx, id, wait_limit) = {
            let mut st = self.lock();
            // A request wider than the whole level would never fit: it takes every seat.
            let width = width.clamp(1, st.config.concurrency.max(1));
            if st.waiting == 0 && st.seats_in_use + width <= st.config.concurrency {
                st.seats_in_use += width;
                return Ok(Seats {
                    set: self.clone(),
                    width,
                    queue: None,
                });
            }
            let Some(queuing) = st.config.queuing else {
                return Err(Rejection::ConcurrencyLimit);
            };
            let index = st.shuffle_shard(flow_hash, queuing);
            let virtual_now = st.virtual_now;
            let id = st.next_id;
            st.next_id += 1;
            let queue = &mut st.queues[index];
            if queue.waiting.len() >= queuing.queue_length_limit {
                return Err(Rejection::QueueFull);
            }
            if queue.waiting.is_empty() && queue.seats_in_use == 0 {
                queue.next_dispatch = queue.next_dispatch.max(virtual_now);
            }
            let (tx, rx) = oneshot::channel();
            queue.waiting.push_back(Waiter {
                id,
                width,
                reply: tx,
            });
            st.waiting += 1;
            (rx, id, st.config.wait_limit)
        };
        // Leaves the queue if the request is dropped (its client went away) or times out.
        let _leave = Leave { set: self, id };
        match tokio::time::timeout_at(tokio::time::Instant::now() + wait_limit, rx).await {
            Ok(Ok(seats)) => Ok(seats),
            _ => Err(Rejection::TimeOut),
        }
    }
}

/// Removes a waiter that gave up from its queue.
struct Leave<'a> {
    set: &'a Arc<QueueSet>,
    id: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut st = self.set.lock();
        let mut removed = false;
        for q in &mut st.queues {
            if let Some(pos) = q.waiting.iter().position(|w| w.id == self.id) {
                q.waiting.remove(pos);
                removed = true;
                break;
            }
        }
        if removed {
            st.waiting -= 1;
        }
    }
}

impl State {
    /// The queue a request of the flow joins: of the flow's hand, the one with the fewest seats
    /// waiting (upstream's `shuffleShardLocked`).
    fn shuffle_shard(&mut self, flow_hash: u64, queuing: Queuing) -> usize {
        let deck = self.queues.len().max(1);
        let hand = deal(flow_hash, deck, queuing.hand_size.clamp(1, deck));
        let offset = self.enqueues % hand.len();
        self.enqueues = self.enqueues.wrapping_add(1);
        let mut best = hand[offset];
        let mut least = u64::MAX;
        for i in 0..hand.len() {
            let q = hand[(offset + i) % hand.len()];
            let seats: u64 = self.queues[q]
                .waiting
                .iter()
                .map(|w| u64::from(w.width))
                .sum();
            if seats < least {
                least = seats;
                best = q;
            }
        }
        best
    }

    /// Gives free seats to waiting requests, fairly over the queues; returns the seats to hand
    /// over once the lock is released.
    fn dispatch(&mut self, set: &Arc<QueueSet>) -> Vec<(oneshot::Sender<Seats>, Seats)> {
        let mut out = Vec::new();
        while let Some(index) = self
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.waiting.is_empty())
            .min_by(|a, b| a.1.next_dispatch.total_cmp(&b.1.next_dispatch))
            .map(|(i, _)| i)
        {
            let concurrency = self.config.concurrency.max(1);
            let Some(width) = self.queues[index].waiting.front().map(|w| w.width) else {
                break;
            };
            // The fairest next request waits for its seats rather than letting narrower ones
            // pass it (which would starve wide requests); an idle level serves it anyway.
            let width = width.min(concurrency);
            if self.seats_in_use > 0 && self.seats_in_use + width > concurrency {
                break;
            }
            let queue = &mut self.queues[index];
            let Some(waiter) = queue.waiting.pop_front() else {
                break;
            };
            self.virtual_now = queue.next_dispatch;
            queue.next_dispatch += f64::from(width);
            queue.seats_in_use += width;
            self.seats_in_use += width;
            self.waiting -= 1;
            out.push((
                waiter.reply,
                Seats {
                    set: set.clone(),
                    width,
                    queue: Some(index),
                },
            ));
        }
        out
    }
}

/// Hands seats to the requests dispatched; one whose request went away gives them back (its
/// `Seats` drop here, outside the lock).
fn send(replies: Vec<(oneshot::Sender<Seats>, Seats)>) {
    for (tx, seats) in replies {
        drop(tx.send(seats));
    }
}

/// Upstream's shuffle-sharding dealer: `hand_size` distinct cards out of `deck`, drawn from the
/// hash's mixed-radix digits.
pub(crate) fn deal(mut hash: u64, deck: usize, hand_size: usize) -> Vec<usize> {
    let mut remainders = Vec::with_capacity(hand_size);
    for i in 0..hand_size {
        let radix = (deck - i) as u64;
        remainders.push((hash % radix) as usize);
        hash /= radix;
    }
    let mut hand = Vec::with_capacity(hand_size);
    for i in 0..hand_size {
        let mut card = remainders[i];
        for j in (1..=i).rev() {
            if card >= remainders[j - 1] {
                card += 1;
            }
        }
        hand.push(card);
    }
    hand
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;

    fn level(concurrency: u32, queues: usize, hand: usize, limit: usize) -> Arc<QueueSet> {
        QueueSet::new(LevelConfig {
            concurrency,
            queuing: Some(Queuing {
                queues,
                hand_size: hand,
                queue_length_limit: limit,
            }),
            wait_limit: Duration::from_secs(20),
        })
    }

    #[test]
    fn a_hand_is_distinct_cards_of_the_deck() {
        for hash in [0u64, 1, 42, u64::MAX, 0xdead_beef_cafe] {
            let mut hand = deal(hash, 128, 6);
            assert!(hand.iter().all(|c| *c < 128));
            hand.sort_unstable();
            hand.dedup();
            assert_eq!(hand.len(), 6, "{hash}");
        }
    }

    #[tokio::test]
    async fn a_full_queue_refuses_and_seats_go_round_the_queues() {
        let set = level(1, 2, 1, 2);
        let first = set.acquire(0, 1).await.unwrap();
        // Flow 0 is dealt queue 0, flow 1 queue 1 (one-card hands of two).
        let a = deal(0, 2, 1)[0];
        let b_hash = (0..10u64).find(|h| deal(*h, 2, 1)[0] != a).unwrap();
        let s1 = set.clone();
        let a1 = tokio::spawn(async move { s1.acquire(0, 1).await.map(|s| s.width()) });
        let s2 = set.clone();
        let a2 = tokio::spawn(async move { s2.acquire(0, 1).await.map(|s| s.width()) });
        while set.load().1 < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(set.acquire(0, 1).await.err(), Some(Rejection::QueueFull));
        // Another flow still queues.
        let s3 = set.clone();
        let b = tokio::spawn(async move { s3.acquire(b_hash, 1).await.map(|_| ()) });
        while set.load().1 < 3 {
            tokio::task::yield_now().await;
        }
        drop(first);
        a1.await.unwrap().unwrap();
        b.await.unwrap().unwrap();
        a2.await.unwrap().unwrap();
        assert_eq!(set.load(), (0, 0));
    }
}
