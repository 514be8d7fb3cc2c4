//! The kube-aggregator, in process (upstream's `staging/src/k8s.io/kube-aggregator`, as
//! kube-apiserver runs it in front of itself).
//!
//! - [`autoregister`]: a local APIService for every built-in group/version served and for every
//!   served version of a CustomResourceDefinition (upstream's autoregister and crdregistration
//!   controllers).
//! - [`available`]: the `Available` condition of each APIService (upstream's
//!   `AvailableConditionController`), with a discovery check of remote ones.
//! - [`proxy`]: requests under `/apis/GROUP/VERSION` of a remote APIService are passed to its
//!   Service with the user in front-proxy headers (upstream's `proxyHandler`).
//! - [`discovery`]: remote groups in `/apis`, `/apis/GROUP` and aggregated discovery (upstream's
//!   `apisHandler`, `apiGroupHandler` and discovery manager).
//!
//! Services are reached through their endpoints (upstream's `--enable-aggregator-routing`):
//! cluster IPs here route nowhere.

mod autoregister;
mod available;
pub(crate) mod discovered;
pub(crate) mod discovery;
pub(crate) mod proxy;

use std::{cmp::Ordering, sync::Arc};

use axum::{body::Body, http::Method};
use serde_json::Value;
use tower::ServiceExt as _;

use tokio::sync::broadcast;

use crate::{
    cache::{Cache, CacheEvent},
    object,
    registry::Kind,
    state::ApiServer,
};

/// The group of APIServices.
pub(crate) const GROUP: &str = "apiregistration.k8s.io";
/// Where the server's APIServices are written.
const API_SERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

pub(crate) use crate::registry::apiregistration::local_condition;

/// Registers the local APIServices and starts the controllers that keep every APIService
/// (registrations, conditions).
pub(crate) async fn start(server: &ApiServer) {
    autoregister::start(server).await;
    tokio::spawn(available::run(server.clone()));
}

/// The Service an APIService names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

/// An APIService as the aggregator reads it.
#[derive(Clone, Debug)]
pub(crate) struct ApiService {
    pub name: String,
    pub group: String,
    pub version: String,
    pub group_priority: i64,
    pub version_priority: i64,
    /// `None` for a local APIService.
    pub service: Option<ServiceRef>,
    pub ca_bundle: Vec<u8>,
    pub insecure: bool,
    /// Whether its `Available` condition is True.
    pub available: bool,
}

impl ApiService {
    pub(crate) fn parse(obj: &Value) -> ApiService {
        let spec = &obj["spec"];
        let service = spec
            .get("service")
            .filter(|s| s.is_object())
            .map(|s| ServiceRef {
                namespace: s["namespace"].as_str().unwrap_or_default().to_string(),
                name: s["name"].as_str().unwrap_or_default().to_string(),
                port: s["port"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            });
        let ca_bundle = spec["caBundle"]
            .as_str()
            .and_then(|b| {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.decode(b).ok()
            })
            .unwrap_or_default();
        ApiService {
            name: object::name(obj).to_string(),
            group: spec["group"].as_str().unwrap_or_default().to_string(),
            version: spec["version"].as_str().unwrap_or_default().to_string(),
            group_priority: spec["groupPriorityMinimum"].as_i64().unwrap_or(0),
            version_priority: spec["versionPriority"].as_i64().unwrap_or(0),
            service,
            ca_bundle,
            insecure: spec["insecureSkipTLSVerify"].as_bool() == Some(true),
            available: available_condition(obj).is_some_and(|c| c["status"] == "True"),
        }
    }
}

/// An APIService's `Available` condition.
pub(crate) fn available_condition(obj: &Value) -> Option<&Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Available")
}

pub(super) fn kind(server: &ApiServer) -> Option<Arc<Kind>> {
    server.registry().owner(GROUP, "apiservices")
}

/// Every APIService in the watch cache.
pub(crate) fn api_services(server: &ApiServer) -> Vec<Value> {
    let Some(def) = kind(server) else {
        return Vec::new();
    };
    server
        .cache
        .list(&def, None)
        .0
        .iter()
        .map(|e| e.value())
        .collect()
}

/// The APIService named `name`, from the watch cache.
pub(crate) fn api_service(server: &ApiServer, name: &str) -> Option<Value> {
    let def = kind(server)?;
    Some(server.cache.get(&def, None, name)?.value())
}

/// The APIServices that name a Service, grouped by group as upstream's
/// `SortedByGroupAndVersion` orders them: groups by their highest `groupPriorityMinimum` (then
/// APIService name), versions by `versionPriority`, then Kubernetes version order.
pub(crate) fn sorted_by_group_and_version(mut services: Vec<ApiService>) -> Vec<Vec<ApiService>> {
    services.sort_by(|a, b| {
        b.group_priority
            .cmp(&a.group_priority)
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut groups: Vec<Vec<ApiService>> = Vec::new();
    for s in services {
        match groups.iter_mut().find(|g| g[0].group == s.group) {
            Some(g) => g.push(s),
            None => groups.push(vec![s]),
        }
    }
    for g in &mut groups {
        g.sort_by(|a, b| {
            b.version_priority
                .cmp(&a.version_priority)
                .then_with(|| compare_kube_versions(&b.version, &a.version))
        });
    }
    groups
}

/// Upstream's `CompareKubeAwareVersionStrings`: GA above beta above alpha above anything else,
/// higher major then minor numbers above lower, other strings in reverse alphabetical order.
fn compare_kube_versions(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        let (level, minor) = match (tail.strip_prefix("beta"), tail.strip_prefix("alpha")) {
            (Some(m), _) => (2, m),
            (_, Some(m)) => (1, m),
            _ => return None,
        };
        if minor.is_empty() || !minor.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        Some((level, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => b.cmp(a),
    }
}

/// A change seen by a [`Follow`].
pub(crate) enum Change {
    /// This object changed.
    One(Arc<CacheEvent>),
    /// Events were missed (the follower lagged or the cache relisted): anything may have changed.
    Unknown,
}

/// Follows one stored kind's changes in the watch cache, from the moment it was made.
pub(crate) struct Follow {
    cache: Arc<Cache>,
    def: Arc<Kind>,
    live: broadcast::Receiver<Arc<CacheEvent>>,
}

impl Follow {
    pub(crate) fn new(server: &ApiServer, group: &str, plural: &str) -> Option<Follow> {
        let def = server.registry().owner(group, plural)?;
        let live = server.cache.subscribe(&def, None).ok()?.live;
        Some(Follow {
            cache: server.cache.clone(),
            def,
            live,
        })
    }

    /// The next change; pending forever once the cache is gone.
    pub(crate) async fn changed(&mut self) -> Change {
        match self.live.recv().await {
            Ok(event) => Change::One(event),
            Err(broadcast::error::RecvError::Lagged(_)) => Change::Unknown,
            Err(broadcast::error::RecvError::Closed) => {
                // The cache relisted: follow its new channel.
                match self.cache.subscribe(&self.def, None) {
                    Ok(s) => self.live = s.live,
                    Err(_) => std::future::pending::<()>().await,
                }
                Change::Unknown
            }
        }
    }
}

/// A request of the server to itself, as upstream's loopback client makes them: the status and
/// the decoded answer.
async fn call(server: &ApiServer, method: Method, uri: &str, body: Option<&Value>) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::ACCEPT, "application/json");
    if body.is_some() {
        req = req.header(http::header::CONTENT_TYPE, "application/json");
    }
    let Ok(req) = req.body(Body::from(body.map(Value::to_string).unwrap_or_default())) else {
        return (500, Value::Null);
    };
    let Ok(resp) = server.in_process_router().oneshot(req).await;
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, group: &str, version: &str, gp: i64, vp: i64) -> ApiService {
        ApiService {
            name: name.into(),
            group: group.into(),
            version: version.into(),
            group_priority: gp,
            version_priority: vp,
            service: None,
            ca_bundle: Vec::new(),
            insecure: false,
            available: true,
        }
    }

    #[test]
    fn groups_sort_by_priority_then_name_and_versions_by_priority_then_kube_order() {
        let groups = sorted_by_group_and_version(vec![
            svc("v1.b.example.com", "b.example.com", "v1", 1000, 100),
            svc(
                "v1beta1.a.example.com",
                "a.example.com",
                "v1beta1",
                1000,
                100,
            ),
            svc("v1.a.example.com", "a.example.com", "v1", 1000, 100),
            svc(
                "v2alpha1.a.example.com",
                "a.example.com",
                "v2alpha1",
                1000,
                100,
            ),
            svc(
                "v1beta1.metrics.k8s.io",
                "metrics.k8s.io",
                "v1beta1",
                100,
                100,
            ),
            svc("v1.apps", "apps", "v1", 17800, 15),
        ]);
        let names: Vec<Vec<&str>> = groups
            .iter()
            .map(|g| g.iter().map(|s| s.version.as_str()).collect())
            .collect();
        assert_eq!(groups[0][0].group, "apps");
        assert_eq!(groups[1][0].group, "a.example.com");
        assert_eq!(groups[2][0].group, "b.example.com");
        assert_eq!(groups[3][0].group, "metrics.k8s.io");
        assert_eq!(names[1], ["v1", "v1beta1", "v2alpha1"]);
    }

    #[test]
    fn kube_versions_order_as_upstreams() {
        let mut v = vec![
            "foo1",
            "v1alpha1",
            "v11alpha2",
            "v1",
            "v2beta1",
            "v10",
            "v12alpha1",
            "foo10",
        ];
        v.sort_by(|a, b| compare_kube_versions(b, a));
        assert_eq!(
            v,
            [
                "v10",
                "v1",
                "v2beta1",
                "v12alpha1",
                "v11alpha2",
                "v1alpha1",
                "foo1",
                "foo10"
            ]
        );
    }
}
