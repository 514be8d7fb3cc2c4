//! Keys that expire: upstream's API server writes each Event with an etcd lease of `--event-ttl`,
//! so etcd deletes it that long after its last write (each write attaches a newer lease). Like
//! upstream's `leaseManager`, one lease is shared by all the writes of a short period (5% of the
//! time to live, at most a minute) and granted for that much longer than asked, so a rollout's
//! thousands of Events cost a handful of lease grants, and none lives shorter than its TTL.

use std::{collections::HashMap, time::Duration};

use tokio::{sync::Mutex, time::Instant};

use super::members::Members;
use crate::Result;

/// The longest a lease is reused for (upstream's `LeaseReuseDurationSeconds`).
const MAX_REUSE: Duration = Duration::from_secs(60);

/// Which keys expire, and the leases in use for them.
pub(super) struct Leases {
    /// Key prefix and time to live, e.g. `/registry/core/events/` for an hour.
    expiring: Vec<(String, Duration)>,
    /// Per time to live: the lease in use and when it was granted.
    current: Mutex<HashMap<Duration, (i64, Instant)>>,
}

impl Leases {
    pub(super) fn new(expiring: Vec<(String, Duration)>) -> Self {
        Self {
            expiring,
            current: Mutex::new(HashMap::new()),
        }
    }

    /// The lease to write `key` with, granting one when the one in use is too old; `None` for a
    /// key that does not expire.
    pub(super) async fn for_key(
        &self,
        key: &str,
        members: &Members,
        timeout: Duration,
    ) -> Result<Option<i64>> {
        let Some(ttl) = self
            .expiring
            .iter()
            .find(|(prefix, _)| key.starts_with(prefix.as_str()))
            .map(|(_, ttl)| *ttl)
        else {
            return Ok(None);
        };
        let reuse = (ttl / 20).min(MAX_REUSE);
        let mut current = self.current.lock().await;
        if let Some((id, granted)) = current.get(&ttl)
            && granted.elapsed() < reuse
        {
            return Ok(Some(*id));
        }
        // etcd counts a lease's time to live in whole seconds.
        let seconds = (ttl + reuse).as_secs_f64().ceil().max(1.0) as i64;
        let granted = members
            .call_lease("lease grant", timeout, |mut lease| async move {
                lease.grant(seconds, None).await
            })
            .await?;
        current.insert(ttl, (granted.id(), Instant::now()));
        Ok(Some(granted.id()))
    }
}
