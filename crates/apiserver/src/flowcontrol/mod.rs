//! API Priority and Fairness (upstream's `WithPriorityAndFairness` filter and its controller,
//! `util/flowcontrol`): every request is classified by the FlowSchemas into a priority level;
//! exempt levels serve at once, limited ones share the server's seats (the read and mutating
//! in-flight limits added up, as upstream's `serverConcurrencyLimit`) in proportion to their
//! `nominalConcurrencyShares`, and within a level flows are queued fairly
//! ([`queueset`]). So one user's requests can fill only its own level's seats and its own
//! queues: `system:masters` is exempt, the controllers run at `workload-high`, the nodes at
//! `system` and `node-high`, and other users at `global-default`, each flow fairly against the
//! others of its level.
//!
//! The configuration is read from the FlowSchema and PriorityLevelConfiguration objects in the
//! watch cache and rebuilt when one changes (compared by the cache's change counts on each
//! request, as the RBAC snapshot is); a level keeps its queues and the requests waiting in them
//! across a rebuild.
//!
//! Not done as upstream: levels do not lend or borrow seats (`lendablePercent`,
//! `borrowingLimitPercent`), a mutating request takes one seat with no extra for the watches it
//! wakes, and a PriorityLevelConfiguration's `status` is not written (a FlowSchema's `Dangling`
//! condition is, [`status`]).

mod bootstrap;
pub(crate) mod config;
mod filter;
mod objects;
pub(crate) mod queueset;
mod retry_after;
mod status;
pub(crate) mod width;

pub(crate) use filter::run;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, OnceLock, RwLock},
    time::Duration,
};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    cache::{Cache, ChangeCount},
    metrics::Metrics,
};
use config::Config;
use queueset::QueueSet;

/// The group of FlowSchemas and PriorityLevelConfigurations.
pub(crate) const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The header naming the FlowSchema a request matched, by UID (upstream sets UIDs, not names,
/// so that a rejected client does not learn how an administrator named its low priority).
pub(crate) const FLOW_SCHEMA_UID: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// The header naming the priority level a request was served (or rejected) at, by UID.
pub(crate) const PRIORITY_LEVEL_UID: &str = "X-Kubernetes-PF-PriorityLevel-UID";

/// Upstream's answer to a rejected request (`http.Error`, so plain text, not a Status).
const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.\n";

/// The server's flow control: its configuration as last read and its levels' queues.
pub(crate) struct FlowControl {
    /// Seats shared among the limited levels.
    total: u32,
    /// How long a request waits in a queue before it is rejected (upstream: a quarter of
    /// `--request-timeout`).
    wait_limit: Duration,
    counts: OnceLock<Vec<ChangeCount>>,
    built: RwLock<Option<Arc<Snapshot>>>,
    rebuild: Mutex<()>,
    retry_after: retry_after::RetryAfter,
}

/// One configuration and the levels it serves.
struct Snapshot {
    /// The change counts of the two kinds it was built at.
    at: Vec<u64>,
    config: Config,
    /// The limited levels' queues, by name.
    sets: BTreeMap<String, Arc<QueueSet>>,
}

impl FlowControl {
    /// Flow control over `total` seats; a request waits at most `wait_limit` in a queue.
    pub(crate) fn new(total: u32, wait_limit: Duration) -> Self {
        Self {
            total: total.max(1),
            wait_limit,
            counts: OnceLock::new(),
            built: RwLock::new(None),
            rebuild: Mutex::new(()),
            retry_after: Default::default(),
        }
    }

    fn now(&self, cache: &Cache) -> Vec<u64> {
        self.counts
            .get_or_init(|| {
                ["flowschemas", "prioritylevelconfigurations"]
                    .iter()
                    .filter_map(|plural| cache.registry().owner(GROUP, plural))
                    .map(|def| cache.changes(&def))
                    .collect()
            })
            .iter()
            .map(ChangeCount::get)
            .collect()
    }

    /// The configuration now, rebuilt first if a FlowSchema or PriorityLevelConfiguration
    /// changed since it was built; with a rebuild, the FlowSchemas' `Dangling` conditions to
    /// write.
    fn snapshot(&self, cache: &Cache, metrics: &Metrics) -> (Arc<Snapshot>, Vec<(String, Value)>) {
        let at = self.now(cache);
        let current = || {
            self.built
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .filter(|s| s.at == at)
        };
        if let Some(s) = current() {
            return (s, Vec::new());
        }
        let _rebuilding = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = current() {
            return (s, Vec::new());
        }
        let objects = |plural: &str| -> Vec<Value> {
            cache
                .registry()
                .owner(GROUP, plural)
                .map(|def| cache.list(&def, None).0.iter().map(|e| e.value()).collect())
                .unwrap_or_default()
        };
        let (flow_schemas, levels) = (
            objects("flowschemas"),
            objects("prioritylevelconfigurations"),
        );
        let config = Config::new(&flow_schemas, &levels);
        let updates = status::dangling_updates(&flow_schemas, &levels);
        let previous = self.built.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut sets = BTreeMap::new();
        for (name, level) in config.level_configs(self.total, self.wait_limit) {
            metrics.apf_nominal_limit(&name, level.concurrency);
            let set = match previous.as_ref().and_then(|p| p.sets.get(&name)) {
                Some(set) => {
                    set.reconfigure(level);
                    set.clone()
                }
                None => QueueSet::new(level),
            };
            sets.insert(name, set);
        }
        let snapshot = Arc::new(Snapshot { at, config, sets });
        *self.built.write().unwrap_or_else(|e| e.into_inner()) = Some(snapshot.clone());
        (snapshot, updates)
    }
}

/// The flow a request belongs to, hashed as upstream hashes it (`hashFlowID`).
fn flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(flow_schema.as_bytes());
    h.update([0u8]);
    h.update(distinguisher.as_bytes());
    let sum = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&sum[..8]);
    u64::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_hash_as_upstream() {
        // Distinct flows of a schema hash apart; the hash is sha256's first 8 bytes.
        assert_ne!(
            flow_hash("global-default", "alice"),
            flow_hash("global-default", "bob")
        );
        assert_ne!(flow_hash("a", "bc"), flow_hash("ab", "c"));
    }
}
