//! A CronJob's schedule: standard 5-field cron syntax and the `@hourly`-style shorthands (parsed
//! by `croner`, with Vixie cron's day-of-month/day-of-week OR), evaluated in the CronJob's
//! `timeZone` (UTC when unset). Pure: the controller passes the times.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};
use croner::{
    Cron,
    parser::{CronParser, Seconds, Year},
};
use jiff::{Timestamp, civil, tz::TimeZone};

/// Most missed start times looked at before giving up counting (upstream warns past 100).
pub const TOO_MANY_MISSED: usize = 100;

/// Why a schedule cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error("unparseable schedule {schedule:?}: {error}")]
    Unparseable {
        /// As written.
        schedule: String,
        /// What the parser said.
        error: String,
    },
    /// The time zone is not known.
    #[error("unknown time zone {0}")]
    UnknownTimeZone(String),
}

/// A parsed schedule in its time zone.
#[derive(Debug)]
pub struct Schedule {
    cron: Cron,
    tz: TimeZone,
}

impl Schedule {
    /// Parses `schedule` (five fields or a shorthand; no seconds, no years) for `time_zone`.
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, ScheduleError> {
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(schedule)
            .map_err(|e| ScheduleError::Unparseable {
                schedule: schedule.into(),
                error: e.to_string(),
            })?;
        let tz = match time_zone {
            None => TimeZone::UTC,
            Some(name) => {
                TimeZone::get(name).map_err(|_| ScheduleError::UnknownTimeZone(name.into()))?
            }
        };
        Ok(Schedule { cron, tz })
    }

    /// The time zone the schedule runs in.
    pub fn time_zone(&self) -> &TimeZone {
        &self.tz
    }

    /// The first start time strictly after `t`. Matching runs on the zone's wall clock; a wall
    /// time skipped by a DST change runs at the first instant after the gap.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let mut from = t;
        // A wall time repeated by a DST change may map back to or before `t`: look further.
        for _ in 0..3 {
            let local = self.wall_time(from)?;
            let next = self.cron.find_next_occurrence(&local, false).ok()?;
            let at = self.instant_of(next.naive_utc())?;
            if at > t {
                return Some(at);
            }
            from = at + jiff::SignedDuration::from_secs(60);
        }
        None
    }

    /// The most recent start time in `(earliest, now]`, and how many there are (counted up to
    /// [`TOO_MANY_MISSED`] + 1), as upstream's `mostRecentScheduleTime`.
    pub fn most_recent(&self, earliest: Timestamp, now: Timestamp) -> (Option<Timestamp>, usize) {
        let mut count = 0;
        let mut at = earliest;
        while count <= TOO_MANY_MISSED {
            match self.next_after(at) {
                Some(t) if t <= now => {
                    count += 1;
                    at = t;
                }
                _ => return ((count > 0).then_some(at), count),
            }
        }
        // Too many to walk: the latest one is found backwards from now.
        let latest = self
            .wall_time(now)
            .and_then(|l| self.cron.find_previous_occurrence(&l, true).ok())
            .and_then(|p| self.instant_of(p.naive_utc()));
        (latest, count)
    }

    /// The zone's wall time at `t`, as a naive time the cron parser evaluates.
    fn wall_time(&self, t: Timestamp) -> Option<DateTime<Utc>> {
        let c = self.tz.to_datetime(t);
        let date = NaiveDate::from_ymd_opt(
            i32::from(c.year()),
            u32::try_from(c.month()).ok()?,
            u32::try_from(c.day()).ok()?,
        )?;
        let naive = date.and_hms_opt(
            u32::try_from(c.hour()).ok()?,
            u32::try_from(c.minute()).ok()?,
            u32::try_from(c.second()).ok()?,
        )?;
        Some(naive.and_utc())
    }

    /// The instant of a wall time in the zone.
    fn instant_of(&self, naive: NaiveDateTime) -> Option<Timestamp> {
        let civil = civil::DateTime::new(
            i16::try_from(naive.year()).ok()?,
            i8::try_from(naive.month()).ok()?,
            i8::try_from(naive.day()).ok()?,
            i8::try_from(naive.hour()).ok()?,
            i8::try_from(naive.minute()).ok()?,
            i8::try_from(naive.second()).ok()?,
            0,
        )
        .ok()?;
        self.tz
            .to_ambiguous_zoned(civil)
            .compatible()
            .ok()
            .map(|z| z.timestamp())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn schedules_parse_as_upstream_accepts_them() {
        for ok in [
            "* * * * *",
            "*/5 1-3 * * MON-FRI",
            "@hourly",
            "@daily",
            "0 0 1 1 *",
        ] {
            assert!(Schedule::parse(ok, None).is_ok(), "{ok}");
        }
        for bad in ["", "* * * *", "0 * * * * *", "61 * * * *", "nonsense"] {
            assert!(Schedule::parse(bad, None).is_err(), "{bad}");
        }
        assert!(matches!(
            Schedule::parse("* * * * *", Some("Mars/Olympus")),
            Err(ScheduleError::UnknownTimeZone(_))
        ));
    }

    #[test]
    fn next_times_follow_the_schedule_and_zone() {
        let every_5 = Schedule::parse("*/5 * * * *", None).unwrap();
        assert_eq!(
            every_5.next_after(ts("2026-01-01T10:02:30Z")),
            Some(ts("2026-01-01T10:05:00Z"))
        );
        assert_eq!(
            every_5.next_after(ts("2026-01-01T10:05:00Z")),
            Some(ts("2026-01-01T10:10:00Z")),
            "strictly after"
        );
        let hourly = Schedule::parse("@hourly", None).unwrap();
        assert_eq!(
            hourly.next_after(ts("2026-01-01T10:02:00Z")),
            Some(ts("2026-01-01T11:00:00Z"))
        );
        let nine_in_tokyo = Schedule::parse("0 9 * * *", Some("Asia/Tokyo")).unwrap();
        assert_eq!(
            nine_in_tokyo.next_after(ts("2026-01-01T00:30:00Z")),
            Some(ts("2026-01-02T00:00:00Z"))
        );
    }

    #[test]
    fn the_most_recent_missed_time_is_started() {
        let s = Schedule::parse("* * * * *", None).unwrap();
        let (t, n) = s.most_recent(ts("2026-01-01T10:00:00Z"), ts("2026-01-01T10:03:30Z"));
        assert_eq!((t, n), (Some(ts("2026-01-01T10:03:00Z")), 3));
        let (t, n) = s.most_recent(ts("2026-01-01T10:00:00Z"), ts("2026-01-01T10:00:59Z"));
        assert_eq!((t, n), (None, 0));
        let (t, n) = s.most_recent(ts("2026-01-01T00:00:00Z"), ts("2026-01-02T00:00:30Z"));
        assert_eq!(t, Some(ts("2026-01-02T00:00:00Z")));
        assert!(n > TOO_MANY_MISSED);
    }
}
