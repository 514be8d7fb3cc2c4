//! All API writes of the simulation go through one queue with bounded concurrency. Writes to
//! the same object coalesce (only the newest pod status is sent) and never overlap (a stale status
//! cannot land after a newer one); lease renewals and node status go first, so heartbeats keep
//! their rhythm while 100,000 pods start; pod statuses next, and events last (the kubelet records
//! them through a broadcaster of their own, which never holds a status back): behind 10,000
//! queued events, each wave of a 65,000-node DaemonSet rollout waited seconds for its pods'
//! statuses. A node's events are dropped when too many of its own queue, as its kubelet's
//! broadcaster drops them. Each write goes through the client of the node it is about (see
//! [`Identities`]): a kubelet writes its own Node, Lease and pods, and its events with its own
//! recorder.

use crate::{Identities, config::LEASE_NAMESPACE, stats::Stats};
use events::{EventType, Recorder};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, ObjectReference, Pod},
};
use kube::{
    Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    core::Request,
};
use serde_json::{Value, json, value::RawValue};
use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
};
use tokio::sync::{Notify, Semaphore};

/// Of every this many takes, one serves a waiting pod status first and one a waiting node status
/// first; the rest serve leases first.
const TURNS: u32 = 4;

/// Of every this many takes, one serves a waiting periodic node status report (a refresh that
/// changes nothing but heartbeat times) first; otherwise they go only when nothing else waits.
/// A node's lease keeps it alive meanwhile, as upstream's node lifecycle controller reads the
/// later of the two. 65,000 nodes registered within a minute report together five minutes
/// later: at one turn in four, their reports took the writes the leases needed, renewals fell
/// past the 40 s grace period and thousands of nodes went NotReady.
const REFRESH_TURNS: u32 = 16;

/// At most this many of one node's events wait to be written; more are dropped: each kubelet
/// records through a broadcaster of its own, which drops past `maxQueuedEvents` (1,000). One cap
/// of 10,000 for the whole process dropped the events of 500 kubelets sending 10 each to a slow
/// server: a third of a rollout's events on upstream's side in issue 42's runs, none on
/// rollwright's, so the slower server was spared work the faster one did.
const MAX_QUEUED_EVENTS_PER_NODE: usize = 1_000;

/// At most this many events of all nodes wait to be written: the process's own memory bound
/// (about 100 MB of queued events), far above what the per-node caps let through for a
/// rollout of thousands of nodes.
const MAX_QUEUED_EVENTS: usize = 200_000;

/// One write.
pub(crate) enum Write {
    /// A strategic merge patch of the pod's status: conditions merge by type, so those the
    /// kubelet does not own (`DisruptionTarget` from an eviction, readiness gates) stay, as
    /// upstream's status manager keeps them; a JSON merge patch would replace the list.
    PodStatus {
        /// The node the pod is bound to: whose client writes.
        node: String,
        namespace: String,
        name: String,
        /// The pod's UID, a precondition of the patch (see [`StatusPatch`]).
        uid: String,
        /// As JSON text: a status waits here until the server takes it (for every pod at once
        /// while 150,000 start), and as a `Value` it took five times the memory.
        status: Box<RawValue>,
    },
    /// The last status, then delete with grace 0 and the UID as precondition.
    PodFinish {
        /// The node the pod is bound to: whose client writes.
        node: String,
        namespace: String,
        name: String,
        uid: String,
        status: Box<RawValue>,
    },
    /// Renew the node's Lease (create it if missing).
    Lease {
        node: String,
        node_uid: String,
        duration: i32,
        /// When the renewal was due (`None`: not a renewal, the first write as a node starts):
        /// its latency is measured from then, so a late timer counts as much as a slow write.
        due: Option<tokio::time::Instant>,
    },
    /// A strategic merge patch of the node's status: conditions merge by type, so those the
    /// kubelet does not own (`NetworkUnavailable` from a network plugin) stay, as upstream's
    /// kubelet patches only what it changed.
    NodeStatus {
        node: String,
        status: Value,
        /// A periodic report of unchanged conditions, which waits behind heartbeats
        /// ([`REFRESH_TURNS`]).
        refresh: bool,
    },
    /// Record an event (the recorder carries its node's client).
    Event {
        recorder: Recorder,
        reference: Box<ObjectReference>,
        kind: EventType,
        reason: String,
        message: String,
        /// When it happened: events are stamped and named then, not when the queue drains.
        at: jiff::Timestamp,
    },
}

/// What a write is about: writes with the same key coalesce and are serialized.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Pod(String),
    Lease(String),
    Node(String),
    /// The event's number, and the node whose kubelet records it.
    Event(u64, Arc<str>),
}

/// Which queue a write waits in, earliest served first (but for [`TURNS`] and
/// [`REFRESH_TURNS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    Lease,
    NodeStatus,
    PodStatus,
    Refresh,
    Event,
}

impl Tier {
    fn of(key: &Key, write: &Write) -> Self {
        match (key, write) {
            (_, Write::NodeStatus { refresh: true, .. }) => Tier::Refresh,
            (Key::Lease(_), _) => Tier::Lease,
            (Key::Node(_), _) => Tier::NodeStatus,
            (Key::Pod(_), _) => Tier::PodStatus,
            (Key::Event(..), _) => Tier::Event,
        }
    }
}

impl Queue {
    fn queue(&mut self, tier: Tier) -> &mut VecDeque<Key> {
        match tier {
            Tier::Lease => &mut self.leases,
            Tier::NodeStatus => &mut self.urgent,
            Tier::PodStatus => &mut self.normal,
            Tier::Refresh => &mut self.refreshes,
            Tier::Event => &mut self.events_queue,
        }
    }
}

#[derive(Default)]
struct Queue {
    pending: HashMap<Key, Write>,
    /// Leases: a renewal has a deadline (the node lifecycle controller's grace period), so it
    /// goes even before node statuses, which 65,000 registering nodes post all at once.
    leases: VecDeque<Key>,
    urgent: VecDeque<Key>,
    /// Periodic node status reports ([`REFRESH_TURNS`]).
    refreshes: VecDeque<Key>,
    normal: VecDeque<Key>,
    /// Events, taken only when nothing else waits.
    events_queue: VecDeque<Key>,
    /// Counts takes: of every [`TURNS`], one goes to a pod first and one to a node status first,
    /// so both still move when heartbeats alone could fill every write slot (at 20,000 nodes on
    /// a loaded 2-core machine they did: a DaemonSet's pods stayed unready on the server while
    /// Ready here, and 20,000 nodes sharded over etcd waited minutes for their first status).
    turn: u32,
    inflight: HashSet<Key>,
    deferred: HashSet<Key>,
    events: usize,
    /// Queued events by node, for [`MAX_QUEUED_EVENTS_PER_NODE`].
    events_of: HashMap<Arc<str>, usize>,
    next_event: u64,
}

/// The handle the engine pushes writes into.
#[derive(Clone)]
pub(crate) struct Writer {
    queue: Arc<Mutex<Queue>>,
    notify: Arc<Notify>,
    stats: Arc<Stats>,
}

impl Writer {
    /// Starts the dispatcher task; the caller aborts it (with the returned handle) on shutdown.
    pub(crate) fn start(
        identities: Identities,
        max_in_flight: usize,
        stats: Arc<Stats>,
    ) -> (Writer, tokio::task::JoinHandle<()>) {
        let w = Writer {
            queue: Arc::default(),
            notify: Arc::new(Notify::new()),
            stats,
        };
        let task = tokio::spawn(dispatch(w.clone(), identities, max_in_flight.max(1)));
        (w, task)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a write, replacing a queued one with the same key.
    pub(crate) fn push(&self, key: Key, mut write: Write) {
        let mut q = self.lock();
        // A renewal that replaces a queued one is as late as the one it replaces.
        if let (Some(Write::Lease { due: Some(old), .. }), Write::Lease { due, .. }) =
            (q.pending.get(&key), &mut write)
        {
            *due = Some(due.map_or(*old, |d| d.min(*old)));
        }
        let tier = Tier::of(&key, &write);
        match q.pending.insert(key.clone(), write) {
            None => {
                Stats::add(&self.stats.pending_writes, 1);
                q.queue(tier).push_back(key);
            }
            // A write replacing one that waits in a later queue (a change of conditions
            // replacing a periodic report) waits in its own too; its place in the later one is
            // skipped when reached, nothing being pending under it then.
            Some(old) if Tier::of(&key, &old) > tier => q.queue(tier).push_back(key),
            Some(_) => {}
        }
        drop(q);
        self.notify.notify_one();
    }

    /// Queues an event of `node`'s kubelet unless too many of its own, or of all, are waiting.
    pub(crate) fn event(&self, node: &str, write: Write) {
        let key = {
            let mut q = self.lock();
            let (node, of_node) = match q.events_of.get_key_value(node) {
                Some((name, n)) => (name.clone(), *n),
                None => (Arc::from(node), 0),
            };
            if q.events >= MAX_QUEUED_EVENTS || of_node >= MAX_QUEUED_EVENTS_PER_NODE {
                Stats::add(&self.stats.events_dropped, 1);
                return;
            }
            q.events += 1;
            q.events_of.insert(node.clone(), of_node + 1);
            q.next_event += 1;
            Key::Event(q.next_event, node)
        };
        self.push(key, write);
    }

    /// The next write whose object has no write in flight.
    fn take(&self) -> Option<(Key, Write)> {
        let mut q = self.lock();
        loop {
            q.turn = q.turn.wrapping_add(1);
            let first = match q.turn % TURNS {
                0 => q.normal.pop_front(),
                2 => q.urgent.pop_front(),
                _ if q.turn % REFRESH_TURNS == 3 => q.refreshes.pop_front(),
                _ => None,
            };
            let key = first
                .or_else(|| q.leases.pop_front())
                .or_else(|| q.urgent.pop_front())
                .or_else(|| q.normal.pop_front())
                .or_else(|| q.refreshes.pop_front())
                .or_else(|| q.events_queue.pop_front())?;
            if q.inflight.contains(&key) {
                q.deferred.insert(key);
                continue;
            }
            let Some(write) = q.pending.remove(&key) else {
                continue;
            };
            if let Key::Event(_, node) = &key {
                q.events -= 1;
                if let Some(n) = q.events_of.get_mut(node) {
                    *n -= 1;
                    if *n == 0 {
                        q.events_of.remove(node);
                    }
                }
            }
            q.inflight.insert(key.clone());
            return Some((key, write));
        }
    }

    fn done(&self, key: &Key) {
        let mut q = self.lock();
        q.inflight.remove(key);
        Stats::sub(&self.stats.pending_writes, 1);
        let waiting = q.pending.get(key).map(|w| Tier::of(key, w));
        if q.deferred.remove(key)
            && let Some(tier) = waiting
        {
            q.queue(tier).push_front(key.clone());
            drop(q);
            self.notify.notify_one();
        }
    }
}

async fn dispatch(w: Writer, identities: Identities, max_in_flight: usize) {
    let permits = Arc::new(Semaphore::new(max_in_flight));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (key, write) = loop {
            let notified = w.notify.notified();
            if let Some(next) = w.take() {
                break next;
            }
            notified.await;
        };
        let (w, identities) = (w.clone(), identities.clone());
        let due = match &write {
            Write::Lease { due, .. } => *due,
            _ => None,
        };
        tokio::spawn(async move {
            match perform(&identities, write).await {
                Ok(()) => {
                    Stats::add(&w.stats.writes, 1);
                    if let Some(due) = due {
                        w.stats.lease_latency.record(due.elapsed());
                    }
                }
                Err(e) => {
                    Stats::add(&w.stats.write_errors, 1);
                    tracing::debug!(error = %e, ?key, "write failed");
                }
            }
            w.done(&key);
            drop(permit);
        });
    }
}

/// `{"status": ...}` around a status already in JSON text.
/// A pod's status patch, with its UID as a precondition, as the kubelet's status manager writes
/// it (`preparePatchBytesForPodStatus`): a StatefulSet's pod deleted at once and made again
/// under its name must not take the old one's last status. Without it, the old pod's
/// `Succeeded` landed on its replacement before that was even bound, and the rollout never
/// finished (issue 39's `whatif-check`, upstream, a Parallel StatefulSet).
#[derive(serde::Serialize)]
struct StatusPatch<'a> {
    metadata: UidOnly<'a>,
    status: &'a RawValue,
}

#[derive(serde::Serialize)]
struct UidOnly<'a> {
    uid: &'a str,
}

/// The object the write was for is gone: deleted (404), changed under a precondition (409), or
/// made again under its name (a status patch's UID refused: `metadata.uid` is immutable).
fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409
        || (s.code == 422 && s.message.contains("metadata.uid")))
}

/// Makes one write, through the client of the node it is about.
async fn perform(identities: &Identities, write: Write) -> Result<(), kube::Error> {
    let pp = PatchParams::default();
    match write {
        Write::PodStatus {
            node,
            namespace,
            name,
            uid,
            status,
        } => {
            let client = &identities.node(&node);
            let req = Request::new(Pod::url_path(&(), Some(&namespace)));
            let r = req
                .patch_subresource(
                    "status",
                    &name,
                    &pp,
                    &Patch::Strategic(StatusPatch {
                        metadata: UidOnly { uid: &uid },
                        status: &status,
                    }),
                )
                .map_err(kube::Error::BuildRequest)?;
            match client.request_text(r).await {
                Err(e) if gone(&e) => Ok(()),
                other => other.map(drop),
            }
        }
        Write::PodFinish {
            node,
            namespace,
            name,
            uid,
            status,
        } => {
            let client = &identities.node(&node);
            let req = Request::new(Pod::url_path(&(), Some(&namespace)));
            let r = req
                .patch_subresource(
                    "status",
                    &name,
                    &pp,
                    &Patch::Strategic(StatusPatch {
                        metadata: UidOnly { uid: &uid },
                        status: &status,
                    }),
                )
                .map_err(kube::Error::BuildRequest)?;
            match client.request_text(r).await {
                Err(e) if gone(&e) => return Ok(()),
                other => other.map(drop)?,
            }
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match client
                .request_text(req.delete(&name, &dp).map_err(kube::Error::BuildRequest)?)
                .await
            {
                Err(e) if gone(&e) => Ok(()),
                other => other.map(drop),
            }
        }
        Write::Lease {
            node,
            node_uid,
            duration,
            due: _,
        } => {
            let client = &identities.node(&node);
            let now = crate::node::micro_time(clock::now());
            let req = Request::new(Lease::url_path(&(), Some(LEASE_NAMESPACE)));
            let patch = json!({"spec": {"holderIdentity": node, "leaseDurationSeconds": duration, "renewTime": now}});
            match client
                .request_text(
                    req.patch(&node, &pp, &Patch::Merge(patch))
                        .map_err(kube::Error::BuildRequest)?,
                )
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    let cfg = crate::NodeSim {
                        lease_duration_seconds: duration,
                        ..Default::default()
                    };
                    let body =
                        serde_json::to_vec(&crate::node::lease(&cfg, &node, &node_uid, &now))
                            .map_err(kube::Error::SerdeError)?;
                    match client
                        .request_text(
                            req.create(&PostParams::default(), body)
                                .map_err(kube::Error::BuildRequest)?,
                        )
                        .await
                    {
                        Err(e) if gone(&e) => Ok(()),
                        other => other.map(drop),
                    }
                }
                other => other.map(drop),
            }
        }
        Write::NodeStatus { node, status, .. } => {
            let client = &identities.node(&node);
            let req = Request::new(Node::url_path(&(), None));
            let r = req
                .patch_subresource(
                    "status",
                    &node,
                    &pp,
                    &Patch::Strategic(json!({"status": status})),
                )
                .map_err(kube::Error::BuildRequest)?;
            match client.request_text(r).await {
                Err(e) if gone(&e) => Ok(()),
                other => other.map(drop),
            }
        }
        Write::Event {
            recorder,
            reference,
            kind,
            reason,
            message,
            at,
        } => recorder
            .publish_at(&reference, kind, &reason, &message, at)
            .await
            .map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> Writer {
        Writer {
            queue: Arc::default(),
            notify: Arc::new(Notify::new()),
            stats: Arc::default(),
        }
    }

    fn status(n: i64) -> Write {
        Write::PodStatus {
            node: "node-0".into(),
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            status: serde_json::value::to_raw_value(&json!({"n": n})).unwrap(),
        }
    }

    fn n_of(w: &Write) -> i64 {
        match w {
            Write::PodStatus { status, .. } => serde_json::from_str::<Value>(status.get()).unwrap()
                ["n"]
                .as_i64()
                .unwrap(),
            _ => -1,
        }
    }

    #[test]
    fn writes_to_one_object_coalesce() {
        let w = writer();
        w.push(Key::Pod("u".into()), status(1));
        w.push(Key::Pod("u".into()), status(2));
        let (_, first) = w.take().unwrap();
        assert_eq!(n_of(&first), 2, "only the newest status is sent");
        assert!(w.take().is_none());
    }

    #[test]
    fn writes_to_one_object_never_overlap() {
        let w = writer();
        w.push(Key::Pod("u".into()), status(1));
        let (k, _) = w.take().unwrap();
        w.push(Key::Pod("u".into()), status(2));
        assert!(w.take().is_none(), "held back while the first is in flight");
        w.done(&k);
        let (_, next) = w.take().unwrap();
        assert_eq!(n_of(&next), 2);
    }

    #[test]
    fn heartbeats_go_first() {
        let w = writer();
        w.push(Key::Pod("u".into()), status(1));
        w.push(
            Key::Lease("node-0".into()),
            Write::Lease {
                node: "node-0".into(),
                node_uid: "x".into(),
                duration: 40,
                due: None,
            },
        );
        let (k, _) = w.take().unwrap();
        assert_eq!(k, Key::Lease("node-0".into()));
    }

    /// Queues a renewal of the leases of nodes `0..n`.
    fn renewals(w: &Writer, n: usize) {
        for n in 0..n {
            w.push(
                Key::Lease(format!("node-{n}")),
                Write::Lease {
                    node: format!("node-{n}"),
                    node_uid: "x".into(),
                    duration: 40,
                    due: None,
                },
            );
        }
    }

    #[test]
    fn pod_and_node_statuses_each_get_one_turn_in_four_while_heartbeats_wait() {
        let w = writer();
        renewals(&w, 8);
        w.push(Key::Pod("u".into()), status(1));
        w.push(
            Key::Node("node-0".into()),
            Write::NodeStatus {
                node: "node-0".into(),
                status: json!({}),
                refresh: false,
            },
        );
        let order: Vec<Key> = (0..4).map(|_| w.take().unwrap().0).collect();
        assert_eq!(order[1], Key::Node("node-0".into()), "{order:?}");
        assert_eq!(order[3], Key::Pod("u".into()), "{order:?}");
        assert!(matches!(order[0], Key::Lease(_)) && matches!(order[2], Key::Lease(_)));
    }

    #[test]
    fn periodic_reports_wait_behind_heartbeats_but_a_change_does_not() {
        let w = writer();
        let node = |n: usize, refresh| Write::NodeStatus {
            node: format!("node-{n}"),
            status: json!({}),
            refresh,
        };
        renewals(&w, 40);
        w.push(Key::Node("node-1".into()), node(1, true));
        w.push(Key::Node("node-2".into()), node(2, true));
        // node-2's conditions change while its report waits: the change goes at a node
        // status's turn, one in four.
        w.push(Key::Node("node-2".into()), node(2, false));
        let order: Vec<Key> = (0..REFRESH_TURNS).map(|_| w.take().unwrap().0).collect();
        let at = |k: &str| order.iter().position(|o| *o == Key::Node(k.into()));
        assert_eq!(at("node-2"), Some(1), "{order:?}");
        assert_eq!(at("node-1"), Some(2), "{order:?}");
        assert_eq!(
            order.iter().filter(|k| matches!(k, Key::Lease(_))).count(),
            REFRESH_TURNS as usize - 2
        );
    }

    #[test]
    fn a_report_held_back_by_its_write_in_flight_still_waits_behind_heartbeats() {
        let w = writer();
        let report = || Write::NodeStatus {
            node: "node-1".into(),
            status: json!({}),
            refresh: true,
        };
        w.push(Key::Node("node-1".into()), report());
        let (first, _) = w.take().unwrap();
        assert_eq!(first, Key::Node("node-1".into()));
        // The next report comes while the first is in flight: it is held back, and when the
        // first is done it goes back among the reports, not among the changes.
        w.push(Key::Node("node-1".into()), report());
        assert!(w.take().is_none());
        renewals(&w, 5);
        w.done(&first);
        // Among the changes, it would go at the next node status turn (the third take).
        let order: Vec<Key> = (0..6).map(|_| w.take().unwrap().0).collect();
        assert_eq!(
            order.iter().position(|k| *k == Key::Node("node-1".into())),
            Some(5),
            "{order:?}"
        );
    }

    /// Each kubelet's broadcaster drops its own events past 1,000 queued; another node's still
    /// queue, and a taken event makes room for its node's next.
    #[test]
    fn events_are_dropped_past_a_thousand_queued_per_node() {
        let w = writer();
        let event = |node: &str| {
            w.event(
                node,
                Write::NodeStatus {
                    node: node.into(),
                    status: json!({}),
                    refresh: false,
                },
            )
        };
        for _ in 0..MAX_QUEUED_EVENTS_PER_NODE + 1 {
            event("node-0");
        }
        assert_eq!(Stats::get(&w.stats.events_dropped), 1);
        event("node-1");
        assert_eq!(Stats::get(&w.stats.events_dropped), 1);
        let (first, _) = w.take().unwrap();
        assert_eq!(first, Key::Event(1, "node-0".into()));
        event("node-0");
        assert_eq!(Stats::get(&w.stats.events_dropped), 1);
        event("node-0");
        assert_eq!(Stats::get(&w.stats.events_dropped), 2);
    }

    /// A pod's status goes out with its UID, and the server's refusal of it for a pod made
    /// again under the same name counts as the pod being gone, not as a failure to retry.
    #[tokio::test]
    async fn a_status_names_its_pods_uid_and_a_replaced_pod_counts_as_gone() {
        let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
        let bodies = seen.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let bodies = bodies.clone();
            async move {
                let body = axum::body::Body::new(req.into_body());
                let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                bodies
                    .lock()
                    .unwrap()
                    .push(serde_json::from_slice(&bytes).unwrap());
                let refusal = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "code": 422, "reason": "Invalid",
                    "message": "Pod \"p\" is invalid: metadata.uid: Invalid value: \"u\": field is immutable"});
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(422)
                        .body(kube::client::Body::from(refusal.to_string().into_bytes()))
                        .unwrap(),
                )
            }
        });
        let ids = Identities::single(kube::Client::new(svc, "default"));
        perform(&ids, status(1)).await.unwrap();
        let sent = seen.lock().unwrap().clone();
        assert_eq!(
            sent,
            [json!({"metadata": {"uid": "u"}, "status": {"n": 1}})]
        );
    }

    #[test]
    fn pod_statuses_go_before_events() {
        let w = writer();
        // Any write will do as the event's: only the queue it waits in matters here.
        w.event(
            "node-0",
            Write::NodeStatus {
                node: "node-0".into(),
                status: json!({}),
                refresh: false,
            },
        );
        w.push(Key::Pod("u".into()), status(1));
        let (k, _) = w.take().unwrap();
        assert_eq!(k, Key::Pod("u".into()));
        let (k, _) = w.take().unwrap();
        assert_eq!(k, Key::Event(1, "node-0".into()));
    }

    #[test]
    fn a_renewal_replacing_a_queued_one_keeps_the_earlier_due_time() {
        let w = writer();
        let t0 = tokio::time::Instant::now();
        let lease = |due| Write::Lease {
            node: "node-0".into(),
            node_uid: "x".into(),
            duration: 40,
            due,
        };
        w.push(Key::Lease("node-0".into()), lease(Some(t0)));
        w.push(
            Key::Lease("node-0".into()),
            lease(Some(t0 + std::time::Duration::from_secs(10))),
        );
        let (_, write) = w.take().unwrap();
        assert!(matches!(write, Write::Lease { due: Some(d), .. } if d == t0));
    }
}
