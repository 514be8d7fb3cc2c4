//! Periodic compaction of etcd's history, as upstream's API server does it
//! (`k8s.io/apiserver/pkg/storage/etcd3/compact.go`, `--etcd-compaction-interval`, five minutes by
//! default).
//!
//! etcd keeps every version of every key until it is told to compact, and nothing else tells it:
//! without this, each lease renewal and status write stays in etcd for good, its database grows
//! until it reaches its quota (2 GiB by default) and etcd then refuses every write. With 20,000
//! simulated nodes, etcd's data directory grew to 2.4 GB in six minutes.
//!
//! Several API servers may share one etcd and each runs a compactor; one compaction per interval
//! is enough, so they agree through one key, upstream's protocol: the key's version is a logical
//! clock and its value the revision to compact to next. Each round, a compactor that knows the
//! current clock advances it by a compare-and-swap (writing etcd's current revision as the next
//! target) and compacts to the target the previous round wrote; one whose swap fails learns the
//! clock and tries again next interval. So history is kept for one to two intervals, a little
//! longer while a compactor takes over from one that stopped; the first round of a cluster only
//! sets the clock.

use std::{sync::Arc, time::Duration};

use etcd_client::{CompactionResponse, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use super::members::{Failure, Members, Retry};
use crate::{Result, Revision};

/// The key the compactors agree through. Upstream's is `compact_rev_key` at the root of etcd's
/// key space; this one is under `/registry/`, the prefix the API server's cache follows, because
/// the cache knows it has caught up with etcd only from the events it sees: a revision spent on a
/// key it does not follow would hold every consistent read until the next write (upstream's
/// cache asks etcd for progress notifications instead). The cache skips the key: it names no
/// resource.
pub const KEY: &str = "/registry/compact_rev_key";

/// What a compactor knows between rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// The logical clock: the key's version when this compactor last saw it.
    pub time: i64,
    /// The revision to compact to next: etcd's revision when the clock last advanced.
    pub revision: Revision,
}

/// What one round did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// This compactor advanced the clock but had no target yet (its first round, or the first
    /// after another compactor advanced the clock).
    Started,
    /// This compactor advanced the clock and compacted etcd's history up to this revision.
    Compacted(Revision),
    /// Another compactor advanced the clock first: this one learned it and compacted nothing.
    Lost,
}

/// Runs a round every `interval` until the task is aborted (the store's drop does it).
pub(super) async fn run(members: Arc<Members>, interval: Duration, timeout: Duration) {
    let mut known = Known::default();
    loop {
        tokio::time::sleep(interval).await;
        let (next, outcome) = round(&members, known, timeout).await;
        known = next;
        match outcome {
            Ok(Round::Compacted(revision)) => {
                tracing::debug!(revision, "etcd: compacted history");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "etcd compaction failed; trying again next interval");
            }
        }
    }
}

/// One round of the protocol from what this compactor knows; returns what it knows now (also
/// after a failed compaction, as upstream: the clock moved, and the next round compacts further)
/// and what the round did.
pub(super) async fn round(
    members: &Members,
    known: Known,
    timeout: Duration,
) -> (Known, Result<Round>) {
    let txn = Txn::new()
        .when([Compare::version(KEY, CompareOp::Equal, known.time)])
        .and_then([TxnOp::put(KEY, known.revision.to_string(), None)])
        .or_else([TxnOp::get(KEY, None)]);
    let response = match members
        .call("compaction", Retry::Unsent, timeout, |mut kv| {
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })
        .await
    {
        Ok(response) => response,
        Err(e) => return (known, Err(e.into())),
    };
    let current = match super::header_revision(response.header()) {
        Ok(revision) => revision,
        Err(e) => return (known, Err(e)),
    };
    if !response.succeeded() {
        let time = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.version()),
            _ => None,
        });
        return match time {
            Some(time) => (
                Known {
                    time,
                    revision: current,
                },
                Ok(Round::Lost),
            ),
            // Deleted between the compare and the read: start the clock again.
            None => (Known::default(), Ok(Round::Lost)),
        };
    }
    let next = Known {
        time: known.time + 1,
        revision: current,
    };
    if known.revision == 0 {
        return (next, Ok(Round::Started));
    }
    let compacted = compact(members, known.revision, timeout).await;
    (next, compacted.map(|_| Round::Compacted(known.revision)))
}

/// Compacts etcd's history up to `revision`: the periodic rounds' call and [`crate::Store::compact`]'s.
/// `None` when etcd was compacted at or past it already (by another API server's compactor),
/// which is as good.
pub(super) async fn compact(
    members: &Members,
    revision: Revision,
    timeout: Duration,
) -> Result<Option<CompactionResponse>> {
    let target = super::signed(revision)?;
    let result = members
        .call("compaction", Retry::Any, timeout, |mut kv| async move {
            kv.compact(target, None).await
        })
        .await;
    match result {
        Ok(response) => Ok(Some(response)),
        Err(Failure::Etcd(etcd_client::Error::GRpcStatus(status)))
            if status.code() == tonic::Code::OutOfRange =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}
