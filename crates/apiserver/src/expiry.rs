//! Events expire: upstream stores each Event with an etcd lease of `--event-ttl` (one hour by
//! default), renewed by every write to it, so the thousands of Events a rollout records do not stay
//! forever. The store records when each key was written; this sweep deletes Events not written for
//! the TTL, with compare-and-swap on their revision (an Event written meanwhile stays). The
//! deletions are ordinary ones: the watch cache drops the objects and watchers see DELETED. A
//! store that expires keys itself (etcd, with leases, as upstream) is given [`expiring`] and finds
//! nothing to sweep.
//!
//! Under a flood a TTL is not a bound: 150,000 pods starting at once record some 460,000 Events
//! within minutes, and each is held in the watch cache. [`keep_within_budget`] holds their count
//! to the server's budget by deleting the least recently written first, as an early expiry.

use crate::{registry::Registry, state::ApiServer};
use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};
use store::{Revision, Store, StoreError};

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

/// How often the Event budget is checked: a flood overshoots it by at most this long's Events.
const BUDGET_EVERY: Duration = Duration::from_secs(1);

/// Keeps the server's Events at most `budget` while it runs: every [`BUDGET_EVERY`], when the
/// cache holds more, the least recently written are deleted (with compare-and-swap on their
/// revision, as the TTL sweep deletes), counted in `rollwright_events_evicted_total` and logged.
/// Holds the server weakly, so that it ends with the server.
pub(crate) async fn keep_within_budget(server: ApiServer, budget: usize) {
    let server = Arc::downgrade(&server.0);
    let mut tick = tokio::time::interval(BUDGET_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(state) = server.upgrade() else {
            return;
        };
        match trim_events(&ApiServer(state), budget).await {
            Ok(0) => {}
            Ok(evicted) => tracing::info!(
                evicted,
                budget,
                "events: deleted the least recently written before their TTL to keep within --event-budget"
            ),
            Err(StoreError::Closed) => return,
            Err(e) => tracing::warn!(error = %e, "event budget: deletion failed; retrying later"),
        }
    }
}

/// Deletes the Events beyond `budget`, least recently written first; returns how many. Waits
/// until the cache has seen the deletions, so that the next check does not count them again.
pub(crate) async fn trim_events(server: &ApiServer, budget: usize) -> Result<u64, StoreError> {
    let Some(def) = server.registry().find("", "v1", "events") else {
        return Ok(0);
    };
    if server.cache.len(&def) <= budget {
        return Ok(0);
    }
    let (mut events, _) = server.cache.list(&def, None);
    let excess = events.len().saturating_sub(budget);
    // The `excess` least recently written first (1 <= excess <= len: len > budget).
    events.select_nth_unstable_by_key(excess - 1, |e| e.rev);
    let mut evicted = 0;
    let mut last: Revision = 0;
    for batch in events[..excess].chunks(BATCH) {
        let deletions = batch.iter().map(|e| {
            let key = def.key(Some(&e.namespace), &e.name);
            async move { server.store.delete(&key, Some(e.rev)).await }
        });
        for result in futures::future::join_all(deletions).await {
            match result {
                Ok(kv) => {
                    evicted += 1;
                    last = last.max(kv.mod_revision);
                }
                // Written or deleted by someone else since: no longer the least recent, or gone.
                Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    server.metrics.events_evicted(evicted);
    server.cache.wait_for(last, Duration::from_secs(10)).await;
    Ok(evicted)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;
    use crate::ServerOptions;
    use bytes::Bytes;
    use serde_json::json;
    use store::memory::MemoryStore;

    fn event(name: &str, count: u32) -> Bytes {
        Bytes::from(
            json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": "default"},
                "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
                "reason": "Pulled", "message": "pulled", "type": "Normal", "count": count})
            .to_string(),
        )
    }

    /// The budget keeps the Events written last, not those created last: an Event written again
    /// (its count raised, as a recorder aggregates a repeat) is as fresh as a new one.
    #[tokio::test]
    async fn the_budget_keeps_the_most_recently_written_events() {
        let server = ApiServer::start(
            Arc::new(MemoryStore::new()) as Arc<dyn Store>,
            ServerOptions {
                event_ttl: None,
                event_budget: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let def = server.registry().find("", "v1", "events").unwrap();
        let key = |name: &str| def.key(Some("default"), name);
        for i in 1..=6 {
            let name = format!("web.{i}");
            server
                .store
                .create(&key(&name), event(&name, 1))
                .await
                .unwrap();
        }
        let rewritten = server
            .store
            .update(&key("web.1"), event("web.1", 2), None)
            .await
            .unwrap();
        assert!(
            server
                .cache
                .wait_for(rewritten.mod_revision, Duration::from_secs(10))
                .await
        );
        assert_eq!(trim_events(&server, 3).await.unwrap(), 3);
        let (kept, _) = server.cache.list(&def, Some("default"));
        let kept: Vec<&str> = kept.iter().map(|e| &*e.name).collect();
        assert_eq!(kept, ["web.1", "web.5", "web.6"]);
        assert_eq!(trim_events(&server, 3).await.unwrap(), 0);
    }
}
