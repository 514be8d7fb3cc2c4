//! The `Retry-After` a rejected request is told, per priority level: upstream's
//! `droppedRequestsTracker`. It starts at 1 s; when a level has refused at least 3 × the current
//! value of requests over the last that-many seconds, it doubles (at most once per current value
//! of seconds, up to 32 s); when fewer than the current value were refused, it comes down by one.
//! So clients back off further while a level stays overloaded, and not once it recovers.

use std::collections::HashMap;

/// The longest `Retry-After`.
const MAX_RETRY_AFTER: i64 = 32;

/// One level's refusals.
struct Stats {
    retry_after: i64,
    retry_after_updated: i64,
    /// The second being counted and its refusals.
    current: (i64, i64),
    /// Earlier seconds' refusals, oldest first.
    history: Vec<(i64, i64)>,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            retry_after: 1,
            retry_after_updated: 0,
            current: (0, 0),
            history: Vec::new(),
        }
    }
}

impl Stats {
    fn record(&mut self, now: i64) {
        if self.current.0 == now {
            self.current.1 += 1;
            return;
        }
        let (second, count) = self.current;
        self.history.push((second, count));
        let keep = (2 * self.retry_after).min(MAX_RETRY_AFTER);
        self.history.retain(|(t, _)| second - t <= keep);
        self.current = (now, 1);
        self.update(now);
    }

    fn update(&mut self, now: i64) {
        let refused: i64 = self
            .history
            .iter()
            .filter(|(t, _)| now - t <= self.retry_after && *t < now)
            .map(|(_, n)| n)
            .sum();
        if now - self.retry_after_updated >= self.retry_after && refused >= 3 * self.retry_after {
            self.retry_after = (self.retry_after * 2).min(MAX_RETRY_AFTER);
            self.retry_after_updated = now;
        } else if refused < self.retry_after && self.retry_after > 1 {
            self.retry_after -= 1;
        }
    }
}

/// Every level's refusals.
#[derive(Default)]
pub(crate) struct RetryAfter {
    levels: std::sync::Mutex<HashMap<String, Stats>>,
}

impl RetryAfter {
    /// Records a refusal at level `level` in second `now` (Unix time); the `Retry-After` to
    /// answer it with.
    pub(crate) fn refused(&self, level: &str, now: i64) -> i64 {
        let mut levels = self.levels.lock().unwrap_or_else(|e| e.into_inner());
        let stats = levels.entry(level.to_string()).or_default();
        stats.record(now);
        stats.retry_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_grows_while_a_level_keeps_refusing_and_falls_back_after() {
        let r = RetryAfter::default();
        assert_eq!(r.refused("l", 100), 1);
        // 3 refusals in second 100 (3 × 1): doubled at the next second.
        r.refused("l", 100);
        r.refused("l", 100);
        assert_eq!(r.refused("l", 101), 2);
        // 6 more over seconds 101-102: 4 at second 103.
        for _ in 0..5 {
            r.refused("l", 101);
        }
        r.refused("l", 102);
        assert_eq!(r.refused("l", 103), 4);
        // Another level is not affected.
        assert_eq!(r.refused("other", 103), 1);
        // Quiet seconds: it comes down one at a time.
        assert_eq!(r.refused("l", 200), 3);
        assert_eq!(r.refused("l", 300), 2);
    }
}
