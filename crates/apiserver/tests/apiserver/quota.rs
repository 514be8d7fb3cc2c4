//! ResourceQuota admission against the server alone (the quota controller is not running, so
//! each test writes the quota's status itself, as the controller would): a create that would
//! exceed a quota is refused with upstream's 403 and message, an admitted create is charged at
//! once so back-to-back creates cannot overshoot, a quota without usage refuses, a pod must
//! state the cpu a quota limits, dry runs and creates that fail are not charged, and the kind's
//! own validation.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{DEADLINE, Server};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const QUOTAS: &str = "/api/v1/namespaces/default/resourcequotas";

/// Creates quota `name` limiting `hard` and writes its status as the controller would, with
/// `used`.
async fn quota(s: &Server, name: &str, spec: Value, used: Value) {
    let (code, body) = s
        .call(
            Method::POST,
            QUOTAS,
            Some(json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec})),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let mut q = body;
    q["status"] = json!({"hard": q["spec"]["hard"].clone(), "used": used});
    let (code, body) = s
        .call(Method::PUT, &format!("{QUOTAS}/{name}/status"), Some(q))
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
}

async fn used(s: &Server, name: &str) -> Value {
    let (code, body) = s.call(Method::GET, &format!("{QUOTAS}/{name}"), None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    body["status"]["used"].clone()
}

/// A JSON merge patch.
async fn patch(s: &Server, uri: &str, body: Value) -> (StatusCode, Value) {
    crate::common::patch(&s.router, uri, "application/merge-patch+json", body).await
}

fn pod(name: &str, cpu: Option<&str>) -> Value {
    let resources = match cpu {
        Some(cpu) => json!({"requests": {"cpu": cpu}}),
        None => json!({}),
    };
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "resources": resources}]}})
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}})
}

#[tokio::test]
async fn a_create_over_quota_is_forbidden_with_upstreams_message() {
    let s = Server::start().await;
    quota(
        &s,
        "compute",
        json!({"hard": {"pods": "2", "cpu": "1"}}),
        json!({"pods": "0", "cpu": "0"}),
    )
    .await;
    let pods = "/api/v1/namespaces/default/pods";
    let (code, body) = s
        .call(Method::POST, pods, Some(pod("p1", Some("500m"))))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    // Charged at once, in upstream's notation.
    assert_eq!(
        used(&s, "compute").await,
        json!({"cpu": "500m", "pods": "1"})
    );

    let (code, body) = s
        .call(Method::POST, pods, Some(pod("p2", Some("600m"))))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "pods \"p2\" is forbidden: exceeded quota: compute, requested: cpu=600m, used: cpu=500m, limited: cpu=1"
    );
    assert_eq!(
        body["details"],
        json!({"name": "p2", "group": "", "kind": "pods"})
    );

    let (code, body) = s.call(Method::POST, pods, Some(pod("p3", None))).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["message"],
        "pods \"p3\" is forbidden: failed quota: compute: must specify cpu for: c"
    );
    // Neither refusal was charged.
    assert_eq!(
        used(&s, "compute").await,
        json!({"cpu": "500m", "pods": "1"})
    );

    // Upstream's status-unknown refusal: a limited resource without usage.
    quota(&s, "fresh", json!({"hard": {"count/pods": "9"}}), json!({})).await;
    let (code, body) = s
        .call(Method::POST, pods, Some(pod("p4", Some("100m"))))
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["message"],
        "pods \"p4\" is forbidden: status unknown for quota: fresh, resources: count/pods"
    );
}

#[tokio::test]
async fn back_to_back_creates_cannot_overshoot() {
    let s = Server::start().await;
    quota(
        &s,
        "maps",
        json!({"hard": {"configmaps": "3"}}),
        json!({"configmaps": "0"}),
    )
    .await;
    let creates = (0..8).map(|i| {
        let router = s.router.clone();
        async move {
            crate::common::call(
                &router,
                Method::POST,
                "/api/v1/namespaces/default/configmaps",
                Some(config_map(&format!("cm-{i}"))),
            )
            .await
        }
    });
    let results = futures::future::join_all(creates).await;
    let created = results
        .iter()
        .filter(|(c, _)| *c == StatusCode::CREATED)
        .count();
    let refused: Vec<&Value> = results
        .iter()
        .filter(|(c, _)| *c == StatusCode::FORBIDDEN)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(created, 3, "{results:?}");
    assert_eq!(refused.len(), 5, "{results:?}");
    let message = refused[0]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "is forbidden: exceeded quota: maps, requested: configmaps=1, used: configmaps=3, limited: configmaps=3"
        ),
        "{message}"
    );
    assert_eq!(used(&s, "maps").await, json!({"configmaps": "3"}));
    let (_, list) = s
        .call(Method::GET, "/api/v1/namespaces/default/configmaps", None)
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn dry_runs_and_creates_not_stored_are_not_charged() {
    let s = Server::start().await;
    quota(
        &s,
        "maps",
        json!({"hard": {"count/configmaps": "2"}}),
        json!({"count/configmaps": "0"}),
    )
    .await;
    let maps = "/api/v1/namespaces/default/configmaps";
    let (code, body) = s
        .call(
            Method::POST,
            &format!("{maps}?dryRun=All"),
            Some(config_map("dry")),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(used(&s, "maps").await, json!({"count/configmaps": "0"}));
    let (code, _) = s.call(Method::POST, maps, Some(config_map("a"))).await;
    assert_eq!(code, StatusCode::CREATED);
    // Charged, then refused by the store: the charge is given back.
    let (code, body) = s.call(Method::POST, maps, Some(config_map("a"))).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while used(&s, "maps").await != json!({"count/configmaps": "1"}) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "charge not given back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A dry run over the quota is refused as the create would be.
    let (code, _) = s.call(Method::POST, maps, Some(config_map("b"))).await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, body) = s
        .call(
            Method::POST,
            &format!("{maps}?dryRun=All"),
            Some(config_map("c")),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
}

#[tokio::test]
async fn an_update_that_needs_more_than_the_quota_has_is_forbidden() {
    let s = Server::start().await;
    quota(
        &s,
        "ports",
        json!({"hard": {"services.nodeports": "0", "services": "5"}}),
        json!({"services.nodeports": "0", "services": "0"}),
    )
    .await;
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/services",
            Some(svc),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(
        used(&s, "ports").await,
        json!({"services": "1", "services.nodeports": "0"})
    );
    let (code, body) = patch(
        &s,
        "/api/v1/namespaces/default/services/web",
        json!({"spec": {"type": "NodePort"}}),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["message"],
        "services \"web\" is forbidden: exceeded quota: ports, requested: services.nodeports=1, used: services.nodeports=0, limited: services.nodeports=0"
    );
}

#[tokio::test]
async fn a_quota_is_validated_as_upstream_validates_it() {
    let s = Server::start().await;
    let create = |spec: Value| json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "bad"}, "spec": spec});
    for (spec, want) in [
        (
            json!({"hard": {"foo": "1"}}),
            "spec.hard[foo]: Invalid value: \"foo\": must be a standard resource for quota",
        ),
        (
            json!({"hard": {"pods": "-1"}}),
            "spec.hard[pods]: Invalid value: \"-1\": must be greater than or equal to 0",
        ),
        (
            json!({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]}),
            "unsupported scope applied to resource",
        ),
    ] {
        let (code, body) = s.call(Method::POST, QUOTAS, Some(create(spec))).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(want), "{message}");
    }
    // Scopes are fixed once created.
    quota(
        &s,
        "scoped",
        json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]}),
        json!({"pods": "0"}),
    )
    .await;
    let (code, body) = patch(
        &s,
        &format!("{QUOTAS}/scoped"),
        json!({"spec": {"scopes": ["NotBestEffort"]}}),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // A status write keeps the spec and is checked.
    let (code, body) = patch(
        &s,
        &format!("{QUOTAS}/scoped/status"),
        json!({"spec": {"hard": {"pods": "7"}}, "status": {"used": {"pods": "-2"}}}),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}
