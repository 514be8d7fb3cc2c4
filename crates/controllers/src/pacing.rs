//! Paced DaemonSet and StatefulSet rollouts (issue 41; upstream kubernetes/kubernetes#111073,
//! which upstream has not built): two annotations that hold a rolling update back beyond what
//! `maxUnavailable`, `maxSurge` and `partition` allow.
//!
//! - [`MAX_UPDATING`] (`"2"`, `"10%"`): at most this many pods of the new revision in flight at
//!   once, in flight meaning created or updated in place but not yet available, *whatever the
//!   old pods' state*. Upstream's `maxUnavailable` counts an old pod that is not ready as already
//!   unavailable and replaces it at once, so a networking DaemonSet whose old pods turn NotReady
//!   mid-rollout (#111073) is updated everywhere at once; this limit is on the new pods only.
//! - [`MIN_UPDATE_INTERVAL`] (`"30s"`, `"2m"`, Go's duration syntax): at least this long between
//!   starting two pod updates (a deletion for a recreate, a pod created beside an old one for a
//!   surge, an in-place patch).
//!
//! Both narrow what the strategy's own plan picks (the strictest limit wins) and neither ever
//! widens it. Without the annotations nothing here changes anything. A value that cannot be read
//! is reported (a Warning event and the [`CONDITION`] condition, naming the annotation and how to
//! write it) and the rollout goes on as if the annotation were absent.
//!
//! The interval's clock is read from the pods, not kept in memory, so that a restarted
//! controller (or its standby) keeps it: the newest creation time of a pod of the new revision,
//! the time an in-place update was made ([`IN_PLACE_UPDATE_TIME`], which the controllers write on
//! the pods they patch while an interval is set), and the time a pod being replaced was deleted
//! (`deletionTimestamp - deletionGracePeriodSeconds`). The API server keeps metadata times to the
//! second, so an update it records at second S started within `[S, S+1)`: it counts from S+1,
//! which keeps two starts at least the interval apart at the cost of up to a second.
//!
//! The arithmetic is pure ([`Pacing::budget`], [`Budget::take`]); the controllers count the pods
//! in flight and find the last start in their own terms (per node, per ordinal) and carry out
//! what the budget lets through. What holds the rollout back is shown in `status.conditions` as
//! [`CONDITION`] (a rollwright condition type: upstream's API accepts any type, and its own
//! status fields are left as they are), which `rollwright rollout status` and `watch` read.

use api::intstr::{IntOrPercent, scaled_value};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use std::{collections::BTreeMap, time::Duration};

/// At most this many pods of the new revision created or updated but not yet available.
pub const MAX_UPDATING: &str = "rollwright.io/max-updating";
/// At least this long (a Go duration) between starting two pod updates.
pub const MIN_UPDATE_INTERVAL: &str = "rollwright.io/min-update-interval";
/// On a pod updated in place while an interval is set: when (RFC 3339, to the nanosecond), so
/// the interval survives a controller restart.
pub const IN_PLACE_UPDATE_TIME: &str = "rollwright.io/in-place-update-time";
/// The condition type that says what holds a rollout back, or which annotation is ignored.
pub const CONDITION: &str = "RolloutPaced";
/// The Warning event of an annotation that cannot be read.
pub const INVALID_EVENT: &str = "InvalidPacingAnnotation";

/// The condition's reasons.
pub mod reason {
    /// As many new pods are in flight as `max-updating` allows.
    pub const MAX_UPDATING: &str = "MaxUpdating";
    /// The last update started less than `min-update-interval` ago.
    pub const MIN_UPDATE_INTERVAL: &str = "MinUpdateInterval";
    /// Nothing holds the rollout, but an annotation is ignored (status `False`).
    pub const INVALID: &str = super::INVALID_EVENT;
}

/// An annotation that cannot be read; the message names it and says how to write it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// `max-updating` is not a positive count or a percentage from 1% to 100%.
    #[error(
        "ignoring annotation {MAX_UPDATING}={value:?} ({why}): write a whole number of pods of at least 1 (e.g. \"1\") or a percentage from 1% to 100% (e.g. \"25%\"); until then the rollout is not limited by it"
    )]
    MaxUpdating {
        /// What the annotation says.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// `min-update-interval` is not a duration.
    #[error(
        "ignoring annotation {MIN_UPDATE_INTERVAL}={value:?} (not a duration): write it as Go writes durations (e.g. \"30s\", \"2m\", \"1m30s\"); until then the rollout is not limited by it"
    )]
    MinUpdateInterval {
        /// What the annotation says.
        value: String,
    },
}

/// How a `max-updating` percentage resolves: as the kind's `maxUnavailable` does (a
/// DaemonSet's rounds up, a StatefulSet's down), never below 1 so a small workload still moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Up (DaemonSet).
    Up,
    /// Down (StatefulSet).
    Down,
}

/// A workload's pacing annotations, read once per change of the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pacing {
    max_updating: Option<IntOrPercent>,
    /// The interval and the annotation's text (messages repeat what the user wrote).
    min_interval: Option<(Duration, String)>,
    /// Annotations present but unreadable (and so ignored).
    pub invalid: Vec<Invalid>,
}

impl Pacing {
    /// Reads the annotations.
    pub fn read(annotations: Option<&BTreeMap<String, String>>) -> Pacing {
        let mut pacing = Pacing::default();
        let get = |k: &str| annotations.and_then(|a| a.get(k));
        if let Some(value) = get(MAX_UPDATING) {
            match parse_max_updating(value) {
                Ok(v) => pacing.max_updating = Some(v),
                Err(why) => pacing.invalid.push(Invalid::MaxUpdating {
                    value: value.clone(),
                    why,
                }),
            }
        }
        if let Some(value) = get(MIN_UPDATE_INTERVAL) {
            match parse_duration(value) {
                Some(d) if !d.is_zero() => pacing.min_interval = Some((d, value.trim().into())),
                // Zero is a valid duration that asks for nothing.
                Some(_) => {}
                None => pacing.invalid.push(Invalid::MinUpdateInterval {
                    value: value.clone(),
                }),
            }
        }
        pacing
    }

    /// Whether any annotation paces the rollout (an invalid one does not).
    pub fn is_set(&self) -> bool {
        self.max_updating.is_some() || self.min_interval.is_some()
    }

    /// Whether an interval is set (the controllers then stamp in-place updates with their time).
    pub fn has_interval(&self) -> bool {
        self.min_interval.is_some()
    }

    /// `max-updating` resolved against `total` pods.
    pub fn max_updating(&self, total: i32, rounding: Rounding) -> Option<i32> {
        let v = self.max_updating?;
        Some(scaled_value(&v, total, rounding == Rounding::Up).max(1))
    }

    /// What may start now, with `updating` pods of the new revision in flight and the last
    /// update started at `last_start`, for a workload of `total` pods.
    pub fn budget(
        &self,
        total: i32,
        rounding: Rounding,
        updating: i32,
        last_start: Option<Timestamp>,
        now: Timestamp,
    ) -> Budget {
        let max = self.max_updating(total, rounding).map(|max| MaxLimit {
            max,
            updating,
            left: usize::try_from(max.saturating_sub(updating)).unwrap_or(0),
        });
        let interval = self.min_interval.as_ref().map(|(d, text)| {
            let next = last_start
                .and_then(|t| t.checked_add(SignedDuration::try_from(*d).ok()?).ok())
                .filter(|next| *next > now);
            IntervalLimit {
                interval: *d,
                text: text.clone(),
                next,
            }
        });
        Budget {
            max,
            interval,
            now,
            taken: 0,
            withheld: false,
        }
    }
}

/// `max-updating` as written: a count (digits) or a percentage (`N%`).
fn parse_max_updating(value: &str) -> Result<IntOrPercent, &'static str> {
    let value = value.trim();
    let parsed = if value.ends_with('%') {
        IntOrPercent::parse(&Value::String(value.into()))
    } else {
        value
            .parse::<i64>()
            .map_err(|_| ())
            .and_then(|n| IntOrPercent::parse(&json!(n)).map_err(|_| ()))
            .map_err(|()| api::intstr::IntOrPercentError::NotPercent)
    };
    match parsed {
        Err(_) => Err("not a number of pods or a percentage"),
        Ok(IntOrPercent::Int(n)) if n < 1 => {
            Err("it must be at least 1; to stop a rollout, pause it")
        }
        Ok(IntOrPercent::Percent(p)) if !(1..=100).contains(&p) => {
            Err("a percentage must be from 1% to 100%")
        }
        Ok(v) => Ok(v),
    }
}

/// Parses a duration as Go's `time.ParseDuration` does: a sequence of decimal numbers, each
/// with an optional fraction and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), such as `300ms`,
/// `1.5s` or `1h30m`, or a bare `0`. Negative durations are refused (an interval cannot be).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let nanos_per: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        total = total.checked_add(whole.checked_mul(nanos_per)?)?;
        // The fraction, digit by digit, as Go adds it (precise to the nanosecond).
        let mut scale = nanos_per;
        for digit in fraction.chars() {
            let d = u128::from(digit.to_digit(10)?);
            scale /= 10;
            total = total.checked_add(d * scale)?;
        }
        rest = next;
    }
    let secs = u64::try_from(total / 1_000_000_000).ok()?;
    let nanos = u32::try_from(total % 1_000_000_000).ok()?;
    Some(Duration::new(secs, nanos))
}

#[derive(Clone, Debug)]
struct MaxLimit {
    max: i32,
    updating: i32,
    left: usize,
}

#[derive(Clone, Debug)]
struct IntervalLimit {
    interval: Duration,
    text: String,
    /// When the next update may start, if not now.
    next: Option<Timestamp>,
}

/// What one sync may start, handed out to the strategy's picks in their order (a StatefulSet's
/// scaling pass first, then its rolling update step). Remembers whether it held anything back,
/// and why.
#[derive(Clone, Debug)]
pub struct Budget {
    max: Option<MaxLimit>,
    interval: Option<IntervalLimit>,
    now: Timestamp,
    taken: usize,
    withheld: bool,
}

impl Budget {
    /// A budget that lets everything through (no pacing).
    pub fn unlimited(now: Timestamp) -> Budget {
        Budget {
            max: None,
            interval: None,
            now,
            taken: 0,
            withheld: false,
        }
    }

    /// How many more updates may start in this sync (`None`: no limit).
    pub fn left(&self) -> Option<usize> {
        let by_max = self.max.as_ref().map(|m| m.left.saturating_sub(self.taken));
        // One start per interval: the first start of this sync is the last for a while.
        let by_interval = self.interval.as_ref().map(|i| {
            if i.next.is_some() || self.taken > 0 {
                0
            } else {
                1
            }
        });
        match (by_max, by_interval) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first of `picks` the budget allows (all of them without a limit); the rest are held
    /// back, which the budget remembers.
    pub fn take<T>(&mut self, mut picks: Vec<T>) -> Vec<T> {
        if let Some(left) = self.left()
            && picks.len() > left
        {
            picks.truncate(left);
            self.withheld = true;
        }
        self.taken += picks.len();
        picks
    }

    /// What held updates back in this sync, if anything did: `max-updating` when every slot it
    /// allows is in flight (after this sync's starts), else the interval.
    pub fn hold(&self) -> Option<Hold> {
        if !self.withheld {
            return None;
        }
        if let Some(m) = &self.max
            && self.taken >= m.left
        {
            return Some(Hold::MaxUpdating {
                updating: m
                    .updating
                    .saturating_add(i32::try_from(self.taken).unwrap_or(0)),
                max: m.max,
            });
        }
        let i = self.interval.as_ref()?;
        let next = i.next.or_else(|| {
            self.now
                .checked_add(SignedDuration::try_from(i.interval).ok()?)
                .ok()
        })?;
        // To the second, rounded up: a time computed from `now` (a start in this sync) would
        // otherwise differ in every sync, and so would the condition, each write of it
        // waking the controller for another.
        Some(Hold::MinUpdateInterval {
            next: ceil_second(next),
            interval: i.text.clone(),
        })
    }

    /// How long until the interval lets the next update start, when the interval held one back
    /// (a pod becoming available wakes the controller by itself; the end of an interval does not).
    pub fn requeue(&self) -> Option<Duration> {
        match self.hold()? {
            Hold::MinUpdateInterval { next, .. } => {
                let wait = self.now.duration_until(next);
                Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
            }
            Hold::MaxUpdating { .. } => None,
        }
    }
}

/// What holds a rollout back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// `updating` new pods are in flight, `max` allowed.
    MaxUpdating {
        /// New pods created or updated and not yet available.
        updating: i32,
        /// `max-updating`, resolved.
        max: i32,
    },
    /// The next update may start at `next`.
    MinUpdateInterval {
        /// When.
        next: Timestamp,
        /// The interval as written.
        interval: String,
    },
}

impl Hold {
    fn reason(&self) -> &'static str {
        match self {
            Hold::MaxUpdating { .. } => reason::MAX_UPDATING,
            Hold::MinUpdateInterval { .. } => reason::MIN_UPDATE_INTERVAL,
        }
    }

    /// The condition's message, which [`Hold::from_condition`] reads back (the time is in it,
    /// so a view can count down to it).
    fn message(&self) -> String {
        match self {
            Hold::MaxUpdating { updating, max } => {
                format!("paced: {updating} updating (max-updating {max})")
            }
            Hold::MinUpdateInterval { next, interval } => {
                format!("paced: next update at {next} (min-update-interval {interval})")
            }
        }
    }

    /// The hold a workload's [`CONDITION`] condition (as JSON) records, if it records one.
    pub fn from_condition(condition: &Value) -> Option<Hold> {
        if condition["type"] != CONDITION || condition["status"] != "True" {
            return None;
        }
        let message = condition["message"].as_str()?;
        // Ignored annotations are told after the hold, past a "; ".
        let message = message.split("; ").next()?;
        let inner = message.strip_prefix("paced: ")?;
        match condition["reason"].as_str()? {
            reason::MAX_UPDATING => {
                let (updating, rest) = inner.split_once(" updating (max-updating ")?;
                Some(Hold::MaxUpdating {
                    updating: updating.parse().ok()?,
                    max: rest.strip_suffix(')')?.parse().ok()?,
                })
            }
            reason::MIN_UPDATE_INTERVAL => {
                let (next, rest) = inner
                    .strip_prefix("next update at ")?
                    .split_once(" (min-update-interval ")?;
                Some(Hold::MinUpdateInterval {
                    next: next.parse().ok()?,
                    interval: rest.strip_suffix(')')?.to_string(),
                })
            }
            _ => None,
        }
    }

    /// One line for people at `now`: `paced: 2 updating (max-updating 2)`, `paced: next update
    /// in 3s (min-update-interval 30s)`.
    pub fn describe(&self, now: Timestamp) -> String {
        match self {
            Hold::MaxUpdating { .. } => self.message(),
            Hold::MinUpdateInterval { next, interval } => {
                // Rounded up: "in 0s" while it is still ahead would read as a stall.
                let nanos = u128::try_from(now.duration_until(*next).as_nanos()).unwrap_or(0);
                let secs = nanos.div_ceil(1_000_000_000);
                format!("paced: next update in {secs}s (min-update-interval {interval})")
            }
        }
    }
}

/// The [`CONDITION`] condition for a sync that judged the pacing: `True` with the hold's reason
/// while something is held back, `False` with [`reason::INVALID`] while nothing is but an
/// annotation is ignored, none otherwise. `stored` is the stored one (its transition time is
/// kept while its status stays).
pub fn condition(
    pacing: &Pacing,
    hold: Option<&Hold>,
    stored: Option<&Value>,
    now: Timestamp,
) -> Option<Value> {
    let invalid: Vec<String> = pacing.invalid.iter().map(ToString::to_string).collect();
    let (status, reason, mut parts) = match hold {
        Some(h) => ("True", h.reason(), vec![h.message()]),
        None if !invalid.is_empty() => ("False", reason::INVALID, Vec::new()),
        None => return None,
    };
    parts.extend(invalid);
    let since = stored
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    Some(json!({
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": parts.join("; "),
        "lastTransitionTime": since,
    }))
}

/// The status `conditions` after a sync that judged the pacing, when they change: `base` (the
/// conditions as the write would otherwise leave them) with [`CONDITION`] replaced, removed or
/// added. Also returns the ignored annotations to warn of: those the stored condition did not
/// already tell, so each is reported once, by whichever controller first sees it.
pub fn update_conditions<'p>(
    base: &[Value],
    pacing: &'p Pacing,
    hold: Option<&Hold>,
    now: Timestamp,
) -> (Option<Vec<Value>>, Vec<&'p Invalid>) {
    let stored = base.iter().find(|c| c["type"] == CONDITION);
    let told = stored.and_then(|c| c["message"].as_str()).unwrap_or("");
    let warn = pacing
        .invalid
        .iter()
        .filter(|i| !told.contains(&i.to_string()))
        .collect();
    let next = condition(pacing, hold, stored, now);
    if next.as_ref() == stored {
        return (None, warn);
    }
    let mut out: Vec<Value> = base
        .iter()
        .filter(|c| c["type"] != CONDITION)
        .cloned()
        .collect();
    out.extend(next);
    (Some(out), warn)
}

/// Adds the [`CONDITION`] condition a sync that judged the pacing found (`hold`) to the status
/// `fields` a write sets, when it changes: onto the `conditions` already there (another
/// condition's change) or else the `stored` ones. Warns (through `warn`) of each ignored
/// annotation once. Says whether the conditions changed.
pub fn add_to(
    fields: &mut Value,
    stored: &[Value],
    pacing: &Pacing,
    hold: Option<&Hold>,
    now: Timestamp,
    mut warn: impl FnMut(String),
) -> bool {
    let base = match fields.get("conditions") {
        Some(Value::Array(list)) => list.clone(),
        Some(_) => Vec::new(),
        None => stored.to_vec(),
    };
    let (conditions, warnings) = update_conditions(&base, pacing, hold, now);
    for w in warnings {
        warn(w.to_string());
    }
    let Some(conditions) = conditions else {
        return false;
    };
    crate::progress::set_conditions(fields, &conditions);
    true
}

/// `t` rounded up to a whole second.
fn ceil_second(t: Timestamp) -> Timestamp {
    if t.subsec_nanosecond() == 0 {
        return t;
    }
    Timestamp::from_second(t.as_second().saturating_add(1)).unwrap_or(t)
}

/// A metadata time the API server recorded to the second (truncating), as the end of that
/// second: the moment it records lies before it.
fn end_of_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second().saturating_add(1)).unwrap_or(t)
}

/// When an update that made `pod` (a pod of the new revision) started: its creation, or the
/// in-place update that moved it to the new revision, whichever is later.
pub fn update_started(pod: &Pod) -> Option<Timestamp> {
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| end_of_second(t.0));
    let in_place = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(IN_PLACE_UPDATE_TIME))
        .and_then(|t| t.parse::<Timestamp>().ok());
    created.max(in_place)
}

/// When `pod`, being deleted, was deleted: its `deletionTimestamp` is that moment plus the
/// grace period (upstream's and rollwright's API servers both set it so).
pub fn deleted_at(pod: &Pod) -> Option<Timestamp> {
    let at = pod.metadata.deletion_timestamp.as_ref()?.0;
    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
    Some(end_of_second(
        at.checked_sub(SignedDuration::from_secs(grace))
            .unwrap_or(at),
    ))
}

/// The annotation an in-place patch adds when an interval is set: the time of the update.
pub fn in_place_stamp(now: Timestamp) -> Value {
    json!({ IN_PLACE_UPDATE_TIME: now.to_string() })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn pacing(max: Option<&str>, interval: Option<&str>) -> Pacing {
        let mut a = BTreeMap::new();
        if let Some(m) = max {
            a.insert(MAX_UPDATING.to_string(), m.to_string());
        }
        if let Some(i) = interval {
            a.insert(MIN_UPDATE_INTERVAL.to_string(), i.to_string());
        }
        Pacing::read(Some(&a))
    }

    #[test]
    fn durations_read_as_go_reads_them() {
        let cases = [
            ("30s", Some(Duration::from_secs(30))),
            ("2m", Some(Duration::from_secs(120))),
            ("1h30m", Some(Duration::from_secs(5400))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("300ms", Some(Duration::from_millis(300))),
            ("1m0.25s", Some(Duration::from_millis(60_250))),
            (".5s", Some(Duration::from_millis(500))),
            ("10us", Some(Duration::from_micros(10))),
            ("0", Some(Duration::ZERO)),
            ("+2s", Some(Duration::from_secs(2))),
            ("", None),
            ("2", None),
            ("-1s", None),
            ("fast", None),
            ("2 s", None),
            ("1d", None),
            (".s", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), want, "{text:?}");
        }
    }

    #[test]
    fn max_updating_is_a_positive_count_or_a_percentage_rounded_like_max_unavailable() {
        // (value, total, rounding, want)
        let cases = [
            ("2", 10, Rounding::Up, Some(2)),
            ("25%", 10, Rounding::Up, Some(3)),
            ("25%", 10, Rounding::Down, Some(2)),
            ("1%", 10, Rounding::Down, Some(1)),
            ("100%", 4, Rounding::Up, Some(4)),
            (" 3 ", 4, Rounding::Up, Some(3)),
            ("50", 4, Rounding::Up, Some(50)),
        ];
        for (value, total, rounding, want) in cases {
            let p = pacing(Some(value), None);
            assert!(p.invalid.is_empty(), "{value}: {:?}", p.invalid);
            assert_eq!(p.max_updating(total, rounding), want, "{value} of {total}");
        }
        for bad in [
            "0",
            "0%",
            "-1",
            "101%",
            "x",
            "1.5",
            "",
            "5%%",
            "99999999999",
        ] {
            let p = pacing(Some(bad), None);
            assert!(!p.is_set(), "{bad}");
            assert_eq!(p.max_updating(10, Rounding::Up), None);
            let message = p.invalid[0].to_string();
            assert!(
                message.starts_with(&format!("ignoring annotation {MAX_UPDATING}={bad:?}")),
                "{message}"
            );
            assert!(message.contains("e.g. \"25%\""), "{message}");
        }
        let p = pacing(None, Some("soon"));
        assert!(!p.is_set());
        assert!(p.invalid[0].to_string().contains("e.g. \"30s\""));
        // A zero interval is a valid one that asks for nothing.
        assert_eq!(pacing(None, Some("0s")), Pacing::default());
        assert_eq!(Pacing::read(None), Pacing::default());
    }

    /// (max-updating, interval, in flight, seconds since the last start, picks) -> (started,
    /// hold reason, requeue seconds)
    #[test]
    fn the_budget_lets_through_what_the_strictest_limit_allows() {
        type Case = (
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
            i32,
            Option<i64>,
            usize,
            (usize, Option<&'static str>, Option<u64>),
        );
        let cases: Vec<Case> = vec![
            ("no pacing", None, None, 5, Some(0), 4, (4, None, None)),
            (
                "room for two",
                Some("3"),
                None,
                1,
                None,
                4,
                (2, Some(reason::MAX_UPDATING), None),
            ),
            ("room for all", Some("3"), None, 1, None, 2, (2, None, None)),
            (
                "full",
                Some("2"),
                None,
                2,
                None,
                1,
                (0, Some(reason::MAX_UPDATING), None),
            ),
            (
                "over (pods created for new nodes)",
                Some("2"),
                None,
                3,
                None,
                1,
                (0, Some(reason::MAX_UPDATING), None),
            ),
            (
                "nothing wanted is no hold",
                Some("1"),
                Some("10s"),
                1,
                Some(0),
                0,
                (0, None, None),
            ),
            (
                "one per interval",
                None,
                Some("10s"),
                0,
                None,
                3,
                (1, Some(reason::MIN_UPDATE_INTERVAL), Some(10)),
            ),
            (
                "interval passed",
                None,
                Some("10s"),
                0,
                Some(10),
                1,
                (1, None, None),
            ),
            (
                "interval running",
                None,
                Some("10s"),
                0,
                Some(4),
                1,
                (0, Some(reason::MIN_UPDATE_INTERVAL), Some(6)),
            ),
            (
                "both: max binds",
                Some("1"),
                Some("10s"),
                1,
                Some(30),
                2,
                (0, Some(reason::MAX_UPDATING), None),
            ),
            (
                "both: the interval binds",
                Some("3"),
                Some("10s"),
                0,
                Some(4),
                2,
                (0, Some(reason::MIN_UPDATE_INTERVAL), Some(6)),
            ),
            (
                "both: one start fills max",
                Some("1"),
                Some("10s"),
                0,
                Some(30),
                2,
                (1, Some(reason::MAX_UPDATING), None),
            ),
            (
                "both: one start, then the interval",
                Some("3"),
                Some("10s"),
                0,
                None,
                2,
                (1, Some(reason::MIN_UPDATE_INTERVAL), Some(10)),
            ),
        ];
        let now = at(1000);
        for (name, max, interval, updating, ago, picks, (started, hold, requeue)) in cases {
            let p = pacing(max, interval);
            let last = ago.map(|s| at(1000 - s));
            let mut b = p.budget(10, Rounding::Up, updating, last, now);
            let got = b.take((0..picks).collect::<Vec<_>>());
            assert_eq!(got.len(), started, "{name}");
            assert_eq!(got, (0..started).collect::<Vec<_>>(), "{name}: in order");
            assert_eq!(b.hold().as_ref().map(Hold::reason), hold, "{name}");
            assert_eq!(b.requeue().map(|d| d.as_secs()), requeue, "{name}");
        }
    }

    #[test]
    fn a_budget_is_shared_by_the_picks_of_one_sync() {
        let p = pacing(Some("3"), None);
        let mut b = p.budget(10, Rounding::Up, 0, None, at(0));
        assert_eq!(b.take(vec!['a', 'b']), ['a', 'b']);
        assert_eq!(b.left(), Some(1));
        assert_eq!(b.take(vec!['c', 'd']), ['c']);
        assert_eq!(
            b.hold(),
            Some(Hold::MaxUpdating {
                updating: 3,
                max: 3
            })
        );
        let p = pacing(None, Some("5s"));
        let mut b = p.budget(10, Rounding::Up, 0, None, at(0));
        assert_eq!(b.take(vec!['a']), ['a']);
        assert!(b.hold().is_none(), "nothing held back yet");
        assert_eq!(b.take(vec!['b']), Vec::<char>::new());
        assert_eq!(
            b.hold(),
            Some(Hold::MinUpdateInterval {
                next: at(5),
                interval: "5s".into()
            })
        );
        // A start in this sync at a fraction of a second: the next one at a whole second.
        let p = pacing(None, Some("1.5s"));
        let mut b = p.budget(10, Rounding::Up, 0, None, at(10));
        assert_eq!(b.take(vec!['a', 'b']), ['a']);
        assert_eq!(
            b.hold(),
            Some(Hold::MinUpdateInterval {
                next: at(12),
                interval: "1.5s".into()
            })
        );
        assert_eq!(b.requeue(), Some(Duration::from_secs(2)));
        let mut free = Budget::unlimited(at(0));
        assert_eq!(free.take(vec![1, 2, 3]), [1, 2, 3]);
        assert_eq!((free.left(), free.hold()), (None, None));
    }

    #[test]
    fn the_condition_tells_the_hold_and_is_read_back() {
        let now: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let next: Timestamp = "2025-01-01T00:00:02.5Z".parse().unwrap();
        let holds = [
            Hold::MaxUpdating {
                updating: 2,
                max: 2,
            },
            Hold::MinUpdateInterval {
                next,
                interval: "2s".into(),
            },
        ];
        let p = pacing(Some("2"), Some("soon"));
        for hold in holds {
            let c = condition(&p, Some(&hold), None, now).unwrap();
            assert_eq!(c["status"], "True");
            assert_eq!(c["reason"], hold.reason());
            assert!(
                c["message"]
                    .as_str()
                    .unwrap()
                    .contains("ignoring annotation")
            );
            assert_eq!(Hold::from_condition(&c), Some(hold));
        }
        let described = Hold::MinUpdateInterval {
            next,
            interval: "2s".into(),
        }
        .describe(now);
        assert_eq!(
            described,
            "paced: next update in 3s (min-update-interval 2s)"
        );
        assert_eq!(
            Hold::MaxUpdating {
                updating: 1,
                max: 2
            }
            .describe(now),
            "paced: 1 updating (max-updating 2)"
        );
        // Nothing held, an annotation ignored: False; nothing at all: no condition.
        let c = condition(&p, None, None, now).unwrap();
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some(reason::INVALID))
        );
        assert_eq!(Hold::from_condition(&c), None);
        assert_eq!(condition(&pacing(Some("2"), None), None, None, now), None);
    }

    #[test]
    fn conditions_change_only_when_the_pacing_does_and_warn_once() {
        let t0: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let other = json!({"type": "Progressing", "status": "True"});
        let hold = Hold::MaxUpdating {
            updating: 1,
            max: 1,
        };
        let p = pacing(Some("1"), Some("later"));
        let (first, warn) = update_conditions(std::slice::from_ref(&other), &p, Some(&hold), t0);
        let first = first.unwrap();
        assert_eq!(first[0], other);
        assert_eq!(first[1]["reason"], reason::MAX_UPDATING);
        assert_eq!(warn.len(), 1, "the ignored interval is warned of");
        // The same again later: nothing to write, nothing to warn of.
        let (again, warn) = update_conditions(&first, &p, Some(&hold), at(2_000_000_000));
        assert_eq!((again, warn.len()), (None, 0));
        // Another hold of the same status keeps the transition time.
        let more = Hold::MaxUpdating {
            updating: 0,
            max: 1,
        };
        let (next, _) = update_conditions(&first, &p, Some(&more), at(2_000_000_000));
        let next = next.unwrap();
        assert_eq!(
            next[1]["lastTransitionTime"],
            first[1]["lastTransitionTime"]
        );
        // Nothing held and nothing ignored: the condition goes.
        let valid = pacing(Some("1"), None);
        let (gone, _) = update_conditions(&next, &valid, None, t0);
        assert_eq!(gone.unwrap(), vec![other.clone()]);
        // Without the annotations a status without the condition stays as it is.
        let unpaced = Pacing::default();
        let (none, warn) = update_conditions(&[other], &unpaced, None, t0);
        assert_eq!((none, warn.len()), (None, 0));
    }

    #[test]
    fn update_times_are_read_from_the_pods() {
        let pod = |created: &str, annotation: Option<&str>, deleted: Option<(&str, i64)>| Pod {
            metadata: ObjectMeta {
                creation_timestamp: Some(Time(created.parse().unwrap())),
                annotations: annotation
                    .map(|a| [(IN_PLACE_UPDATE_TIME.to_string(), a.to_string())].into()),
                deletion_timestamp: deleted.map(|(t, _)| Time(t.parse().unwrap())),
                deletion_grace_period_seconds: deleted.map(|(_, g)| g),
                ..Default::default()
            },
            ..Default::default()
        };
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        // Recorded to the second: counted from the end of it.
        assert_eq!(
            update_started(&pod("2025-01-01T00:00:10Z", None, None)),
            Some(t("2025-01-01T00:00:11Z"))
        );
        // Updated in place since: that time, as written.
        assert_eq!(
            update_started(&pod(
                "2025-01-01T00:00:10Z",
                Some("2025-01-01T00:05:00.25Z"),
                None
            )),
            Some(t("2025-01-01T00:05:00.25Z"))
        );
        // Deleted at 00:00:20 with 30s of grace.
        assert_eq!(
            deleted_at(&pod(
                "2025-01-01T00:00:10Z",
                None,
                Some(("2025-01-01T00:00:50Z", 30))
            )),
            Some(t("2025-01-01T00:00:21Z"))
        );
        assert_eq!(deleted_at(&pod("2025-01-01T00:00:10Z", None, None)), None);
        let stamp = in_place_stamp(t("2025-01-01T00:05:00.25Z"));
        assert_eq!(
            stamp[IN_PLACE_UPDATE_TIME]
                .as_str()
                .unwrap()
                .parse::<Timestamp>()
                .unwrap(),
            t("2025-01-01T00:05:00.25Z")
        );
    }
}
