//! Upstream's ServiceAccount admission plugin (`plugin/pkg/admission/serviceaccount`), for pods:
//! a pod that names no ServiceAccount runs as `default`, and a pod naming one that does not exist
//! is refused. The `default` ServiceAccount of a new namespace is created by the serviceaccount
//! controller moments after the namespace, so a missing `default` is looked up again for a short
//! while (upstream retries ten times), which keeps "create a namespace, then a pod" working.

use crate::{
    error::{ApiError, ApiResult},
    server::ApiServer,
};
use serde_json::Value;
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
    if exists(server, namespace, &account).await? {
        return Ok(());
    }
    Err(ApiError::forbidden(format!(
        "pods \"{requested}\" is forbidden: error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found"
    )))
}

/// Whether `namespace/name` exists, looking again for a while when it is `default`.
async fn exists(server: &ApiServer, namespace: &str, name: &str) -> ApiResult<bool> {
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
        if server.cache.get(&def, Some(namespace), name).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}
