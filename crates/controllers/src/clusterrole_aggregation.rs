//! The ClusterRole aggregation controller, as upstream's `pkg/controller/clusterroleaggregation`
//! (`--controllers` name `clusterrole-aggregation`): a ClusterRole with an `aggregationRule`
//! holds the rules of every ClusterRole its selectors match, so that `admin`, `edit` and `view`
//! grow with the `aggregate-to-*` roles installed beside them.
//!
//! As upstream: any ClusterRole's change queues every ClusterRole with an aggregation rule; a
//! sync computes the union ([`authz::aggregation::aggregated_rules`]) and, when it differs from
//! the stored rules, applies it with server-side apply as the field manager
//! `clusterrole-aggregation-controller` (forced), falling back to an update where apply is not
//! supported.
//!
//! ClusterRoles are cached as dynamic objects (the shared cache has no typed ClusterRole kind).

use crate::runtime::{Action, Controller, WorkQueue};
use informer::{Change, Informer, Informers, Subscription};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use std::sync::Arc;

/// The field manager of the controller's writes (upstream's).
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

/// Why a sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// An aggregation rule's selector is invalid.
    #[error("{0}")]
    Selector(#[from] api::selector::SelectorError),
}

/// How the controller runs (upstream runs 5 workers).
pub type Config = crate::runtime::Config;

/// The aggregation controller: the shared cache's ClusterRoles and a queue of their names.
pub struct ClusterRoleAggregationController {
    client: Client,
    roles: Informer<DynamicObject>,
    queue: WorkQueue<String>,
}

fn resource() -> ApiResource {
    ApiResource::erase::<ClusterRole>(&())
}

/// A cached ClusterRole as the typed object.
fn typed(obj: &DynamicObject) -> Option<ClusterRole> {
    let mut v = serde_json::to_value(obj).ok()?;
    let map = v.as_object_mut()?;
    map.insert("apiVersion".into(), "rbac.authorization.k8s.io/v1".into());
    map.insert("kind".into(), "ClusterRole".into());
    serde_json::from_value(v).ok()
}

fn has_aggregation_rule(obj: &DynamicObject) -> bool {
    obj.data
        .get("aggregationRule")
        .is_some_and(|r| !r.is_null())
}

impl Controller for ClusterRoleAggregationController {
    const NAME: &'static str = "clusterrole-aggregation";
    type Key = String;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<String> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let this = Arc::clone(self);
        vec![self.roles.subscribe(move |_: &Change<DynamicObject>| {
            // Upstream's enqueue: whatever changed, every aggregating role may need a sync.
            for role in this.roles.store().list() {
                if has_aggregation_rule(&role) {
                    this.queue.add(role.name_any());
                }
            }
        })]
    }

    async fn reconcile(self: &Arc<Self>, name: String) -> Result<Action, Error> {
        let Some(cached) = self.roles.get(&name) else {
            return Ok(Action::await_change());
        };
        let Some(role) = typed(&cached) else {
            return Ok(Action::await_change());
        };
        let all: Vec<ClusterRole> = self
            .roles
            .store()
            .list()
            .iter()
            .filter_map(|r| typed(r))
            .collect();
        let Some(rules) = authz::aggregation::aggregated_rules(&role, &all) else {
            return Ok(Action::await_change());
        };
        let rules = rules?;
        if authz::aggregation::same_rules(&rules, role.rules.as_deref().unwrap_or_default()) {
            return Ok(Action::await_change());
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource());
        let patch = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch(&name, &params, &Patch::Apply(&patch)).await {
            Ok(_) => Ok(Action::await_change()),
            // Upstream's fallback for servers without apply: an update of the cached object.
            Err(kube::Error::Api(s)) if s.code == 415 => {
                let mut obj: DynamicObject = cached.object().clone();
                obj.data["rules"] = serde_json::to_value(&rules).unwrap_or(Value::Null);
                api.replace(&name, &PostParams::default(), &obj).await?;
                Ok(Action::await_change())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
            Err(e) => Err(e.into()),
        }
    }
}

impl ClusterRoleAggregationController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            queue: config.queue(),
            roles: informers.dynamic(&resource()),
        })
    }
}
