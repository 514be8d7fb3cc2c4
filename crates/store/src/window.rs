//! The recent history of events that both backends keep in memory, and the watches served from it.
//!
//! The window is a bounded ring of the last events in revision order. A watcher does not get its own
//! copy of each live event; it remembers the last revision it has looked at and, whenever the
//! window announces a new revision, takes the retained events after that one. Replay and live
//! delivery are thus the same loop over the same ring, so there is no moment between "replay" and
//! "subscribe" where an event could be missed or sent twice. A watcher that falls so far behind that
//! the ring no longer holds the events it needs ends with [`StoreError::Compacted`], never with a
//! silent gap: the API server then makes its client relist, as upstream does with 410 Gone.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use futures::StreamExt;
use tokio::sync::watch;

use crate::{Event, EventStream, Result, Revision, StoreError};

/// Events retained when a backend is not told otherwise: enough for a watcher that lists and then
/// watches to bridge the gap under heavy write load, small enough to stay a few tens of MB.
pub(crate) const DEFAULT_CAPACITY: usize = 10_000;

/// How many retained events a watcher examines per lock hold, so that a watcher replaying a long
/// history does not stall writers that publish to the window.
const SCAN_LIMIT: usize = 512;

/// The shared event history of one store.
pub(crate) struct Window {
    state: Mutex<State>,
    /// Bumped on every publish and on close; watchers wait on it instead of on per-event messages.
    announce: watch::Sender<Revision>,
}

struct State {
    /// Retained events, oldest first, with strictly increasing revisions.
    events: VecDeque<Event>,
    /// How many events `events` may hold.
    capacity: usize,
    /// The oldest revision a watch may start after: every event newer than it is retained.
    oldest: Revision,
    /// The newest published revision.
    current: Revision,
    /// Set when the store is dropped: watchers end once they have drained the ring.
    closed: bool,
}

/// What one look at the window gave a watcher.
struct Scan {
    /// Events under the watcher's prefix, in order.
    events: Vec<Event>,
    /// The last revision examined; the next scan starts after it.
    last: Revision,
    /// Whether retained events remain past `last` (the scan stopped at [`SCAN_LIMIT`]).
    more: bool,
}

impl Window {
    /// Starts an empty window at `current`, the revision the store is at; `capacity` is clamped to
    /// at least one event, since a ring of none could never hand a live event to a watcher.
    pub(crate) fn new(capacity: usize, current: Revision) -> Arc<Self> {
        let (announce, _) = watch::channel(current);
        Arc::new(Self {
            state: Mutex::new(State {
                events: VecDeque::new(),
                capacity: capacity.max(1),
                oldest: current,
                current,
                closed: false,
            }),
            announce,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the ring half-updated in a way that matters
        // more than losing the store, so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends events, which must continue the history in revision order, and wakes the watchers.
    /// Backends call this while holding the lock that assigns revisions, so history has no holes.
    pub(crate) fn publish(&self, events: impl IntoIterator<Item = Event>) {
        let current = {
            let mut state = self.lock();
            for event in events {
                debug_assert!(event.revision() > state.current, "events out of order");
                state.current = event.revision();
                state.events.push_back(event);
            }
            while state.events.len() > state.capacity {
                if let Some(dropped) = state.events.pop_front() {
                    state.oldest = dropped.revision();
                }
            }
            state.current
        };
        self.announce.send_replace(current);
    }

    /// Forgets events at and below `revision` (clamped to the current revision: history that has
    /// not happened yet cannot be compacted). A watch from `revision` itself still works, since it
    /// only needs the events after it.
    pub(crate) fn compact(&self, revision: Revision) {
        let mut state = self.lock();
        let revision = revision.min(state.current);
        if revision <= state.oldest {
            return;
        }
        let keep = state.events.partition_point(|e| e.revision() <= revision);
        state.events.drain(..keep);
        state.oldest = revision;
    }

    /// The newest published revision.
    pub(crate) fn current(&self) -> Revision {
        self.lock().current
    }

    /// Waits until the window has published `revision` (or something after it).
    pub(crate) async fn reached(&self, revision: Revision) {
        let mut announced = self.announce.subscribe();
        // The sender lives in `self`, so the wait ends only by reaching the revision.
        let _ = announced.wait_for(|current| *current >= revision).await;
    }

    /// Forgets all history and jumps to `revision`: the events between the current revision and
    /// it are lost (a backend whose source skipped them), so every watcher that has not passed
    /// `revision` ends with [`StoreError::Compacted`] and must relist.
    pub(crate) fn reset(&self, revision: Revision) {
        {
            let mut state = self.lock();
            if revision <= state.current {
                return;
            }
            state.events.clear();
            state.oldest = revision;
            state.current = revision;
        }
        self.announce.send_replace(revision);
    }

    /// Ends every watch once it has delivered what the window holds: the store is going away.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.announce.send_modify(|_| {});
    }

    /// Streams events under `prefix` with revisions above `from`: retained ones first, then live
    /// ones. Fails at once if history after `from` is no longer complete.
    pub(crate) fn watch(self: &Arc<Self>, prefix: &str, from: Revision) -> Result<EventStream> {
        {
            let state = self.lock();
            if from < state.oldest {
                return Err(StoreError::Compacted {
                    requested: from,
                    oldest: state.oldest,
                });
            }
        }
        let watcher = Watcher {
            window: Arc::clone(self),
            announced: self.announce.subscribe(),
            prefix: prefix.to_owned(),
            last: from,
            pending: VecDeque::new(),
            done: false,
        };
        Ok(futures::stream::unfold(watcher, |mut watcher| async move {
            let item = watcher.next().await?;
            Some((item, watcher))
        })
        // Polling an ended stream again yields `None` rather than panicking.
        .fuse()
        .boxed())
    }

    /// Takes up to [`SCAN_LIMIT`] retained events after `last`, keeping those under `prefix`.
    fn scan(&self, prefix: &str, last: Revision) -> Result<Scan> {
        let state = self.lock();
        if last < state.oldest {
            return Err(StoreError::Compacted {
                requested: last,
                oldest: state.oldest,
            });
        }
        let start = state.events.partition_point(|e| e.revision() <= last);
        let end = state.events.len().min(start + SCAN_LIMIT);
        if start == end && state.closed {
            return Err(StoreError::Closed);
        }
        let examined = state.events.range(start..end);
        let events = examined
            .clone()
            .filter(|e| e.kv.key.starts_with(prefix))
            .cloned()
            .collect();
        Ok(Scan {
            events,
            last: examined.last().map_or(last, Event::revision),
            more: end < state.events.len(),
        })
    }
}

/// One watch's position in the window.
struct Watcher {
    window: Arc<Window>,
    announced: watch::Receiver<Revision>,
    prefix: String,
    /// The last revision examined (delivered or filtered out).
    last: Revision,
    /// Events scanned but not yet handed out.
    pending: VecDeque<Event>,
    /// Set after the final error: the stream then ends.
    done: bool,
}

impl Watcher {
    async fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            // Mark the announcement seen before looking, so that a publish racing with the scan
            // below still wakes the wait after it.
            self.announced.borrow_and_update();
            let scan = match self.window.scan(&self.prefix, self.last) {
                Ok(scan) => scan,
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            };
            self.last = scan.last;
            self.pending.extend(scan.events);
            if self.pending.is_empty() && !scan.more && self.announced.changed().await.is_err() {
                // The sender lives in the window we hold, so this cannot happen; end rather than spin.
                self.done = true;
                return Some(Err(StoreError::Closed));
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use bytes::Bytes;
    use futures::FutureExt;

    use super::*;
    use crate::{EventKind, KeyValue};

    fn put(key: &str, revision: Revision) -> Event {
        Event {
            kind: EventKind::Put,
            kv: KeyValue {
                key: key.to_owned(),
                value: Bytes::from_static(b"v"),
                create_revision: revision,
                mod_revision: revision,
            },
            prev: None,
        }
    }

    fn window_with(capacity: usize, keys: &[&str]) -> Arc<Window> {
        let window = Window::new(capacity, 0);
        window.publish(keys.iter().zip(1..).map(|(key, rev)| put(key, rev)));
        window
    }

    /// Everything the stream yields without waiting.
    fn ready(stream: &mut EventStream) -> Vec<Result<Revision>> {
        let mut out = Vec::new();
        while let Some(Some(item)) = stream.next().now_or_never() {
            out.push(item.map(|e| e.revision()));
        }
        out
    }

    #[test]
    fn watch_replays_retained_history_after_from() {
        let keys = ["/a/1", "/b/1", "/a/2", "/a/3", "/b/2"];
        let cases: &[(&str, Revision, Vec<Revision>)] = &[
            ("", 0, vec![1, 2, 3, 4, 5]),
            ("", 3, vec![4, 5]),
            ("", 5, vec![]),
            ("", 9, vec![]),
            ("/a/", 0, vec![1, 3, 4]),
            ("/a/", 3, vec![4]),
            ("/b/", 1, vec![2, 5]),
            ("/c/", 0, vec![]),
        ];
        for (prefix, from, want) in cases {
            let window = window_with(10, &keys);
            let mut stream = window.watch(prefix, *from).unwrap();
            let got: Vec<_> = ready(&mut stream).into_iter().map(Result::unwrap).collect();
            assert_eq!(&got, want, "prefix {prefix:?} from {from}");
        }
    }

    #[test]
    fn watch_before_retained_history_is_compacted() {
        // Capacity 3 over 5 events keeps 3..=5, so a watch may start after 2 at the earliest.
        let cases: &[(usize, Option<Revision>, Revision, bool)] = &[
            (3, None, 1, false),
            (3, None, 2, true),
            (3, None, 5, true),
            (10, Some(3), 2, false),
            (10, Some(3), 3, true),
            (10, Some(99), 4, false),
            (10, Some(99), 5, true),
            (10, Some(1), 0, false),
        ];
        for &(capacity, compact, from, ok) in cases {
            let window = window_with(capacity, &["/k1", "/k2", "/k3", "/k4", "/k5"]);
            if let Some(revision) = compact {
                window.compact(revision);
            }
            match window.watch("", from) {
                Ok(_) => assert!(ok, "capacity {capacity} compact {compact:?} from {from}"),
                Err(StoreError::Compacted { requested, .. }) => {
                    assert!(!ok, "capacity {capacity} compact {compact:?} from {from}");
                    assert_eq!(requested, from);
                }
                Err(other) => panic!("unexpected {other}"),
            }
        }
    }

    #[test]
    fn live_events_follow_replay_without_gap_or_duplicate() {
        let window = window_with(10, &["/k1", "/k2"]);
        let mut stream = window.watch("", 1).unwrap();
        assert_eq!(ready(&mut stream), vec![Ok(2)]);
        window.publish([put("/k3", 3), put("/k4", 4)]);
        assert_eq!(ready(&mut stream), vec![Ok(3), Ok(4)]);
        assert_eq!(ready(&mut stream), vec![]);
    }

    #[test]
    fn lagging_watcher_ends_with_compacted() {
        let window = window_with(3, &["/k1"]);
        let mut stream = window.watch("", 1).unwrap();
        window.publish((2..=6).map(|rev| put("/k", rev)));
        assert_eq!(
            ready(&mut stream),
            vec![Err(StoreError::Compacted {
                requested: 1,
                oldest: 3
            })]
        );
        assert!(matches!(stream.next().now_or_never(), Some(None)));
    }

    #[test]
    fn long_filtered_replay_does_not_stall() {
        // More non-matching events than one scan examines, then one match.
        let mut keys = vec!["/other"; SCAN_LIMIT * 2 + 3];
        keys.push("/mine");
        let window = window_with(keys.len(), &keys);
        let mut stream = window.watch("/mine", 0).unwrap();
        assert_eq!(ready(&mut stream), vec![Ok(keys.len() as Revision)]);
    }

    #[test]
    fn reset_ends_watchers_behind_it_and_serves_later_ones() {
        let window = window_with(10, &["/k1", "/k2"]);
        let mut behind = window.watch("", 1).unwrap();
        window.reset(7);
        assert_eq!(window.current(), 7);
        assert_eq!(
            ready(&mut behind),
            vec![Err(StoreError::Compacted {
                requested: 1,
                oldest: 7
            })]
        );
        let mut after = window.watch("", 7).unwrap();
        window.publish([put("/k8", 8)]);
        assert_eq!(ready(&mut after), vec![Ok(8)]);
        // A reset to the past changes nothing.
        window.reset(3);
        assert_eq!(window.current(), 8);
    }

    #[tokio::test]
    async fn reached_waits_for_the_revision() {
        let window = window_with(10, &["/k1"]);
        window.reached(1).await;
        let waiting = tokio::spawn({
            let window = Arc::clone(&window);
            async move { window.reached(2).await }
        });
        window.publish([put("/k2", 2)]);
        waiting.await.unwrap();
    }

    #[test]
    fn close_ends_watchers_after_draining() {
        let window = window_with(10, &["/k1", "/k2"]);
        let mut stream = window.watch("", 0).unwrap();
        window.close();
        assert_eq!(
            ready(&mut stream),
            vec![Ok(1), Ok(2), Err(StoreError::Closed)]
        );
        assert!(matches!(stream.next().now_or_never(), Some(None)));
    }
}
