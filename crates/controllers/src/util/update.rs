//! Writes of a whole object as upstream's controllers make them: `Update`/`UpdateStatus` (a PUT
//! carrying the resourceVersion read), retried on a 409 Conflict with the object read again, as
//! `retry.RetryOnConflict` does. Upstream's controller roles grant `update` on what these
//! controllers write (`statefulsets/status`, `namespaces/status`, `persistentvolumeclaims`...),
//! not `patch`, so a merge patch would be refused under least privilege.

use kube::{Api, Resource, ResourceExt, api::PostParams};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;
use std::fmt::Debug;

/// How many times a write is tried against a changed object (upstream's `retry.DefaultRetry`
/// has five steps).
const ATTEMPTS: usize = 5;

/// Which part of the object the PUT goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Main,
    Status,
}

/// Updates `cached`'s status subresource with `change` applied to it (as JSON): a PUT with the
/// cached resourceVersion; on a conflict, `change` is applied again to the object as the API now
/// has it. Returns the object written, or `None` when `change` left nothing to write.
pub async fn status<K>(
    api: &Api<K>,
    cached: &K,
    change: impl Fn(&mut Value),
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    write(api, cached, Part::Status, ATTEMPTS, change).await
}

/// Updates `cached` (the main resource) with `change` applied, as [`status`] does its status.
pub async fn object<K>(
    api: &Api<K>,
    cached: &K,
    change: impl Fn(&mut Value),
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    write(api, cached, Part::Main, ATTEMPTS, change).await
}

/// [`status`] tried once: a conflict is returned, for a controller whose change was decided on
/// the cached object and is decided again when the newer one's event arrives.
pub async fn status_once<K>(
    api: &Api<K>,
    cached: &K,
    change: impl Fn(&mut Value),
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    write(api, cached, Part::Status, 1, change).await
}

/// [`object`] tried once, as [`status_once`].
pub async fn object_once<K>(
    api: &Api<K>,
    cached: &K,
    change: impl Fn(&mut Value),
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    write(api, cached, Part::Main, 1, change).await
}

/// Sets each of `fields` (an object) in `obj`'s status: what a status merge patch of them
/// would change, for an update of the whole object.
pub fn set_status_fields(obj: &mut Value, fields: &Value) {
    if let Value::Object(fields) = fields {
        for (k, v) in fields {
            obj["status"][k] = v.clone();
        }
    }
}

async fn write<K>(
    api: &Api<K>,
    cached: &K,
    part: Part,
    attempts: usize,
    change: impl Fn(&mut Value),
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let name = cached.name_any();
    let mut current = cached.clone();
    let mut attempt = 1;
    loop {
        let before = serde_json::to_value(&current).map_err(kube::Error::SerdeError)?;
        let mut after = before.clone();
        change(&mut after);
        if after == before {
            return Ok(None);
        }
        let next: K = serde_json::from_value(after).map_err(kube::Error::SerdeError)?;
        let pp = PostParams::default();
        let written = match part {
            Part::Main => api.replace(&name, &pp, &next).await,
            Part::Status => api.replace_status(&name, &pp, &next).await,
        };
        match written {
            Ok(obj) => return Ok(Some(obj)),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < attempts => {
                attempt += 1;
                // The main resource, even for a status write: the roles grant `get` on it,
                // not on the status subresource (upstream re-reads with a plain Get too).
                current = api.get(&name).await?;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    async fn stale_config_map() -> (Api<ConfigMap>, ConfigMap) {
        let e = embedded::Embedded::memory().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(e.client(), "default");
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "cm"}, "data": {"a": "1"},
        }))
        .unwrap();
        let cached = api.create(&PostParams::default(), &cm).await.unwrap();
        // Someone else writes after the controller's cache saw the object.
        let mut other = cached.clone();
        other.data.as_mut().unwrap().insert("b".into(), "2".into());
        api.replace("cm", &PostParams::default(), &other)
            .await
            .unwrap();
        (api, cached)
    }

    #[tokio::test]
    async fn a_conflict_is_retried_on_the_object_read_again() {
        let (api, cached) = stale_config_map().await;
        let written = object(&api, &cached, |v| v["data"]["c"] = json!("3"))
            .await
            .unwrap()
            .unwrap();
        let data = written.data.unwrap();
        assert_eq!(
            (data["a"].as_str(), data["b"].as_str(), data["c"].as_str()),
            ("1", "2", "3")
        );
    }

    /// As the StatefulSet controller's ServiceAccount, whose role grants `get` on StatefulSets
    /// and `update` on their status, nothing more: a stale status write is retried within it.
    #[tokio::test]
    async fn a_status_conflict_is_retried_within_the_controllers_role() {
        use k8s_openapi::api::apps::v1::StatefulSet;
        let e = embedded::Embedded::memory().await.unwrap();
        let admin: Api<StatefulSet> = Api::namespaced(e.client(), "default");
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "db", "image": "postgres"}]}}},
        }))
        .unwrap();
        let cached = admin.create(&PostParams::default(), &sts).await.unwrap();
        let mut other = cached.clone();
        other.status =
            Some(serde_json::from_value(json!({"replicas": 0, "collisionCount": 1})).unwrap());
        admin
            .replace_status("db", &PostParams::default(), &other)
            .await
            .unwrap();
        let user = authz::UserInfo::new(
            "system:serviceaccount:kube-system:statefulset-controller",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                authz::AUTHENTICATED_GROUP,
            ],
        );
        let api: Api<StatefulSet> =
            Api::namespaced(embedded::client_as(&e.server, user), "default");
        // The bootstrap policy is in force once the authorizer has followed the store.
        tokio::time::timeout(std::time::Duration::from_secs(20), async {
            while api.get("db").await.is_err() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
        let written = status(&api, &cached, |v| v["status"]["readyReplicas"] = json!(0))
            .await
            .unwrap()
            .unwrap();
        let st = written.status.unwrap();
        assert_eq!((st.ready_replicas, st.collision_count), (Some(0), Some(1)));
    }

    #[tokio::test]
    async fn once_returns_the_conflict() {
        let (api, cached) = stale_config_map().await;
        let err = object_once(&api, &cached, |v| v["data"]["c"] = json!("3"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, kube::Error::Api(s) if s.code == 409),
            "{err}"
        );
    }

    #[tokio::test]
    async fn nothing_is_written_when_nothing_changes() {
        let (api, cached) = stale_config_map().await;
        let written = object(&api, &cached, |v| v["data"]["a"] = json!("1"))
            .await
            .unwrap();
        assert!(written.is_none());
        let live = api.get("cm").await.unwrap();
        assert_eq!(live.data.unwrap().len(), 2);
    }
}
