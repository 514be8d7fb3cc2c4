//! Events expire: upstream stores each Event with an etcd lease of `--event-ttl` (one hour by
//! default), renewed by every write to it, so the thousands of Events a rollout records do not stay
//! forever. The store records when each key was written; this sweep deletes Events not written for
//! the TTL, with compare-and-swap on their revision (an Event written meanwhile stays). The
//! deletions are ordinary ones: the watch cache drops the objects and watchers see DELETED. A
//! store that expires keys itself (etcd, with leases, as upstream) is given [`expiring`] and finds
//! nothing to sweep.

use crate::registry::Registry;
use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};
use store::{Store, StoreError};

/// Expired keys deleted per pass; their deletions share the store's group commits.
const BATCH: usize = 512;

/// The keys that expire and their time to live: Events, `ttl` after their last write.
pub fn expiring(ttl: Duration) -> Vec<(String, Duration)> {
    events_prefix(&Registry::new())
        .map(|prefix| (prefix, ttl))
        .into_iter()
        .collect()
}

fn events_prefix(registry: &Registry) -> Option<String> {
    registry.find("", "v1", "events").map(|k| k.key_prefix())
}

/// Deletes expired Events every so often until the store closes.
pub(crate) async fn sweep_events(store: Arc<dyn Store>, registry: Arc<Registry>, ttl: Duration) {
    let Some(prefix) = events_prefix(&registry) else {
        return;
    };
    // Expiry is as punctual as a fraction of the TTL (etcd checks its leases every 500 ms).
    let every = (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(10));
    loop {
        tokio::time::sleep(every).await;
        match sweep(store.as_ref(), &prefix, ttl).await {
            Ok(()) => {}
            Err(StoreError::Closed) => return,
            Err(e) => tracing::warn!(error = %e, "event expiry: sweep failed; retrying later"),
        }
    }
}

/// One pass: deletes every key under `prefix` last written more than `ttl` ago.
async fn sweep(store: &dyn Store, prefix: &str, ttl: Duration) -> Result<(), StoreError> {
    loop {
        let before = clock::system_now()
            .checked_sub(ttl)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let expired = store.written_before(prefix, before, BATCH).await?;
        let done = expired.len() < BATCH;
        let deletions = expired
            .iter()
            .map(|(key, rev)| store.delete(key, Some(*rev)));
        for result in futures::future::join_all(deletions).await {
            match result {
                // Written or deleted by someone else since: not expired any more, or gone.
                Ok(_) | Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if done {
            return Ok(());
        }
    }
}
