//! An independent observer of a StatefulSet rollout, for tests (feature `test-support`), the
//! StatefulSet counterpart of [`crate::invariants`]: it watches the set's pods and checks, at
//! every event, the promises of seed 003, recording each violation with the state that broke it.
//!
//! - **maxUnavailable**: once every kept ordinal has had an available pod, at most
//!   `max_unavailable` kept ordinals are unavailable at once (missing, terminating, not ready
//!   for `minReadySeconds`, or restarting in place: a container whose status reports another
//!   image than its spec).
//! - **partition**: no pod below the partition is deleted, replaced or relabelled with another
//!   revision.
//! - **order** (`OrderedReady` only): updates (a pod starting to terminate, or its revision label
//!   changing in place) start from the highest ordinal down, a batch at a time: once one pod of
//!   a batch is back, nothing new starts until the whole batch is back (seed 003's choice 1).
//!   Scale-down deletes one pod at a time, the highest first.
//!
//! It knows nothing of the controller's code: it sees what any client sees. [`StatefulWatcher::
//! start`] returns only once its watch has listed, so everything the test does after is seen.

use crate::daemonset::update::restarting_in_place;
use api::pod::is_available;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};
use tokio::{sync::oneshot, task::JoinHandle};

const REVISION: &str = "controller-revision-hash";

/// The promise being checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// `spec.ordinals.start`.
    pub start: i32,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `partition` (relative to `start`).
    pub partition: i32,
    /// `maxUnavailable`, resolved.
    pub max_unavailable: i32,
    /// `OrderedReady`.
    pub ordered: bool,
    /// `minReadySeconds`.
    pub min_ready_seconds: i32,
}

/// A pod as last seen, with what it was when its update started.
#[derive(Clone, Debug)]
struct Seen {
    pod: Pod,
    ordinal: i32,
}

#[derive(Default)]
struct State {
    rule: Option<Rule>,
    pods: BTreeMap<String, Seen>,
    /// `(uid, revision)` of every pod below the partition when the rule was set.
    protected: BTreeMap<String, (String, String)>,
    /// Updates in flight: ordinal -> `(uid, revision)` when the update started.
    in_flight: BTreeMap<i32, (String, String)>,
    /// A pod of the current batch is back: no new update may start until all are.
    batch_closed: bool,
    /// The template changed while a batch was in flight: that batch is superseded (its pods
    /// head for another revision now, and the next batch may start beside them) until every
    /// update in flight is back.
    superseded: bool,
    armed: bool,
    violations: Vec<String>,
    events: usize,
    max_unavailable_seen: i32,
    update_order: Vec<i32>,
}

/// A running watcher; read it with [`StatefulWatcher::violations`] at the end.
pub struct StatefulWatcher {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Drop for StatefulWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn ordinal_of(set: &str, name: &str) -> Option<i32> {
    let (parent, digits) = name.rsplit_once('-')?;
    (parent == set).then(|| digits.parse().ok())?
}

fn revision(pod: &Pod) -> String {
    pod.labels().get(REVISION).cloned().unwrap_or_default()
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

impl StatefulWatcher {
    /// Watches the pods of set `set` in `namespace` (those matching the label selector
    /// `selector`) and checks `rule` at every event. Returns once the watch has listed.
    pub async fn start(
        client: Client,
        namespace: &str,
        set: &str,
        selector: &str,
        rule: Rule,
    ) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let api: Api<Pod> = Api::namespaced(client, namespace);
        let cfg = watcher::Config::default().labels(selector);
        let s = Arc::clone(&state);
        let set = set.to_string();
        let (listed_tx, listed_rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed_tx);
            let mut events = watcher(api, cfg).default_backoff().boxed();
            while let Some(e) = events.next().await {
                let mut st = lock(&s);
                match e {
                    Ok(watcher::Event::InitApply(p)) => {
                        if let Some(ordinal) = ordinal_of(&set, &p.name_any()) {
                            st.pods.insert(p.name_any(), Seen { pod: p, ordinal });
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Apply(p)) => {
                        if let Some(ordinal) = ordinal_of(&set, &p.name_any()) {
                            observe(&mut st, Some(p), ordinal);
                        }
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        if let Some(ordinal) = ordinal_of(&set, &p.name_any()) {
                            let name = p.name_any();
                            check_gone(&mut st, &p, ordinal);
                            st.pods.remove(&name);
                            check(&mut st);
                        }
                    }
                    _ => {}
                }
            }
        });
        let watcher = Self { state, task };
        watcher.set_rule(rule);
        let _ = listed_rx.await;
        watcher.set_rule(rule);
        watcher
    }

    /// Changes the promise (a scaling step or a new partition). The protected pods and the
    /// availability floor are taken afresh.
    pub fn set_rule(&self, rule: Rule) {
        let mut st = lock(&self.state);
        st.rule = Some(rule);
        st.armed = false;
        st.in_flight.clear();
        st.batch_closed = false;
        let below = rule.start + rule.partition;
        st.protected = st
            .pods
            .iter()
            .filter(|(_, s)| s.ordinal >= rule.start && s.ordinal < below)
            .map(|(n, s)| (n.clone(), (uid(&s.pod), revision(&s.pod))))
            .collect();
        check(&mut st);
    }

    /// The test changed the template: a batch in flight is superseded, and a new batch of the
    /// new revision may start before the old one is back (seed 003's choice 1 orders batches of
    /// one rollout; a new template is a new rollout, and a pod stuck on a broken revision is
    /// replaced by it, SEMANTICS.md's broken-rollout recovery).
    pub fn template_changed(&self) {
        let mut st = lock(&self.state);
        if !st.in_flight.is_empty() {
            st.superseded = true;
        }
    }

    /// Moves the partition mid-rollout, keeping the availability floor and the updates in
    /// flight: the pods below `partition` that are live now are protected from here on. Call it
    /// once the controller has observed the partition (raising it while the controller still
    /// acts on the lower one is not a breach); before, a lower partition may be set at once.
    pub fn set_partition(&self, partition: i32) {
        let mut st = lock(&self.state);
        let Some(mut rule) = st.rule else { return };
        rule.partition = partition;
        st.rule = Some(rule);
        let below = rule.start + partition;
        st.protected = st
            .pods
            .iter()
            .filter(|(_, s)| s.ordinal >= rule.start && s.ordinal < below)
            .filter(|(_, s)| !terminating(&s.pod))
            .map(|(n, s)| (n.clone(), (uid(&s.pod), revision(&s.pod))))
            .collect();
        check(&mut st);
    }

    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// How many events were checked.
    pub fn events_seen(&self) -> usize {
        lock(&self.state).events
    }

    /// The most kept ordinals seen unavailable at once while armed.
    pub fn max_unavailable_seen(&self) -> i32 {
        lock(&self.state).max_unavailable_seen
    }

    /// The ordinals whose update started, in the order they started.
    pub fn update_order(&self) -> Vec<i32> {
        lock(&self.state).update_order.clone()
    }
}

/// A pod event: record update starts and completions, then check.
fn observe(st: &mut State, pod: Option<Pod>, ordinal: i32) {
    let Some(pod) = pod else { return };
    let name = pod.name_any();
    let before = st.pods.get(&name).map(|s| s.pod.clone());
    if let Some(rule) = st.rule {
        let kept = ordinal >= rule.start && ordinal < rule.start + rule.replicas;
        let was = before.as_ref();
        let started_terminating = terminating(&pod) && !was.is_some_and(terminating);
        let relabelled = was.is_some_and(|w| {
            uid(w) == uid(&pod) && revision(w) != revision(&pod) && !terminating(&pod)
        });
        let finished = matches!(api::pod::phase(&pod), "Succeeded" | "Failed");
        if let Some((puid, prev)) = st.protected.get(&name).cloned()
            && (uid(&pod) != puid || revision(&pod) != prev || terminating(&pod))
            && !finished
        {
            st.violations.push(format!(
                "{name} below the partition was touched: uid {puid} -> {}, revision {prev} -> {}, terminating {}",
                uid(&pod),
                revision(&pod),
                terminating(&pod)
            ));
        }
        if kept && (started_terminating || relabelled) && !finished {
            let (u, r) = was.map(|w| (uid(w), revision(w))).unwrap_or_default();
            update_started(st, &rule, ordinal, u, r);
        }
        if !kept && started_terminating && rule.ordered {
            let others: Vec<String> = st
                .pods
                .values()
                .filter(|s| s.ordinal >= rule.start + rule.replicas && s.ordinal != ordinal)
                .filter(|s| s.ordinal > ordinal || terminating(&s.pod))
                .map(|s| s.pod.name_any())
                .collect();
            if !others.is_empty() {
                st.violations.push(format!(
                    "{name} deleted for scale-down while {others:?} are still there"
                ));
            }
        }
    }
    st.pods.insert(name, Seen { pod, ordinal });
    complete_updates(st);
    check(st);
}

/// A pod gone: deleted without first terminating gracefully counts as an update start.
fn check_gone(st: &mut State, pod: &Pod, ordinal: i32) {
    let Some(rule) = st.rule else { return };
    let name = pod.name_any();
    if st.protected.contains_key(&name) {
        st.violations
            .push(format!("{name} below the partition was deleted"));
    }
    let was_terminating = st.pods.get(&name).is_some_and(|s| terminating(&s.pod));
    if matches!(api::pod::phase(pod), "Succeeded" | "Failed") {
        return;
    }
    let kept = ordinal >= rule.start && ordinal < rule.start + rule.replicas;
    if kept && !was_terminating && !st.in_flight.contains_key(&ordinal) {
        update_started(st, &rule, ordinal, uid(pod), revision(pod));
    }
}

fn update_started(st: &mut State, rule: &Rule, ordinal: i32, uid: String, revision: String) {
    if let Some(started) = st.in_flight.get_mut(&ordinal) {
        // Replaced again before it came back (a rollback, or a fix of a bad revision): the
        // same update, now heading for another revision.
        *started = (uid, revision);
        return;
    }
    st.update_order.push(ordinal);
    if rule.ordered && !st.in_flight.is_empty() {
        let lowest = st.in_flight.keys().next().copied().unwrap_or(ordinal);
        if st.batch_closed && !st.superseded {
            st.violations.push(format!(
                "ordinal {ordinal} started updating while the batch {:?} is still coming back",
                st.in_flight.keys().collect::<Vec<_>>()
            ));
        } else if ordinal > lowest {
            st.violations.push(format!(
                "ordinal {ordinal} started updating out of order, after {lowest}"
            ));
        }
    }
    if st.in_flight.is_empty() {
        st.batch_closed = false;
        st.superseded = false;
    }
    st.in_flight.insert(ordinal, (uid, revision));
}

/// Updates whose pod is back: another uid or revision than when it started, ready, not
/// terminating, not restarting.
fn complete_updates(st: &mut State) {
    let Some(rule) = st.rule else { return };
    let now = clock::now();
    let done: Vec<i32> = st
        .in_flight
        .iter()
        .filter(|(ordinal, (u, r))| {
            st.pods.values().any(|s| {
                s.ordinal == **ordinal
                    && (uid(&s.pod) != *u || revision(&s.pod) != *r)
                    && !terminating(&s.pod)
                    && !restarting_in_place(&s.pod)
                    && is_available(&s.pod, rule.min_ready_seconds, now)
            })
        })
        .map(|(o, _)| *o)
        .collect();
    for o in done {
        st.in_flight.remove(&o);
        st.batch_closed = true;
    }
}

fn check(st: &mut State) {
    st.events += 1;
    let Some(rule) = st.rule else { return };
    let now = clock::now();
    let by_ordinal: BTreeMap<i32, &Pod> = st
        .pods
        .values()
        .filter(|s| !terminating(&s.pod))
        .map(|s| (s.ordinal, &s.pod))
        .collect();
    let unavailable: BTreeSet<i32> = (rule.start..rule.start + rule.replicas)
        .filter(|o| {
            by_ordinal.get(o).is_none_or(|p| {
                restarting_in_place(p) || !is_available(p, rule.min_ready_seconds, now)
            })
        })
        .collect();
    let count = i32::try_from(unavailable.len()).unwrap_or(i32::MAX);
    if count == 0 {
        st.armed = true;
    }
    if !st.armed {
        return;
    }
    st.max_unavailable_seen = st.max_unavailable_seen.max(count);
    if count > rule.max_unavailable {
        st.violations.push(format!(
            "{count} ordinals unavailable > maxUnavailable {}: {unavailable:?}",
            rule.max_unavailable
        ));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::core::v1::{PodCondition, PodStatus},
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    };

    fn pod(ordinal: i32, uid: &str, revision: &str, ready: bool, deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("web-{ordinal}")),
                uid: Some(uid.into()),
                labels: Some([(REVISION.to_string(), revision.to_string())].into()),
                deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// Three ready pods on revision `a` under `rule`.
    fn state(rule: Rule) -> State {
        let mut st = State {
            rule: Some(rule),
            ..Default::default()
        };
        for o in 0..3 {
            observe(&mut st, Some(pod(o, &format!("u{o}"), "a", true, false)), o);
        }
        let below = rule.start + rule.partition;
        st.protected = st
            .pods
            .iter()
            .filter(|(_, s)| s.ordinal < below)
            .map(|(n, s)| (n.clone(), (uid(&s.pod), revision(&s.pod))))
            .collect();
        st
    }

    fn rule(max_unavailable: i32, partition: i32, ordered: bool) -> Rule {
        Rule {
            start: 0,
            replicas: 3,
            partition,
            max_unavailable,
            ordered,
            min_ready_seconds: 0,
        }
    }

    #[test]
    fn too_many_unavailable_is_caught() {
        let mut st = state(rule(1, 0, false));
        observe(&mut st, Some(pod(2, "u2", "a", true, true)), 2);
        assert!(st.violations.is_empty());
        observe(&mut st, Some(pod(1, "u1", "a", true, true)), 1);
        assert_eq!(st.violations.len(), 1, "{:?}", st.violations);
        assert_eq!(st.max_unavailable_seen, 2);
    }

    #[test]
    fn a_pod_below_the_partition_touched_is_caught() {
        let mut st = state(rule(3, 2, false));
        observe(&mut st, Some(pod(2, "u2", "a", true, true)), 2);
        assert!(st.violations.is_empty());
        observe(&mut st, Some(pod(1, "u1", "b", true, false)), 1);
        assert_eq!(st.violations.len(), 1, "{:?}", st.violations);
    }

    #[test]
    fn ordered_ready_out_of_order_or_across_batches_is_caught() {
        // Lower before higher.
        let mut st = state(rule(2, 0, true));
        observe(&mut st, Some(pod(1, "u1", "a", true, true)), 1);
        observe(&mut st, Some(pod(2, "u2", "a", true, true)), 2);
        assert_eq!(st.violations.len(), 1, "{:?}", st.violations);

        // Choice 2 under OrderedReady: the next pod goes as soon as one of the batch is back.
        let mut st = state(rule(2, 0, true));
        observe(&mut st, Some(pod(2, "u2", "a", true, true)), 2);
        observe(&mut st, Some(pod(1, "u1", "a", true, true)), 1);
        observe(&mut st, Some(pod(2, "n2", "b", true, false)), 2);
        assert!(st.violations.is_empty(), "{:?}", st.violations);
        observe(&mut st, Some(pod(0, "u0", "a", true, true)), 0);
        assert_eq!(st.violations.len(), 1, "{:?}", st.violations);

        // Choice 1 is fine: the next batch once the whole batch is back.
        let mut st = state(rule(2, 0, true));
        observe(&mut st, Some(pod(2, "u2", "a", true, true)), 2);
        observe(&mut st, Some(pod(1, "u1", "a", true, true)), 1);
        observe(&mut st, Some(pod(1, "n1", "b", true, false)), 1);
        observe(&mut st, Some(pod(2, "n2", "b", true, false)), 2);
        observe(&mut st, Some(pod(0, "u0", "a", true, true)), 0);
        assert!(st.violations.is_empty(), "{:?}", st.violations);
        assert_eq!(st.update_order, [2, 1, 0]);
    }

    #[test]
    fn in_place_updates_count_as_starts() {
        let mut st = state(rule(1, 0, true));
        observe(&mut st, Some(pod(2, "u2", "b", true, false)), 2);
        observe(&mut st, Some(pod(1, "u1", "b", true, false)), 1);
        assert_eq!(st.update_order, [2, 1]);
    }
}
