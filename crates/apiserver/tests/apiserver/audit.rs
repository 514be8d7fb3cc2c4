//! Audit logging through the server's router: the events a policy asks for, at the levels and
//! stages it asks for, as upstream's log backend writes them (`audit.k8s.io/v1` Event lines).

use crate::common::{DEADLINE, Server, call};
use apiserver::{ServerOptions, audit::Auditor, audit::Policy};
use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use futures::StreamExt;
use serde_json::{Value, json};
use std::{path::Path, sync::Arc};
use tower::ServiceExt;

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/api", "/api/*", "/apis*"]
- level: Metadata
  resources: [{group: "", resources: [secrets]}]
- level: Request
  resources: [{group: "", resources: [configmaps]}]
  omitStages: [RequestReceived]
  omitManagedFields: true
- level: RequestResponse
  resources: [{group: "", resources: ["pods", "pods/status"]}]
- level: Metadata
"#;

async fn audited_server(log: &Path) -> (Server, axum::Router, Arc<Auditor>) {
    audited_server_with(POLICY, log).await
}

async fn audited_server_with(policy: &str, log: &Path) -> (Server, axum::Router, Arc<Auditor>) {
    let auditor =
        Arc::new(Auditor::new(Policy::from_bytes(policy.as_bytes()).unwrap(), log).unwrap());
    let s = Server::start_with(ServerOptions {
        audit: Some(auditor.clone()),
        ..Default::default()
    })
    .await;
    // The router clients reach over the network: the one that audits (as the admin).
    let router = s.admin_router();
    (s, router, auditor)
}

/// The log's events, oldest first.
async fn events(auditor: &Auditor, log: &Path) -> Vec<Value> {
    auditor.flush().await;
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The events of the request to `uri` with `verb`.
fn of<'a>(events: &'a [Value], verb: &str, uri: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["verb"] == verb && e["requestURI"] == uri)
        .collect()
}

fn stages(events: &[&Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["stage"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn each_rule_records_its_level() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (_s, router, auditor) = audited_server(&log).await;

    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "stringData": {"password": "hunter2-very-secret"}});
    let (code, _) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/secrets",
        Some(secret),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "data": {"a": "1"}});
    let (code, _) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        Some(cm),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);

    let pod = crate::common::pod("web");
    let (code, created) = call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/pods",
        Some(pod.clone()),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);

    let (code, _) = call(
        &router,
        Method::GET,
        "/api/v1/namespaces/default/pods/nope",
        None,
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    let patch = json!({"data": {"b": "2"}});
    let req = Request::builder()
        .method(Method::PATCH)
        .uri("/api/v1/namespaces/default/configmaps/settings")
        .header("content-type", "application/merge-patch+json")
        .body(Body::from(patch.to_string()))
        .unwrap();
    assert_eq!(
        router.clone().oneshot(req).await.unwrap().status(),
        StatusCode::OK
    );

    let (code, _) = call(&router, Method::GET, "/api", None).await;
    assert_eq!(code, StatusCode::OK);

    let all = events(&auditor, &log).await;
    let admin = json!({"username": apiserver::ADMIN_USER, "groups": ["system:masters", "system:authenticated"]});
    for e in &all {
        assert_eq!(e["kind"], "Event");
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(e["user"], admin);
        for ts in ["requestReceivedTimestamp", "stageTimestamp"] {
            let t = e[ts].as_str().unwrap();
            // RFC 3339 in UTC to the microsecond: 2006-01-02T15:04:05.000000Z.
            assert_eq!((t.len(), &t[19..20], &t[26..]), (27, ".", "Z"), "{t}");
        }
    }
    // Discovery matched the `None` rule.
    assert!(all.iter().all(|e| e["requestURI"] != "/api"), "{all:#?}");

    // Metadata: who, what and the answer; never the secret's data.
    let secrets = of(&all, "create", "/api/v1/namespaces/default/secrets");
    assert_eq!(stages(&secrets), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(secrets[0]["auditID"], secrets[1]["auditID"]);
    assert_eq!(
        secrets[0]["stageTimestamp"],
        secrets[0]["requestReceivedTimestamp"]
    );
    // The name comes from the body, which the RequestReceived event has not seen yet.
    assert_eq!(
        secrets[0]["objectRef"],
        json!({"resource": "secrets", "namespace": "default", "apiVersion": "v1"})
    );
    assert!(secrets[0].get("responseStatus").is_none());
    let done = secrets[1];
    assert_eq!(done["level"], "Metadata");
    assert_eq!(
        done["objectRef"],
        json!({"resource": "secrets", "namespace": "default", "name": "creds", "apiVersion": "v1"})
    );
    assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert!(done.get("requestObject").is_none() && done.get("responseObject").is_none());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("hunter2"),
        "the secret's data leaked into the log"
    );

    // Request, without RequestReceived, managed fields left out.
    let cms = of(&all, "create", "/api/v1/namespaces/default/configmaps");
    assert_eq!(stages(&cms), ["ResponseComplete"]);
    assert_eq!(cms[0]["level"], "Request");
    assert_eq!(
        cms[0]["requestObject"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}})
    );
    assert!(cms[0].get("responseObject").is_none());
    // A patch is recorded as sent.
    let patches = of(
        &all,
        "patch",
        "/api/v1/namespaces/default/configmaps/settings",
    );
    assert_eq!(stages(&patches), ["ResponseComplete"]);
    assert_eq!(patches[0]["requestObject"], patch);
    assert_eq!(patches[0]["objectRef"]["name"], "settings");

    // RequestResponse: both bodies.
    let pods = of(&all, "create", "/api/v1/namespaces/default/pods");
    assert_eq!(stages(&pods), ["RequestReceived", "ResponseComplete"]);
    assert!(pods[0].get("requestObject").is_none());
    assert_eq!(pods[1]["requestObject"], pod);
    assert_eq!(pods[1]["responseObject"], created);
    assert_eq!(pods[1]["responseStatus"]["code"], 201);

    // A failure's Status gives the response status.
    let missing = of(&all, "get", "/api/v1/namespaces/default/pods/nope");
    assert_eq!(stages(&missing), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(
        missing[1]["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": "pods \"nope\" not found",
            "reason": "NotFound", "details": {"name": "nope", "kind": "pods"}, "code": 404})
    );
    assert_eq!(missing[1]["responseObject"]["kind"], "Status");
    assert_eq!(
        missing[1]["objectRef"],
        json!({"resource": "pods", "namespace": "default", "name": "nope", "apiVersion": "v1"})
    );
}

#[tokio::test]
async fn every_response_carries_its_audit_id() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (_s, router, auditor) = audited_server(&log).await;
    let get = |uri: &'static str, id: Option<&'static str>| {
        let router = router.clone();
        async move {
            let mut req = Request::builder().uri(uri);
            if let Some(id) = id {
                req = req.header("Audit-ID", id);
            }
            let resp = router
                .oneshot(req.body(Body::empty()).unwrap())
                .await
                .unwrap();
            resp.headers()["audit-id"].to_str().unwrap().to_string()
        }
    };
    // Audited or not (discovery is `None` here), the response names its audit ID.
    let unaudited = get("/api", None).await;
    assert_eq!(unaudited.len(), 36, "{unaudited}");
    let id = get("/api/v1/namespaces/default/pods", None).await;
    assert_ne!(id, unaudited);
    assert_eq!(get("/api/v1/namespaces", Some("mine-1")).await, "mine-1");
    let all = events(&auditor, &log).await;
    assert_eq!(
        stages(&of(&all, "list", "/api/v1/namespaces/default/pods")).len(),
        2
    );
    assert!(
        of(&all, "list", "/api/v1/namespaces/default/pods")
            .iter()
            .all(|e| e["auditID"] == id.as_str())
    );
    assert!(
        of(&all, "list", "/api/v1/namespaces")
            .iter()
            .all(|e| e["auditID"] == "mine-1")
    );
}

#[tokio::test]
async fn a_watch_is_recorded_when_it_starts_and_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (_s, router, auditor) = audited_server(&log).await;
    let uri = "/api/v1/namespaces/default/configmaps?watch=true";
    let resp = router
        .clone()
        .oneshot(Request::builder().uri(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body().into_data_stream();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seen"}});
    call(
        &router,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        Some(cm),
    )
    .await;
    let first = tokio::time::timeout(DEADLINE, body.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"seen\""));

    // Started, not complete, while it streams (RequestReceived is omitted by the rule).
    let all = events(&auditor, &log).await;
    let watch = of(&all, "watch", uri);
    assert_eq!(stages(&watch), ["ResponseStarted"]);
    assert_eq!(
        watch[0]["responseStatus"],
        json!({"metadata": {}, "code": 200})
    );
    assert!(watch[0].get("responseObject").is_none());

    drop(body);
    let all = events(&auditor, &log).await;
    let watch = of(&all, "watch", uri);
    assert_eq!(stages(&watch), ["ResponseStarted", "ResponseComplete"]);
    assert_eq!(watch[0]["auditID"], watch[1]["auditID"]);
}

#[tokio::test]
async fn a_bad_policy_file_is_refused_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Most\n",
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let err = Auditor::from_flags(Some(&policy), Some(&log), Default::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "loading audit policy file: rules[0].level: Unsupported value: \"Most\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\": from file {}",
            policy.display()
        )
    );
    assert!(!log.exists());
    // Both flags are needed to audit.
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    assert!(
        Auditor::from_flags(Some(&policy), None, Default::default())
            .unwrap()
            .is_none()
    );
    assert!(
        Auditor::from_flags(None, Some(&log), Default::default())
            .unwrap()
            .is_none()
    );
    assert!(
        Auditor::from_flags(Some(&policy), Some(&log), Default::default())
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_client_over_the_network_is_recorded_with_its_address_and_agent() {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (_s, router, auditor) = audited_server(&log).await;
    let creds = apiserver::tls::Credentials::load_or_create(&dir.path().join("pki")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(apiserver::serve_tls(
        listener,
        router,
        creds.server_config().unwrap(),
        std::future::pending(),
    ));
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(creds.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut conn = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    conn.write_all(
        b"GET /api/v1/namespaces/default/configmaps?limit=5 HTTP/1.1\r\nHost: localhost\r\n\
          User-Agent: kubectl/v1.28.4 (linux/amd64)\r\nX-Forwarded-For: 10.1.2.3\r\n\
          Connection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(DEADLINE, conn.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    assert!(answer.contains("\r\naudit-id: "), "{answer}");

    let all = events(&auditor, &log).await;
    let list = of(
        &all,
        "list",
        "/api/v1/namespaces/default/configmaps?limit=5",
    );
    assert_eq!(stages(&list), ["ResponseComplete"]);
    assert_eq!(list[0]["sourceIPs"], json!(["10.1.2.3", "127.0.0.1"]));
    assert_eq!(list[0]["userAgent"], "kubectl/v1.28.4 (linux/amd64)");
}

#[tokio::test]
async fn protobuf_bodies_are_recorded_as_json() {
    use k8s_pb::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
    use prost::Message;

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (_s, router, auditor) = audited_server_with(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n",
        &log,
    )
    .await;
    // What `kubectl create configmap` sends: `k8s\0` and a runtime.Unknown around the object.
    let cm = ConfigMap {
        metadata: Some(ObjectMeta {
            name: Some("typed".into()),
            ..Default::default()
        }),
        data: [("a".to_string(), "1".to_string())].into(),
        ..Default::default()
    };
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
        }),
        raw: Some(cm.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    let req = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .header("accept", "application/vnd.kubernetes.protobuf, */*")
        .body(Body::from(body))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let (_, stored) = call(
        &router,
        Method::GET,
        "/api/v1/namespaces/default/configmaps/typed",
        None,
    )
    .await;

    let all = events(&auditor, &log).await;
    let create = of(&all, "create", "/api/v1/namespaces/default/configmaps");
    assert_eq!(stages(&create), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(create[1]["objectRef"]["name"], "typed");
    assert_eq!(create[1]["requestObject"]["kind"], "ConfigMap");
    assert_eq!(create[1]["requestObject"]["metadata"]["name"], "typed");
    assert_eq!(create[1]["requestObject"]["data"], json!({"a": "1"}));
    assert_eq!(
        create[1]["responseObject"]["metadata"]["uid"],
        stored["metadata"]["uid"]
    );
    assert_eq!(create[1]["responseObject"]["data"], json!({"a": "1"}));
}
