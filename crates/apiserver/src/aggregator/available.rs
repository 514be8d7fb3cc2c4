//! The `Available` condition of every APIService, as upstream's `AvailableConditionController`
//! (`pkg/controllers/status/available_controller.go`) sets it, with its reasons and messages: a
//! local APIService is always available; a remote one needs its Service, the port it names, an
//! endpoint address behind that port (for a ClusterIP Service), and an answer in the 200s or
//! 300s from `GET /apis/GROUP/VERSION` on one of its endpoints.
//!
//! An APIService is checked again when it, its Service or its Endpoints change, every 30
//! seconds (upstream's resync, to see a backend that died without telling), and after a failed
//! check with an exponential back-off.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use axum::{body::Body, http::Method};
use serde_json::{Value, json};
use tokio::{task::JoinSet, time::Instant};

use super::{
    API_SERVICES, ApiService, Change, Follow, GROUP, ServiceRef, api_service, api_services,
    available_condition, call, local_condition,
};
use crate::{object, outbound, state::ApiServer};

/// How long a discovery check may take (upstream's client timeout).
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// Every APIService is checked again this often (upstream's informer resync).
const RESYNC: Duration = Duration::from_secs(30);
/// The back-off after a failed check: first and longest (upstream's rate limiter).
const FIRST_RETRY: Duration = Duration::from_millis(5);
const LONGEST_RETRY: Duration = Duration::from_secs(30);
/// The most of a discovery answer read.
const MAX_DISCOVERY: usize = 8 << 20;

/// An `Available` condition without its transition time.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Verdict {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Verdict {
    fn unavailable(reason: &'static str, message: String) -> Verdict {
        Verdict {
            status: "False",
            reason,
            message,
        }
    }
}

/// The checks that need no network, in upstream's order: `Ok` when the discovery check is next.
pub(super) fn precheck(
    svc: &ServiceRef,
    service: Option<&Value>,
    endpoints: Option<&Value>,
) -> Result<(), Verdict> {
    let (name, ns) = (&svc.name, &svc.namespace);
    let Some(service) = service else {
        return Err(Verdict::unavailable(
            "ServiceNotFound",
            format!("service/{name} in {ns:?} is not present"),
        ));
    };
    let kind = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if kind != "ClusterIP" {
        return Ok(());
    }
    let port_name = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(u64::from(svc.port)))
        .map(|p| p["name"].as_str().unwrap_or_default().to_string());
    let Some(port_name) = port_name else {
        return Err(Verdict::unavailable(
            "ServicePortError",
            format!(
                "service/{name} in {ns:?} is not listening on port {}",
                svc.port
            ),
        ));
    };
    let Some(endpoints) = endpoints else {
        return Err(Verdict::unavailable(
            "EndpointsNotFound",
            format!("cannot find endpoints for service/{name} in {ns:?}"),
        ));
    };
    let has_address = endpoints["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["addresses"].as_array().is_some_and(|a| !a.is_empty()))
        .any(|s| {
            s["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"].as_str().unwrap_or_default() == port_name)
        });
    if !has_address {
        return Err(Verdict::unavailable(
            "MissingEndpoints",
            format!(
                "endpoints for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
            ),
        ));
    }
    Ok(())
}

/// Upstream's `SetAPIServiceCondition` onto `obj`'s status: the transition time moves only when
/// the status does.
fn with_condition(obj: &Value, verdict: &Verdict) -> Value {
    let mut obj = obj.clone();
    let previous = available_condition(&obj).cloned();
    let since = match &previous {
        Some(p) if p["status"] == verdict.status => p["lastTransitionTime"].clone(),
        _ => json!(object::now_rfc3339()),
    };
    let condition = json!({
        "type": "Available",
        "status": verdict.status,
        "lastTransitionTime": since,
        "reason": verdict.reason,
        "message": verdict.message,
    });
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    let conditions = &mut obj["status"]["conditions"];
    match conditions.as_array_mut() {
        Some(list) => match list.iter_mut().find(|c| c["type"] == "Available") {
            Some(c) => *c = condition,
            None => list.push(condition),
        },
        None => *conditions = json!([condition]),
    }
    obj
}

/// `GET /apis/GROUP/VERSION` (`/api/v1` for the core group) on an endpoint of the Service, as the
/// aggregator itself (`system:kube-aggregator` in `system:masters`), trusting any certificate as
/// upstream's check does; the answer's resources on success, upstream's message otherwise.
async fn discover(
    server: &ApiServer,
    api: &ApiService,
    svc: &ServiceRef,
) -> Result<Vec<Value>, String> {
    let addr = outbound::resolve_endpoint(server, &svc.namespace, &svc.name, svc.port)?;
    let path = if api.name == "v1." {
        format!("/api/{}", api.version)
    } else {
        format!("/apis/{}/{}", api.group, api.version)
    };
    let url = format!("https://{addr}{path}");
    let exchange = async {
        let config = outbound::tls_config(outbound::Trust::Anything)?;
        let server_name = format!("{}.{}.svc", svc.name, svc.namespace);
        let mut sender =
            outbound::connect(server, &[addr], &addr.to_string(), &server_name, config).await?;
        let request = http::Request::get(path.as_str())
            .header(http::header::HOST, addr.to_string())
            .header(http::header::ACCEPT, "application/json")
            .header(super::proxy::USER_HEADER, "system:kube-aggregator")
            .header(super::proxy::GROUP_HEADER, authz::MASTERS_GROUP)
            .body(Body::empty())
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = axum::body::to_bytes(Body::new(response.into_body()), MAX_DISCOVERY)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((status, body))
    };
    let (status, body) = match tokio::time::timeout(CHECK_TIMEOUT, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(why)) => {
            return Err(format!(
                "failing or missing response from {url}: Get {url:?}: {why}"
            ));
        }
        Err(_) => {
            return Err(format!(
                "failing or missing response from {url}: Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            ));
        }
    };
    if !(200..300).contains(&status.as_u16()) && !(300..400).contains(&status.as_u16()) {
        return Err(format!(
            "failing or missing response from {url}: bad status from {url}: {}",
            status.as_u16()
        ));
    }
    Ok(serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|list| list["resources"].as_array().cloned())
        .unwrap_or_default())
}

/// What a check of one APIService found: whether to try again soon.
enum Outcome {
    Done,
    Retry,
}

/// Checks the APIService `name` and writes its condition when it changed.
async fn sync(server: &ApiServer, name: &str) -> Outcome {
    let aggregator = &server.aggregator;
    let Some(obj) = api_service(server, name) else {
        aggregator.set_discovered(name, None);
        return Outcome::Done;
    };
    let api = ApiService::parse(&obj);
    let (verdict, resources) = match &api.service {
        None => {
            let local = local_condition();
            (
                Verdict {
                    status: "True",
                    reason: "Local",
                    message: local["message"].as_str().unwrap_or_default().to_string(),
                },
                None,
            )
        }
        Some(svc) => {
            let get = |plural: &str| {
                let def = server.registry().find("", "v1", plural)?;
                Some(
                    server
                        .cache
                        .get(&def, Some(&svc.namespace), &svc.name)?
                        .value(),
                )
            };
            match precheck(svc, get("services").as_ref(), get("endpoints").as_ref()) {
                Err(v) => (v, None),
                Ok(()) => match discover(server, &api, svc).await {
                    Ok(resources) => (
                        Verdict {
                            status: "True",
                            reason: "Passed",
                            message: "all checks passed".into(),
                        },
                        Some(resources),
                    ),
                    Err(message) => (Verdict::unavailable("FailedDiscoveryCheck", message), None),
                },
            }
        }
    };
    aggregator.set_discovered(name, resources);
    let failed_check = verdict.reason == "FailedDiscoveryCheck";
    let updated = with_condition(&obj, &verdict);
    if updated["status"] != obj["status"] {
        let uri = format!("{API_SERVICES}/{name}/status");
        let (code, _) = call(server, Method::PUT, &uri, Some(&updated)).await;
        if code == 409 {
            return Outcome::Retry;
        }
        if code >= 300 && code != 404 {
            tracing::warn!(apiservice = %name, code, "availability: status write failed");
            return Outcome::Retry;
        }
    }
    if failed_check {
        Outcome::Retry
    } else {
        Outcome::Done
    }
}

/// The APIServices that name the Service `namespace/name`.
fn naming(server: &ApiServer, namespace: &str, name: &str) -> Vec<String> {
    api_services(server)
        .iter()
        .filter(|o| {
            let s = &o["spec"]["service"];
            s["namespace"] == namespace && s["name"] == name
        })
        .map(|o| object::name(o).to_string())
        .collect()
}

fn all(server: &ApiServer) -> Vec<String> {
    api_services(server)
        .iter()
        .map(|o| object::name(o).to_string())
        .collect()
}

/// Runs the controller for as long as the server does.
pub(super) async fn run(server: ApiServer) {
    let (Some(mut apis), Some(mut services), Some(mut endpoints)) = (
        Follow::new(&server, GROUP, "apiservices"),
        Follow::new(&server, "", "services"),
        Follow::new(&server, "", "endpoints"),
    ) else {
        return;
    };
    let mut dirty: HashSet<String> = all(&server).into_iter().collect();
    let mut in_flight: HashSet<String> = HashSet::new();
    let mut again: HashSet<String> = HashSet::new();
    // The last back-off of each APIService whose check failed, and when it is due again.
    let mut backoff: HashMap<String, Duration> = HashMap::new();
    let mut due: HashMap<String, Instant> = HashMap::new();
    let mut checks: JoinSet<(String, Outcome)> = JoinSet::new();
    let mut resync = tokio::time::interval_at(Instant::now() + RESYNC, RESYNC);
    loop {
        for name in dirty.drain() {
            if in_flight.contains(&name) {
                again.insert(name);
                continue;
            }
            in_flight.insert(name.clone());
            let server = server.clone();
            checks.spawn(async move {
                let outcome = sync(&server, &name).await;
                (name, outcome)
            });
        }
        let next_retry = due.values().min().copied();
        let wait_retry = async move {
            match next_retry {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let of_service = |c: Change, server: &ApiServer| match c {
            Change::One(e) => naming(server, &e.entry.namespace, &e.entry.name),
            Change::Unknown => all(server),
        };
        tokio::select! {
            c = apis.changed() => match c {
                Change::One(e) => { dirty.insert(e.entry.name.to_string()); }
                Change::Unknown => dirty.extend(all(&server)),
            },
            c = services.changed() => dirty.extend(of_service(c, &server)),
            c = endpoints.changed() => dirty.extend(of_service(c, &server)),
            Some(Ok((name, outcome))) = checks.join_next(), if !checks.is_empty() => {
                in_flight.remove(&name);
                if again.remove(&name) {
                    dirty.insert(name.clone());
                }
                match outcome {
                    Outcome::Done => {
                        backoff.remove(&name);
                        due.remove(&name);
                    }
                    Outcome::Retry => {
                        let delay = backoff
                            .get(&name)
                            .map_or(FIRST_RETRY, |d| (*d * 2).min(LONGEST_RETRY));
                        backoff.insert(name.clone(), delay);
                        due.insert(name, Instant::now() + delay);
                    }
                }
            }
            () = wait_retry => {
                let now = Instant::now();
                due.retain(|name, at| {
                    let waiting = *at > now;
                    if !waiting {
                        dirty.insert(name.clone());
                    }
                    waiting
                });
            }
            _ = resync.tick() => dirty.extend(all(&server)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc() -> ServiceRef {
        ServiceRef {
            namespace: "kube-system".into(),
            name: "metrics-server".into(),
            port: 443,
        }
    }

    fn service(ty: &str) -> Value {
        json!({"spec": {"type": ty, "ports": [{"name": "https", "port": 443, "targetPort": 4443}]}})
    }

    fn verdict(r: Result<(), Verdict>) -> (&'static str, String) {
        let v = r.unwrap_err();
        assert_eq!(v.status, "False");
        (v.reason, v.message)
    }

    #[test]
    fn prechecks_give_upstreams_reasons_and_messages() {
        assert_eq!(
            verdict(precheck(&svc(), None, None)),
            (
                "ServiceNotFound",
                "service/metrics-server in \"kube-system\" is not present".into()
            )
        );
        let mut other_port = svc();
        other_port.port = 8443;
        assert_eq!(
            verdict(precheck(&other_port, Some(&service("ClusterIP")), None)),
            (
                "ServicePortError",
                "service/metrics-server in \"kube-system\" is not listening on port 8443".into()
            )
        );
        assert_eq!(
            verdict(precheck(&svc(), Some(&service("ClusterIP")), None)),
            (
                "EndpointsNotFound",
                "cannot find endpoints for service/metrics-server in \"kube-system\"".into()
            )
        );
        let not_ready = json!({"subsets": [{"notReadyAddresses": [{"ip": "10.0.0.1"}],
            "ports": [{"name": "https", "port": 4443}]}]});
        assert_eq!(
            verdict(precheck(&svc(), Some(&service("ClusterIP")), Some(&not_ready))),
            ("MissingEndpoints", "endpoints for service/metrics-server in \"kube-system\" have no addresses with port name \"https\"".into())
        );
        let ready = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}],
            "ports": [{"name": "https", "port": 4443}]}]});
        assert!(precheck(&svc(), Some(&service("ClusterIP")), Some(&ready)).is_ok());
        // Only ClusterIP Services have their ports and endpoints checked before discovery.
        assert!(precheck(&other_port, Some(&service("NodePort")), None).is_ok());
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let obj = json!({"status": {"conditions": [{"type": "Available", "status": "False",
            "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "ServiceNotFound", "message": "m"}]}});
        let same = with_condition(&obj, &Verdict::unavailable("MissingEndpoints", "n".into()));
        let c = &same["status"]["conditions"][0];
        assert_eq!(c["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(c["reason"], "MissingEndpoints");
        let up = with_condition(
            &obj,
            &Verdict {
                status: "True",
                reason: "Passed",
                message: "all checks passed".into(),
            },
        );
        assert_ne!(
            up["status"]["conditions"][0]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        assert_eq!(with_condition(&json!({}), &Verdict::unavailable("X", "y".into()))["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
