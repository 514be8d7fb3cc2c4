//! `pods/{name}/eviction`: a policy/v1 (or v1beta1) `Eviction` deletes a pod unless that would
//! violate its PodDisruptionBudget, as upstream's `pkg/registry/core/pod/storage/eviction.go`.
//!
//! - A pod that is Pending, terminal or already being deleted is deleted without asking any
//!   budget: it disrupts nothing that is not disrupted already.
//! - More than one budget selecting the pod is a 500, as upstream (it cannot choose).
//! - With one budget: a ready pod needs `disruptionsAllowed > 0` on a budget whose status has
//!   caught up with its spec (`observedGeneration`), else 429 TooManyRequests with upstream's
//!   message, which `kubectl drain` prints and retries. The allowance is decremented and the
//!   pod recorded in `disruptedPods` by a compare-and-swap write of the budget's status, so two
//!   evictions never spend the same disruption; the disruption controller forgets the record
//!   once the pod is gone (or after two minutes). A pod that is not ready may go while the
//!   budget is healthy anyway (or with `unhealthyPodEvictionPolicy: AlwaysAllow`), without
//!   spending an allowance, but only if it is still unready when deleted (a resourceVersion
//!   precondition).
//! - The pod gets the `DisruptionTarget` condition (`EvictionByEvictionAPI`) before the delete,
//!   which honours the Eviction's `deleteOptions` (grace period, preconditions, dry run).

use crate::{
    change::Change,
    error::{ApiError, ApiResult},
    object,
    plugins::{Operation, Review},
    registry::Kind,
    request::{self, Params, Target},
    rest::{DeleteOptions, json_response},
    state::ApiServer,
    subresource::set_condition,
};
use axum::{
    http::{HeaderMap, StatusCode},
    response::Response,
};
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use store::Revision;

/// Upstream's message when a budget does not allow the eviction.
pub const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// The `StatusCause` type naming the budget in that answer.
const CAUSE: &str = "DisruptionBudget";
/// Most evictions a budget records before its controller confirms them (upstream's
/// `MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// 429 TooManyRequests naming the budget's reason in a cause, as upstream's eviction answers.
fn too_many_requests(why: String) -> ApiError {
    ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: VIOLATION.to_string(),
        details: Some(json!({"causes": [{"reason": CAUSE, "message": why}]})),
    }
}

fn phase(pod: &Value) -> &str {
    object::path(pod, "status.phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending")
}

fn is_ready(pod: &Value) -> bool {
    object::path(pod, "status.conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Upstream's `canIgnorePDB`: the pod disrupts nothing more by going.
fn can_ignore_budgets(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending") || object::is_deleting(pod)
}

/// Upstream's `shouldEnforceResourceVersion`: unless terminal or deleting, the pod is deleted
/// only as it was seen, so that it cannot have become ready (and protected) meanwhile.
fn should_enforce_version(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && !object::is_deleting(pod)
}

fn int(v: &Value, path: &str) -> i64 {
    object::path(v, path).and_then(Value::as_i64).unwrap_or(0)
}

/// Whether budget `pdb` selects `pod`. Unlike the disruption controller, an empty selector
/// selects nothing here (upstream's eviction guards against such a budget creeping in).
fn selects(pdb: &Value, pod: &Value) -> bool {
    let Some(selector) = object::path(pdb, "spec.selector").filter(|s| !s.is_null()) else {
        return false;
    };
    match api::selector::LabelSelector::from_json(selector) {
        Ok(sel) if !sel.is_empty() => sel.matches_map(&object::labels(pod)),
        _ => false,
    }
}

/// Sets `DisruptionAllowed` as upstream's `UpdateDisruptionAllowedCondition` (a
/// `metav1.Condition`; the transition time moves only with the status).
fn set_allowed_condition(pdb: &mut Value) {
    let allowed = int(pdb, "status.disruptionsAllowed") > 0;
    let (status, reason) = if allowed {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let generation = int(pdb, "status.observedGeneration");
    let now = object::now_rfc3339();
    let conditions = &mut pdb["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let mut cond = json!({"type": "DisruptionAllowed", "status": status, "reason": reason,
        "message": "", "observedGeneration": generation, "lastTransitionTime": now});
    match list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"))
    {
        Some(existing) => {
            if existing.get("status").and_then(Value::as_str) == Some(status)
                && let Some(t) = existing.get("lastTransitionTime")
            {
                cond["lastTransitionTime"] = t.clone();
            }
            *existing = cond;
        }
        None => list.push(cond),
    }
}

impl ApiServer {
    /// POST `pods/{name}/eviction`.
    pub(crate) async fn evict(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        let mut eviction = request::decode_object(body, request::body_type(headers)?.1)?;
        if object::name(&eviction) != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let mut opts = DeleteOptions::from_request(params, headers, &Bytes::new())?;
        if let Some(d) = eviction.get("deleteOptions").filter(|d| !d.is_null()) {
            opts.merge_body(d)?;
        }
        let pods = self.storage_of(&t.def);
        let ns = t.namespace.as_deref();
        self.sync_cache().await?;
        // Upstream admits an eviction as a CREATE of `pods/eviction` before the pod is read.
        let user = crate::context::user()?;
        let review = Review {
            user: &user,
            operation: Operation::Create,
            kind: &pods,
            view: &t.def,
            namespace: ns,
            name,
            subresource: Some("eviction"),
            old: None,
            dry_run: opts.dry_run,
            reserved: Default::default(),
            mutated: Default::default(),
        };
        self.admit(&review, &mut eviction, crate::admission::Pass::VALIDATED)
            .await?;
        let entry = self
            .cache
            .get(&pods, ns, name)
            .ok_or_else(|| ApiError::not_found(&pods, name))?;
        let pod = entry.value();
        let mut enforce_version = false;
        if can_ignore_budgets(&pod) {
            enforce_version = should_enforce_version(&pod);
        } else {
            let budgets = self.budgets_of(ns, &pod)?;
            if budgets.len() > 1 {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
            if let Some((def, pdb)) = budgets.into_iter().next() {
                let always = object::path(&pdb, "spec.unhealthyPodEvictionPolicy")
                    .and_then(Value::as_str)
                    == Some("AlwaysAllow");
                let current = int(&pdb, "status.currentHealthy");
                let desired = int(&pdb, "status.desiredHealthy");
                // An unready pod does not count as healthy: removing it costs nothing while
                // the application is healthy without it.
                if !is_ready(&pod) && (always || (current >= desired && desired > 0)) {
                    enforce_version = true;
                } else {
                    self.spend_disruption(&def, ns, object::name(&pdb), name, opts.dry_run)
                        .await?;
                }
            }
        }
        if enforce_version && opts.precondition_rv.is_none() {
            opts.precondition_rv = Some(entry.rev);
        }
        self.mark_and_delete(&pods, ns, name, opts).await?;
        Ok(json_response(
            StatusCode::CREATED,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
                .to_string(),
        ))
    }

    /// The budgets of the pod's namespace that select it, with their kind.
    fn budgets_of(&self, ns: Option<&str>, pod: &Value) -> ApiResult<Vec<(Arc<Kind>, Value)>> {
        let Some(def) = self.registry().find("policy", "v1", "poddisruptionbudgets") else {
            return Ok(Vec::new());
        };
        let def = self.storage_of(&def);
        let (entries, _) = self.cache.list(&def, ns);
        Ok(entries
            .iter()
            .map(|e| e.value())
            .filter(|pdb| selects(pdb, pod))
            .map(|pdb| (Arc::clone(&def), pdb))
            .collect())
    }

    /// Upstream's `checkAndDecrement`, as one compare-and-swap of the budget's status: refuses
    /// unless the budget is current and allows a disruption, then spends one and records the
    /// pod. A lost race re-reads the budget and decides again.
    async fn spend_disruption(
        &self,
        def: &Kind,
        ns: Option<&str>,
        budget: &str,
        pod: &str,
        dry_run: bool,
    ) -> ApiResult<()> {
        self.guaranteed_update(def, ns, budget, dry_run, |old, _| {
            let generation = object::path(old, "metadata.generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if int(old, "status.observedGeneration") < generation {
                return Err(too_many_requests(format!(
                    "The disruption budget {budget} is still being processed by the server."
                )));
            }
            let allowed = int(old, "status.disruptionsAllowed");
            if allowed < 0 {
                return Err(ApiError::forbidden(format!(
                    "poddisruptionbudgets.policy \"{budget}\" is forbidden: pdb disruptions allowed is negative"
                )));
            }
            let disrupted = object::path(old, "status.disruptedPods")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
            if disrupted > MAX_DISRUPTED_PODS {
                return Err(ApiError::forbidden(format!(
                    "poddisruptionbudgets.policy \"{budget}\" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller"
                )));
            }
            if allowed == 0 {
                return Err(too_many_requests(format!(
                    "The disruption budget {budget} needs {} healthy pods and has {} currently",
                    int(old, "status.desiredHealthy"),
                    int(old, "status.currentHealthy")
                )));
            }
            let mut next = old.clone();
            next["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if allowed == 1 {
                set_allowed_condition(&mut next);
            }
            if !next["status"]["disruptedPods"].is_object() {
                next["status"]["disruptedPods"] = json!({});
            }
            next["status"]["disruptedPods"][pod] = json!(object::now_rfc3339());
            Ok(Change::Write(next))
        })
        .await
        .map(|_| ())
    }

    /// Upstream's `addConditionAndDeletePod`: the `DisruptionTarget` condition on the latest
    /// pod (honouring the preconditions), then the delete, whose resourceVersion precondition
    /// moves past the condition's own write.
    async fn mark_and_delete(
        &self,
        pods: &Kind,
        ns: Option<&str>,
        name: &str,
        mut opts: DeleteOptions,
    ) -> ApiResult<()> {
        if !opts.dry_run {
            let outcome = self
                .guaranteed_update(pods, ns, name, false, |old, rev| {
                    if let Some(uid) = &opts.precondition_uid
                        && object::meta_str(old, "uid") != Some(uid.as_str())
                    {
                        return Err(ApiError::conflict(pods, name, &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            object::meta_str(old, "uid").unwrap_or("")
                        )));
                    }
                    if let Some(want) = opts.precondition_rv
                        && want != rev
                    {
                        return Err(ApiError::conflict(pods, name, &format!(
                            "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rev}"
                        )));
                    }
                    let mut next = old.clone();
                    set_condition(
                        &mut next,
                        "DisruptionTarget",
                        "True",
                        Some("EvictionByEvictionAPI"),
                        Some("Eviction API: evicting"),
                    );
                    Ok(Change::Write(next))
                })
                .await?;
            if opts.precondition_rv.is_some() {
                let rev: Option<Revision> =
                    request::parse_rv(object::resource_version(outcome.value()))?;
                opts.precondition_rv = rev;
            }
        }
        self.delete_object(pods, ns, name, &opts).await?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_running_pods_ask_their_budget() {
        let pod = |phase: &str, deleting: bool| {
            let mut p = json!({"metadata": {"name": "p"}, "status": {"phase": phase}});
            if deleting {
                p["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
            }
            p
        };
        assert!(!can_ignore_budgets(&pod("Running", false)));
        assert!(can_ignore_budgets(&pod("Pending", false)));
        assert!(can_ignore_budgets(&pod("Succeeded", false)));
        assert!(can_ignore_budgets(&pod("Running", true)));
        assert!(should_enforce_version(&pod("Pending", false)));
        assert!(!should_enforce_version(&pod("Failed", false)));
        assert!(!should_enforce_version(&pod("Running", true)));
    }

    #[test]
    fn empty_and_null_selectors_protect_nothing() {
        let pod = json!({"metadata": {"labels": {"app": "web"}}});
        let pdb = |sel: Value| json!({"spec": {"selector": sel}});
        assert!(selects(&pdb(json!({"matchLabels": {"app": "web"}})), &pod));
        assert!(!selects(&pdb(json!({"matchLabels": {"app": "db"}})), &pod));
        assert!(!selects(&pdb(json!({})), &pod));
        assert!(!selects(&pdb(Value::Null), &pod));
    }

    #[test]
    fn the_last_allowance_turns_the_condition_false() {
        let mut pdb = json!({"status": {"disruptionsAllowed": 0, "observedGeneration": 3,
            "conditions": [{"type": "DisruptionAllowed", "status": "True",
                "reason": "SufficientPods", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
        set_allowed_condition(&mut pdb);
        let c = &pdb["status"]["conditions"][0];
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "InsufficientPods");
        assert_eq!(c["observedGeneration"], 3);
        assert_ne!(c["lastTransitionTime"], "2024-01-01T00:00:00Z");
        let status = too_many_requests("why".into()).status();
        assert_eq!(status["code"], 429);
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["message"], VIOLATION);
        assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
    }
}
