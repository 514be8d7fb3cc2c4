//! The serviceaccount controller, as upstream's `pkg/controller/serviceaccount`
//! (`ServiceAccountsController`): every active namespace has a `default` ServiceAccount, created
//! with the namespace and again whenever it is deleted. Pods rely on it: the API server's
//! ServiceAccount admission gives a pod that names none the `default` one and refuses pods whose
//! ServiceAccount does not exist.
//!
//! The queue holds namespace names; a namespace's change or the deletion of a ServiceAccount
//! named `default` queues its namespace.

use crate::runtime::{Action, Controller, WorkQueue};
use informer::{Change, Informer, Informers, Key, Subscription, key};
use k8s_openapi::{
    api::core::v1::{Namespace, ServiceAccount},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Api, Client, ResourceExt, api::PostParams};
use std::sync::Arc;

/// The ServiceAccount every namespace has.
pub const DEFAULT: &str = "default";

/// Why a sync failed (it is retried with backoff).
pub type Error = crate::runtime::ApiError;

/// How the serviceaccount controller runs (upstream's
/// `--concurrent-serviceaccount-token-syncs` is 5).
pub type Config = crate::runtime::Config;

/// The serviceaccount controller: the shared cache's namespaces and ServiceAccounts and a queue
/// of namespace names.
pub struct ServiceAccountController {
    client: Client,
    namespaces: Informer<Namespace>,
    accounts: Informer<ServiceAccount>,
    queue: WorkQueue<Key>,
}

impl Controller for ServiceAccountController {
    const NAME: &'static str = "serviceaccount";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_ns = Arc::clone(self);
        let on_sa = Arc::clone(self);
        vec![
            self.namespaces.subscribe(move |c: &Change<Namespace>| {
                if !matches!(c, Change::Deleted(_)) {
                    on_ns.queue.add(c.object().name_any());
                }
            }),
            self.accounts.subscribe(move |c: &Change<ServiceAccount>| {
                if let Change::Deleted(sa) = c
                    && sa.name_any() == DEFAULT
                {
                    on_sa.queue.add(sa.namespace().unwrap_or_default());
                }
            }),
        ]
    }

    async fn reconcile(self: &Arc<Self>, namespace: Key) -> Result<Action, Error> {
        let Some(ns) = self.namespaces.get(&namespace) else {
            return Ok(Action::await_change());
        };
        // A terminating namespace accepts no new content (upstream skips it too).
        let terminating = ns.metadata.deletion_timestamp.is_some()
            || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
        if terminating || self.accounts.get(&key(&namespace, DEFAULT)).is_some() {
            return Ok(Action::await_change());
        }
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(DEFAULT.to_string()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &namespace);
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => Ok(Action::await_change()),
            // Already there (the cache lags), or the namespace began terminating meanwhile.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => {
                Ok(Action::await_change())
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl ServiceAccountController {
    /// The controller on the shared cache.
    pub fn new(informers: &Informers, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            queue: config.queue(),
            namespaces: informers.get(),
            accounts: informers.get(),
        })
    }
}
