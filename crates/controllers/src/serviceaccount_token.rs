//! The legacy ServiceAccount token controller, as upstream's
//! `pkg/controller/serviceaccount/tokens_controller.go` (`--controllers` name
//! `serviceaccount-token`): a Secret of type `kubernetes.io/service-account-token` annotated
//! `kubernetes.io/service-account.name` is filled with a token for that ServiceAccount, signed with
//! the cluster's service-account key, the cluster's CA bundle and its namespace (`data.token`,
//! `data.ca.crt`, `data.namespace`), and annotated with the ServiceAccount's uid. A token Secret
//! whose ServiceAccount is gone (or is another one of the same name: the uid annotation differs)
//! is deleted, and a deleted ServiceAccount takes its token Secrets with it.
//!
//! As upstream, a Secret is written only when something is missing (a token, the namespace, or a
//! CA that differs from the bundle), and only from the version the server holds now: a cached
//! Secret that is not current waits for its newer version's event rather than overwriting it.
//!
//! It runs only with the signing key ([`Config::key`]); the CA it writes is the one the root CA
//! publisher publishes (`Settings::root_ca`), none without one.
//!
//! Secrets are cached as dynamic objects (the shared cache has no typed Secret kind, and the
//! garbage collector's generic watch of Secrets is a dynamic one: the two share one watch).

use crate::runtime::{Action, Controller, WorkQueue};
use base64::Engine as _;
use informer::{Change, Informer, Informers, Key, Subscription, key};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, PostParams, Preconditions},
    core::TypeMeta,
};
use serde_json::Value;
use std::sync::Arc;

/// The Secret type this controller fills.
pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming the Secret's ServiceAccount.
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// The annotation holding the ServiceAccount's uid.
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// The data key of the token.
pub const TOKEN_KEY: &str = "token";
/// The data key of the CA bundle.
pub const CA_KEY: &str = "ca.crt";
/// The data key of the namespace.
pub const NAMESPACE_KEY: &str = "namespace";

/// Why a sync failed (it is retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// Signing the token failed.
    #[error("{0}")]
    Sign(#[from] satoken::KeyError),
}

/// How the token controller runs.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The key tokens are signed with; without one the controller does not start.
    pub key: Option<Arc<satoken::Key>>,
    /// How it runs: concurrent syncs (upstream's `--concurrent-serviceaccount-token-syncs`, 5);
    /// retry delays of failed syncs.
    pub run: crate::runtime::Config<5>,
}

/// The token controller: the shared cache's ServiceAccounts and Secrets, and a queue of Secret
/// keys.
pub struct TokensController {
    client: Client,
    key: Arc<satoken::Key>,
    /// The CA bundle (PEM) written into `ca.crt`; empty writes none.
    ca: String,
    accounts: Informer<ServiceAccount>,
    secrets: Informer<DynamicObject>,
    queue: WorkQueue<Key>,
}

impl Controller for TokensController {
    const NAME: &'static str = "serviceaccount-token";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_secret = Arc::clone(self);
        let on_account = Arc::clone(self);
        vec![
            self.secrets.subscribe(move |c: &Change<DynamicObject>| {
                if matches!(c, Change::Deleted(_)) {
                    return;
                }
                let s = c.object();
                if is_token_secret(s)
                    && let Some(ns) = &s.metadata.namespace
                {
                    on_secret.queue.add(key(ns, &s.name_any()));
                }
            }),
            // A deleted ServiceAccount's token Secrets are looked at again (and deleted).
            self.accounts.subscribe(move |c: &Change<ServiceAccount>| {
                let Change::Deleted(sa) = c else { return };
                let ns = sa.namespace().unwrap_or_default();
                for s in on_account.secrets.store().in_namespace(&ns) {
                    if is_token_secret(&s) && names_account(&s, sa) {
                        on_account.queue.add(key(&ns, &s.name_any()));
                    }
                }
            }),
        ]
    }

    async fn reconcile(self: &Arc<Self>, secret_key: Key) -> Result<Action, Error> {
        let Some(cached) = self.secrets.get(&secret_key) else {
            return Ok(Action::await_change());
        };
        let secret: &DynamicObject = &cached;
        if !is_token_secret(secret) {
            return Ok(Action::await_change());
        }
        let namespace = secret.namespace().unwrap_or_default();
        let (name, uid) = account_of(secret);
        match self.account(&namespace, &name, &uid).await? {
            None => self.delete(&namespace, secret).await,
            Some(sa) => self.fill(&namespace, secret, &sa).await,
        }
    }
}

impl TokensController {
    /// The controller on the shared cache, signing with `key` and writing `ca` (PEM, may be
    /// empty).
    pub fn new(
        informers: &Informers,
        key: Arc<satoken::Key>,
        ca: String,
        config: Config,
    ) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            key,
            ca,
            accounts: informers.get(),
            secrets: informers.dynamic(&ApiResource::erase::<Secret>(&())),
            queue: config.run.queue(),
        })
    }

    /// The ServiceAccount `name` (with `uid` when given): from the cache, else from the server
    /// (upstream's `getServiceAccount` with `fetchOnCacheMiss`, so that a Secret created just
    /// after its ServiceAccount is not taken for an orphan).
    async fn account(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<Option<ServiceAccount>, Error> {
        let matches = |sa: &ServiceAccount| uid.is_empty() || sa.uid().as_deref() == Some(uid);
        if let Some(sa) = self.accounts.get(&key(namespace, name))
            && matches(&sa)
        {
            return Ok(Some((*sa).clone()));
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await? {
            Some(sa) if matches(&sa) => Ok(Some(sa)),
            _ => Ok(None),
        }
    }

    /// Deletes a token Secret whose ServiceAccount is gone (at its uid: a Secret of the same
    /// name made since is not this one).
    async fn delete(&self, namespace: &str, secret: &DynamicObject) -> Result<Action, Error> {
        let api = self.secrets_api(namespace);
        let params = DeleteParams {
            preconditions: secret.uid().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&secret.name_any(), &params).await {
            Ok(_) => {
                tracing::debug!(
                    namespace,
                    secret = secret.name_any(),
                    "deleted token of a gone ServiceAccount"
                );
                Ok(Action::await_change())
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                Ok(Action::await_change())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Writes what the Secret lacks, from the version the server holds.
    async fn fill(
        &self,
        namespace: &str,
        cached: &DynamicObject,
        sa: &ServiceAccount,
    ) -> Result<Action, Error> {
        if self.needs(cached).is_none() {
            return Ok(Action::await_change());
        }
        let api = self.secrets_api(namespace);
        let Some(mut live) = api.get_opt(&cached.name_any()).await? else {
            return Ok(Action::await_change());
        };
        if live.resource_version() != cached.resource_version() {
            // Its newer version's event queues it again.
            return Ok(Action::await_change());
        }
        let Some(needs) = self.needs(&live) else {
            return Ok(Action::await_change());
        };
        let encode = |s: &str| Value::String(base64::engine::general_purpose::STANDARD.encode(s));
        let mut data = live
            .data
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if needs.ca {
            data.insert(CA_KEY.into(), encode(&self.ca));
        }
        if needs.namespace {
            data.insert(NAMESPACE_KEY.into(), encode(namespace));
        }
        if needs.token {
            let claims = satoken::LegacyClaims::new(
                namespace,
                &satoken::ObjectRef::new(sa.name_any(), sa.uid().unwrap_or_default()),
                &live.name_any(),
            );
            data.insert(TOKEN_KEY.into(), encode(&self.key.sign(&claims)?));
        }
        match live.data.as_object_mut() {
            Some(fields) => {
                fields.insert("data".into(), Value::Object(data));
            }
            None => live.data = serde_json::json!({ "data": data }),
        }
        let annotations = live.metadata.annotations.get_or_insert_default();
        annotations.insert(NAME_ANNOTATION.into(), sa.name_any());
        annotations.insert(UID_ANNOTATION.into(), sa.uid().unwrap_or_default());
        live.types = Some(TypeMeta {
            api_version: "v1".into(),
            kind: "Secret".into(),
        });
        match api
            .replace(&live.name_any(), &PostParams::default(), &live)
            .await
        {
            Ok(_) => Ok(Action::await_change()),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                Ok(Action::await_change())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// What `secret` lacks (upstream's `secretUpdateNeeded`); `None` when nothing.
    fn needs(&self, secret: &DynamicObject) -> Option<Needs> {
        let field = |k: &str| {
            secret
                .data
                .get("data")
                .and_then(|d| d.get(k))
                .and_then(Value::as_str)
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .unwrap_or_default()
        };
        let needs = Needs {
            ca: !self.ca.is_empty() && field(CA_KEY) != self.ca.as_bytes(),
            namespace: field(NAMESPACE_KEY).is_empty(),
            token: field(TOKEN_KEY).is_empty(),
        };
        (needs.ca || needs.namespace || needs.token).then_some(needs)
    }

    fn secrets_api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            namespace,
            &ApiResource::erase::<Secret>(&()),
        )
    }
}

/// What a token Secret lacks.
#[derive(Clone, Copy, Debug)]
struct Needs {
    ca: bool,
    namespace: bool,
    token: bool,
}

fn is_token_secret(s: &DynamicObject) -> bool {
    s.data.get("type").and_then(Value::as_str) == Some(SECRET_TYPE)
}

/// The ServiceAccount name and uid (empty when unset) a token Secret's annotations name.
fn account_of(s: &DynamicObject) -> (String, String) {
    let a = |k: &str| {
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k))
            .cloned()
            .unwrap_or_default()
    };
    (a(NAME_ANNOTATION), a(UID_ANNOTATION))
}

/// Upstream's `IsServiceAccountToken`: the Secret names `sa`, and its uid if it names one.
fn names_account(s: &DynamicObject, sa: &ServiceAccount) -> bool {
    let (name, uid) = account_of(s);
    name == sa.name_any() && (uid.is_empty() || Some(uid) == sa.uid())
}

/// Starts the controller as `--controllers` enables it, or, without a signing key, only says why
/// it does not run.
pub(crate) fn start(informers: &Informers, settings: &crate::Settings) -> crate::Start {
    let config = settings.serviceaccount_token.clone();
    let ca = settings
        .root_ca
        .bundle
        .as_ref()
        .map(|b| b.pem().to_string())
        .unwrap_or_default();
    match config.key.clone() {
        Some(key) => crate::on_cache(informers, (key, ca, config), |i, (key, ca, config)| {
            TokensController::new(i, key, ca, config)
        }),
        None => Box::new(|| {
            Box::pin(async {
                tracing::warn!(
                    controller = TokensController::NAME,
                    "not started: no service-account signing key; token Secrets stay empty"
                );
            })
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(annotations: Value, data: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "ns", "annotations": annotations},
            "type": SECRET_TYPE, "data": data,
        }))
        .unwrap()
    }

    #[test]
    fn a_secret_names_its_account_by_name_and_uid() {
        let sa: ServiceAccount = serde_json::from_value(
            json!({"metadata": {"name": "robot", "namespace": "ns", "uid": "u1"}}),
        )
        .unwrap();
        let cases = [
            (json!({NAME_ANNOTATION: "robot"}), true),
            (
                json!({NAME_ANNOTATION: "robot", UID_ANNOTATION: "u1"}),
                true,
            ),
            (
                json!({NAME_ANNOTATION: "robot", UID_ANNOTATION: "u2"}),
                false,
            ),
            (json!({NAME_ANNOTATION: "other"}), false),
        ];
        for (annotations, want) in cases {
            let s = secret(annotations.clone(), json!({}));
            assert!(is_token_secret(&s));
            assert_eq!(names_account(&s, &sa), want, "{annotations}");
        }
    }
}
