//! Budget-aware updates (issue 41; upstream kubernetes/kubernetes#89820 and #95374, which
//! upstream answers with "PodDisruptionBudgets cover evictions only"): before a workload
//! controller takes a pod down *for an update*, the PodDisruptionBudgets (policy/v1) selecting
//! the pod are asked as the eviction subresource asks them, so that two workloads updating at
//! once under one budget never take it below `minAvailable`.
//!
//! Opt-in per workload with [`ANNOTATION`] (`"true"`; `"false"` opts out), or for every workload
//! with `rollwright controllers --honor-disruption-budgets` (the annotation still opts one out).
//! Without either nothing here runs and the controllers delete directly, as upstream's.
//!
//! # How a budget is asked
//!
//! [`judge`] is the eviction subresource's decision (`pkg/registry/core/pod/storage/eviction.go`,
//! which `apiserver::eviction` follows): a Pending, terminal or deleting pod disrupts nothing;
//! more than one budget selecting the pod refuses (upstream answers 500); an unready pod may go
//! without spending while the budget is healthy (or with `unhealthyPodEvictionPolicy:
//! AlwaysAllow`); otherwise the budget must have observed its spec and allow a disruption.
//! A disruption is spent as the eviction spends it ([`spend`]: `disruptionsAllowed - 1`, the pod
//! recorded in `disruptedPods`) by one compare-and-swap write of the budget's status against the
//! version the decision read. Two controllers spending from one budget at once cannot both win:
//! the loser's write conflicts, it refuses for now and retries on the budget's next change.
//!
//! Why the status write rather than the `pods/eviction` subresource: one mechanism covers both
//! kinds of update. A recreate is a delete, which the eviction could do, but an in-place update
//! (seed 004) keeps the pod, and no eviction exists for a restart. The spend is the very write
//! the eviction makes (the same fields, the same compare-and-swap), and the disruption controller
//! then treats the pod as disrupted until it is gone, replaced by a new pod of the same name, or
//! seen restarting (not ready since the spend) after an in-place update
//! ([`crate::disruption::budget::disrupted`]). On a real cluster, upstream's disruption controller
//! forgets a record only when the pod is deleted or after two minutes, so in-place updates there
//! are held longer than needed, never less.
//!
//! # Where each controller asks
//!
//! - StatefulSet and DaemonSet: the pods their rolling update replaces or restarts in place
//!   ([`DisruptionGate::admit`] between the plan and the pod writes). Replacing a failed pod or
//!   deleting one a scale-down condemns is not an update and is not asked.
//! - Deployment: the Deployment controller only scales ReplicaSets; the ReplicaSet controller
//!   picks and deletes the pods. So both ask: the Deployment controller caps how far it scales an
//!   old ReplicaSet down by what the budgets allow now ([`cap_scale_down`]; unready pods cost
//!   nothing), which keeps `maxSurge` honest (a scale-down that could not be carried out would let
//!   the new ReplicaSet grow past it), and the ReplicaSet controller spends a disruption for each
//!   pod of an old ReplicaSet of an opted-in Deployment before deleting it
//!   ([`DisruptionGate::replica_set_honors`]), which makes the check atomic with the budget: two
//!   Deployments (or a Deployment and a StatefulSet) that both saw one disruption allowed cannot
//!   both take it.
//!
//! # A refused update
//!
//! It waits: the workload is remembered as held by the budget and queued again when the budget
//! changes (its status moves whenever a pod it selects does), so nothing polls. It says so: the
//! [`CONDITION`] condition (`reason: DisruptionBudget`, a rollwright condition type beside
//! upstream's, whose `Progressing` keeps its upstream reasons), a [`EVENT`] event naming the
//! budget, and `rollwright rollout status`/`watch` print the condition's message,
//! "waiting on pdb/NAME (0 disruptions allowed)". A held rollout makes no progress, so its
//! progress deadline and automatic rollback act on it as on any stalled rollout.

use api::pod::is_ready;
use events::{EventType, Recorder};
use informer::{Change, Informer, Informers, Key, Shared, Subscription, key};
use jiff::Timestamp;
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentCondition},
        core::v1::{ObjectReference, Pod},
        policy::v1::PodDisruptionBudget,
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};
use kube::{Api, Client, ResourceExt, api::PostParams};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

/// The annotation that opts a workload in (`"true"`) or out (`"false"`).
pub const ANNOTATION: &str = "rollwright.io/honor-disruption-budgets";
/// The condition type that says a budget holds the rollout.
pub const CONDITION: &str = "RolloutHeld";
/// The condition's reason while a budget holds the rollout.
pub const REASON: &str = "DisruptionBudget";
/// The reason of the event naming the budget that refused an update.
pub const EVENT: &str = "DisruptionBudget";
/// The annotation upstream's Deployment controller writes on a Deployment and its ReplicaSets.
const REVISION: &str = "deployment.kubernetes.io/revision";

/// Whether a workload with these annotations asks the budgets: its [`ANNOTATION`], or else the
/// controller's default.
pub fn honors(annotations: Option<&BTreeMap<String, String>>, default: bool) -> bool {
    match annotations
        .and_then(|a| a.get(ANNOTATION))
        .map(|v| v.trim().to_ascii_lowercase())
    {
        Some(v) if v == "true" => true,
        Some(v) if v == "false" => false,
        _ => default,
    }
}

/// A budget's refusal of an update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The budget's name (several, comma-separated, when more than one selects the pod).
    pub budget: String,
    /// Its `disruptionsAllowed` as the decision read it.
    pub allowed: i32,
    /// Why, in the eviction subresource's words.
    pub why: String,
}

impl Refusal {
    /// `waiting on pdb/NAME (N disruptions allowed)`, which the condition's message starts with
    /// and `rollwright rollout status` prints.
    pub fn summary(&self) -> String {
        let noun = if self.allowed == 1 {
            "disruption"
        } else {
            "disruptions"
        };
        format!(
            "waiting on pdb/{} ({} {noun} allowed)",
            self.budget, self.allowed
        )
    }

    /// The condition's and the event's message.
    pub fn message(&self) -> String {
        format!("{}: {}", self.summary(), self.why)
    }
}

/// What the budgets say about taking one pod down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It may go without spending anything (no budget, or it disrupts nothing more).
    Free,
    /// It may go once a disruption of this budget is spent.
    Spend(String),
    /// It must stay for now.
    Refuse(Refusal),
}

/// Whether budget `pdb` selects `pod` as the eviction subresource decides it: in its namespace,
/// by a non-empty selector (an empty or missing one protects nothing there).
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    if pdb.namespace() != pod.namespace() {
        return false;
    }
    let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    match api::selector::LabelSelector::from_label_selector(selector) {
        Ok(sel) if !sel.is_empty() => sel.matches_labels(pod.metadata.labels.as_ref()),
        _ => false,
    }
}

fn status_int(
    pdb: &PodDisruptionBudget,
    f: impl Fn(&k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus) -> i32,
) -> i32 {
    pdb.status.as_ref().map_or(0, f)
}

/// The eviction subresource's decision for `pod` under the `budgets` that select it.
pub fn judge(pod: &Pod, budgets: &[&PodDisruptionBudget]) -> Verdict {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    // Upstream's `canIgnorePDB`: the pod disrupts nothing more by going.
    if matches!(phase, "Succeeded" | "Failed" | "Pending")
        || pod.metadata.deletion_timestamp.is_some()
    {
        return Verdict::Free;
    }
    let pdb = match budgets {
        [] => return Verdict::Free,
        [one] => *one,
        many => {
            let names: Vec<String> = many.iter().map(|b| b.name_any()).collect();
            return Verdict::Refuse(Refusal {
                budget: names.join(","),
                allowed: 0,
                why: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
            });
        }
    };
    let name = pdb.name_any();
    let allowed = status_int(pdb, |s| s.disruptions_allowed);
    let current = status_int(pdb, |s| s.current_healthy);
    let desired = status_int(pdb, |s| s.desired_healthy);
    if !is_ready(pod) {
        let always = pdb
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow");
        // An unready pod is not counted healthy: removing it costs nothing while the budget is
        // met without it.
        if always || (current >= desired && desired > 0) {
            return Verdict::Free;
        }
    }
    let refuse = |why: String| {
        Verdict::Refuse(Refusal {
            budget: name.clone(),
            allowed: allowed.max(0),
            why,
        })
    };
    let generation = pdb.metadata.generation.unwrap_or(0);
    let observed = pdb
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0);
    if observed < generation {
        return refuse(format!(
            "The disruption budget {name} is still being processed by the server."
        ));
    }
    if allowed <= 0 {
        return refuse(format!(
            "The disruption budget {name} needs {desired} healthy pods and has {current} currently"
        ));
    }
    Verdict::Spend(name)
}

/// The budget after one disruption is spent on `pod` at `now`, as the eviction subresource
/// writes it: one allowance fewer, the pod recorded in `disruptedPods`, and `DisruptionAllowed`
/// turned False with the last allowance.
pub fn spend(pdb: &PodDisruptionBudget, pod: &str, now: Timestamp) -> PodDisruptionBudget {
    let mut next = pdb.clone();
    let status = next.status.get_or_insert_with(Default::default);
    status.disruptions_allowed -= 1;
    status
        .disrupted_pods
        .get_or_insert_with(BTreeMap::new)
        // To the second, as the API server's eviction records it.
        .insert(
            pod.to_string(),
            Time(Timestamp::from_second(now.as_second()).unwrap_or(now)),
        );
    if status.disruptions_allowed <= 0 {
        crate::disruption::budget::set_allowed_condition(status, now);
    }
    next
}

/// How far old ReplicaSets may shrink under the budgets now (for [`cap_scale_down`]): per
/// ReplicaSet, the budgets selecting its pods (by its template's labels), and each budget's
/// allowance.
#[derive(Clone, Debug, Default)]
pub struct Allowances {
    /// Budget name to disruptions it allows now (0 unless its status is current).
    pub left: BTreeMap<String, i32>,
    /// ReplicaSet name to the budgets selecting its pods.
    pub of: BTreeMap<String, Vec<String>>,
}

/// One old ReplicaSet's planned shrink: its size now, the size planned, its unavailable pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shrink {
    /// The ReplicaSet.
    pub name: String,
    /// `spec.replicas` now.
    pub from: i32,
    /// The size the rolling step planned.
    pub to: i32,
    /// Its pods that are not available (they cost a budget nothing, and go first).
    pub unavailable: i32,
}

/// Caps the rolling step's old ReplicaSet scale-downs (`plan`, in order) by what the budgets
/// allow: unavailable pods go freely, each available one takes an allowance of every budget
/// selecting the ReplicaSet's pods (more than one budget refuses, as the eviction does).
/// Returns the capped plan and the first refusal, if anything was held back.
pub fn cap_scale_down(
    plan: &[Shrink],
    allowances: &Allowances,
) -> (Vec<(String, i32)>, Option<Refusal>) {
    let mut left = allowances.left.clone();
    let mut held = None;
    let mut out = Vec::new();
    for s in plan {
        let down = (s.from - s.to).max(0);
        let free = down.min(s.unavailable.max(0));
        let mut paid = down - free;
        let budgets = allowances.of.get(&s.name).map(Vec::as_slice).unwrap_or(&[]);
        if paid > 0 {
            match budgets {
                [] => {}
                [one] => {
                    let room = left.get(one).copied().unwrap_or(0).max(0);
                    if room < paid {
                        held.get_or_insert_with(|| Refusal {
                            budget: one.clone(),
                            allowed: room,
                            why: format!(
                                "scaling ReplicaSet {} down by {} available pods needs as many disruptions of budget {one}",
                                s.name, paid
                            ),
                        });
                        paid = room;
                    }
                    if let Some(l) = left.get_mut(one) {
                        *l -= paid;
                    }
                }
                many => {
                    held.get_or_insert_with(|| Refusal {
                        budget: many.join(","),
                        allowed: 0,
                        why: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
                    });
                    paid = 0;
                }
            }
        }
        let to = s.from - free - paid;
        if to != s.from {
            out.push((s.name.clone(), to));
        }
    }
    (out, held)
}

/// What [`DisruptionGate::admit`] let through.
#[derive(Debug)]
pub struct Admitted<T> {
    /// The items whose pods may go now (a disruption spent where one was needed).
    pub allowed: Vec<T>,
    /// The first refusal; the items from it on wait.
    pub refused: Option<Refusal>,
}

/// Workloads waiting on each budget, to queue again when it changes.
type Held = Arc<Mutex<HashMap<Key, HashSet<Key>>>>;

/// One controller's gate: the budgets in the shared cache, its default, the workloads it holds.
pub struct DisruptionGate {
    client: Client,
    budgets: Informer<PodDisruptionBudget>,
    /// For the ReplicaSet controller: the Deployments that own ReplicaSets.
    deployments: Option<Informer<Deployment>>,
    default: AtomicBool,
    held: Held,
}

impl DisruptionGate {
    /// A gate on the shared cache's budgets (default: only annotated workloads ask).
    pub fn new(informers: &Informers) -> Self {
        Self {
            client: informers.client().clone(),
            budgets: informers.get(),
            deployments: None,
            default: AtomicBool::new(false),
            held: Arc::default(),
        }
    }

    /// The ReplicaSet controller's gate, which also reads the Deployments owning ReplicaSets.
    pub fn for_replica_sets(informers: &Informers) -> Self {
        Self {
            deployments: Some(informers.get()),
            ..Self::new(informers)
        }
    }

    /// Makes asking the default for workloads without [`ANNOTATION`]
    /// (`--honor-disruption-budgets`).
    pub fn set_default(&self, honor: bool) {
        self.default.store(honor, Ordering::Relaxed);
    }

    /// Whether a workload with these annotations asks.
    pub fn honors(&self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        honors(annotations, self.default.load(Ordering::Relaxed))
    }

    /// Whether the ReplicaSet with this metadata deletes its pods through the gate: it is an
    /// old ReplicaSet (not of the revision its Deployment rolls out) of a Deployment that asks.
    pub fn replica_set_honors(&self, rs: &ObjectMeta) -> bool {
        let Some(deployments) = &self.deployments else {
            return false;
        };
        let Some(owner) = api::pod::controller_of(rs).filter(|o| o.kind == "Deployment") else {
            return false;
        };
        let ns = rs.namespace.as_deref().unwrap_or_default();
        let Some(d) = deployments
            .get(&key(ns, &owner.name))
            .filter(|d| d.metadata.uid.as_deref() == Some(owner.uid.as_str()))
        else {
            return false;
        };
        if !self.honors(d.metadata.annotations.as_ref()) {
            return false;
        }
        let revision = |m: &ObjectMeta| {
            m.annotations
                .as_ref()
                .and_then(|a| a.get(REVISION))
                .cloned()
        };
        revision(rs) != revision(&d.metadata)
    }

    /// Queues (through `queue`) each workload held by a budget when that budget changes.
    pub fn subscribe(&self, queue: impl Fn(Key) + Send + Sync + 'static) -> Subscription {
        let held = Arc::clone(&self.held);
        self.budgets
            .subscribe(move |c: &Change<PodDisruptionBudget>| {
                if c.is_resync() {
                    return;
                }
                let waiting = held
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&c.object().key());
                for k in waiting.into_iter().flatten() {
                    queue(k);
                }
            })
    }

    /// The budgets selecting `pod`, in the shared cache.
    fn budgets_of(&self, pod: &Pod) -> Vec<Shared<PodDisruptionBudget>> {
        let ns = pod.namespace().unwrap_or_default();
        self.budgets
            .store()
            .in_namespace(&ns)
            .into_iter()
            .filter(|b| selects(b, pod))
            .collect()
    }

    /// What the budgets allow the old ReplicaSets `templates` (name, pod template labels) of
    /// the Deployment `workload` (its key) in `namespace` now. The Deployment is queued again
    /// when one of those budgets changes.
    pub fn allowances<'a>(
        &self,
        workload: &str,
        namespace: &str,
        templates: impl IntoIterator<Item = (&'a str, Option<&'a BTreeMap<String, String>>)>,
    ) -> Allowances {
        let mut budgets = self.budgets.store().in_namespace(namespace);
        // Held before the figures are read again: a change after the read queues the sync.
        for b in &budgets {
            self.hold(b.key(), workload);
        }
        for b in budgets.iter_mut() {
            if let Some(fresh) = self.budgets.get(&b.key()) {
                *b = fresh;
            }
        }
        let mut out = Allowances::default();
        for (rs, labels) in templates {
            let probe = Pod {
                metadata: ObjectMeta {
                    namespace: Some(namespace.to_string()),
                    labels: labels.cloned(),
                    ..Default::default()
                },
                ..Default::default()
            };
            let mut names = Vec::new();
            for b in budgets.iter().filter(|b| selects(b, &probe)) {
                let allowed = allowance_of(b).unwrap_or(0);
                out.left.insert(b.name_any(), allowed);
                names.push(b.name_any());
            }
            out.of.insert(rs.to_string(), names);
        }
        out
    }

    /// Marks workload `workload` as waiting on the budget `budget_key` (queued on its change).
    pub fn hold(&self, budget_key: Key, workload: &str) {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(budget_key)
            .or_default()
            .insert(workload.to_string());
    }

    /// Asks the budgets for each item's pod (`pod_of`; an item without one passes), in order,
    /// spending a disruption where one is needed; stops at the first refusal. Workload
    /// `workload` (its queue key) is queued again when any budget it asked changes, so a refusal
    /// is retried then.
    pub async fn admit<T>(
        &self,
        workload: &str,
        items: Vec<T>,
        pod_of: impl Fn(&T) -> Option<Shared<Pod>>,
    ) -> Result<Admitted<T>, kube::Error> {
        let mut allowed = Vec::with_capacity(items.len());
        // The budgets this call wrote, newer than the cache.
        let mut written: HashMap<Key, PodDisruptionBudget> = HashMap::new();
        for item in items {
            let Some(pod) = pod_of(&item) else {
                allowed.push(item);
                continue;
            };
            // Held before the decision reads the budgets: a change after the read queues us.
            let cached = self.budgets_of(&pod);
            for b in &cached {
                self.hold(b.key(), workload);
            }
            let budgets: Vec<PodDisruptionBudget> = cached
                .iter()
                .map(|b| {
                    written
                        .get(&b.key())
                        .cloned()
                        .unwrap_or_else(|| (**b).clone())
                })
                .collect();
            let refs: Vec<&PodDisruptionBudget> = budgets.iter().collect();
            let refusal = match judge(&pod, &refs) {
                Verdict::Free => None,
                Verdict::Refuse(r) => Some(r),
                Verdict::Spend(name) => {
                    let Some(pdb) = budgets.iter().find(|b| b.name_any() == name) else {
                        allowed.push(item);
                        continue;
                    };
                    let ns = pdb.namespace().unwrap_or_default();
                    let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &ns);
                    let next = spend(pdb, &pod.name_any(), clock::now());
                    match api
                        .replace_status(&name, &PostParams::default(), &next)
                        .await
                    {
                        Ok(stored) => {
                            written.insert(key(&ns, &name), stored);
                            None
                        }
                        // Spent or changed meanwhile: its watch event queues us again.
                        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
                            Some(Refusal {
                                budget: name.clone(),
                                allowed: status_int(pdb, |s| s.disruptions_allowed).max(0),
                                why: format!(
                                    "The disruption budget {name} changed while a disruption was being spent; asking again"
                                ),
                            })
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            match refusal {
                None => allowed.push(item),
                Some(r) => {
                    return Ok(Admitted {
                        allowed,
                        refused: Some(r),
                    });
                }
            }
        }
        Ok(Admitted {
            allowed,
            refused: None,
        })
    }
}

impl DisruptionGate {
    /// [`DisruptionGate::admit`] for `owner` (its event reference), recording a refusal as an
    /// [`EVENT`] event naming the budget.
    pub async fn ask<T>(
        &self,
        recorder: &Recorder,
        owner: &ObjectReference,
        workload: &str,
        items: Vec<T>,
        pod_of: impl Fn(&T) -> Option<Shared<Pod>>,
    ) -> Result<Admitted<T>, kube::Error> {
        let admitted = self.admit(workload, items, pod_of).await?;
        if let Some(r) = &admitted.refused {
            recorder.record(owner, EventType::Normal, EVENT, r.message());
        }
        Ok(admitted)
    }
}

/// The name of [`rbac_objects`]' ClusterRole and ClusterRoleBinding.
pub const ROLE: &str = "rollwright:controller:disruption-budgets";

/// The ClusterRole and ClusterRoleBinding that let the ReplicaSet, DaemonSet and StatefulSet
/// controllers spend a budget's disruption: upstream's roles give only the disruption
/// controller `update` on `poddisruptionbudgets/status` (upstream's workload controllers never
/// ask a budget). The Deployment controller only reads budgets, through the shared cache. The
/// API server's setup creates them with the cluster's other rollwright objects.
pub fn rbac_objects() -> [Value; 2] {
    let labels = json!({"app.kubernetes.io/managed-by": "rollwright"});
    let account =
        |name: &str| json!({"kind": "ServiceAccount", "name": name, "namespace": "kube-system"});
    [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": ROLE, "labels": labels},
            "rules": [{
                "apiGroups": ["policy"],
                "resources": ["poddisruptionbudgets/status"],
                "verbs": ["update"],
            }],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ROLE, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
            "subjects": [
                account("replicaset-controller"),
                account("daemon-set-controller"),
                account("statefulset-controller"),
            ],
        }),
    ]
}

/// The disruptions a budget allows now for [`cap_scale_down`]: its `disruptionsAllowed` once
/// its status has observed its spec (none before).
fn allowance_of(pdb: &PodDisruptionBudget) -> Option<i32> {
    let generation = pdb.metadata.generation.unwrap_or(0);
    let observed = pdb
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0);
    if observed < generation {
        return None;
    }
    Some(status_int(pdb, |s| s.disruptions_allowed).max(0))
}

/// The [`CONDITION`] condition (as JSON) for a sync that asked the budgets: `True` while one
/// holds the rollout, none otherwise. The stored one's transition time is kept while it stays.
pub fn condition(held: Option<&Refusal>, stored: Option<&Value>, now: Timestamp) -> Option<Value> {
    let held = held?;
    let since = stored
        .filter(|c| c["status"] == "True")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    Some(json!({
        "type": CONDITION,
        "status": "True",
        "reason": REASON,
        "message": held.message(),
        "lastTransitionTime": since,
    }))
}

/// Adds the [`CONDITION`] condition a sync that asked the budgets found (`held`) to the status
/// `fields` a write sets, when it changes: onto the `conditions` already there (another
/// condition's change) or else the `stored` ones. Says whether the conditions changed.
pub fn add_to(
    fields: &mut Value,
    stored: &[Value],
    held: Option<&Refusal>,
    now: Timestamp,
) -> bool {
    let base = match fields.get("conditions") {
        Some(Value::Array(list)) => list.clone(),
        Some(_) => Vec::new(),
        None => stored.to_vec(),
    };
    let current = base.iter().find(|c| c["type"] == CONDITION);
    let next = condition(held, current, now);
    if next.as_ref() == current {
        return false;
    }
    let mut out: Vec<Value> = base
        .iter()
        .filter(|c| c["type"] != CONDITION)
        .cloned()
        .collect();
    out.extend(next);
    crate::progress::set_conditions(fields, &out);
    true
}

/// Sets or removes the Deployment's [`CONDITION`] condition after a rolling step that asked
/// the budgets. Its `Progressing` condition is left to upstream's rules.
pub fn set_deployment_condition(
    conditions: &mut Option<Vec<DeploymentCondition>>,
    held: Option<&Refusal>,
    now: Timestamp,
) {
    let list = conditions.get_or_insert_with(Vec::new);
    let current = list.iter().find(|c| c.type_ == CONDITION).cloned();
    match held {
        None => list.retain(|c| c.type_ != CONDITION),
        Some(r) => {
            let message = r.message();
            if current
                .as_ref()
                .is_some_and(|c| c.message.as_deref() == Some(message.as_str()))
            {
                return;
            }
            let since = current
                .and_then(|c| c.last_transition_time)
                .unwrap_or(Time(now));
            list.retain(|c| c.type_ != CONDITION);
            list.push(DeploymentCondition {
                type_: CONDITION.into(),
                status: "True".into(),
                reason: Some(REASON.into()),
                message: Some(message),
                last_update_time: Some(Time(now)),
                last_transition_time: Some(since),
            });
        }
    }
    if list.is_empty() {
        *conditions = None;
    }
}

/// The hold a workload's [`CONDITION`] condition (as JSON) records: its summary,
/// "waiting on pdb/NAME (N disruptions allowed)", for the CLI.
pub fn summary_of(condition: &Value) -> Option<&str> {
    if condition["type"] != CONDITION || condition["status"] != "True" {
        return None;
    }
    let message = condition["message"].as_str()?;
    Some(message.split_once(": ").map_or(message, |(s, _)| s))
}

#[cfg(test)]
mod tests;
