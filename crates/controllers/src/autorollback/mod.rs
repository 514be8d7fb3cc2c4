//! Automatic rollback (issue #22): a Deployment, DaemonSet or StatefulSet that opted in
//! ([`ENABLED`] `"true"` on itself or on its Namespace) and whose rollout failed goes back to the
//! last revision that completed, as `kubectl rollout undo` would: the workload's template is
//! replaced by that revision's, and the workload's own controller then does what it does for any
//! undo (the old ReplicaSet or ControllerRevision becomes current again with the next revision
//! number, its pods are kept, the failed revision's pods go).
//!
//! A rollout *failed* when, with the status describing the current generation, either
//! - its `Progressing` condition is `False` with reason `ProgressDeadlineExceeded` (Deployments
//!   keep it from `spec.progressDeadlineSeconds`, DaemonSets and StatefulSets from the
//!   `rollwright.io/progress-deadline-seconds` annotation), or
//! - at least `max(1, maxUnavailable)` pods of the current revision fail in a way waiting cannot
//!   heal: a container waiting with `ErrImagePull`, `ImagePullBackOff` or `InvalidImageName`, or in
//!   `CrashLoopBackOff` after at least [`CRASH_RESTARTS`] restarts (default
//!   [`DEFAULT_CRASH_RESTARTS`]).
//!
//! The revision restored is, among the revisions other than the current and the one marked
//! failed, the newest that completed (a StatefulSet's `status.currentRevision`), else the newest
//! still serving pods (the previous revision whose pods the failed rollout had not yet replaced),
//! else the newest.
//!
//! The decision and its record live in the workload itself, so a controller restarted
//! mid-rollback finds them: one write replaces the template and sets [`ROLLED_BACK_FROM`] (the
//! failed template's hash), [`ROLLED_BACK_TO`] (the restored one's), [`ROLLBACK_REASON`],
//! [`ROLLBACK_MESSAGE`] and [`ROLLED_BACK_AT`]; the `RolledBack` condition and Warning event
//! follow, and are written again after a restart when the condition is older than
//! [`ROLLED_BACK_AT`].
//!
//! No loops, by these rules:
//! - **A failed template is rolled back from once.** When the current template is the one
//!   [`ROLLED_BACK_FROM`] names (a person applied it again, or ran `rollout undo` to it), the
//!   controller rolls it out (a person asked for it) but does not roll back from it a second time:
//!   if it fails again, the `RolledBack` condition turns `False` with reason
//!   `RollbackSuppressed` and the rollout stays failed for a person to act. Any other template
//!   is a new decision.
//! - **A failed rollback stops.** When the restored template ([`ROLLED_BACK_TO`]) itself fails
//!   (after the rollback: a deadline condition must be newer than [`ROLLED_BACK_AT`]), nothing
//!   more is rolled back: the condition turns `False` with reason `RollbackFailed` and a Warning
//!   event `RollbackFailed` says so.
//! - The revision marked failed is never a target.
//!
//! A paused workload is never rolled back (`kubectl rollout undo` refuses paused Deployments).

mod act;

pub use act::{AutoRollback, Outcome, RolloutState, WorkloadKind};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// The opt-in annotation, on the workload or its Namespace.
pub const ENABLED: &str = "rollwright.io/rollback-on-failure";
/// Restarts after which a crash-looping container counts as failed.
pub const CRASH_RESTARTS: &str = "rollwright.io/rollback-crash-restarts";
/// The default of [`CRASH_RESTARTS`].
pub const DEFAULT_CRASH_RESTARTS: i32 = 3;
/// The hash of the template last rolled back from.
pub const ROLLED_BACK_FROM: &str = "rollwright.io/rolled-back-from";
/// The hash of the template that rollback restored.
pub const ROLLED_BACK_TO: &str = "rollwright.io/rolled-back-to";
/// When that rollback was decided (RFC 3339).
pub const ROLLED_BACK_AT: &str = "rollwright.io/rolled-back-at";
/// Its reason (the condition's reason).
pub const ROLLBACK_REASON: &str = "rollwright.io/rollback-reason";
/// Its message (the condition's and the event's).
pub const ROLLBACK_MESSAGE: &str = "rollwright.io/rollback-message";
/// The condition type (and the event reason of a rollback).
pub const CONDITION: &str = "RolledBack";

/// Why a rollout failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `Progressing=False/ProgressDeadlineExceeded`.
    ProgressDeadlineExceeded,
    /// Pods of the new revision cannot pull their image.
    ImagePullFailure,
    /// Pods of the new revision crash-loop.
    CrashLoop,
}

impl Reason {
    /// As the condition's reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ProgressDeadlineExceeded => "ProgressDeadlineExceeded",
            Reason::ImagePullFailure => "ImagePullFailure",
            Reason::CrashLoop => "CrashLoop",
        }
    }

    fn spoken(self, failing: usize) -> String {
        match self {
            Reason::ProgressDeadlineExceeded => "the rollout exceeded its progress deadline".into(),
            Reason::ImagePullFailure => format!("{failing} pod(s) cannot pull their image"),
            Reason::CrashLoop => format!("{failing} pod(s) are crash-looping"),
        }
    }
}

/// A revision of the workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Revision {
    /// Its number (`deployment.kubernetes.io/revision`, a ControllerRevision's `revision`).
    pub number: i64,
    /// Its template hash (`pod-template-hash`, `controller-revision-hash`).
    pub hash: String,
    /// Pods of it available or ready now.
    pub live: i32,
    /// Whether the workload's status says it completed (a StatefulSet's `currentRevision`).
    pub completed: bool,
}

/// The rollback record in the workload's annotations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// [`ROLLED_BACK_FROM`].
    pub from: Option<String>,
    /// [`ROLLED_BACK_TO`].
    pub to: Option<String>,
    /// [`ROLLED_BACK_AT`].
    pub at: Option<Timestamp>,
}

impl Marks {
    /// The marks among `annotations`.
    pub fn read(annotations: Option<&BTreeMap<String, String>>) -> Self {
        let get = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
        Marks {
            from: get(ROLLED_BACK_FROM),
            to: get(ROLLED_BACK_TO),
            at: get(ROLLED_BACK_AT).and_then(|s| s.parse().ok()),
        }
    }
}

/// A condition, reduced to what the decision reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cond {
    /// `status`.
    pub status: String,
    /// `reason`.
    pub reason: String,
    /// `lastUpdateTime` where the kind has one, else `lastTransitionTime`.
    pub updated: Option<Timestamp>,
    /// `lastTransitionTime`.
    pub transitioned: Option<Timestamp>,
}

/// Everything the decision reads about one workload.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// Opted in (itself or its Namespace).
    pub enabled: bool,
    /// Its rollout is paused.
    pub paused: bool,
    /// `status.observedGeneration >= metadata.generation`.
    pub observed: bool,
    /// The `Progressing` condition.
    pub progressing: Option<Cond>,
    /// The `RolledBack` condition.
    pub rolled_back: Option<Cond>,
    /// The current template's revision, once recorded.
    pub current: Option<Revision>,
    /// The other revisions.
    pub old: Vec<Revision>,
    /// Pods of the current revision failing to pull their image.
    pub image_failures: usize,
    /// Pods of the current revision crash-looping past the threshold.
    pub crash_loops: usize,
    /// `max(1, maxUnavailable)`.
    pub threshold: i32,
    /// The rollback record.
    pub marks: Marks,
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing.
    Nothing,
    /// Roll back from `from` to `to`.
    RollBack {
        /// Why.
        reason: Reason,
        /// The failed revision.
        from: Revision,
        /// The revision to restore.
        to: Revision,
        /// The condition's and event's message.
        message: String,
    },
    /// The current template was rolled back from before and failed again: say so, do nothing.
    Suppressed {
        /// Why it failed.
        reason: Reason,
        /// The message.
        message: String,
    },
    /// The restored template failed too: say so, do nothing.
    RollbackFailed {
        /// Why it failed.
        reason: Reason,
        /// The message.
        message: String,
    },
}

/// The condition reason of a suppressed rollback.
pub const SUPPRESSED: &str = "RollbackSuppressed";
/// The condition reason (and event reason) of a failed rollback.
pub const FAILED: &str = "RollbackFailed";

/// Why the current revision failed, if it did.
fn failure(f: &Facts, restored: bool) -> Option<(Reason, usize)> {
    let failing = f.image_failures + f.crash_loops;
    if failing > 0 && failing >= usize::try_from(f.threshold.max(1)).unwrap_or(1) {
        let reason = if f.image_failures >= f.crash_loops {
            Reason::ImagePullFailure
        } else {
            Reason::CrashLoop
        };
        return Some((reason, failing));
    }
    let p = f.progressing.as_ref()?;
    let exceeded = f.observed && p.status == "False" && p.reason == "ProgressDeadlineExceeded";
    // A restored template inherits the condition of the rollout it ended until its own status
    // is computed: only a deadline reached after the rollback is its own.
    let own = !restored || matches!((p.updated, f.marks.at), (Some(u), Some(at)) if u > at);
    (exceeded && own).then_some((Reason::ProgressDeadlineExceeded, 0))
}

/// The revision to restore: newest completed, else newest serving pods, else newest.
fn target<'a>(f: &'a Facts, current: &Revision) -> Option<&'a Revision> {
    f.old
        .iter()
        .filter(|r| r.hash != current.hash && Some(&r.hash) != f.marks.from.as_ref())
        .max_by_key(|r| (r.completed, r.live > 0, r.number))
}

/// Whether the `RolledBack` condition already says `reason` (as `False`).
fn already_said(f: &Facts, reason: &str) -> bool {
    f.rolled_back
        .as_ref()
        .is_some_and(|c| c.status == "False" && c.reason == reason)
}

/// Decides, from the workload as the API holds it, whether to roll back.
pub fn decide(f: &Facts) -> Decision {
    if !f.enabled || f.paused {
        return Decision::Nothing;
    }
    let Some(current) = &f.current else {
        return Decision::Nothing;
    };
    let restored = f.marks.to.as_ref() == Some(&current.hash);
    let Some((reason, failing)) = failure(f, restored) else {
        return Decision::Nothing;
    };
    let why = reason.spoken(failing);
    if restored {
        if already_said(f, FAILED) {
            return Decision::Nothing;
        }
        return Decision::RollbackFailed {
            reason,
            message: format!(
                "revision {} ({}), restored by an automatic rollback, failed too: {why}; \
                 not rolling back again",
                current.number, current.hash
            ),
        };
    }
    if f.marks.from.as_ref() == Some(&current.hash) {
        if already_said(f, SUPPRESSED) {
            return Decision::Nothing;
        }
        return Decision::Suppressed {
            reason,
            message: format!(
                "revision {} ({}) failed again: {why}; it was rolled back automatically before, \
                 so it is not rolled back again until its template changes",
                current.number, current.hash
            ),
        };
    }
    let Some(to) = target(f, current) else {
        return Decision::Nothing;
    };
    Decision::RollBack {
        reason,
        message: format!(
            "rolled back from revision {} ({}) to revision {} ({}): {why}",
            current.number, current.hash, to.number, to.hash
        ),
        from: current.clone(),
        to: to.clone(),
    }
}

/// Whether the rollback the marks record still lacks its condition (the controller stopped
/// between the template write and the condition write).
pub fn needs_record(marks: &Marks, rolled_back: Option<&Cond>) -> bool {
    match marks.at {
        None => false,
        Some(at) => rolled_back
            .and_then(|c| c.transitioned)
            .is_none_or(|t| t < at),
    }
}

/// How a pod of the current revision is failing, if in a way waiting cannot heal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodFailure {
    /// Its image cannot be pulled.
    ImagePull,
    /// A container crash-loops past the restart threshold.
    CrashLoop,
}

/// How `pod` fails, if it does; crash loops count from `crash_restarts` restarts.
pub fn pod_failure(pod: &Pod, crash_restarts: i32) -> Option<PodFailure> {
    let status = pod.status.as_ref()?;
    let all = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    let mut crash = false;
    for c in all {
        let reason = c
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref());
        match reason {
            Some("ErrImagePull" | "ImagePullBackOff" | "InvalidImageName") => {
                return Some(PodFailure::ImagePull);
            }
            Some("CrashLoopBackOff") if c.restart_count >= crash_restarts => crash = true,
            _ => {}
        }
    }
    crash.then_some(PodFailure::CrashLoop)
}

/// Whether a pod's change may change a rollback decision (for controllers that otherwise
/// ignore pod updates).
pub fn pod_signal_changed(old: &Pod, new: &Pod) -> bool {
    let restarts = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|cs| cs.iter().map(|c| c.restart_count).sum::<i32>())
    };
    pod_failure(old, 1) != pod_failure(new, 1) || restarts(old) != restarts(new)
}

/// [`CRASH_RESTARTS`] read from `annotations` (invalid or absent: the default).
pub fn crash_restarts(annotations: Option<&BTreeMap<String, String>>) -> i32 {
    annotations
        .and_then(|a| a.get(CRASH_RESTARTS))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(DEFAULT_CRASH_RESTARTS)
}

/// Whether `annotations` opt in.
pub fn opted_in(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(ENABLED))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests;

/// The name of [`rbac_objects`]' ClusterRole and ClusterRoleBinding.
pub const ROLE: &str = "rollwright:controller:auto-rollback";

/// The ClusterRole and ClusterRoleBinding that let the DaemonSet and StatefulSet controllers
/// write their workload's template back: upstream's roles grant them only `get`, `list` and
/// `watch` on `daemonsets`/`statefulsets` (upstream's controllers never write the spec; the
/// Deployment controller's role already has `update` on `deployments`). The API server's setup
/// creates them with the cluster's other rollwright objects.
pub fn rbac_objects() -> [serde_json::Value; 2] {
    let labels = serde_json::json!({"app.kubernetes.io/managed-by": "rollwright"});
    let account = |name: &str| serde_json::json!({"kind": "ServiceAccount", "name": name, "namespace": "kube-system"});
    [
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": ROLE, "labels": labels},
            "rules": [{
                "apiGroups": ["apps"],
                "resources": ["daemonsets", "statefulsets"],
                "verbs": ["get", "update"],
            }],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ROLE, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
            "subjects": [account("daemon-set-controller"), account("statefulset-controller")],
        }),
    ]
}
