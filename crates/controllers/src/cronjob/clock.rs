//! The time a CronJob controller schedules by. Real time in a cluster; a test runs the
//! controller on a scaled clock (one schedule minute per real second with a factor of 60) so
//! that it sees Jobs fire without waiting minutes and without sleeping.

use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// A clock: real time, or real time sped up by a factor from the moment it was made.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Clock {
    /// The wall clock.
    #[default]
    Real,
    /// `origin + (real now - origin) * factor`.
    Scaled {
        /// When the scaled clock agreed with real time.
        origin: Timestamp,
        /// How much faster it runs (60: a minute per second).
        factor: f64,
    },
}

impl Clock {
    /// A clock `factor` times faster than real time, starting now.
    pub fn scaled(factor: f64) -> Clock {
        Clock::Scaled {
            origin: clock::now(),
            factor: factor.max(f64::MIN_POSITIVE),
        }
    }

    /// The clock's time when the real time is `real`.
    pub fn at(&self, real: Timestamp) -> Timestamp {
        match self {
            Clock::Real => real,
            Clock::Scaled { origin, factor } => {
                let elapsed = origin.duration_until(real).as_secs_f64() * factor;
                let scaled =
                    SignedDuration::try_from_secs_f64(elapsed).unwrap_or(SignedDuration::MAX);
                origin.checked_add(scaled).unwrap_or(Timestamp::MAX)
            }
        }
    }

    /// The clock's time now.
    pub fn now(&self) -> Timestamp {
        self.at(clock::now())
    }

    /// The real time until the clock shows `later` than `now` by `d` (for a requeue).
    pub fn real(&self, d: SignedDuration) -> Duration {
        let d = d.unsigned_abs();
        match self {
            Clock::Real => d,
            Clock::Scaled { factor, .. } => d.div_f64(*factor),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_clock_runs_faster_from_its_origin() {
        let origin = Timestamp::from_second(1_000_000).unwrap();
        let clock = Clock::Scaled {
            origin,
            factor: 60.0,
        };
        let later = origin + SignedDuration::from_secs(2);
        assert_eq!(clock.at(later), origin + SignedDuration::from_secs(120));
        assert_eq!(
            clock.real(SignedDuration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(Clock::Real.at(later), later);
    }
}
