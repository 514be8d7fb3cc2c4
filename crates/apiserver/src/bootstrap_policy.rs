//! Upstream's bootstrap RBAC policy kept in the cluster: at start the server reconciles every
//! bootstrap (Cluster)Role and (Cluster)RoleBinding with what it holds, as kube-apiserver's
//! `rbac/bootstrap-roles` post-start hook does (`pkg/registry/rbac/rest/storage_rbac.go`):
//! missing objects are created, existing ones gain what they lack, and objects annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "false"` are left alone. A failure is logged and
//! the next object tried, as upstream does.

use crate::{admission, change::Change, error::ApiResult, registry::Kind, state::ApiServer};
use authz::reconcile::{self, Reconciliation};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// Which reconciliation an object takes.
#[derive(Clone, Copy)]
enum Shape {
    Role,
    Binding,
}

impl Shape {
    fn reconcile(self, existing: Option<&Value>, expected: &Value) -> Reconciliation {
        match self {
            Shape::Role => reconcile::reconcile_role(existing, expected),
            Shape::Binding => reconcile::reconcile_binding(existing, expected),
        }
    }
}

/// The bootstrap objects as JSON with their kind, in upstream's order (cluster roles, cluster
/// role bindings, namespaced roles, namespaced role bindings).
fn bootstrap_objects() -> Vec<(&'static str, Shape, Value)> {
    fn with_kind<T: Serialize>(
        kind: &'static str,
        shape: Shape,
        obj: &T,
    ) -> Option<(&'static str, Shape, Value)> {
        let mut v = serde_json::to_value(obj).ok()?;
        let map = v.as_object_mut()?;
        map.insert("apiVersion".into(), "rbac.authorization.k8s.io/v1".into());
        map.insert("kind".into(), kind.into());
        Some((kind, shape, v))
    }
    let p = authz::bootstrap::policy();
    let mut out = Vec::new();
    out.extend(
        p.cluster_roles
            .iter()
            .filter_map(|r| with_kind("ClusterRole", Shape::Role, r)),
    );
    out.extend(
        p.cluster_role_bindings
            .iter()
            .filter_map(|b| with_kind("ClusterRoleBinding", Shape::Binding, b)),
    );
    out.extend(
        p.roles
            .iter()
            .filter_map(|r| with_kind("Role", Shape::Role, r)),
    );
    out.extend(
        p.role_bindings
            .iter()
            .filter_map(|b| with_kind("RoleBinding", Shape::Binding, b)),
    );
    out
}

/// Reconciles the bootstrap policy with the cluster's objects.
pub(crate) async fn reconcile(server: &ApiServer) -> ApiResult<()> {
    for (kind, shape, expected) in bootstrap_objects() {
        let Some(def) = server
            .registry()
            .find_kind("rbac.authorization.k8s.io", kind)
        else {
            continue;
        };
        let name = crate::object::name(&expected).to_string();
        let ns = crate::object::namespace(&expected).map(str::to_string);
        if let Err(e) = reconcile_one(server, &def, shape, ns.as_deref(), &name, &expected).await {
            tracing::warn!(kind, name, error = %e, "unable to reconcile bootstrap RBAC object");
        }
    }
    Ok(())
}

async fn reconcile_one(
    server: &ApiServer,
    def: &Arc<Kind>,
    shape: Shape,
    ns: Option<&str>,
    name: &str,
    expected: &Value,
) -> ApiResult<()> {
    // Upstream tries three times when a create races a create, or an update a delete.
    for _ in 0..3 {
        let existing = server.cache.get(def, ns, name).map(|e| e.value());
        match shape.reconcile(existing.as_ref(), expected) {
            Reconciliation::None => return Ok(()),
            Reconciliation::Create(obj) => match create(server, def, ns, obj).await {
                Err(e) if e.code == 409 => continue,
                other => return other,
            },
            Reconciliation::Update(_) => {
                let outcome = server
                    .guaranteed_update(def, ns, name, false, |old, _| {
                        Ok(match shape.reconcile(Some(old), expected) {
                            Reconciliation::Update(new) => Change::Write(new),
                            _ => Change::Write(old.clone()),
                        })
                    })
                    .await;
                match outcome {
                    Err(e) if e.code == 404 => continue,
                    other => return other.map(|_| ()),
                }
            }
            Reconciliation::Recreate(obj) => {
                let deleted = server
                    .guaranteed_update(def, ns, name, false, |_, _| Ok(Change::Delete))
                    .await;
                match deleted {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
                match create(server, def, ns, obj).await {
                    Err(e) if e.code == 409 => continue,
                    other => return other,
                }
            }
        }
    }
    Err(crate::error::ApiError::internal(
        "exceeded maximum attempts",
    ))
}

async fn create(server: &ApiServer, def: &Kind, ns: Option<&str>, mut obj: Value) -> ApiResult<()> {
    admission::prepare_create(
        def,
        &mut obj,
        ns,
        &*server.cache,
        admission::Pass::VALIDATED,
    )?;
    server.store_create(def, obj, false).await.map(|_| ())
}
