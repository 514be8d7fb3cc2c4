//! Records `core/v1` Events on objects, as upstream's `record.EventRecorder` does.
//!
//! kube-runtime's recorder writes `events.k8s.io/v1` Events; `kubectl describe` and
//! `kubectl get events` read `core/v1`, which is what the embedded API server serves, so this
//! small recorder is ours. Like upstream's broadcaster it
//! - deduplicates: an event equal to one already recorded (same object, type, reason, message,
//!   source) increments that event's `count` and `lastTimestamp` instead of creating another;
//! - rate-limits per object with a token bucket (burst 25, one more every 5 minutes), so a crash
//!   looping pod or a 100,000-pod rollout cannot drown the store;
//! - never blocks or fails the caller: recording is best effort, errors are logged;
//! - holds a bounded number of events: [`Recorder::record`] queues at most [`MAX_QUEUED`] events
//!   for one worker task that writes a few at a time; past that, events are dropped, as upstream's
//!   broadcaster drops them when its channel is full (an API server that does not answer must not
//!   grow its clients' memory).

#![warn(missing_docs)]

use k8s_openapi::{
    api::core::v1::{Event, EventSource, ObjectReference},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time},
};
use kube::{
    Client, Resource, ResourceExt,
    api::{Api, Patch, PatchParams, PostParams},
};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};
// tokio's clock, not std's: the spam filter's refill and the aggregation window move with the
// timers (a paused `whatif` clock included).
use tokio::{sync::mpsc, time::Instant};

/// `Normal` or `Warning`, as upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Upstream's spam filter: 25 events per object at once, then one per 5 minutes.
const BURST: f64 = 25.0;
const REFILL_EVERY: Duration = Duration::from_secs(300);
/// How many distinct events (and objects) are remembered for deduplication.
const MAX_REMEMBERED: usize = 4096;
/// Events [`Recorder::record`] queues before it drops them (upstream's `maxQueuedEvents`).
pub const MAX_QUEUED: usize = 1000;
/// Events one recorder writes at once.
const MAX_WRITING: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EventKey {
    object: String,
    kind: EventType,
    reason: String,
    message: String,
}

struct Seen {
    name: String,
    namespace: String,
    count: i32,
    first: Time,
    last_used: Instant,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Default)]
struct State {
    seen: HashMap<EventKey, Seen>,
    buckets: HashMap<String, Bucket>,
}

/// Records events for one component (e.g. `default-scheduler`, `kubelet` on a node).
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
    /// The queue of [`Recorder::record`], with its worker started on first use (a recorder may
    /// be made outside a runtime). The worker ends when the last clone of the recorder drops.
    queue: Arc<OnceLock<mpsc::Sender<Queued>>>,
}

/// What the clones of a recorder and its worker share.
struct Inner {
    client: Client,
    component: String,
    host: Option<String>,
    state: Mutex<State>,
}

/// An event waiting for the worker.
struct Queued {
    object: ObjectReference,
    kind: EventType,
    reason: String,
    message: String,
    at: jiff::Timestamp,
}

/// An object reference for an event, from any Kubernetes object.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.meta().uid.clone(),
        resource_version: obj.meta().resource_version.clone(),
        field_path: None,
    }
}

impl Recorder {
    /// A recorder whose events name `component` (and `host`, for per-node agents) as source.
    pub fn new(client: Client, component: impl Into<String>, host: Option<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                component: component.into(),
                host,
                state: Mutex::new(State::default()),
            }),
            queue: Arc::new(OnceLock::new()),
        }
    }

    /// Records an event on `object` in the background; never blocks or fails the caller. When
    /// [`MAX_QUEUED`] events already wait, this one is dropped.
    pub fn record(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let queued = Queued {
            object: object.clone(),
            kind,
            reason: reason.to_string(),
            message: message.into(),
            // Stamped (and named) now, when it happens, not when the write gets through: events
            // recorded in order then read in order even when their writes race.
            at: clock::now(),
        };
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(MAX_QUEUED);
            tokio::spawn(write_queued(self.inner.clone(), rx));
            tx
        });
        if let Err(mpsc::error::TrySendError::Full(dropped)) = queue.try_send(queued) {
            tracing::debug!(reason = dropped.reason, "event queue full; event dropped");
        }
    }

    /// Records an event and waits until it is written (or deduplicated, or dropped by the spam
    /// filter). Returns whether anything was written.
    pub async fn publish(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: &str,
    ) -> Result<bool, kube::Error> {
        self.publish_at(object, kind, reason, message, clock::now())
            .await
    }

    /// [`Recorder::publish`] for an event that happened at `now` (callers that queue events
    /// stamp them when they happen).
    pub async fn publish_at(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: &str,
        now: jiff::Timestamp,
    ) -> Result<bool, kube::Error> {
        self.inner
            .publish_at(object, kind, reason, message, now)
            .await
    }
}

/// The worker of one recorder: writes queued events, a few at a time, until the recorder is gone.
async fn write_queued(inner: Arc<Inner>, mut queue: mpsc::Receiver<Queued>) {
    let mut writing = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            Some(q) = queue.recv(), if writing.len() < MAX_WRITING => {
                let inner = inner.clone();
                writing.spawn(async move {
                    if let Err(e) = inner.publish_at(&q.object, q.kind, &q.reason, &q.message, q.at).await {
                        tracing::debug!(error = %e, reason = q.reason, "event not recorded");
                    }
                });
            }
            Some(_) = writing.join_next(), if !writing.is_empty() => {}
            else => return,
        }
    }
}

impl Inner {
    async fn publish_at(
        &self,
        object: &ObjectReference,
        kind: EventType,
        reason: &str,
        message: &str,
        now: jiff::Timestamp,
    ) -> Result<bool, kube::Error> {
        let object_key = format!(
            "{}/{}/{}/{}",
            object.kind.as_deref().unwrap_or(""),
            object.namespace.as_deref().unwrap_or(""),
            object.name.as_deref().unwrap_or(""),
            object.uid.as_deref().unwrap_or("")
        );
        let key = EventKey {
            object: object_key.clone(),
            kind,
            reason: reason.into(),
            message: message.into(),
        };
        let now_time = Time(now);
        let namespace = object
            .namespace
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".into());
        // Decide under the lock, write without it.
        let (existing, count) = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if !take_token(&mut st.buckets, &object_key) {
                return Ok(false);
            }
            match st.seen.get_mut(&key) {
                Some(seen) => {
                    seen.count += 1;
                    seen.last_used = Instant::now();
                    (
                        Some((
                            seen.name.clone(),
                            seen.namespace.clone(),
                            seen.first.clone(),
                        )),
                        seen.count,
                    )
                }
                None => (None, 1),
            }
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Some((name, ns, _first)) = existing {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
            let patch = serde_json::json!({"count": count, "lastTimestamp": now_time});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(true),
                // The event expired or was deleted: record it anew below.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let name = format!(
            "{}.{:x}",
            object.name.as_deref().unwrap_or("unknown"),
            now.as_nanosecond()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(kind.as_str().into()),
            count: Some(1),
            first_timestamp: Some(now_time.clone()),
            last_timestamp: Some(now_time.clone()),
            event_time: None::<MicroTime>,
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: self.host.clone(),
            }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone().unwrap_or_else(|| self.component.clone())),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.seen.len() >= MAX_REMEMBERED {
            forget_oldest(&mut st.seen);
        }
        st.seen.insert(
            key,
            Seen {
                name,
                namespace,
                count: 1,
                first: now_time,
                last_used: Instant::now(),
            },
        );
        Ok(true)
    }
}

fn take_token(buckets: &mut HashMap<String, Bucket>, object: &str) -> bool {
    if buckets.len() >= MAX_REMEMBERED && !buckets.contains_key(object) {
        // Forget full buckets first: they carry no state worth keeping.
        buckets.retain(|_, b| b.tokens < BURST - 1.0);
        if buckets.len() >= MAX_REMEMBERED {
            buckets.clear();
        }
    }
    let now = Instant::now();
    let b = buckets.entry(object.to_string()).or_insert(Bucket {
        tokens: BURST,
        at: now,
    });
    let refill = now.duration_since(b.at).as_secs_f64() / REFILL_EVERY.as_secs_f64();
    b.tokens = (b.tokens + refill).min(BURST);
    b.at = now;
    if b.tokens >= 1.0 {
        b.tokens -= 1.0;
        true
    } else {
        false
    }
}

/// Forgets the least recently used quarter.
fn forget_oldest(seen: &mut HashMap<EventKey, Seen>) {
    let mut ages: Vec<(Instant, EventKey)> =
        seen.iter().map(|(k, v)| (v.last_used, k.clone())).collect();
    ages.sort_by_key(|(t, _)| *t);
    let drop = (seen.len() / 4).max(1);
    for (_, k) in ages.into_iter().take(drop) {
        seen.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spam_filter_allows_a_burst_then_stops() {
        let mut buckets = HashMap::new();
        let allowed = (0..40)
            .filter(|_| take_token(&mut buckets, "Pod/default/x/1"))
            .count();
        assert_eq!(allowed, 25);
        assert!(
            take_token(&mut buckets, "Pod/default/y/2"),
            "other objects have their own bucket"
        );
    }

    #[test]
    fn forgetting_keeps_the_most_recent() {
        let mut seen = HashMap::new();
        for i in 0..8 {
            seen.insert(
                EventKey {
                    object: format!("o{i}"),
                    kind: EventType::Normal,
                    reason: "R".into(),
                    message: String::new(),
                },
                Seen {
                    name: format!("e{i}"),
                    namespace: "default".into(),
                    count: 1,
                    first: Time(clock::now()),
                    last_used: Instant::now() + Duration::from_millis(i),
                },
            );
        }
        forget_oldest(&mut seen);
        assert_eq!(seen.len(), 6);
        assert!(
            !seen.keys().any(|k| k.object == "o0" || k.object == "o1"),
            "the two oldest go first"
        );
    }
}
