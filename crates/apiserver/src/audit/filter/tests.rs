use super::*;
use crate::filters::request_info::attributes;
use crate::{ServerOptions, audit::Policy};
use axum::http::Method;
use std::path::Path;
use store::{Store, memory::MemoryStore};
use tower::ServiceExt;

/// The audit filter as a layer of its own, around the test's handler.
async fn audit_layer(
    axum::extract::State(s): axum::extract::State<ApiServer>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    run(&s, req, |req| next.run(req)).await
}

#[test]
fn watches_and_streaming_subresources_are_long_running() {
    let attrs = |method: Method, uri: &str| {
        attributes(&method, &uri.parse().unwrap(), UserInfo::anonymous())
    };
    assert!(is_long_running(&attrs(
        Method::GET,
        "/apis/apps/v1/deployments?watch=true"
    )));
    assert!(is_long_running(&attrs(Method::GET, "/api/v1/watch/pods")));
    assert!(is_long_running(&attrs(
        Method::GET,
        "/api/v1/namespaces/a/pods/web/log"
    )));
    assert!(is_long_running(&attrs(
        Method::POST,
        "/api/v1/namespaces/a/pods/web/exec"
    )));
    assert!(!is_long_running(&attrs(
        Method::GET,
        "/api/v1/namespaces/a/pods/web/status"
    )));
    assert!(!is_long_running(&attrs(Method::GET, "/api/v1/pods")));
    assert!(!is_long_running(&attrs(Method::GET, "/logs/kubelet.log")));
}

#[test]
fn long_user_agents_are_cut_as_upstream_does() {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_str(&"a".repeat(1500)).unwrap(),
    );
    assert_eq!(
        user_agent(&headers),
        format!("{}...TRUNCATED", "a".repeat(1024))
    );
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static("kubectl/v1.28.4"),
    );
    assert_eq!(user_agent(&headers), "kubectl/v1.28.4");
}

#[test]
fn source_ips_follow_the_proxy_chain_then_the_peer() {
    let req = |xff: Option<&str>, real: Option<&str>, peer: Option<&str>| {
        let mut r = Request::new(Body::empty());
        if let Some(v) = xff {
            r.headers_mut()
                .insert("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = real {
            r.headers_mut()
                .insert("x-real-ip", HeaderValue::from_str(v).unwrap());
        }
        if let Some(p) = peer {
            r.extensions_mut()
                .insert(ConnectInfo(p.parse::<SocketAddr>().unwrap()));
        }
        source_ips(&r)
    };
    assert_eq!(req(None, None, Some("127.0.0.1:5555")), ["127.0.0.1"]);
    assert_eq!(
        req(
            Some("10.0.0.1, junk, 10.0.0.2"),
            Some("10.0.0.1"),
            Some("127.0.0.1:1")
        ),
        ["10.0.0.1", "10.0.0.2", "127.0.0.1"]
    );
    assert_eq!(
        req(Some("10.0.0.1"), Some("10.0.0.9"), Some("10.0.0.9:1")),
        ["10.0.0.1", "10.0.0.9"]
    );
    assert_eq!(
        req(None, None, Some("[::ffff:127.0.0.1]:8443")),
        ["127.0.0.1"]
    );
}

#[test]
fn managed_fields_leave_objects_lists_and_tables() {
    let mf = serde_json::json!([{"manager": "kubectl"}]);
    let mut v = serde_json::json!({
        "kind": "Table",
        "metadata": {"name": "a", "managedFields": mf},
        "items": [{"metadata": {"name": "b", "managedFields": mf}}],
        "rows": [{"object": {"metadata": {"name": "c", "managedFields": mf}}}]
    });
    drop_managed_fields(&mut v);
    assert_eq!(
        v,
        serde_json::json!({
            "kind": "Table",
            "metadata": {"name": "a"},
            "items": [{"metadata": {"name": "b"}}],
            "rows": [{"object": {"metadata": {"name": "c"}}}]
        })
    );
}

/// The bootstrap admin's token of [`audited`] servers.
const ADMIN_TOKEN: &str = "admin-token";

async fn audited(policy: &str, log: &Path) -> (ApiServer, Arc<Auditor>) {
    let auditor =
        Arc::new(Auditor::new(Policy::from_bytes(policy.as_bytes()).unwrap(), log).unwrap());
    let server = ApiServer::start(
        Arc::new(MemoryStore::new()) as Arc<dyn Store>,
        ServerOptions {
            audit: Some(auditor.clone()),
            token: Some(ADMIN_TOKEN.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    (server, auditor)
}

fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn an_impersonating_request_is_matched_and_recorded_as_its_real_user() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (server, auditor) = audited(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- {level: Metadata, users: [rollwright-admin], omitStages: [RequestReceived]}\n",
        &log,
    )
    .await;
    // The admin acts as jane through the server's own impersonation layer.
    let router = server.router();
    let req = Request::builder()
        .uri("/api/v1/namespaces/default/configmaps")
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header("impersonate-user", "jane")
        .header("impersonate-group", "dev")
        .body(Body::empty())
        .unwrap();
    let resp = router.oneshot(req).await.unwrap();
    // jane holds no rules: the refusal is audited with both users.
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let id = resp.headers()["audit-id"].to_str().unwrap().to_string();
    auditor.flush().await;
    let events = lines(&log);
    assert_eq!(events.len(), 1, "{events:?}");
    let ev = &events[0];
    assert_eq!(ev["auditID"], id.as_str());
    assert_eq!(ev["stage"], "ResponseComplete");
    assert_eq!(
        ev["user"],
        serde_json::json!({"username": "rollwright-admin", "groups": ["system:masters", "system:authenticated"]})
    );
    assert_eq!(
        ev["impersonatedUser"],
        serde_json::json!({"username": "jane", "groups": ["dev", "system:authenticated"]})
    );
}

#[tokio::test]
async fn decisions_and_annotations_reach_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (server, auditor) = audited(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        &log,
    )
    .await;
    // An authorization layer inside the audit filter, as the server's pipeline has it.
    let router = axum::Router::new()
        .fallback(|| async {
            record_decision(&Decision::Deny("no RBAC policy matched".into()));
            annotate("authorization.k8s.io/decision", "allow");
            annotate("example.com/note", "kept");
            StatusCode::FORBIDDEN
        })
        .layer(axum::middleware::from_fn_with_state(
            server.clone(),
            audit_layer,
        ))
        .with_state(server);
    let req = Request::builder()
        .uri("/api/v1/namespaces/default/secrets")
        .header("audit-id", "from-the-client")
        .body(Body::empty())
        .unwrap();
    let resp = router.oneshot(req).await.unwrap();
    assert_eq!(resp.headers()["audit-id"], "from-the-client");
    auditor.flush().await;
    let events = lines(&log);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["stage"], "RequestReceived");
    assert!(events[0].get("annotations").is_none());
    assert_eq!(
        events[1]["annotations"],
        serde_json::json!({
            "authorization.k8s.io/decision": "forbid",
            "authorization.k8s.io/reason": "no RBAC policy matched",
            "example.com/note": "kept"
        })
    );
    assert_eq!(events[1]["auditID"], "from-the-client");
    assert_eq!(
        events[1]["responseStatus"],
        serde_json::json!({"metadata": {}, "code": 403})
    );
}

#[tokio::test]
async fn a_panicking_handler_is_recorded_at_the_panic_stage() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (server, auditor) = audited(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        &log,
    )
    .await;
    let router = axum::Router::new()
        .fallback(|| async {
            if true {
                panic!("boom");
            }
            StatusCode::OK
        })
        .layer(axum::middleware::from_fn_with_state(
            server.clone(),
            audit_layer,
        ))
        .with_state(server);
    let req = Request::builder()
        .uri("/api/v1/pods")
        .body(Body::empty())
        .unwrap();
    let outcome = tokio::spawn(router.oneshot(req)).await;
    assert!(outcome.is_err_and(|e| e.is_panic()));
    auditor.flush().await;
    let events = lines(&log);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1]["stage"], "Panic");
    assert_eq!(
        events[1]["responseStatus"],
        serde_json::json!({
            "metadata": {}, "status": "Failure", "message": "APIServer panic'd: boom",
            "reason": "InternalError", "code": 500
        })
    );
}

#[tokio::test]
async fn a_request_whose_client_leaves_still_completes_its_event() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (server, auditor) = audited(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        &log,
    )
    .await;
    let started = Arc::new(tokio::sync::Notify::new());
    let handler_started = started.clone();
    let router = axum::Router::new()
        .fallback(move || {
            let started = handler_started.clone();
            async move {
                started.notify_one();
                std::future::pending::<()>().await;
                StatusCode::OK
            }
        })
        .layer(axum::middleware::from_fn_with_state(
            server.clone(),
            audit_layer,
        ))
        .with_state(server);
    let req = Request::builder()
        .uri("/api/v1/pods")
        .body(Body::empty())
        .unwrap();
    let task = tokio::spawn(router.oneshot(req));
    started.notified().await;
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    auditor.flush().await;
    let events = lines(&log);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1]["stage"], "ResponseComplete");
    assert_eq!(
        events[1]["responseStatus"],
        serde_json::json!({
            "metadata": {}, "status": "Success", "message": "Connection closed early", "code": 200
        })
    );
}

#[tokio::test]
async fn a_failed_authentication_is_recorded_once_without_a_user() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (server, auditor) = audited(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- {level: None, userGroups: ['system:unauthenticated']}\n- level: Metadata\n",
        &log,
    )
    .await;
    let unauthorized = || {
        let mut r = Response::new(Body::from("{}"));
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        r
    };
    let req = Request::builder()
        .uri("/api/v1/namespaces/default/pods?limit=1")
        .header("authorization", "Bearer not-a-token")
        .body(Body::empty())
        .unwrap();
    let resp = failed_authentication(&server, req, false, unauthorized()).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let id = resp.headers()["audit-id"].to_str().unwrap().to_string();
    let bare = Request::builder()
        .uri("/healthz")
        .body(Body::empty())
        .unwrap();
    failed_authentication(&server, bare, true, unauthorized()).await;
    auditor.flush().await;
    let events = lines(&log);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["auditID"], id.as_str());
    assert_eq!(events[0]["stage"], "ResponseStarted");
    assert_eq!(events[0]["user"], serde_json::json!({}));
    assert_eq!(events[0]["verb"], "list");
    assert_eq!(
        events[0]["responseStatus"],
        serde_json::json!({
            "metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401
        })
    );
    assert_eq!(
        events[1]["responseStatus"]["message"],
        "Authentication failed, attempted: x509"
    );
}
