//! The pure part of an election: given the Lease as read and when its record last changed, what a
//! candidate does.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use tokio::time::Instant;

/// What a candidate does after reading the Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease yet: create it, holding it.
    Create,
    /// It holds the Lease: renew it.
    Renew,
    /// The Lease is free or expired: take it, counting one more transition.
    Take {
        /// The new `leaseTransitions`.
        transitions: i32,
    },
    /// Another holder's Lease is still valid.
    Wait,
}

/// Decides for candidate `me`. `observed_at` is when (on the candidate's clock) the record was
/// last seen to change: another holder's Lease is valid until that plus the record's
/// `leaseDurationSeconds` (or `default_duration` when it has none).
pub fn decide(
    record: Option<&LeaseSpec>,
    me: &str,
    observed_at: Instant,
    now: Instant,
    default_duration: Duration,
) -> Decision {
    let Some(record) = record else {
        return Decision::Create;
    };
    if record.holder_identity.as_deref().unwrap_or("") == me {
        return Decision::Renew;
    }
    match expiry(record, me, observed_at, default_duration) {
        Some(expiry) if expiry > now => Decision::Wait,
        _ => Decision::Take {
            transitions: record.lease_transitions.unwrap_or(0) + 1,
        },
    }
}

/// When another holder's `record`, first seen at `observed_at`, stops keeping candidate `me` out:
/// none when it is free or `me`'s own.
pub(crate) fn expiry(
    record: &LeaseSpec,
    me: &str,
    observed_at: Instant,
    default_duration: Duration,
) -> Option<Instant> {
    let holder = record.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() || holder == me {
        return None;
    }
    let duration = record
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(default_duration, Duration::from_secs);
    Some(observed_at + duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: Option<&str>, duration: Option<i32>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: duration,
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    #[test]
    fn candidates_wait_out_a_live_holder_and_take_a_free_or_expired_lease() {
        let seen = Instant::now();
        let secs = Duration::from_secs;
        let cases: Vec<(&str, Option<LeaseSpec>, Duration, Decision)> = vec![
            ("no lease", None, secs(0), Decision::Create),
            (
                "mine",
                Some(record(Some("me"), Some(15), 2)),
                secs(100),
                Decision::Renew,
            ),
            (
                "another's, just seen",
                Some(record(Some("other"), Some(15), 2)),
                secs(0),
                Decision::Wait,
            ),
            (
                "another's, unchanged for 14s",
                Some(record(Some("other"), Some(15), 2)),
                secs(14),
                Decision::Wait,
            ),
            (
                "another's, unchanged for the lease duration",
                Some(record(Some("other"), Some(15), 2)),
                secs(15),
                Decision::Take { transitions: 3 },
            ),
            (
                "another's, with its own shorter duration",
                Some(record(Some("other"), Some(1), 0)),
                secs(2),
                Decision::Take { transitions: 1 },
            ),
            (
                "another's, no duration recorded: ours applies",
                Some(record(Some("other"), None, 0)),
                secs(10),
                Decision::Wait,
            ),
            (
                "released (empty holder)",
                Some(record(None, Some(1), 4)),
                secs(0),
                Decision::Take { transitions: 5 },
            ),
            (
                "released (holder \"\")",
                Some(record(Some(""), Some(15), 4)),
                secs(0),
                Decision::Take { transitions: 5 },
            ),
        ];
        for (name, record, elapsed, want) in cases {
            let got = decide(record.as_ref(), "me", seen, seen + elapsed, secs(15));
            assert_eq!(got, want, "{name}");
        }
    }
}
