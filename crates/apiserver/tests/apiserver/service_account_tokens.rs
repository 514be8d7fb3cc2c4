//! ServiceAccount tokens: TokenRequest (`kubectl create token`) issues them and TokenReview says
//! whose they are, with upstream's validation errors and upstream's reasons for refusing a token
//! (expired, for another audience, its bound pod gone).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use apiserver::ServerOptions;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

const SA: &str = "/api/v1/namespaces/default/serviceaccounts";
const TOKEN: &str = "/api/v1/namespaces/default/serviceaccounts/robot/token";
const REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

async fn start() -> (Server, Arc<satoken::Key>) {
    let key = Arc::new(satoken::Key::generate().unwrap());
    let s = Server::start_with(ServerOptions {
        service_account_key: Some(key.clone()),
        ..Default::default()
    })
    .await;
    let (code, body) = s
        .call(
            Method::POST,
            SA,
            Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    (s, key)
}

async fn create_pod(s: &Server, name: &str, account: &str) -> Value {
    let (code, pod) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"serviceAccountName": account,
                         "containers": [{"name": "c", "image": "busybox"}]}}),
            ),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{pod}");
    pod
}

async fn request_token(s: &Server, spec: Value) -> (StatusCode, Value) {
    s.call(
        Method::POST,
        TOKEN,
        Some(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"creationTimestamp": null}, "spec": spec}),
        ),
    )
    .await
}

async fn review(s: &Server, token: &str, audiences: Option<Value>) -> Value {
    let mut spec = json!({"token": token});
    if let Some(a) = audiences {
        spec["audiences"] = a;
    }
    let (code, body) = s
        .call(
            Method::POST,
            REVIEWS,
            Some(
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "metadata": {"creationTimestamp": null}, "spec": spec}),
            ),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "TokenReview");
    body["status"].clone()
}

fn sa_uid(sa: &Value) -> String {
    sa["metadata"]["uid"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_requested_token_reviews_as_its_service_account() {
    let (s, _) = start().await;
    let (_, sa) = s.call(Method::GET, &format!("{SA}/robot"), None).await;
    let (code, tr) = request_token(&s, json!({"audiences": null})).await;
    assert_eq!(code, StatusCode::CREATED, "{tr}");
    assert_eq!(tr["kind"], "TokenRequest");
    assert_eq!(tr["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(tr["metadata"]["name"], "robot");
    assert_eq!(tr["metadata"]["namespace"], "default");
    // Upstream's defaults: an hour, for the API server's audience (the issuer).
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    assert_eq!(
        tr["spec"]["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    let created: jiff::Timestamp = tr["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let expires: jiff::Timestamp = tr["status"]["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(expires.as_second() - created.as_second(), 3600);
    let token = tr["status"]["token"].as_str().unwrap();

    let status = review(&s, token, None).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(
        status["user"],
        json!({
            "username": "system:serviceaccount:default:robot",
            "uid": sa_uid(&sa),
            "groups": ["system:serviceaccounts", "system:serviceaccounts:default"],
        })
    );
    assert_eq!(
        status["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );

    // A token for another audience is not one for the API server, and vice versa.
    let (_, other) = request_token(
        &s,
        json!({"audiences": ["vault"], "expirationSeconds": 600}),
    )
    .await;
    let other = other["status"]["token"].as_str().unwrap();
    let status = review(&s, other, None).await;
    assert_eq!(status["authenticated"], Value::Null, "{status}");
    assert_eq!(
        status["error"],
        r#"token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]"#
    );
    let status = review(&s, other, Some(json!(["vault"]))).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!(["vault"]));

    // Not a token of this cluster at all.
    let status = review(&s, "not-a-jwt", None).await;
    assert_eq!(status["error"], "invalid bearer token");
    // Signed by another key.
    let stranger = satoken::Key::generate().unwrap();
    let claims: satoken::BoundClaims = claims_of(token);
    let forged = stranger.sign(&claims).unwrap();
    let status = review(&s, &forged, None).await;
    assert_eq!(
        status["error"],
        "square/go-jose: error in cryptographic primitive"
    );

    // Deleting the ServiceAccount ends its tokens.
    let (code, _) = s.call(Method::DELETE, &format!("{SA}/robot"), None).await;
    assert_eq!(code, StatusCode::OK);
    let status = review(&s, token, None).await;
    assert_eq!(status["error"], r#"serviceaccounts "robot" not found"#);
}

/// The claims a token carries (read, not verified).
fn claims_of(token: &str) -> satoken::BoundClaims {
    let payload = token.split('.').nth(1).unwrap();
    let bytes =
        base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    let (s, key) = start().await;
    let (_, sa) = s.call(Method::GET, &format!("{SA}/robot"), None).await;
    let now = jiff::Timestamp::now().as_second();
    let claims = satoken::BoundClaims::new(
        satoken::DEFAULT_ISSUER,
        "default",
        satoken::ObjectRef::new("robot", sa_uid(&sa)),
        None,
        vec![satoken::DEFAULT_ISSUER.into()],
        now - 7200,
        3600,
        0,
    );
    let status = review(&s, &key.sign(&claims).unwrap(), None).await;
    assert_eq!(status["authenticated"], Value::Null);
    assert_eq!(status["error"], "service account token has expired");
    assert_eq!(status["user"], json!({}));
}

#[tokio::test]
async fn a_pod_bound_token_dies_with_its_pod() {
    let (s, _) = start().await;
    let pod = create_pod(&s, "worker", "robot").await;
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let (code, tr) = request_token(
        &s,
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "worker", "uid": uid}}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{tr}");
    assert_eq!(tr["spec"]["boundObjectRef"]["name"], "worker");
    let token = tr["status"]["token"].as_str().unwrap();
    let claims = claims_of(token);
    assert_eq!(
        claims.kubernetes.pod,
        Some(satoken::ObjectRef::new("worker", uid))
    );

    let status = review(&s, token, None).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(
        status["user"]["extra"],
        json!({
            "authentication.kubernetes.io/pod-name": ["worker"],
            "authentication.kubernetes.io/pod-uid": [uid],
        })
    );

    let (code, _) = s
        .call(
            Method::DELETE,
            "/api/v1/namespaces/default/pods/worker?gracePeriodSeconds=0",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let status = review(&s, token, None).await;
    assert_eq!(status["authenticated"], Value::Null, "{status}");
    assert_eq!(
        status["error"],
        "service account token has been invalidated"
    );

    // A pod of the same name again is another pod: the token stays dead.
    create_pod(&s, "worker", "robot").await;
    let status = review(&s, token, None).await;
    assert_eq!(
        status["error"].as_str().unwrap().split(" (").next(),
        Some("pod UID")
    );
}

#[tokio::test]
async fn kubelets_hour_and_seven_seconds_is_extended_for_pods() {
    let (s, _) = start().await;
    create_pod(&s, "worker", "robot").await;
    let (code, tr) = request_token(
        &s,
        json!({"expirationSeconds": 3607,
               "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "worker"}}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{tr}");
    let claims = claims_of(tr["status"]["token"].as_str().unwrap());
    assert_eq!(claims.exp - claims.iat, 24 * 365 * 3600);
    assert_eq!(claims.kubernetes.warnafter, Some(claims.iat + 3607));
    // What the response says is what was asked for, as upstream's does.
    assert_eq!(tr["spec"]["expirationSeconds"], 3607);
}

#[tokio::test]
async fn token_requests_are_validated_as_upstream() {
    let (s, _) = start().await;
    let pod = create_pod(&s, "worker", "robot").await;
    create_pod(&s, "stranger", "default").await;
    let cases = [
        (
            json!({"expirationSeconds": 599}),
            422,
            r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"#
                .to_string(),
        ),
        (
            json!({"expirationSeconds": 5_000_000_000_i64}),
            422,
            r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 5000000000: may not specify a duration larger than 2^32 seconds"#
                .to_string(),
        ),
        (
            json!({"boundObjectRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}),
            400,
            "cannot bind token to object of type apps/v1, Kind=Deployment".to_string(),
        ),
        (
            json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "gone"}}),
            404,
            r#"pods "gone" not found"#.to_string(),
        ),
        (
            json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "stranger"}}),
            400,
            r#"cannot bind token for serviceaccount "robot" to pod running with different serviceaccount name."#
                .to_string(),
        ),
        (
            json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "worker", "uid": "nope"}}),
            409,
            r#"Operation cannot be fulfilled on Pod "worker": the UID in the bound object reference (nope) does not match the UID in record. The object might have been deleted and then recreated"#
                .to_string(),
        ),
    ];
    for (spec, code, message) in cases {
        let (got, body) = request_token(&s, spec.clone()).await;
        assert_eq!(got.as_u16(), code, "{spec}: {body}");
        assert_eq!(body["message"], message, "{spec}");
    }
    assert!(pod["metadata"]["uid"].is_string());

    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/serviceaccounts/nobody/token",
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
        )
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(body["message"], r#"serviceaccounts "nobody" not found"#);

    let (code, body) = s
        .call(
            Method::POST,
            TOKEN,
            Some(
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "metadata": {"name": "other"}, "spec": {}}),
            ),
        )
        .await;
    assert_eq!(code.as_u16(), 422);
    assert_eq!(
        body["message"],
        r#"TokenRequest.authentication.k8s.io "robot" is invalid: metadata.name: Invalid value: "other": must match the service account name if specified"#
    );

    let (code, body) = s
        .call(
            Method::POST,
            REVIEWS,
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}})),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["message"],
        "token is required for TokenReview in authentication"
    );
}

#[tokio::test]
async fn without_a_key_no_token_is_issued() {
    let s = Server::start().await;
    s.call(
        Method::POST,
        SA,
        Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})),
    )
    .await;
    let (code, body) = request_token(&s, json!({})).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
}

#[tokio::test]
async fn a_legacy_secret_token_is_valid_while_its_secret_holds_it() {
    let (s, key) = start().await;
    let (_, sa) = s.call(Method::GET, &format!("{SA}/robot"), None).await;
    let claims = satoken::LegacyClaims::new(
        "default",
        &satoken::ObjectRef::new("robot", sa_uid(&sa)),
        "robot-token",
    );
    let token = key.sign(&claims).unwrap();
    let status = review(&s, &token, None).await;
    assert_eq!(status["error"], "Token has been invalidated");
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &token);
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/secrets",
            Some(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "robot-token",
                    "annotations": {"kubernetes.io/service-account.name": "robot"}},
                "type": "kubernetes.io/service-account-token",
                "data": {"token": encoded}})),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let status = review(&s, &token, None).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(
        status["user"]["username"],
        "system:serviceaccount:default:robot"
    );
    assert_eq!(
        status["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    let secret = "/api/v1/namespaces/default/secrets/robot-token";
    let (_, mut stored) = s.call(Method::GET, secret, None).await;
    stored["data"]["token"] = json!("b3RoZXI=");
    let (code, body) = s.call(Method::PUT, secret, Some(stored)).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let status = review(&s, &token, None).await;
    assert_eq!(status["error"], "Token does not match server's copy");
}
