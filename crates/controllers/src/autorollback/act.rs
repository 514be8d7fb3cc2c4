//! The API side of [`super`]: reading a workload's facts from the controller's cache, and the two
//! writes (the template with its marks, then the condition with its event).

use super::{
    CONDITION, Cond, Decision, FAILED, Facts, Marks, PodFailure, ROLLBACK_MESSAGE, ROLLBACK_REASON,
    ROLLED_BACK_AT, ROLLED_BACK_FROM, ROLLED_BACK_TO, Revision, SUPPRESSED, crash_restarts, decide,
    needs_record, opted_in, pod_failure,
};
use crate::{
    deployment::{
        rollback::undo_annotations,
        util::{POD_TEMPLATE_HASH, REVISION, find_new},
    },
    history,
};
use events::{EventType, Recorder};
use informer::{Informer, Informers, Shared, key};
use k8s_openapi::{
    api::{
        apps::v1::{ControllerRevision, Deployment, ReplicaSet},
        core::v1::{Namespace, ObjectReference, Pod},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// The workload kinds that roll back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// apps/v1 StatefulSet.
    StatefulSet,
}

impl WorkloadKind {
    fn resource(self) -> ApiResource {
        let kind = match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::DaemonSet => "DaemonSet",
            WorkloadKind::StatefulSet => "StatefulSet",
        };
        ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", kind))
    }
}

/// What a DaemonSet's or StatefulSet's controller knows of its rollout.
#[derive(Clone, Copy, Debug)]
pub struct RolloutState<'a> {
    /// The rollout is paused.
    pub paused: bool,
    /// `maxUnavailable` resolved.
    pub threshold: i32,
    /// The name of the revision the status says completed (a StatefulSet's
    /// `currentRevision`).
    pub completed: Option<&'a str>,
}

/// What the sync does after the hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Go on as usual.
    Continue,
    /// The template was rolled back (or the cache was stale): stop; the change's event syncs
    /// the workload again.
    Stop,
}

/// The automatic rollback of one controller: the Namespaces (for the opt-in) and its client.
pub struct AutoRollback {
    client: Client,
    namespaces: Informer<Namespace>,
    recorder: Recorder,
}

/// One workload as the hook sees it, whatever its kind.
struct Subject<'a> {
    kind: WorkloadKind,
    meta: &'a ObjectMeta,
    reference: ObjectReference,
    facts: Facts,
    /// Conditions carry `lastUpdateTime` (Deployments).
    update_time: bool,
}

fn cond_of(v: Option<&Value>) -> Option<Cond> {
    let v = v?;
    let time = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
    };
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let transitioned = time("lastTransitionTime");
    Some(Cond {
        status: text("status"),
        reason: text("reason"),
        updated: time("lastUpdateTime").or(transitioned),
        transitioned,
    })
}

fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn now_seconds() -> jiff::Timestamp {
    let now = clock::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl AutoRollback {
    /// The hook of a controller writing with `client` and recording events as `component`,
    /// reading Namespaces from `informers`.
    pub fn new(informers: &Informers, client: Client, component: &str) -> Self {
        Self {
            recorder: Recorder::new(client.clone(), component, None),
            client,
            namespaces: informers.get(),
        }
    }

    /// Whether the workload opted in: its own annotation if it has one, else its Namespace's.
    fn enabled(&self, meta: &ObjectMeta) -> bool {
        if let Some(own) = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::ENABLED))
        {
            return own.trim().eq_ignore_ascii_case("true");
        }
        let ns = meta.namespace.as_deref().unwrap_or_default();
        self.namespaces
            .get(&key("", ns))
            .is_some_and(|n| opted_in(n.metadata.annotations.as_ref()))
    }

    /// The hook at the start of a Deployment's sync, over the ReplicaSets it controls. On a
    /// condition write `d` becomes the object written.
    pub async fn deployment(
        &self,
        d: &mut Deployment,
        rs_list: &[ReplicaSet],
        pods: &Informer<Pod>,
        max_unavailable: i32,
    ) -> Result<Outcome, kube::Error> {
        let enabled = self.enabled(&d.metadata);
        let marks = Marks::read(d.metadata.annotations.as_ref());
        if !enabled && marks.at.is_none() {
            return Ok(Outcome::Continue);
        }
        let status = serde_json::to_value(&d.status).unwrap_or(Value::Null);
        let spec = d.spec.as_ref();
        let template = spec.map(|s| s.template.clone()).unwrap_or_default();
        let new = find_new(&template, rs_list);
        let restarts = crash_restarts(d.metadata.annotations.as_ref());
        let revision_of = |rs: &ReplicaSet| Revision {
            number: rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            hash: rs
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POD_TEMPLATE_HASH))
                .cloned()
                .unwrap_or_default(),
            live: rs
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0),
            completed: false,
        };
        let (mut image_failures, mut crash_loops) = (0, 0);
        if let Some(i) = new {
            let uid = rs_list[i].metadata.uid.as_deref().unwrap_or_default();
            for pod in pods.store().controlled_by(uid) {
                match pod_failure(&pod, restarts) {
                    Some(PodFailure::ImagePull) => image_failures += 1,
                    Some(PodFailure::CrashLoop) => crash_loops += 1,
                    None => {}
                }
            }
        }
        let facts = Facts {
            enabled,
            paused: spec.and_then(|s| s.paused).unwrap_or(false),
            observed: d.status.as_ref().and_then(|s| s.observed_generation)
                >= d.metadata.generation,
            progressing: cond_of(condition(&status, "Progressing")),
            rolled_back: cond_of(condition(&status, CONDITION)),
            current: new.map(|i| revision_of(&rs_list[i])),
            old: rs_list
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != new)
                .map(|(_, rs)| revision_of(rs))
                .collect(),
            image_failures,
            crash_loops,
            threshold: max_unavailable,
            marks,
        };
        let subject = Subject {
            kind: WorkloadKind::Deployment,
            meta: &d.metadata,
            reference: events::reference(d),
            facts,
            update_time: true,
        };
        let targets = |hash: &str| {
            let rs = rs_list.iter().find(|rs| {
                rs.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(POD_TEMPLATE_HASH))
                    .is_some_and(|h| h == hash)
            })?;
            let mut template = serde_json::to_value(&rs.spec.as_ref()?.template).ok()?;
            if let Some(labels) = template
                .pointer_mut("/metadata/labels")
                .and_then(Value::as_object_mut)
            {
                labels.remove(POD_TEMPLATE_HASH);
            }
            Some((
                template,
                rs.metadata.annotations.clone().unwrap_or_default(),
            ))
        };
        let (outcome, written) = self.run(&subject, targets).await?;
        if let Some(obj) = written
            && let Ok(fresh) = serde_json::from_value::<Deployment>(obj)
        {
            *d = fresh;
        }
        Ok(outcome)
    }

    /// The hook at the start of a DaemonSet's or StatefulSet's sync, over the revisions and
    /// pods it controls.
    pub async fn with_revisions<K>(
        &self,
        kind: WorkloadKind,
        object: &K,
        rollout: RolloutState<'_>,
        revisions: &[Shared<ControllerRevision>],
        pods: &[Shared<Pod>],
    ) -> Result<Outcome, kube::Error>
    where
        K: kube::Resource<DynamicType = ()> + serde::Serialize,
    {
        let RolloutState {
            paused,
            threshold,
            completed,
        } = rollout;
        let meta = object.meta();
        let enabled = self.enabled(meta);
        let marks = Marks::read(meta.annotations.as_ref());
        if !enabled && marks.at.is_none() {
            return Ok(Outcome::Continue);
        }
        let json = serde_json::to_value(object).unwrap_or(Value::Null);
        let template = json
            .pointer("/spec/template")
            .cloned()
            .unwrap_or(Value::Null);
        let status = json.get("status").cloned().unwrap_or(Value::Null);
        let restarts = crash_restarts(meta.annotations.as_ref());
        // A pod names its revision by hash (DaemonSet) or by the revision's name (StatefulSet).
        fn hash_of(r: &ControllerRevision) -> &str {
            history::hash_of(&r.metadata).unwrap_or_default()
        }
        let revision_of_pod = |pod: &Pod| {
            let label = history::hash_of(&pod.metadata)?;
            revisions
                .iter()
                .find(|r| hash_of(r) == label || r.metadata.name.as_deref() == Some(label))
        };
        let current_cr = revisions.iter().find(|r| history::matches(r, &template));
        let mut live: HashMap<&str, i32> = HashMap::new();
        let (mut image_failures, mut crash_loops) = (0, 0);
        for pod in pods {
            let Some(r) = revision_of_pod(pod) else {
                continue;
            };
            if is_ready(pod) {
                *live.entry(hash_of(r)).or_default() += 1;
            }
            if current_cr.is_some_and(|c| c.metadata.uid == r.metadata.uid) {
                match pod_failure(pod, restarts) {
                    Some(PodFailure::ImagePull) => image_failures += 1,
                    Some(PodFailure::CrashLoop) => crash_loops += 1,
                    None => {}
                }
            }
        }
        let revision_of = |r: &ControllerRevision| {
            let hash = hash_of(r);
            Revision {
                number: r.revision,
                hash: hash.to_string(),
                live: live.get(hash).copied().unwrap_or(0),
                completed: completed.is_some() && r.metadata.name.as_deref() == completed,
            }
        };
        let observed = status.get("observedGeneration").and_then(Value::as_i64);
        let facts = Facts {
            enabled,
            paused,
            observed: observed >= meta.generation,
            progressing: cond_of(condition(&status, "Progressing")),
            rolled_back: cond_of(condition(&status, CONDITION)),
            current: current_cr.map(|r| revision_of(r)),
            old: revisions
                .iter()
                .filter(|r| {
                    Some(r.metadata.uid.as_deref()) != current_cr.map(|c| c.metadata.uid.as_deref())
                })
                .map(|r| revision_of(r))
                .collect(),
            image_failures,
            crash_loops,
            threshold,
            marks,
        };
        let subject = Subject {
            kind,
            meta,
            reference: events::reference(object),
            facts,
            update_time: false,
        };
        let targets = |hash: &str| {
            let r = revisions
                .iter()
                .find(|r| history::hash_of(&r.metadata) == Some(hash))?;
            Some((history::revision_template(r)?, BTreeMap::new()))
        };
        Ok(self.run(&subject, targets).await?.0)
    }

    /// Records a pending rollback, or decides and acts. Returns the outcome and the object a
    /// status write left.
    async fn run(
        &self,
        s: &Subject<'_>,
        target: impl Fn(&str) -> Option<(Value, BTreeMap<String, String>)>,
    ) -> Result<(Outcome, Option<Value>), kube::Error> {
        let annotations = s.meta.annotations.as_ref();
        let get = |k: &str| {
            annotations
                .and_then(|a| a.get(k))
                .cloned()
                .unwrap_or_default()
        };
        if needs_record(&s.facts.marks, s.facts.rolled_back.as_ref()) {
            let message = get(ROLLBACK_MESSAGE);
            let written = self
                .set_condition(s, "True", &get(ROLLBACK_REASON), &message)
                .await?;
            if written.is_some() {
                self.recorder
                    .record(&s.reference, EventType::Warning, CONDITION, &message);
            }
            return Ok((Outcome::Continue, written));
        }
        match decide(&s.facts) {
            Decision::Nothing => Ok((Outcome::Continue, None)),
            Decision::Suppressed { reason, message } => {
                tracing::info!(kind = ?s.kind, name = ?s.meta.name, reason = reason.as_str(), "{message}");
                let written = self.set_condition(s, "False", SUPPRESSED, &message).await?;
                if written.is_some() {
                    self.recorder
                        .record(&s.reference, EventType::Warning, SUPPRESSED, &message);
                }
                Ok((Outcome::Continue, written))
            }
            Decision::RollbackFailed { reason, message } => {
                tracing::info!(kind = ?s.kind, name = ?s.meta.name, reason = reason.as_str(), "{message}");
                let written = self.set_condition(s, "False", FAILED, &message).await?;
                if written.is_some() {
                    self.recorder
                        .record(&s.reference, EventType::Warning, FAILED, &message);
                }
                Ok((Outcome::Continue, written))
            }
            Decision::RollBack {
                reason,
                from,
                to,
                message,
            } => {
                let Some((template, rs_annotations)) = target(&to.hash) else {
                    return Ok((Outcome::Continue, None));
                };
                tracing::info!(kind = ?s.kind, name = ?s.meta.name, "{message}");
                let marks = [
                    (ROLLED_BACK_FROM, from.hash.clone()),
                    (ROLLED_BACK_TO, to.hash.clone()),
                    (ROLLED_BACK_AT, now_seconds().to_string()),
                    (ROLLBACK_REASON, reason.as_str().to_string()),
                    (ROLLBACK_MESSAGE, message),
                ];
                self.roll_back(s, template, rs_annotations, &marks).await?;
                Ok((Outcome::Stop, None))
            }
        }
    }

    fn api(&self, s: &Subject<'_>) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            s.meta.namespace.as_deref().unwrap_or_default(),
            &s.kind.resource(),
        )
    }

    /// Reads the workload fresh: `None` if the cache is behind it (the newer version's event
    /// brings the decision back with current facts).
    async fn fresh(&self, s: &Subject<'_>) -> Result<Option<DynamicObject>, kube::Error> {
        let name = s.meta.name.as_deref().unwrap_or_default();
        let fresh = self.api(s).get(name).await?;
        Ok((fresh.metadata.resource_version == s.meta.resource_version).then_some(fresh))
    }

    /// The one write that rolls back: the template restored and the marks set, conditional on
    /// the version the decision read.
    async fn roll_back(
        &self,
        s: &Subject<'_>,
        template: Value,
        rs_annotations: BTreeMap<String, String>,
        marks: &[(&str, String)],
    ) -> Result<(), kube::Error> {
        let Some(fresh) = self.fresh(s).await? else {
            return Ok(());
        };
        let own = fresh.metadata.annotations.clone().unwrap_or_default();
        let mut annotations = match s.kind {
            // kubectl's undo: the ReplicaSet's annotations, the Deployment's bookkeeping, and
            // (rollwright's) the Deployment's own `rollwright.io/` switches.
            WorkloadKind::Deployment => {
                let mut a = undo_annotations(own.clone(), rs_annotations);
                a.extend(
                    own.into_iter()
                        .filter(|(k, _)| k.starts_with("rollwright.io/")),
                );
                a
            }
            WorkloadKind::DaemonSet | WorkloadKind::StatefulSet => own,
        };
        for (k, v) in marks {
            annotations.insert((*k).to_string(), v.clone());
        }
        let annotations = serde_json::to_value(annotations).unwrap_or(Value::Null);
        let change = |v: &mut Value| {
            v["spec"]["template"] = template.clone();
            v["metadata"]["annotations"] = annotations.clone();
        };
        crate::util::update::object_once(&self.api(s), &fresh, change).await?;
        Ok(())
    }

    /// Sets the `RolledBack` condition (its transition time now: it stands for the latest
    /// rollback, which [`needs_record`] compares with).
    async fn set_condition(
        &self,
        s: &Subject<'_>,
        status: &str,
        reason: &str,
        message: &str,
    ) -> Result<Option<Value>, kube::Error> {
        let Some(fresh) = self.fresh(s).await? else {
            return Ok(None);
        };
        let now = now_seconds().to_string();
        let mut cond = json!({
            "type": CONDITION, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now,
        });
        if s.update_time {
            cond["lastUpdateTime"] = json!(now);
        }
        let change = |v: &mut Value| {
            let conditions = &mut v["status"]["conditions"];
            if !conditions.is_array() {
                *conditions = json!([]);
            }
            if let Some(list) = conditions.as_array_mut() {
                list.retain(|c| c.get("type").and_then(Value::as_str) != Some(CONDITION));
                list.push(cond.clone());
            }
        };
        let written = crate::util::update::status_once(&self.api(s), &fresh, change).await?;
        Ok(written.and_then(|w| serde_json::to_value(w).ok()))
    }
}
