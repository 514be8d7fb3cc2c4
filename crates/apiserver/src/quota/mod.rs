//! ResourceQuota admission (upstream's `ResourceQuota` admission plugin,
//! `k8s.io/apiserver/pkg/admission/plugin/resourcequota`), and the ResourceQuota kind's strategy.
//!
//! [`ResourceQuotaAdmission`] is the last plugin of the admission chain
//! ([`crate::admission_chain`]); as upstream's, it judges creates and updates of the main
//! resource of namespaced kinds in its validating phase.
//!
//! A create in a namespace with quotas is measured by the evaluator of its resource
//! ([`api::quota::Evaluator`]); each quota covering it (it limits, in `status.hard`, a resource the
//! object uses, and the object falls under its scopes) must have room, or the create is refused
//! with upstream's 403 (`exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1`).
//! A quota that limits such a resource but whose controller has not yet reported usage refuses
//! with `status unknown for quota`, and a pod must state the cpu and memory a quota limits
//! (`must specify`).
//!
//! Admitting charges the quotas at once: `status.used` is raised with compare-and-swap on the
//! quota's revision, before the object is stored, so that two quick creates cannot both take
//! the last unit (the controller's recount only catches up later). Creates in one namespace are
//! admitted one at a time in this process, so that a burst (a ReplicaSet creating many pods)
//! does not turn into a storm of lost compare-and-swaps; the compare-and-swap still guards
//! against other API servers and the controller. When the object is then not stored (it exists
//! already, the store fails), the charge is given back ([`Charge`]).
//!
//! Updates are checked, not charged (services that become NodePort or LoadBalancer, claims that
//! grow): the controller recounts after such an update. Pods are not resized in place here, and
//! counted objects change only on create, as upstream's evaluators handle them.

pub(crate) mod strategy;

use crate::{
    change::Change,
    error::{ApiError, ApiResult},
    object,
    plugins::{Operation, Plugin, Reservation, Review},
    registry::Kind,
    state::ApiServer,
};
use api::quota::{
    Evaluator, GroupResource, Object, ResourceList,
    resources::{
        add, exceeding, from_wire, mask, negative, pretty, remove_zeros, subtract_non_negative,
        to_wire,
    },
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use serde_json::{Value, json};
use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, Mutex, Weak},
};

/// Resources quota never applies to (upstream's `DefaultIgnoredResources` that are stored).
fn ignored(def: &Kind) -> bool {
    def.is("", "Event") || def.is("events.k8s.io", "Event")
}

/// An object decoded as its evaluator reads it.
enum Typed {
    Pod(Box<Pod>),
    Service(Box<Service>),
    Claim(Box<PersistentVolumeClaim>),
    Counted,
}

impl Typed {
    fn decode(evaluator: &Evaluator, obj: &Value) -> ApiResult<Self> {
        let bad =
            |e: serde_json::Error| ApiError::internal(format!("quota: decoding the object: {e}"));
        Ok(match evaluator {
            Evaluator::Pods => {
                Self::Pod(Box::new(serde_json::from_value(obj.clone()).map_err(bad)?))
            }
            Evaluator::Services => {
                Self::Service(Box::new(serde_json::from_value(obj.clone()).map_err(bad)?))
            }
            Evaluator::Claims => {
                Self::Claim(Box::new(serde_json::from_value(obj.clone()).map_err(bad)?))
            }
            Evaluator::Count(_) => Self::Counted,
        })
    }

    fn object(&self) -> Object<'_> {
        match self {
            Self::Pod(p) => Object::Pod(p),
            Self::Service(s) => Object::Service(s),
            Self::Claim(c) => Object::Claim(c),
            Self::Counted => Object::Counted,
        }
    }
}

/// A quota's charge for one admitted object.
struct Charged {
    /// Its position in the list checked.
    index: usize,
    /// `status.used` after the charge.
    used: ResourceList,
    /// What was added (the object's usage of the resources the quota limits).
    requested: ResourceList,
}

fn quota_name(q: &ResourceQuota) -> &str {
    q.metadata.name.as_deref().unwrap_or_default()
}

fn status_hard(q: &ResourceQuota) -> ResourceList {
    from_wire(q.status.as_ref().and_then(|s| s.hard.as_ref()))
}

fn status_used(q: &ResourceQuota) -> ResourceList {
    from_wire(q.status.as_ref().and_then(|s| s.used.as_ref()))
}

/// Upstream's `CheckRequest`: what each covering quota's `status.used` becomes with `new` (less
/// what `old` used, for an update), or the reason it may not (the text after `is forbidden: `).
fn check(
    evaluator: &Evaluator,
    quotas: &[ResourceQuota],
    new: Object<'_>,
    old: Option<Object<'_>>,
    now: Timestamp,
) -> Result<Vec<Charged>, String> {
    let mut covering = Vec::new();
    for (i, q) in quotas.iter().enumerate() {
        if !evaluator.matches(q, new) {
            continue;
        }
        let hard = status_hard(q);
        let limited = evaluator.matching_resources(hard.keys());
        evaluator
            .constraints(&limited, new)
            .map_err(|e| format!("failed quota: {}: {e}", quota_name(q)))?;
        let used = status_used(q);
        if limited.iter().any(|r| !used.contains_key(r)) {
            let mut names = limited.clone();
            names.sort();
            return Err(format!(
                "status unknown for quota: {}, resources: {}",
                quota_name(q),
                names.join(",")
            ));
        }
        covering.push(i);
    }
    let mut delta = evaluator.usage(new, now);
    let below_zero = negative(&delta);
    if !below_zero.is_empty() {
        return Err(format!(
            "quota usage is negative for resource(s): {}",
            below_zero.join(",")
        ));
    }
    if let Some(old) = old {
        delta = subtract_non_negative(&delta, &evaluator.usage(old, now));
    }
    let delta = remove_zeros(&delta);
    if delta.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for i in covering {
        let q = &quotas[i];
        let hard = status_hard(q);
        let used = status_used(q);
        let requested = mask(&delta, hard.keys());
        let new_used = add(&used, &requested);
        let over = exceeding(&mask(&new_used, requested.keys()), &hard);
        if !over.is_empty() {
            return Err(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                quota_name(q),
                pretty(&mask(&requested, over.iter())),
                pretty(&mask(&used, over.iter())),
                pretty(&mask(&hard, over.iter())),
            ));
        }
        if !requested.is_empty() {
            out.push(Charged {
                index: i,
                used: new_used,
                requested,
            });
        }
    }
    Ok(out)
}

/// Upstream's admission error: `pods "p" is forbidden: <why>`.
fn forbidden(def: &Kind, name: &str, why: &str) -> ApiError {
    ApiError {
        code: 403,
        reason: "Forbidden",
        message: format!("{} \"{name}\" is forbidden: {why}", def.group_resource()),
        details: Some(json!({"name": name, "group": def.group, "kind": def.plural})),
    }
}

/// The quotas of a namespace as the watch cache holds them.
fn quotas_in(server: &ApiServer, quota_def: &Kind, ns: &str) -> Vec<ResourceQuota> {
    let (entries, _) = server.cache.list(quota_def, Some(ns));
    entries
        .iter()
        .filter_map(|e| match serde_json::from_value(e.value()) {
            Ok(q) => Some(q),
            Err(err) => {
                tracing::warn!(namespace = ns, name = %e.name, error = %err, "quota: unreadable ResourceQuota ignored");
                None
            }
        })
        .collect()
}

fn quota_kind(server: &ApiServer) -> Option<Arc<Kind>> {
    server.registry().find("", "v1", "resourcequotas")
}

/// The evaluator of a kind's objects, unless quota ignores the kind.
fn evaluator_of(def: &Kind) -> Option<Evaluator> {
    (def.namespaced && !ignored(def))
        .then(|| Evaluator::for_resource(&GroupResource::new(&def.group, &def.plural)))
}

/// One lock per namespace: quota admission in a namespace runs one object at a time (upstream
/// batches a namespace's admissions on one worker for the same reason).
fn namespace_lock(ns: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Mutex::default);
    let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(lock) = locks.get(ns).and_then(Weak::upgrade) {
        return lock;
    }
    if locks.len() > 1024 {
        locks.retain(|_, w| w.strong_count() > 0);
    }
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    locks.insert(ns.to_string(), Arc::downgrade(&lock));
    lock
}

/// What an admitted create charged; dropped without [`Reservation::keep`] (the object was not
/// stored), it gives the charge back in the background.
#[must_use = "a charge not kept is given back when dropped"]
struct Charge {
    refund: Option<Refund>,
}

struct Refund {
    server: ApiServer,
    quota_def: Arc<Kind>,
    namespace: String,
    charged: Vec<(String, ResourceList)>,
}

impl Charge {
    fn none() -> Self {
        Self { refund: None }
    }
}

impl Reservation for Charge {
    /// The object was stored: the charge stands.
    fn keep(mut self: Box<Self>) {
        self.refund = None;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let Some(refund) = self.refund.take().filter(|r| !r.charged.is_empty()) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(refund.run());
    }
}

impl Refund {
    /// Lowers each quota's `status.used` by what was charged (never below zero); a quota gone
    /// meanwhile needs nothing, and a failure leaves the controller's recount to fix it.
    async fn run(self) {
        let lock = namespace_lock(&self.namespace);
        let _held = lock.lock().await;
        for (name, requested) in &self.charged {
            let result = self
                .server
                .guaranteed_update(
                    &self.quota_def,
                    Some(&self.namespace),
                    name,
                    false,
                    |old, _| {
                        let q: ResourceQuota = serde_json::from_value(old.clone())
                            .map_err(|e| ApiError::internal(e.to_string()))?;
                        let used = status_used(&q);
                        let lowered: ResourceList = used
                            .iter()
                            .map(|(k, v)| (k.clone(), requested.get(k).map_or(*v, |r| v.minus(*r))))
                            .map(|(k, mut v)| {
                                if v.value.is_negative() {
                                    v.value = Default::default();
                                }
                                (k, v)
                            })
                            .collect();
                        Ok(Change::Write(with_used(old, &lowered)))
                    },
                )
                .await;
            match result {
                Ok(_) => {
                    tracing::debug!(namespace = %self.namespace, quota = %name, "quota: charge of an object not stored given back")
                }
                Err(e) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(namespace = %self.namespace, quota = %name, error = %e, "quota: giving back a charge failed; the controller's recount will")
                }
            }
        }
    }
}

/// `quota` with `status.used` replaced.
fn with_used(quota: &Value, used: &ResourceList) -> Value {
    let mut next = quota.clone();
    if !next.get("status").is_some_and(Value::is_object) {
        next["status"] = json!({});
    }
    next["status"]["used"] = serde_json::to_value(to_wire(used)).unwrap_or_else(|_| json!({}));
    next
}

/// Admits the create of `obj` (already defaulted and validated, named, in its namespace) under
/// the quotas of its namespace, charging them unless `dry_run`. The returned [`Charge`] must be
/// kept once the object is stored.
async fn admit_create(
    server: &ApiServer,
    def: &Kind,
    obj: &Value,
    dry_run: bool,
) -> ApiResult<Charge> {
    let Some(ns) = object::namespace(obj).filter(|n| !n.is_empty() && def.namespaced) else {
        return Ok(Charge::none());
    };
    let Some(quota_def) = quota_kind(server) else {
        return Ok(Charge::none());
    };
    // Most namespaces have no quota: nothing more to do for them.
    if server.cache.list(&quota_def, Some(ns)).0.is_empty() {
        return Ok(Charge::none());
    }
    let Some(evaluator) = evaluator_of(def) else {
        return Ok(Charge::none());
    };
    let name = object::name(obj).to_string();
    let typed = Typed::decode(&evaluator, obj)?;
    let lock = namespace_lock(ns);
    let _held = lock.lock().await;
    // The charges admitted before this one (ours under the lock, other servers') are in the
    // cache once it has caught up with the store.
    server.sync_cache().await?;
    let quotas = quotas_in(server, &quota_def, ns);
    let now = clock::now();
    let charges = check(&evaluator, &quotas, typed.object(), None, now)
        .map_err(|why| forbidden(def, &name, &why))?;
    if dry_run {
        return Ok(Charge::none());
    }
    let mut charge = Charge {
        refund: Some(Refund {
            server: server.clone(),
            quota_def: quota_def.clone(),
            namespace: ns.to_string(),
            charged: Vec::new(),
        }),
    };
    for c in charges {
        let quota = quota_name(&quotas[c.index]).to_string();
        // Compare-and-swap on the quota; a newer version (another server's charge, the
        // controller's recount) is checked again before it is charged.
        let outcome = server
            .guaranteed_update(&quota_def, Some(ns), &quota, false, |old, _| {
                let fresh: ResourceQuota = serde_json::from_value(old.clone())
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                let recheck = check(
                    &evaluator,
                    std::slice::from_ref(&fresh),
                    typed.object(),
                    None,
                    now,
                )
                .map_err(|why| forbidden(def, &name, &why))?;
                Ok(match recheck.into_iter().next() {
                    Some(again) => Change::Write(with_used(old, &again.used)),
                    // It no longer covers the object (its hard limits changed): nothing to charge.
                    None => Change::Write(old.clone()),
                })
            })
            .await;
        match outcome {
            Ok(_) => {
                if let Some(r) = charge.refund.as_mut() {
                    r.charged.push((quota, c.requested));
                }
            }
            // Deleted meanwhile: it limits nothing any more.
            Err(e) if e.code == 404 => {}
            // Earlier charges are given back as `charge` drops.
            Err(e) => return Err(e),
        }
    }
    tracing::trace!(namespace = ns, name, resource = %def.group_resource(), "quota: admitted");
    Ok(charge)
}

/// Checks an update under the quotas of its namespace (services and claims, whose usage an
/// update can raise); the controller recounts after it.
fn check_update(server: &ApiServer, def: &Kind, new: &Value, old: &Value) -> ApiResult<()> {
    // Every write passes here: only services and claims are looked at any further.
    if !(def.group.is_empty()
        && matches!(def.plural.as_str(), "services" | "persistentvolumeclaims"))
    {
        return Ok(());
    }
    let Some(evaluator) = evaluator_of(def).filter(Evaluator::handles_update) else {
        return Ok(());
    };
    let Some(ns) = object::namespace(old).filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let Some(quota_def) = quota_kind(server) else {
        return Ok(());
    };
    let quotas = quotas_in(server, &quota_def, ns);
    if quotas.is_empty() {
        return Ok(());
    }
    let (new_typed, old_typed) = (
        Typed::decode(&evaluator, new)?,
        Typed::decode(&evaluator, old)?,
    );
    check(
        &evaluator,
        &quotas,
        new_typed.object(),
        Some(old_typed.object()),
        clock::now(),
    )
    .map(|_| ())
    .map_err(|why| forbidden(def, object::name(old), &why))
}

/// The ResourceQuota admission plugin: creates are checked and charged, updates checked.
pub(crate) struct ResourceQuotaAdmission;

#[async_trait::async_trait]
impl Plugin for ResourceQuotaAdmission {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    /// Upstream's: writes of the main resource of namespaced kinds (which include neither
    /// subresources nor the creation of a namespace), creates and updates alone.
    fn handles(&self, review: &Review<'_>) -> bool {
        review.subresource.is_none()
            && review.kind.namespaced
            && matches!(review.operation, Operation::Create | Operation::Update)
    }

    async fn validate(
        &self,
        server: &ApiServer,
        review: &Review<'_>,
        obj: &Value,
    ) -> ApiResult<Vec<String>> {
        match (review.operation, review.old) {
            (Operation::Create, _) => {
                let charge = admit_create(server, review.kind, obj, review.dry_run).await?;
                review.reserved.push(Box::new(charge));
            }
            (Operation::Update, Some(old)) => check_update(server, review.kind, obj, old)?,
            _ => {}
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn quota(v: Value) -> ResourceQuota {
        serde_json::from_value(v).unwrap()
    }

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn exceeding_a_quota_names_what_was_asked_used_and_limited() {
        let q = quota(
            json!({"metadata": {"name": "test-quota"}, "spec": {"hard": {"cpu": "1", "pods": "5"}},
            "status": {"hard": {"cpu": "1", "pods": "5"}, "used": {"cpu": "500m", "pods": "1"}}}),
        );
        let p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "600m", "memory": "100Mi"}}}]}}),
        );
        let err = check(
            &Evaluator::Pods,
            std::slice::from_ref(&q),
            Object::Pod(&p),
            None,
            clock::now(),
        )
        .err()
        .unwrap();
        assert_eq!(
            err,
            "exceeded quota: test-quota, requested: cpu=600m, used: cpu=500m, limited: cpu=1"
        );
        let small = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "500m"}}}]}}),
        );
        let ok = check(
            &Evaluator::Pods,
            &[q],
            Object::Pod(&small),
            None,
            clock::now(),
        )
        .unwrap();
        assert_eq!(pretty(&ok[0].used), "cpu=1,pods=2");
        assert_eq!(pretty(&ok[0].requested), "cpu=500m,pods=1");
    }

    #[test]
    fn unknown_status_and_missing_requests_refuse() {
        let q = quota(
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "1", "pods": "5"}},
            "status": {"hard": {"cpu": "1", "pods": "5"}, "used": {"pods": "0"}}}),
        );
        let p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "100m"}}}]}}),
        );
        assert_eq!(
            check(&Evaluator::Pods, &[q], Object::Pod(&p), None, clock::now())
                .err()
                .unwrap(),
            "status unknown for quota: q, resources: cpu,pods"
        );
        let q = quota(
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"memory": "1Gi"}},
            "status": {"hard": {"memory": "1Gi"}, "used": {"memory": "0"}}}),
        );
        assert_eq!(
            check(&Evaluator::Pods, &[q], Object::Pod(&p), None, clock::now())
                .err()
                .unwrap(),
            "failed quota: q: must specify memory for: c"
        );
        // A quota without a computed status covers nothing yet.
        let fresh = quota(json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "0"}}}));
        assert!(
            check(
                &Evaluator::Pods,
                &[fresh],
                Object::Pod(&p),
                None,
                clock::now()
            )
            .unwrap()
            .is_empty()
        );
    }

    #[test]
    fn scopes_select_the_quotas_charged() {
        let scoped = |name: &str, scope: &str| {
            quota(
                json!({"metadata": {"name": name}, "spec": {"hard": {"pods": "1"}, "scopes": [scope]},
                "status": {"hard": {"pods": "1"}, "used": {"pods": "0"}}}),
            )
        };
        let quotas = [scoped("be", "BestEffort"), scoped("nbe", "NotBestEffort")];
        let best = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        );
        let charged = check(
            &Evaluator::Pods,
            &quotas,
            Object::Pod(&best),
            None,
            clock::now(),
        )
        .unwrap();
        assert_eq!(charged.len(), 1);
        assert_eq!(charged[0].index, 0);
    }

    #[test]
    fn updates_charge_only_the_difference() {
        let q = quota(
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"services.nodeports": "1"}},
            "status": {"hard": {"services.nodeports": "1"}, "used": {"services.nodeports": "1"}}}),
        );
        let svc = |t: &str| -> Service {
            serde_json::from_value(
                json!({"metadata": {"name": "s"}, "spec": {"type": t, "ports": [{"port": 80}]}}),
            )
            .unwrap()
        };
        let (np, cip) = (svc("NodePort"), svc("ClusterIP"));
        assert!(
            check(
                &Evaluator::Services,
                std::slice::from_ref(&q),
                Object::Service(&np),
                Some(Object::Service(&np)),
                clock::now()
            )
            .is_ok()
        );
        assert_eq!(
            check(
                &Evaluator::Services,
                &[q],
                Object::Service(&np),
                Some(Object::Service(&cip)),
                clock::now()
            )
            .err()
            .unwrap(),
            "exceeded quota: q, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1"
        );
    }
}
