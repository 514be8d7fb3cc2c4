//! One sync of one StatefulSet (upstream's `UpdateStatefulSet` in `stateful_set_control.go`):
//! the history first, then the scaling pass and the rolling update step on the same snapshot,
//! history truncation, and the status. The decisions are the pure functions of [`super::pods`],
//! [`super::update`], [`super::volumes`] and [`super::status`]; this module reads the snapshot
//! into their terms and carries their answers out through [`crate::util::pod_control`] (pods) and
//! [`super::identity`] (claims, identity labels).

use super::{
    Config, Error, Set,
    identity::Identity,
    pods::{self, Facts, ScalePlan, Slot, Step},
    status, update, volumes,
};
use crate::{
    disruption_gate::{self, DisruptionGate, Refusal},
    history,
    pacing::{self, Budget, Hold, Rounding},
    runtime::Action,
    util::api_error::is_status,
    util::expectations::PodExpectations,
    util::owners::{Owners, same_but_status},
    util::pod_control::{PodChange, PodControl, Target},
};
use events::{EventType, Recorder};
use informer::{Cached, Shared};
use k8s_openapi::{
    api::{
        apps::v1::{ControllerRevision, StatefulSet},
        core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

/// What a sync reads of a set's children from the caches.
#[derive(Clone, Debug, Default)]
pub struct Children {
    /// The pods the set controls.
    pub pods: Vec<Shared<Pod>>,
    /// The ControllerRevisions it controls.
    pub revisions: Vec<Shared<ControllerRevision>>,
    /// The claims of its namespace, by name.
    pub claims: HashMap<String, Shared<PersistentVolumeClaim>>,
}

/// The revision a pod is labelled with (a ControllerRevision's name, as upstream).
pub fn revision_of(pod: &Cached<Pod>) -> &str {
    pod.facts().revision_hash.as_deref().unwrap_or("")
}

/// The revisions one sync works with.
struct Revisions {
    /// The revision of the set's template (upstream's `updateRevision`).
    update: Shared<ControllerRevision>,
    /// The revision the set rolls away from (`status.currentRevision`, or `update`).
    current: Shared<ControllerRevision>,
    /// Every revision the set controls, by name.
    by_name: HashMap<String, Shared<ControllerRevision>>,
    /// What [`history::construct`] found.
    constructed: history::Constructed,
}

fn name_of(r: &ControllerRevision) -> String {
    r.metadata.name.clone().unwrap_or_default()
}

/// One sync's view of a set: what it decides on, derived once.
struct View<'a> {
    set: &'a Set,
    revisions: &'a Revisions,
    update_name: String,
    current_name: String,
    claims: &'a HashMap<String, Shared<PersistentVolumeClaim>>,
    now: jiff::Timestamp,
}

impl View<'_> {
    // Per-pod facts come from the cache, derived once per watch event rather than once per
    // pod per sync (a sync of a 1,000-pod set reads them all).

    fn ready(&self, pod: &Cached<Pod>) -> bool {
        let facts = pod.facts();
        facts.running && facts.is_ready() && !facts.restarting_in_place
    }

    /// How long until a ready pod is available (zero: it is); `None` if it is not ready.
    fn until_available(&self, pod: &Cached<Pod>) -> Option<Duration> {
        if !self.ready(pod) {
            return None;
        }
        let d = pod
            .facts()
            .until_available(self.set.min_ready_seconds(), self.now)?;
        Some(Duration::try_from(d).unwrap_or(Duration::ZERO))
    }

    fn available(&self, pod: &Cached<Pod>) -> bool {
        self.until_available(pod).is_some_and(|d| d.is_zero())
    }

    /// The claims of `ordinal` whose owners the retention policy would change.
    fn claims_to_own(
        &self,
        pod: &Pod,
        ordinal: i32,
        scaled_down: bool,
    ) -> Vec<(Shared<PersistentVolumeClaim>, Vec<OwnerReference>)> {
        volumes::template_names(&self.set.sts)
            .filter_map(|t| {
                let claim = self
                    .claims
                    .get(&volumes::claim_name(t, self.set.name(), ordinal))?;
                let owners = volumes::owner_update(claim, &self.set.sts, pod, scaled_down)?;
                Some((Arc::clone(claim), owners))
            })
            .collect()
    }

    /// Whether a claim `ordinal`'s pod mounts is missing.
    fn claims_missing(&self, ordinal: i32) -> bool {
        volumes::template_names(&self.set.sts).any(|t| {
            !self
                .claims
                .contains_key(&volumes::claim_name(t, self.set.name(), ordinal))
        })
    }

    fn facts(&self, pod: &Cached<Pod>, ordinal: i32, kept: bool) -> Facts {
        let ready = self.ready(pod);
        let updated = revision_of(pod) == self.update_name;
        let claims_off = !self.claims_to_own(pod, ordinal, !kept).is_empty();
        Facts {
            finished: pod.facts().terminal,
            terminating: pod.facts().deleting,
            ready,
            available: self.available(pod),
            needs_repair: claims_off
                || (kept
                    && (!pods::identity_matches(&self.set.sts, pod)
                        || self.claims_missing(ordinal))),
            replaceable: kept
                && self.set.replaces_old_pods()
                && ordinal >= self.set.partition_ordinal()
                && !updated,
        }
    }

    /// The template and revision name a new pod of `ordinal` gets: below the partition the
    /// current revision's, else the update revision's (upstream's `newVersionedStatefulSetPod`).
    fn template_for(&self, ordinal: i32) -> (PodTemplateSpec, &str) {
        let spec_template = || {
            self.set
                .sts
                .spec
                .as_ref()
                .map(|s| s.template.clone())
                .unwrap_or_default()
        };
        if self.set.rolling() && ordinal < self.set.partition_ordinal() {
            let current = history::revision_template(&self.revisions.current)
                .and_then(|t| serde_json::from_value(t).ok())
                .unwrap_or_else(spec_template);
            (current, &self.current_name)
        } else {
            (spec_template(), &self.update_name)
        }
    }

    /// The in-place patch that moves `pod` to the update revision, if the set allows it and
    /// only images differ.
    fn in_place_patch(&self, pod: &Cached<Pod>) -> Option<Value> {
        if !self.set.in_place {
            return None;
        }
        let old = history::revision_template(self.revisions.by_name.get(revision_of(pod))?)?;
        let new = history::revision_template(&self.revisions.update)?;
        let mut patch = update::in_place_patch(
            &old,
            &new,
            &self.update_name,
            pod.metadata.resource_version.as_deref(),
        )?;
        // The interval's clock must outlive this process: the pod records when it was updated.
        if self.set.pacing.has_interval() {
            patch["metadata"]["annotations"] = pacing::in_place_stamp(clock::now());
        }
        Some(patch)
    }

    /// What pacing lets start now ([`crate::pacing`]), counted over the kept ordinals from
    /// the pods alone. In flight: a pod of the update revision not yet available, and, at or
    /// above the partition (where a new pod is of the update revision), a pod being deleted or
    /// a missing one. The last update started at the newest creation or in-place update of a
    /// pod of the update revision, or the deletion of a pod at or above the partition; a
    /// missing one is created by this very sync, so counts as starting now.
    fn budget(&self, kept: &BTreeMap<i32, Shared<Pod>>) -> Budget {
        let pacing = &self.set.pacing;
        if !pacing.is_set() {
            return Budget::unlimited(self.now);
        }
        let partition = self.set.partition_ordinal();
        let mut updating = 0;
        let mut last = None;
        for ordinal in self.set.ordinals().iter() {
            let replaced = ordinal >= partition;
            match kept.get(&ordinal) {
                None if replaced => {
                    updating += 1;
                    last = last.max(Some(self.now));
                }
                None => {}
                Some(pod) if pod.facts().deleting && replaced => {
                    updating += 1;
                    last = last.max(pacing::deleted_at(pod));
                }
                Some(pod) if pod.facts().deleting => {}
                Some(pod) if revision_of(pod) == self.update_name => {
                    last = last.max(pacing::update_started(pod));
                    updating += i32::from(!self.available(pod));
                }
                Some(_) => {}
            }
        }
        pacing.budget(
            self.set.ordinals().replicas,
            Rounding::Down,
            updating,
            last,
            self.now,
        )
    }
}

/// The controller's writing half: it turns one set and its children into API calls. The
/// watches that feed it live in [`run`].
pub struct Syncer {
    client: Client,
    recorder: Recorder,
    expectations: PodExpectations,
    /// Budget-aware updates ([`crate::disruption_gate`]), when the controller has a gate.
    gate: Option<Arc<DisruptionGate>>,
    /// The controller's parsed sets, which hold each status write until the watch delivers it
    /// ([`Owners::hold_newer`]).
    sets: Option<Arc<Owners<Set>>>,
}

impl Syncer {
    /// A syncer on `client`.
    pub fn new(client: Client, config: &Config) -> Self {
        Self {
            recorder: Recorder::new(client.clone(), "statefulset-controller", None),
            client,
            expectations: PodExpectations::new(config.expectations_ttl),
            gate: None,
            sets: None,
        }
    }

    /// The syncer holding its status writes in the controller's `sets`.
    pub fn holding(mut self, sets: Arc<Owners<Set>>) -> Self {
        self.sets = Some(sets);
        self
    }

    /// The syncer asking the budgets before updates of the sets that opt in.
    pub fn with_gate(mut self, gate: Arc<DisruptionGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The pods of `wanted` (in order) that the budgets selecting them let go for an update
    /// now, and the refusal that holds the rest; all of them when the set does not ask
    /// ([`crate::disruption_gate`]).
    async fn ask_budgets(
        &self,
        set: &Set,
        wanted: Vec<i32>,
        kept: &BTreeMap<i32, Shared<Pod>>,
        held: &mut Option<Refusal>,
    ) -> Result<Vec<i32>, Error> {
        let Some(gate) = self
            .gate
            .as_ref()
            .filter(|g| g.honors(set.sts.metadata.annotations.as_ref()))
        else {
            return Ok(wanted);
        };
        let reference = events::reference(&set.sts);
        let admitted = gate
            .ask(&self.recorder, &reference, &set.key(), wanted, |o| {
                kept.get(o).cloned()
            })
            .await?;
        if held.is_none() {
            *held = admitted.refused;
        }
        Ok(admitted.allowed)
    }

    /// The expectations the watch handlers lower.
    pub fn expectations(&self) -> &PodExpectations {
        &self.expectations
    }

    /// Whether the cache shows every write of the set's previous syncs, so that a sync may act
    /// on it; ask before reading the pods ([`PodExpectations::satisfied`]).
    pub fn satisfied(&self, key: &str) -> bool {
        self.expectations.satisfied(key)
    }

    async fn revisions(
        &self,
        set: &Set,
        revisions: Vec<Shared<ControllerRevision>>,
    ) -> Result<Revisions, Error> {
        let key = set.key();
        let ns = set.sts.namespace().unwrap_or_default();
        let template = set
            .sts
            .spec
            .as_ref()
            .map(|s| serde_json::to_value(&s.template))
            .transpose()
            .map_err(|e| Error::Invalid(key.clone(), e.to_string()))?
            .unwrap_or(Value::Null);
        let collision_count = set.sts.status.as_ref().and_then(|s| s.collision_count);
        let owner = history::Owner {
            meta: &set.sts.metadata,
            api_version: "apps/v1",
            kind: "StatefulSet",
            template: &template,
            collision_count,
        };
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &ns);
        let mut by_name: HashMap<String, Shared<ControllerRevision>> = revisions
            .iter()
            .map(|r| (name_of(r), Arc::clone(r)))
            .collect();
        let constructed = match history::construct(&api, &owner, revisions).await {
            Err(history::Error::Collision(name)) => {
                let sets: Api<StatefulSet> = Api::namespaced(self.client.clone(), &ns);
                history::bump_collision_count(&sets, set.name(), collision_count).await?;
                return Err(history::Error::Collision(name).into());
            }
            other => other?,
        };
        let update = Arc::clone(&constructed.current);
        by_name.insert(name_of(&update), Arc::clone(&update));
        let current = set
            .sts
            .status
            .as_ref()
            .and_then(|s| s.current_revision.as_deref())
            .and_then(|n| by_name.get(n))
            .cloned()
            .unwrap_or_else(|| Arc::clone(&update));
        Ok(Revisions {
            update,
            current,
            by_name,
            constructed,
        })
    }

    /// Brings `set` one step closer to its spec. The contract:
    /// - the history is brought up to date first (the update revision exists before any pod
    ///   is labelled with it);
    /// - nothing is created, deleted or patched while the cache has not yet shown the previous
    ///   sync's own writes (`expectations_met`, [`Self::satisfied`] asked before `children` were
    ///   read); the status is refreshed anyway;
    /// - the scaling pass ([`pods::plan_scaling`]) runs before the rolling update step
    ///   ([`update::plan`]), and the update step only if the scaling pass did not stop at a pod
    ///   (`OrderedReady`), on the same snapshot: the scaling pass never makes an available pod
    ///   unavailable, so the update step's count stays right;
    /// - returns a requeue for the next moment time alone changes something
    ///   (`minReadySeconds`, stale expectations), else waits for a watch event.
    pub async fn sync(
        &self,
        set: &Set,
        children: Children,
        expectations_met: bool,
    ) -> Result<Action, Error> {
        let key = set.key();
        if set.sts.metadata.deletion_timestamp.is_some() {
            // The garbage collector takes the pods; their claims follow the retention policy
            // through the owner references already in place.
            return Ok(Action::await_change());
        }
        let revisions = self.revisions(set, children.revisions).await?;
        let view = View {
            set,
            revisions: &revisions,
            update_name: name_of(&revisions.update),
            current_name: name_of(&revisions.current),
            claims: &children.claims,
            now: clock::now(),
        };
        let ordinals = set.ordinals();
        let mut kept: BTreeMap<i32, Shared<Pod>> = BTreeMap::new();
        let mut condemned: BTreeMap<i32, Shared<Pod>> = BTreeMap::new();
        for pod in &children.pods {
            match pods::ordinal_of(set.name(), pod) {
                Some(o) if ordinals.contains(o) => {
                    kept.insert(o, Arc::clone(pod));
                }
                Some(o) => {
                    condemned.insert(o, Arc::clone(pod));
                }
                None => {}
            }
        }
        let replicas: Vec<Slot> = ordinals
            .iter()
            .map(|o| Slot {
                ordinal: o,
                pod: kept.get(&o).map(|p| view.facts(p, o, true)),
            })
            .collect();
        let gone: Vec<Slot> = condemned
            .iter()
            .rev()
            .map(|(o, p)| Slot {
                ordinal: *o,
                pod: Some(view.facts(p, *o, false)),
            })
            .collect();

        let mut requeue = Action::await_change();
        let mut result = Ok(());
        // What holds the rollout back, when this sync judged it (`None`: it did not, and the
        // stored condition stands).
        let mut pace: Option<Option<Hold>> = None;
        // What a disruption budget holds back, when this sync asked the budgets.
        let mut held: Option<Refusal> = None;
        if expectations_met {
            let mut plan = pods::plan_scaling(set.ordered(), &replicas, &gone);
            // Replacing a not-ready pod of an old revision starts an update like any other:
            // the scaling pass's replacements are paced first, the update step's after them.
            let mut budget = view.budget(&kept);
            pace_replacements(&mut plan, &mut budget);
            result = self
                .budget_replacements(set, &mut plan, &kept, &mut held)
                .await;
            let acted = plan.steps.iter().map(|s| ordinal_of_step(*s)).collect();
            if result.is_ok() {
                result = self.scale(&view, &plan, &kept, &condemned).await;
            }
            if result.is_ok() && plan.blocked_at.is_none() && set.replaces_old_pods() {
                result = self
                    .roll(&view, &replicas, &kept, &acted, &mut budget, &mut held)
                    .await;
            }
            if let Some(wait) = budget.requeue() {
                requeue.requeue_by(wait);
            }
            pace = Some(budget.hold());
            if result.is_ok() {
                result = self.truncate_history(&view, &children.pods).await;
            }
        } else if let Some(d) = self.expectations.expires_in(&key) {
            requeue.requeue_by(d);
        }
        let status = self
            .write_status(
                &view,
                kept.values().chain(condemned.values()),
                pace.as_ref().map(Option::as_ref),
                expectations_met.then_some(held.as_ref()),
                &mut requeue,
            )
            .await;
        result?;
        status?;
        Ok(requeue)
    }

    /// Carries out the scaling pass: repairs, creations and replacements first, then (if they
    /// all succeeded) the deletions of condemned pods.
    async fn scale(
        &self,
        view: &View<'_>,
        plan: &ScalePlan,
        kept: &BTreeMap<i32, Shared<Pod>>,
        condemned: &BTreeMap<i32, Shared<Pod>>,
    ) -> Result<(), Error> {
        let set = view.set;
        let key = set.key();
        let control = self.pod_control(set, &key);
        let identity = Identity::new(&self.client, &self.recorder, set);
        let mut errors: Vec<String> = Vec::new();
        let mut creates = Vec::new();
        let mut replacements = Vec::new();
        let mut condemn = Vec::new();
        for step in &plan.steps {
            match *step {
                Step::Create(o) => creates.push(o),
                Step::Recreate(o) => {
                    if let Some(p) = kept.get(&o) {
                        self.recorder.record(
                            &events::reference(&set.sts),
                            EventType::Warning,
                            "RecreatingFailedPod",
                            format!(
                                "StatefulSet {}/{} is recreating failed Pod {}",
                                set.sts.namespace().unwrap_or_default(),
                                set.name(),
                                p.name_any()
                            ),
                        );
                        replacements.push(PodChange::Delete(Target::of(p)));
                    }
                }
                Step::Replace(o) => {
                    if let Some(p) = kept.get(&o) {
                        replacements.push(self.replacement(view, p));
                    }
                }
                Step::Condemn(o) => {
                    if let Some(p) = condemned.get(&o) {
                        condemn.push(PodChange::Delete(Target::of(p)));
                    }
                }
                Step::Repair(o) => {
                    let (pod, scaled_down) = match (kept.get(&o), condemned.get(&o)) {
                        (Some(p), _) => (p, false),
                        (None, Some(p)) => (p, true),
                        (None, None) => continue,
                    };
                    if let Err(e) = self.repair(view, &identity, pod, o, scaled_down).await {
                        errors.push(e.to_string());
                    }
                }
            }
        }
        errors.extend(self.create(view, &control, &identity, creates).await);
        errors.extend(replace(&control, set.ordered(), replacements).await);
        if errors.is_empty() {
            errors.extend(replace(&control, set.ordered(), condemn).await);
        }
        match errors.first() {
            None => Ok(()),
            Some(first) => Err(Error::Pods {
                key,
                failed: errors.len(),
                first: first.clone(),
            }),
        }
    }

    /// Fixes a pod's identity labels, creates its missing claims, and sets its claims' owners.
    async fn repair(
        &self,
        view: &View<'_>,
        identity: &Identity<'_>,
        pod: &Pod,
        ordinal: i32,
        scaled_down: bool,
    ) -> Result<(), Error> {
        if !scaled_down {
            if !pods::identity_matches(&view.set.sts, pod) {
                identity.repair_identity(pod, ordinal).await?;
            }
            if view.claims_missing(ordinal) {
                identity
                    .create_claims(ordinal, |n| view.claims.get(n).cloned())
                    .await?;
            }
        }
        for (claim, owners) in view.claims_to_own(pod, ordinal, scaled_down) {
            identity.set_claim_owners(&claim, owners).await?;
        }
        Ok(())
    }

    /// Creates the pods of `ordinals` (claims first), in slow-start batches; returns the
    /// failures.
    async fn create(
        &self,
        view: &View<'_>,
        control: &PodControl<'_>,
        identity: &Identity<'_>,
        ordinals: Vec<i32>,
    ) -> Vec<String> {
        let pod = |o: i32| async move {
            identity
                .create_claims(o, |n| view.claims.get(n).cloned())
                .await?;
            let (template, revision) = view.template_for(o);
            Ok::<_, Error>(pods::new_pod(&view.set.sts, &template, revision, o))
        };
        let writes = control.create(ordinals, 1, pod).await;
        writes.errors.iter().map(Error::to_string).collect()
    }

    fn replacement(&self, view: &View<'_>, pod: &Shared<Pod>) -> PodChange {
        match view.in_place_patch(pod) {
            Some(patch) => PodChange::InPlace(Target::of(pod), patch),
            None => PodChange::Delete(Target::of(pod)),
        }
    }

    /// The set's pod writes: its event words, its expectations, deletes by uid.
    fn pod_control<'a>(&'a self, set: &Set, key: &'a str) -> PodControl<'a> {
        PodControl::new(
            &self.client,
            &self.recorder,
            &set.sts,
            key,
            &self.expectations,
        )
        .for_stateful_set()
    }

    /// The rolling update step: replaces the pods [`update::plan`] picks, as far as pacing
    /// lets it (`budget`).
    async fn roll(
        &self,
        view: &View<'_>,
        replicas: &[Slot],
        kept: &BTreeMap<i32, Shared<Pod>>,
        acted: &HashSet<i32>,
        budget: &mut Budget,
        held: &mut Option<Refusal>,
    ) -> Result<(), Error> {
        let set = view.set;
        let key = set.key();
        let max_unavailable = set
            .max_unavailable()
            .map_err(|e| Error::Invalid(key.clone(), format!("maxUnavailable: {e}")))?;
        let members: Vec<update::Member> = replicas
            .iter()
            .map(|s| {
                let mut slot = *s;
                if acted.contains(&s.ordinal)
                    && let Some(p) = slot.pod.as_mut()
                {
                    // Being replaced already: unavailable, and not to be picked again.
                    p.terminating = true;
                }
                update::Member {
                    slot,
                    updated: kept
                        .get(&s.ordinal)
                        .is_none_or(|p| revision_of(p) == view.update_name),
                }
            })
            .collect();
        let targets = budget.take(update::plan(
            &members,
            set.partition_ordinal(),
            max_unavailable,
        ));
        let targets = self.ask_budgets(set, targets, kept, held).await?;
        if targets.is_empty() {
            return Ok(());
        }
        let control = self.pod_control(set, &key);
        let work = targets
            .iter()
            .filter_map(|o| kept.get(o))
            .map(|p| self.replacement(view, p))
            .collect();
        let errors = replace(&control, set.ordered(), work).await;
        match errors.first() {
            None => Ok(()),
            Some(first) => Err(Error::Pods {
                key,
                failed: errors.len(),
                first: first.clone(),
            }),
        }
    }

    /// Deletes revisions beyond `revisionHistoryLimit`, oldest first, never the current or
    /// update revision nor one a pod is labelled with (upstream's `truncateHistory`).
    async fn truncate_history(&self, view: &View<'_>, pods: &[Shared<Pod>]) -> Result<(), Error> {
        let limit = view
            .set
            .sts
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let mut live: HashSet<&str> = pods.iter().map(|p| revision_of(p)).collect();
        live.insert(&view.update_name);
        live.insert(&view.current_name);
        let constructed = &view.revisions.constructed;
        let old: Vec<Shared<ControllerRevision>> = constructed
            .old
            .iter()
            .chain(&constructed.duplicates)
            .filter(|r| !live.contains(name_of(r).as_str()))
            .cloned()
            .collect();
        let doomed = history::to_truncate(&old, limit, &HashSet::new());
        if !doomed.is_empty() {
            let api: Api<ControllerRevision> = Api::namespaced(
                self.client.clone(),
                &view.set.sts.namespace().unwrap_or_default(),
            );
            history::delete_revisions(&api, &doomed).await?;
        }
        Ok(())
    }

    /// Writes the status if it changed, and asks for a requeue when a ready pod will become
    /// available; the pacing condition only when the sync judged the pacing (`pace`).
    async fn write_status<'p>(
        &self,
        view: &View<'_>,
        pods: impl Iterator<Item = &'p Shared<Pod>>,
        pace: Option<Option<&Hold>>,
        held: Option<Option<&Refusal>>,
        requeue: &mut Action,
    ) -> Result<(), Error> {
        let set = view.set;
        let mut counted = Vec::new();
        for pod in pods {
            let until_available = view.until_available(pod);
            if let Some(d) = until_available
                && !d.is_zero()
            {
                requeue.requeue_by(d);
            }
            counted.push(status::Counted {
                ready: until_available.is_some(),
                available: until_available.is_some_and(|d| d.is_zero()),
                terminating: pod.facts().deleting,
                current: revision_of(pod) == view.current_name,
                updated: revision_of(pod) == view.update_name,
            });
        }
        let mut st = status::Status::count(counted, &view.current_name, &view.update_name);
        st.complete_rolling_update(set.rolling(), set.ordinals().replicas);
        st.collision_count = set
            .sts
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        st.observed_generation = set.sts.metadata.generation;
        let progress = status::progress(set, &st, view.now);
        progress.before_write(&self.recorder, &events::reference(&set.sts), requeue);
        let mut fields = st.to_json();
        progress.add_to(&mut fields);
        let stored = set.sts.status.as_ref();
        let paced = pace.is_some_and(|hold| {
            pacing::add_to(
                &mut fields,
                &crate::progress::stored_conditions(stored.and_then(|s| s.conditions.as_ref())),
                &set.pacing,
                hold,
                view.now,
                |warning| {
                    self.recorder.record(
                        &events::reference(&set.sts),
                        EventType::Warning,
                        pacing::INVALID_EVENT,
                        warning,
                    )
                },
            )
        });
        let budgeted = held.is_some_and(|held| {
            disruption_gate::add_to(
                &mut fields,
                &crate::progress::stored_conditions(stored.and_then(|s| s.conditions.as_ref())),
                held,
                view.now,
            )
        });
        if !st.differs_from(stored) && !progress.changed() && !paced && !budgeted {
            return Ok(());
        }
        let api: Api<StatefulSet> = Api::namespaced(
            self.client.clone(),
            &set.sts.namespace().unwrap_or_default(),
        );
        // UpdateStatus of the cached object, re-read on a conflict (upstream's
        // updateStatefulSetStatus with RetryOnConflict); the role grants `update` on
        // `statefulsets/status`, not `patch`.
        let write = |v: &mut Value| crate::util::update::set_status_fields(v, &fields);
        match crate::util::update::status(&api, &set.sts, write).await {
            Ok(written) => {
                progress.after_write(&self.recorder, &events::reference(&set.sts));
                if let (Some(sets), Some(written)) = (&self.sets, written)
                    && same_but_status(&written.metadata, &set.sts.metadata)
                {
                    let mut newer = set.clone();
                    newer.sts.metadata.resource_version = written.metadata.resource_version;
                    newer.sts.status = written.status;
                    sets.hold_newer(newer);
                }
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Deletes or patches pods, all at once or, under `OrderedReady`, one by one in the given order
/// (highest ordinal first); returns the failures.
async fn replace(control: &PodControl<'_>, ordered: bool, work: Vec<PodChange>) -> Vec<String> {
    let writes = control.change(work, ordered).await;
    writes.errors.iter().map(ToString::to_string).collect()
}

impl Syncer {
    /// Drops the scaling pass's replacements of not-ready old pods that the disruption budgets
    /// refuse (they wait, as paced ones do).
    async fn budget_replacements(
        &self,
        set: &Set,
        plan: &mut ScalePlan,
        kept: &BTreeMap<i32, Shared<Pod>>,
        held: &mut Option<Refusal>,
    ) -> Result<(), Error> {
        let wanted: Vec<i32> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Replace(o) => Some(*o),
                _ => None,
            })
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let allowed: HashSet<i32> = self
            .ask_budgets(set, wanted, kept, held)
            .await?
            .into_iter()
            .collect();
        plan.steps
            .retain(|s| !matches!(s, Step::Replace(o) if !allowed.contains(o)));
        Ok(())
    }
}

/// Keeps the scaling pass's replacements of not-ready old pods that `budget` allows, in the
/// pass's order, and drops the others (they wait for a later sync; under `OrderedReady` the
/// pass still stops at the first of them).
fn pace_replacements(plan: &mut ScalePlan, budget: &mut Budget) {
    let wanted: Vec<i32> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Replace(o) => Some(*o),
            _ => None,
        })
        .collect();
    if wanted.is_empty() {
        return;
    }
    let allowed: HashSet<i32> = budget.take(wanted).into_iter().collect();
    plan.steps
        .retain(|s| !matches!(s, Step::Replace(o) if !allowed.contains(o)));
}

fn ordinal_of_step(step: Step) -> i32 {
    match step {
        Step::Create(o)
        | Step::Recreate(o)
        | Step::Repair(o)
        | Step::Replace(o)
        | Step::Condemn(o) => o,
    }
}
