//! Admission webhooks called as upstream calls them: each test serves its own webhook over HTTPS
//! on a loopback port, trusted through the configuration's `caBundle`, and checks what the
//! server sent it and what its answers (or its silence) did to the write, with upstream's
//! messages.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use axum::{
    Json, Router,
    body::Body,
    extract::{Path, State},
    http::{Method, Request, StatusCode},
    routing::post,
};
use base64::Engine;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    service::TowerToHyperService,
};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::{DEADLINE, Server};

const PODS: &str = "/api/v1/namespaces/default/pods";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

/// What the test webhook was sent: the path called and the AdmissionReview.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A webhook server on 127.0.0.1 with a certificate for `127.0.0.1` and `hook.default.svc`.
struct Webhook {
    addr: SocketAddr,
    /// The CA's PEM, base64 as `caBundle` carries it.
    ca_bundle: String,
    seen: Seen,
}

fn allow(uid: &Value) -> Value {
    json!({"uid": uid, "allowed": true})
}

/// The webhook's behaviour, by path:
/// - `mutate`: adds the label `mutated=yes` by JSON Patch, with a warning (not on deletes);
/// - `deny-forbidden`: refuses objects (new or, on delete, old) labelled `forbidden`;
/// - `deny-all`: refuses everything;
/// - `observe`: allows without a patch;
/// - `break`: patches an invalid container name in;
/// - `hang`: never answers.
async fn answer(
    State(seen): State<Seen>,
    Path(action): Path<String>,
    Json(review): Json<Value>,
) -> Json<Value> {
    seen.lock().unwrap().push((action.clone(), review.clone()));
    let request = &review["request"];
    let uid = &request["uid"];
    let patch = |ops: Value| {
        json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
            "patch": base64::engine::general_purpose::STANDARD.encode(ops.to_string())})
    };
    let response = match action.as_str() {
        // A delete has no object to patch (upstream refuses a patch then).
        "mutate" if request["operation"] == "DELETE" => allow(uid),
        "mutate" => {
            let mut r = if request["object"]["metadata"]["labels"].is_object() {
                patch(json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]))
            } else {
                patch(
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]),
                )
            };
            r["warnings"] = json!(["labelled by the test webhook"]);
            r
        }
        "deny-forbidden" => {
            let subject = if request["operation"] == "DELETE" {
                &request["oldObject"]
            } else {
                &request["object"]
            };
            if subject["metadata"]["labels"]["forbidden"].is_string() {
                json!({"uid": uid, "allowed": false, "status": {"code": 403,
                    "reason": "Forbidden", "message": "the label \"forbidden\" is not allowed"}})
            } else {
                allow(uid)
            }
        }
        "deny-all" => json!({"uid": uid, "allowed": false, "status": {"message": "no"}}),
        "break" => patch(json!([{"op": "replace", "path": "/spec/containers/0/name",
            "value": "Not_A_Name"}])),
        "retype" => patch(json!([{"op": "replace", "path": "/spec/containers/0/image",
            "value": 5}])),
        "hang" => std::future::pending().await,
        _ => allow(uid),
    };
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": response}),
    )
}

impl Webhook {
    async fn start() -> Webhook {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        // Each webhook's CA has its own name, so that one is never mistaken for another.
        static CAS: AtomicUsize = AtomicUsize::new(0);
        let n = CAS.fetch_add(1, Ordering::Relaxed);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("webhook-ca-{n}"));
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![
            "127.0.0.1".to_string(),
            "hook.default.svc".to_string(),
        ])
        .unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let seen: Seen = Arc::default();
        let app = Router::new()
            .route("/{action}", post(answer))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                        .await;
                });
            }
        });
        Webhook {
            addr,
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_cert.pem()),
            seen,
        }
    }

    fn url(&self, action: &str) -> String {
        format!("https://{}/{action}", self.addr)
    }

    /// A webhook entry calling `action` for pods, with `extra` fields merged in.
    fn hook(&self, name: &str, action: &str, extra: Value) -> Value {
        let mut hook = json!({
            "name": name,
            "clientConfig": {"url": self.url(action), "caBundle": self.ca_bundle},
            "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
                "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        for (k, v) in extra.as_object().unwrap() {
            hook[k] = v.clone();
        }
        hook
    }

    /// The reviews sent to `action`, in order.
    fn sent(&self, action: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(a, _)| a == action)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

async fn configure(s: &Server, collection: &str, name: &str, hooks: Vec<Value>) {
    let kind = if collection == MUTATING {
        "MutatingWebhookConfiguration"
    } else {
        "ValidatingWebhookConfiguration"
    };
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": hooks});
    let (code, body) = s.call(Method::POST, collection, Some(config)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

/// A request within the test's deadline: the status, the `Warning` headers and the body.
async fn send(
    s: &Server,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Vec<String>, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body.map_or(Body::empty(), |b| Body::from(b.to_string())))
        .unwrap();
    let resp = tokio::time::timeout(DEADLINE, s.router.clone().oneshot(req))
        .await
        .expect("the request did not finish within the deadline")
        .unwrap();
    let status = resp.status();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_mutating_webhook_patches_and_a_validating_webhook_refuses() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    configure(
        &s,
        MUTATING,
        "labeller",
        vec![w.hook("label.example.com", "mutate", json!({}))],
    )
    .await;
    configure(
        &s,
        VALIDATING,
        "police",
        vec![w.hook("forbidden.example.com", "deny-forbidden", json!({}))],
    )
    .await;

    let (code, warnings, created) =
        send(&s, Method::POST, PODS, Some(pod("a", json!({"app": "x"})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["metadata"]["labels"],
        json!({"app": "x", "mutated": "yes"})
    );
    assert_eq!(warnings, ["299 - \"labelled by the test webhook\""]);

    // The request as upstream's CreateV1AdmissionReview fills it.
    let sent = w.sent("mutate");
    assert_eq!(sent.len(), 1);
    let r = &sent[0]["request"];
    assert_eq!(sent[0]["apiVersion"], "admission.k8s.io/v1");
    assert!(!r["uid"].as_str().unwrap().is_empty());
    assert_eq!(
        r["kind"],
        json!({"group": "", "version": "v1", "kind": "Pod"})
    );
    assert_eq!(
        r["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(r["requestKind"], r["kind"]);
    assert_eq!(r["requestResource"], r["resource"]);
    assert_eq!(
        (&r["name"], &r["namespace"], &r["operation"]),
        (&json!("a"), &json!("default"), &json!("CREATE"))
    );
    assert_eq!(r["userInfo"]["username"], "system:apiserver");
    assert_eq!(r["dryRun"], false);
    assert_eq!(r["options"]["kind"], "CreateOptions");
    assert_eq!(r["oldObject"], Value::Null);
    assert_eq!(r["object"]["metadata"]["labels"], json!({"app": "x"}));
    // The validating webhook sees the mutated object.
    let sent = w.sent("deny-forbidden");
    assert_eq!(
        sent[0]["request"]["object"]["metadata"]["labels"]["mutated"],
        "yes"
    );

    let (code, _, status) = send(
        &s,
        Method::POST,
        PODS,
        Some(pod("b", json!({"forbidden": "yes"}))),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "admission webhook \"forbidden.example.com\" denied the request: the label \"forbidden\" is not allowed"
    );
    let (code, _, _) = send(&s, Method::GET, &format!("{PODS}/b"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    // An update is sent with the stored object as oldObject, and refused the same way.
    let patch = Request::builder()
        .method(Method::PATCH)
        .uri(format!("{PODS}/a"))
        .header("content-type", "application/merge-patch+json")
        .body(Body::from(
            json!({"metadata": {"labels": {"forbidden": "yes"}}}).to_string(),
        ))
        .unwrap();
    let resp = s.router.clone().oneshot(patch).await.unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let last = w.sent("deny-forbidden").pop().unwrap();
    assert_eq!(last["request"]["operation"], "UPDATE");
    assert_eq!(last["request"]["options"]["kind"], "UpdateOptions");
    assert_eq!(
        last["request"]["oldObject"]["metadata"]["labels"],
        json!({"app": "x", "mutated": "yes"})
    );

    // A delete is sent with the stored object as oldObject and no object.
    let (code, _, created) = send(&s, Method::POST, PODS, Some(pod("c", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let (code, _, deleted) = send(&s, Method::DELETE, &format!("{PODS}/c"), None).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    let last = w.sent("deny-forbidden").pop().unwrap();
    assert_eq!(last["request"]["operation"], "DELETE");
    assert_eq!(last["request"]["options"]["kind"], "DeleteOptions");
    assert_eq!(last["request"]["object"], Value::Null);
    assert_eq!(last["request"]["oldObject"]["metadata"]["name"], "c");
}

#[tokio::test]
async fn a_delete_can_be_refused() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    let (code, _, created) = send(
        &s,
        Method::POST,
        PODS,
        Some(pod("kept", json!({"forbidden": "yes"}))),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    configure(
        &s,
        VALIDATING,
        "police",
        vec![w.hook("forbidden.example.com", "deny-forbidden", json!({}))],
    )
    .await;
    let (code, _, status) = send(&s, Method::DELETE, &format!("{PODS}/kept"), None).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"forbidden.example.com\" denied the request: the label \"forbidden\" is not allowed"
    );
    let (code, _, _) = send(&s, Method::GET, &format!("{PODS}/kept"), None).await;
    assert_eq!(code, StatusCode::OK);
    // A DELETE of the collection asks for each object.
    let (code, _, status) = send(&s, Method::DELETE, PODS, None).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    let (code, _, _) = send(&s, Method::GET, &format!("{PODS}/kept"), None).await;
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn a_patch_that_makes_the_object_invalid_is_refused() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    configure(
        &s,
        MUTATING,
        "breaker",
        vec![w.hook("break.example.com", "break", json!({}))],
    )
    .await;
    let (code, _, status) = send(&s, Method::POST, PODS, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert!(
        status["message"].as_str().unwrap().starts_with(
            "Pod \"a\" is invalid: spec.containers[0].name: Invalid value: \"Not_A_Name\""
        ),
        "{status}"
    );
}

/// Upstream decodes a webhook's patched object into the kind's type where it applies the patch;
/// one that no longer decodes is its internal error, and nothing is stored.
#[tokio::test]
async fn a_patch_that_breaks_the_kinds_type_is_an_internal_error() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    configure(
        &s,
        MUTATING,
        "retyper",
        vec![w.hook("retype.example.com", "retype", json!({}))],
    )
    .await;
    let (code, _, status) = send(&s, Method::POST, PODS, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{status}");
    assert_eq!(status["reason"], "InternalError");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("cannot be handled as a Pod"),
        "{status}"
    );
    let (code, _, _) = send(&s, Method::GET, &format!("{PODS}/a"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

/// A loopback port nothing listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn failure_policy_decides_when_the_webhook_cannot_be_called() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    let port = closed_port().await;
    let unreachable = |name: &str, policy: &str| {
        let mut h = w.hook(name, "observe", json!({"failurePolicy": policy}));
        h["clientConfig"]["url"] = json!(format!("https://127.0.0.1:{port}/observe"));
        h
    };
    configure(
        &s,
        VALIDATING,
        "closed",
        vec![unreachable("closed.example.com", "Ignore")],
    )
    .await;
    let (code, _, created) = send(&s, Method::POST, PODS, Some(pod("ignored", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");

    let (code, _, _) = send(&s, Method::DELETE, &format!("{VALIDATING}/closed"), None).await;
    assert_eq!(code, StatusCode::OK);
    configure(
        &s,
        VALIDATING,
        "closed",
        vec![unreachable("closed.example.com", "Fail")],
    )
    .await;
    let (code, _, status) = send(&s, Method::POST, PODS, Some(pod("failed", json!({})))).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{status}");
    assert_eq!(status["reason"], "InternalError");
    assert_eq!(
        status["message"],
        format!(
            "Internal error occurred: failed calling webhook \"closed.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/observe?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
}

#[tokio::test]
async fn a_webhook_behind_a_service_is_called_through_its_endpoints() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}});
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/services",
            Some(service),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let endpoints = |subsets: Value| {
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hook"},
            "subsets": subsets})
    };
    // No ready endpoint: the call fails as upstream's endpoint resolver fails it.
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/endpoints",
            Some(endpoints(json!([]))),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let hook = |policy: &str| {
        let mut hook = w.hook(
            "svc.example.com",
            "mutate",
            json!({"failurePolicy": policy}),
        );
        hook["clientConfig"] = json!({"caBundle": w.ca_bundle,
            "service": {"namespace": "default", "name": "hook", "path": "/mutate"}});
        hook
    };
    configure(&s, MUTATING, "svc", vec![hook("Ignore")]).await;
    let (code, _, created) = send(&s, Method::POST, PODS, Some(pod("ignored", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["labels"].get("mutated"), None);
    let (code, _, _) = send(&s, Method::DELETE, &format!("{MUTATING}/svc"), None).await;
    assert_eq!(code, StatusCode::OK);
    configure(&s, MUTATING, "svc", vec![hook("Fail")]).await;
    let (code, _, status) = send(&s, Method::POST, PODS, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{status}");
    assert_eq!(
        status["message"],
        "Internal error occurred: failed calling webhook \"svc.example.com\": failed to call webhook: Post \"https://hook.default.svc:443/mutate?timeout=10s\": no endpoints available for service \"hook\""
    );

    // With the webhook's address as the endpoint, the call goes there, verified as the
    // Service's name.
    let (code, body) = s
        .call(
            Method::PUT,
            "/api/v1/namespaces/default/endpoints/hook",
            Some(endpoints(json!([{"addresses": [{"ip": "127.0.0.1"}],
                "ports": [{"name": "https", "port": w.addr.port()}]}]))),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, _, created) = send(&s, Method::POST, PODS, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["labels"]["mutated"], "yes");
}

#[tokio::test]
async fn a_webhook_that_does_not_answer_runs_out_of_time() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    configure(
        &s,
        VALIDATING,
        "slow",
        vec![w.hook("slow.example.com", "hang", json!({"timeoutSeconds": 1}))],
    )
    .await;
    let (code, _, status) = send(&s, Method::POST, PODS, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"https://{}/hang?timeout=1s\": context deadline exceeded",
            w.addr
        )
    );
    assert_eq!(w.sent("hang").len(), 1);
}

#[tokio::test]
async fn selectors_choose_the_writes_sent() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    for (name, labels) in [("watched", json!({"webhooks": "on"})), ("plain", json!({}))] {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}});
        let (code, body) = s.call(Method::POST, "/api/v1/namespaces", Some(ns)).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    configure(
        &s,
        VALIDATING,
        "selective",
        vec![
            w.hook(
                "by-namespace.example.com",
                "deny-all",
                json!({"namespaceSelector": {"matchLabels": {"webhooks": "on"}}}),
            ),
            w.hook(
                "by-object.example.com",
                "deny-all",
                json!({"objectSelector": {"matchExpressions":
                [{"key": "checked", "operator": "In", "values": ["yes"]}]}}),
            ),
        ],
    )
    .await;
    let pods = |ns: &str| format!("/api/v1/namespaces/{ns}/pods");
    let (code, _, body) = send(&s, Method::POST, &pods("plain"), Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, _, status) = send(
        &s,
        Method::POST,
        &pods("watched"),
        Some(pod("a", json!({}))),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"by-namespace.example.com\" denied the request: no"
    );
    let (code, _, status) = send(
        &s,
        Method::POST,
        &pods("plain"),
        Some(pod("b", json!({"checked": "yes"}))),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"by-object.example.com\" denied the request: no"
    );
    assert_eq!(w.sent("deny-all").len(), 2);
}

#[tokio::test]
async fn a_dry_run_is_sent_only_to_webhooks_without_side_effects() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    configure(
        &s,
        MUTATING,
        "labeller",
        vec![w.hook("label.example.com", "mutate", json!({}))],
    )
    .await;
    let dry = format!("{PODS}?dryRun=All");
    let (code, _, created) = send(&s, Method::POST, &dry, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["labels"]["mutated"], "yes");
    let r = &w.sent("mutate")[0]["request"];
    assert_eq!(r["dryRun"], true);
    assert_eq!(r["options"]["dryRun"], json!(["All"]));

    configure(
        &s,
        VALIDATING,
        "effects",
        vec![w.hook(
            "effects.example.com",
            "observe",
            json!({"sideEffects": "Unknown"}),
        )],
    )
    .await;
    let (code, _, status) = send(&s, Method::POST, &dry, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"effects.example.com\" does not support dry run"
    );
    assert!(w.sent("observe").is_empty());
    // Outside a dry run the same webhook is called.
    let (code, _, created) = send(&s, Method::POST, PODS, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(w.sent("observe").len(), 1);
}

#[tokio::test]
async fn a_webhook_asking_for_it_is_called_again_after_a_later_change() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    // Configurations run in name order: the observer before the labeller.
    configure(
        &s,
        MUTATING,
        "a-observer",
        vec![w.hook(
            "observe.example.com",
            "observe",
            json!({"reinvocationPolicy": "IfNeeded"}),
        )],
    )
    .await;
    configure(
        &s,
        MUTATING,
        "b-labeller",
        vec![w.hook(
            "label.example.com",
            "mutate",
            json!({"reinvocationPolicy": "IfNeeded"}),
        )],
    )
    .await;
    let (code, _, created) =
        send(&s, Method::POST, PODS, Some(pod("a", json!({"app": "x"})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let observed = w.sent("observe");
    assert_eq!(observed.len(), 2, "{observed:?}");
    assert_eq!(
        observed[0]["request"]["object"]["metadata"]["labels"],
        json!({"app": "x"})
    );
    assert_eq!(
        observed[1]["request"]["object"]["metadata"]["labels"],
        json!({"app": "x", "mutated": "yes"})
    );
    // The labeller changed the object itself; nothing after it did, so it is not called again.
    assert_eq!(w.sent("mutate").len(), 1);

    // Under the default policy (Never) the observer is called once.
    let (code, _, _) = send(&s, Method::DELETE, &format!("{MUTATING}/a-observer"), None).await;
    assert_eq!(code, StatusCode::OK);
    configure(
        &s,
        MUTATING,
        "a-observer",
        vec![w.hook("observe.example.com", "observe", json!({}))],
    )
    .await;
    let (code, _, created) = send(&s, Method::POST, PODS, Some(pod("b", json!({})))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(w.sent("observe").len(), 3);
}

#[tokio::test]
async fn a_generated_name_is_not_sent() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    configure(
        &s,
        VALIDATING,
        "observer",
        vec![w.hook("observe.example.com", "observe", json!({}))],
    )
    .await;
    let mut p = pod("", json!({}));
    p["metadata"] = json!({"generateName": "web-"});
    let (code, _, created) = send(&s, Method::POST, PODS, Some(p)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let r = &w.sent("observe")[0]["request"];
    assert_eq!(r.get("name"), None, "{r}");
    assert_eq!(r["namespace"], "default");
}

#[tokio::test]
async fn an_equivalent_resource_matches_under_the_equivalent_match_policy() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    let v2_rule = |policy: &str| {
        w.hook(
            &format!("{}.example.com", policy.to_lowercase()),
            "observe",
            json!({"matchPolicy": policy, "rules": [{"operations": ["CREATE"],
                "apiGroups": ["autoscaling"], "apiVersions": ["v2"],
                "resources": ["horizontalpodautoscalers"]}]}),
        )
    };
    configure(
        &s,
        VALIDATING,
        "hpa",
        vec![v2_rule("Exact"), v2_rule("Equivalent")],
    )
    .await;
    let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}});
    let (code, _, created) = send(
        &s,
        Method::POST,
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
        Some(hpa),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    // Only the Equivalent webhook is called, with the object as the version its rule names.
    let sent = w.sent("observe");
    assert_eq!(sent.len(), 1);
    let r = &sent[0]["request"];
    assert_eq!(
        r["kind"],
        json!({"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"})
    );
    assert_eq!(
        r["requestKind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"})
    );
    assert_eq!(r["resource"]["version"], "v2");
    assert_eq!(r["requestResource"]["version"], "v1");
    assert_eq!(r["object"]["apiVersion"], "autoscaling/v2");
    assert_eq!(r["object"]["spec"]["maxReplicas"], 3);
}

#[tokio::test]
async fn a_namespace_is_selected_by_its_own_labels() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    let mut hook = w.hook(
        "namespaces.example.com",
        "deny-forbidden",
        json!({"namespaceSelector": {"matchLabels": {"webhooks": "on"}}}),
    );
    hook["rules"][0]["resources"] = json!(["namespaces"]);
    configure(&s, VALIDATING, "namespaces", vec![hook]).await;
    let ns = |name: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}})
    };
    // Not selected: not sent, whatever its labels.
    let (code, _, body) = send(
        &s,
        Method::POST,
        "/api/v1/namespaces",
        Some(ns("quiet", json!({"forbidden": "yes"}))),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert!(w.sent("deny-forbidden").is_empty());
    let (code, _, status) = send(
        &s,
        Method::POST,
        "/api/v1/namespaces",
        Some(ns("loud", json!({"webhooks": "on", "forbidden": "yes"}))),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    let r = &w.sent("deny-forbidden")[0]["request"];
    assert_eq!(
        r.get("namespace"),
        None,
        "a create's URL names no namespace: {r}"
    );
    let (code, _, body) = send(
        &s,
        Method::POST,
        "/api/v1/namespaces",
        Some(ns("loud", json!({"webhooks": "on"}))),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    // An update is sent with the namespace's name as its namespace.
    let (code, _, body) = send(
        &s,
        Method::PUT,
        "/api/v1/namespaces/loud",
        Some(ns("loud", json!({"webhooks": "on", "team": "a"}))),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let r = &w.sent("deny-forbidden").pop().unwrap()["request"];
    assert_eq!(
        (&r["operation"], &r["namespace"]),
        (&json!("UPDATE"), &json!("loud"))
    );
}

#[tokio::test]
async fn a_webhook_is_trusted_only_through_its_ca_bundle() {
    let s = Server::start().await;
    let w = Webhook::start().await;
    let stranger = Webhook::start().await;
    let mut hook = w.hook("untrusted.example.com", "observe", json!({}));
    hook["clientConfig"]["caBundle"] = json!(stranger.ca_bundle);
    configure(&s, VALIDATING, "untrusted", vec![hook]).await;
    let (code, _, status) = send(&s, Method::POST, PODS, Some(pod("a", json!({})))).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "Internal error occurred: failed calling webhook \"untrusted.example.com\": failed to call webhook: Post \"https://{}/observe?timeout=10s\": tls: failed to verify certificate: x509: certificate signed by unknown authority",
            w.addr
        )
    );
    assert!(w.sent("observe").is_empty());
}

/// A webhook's URL is `https://` without user information, as upstream's `ValidateWebhookURL`
/// requires: a password in it would be stored and shown to every reader of the configuration.
#[tokio::test]
async fn webhook_urls_must_be_https_without_user_information() {
    let s = Server::start().await;
    for (collection, kind) in [
        (VALIDATING, "ValidatingWebhookConfiguration"),
        (MUTATING, "MutatingWebhookConfiguration"),
    ] {
        for (url, why) in [
            (
                "http://127.0.0.1:8443/hook",
                "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            ),
            (
                "https://admin:s3cret@127.0.0.1:8443/hook",
                "Invalid value: \"admin:s3cret\": user information is not permitted in the URL",
            ),
        ] {
            let (code, body) = s
                .call(
                    Method::POST,
                    collection,
                    Some(json!({"metadata": {"name": "h"}, "webhooks": [{
                        "name": "h.example.com", "clientConfig": {"url": url},
                        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                   "resources": ["configmaps"]}],
                        "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})),
                )
                .await;
            assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
            assert_eq!(
                body["message"],
                format!(
                    "{kind}.admissionregistration.k8s.io \"h\" is invalid: webhooks[0].clientConfig.url: {why}"
                )
            );
        }
    }
}
