//! Upstream's ServiceAccount admission plugin (`plugin/pkg/admission/serviceaccount`), for pods:
//! a pod that names no ServiceAccount runs as `default`, and a pod naming one that does not exist
//! is refused. The `default` ServiceAccount of a new namespace is created by the serviceaccount
//! controller moments after the namespace, so a missing `default` is looked up again for a short
//! while (upstream retries ten times), which keeps "create a namespace, then a pod" working.
//! Unless the pod or its ServiceAccount opts out (`automountServiceAccountToken: false`), every
//! container mounts the projected `kube-api-access-*` volume (token, cluster CA, namespace) at
//! upstream's path, as the plugin adds it.

use crate::{
    error::{ApiError, ApiResult},
    state::ApiServer,
};
use serde_json::{Value, json};
use std::time::Duration;

/// The ServiceAccount a pod runs as when it names none.
pub const DEFAULT: &str = "default";

/// How often a missing `default` ServiceAccount is looked up (upstream's `numAttempts`).
const DEFAULT_ATTEMPTS: u32 = 10;

/// The pause between those lookups (upstream waits 100 to 200 ms).
const RETRY_INTERVAL: Duration = Duration::from_millis(150);

/// Sets `spec.serviceAccountName` (and its deprecated mirror `spec.serviceAccount`) on a new pod
/// and checks that the ServiceAccount exists; `requested` is the pod's name or `generateName`,
/// for the message.
pub(crate) async fn admit_pod(
    server: &ApiServer,
    namespace: &str,
    requested: &str,
    pod: &mut Value,
) -> ApiResult<()> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let named = |spec: &serde_json::Map<String, Value>, field: &str| {
        spec.get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let account = named(spec, "serviceAccountName")
        .or_else(|| named(spec, "serviceAccount"))
        .unwrap_or_else(|| DEFAULT.to_string());
    spec.insert(
        "serviceAccountName".to_string(),
        Value::String(account.clone()),
    );
    spec.insert("serviceAccount".to_string(), Value::String(account.clone()));
    let Some(sa) = lookup(server, namespace, &account).await? else {
        return Err(ApiError::forbidden(format!(
            "pods \"{requested}\" is forbidden: error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found"
        )));
    };
    // The pod's own choice wins, then the ServiceAccount's; upstream mounts by default.
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            sa.get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true);
    if automount {
        mount_token(spec);
    }
    Ok(())
}

/// Where every container finds its ServiceAccount's token, CA and namespace.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Upstream's `mountServiceAccountToken`: each container (init ones first) without a mount at
/// [`TOKEN_MOUNT_PATH`] gets one of the pod's `kube-api-access-*` volume, added if missing.
fn mount_token(spec: &mut serde_json::Map<String, Value>) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .find(|n| n.starts_with("kube-api-access-"))
        .map(str::to_string);
    let volume = existing
        .clone()
        .unwrap_or_else(|| format!("kube-api-access-{}", crate::admission::random_suffix()));
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for c in containers.iter_mut() {
            let Some(c) = c.as_object_mut() else {
                continue;
            };
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            let Value::Array(mounts) = mounts else {
                continue;
            };
            if mounts.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH) {
                continue;
            }
            mounts.push(json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
            needed = true;
        }
    }
    if existing.is_none() && needed {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if let Value::Array(volumes) = volumes {
            volumes.push(json!({"name": volume, "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}}));
        }
    }
}

/// The ServiceAccount `namespace/name`, looking again for a while when it is `default`.
async fn lookup(server: &ApiServer, namespace: &str, name: &str) -> ApiResult<Option<Value>> {
    let def = server
        .registry()
        .find("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::internal("no serviceaccounts kind"))?;
    let attempts = if name == DEFAULT { DEFAULT_ATTEMPTS } else { 1 };
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(RETRY_INTERVAL).await;
            server.sync_cache().await?;
        }
        if let Some(e) = server.cache.get(&def, Some(namespace), name) {
            return Ok(Some(e.value()));
        }
    }
    Ok(None)
}

fn is_mirror_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(authz::node::MIRROR_POD_ANNOTATION))
        .is_some()
}

/// Upstream's `Validate` of a mirror pod: a pod a kubelet mirrors from a static manifest may not
/// refer to a ServiceAccount, a Secret or a projected ServiceAccount token, since nothing
/// admitted it as a workload that may use them.
fn check_mirror_pod(pod: &Value) -> Result<(), &'static str> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    if spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        return Err("a mirror pod may not reference service accounts");
    }
    let mut secrets = false;
    authz::node::visit_secrets(pod, &mut |_| secrets = true);
    if secrets {
        return Err("a mirror pod may not reference secrets");
    }
    let projects_token = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/projected/sources").and_then(Value::as_array))
        .flatten()
        .any(|s| s.get("serviceAccountToken").is_some_and(|t| !t.is_null()));
    if projects_token {
        return Err("a mirror pod may not use ServiceAccountToken volume projections");
    }
    Ok(())
}

/// Upstream's `ServiceAccount` admission plugin, for new pods.
pub(crate) struct ServiceAccount;

#[async_trait::async_trait]
impl crate::plugins::Plugin for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn handles(&self, review: &crate::plugins::Review<'_>) -> bool {
        crate::plugins::creates_pod(review)
    }

    fn may_mutate(&self, server: &ApiServer, _review: &crate::plugins::Review<'_>) -> bool {
        server.service_accounts
    }

    async fn admit(
        &self,
        server: &ApiServer,
        review: &crate::plugins::Review<'_>,
        obj: &mut Value,
    ) -> ApiResult<Vec<String>> {
        // Off when the server runs without ServiceAccounts (`--service-accounts=false`).
        if !server.service_accounts {
            return Ok(Vec::new());
        }
        // Upstream leaves a mirror pod's spec alone (the kubelet would delete a mirror pod that
        // no longer matches its manifest) and only checks what it refers to.
        if is_mirror_pod(obj) {
            return match check_mirror_pod(obj) {
                Ok(()) => Ok(Vec::new()),
                Err(why) => Err(ApiError::forbidden_by_admission(
                    review.kind,
                    crate::object::name(obj),
                    why,
                )),
            };
        }
        admit_pod(
            server,
            review.namespace.unwrap_or_default(),
            review.name,
            obj,
        )
        .await?;
        Ok(Vec::new())
    }
}
