//! What to write for each event, decided before any request: upstream's `EventCorrelator`
//! (client-go `tools/record/events_cache.go`), in its order.
//!
//! 1. **Aggregation.** Events on one object that differ only in their message (same type and
//!    reason) are similar. From the tenth distinct message within ten minutes on, the event
//!    becomes one combined event, "(combined from similar events): <message>", counted like a
//!    repeat. A crash-looping pod whose messages carry a changing detail then writes one event,
//!    not one per message.
//! 2. **Counting.** An event seen before (the same key) patches that event's `count`,
//!    `lastTimestamp` and `message` instead of creating another. The count moves even when the
//!    spam filter then drops the write, so the next write carries every occurrence, as upstream's.
//! 3. **Spam filter.** Per object, a token bucket: a burst of 25 writes, then one per 5 minutes.
//!
//! Each of the three remembers at most [`REMEMBERED`] keys, forgetting the least recently used
//! first, as upstream's LRU caches do. Times are tokio's clock, so the windows move with a paused
//! `whatif` clock too.

use crate::EventType;
use jiff::Timestamp;
use lru::LruCache;
use std::{collections::HashSet, time::Duration};
use tokio::time::Instant;

/// Keys each cache remembers (upstream's `maxLruCacheEntries`).
pub(crate) const REMEMBERED: usize = 4096;
/// Distinct similar messages in a window before they combine (`defaultAggregateMaxEvents`).
const AGGREGATE_AFTER: usize = 10;
/// How long after the last similar event a new one still counts as similar
/// (`defaultAggregateIntervalInSeconds`).
const AGGREGATE_WINDOW: Duration = Duration::from_secs(600);
/// The spam filter's bucket (`defaultSpamBurst`, `defaultSpamQPS`).
const BURST: f64 = 25.0;
const REFILL_EVERY: Duration = Duration::from_secs(300);
/// The combined event's message prefix (`EventAggregatorByReasonMessageFunc`).
const COMBINED: &str = "(combined from similar events): ";

/// An event as its recorder raised it.
pub(crate) struct Incoming<'a> {
    /// The involved object: kind, namespace, name, uid and API version, joined.
    pub object: &'a str,
    /// The field path within the object, part of what makes two events the same.
    pub field_path: &'a str,
    /// The involved object's name, which the event's own name starts with.
    pub object_name: &'a str,
    /// Where the event is written.
    pub namespace: &'a str,
    pub kind: EventType,
    pub reason: &'a str,
    pub message: &'a str,
}

/// A write the recorder makes for an event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Write {
    /// The Event's name: new, or the one this key was first written under.
    pub name: String,
    pub namespace: String,
    /// The message to write (the combined one for an aggregated event).
    pub message: String,
    pub count: i32,
    pub first: Timestamp,
    /// Whether an Event by this name should exist already (patch it; create it if it is gone).
    pub patch: bool,
}

/// An event already written (or decided), by its key.
struct Logged {
    name: String,
    namespace: String,
    count: i32,
    first: Timestamp,
}

/// Similar events lately seen on one object.
struct Similar {
    messages: HashSet<String>,
    last: Instant,
}

/// One object's spam-filter bucket.
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The three caches of one recorder.
pub(crate) struct Correlator {
    similar: LruCache<String, Similar>,
    logged: LruCache<String, Logged>,
    buckets: LruCache<String, Bucket>,
}

impl Default for Correlator {
    fn default() -> Self {
        // Unbounded in the crate's sense, bounded here (`remember`): an `LruCache` of a given
        // size allocates all of its table at once, and every simulated node has a recorder.
        Self {
            similar: LruCache::unbounded(),
            logged: LruCache::unbounded(),
            buckets: LruCache::unbounded(),
        }
    }
}

/// Forgets the least recently used entries of `cache` past [`REMEMBERED`].
fn remember<V>(cache: &mut LruCache<String, V>) {
    while cache.len() > REMEMBERED {
        cache.pop_lru();
    }
}

impl Correlator {
    /// Decides the write for `ev`, happening at `now` (tokio's clock) and `wall`; `None` when the
    /// spam filter drops it.
    pub(crate) fn correlate(
        &mut self,
        ev: &Incoming<'_>,
        now: Instant,
        wall: Timestamp,
    ) -> Option<Write> {
        let similar_key = format!("{}\0{}\0{}", ev.object, ev.kind.as_str(), ev.reason);
        let (key, message) = if self.aggregate(&similar_key, ev.message, now) {
            (similar_key, format!("{COMBINED}{}", ev.message))
        } else {
            (
                format!("{similar_key}\0{}\0{}", ev.field_path, ev.message),
                ev.message.to_string(),
            )
        };
        let new_name = event_name(ev.object_name, wall);
        let write = match self.logged.get_mut(&key) {
            Some(seen) => {
                seen.count = seen.count.saturating_add(1);
                Write {
                    name: seen.name.clone(),
                    namespace: seen.namespace.clone(),
                    message,
                    count: seen.count,
                    first: seen.first,
                    patch: true,
                }
            }
            None => {
                self.logged.put(
                    key,
                    Logged {
                        name: new_name.clone(),
                        namespace: ev.namespace.to_string(),
                        count: 1,
                        first: wall,
                    },
                );
                Write {
                    name: new_name,
                    namespace: ev.namespace.to_string(),
                    message,
                    count: 1,
                    first: wall,
                    patch: false,
                }
            }
        };
        remember(&mut self.logged);
        self.take_token(ev.object, now).then_some(write)
    }

    /// Notes `message` among the similar events of `key`; whether the event is now combined.
    fn aggregate(&mut self, key: &str, message: &str, now: Instant) -> bool {
        let fresh = || Similar {
            messages: HashSet::new(),
            last: now,
        };
        let similar = match self.similar.get_mut(key) {
            Some(s) if now.duration_since(s.last) <= AGGREGATE_WINDOW => s,
            Some(s) => {
                *s = fresh();
                s
            }
            None => self.similar.get_or_insert_mut(key.to_string(), fresh),
        };
        similar.messages.insert(message.to_string());
        similar.last = now;
        let combine = similar.messages.len() >= AGGREGATE_AFTER;
        if combine {
            // Keeps the set from growing past the threshold, as upstream's `PopAny`.
            if let Some(any) = similar.messages.iter().next().cloned() {
                similar.messages.remove(&any);
            }
        }
        remember(&mut self.similar);
        combine
    }

    /// Takes a token from `object`'s bucket, if it has one.
    fn take_token(&mut self, object: &str, now: Instant) -> bool {
        let b = self
            .buckets
            .get_or_insert_mut(object.to_string(), || Bucket {
                tokens: BURST,
                at: now,
            });
        let refill = now.duration_since(b.at).as_secs_f64() / REFILL_EVERY.as_secs_f64();
        b.tokens = (b.tokens + refill).min(BURST);
        b.at = now;
        let allowed = b.tokens >= 1.0;
        if allowed {
            b.tokens -= 1.0;
        }
        remember(&mut self.buckets);
        allowed
    }
}

/// A new Event's name: the object's, then the time in hex nanoseconds, as upstream.
fn event_name(object_name: &str, wall: Timestamp) -> String {
    format!("{object_name}.{:x}", wall.as_nanosecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev<'a>(object: &'a str, reason: &'a str, message: &'a str) -> Incoming<'a> {
        Incoming {
            object,
            field_path: "",
            object_name: object,
            namespace: "default",
            kind: EventType::Warning,
            reason,
            message,
        }
    }

    /// A wall time `ms` milliseconds after an arbitrary start.
    fn wall(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn repeats_patch_the_first_event_with_a_count() {
        let mut c = Correlator::default();
        let t = Instant::now();
        let first = c.correlate(&ev("web", "BackOff", "m"), t, wall(0)).unwrap();
        assert!(!first.patch);
        assert_eq!(first.count, 1);
        let again = c.correlate(&ev("web", "BackOff", "m"), t, wall(5)).unwrap();
        assert_eq!((again.patch, again.count), (true, 2));
        assert_eq!(again.name, first.name);
        assert_eq!(again.first, first.first);
        let other = c.correlate(&ev("web", "Pulled", "m"), t, wall(6)).unwrap();
        assert!(!other.patch, "another reason is another event");
    }

    #[test]
    fn the_tenth_similar_message_combines_and_later_ones_count_on_it() {
        let mut c = Correlator::default();
        let t = Instant::now();
        let mut writes = Vec::new();
        for i in 0..12 {
            let m = format!("container c{i} failed");
            writes.push(c.correlate(&ev("web", "Failed", &m), t, wall(i)).unwrap());
        }
        assert!(writes[..9].iter().all(|w| !w.patch && w.count == 1));
        let names: HashSet<_> = writes[..9].iter().map(|w| &w.name).collect();
        assert_eq!(names.len(), 9, "nine events of their own");
        let combined = &writes[9];
        assert_eq!(
            combined.message,
            "(combined from similar events): container c9 failed"
        );
        assert!(!combined.patch);
        assert_eq!(
            (writes[10].patch, writes[10].count, &writes[10].name),
            (true, 2, &combined.name)
        );
        assert_eq!(
            writes[11].message,
            "(combined from similar events): container c11 failed"
        );
        assert_eq!(writes[11].count, 3);
    }

    #[test]
    fn similar_events_ten_minutes_apart_do_not_combine() {
        let mut c = Correlator::default();
        let t = Instant::now();
        for i in 0..9 {
            c.correlate(&ev("web", "Failed", &format!("m{i}")), t, wall(i));
        }
        let later = t + AGGREGATE_WINDOW + Duration::from_secs(1);
        let w = c
            .correlate(&ev("web", "Failed", "m9"), later, wall(700_000))
            .unwrap();
        assert_eq!(w.message, "m9", "the window started over");
    }

    #[test]
    fn the_spam_filter_allows_a_burst_then_one_per_five_minutes_and_still_counts() {
        let mut c = Correlator::default();
        let t = Instant::now();
        let written = (0..40)
            .filter(|_| c.correlate(&ev("x", "Tick", "tick"), t, wall(0)).is_some())
            .count();
        assert_eq!(written, 25);
        assert!(
            c.correlate(&ev("y", "Tick", "tick"), t, wall(0)).is_some(),
            "other objects have their own bucket"
        );
        let refilled = c
            .correlate(&ev("x", "Tick", "tick"), t + REFILL_EVERY, wall(1))
            .unwrap();
        assert_eq!(
            refilled.count, 41,
            "the dropped repeats were counted, as upstream counts them"
        );
    }

    #[test]
    fn each_cache_forgets_the_least_recently_used_past_its_size() {
        let mut c = Correlator::default();
        let t = Instant::now();
        for i in 0..=REMEMBERED {
            c.correlate(&ev(&format!("o{i}"), "R", "m"), t, wall(0));
        }
        assert_eq!(c.logged.len(), REMEMBERED);
        assert_eq!(c.buckets.len(), REMEMBERED);
        let again = c.correlate(&ev("o0", "R", "m"), t, wall(1)).unwrap();
        assert!(!again.patch, "the oldest was forgotten");
    }
}
