//! Records `core/v1` Events on objects, as upstream's `record.EventRecorder` does.
//!
//! kube-runtime's recorder writes `events.k8s.io/v1` Events; `kubectl describe` and
//! `kubectl get events` read `core/v1`, which is what the embedded API server serves, so this
//! small recorder is ours. Like upstream's broadcaster it
//! - correlates before it writes (the `correlator` module, upstream's `EventCorrelator`): similar
//!   events combine once ten differ only by message, a repeat patches its event's `count`, and a
//!   per-object token bucket (burst 25, one more every 5 minutes) keeps a crash-looping pod or a
//!   100,000-pod rollout from drowning the store;
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
    api::{Patch, PatchParams, PostParams},
    core::Request,
};
use std::sync::{Arc, Mutex, OnceLock};
// tokio's clock, not std's: the spam filter's refill and the aggregation window move with the
// timers (a paused `whatif` clock included).
use tokio::{sync::mpsc, time::Instant};

mod correlator;
use correlator::Correlator;

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

/// Events [`Recorder::record`] queues before it drops them (upstream's `maxQueuedEvents`).
pub const MAX_QUEUED: usize = 1000;
/// Events one recorder writes at once.
const MAX_WRITING: usize = 8;

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
    correlator: Mutex<Correlator>,
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
                correlator: Mutex::new(Correlator::default()),
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
            "{}\0{}\0{}\0{}\0{}",
            object.kind.as_deref().unwrap_or(""),
            object.namespace.as_deref().unwrap_or(""),
            object.name.as_deref().unwrap_or(""),
            object.uid.as_deref().unwrap_or(""),
            object.api_version.as_deref().unwrap_or("")
        );
        let object_name = object.name.as_deref().unwrap_or("unknown");
        let incoming = correlator::Incoming {
            object: &object_key,
            field_path: object.field_path.as_deref().unwrap_or(""),
            object_name,
            namespace: object
                .namespace
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("default"),
            kind,
            reason,
            message,
        };
        // Decide under the lock, write without it.
        let write = self
            .correlator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .correlate(&incoming, Instant::now(), now);
        let Some(write) = write else {
            return Ok(false);
        };
        // The server's answer is only checked for success, never decoded: a typed `Event` (its
        // managedFields included) for every event written was work nobody read.
        let url = Request::new(Event::url_path(&(), Some(&write.namespace)));
        let now = Time(now);
        if write.patch {
            let patch = serde_json::json!({
                "count": write.count,
                "lastTimestamp": now,
                "message": write.message,
            });
            let request = url
                .patch(&write.name, &PatchParams::default(), &Patch::Merge(&patch))
                .map_err(kube::Error::BuildRequest)?;
            match self.client.request_text(request).await {
                Ok(_) => return Ok(true),
                // Never created (the spam filter dropped it), expired or deleted: create it, with
                // the count so far, as upstream's recorder does.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let event = Event {
            metadata: ObjectMeta {
                name: Some(write.name),
                namespace: Some(write.namespace),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.into()),
            message: Some(write.message),
            type_: Some(kind.as_str().into()),
            count: Some(write.count),
            first_timestamp: Some(Time(write.first)),
            last_timestamp: Some(now),
            event_time: None::<MicroTime>,
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: self.host.clone(),
            }),
            // Upstream's generateEvent: the source's component and host, the host empty for a
            // controller (kubectl's SOURCE column joins the two, so naming the component twice
            // printed it twice).
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone().unwrap_or_default()),
            ..Default::default()
        };
        let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
        let request = url
            .create(&PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
        self.client.request_text(request).await?;
        Ok(true)
    }
}
