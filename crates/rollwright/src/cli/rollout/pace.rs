//! The observed pace of a rollout and the ETA it implies: pods becoming available on the new
//! revision per second over the last minute, so a rollout that sped up or stalled is judged on
//! what it does now rather than on its whole history.

use std::time::Duration;

/// How far back the pace looks.
const WINDOW: Duration = Duration::from_secs(60);

/// Samples of a count that grows as the rollout progresses, at times since some start.
#[derive(Clone, Debug, Default)]
pub struct Pace {
    samples: Vec<(Duration, i32)>,
}

impl Pace {
    /// Records `done` (available pods of the new revision) at `at`. Only changes are kept, plus
    /// the first sample.
    pub fn observe(&mut self, at: Duration, done: i32) {
        if self.samples.last().is_some_and(|&(_, d)| d == done) {
            return;
        }
        self.samples.push((at, done));
        // Older samples than the window's start are not needed, except the last one before it
        // (the value the window started with).
        let start = at.saturating_sub(WINDOW);
        let keep_from = self
            .samples
            .iter()
            .rposition(|&(t, _)| t <= start)
            .unwrap_or(0);
        self.samples.drain(..keep_from);
    }

    /// Pods per second over the window ending at `now`, if anything has been observed for a
    /// while and the count moved.
    pub fn rate(&self, now: Duration) -> Option<f64> {
        let &(_, last) = self.samples.last()?;
        let start = now.saturating_sub(WINDOW);
        // The count at the window's start: the last sample at or before it, else the first.
        let (t0, d0) = self
            .samples
            .iter()
            .rev()
            .find(|&&(t, _)| t <= start)
            .map(|&(_, d)| (start, d))
            .unwrap_or(self.samples[0]);
        let elapsed = now.saturating_sub(t0).as_secs_f64();
        if elapsed < 1.0 || last <= d0 {
            return None;
        }
        Some(f64::from(last - d0) / elapsed)
    }

    /// Time until `remaining` more pods are done at the current rate.
    pub fn eta(&self, now: Duration, remaining: i32) -> Option<Duration> {
        if remaining <= 0 {
            return Some(Duration::ZERO);
        }
        let rate = self.rate(now)?;
        Duration::try_from_secs_f64(f64::from(remaining) / rate).ok()
    }
}

/// `1.5 pods/s`, or `12 pods/min` when slower than one a second.
pub fn format_rate(rate: f64) -> String {
    if rate >= 1.0 {
        format!("{rate:.1} pods/s")
    } else {
        format!("{:.0} pods/min", (rate * 60.0).max(1.0))
    }
}

/// `45s`, `3m10s`, `1h05m`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `pace 1.5 pods/s, ETA 12s`, or what is known.
pub fn describe(pace: &Pace, now: Duration, remaining: i32) -> String {
    match (pace.rate(now), pace.eta(now, remaining)) {
        (Some(rate), Some(eta)) => {
            format!("pace {}, ETA {}", format_rate(rate), format_duration(eta))
        }
        _ if remaining <= 0 => String::new(),
        _ => "pace unknown yet".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn pace_over_the_last_minute() {
        // (samples, now, remaining, rate, eta)
        type Case = (Vec<(u64, i32)>, u64, i32, Option<f64>, Option<u64>);
        let cases: Vec<Case> = vec![
            (vec![], 10, 5, None, None),
            (vec![(0, 0)], 10, 5, None, None),
            // 10 pods in 10s: 1/s, 5 left: 5s.
            (vec![(0, 0), (10, 10)], 10, 5, Some(1.0), Some(5)),
            // Steady 1 pod per 2s.
            (
                vec![(0, 0), (2, 1), (4, 2), (6, 3)],
                6,
                3,
                Some(0.5),
                Some(6),
            ),
            // Fast at first, then stalled for over a minute: the window shows no progress.
            (vec![(0, 0), (5, 50)], 100, 10, None, None),
            // A minute ago the count was 20, now 50: 0.5/s, 10 left: 20s.
            (
                vec![(0, 0), (10, 20), (60, 50)],
                70,
                10,
                Some(0.5),
                Some(20),
            ),
            // Done: no ETA needed.
            (vec![(0, 0), (10, 10)], 10, 0, Some(1.0), Some(0)),
        ];
        for (samples, now, remaining, rate, eta) in cases {
            let mut pace = Pace::default();
            for (t, d) in &samples {
                pace.observe(s(*t), *d);
            }
            let got = pace.rate(s(now));
            match (got, rate) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{samples:?}: {g} != {w}"),
                (g, w) => assert_eq!(g, w, "{samples:?}"),
            }
            assert_eq!(
                pace.eta(s(now), remaining).map(|d| d.as_secs()),
                eta,
                "{samples:?}"
            );
        }
    }

    #[test]
    fn old_samples_are_dropped() {
        let mut pace = Pace::default();
        for t in 0..1000 {
            pace.observe(s(t), i32::try_from(t).unwrap_or(0));
        }
        assert!(pace.samples.len() <= 62, "{}", pace.samples.len());
        assert_eq!(pace.rate(s(999)).map(|r| r.round()), Some(1.0));
    }

    #[test]
    fn formats() {
        assert_eq!(format_rate(2.26), "2.3 pods/s");
        assert_eq!(format_rate(0.2), "12 pods/min");
        assert_eq!(format_duration(s(45)), "45s");
        assert_eq!(format_duration(s(190)), "3m10s");
        assert_eq!(format_duration(s(3900)), "1h05m");
        let mut pace = Pace::default();
        pace.observe(s(0), 0);
        assert_eq!(describe(&pace, s(5), 3), "pace unknown yet");
        pace.observe(s(4), 2);
        assert_eq!(describe(&pace, s(4), 3), "pace 30 pods/min, ETA 6s");
    }
}
