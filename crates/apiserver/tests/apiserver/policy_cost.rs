//! ValidatingAdmissionPolicy expressions within cel-go's cost limits, as upstream bounds them
//! (`apiserver/pkg/apis/cel/config.go`, `admission/plugin/cel/filter.go`,
//! `validatingadmissionpolicy/validator.go`): an expression stops once it has cost more than
//! 1,000,000 (`operation cancelled: actual cost limit exceeded`), the validations of a binding
//! share a budget of 10,000,000 (`validation failed due to running out of cost budget...`), and
//! the messageExpressions what the validations left of it. Issue 36: a four-deep comprehension
//! took 15.5 s for one request, and an `edit` user's 8,000-key ConfigMap against
//! `object.data.all(k, object.data.exists_one(j, j==k))` 14.7 s.

use std::time::{Duration, Instant};

use crate::common::{Server, call};

use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use serde_json::{Value, json};
use tower::ServiceExt;

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// cel-go's error for an expression past the per-call limit.
const LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";
/// Upstream's error for validations past their budget.
const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// The bound on a refusal by cost: the second in a release build; a debug build is
/// about ten times slower, and shares the machine with the other tests, so it gets ten
/// (without the limit, these requests ran for minutes in a debug build).
const BOUND: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(10)
} else {
    Duration::from_secs(1)
};

/// The expensive policy of the issue.
const PAIRS: &str = "object.data.all(k, object.data.exists_one(j, j == k))";

fn policy(name: &str, failure_policy: &str, validations: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": failure_policy,
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": validations}})
}

fn binding(name: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}})
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// `keys` distinct keys.
fn many_keys(keys: usize) -> Value {
    let data: serde_json::Map<String, Value> = (0..keys)
        .map(|i| (format!("key-{i:05}"), json!("v")))
        .collect();
    Value::Object(data)
}

/// `[1, 2, ..., n]`.
fn list(n: usize) -> String {
    let items: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(", "))
}

async fn install(s: &Server, policy: Value) {
    let name = policy["metadata"]["name"].as_str().unwrap().to_string();
    let (code, body) = s.call(Method::POST, POLICIES, Some(policy)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, body) = s.call(Method::POST, BINDINGS, Some(binding(&name))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

/// Creates `cm` and answers the status, the body and how long it took, bounded by a deadline
/// (without the cost limits, the requests here run for minutes).
async fn create(router: &axum::Router, cm: Value) -> (StatusCode, Value, Duration) {
    let started = Instant::now();
    let (code, body) = tokio::time::timeout(
        Duration::from_secs(60),
        call(router, Method::POST, CONFIGMAPS, Some(cm)),
    )
    .await
    .expect("the write is answered within a minute");
    (code, body, started.elapsed())
}

fn denial(cm: &str, policy: &str, message: &str) -> String {
    format!(
        "configmaps \"{cm}\" is forbidden: ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: {message}"
    )
}

#[tokio::test]
async fn a_four_deep_comprehension_fails_with_cel_gos_cost_error_per_failure_policy() {
    let s = Server::start().await;
    let l = list(100);
    let expression = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, a + b + c + d > 0))))");
    install(
        &s,
        policy("deep", "Fail", json!([{"expression": expression}])),
    )
    .await;
    let (code, body, took) = create(&s.router, configmap("a", json!({"k": "v"}))).await;
    println!("four-deep comprehension refused after {took:?}");
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        denial(
            "a",
            "deep",
            &format!("expression '{expression}' resulted in error: {LIMIT_EXCEEDED}")
        )
    );
    assert!(took < BOUND, "{took:?}");
    // Under `failurePolicy: Ignore` the error admits.
    let mut ignore = policy("deep", "Ignore", json!([{"expression": expression}]));
    let (code, current) = s.call(Method::GET, &format!("{POLICIES}/deep"), None).await;
    assert_eq!(code, StatusCode::OK);
    ignore["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, body) = s
        .call(Method::PUT, &format!("{POLICIES}/deep"), Some(ignore))
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, body, _) = create(&s.router, configmap("b", json!({"k": "v"}))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

/// The case: an ordinary user who may write ConfigMaps in a namespace (as `edit`
/// grants) writes an 8,000-key ConfigMap that a quadratic policy must look at; it is refused
/// with the cost error within the bound, and four such writes at once leave the
/// administrator's reads fast (the evaluations run on CEL threads of their own, not on the
/// async workers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_users_8000_key_configmap_is_refused_by_cost_and_reads_stay_fast() {
    let s = Server::start().await;
    install(&s, policy("pairs", "Fail", json!([{"expression": PAIRS}]))).await;
    for (path, body) in [
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            json!({"metadata": {"name": "configmap-writer"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                    "verbs": ["create", "update", "get", "list"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({"metadata": {"name": "alice"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "configmap-writer"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                    "name": "alice"}]}),
        ),
    ] {
        let (code, created) = s.call(Method::POST, path, Some(body)).await;
        assert_eq!(code, StatusCode::CREATED, "{created}");
    }
    let admin = s.admin_router();
    let as_alice = |cm: Value| {
        let admin = admin.clone();
        async move {
            let req = Request::builder()
                .method(Method::POST)
                .uri(CONFIGMAPS)
                .header("content-type", "application/json")
                .header("impersonate-user", "alice")
                .body(Body::from(cm.to_string()))
                .unwrap();
            let started = Instant::now();
            let resp = tokio::time::timeout(Duration::from_secs(120), admin.oneshot(req))
                .await
                .expect("the write is answered within two minutes")
                .unwrap();
            let code = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            (code, body, started.elapsed())
        }
    };
    let data = many_keys(8_000);
    let (code, body, took) = as_alice(configmap("big", data.clone())).await;
    println!("8,000-key ConfigMap refused after {took:?}");
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        denial(
            "big",
            "pairs",
            &format!("expression '{PAIRS}' resulted in error: {LIMIT_EXCEEDED}")
        )
    );
    assert!(took < BOUND, "{took:?}");

    // Four at once, and the administrator's reads meanwhile.
    let writes: Vec<_> = (0..4)
        .map(|i| tokio::spawn(as_alice(configmap(&format!("big-{i}"), data.clone()))))
        .collect();
    let mut slowest = Duration::ZERO;
    let mut reads = 0;
    while !writes.iter().all(|w| w.is_finished()) {
        let started = Instant::now();
        let (code, _) = call(&admin, Method::GET, "/api/v1/namespaces/default", None).await;
        assert_eq!(code, StatusCode::OK);
        slowest = slowest.max(started.elapsed());
        reads += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for w in writes {
        let (code, body, took) = w.await.unwrap();
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert!(took < BOUND * 4, "{took:?}");
    }
    println!("{reads} admin reads during four refused writes, the slowest {slowest:?}");
    assert!(reads > 0);
    assert!(slowest < Duration::from_millis(100), "{slowest:?}");
}

#[tokio::test]
async fn cheap_policies_over_a_big_object_evaluate_normally() {
    let s = Server::start().await;
    install(
        &s,
        policy(
            "linear",
            "Fail",
            json!([{"expression": "object.data.all(k, k.startsWith('key-'))"},
                {"expression": "size(object.data) <= 8000"}]),
        ),
    )
    .await;
    let (code, body, _) = create(&s.router, configmap("big", many_keys(8_000))).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, body, _) = create(&s.router, configmap("bigger", many_keys(8_001))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        denial(
            "bigger",
            "linear",
            "failed expression: size(object.data) <= 8000"
        )
    );
}

/// A parameter object is charged as the object is: the quadratic policy over a big parameter
/// ConfigMap stops at the limit whatever is written.
#[tokio::test]
async fn an_expensive_expression_over_params_fails_with_the_cost_error() {
    let s = Server::start().await;
    let (code, body) = s
        .call(
            Method::POST,
            CONFIGMAPS,
            Some(configmap("params", many_keys(8_000))),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let expression = "params.data.all(k, params.data.exists_one(j, j == k))";
    let mut p = policy("params", "Fail", json!([{"expression": expression}]));
    p["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    p["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = json!(["CREATE"]);
    let (code, body) = s.call(Method::POST, POLICIES, Some(p)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let mut b = binding("params");
    b["spec"]["paramRef"] =
        json!({"name": "params", "namespace": "default", "parameterNotFoundAction": "Deny"});
    let (code, body) = s.call(Method::POST, BINDINGS, Some(b)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, body, took) = create(&s.router, configmap("small", json!({"k": "v"}))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        denial(
            "small",
            "params",
            &format!("expression '{expression}' resulted in error: {LIMIT_EXCEEDED}")
        )
    );
    assert!(took < BOUND, "{took:?}");
}

/// `contains` of a 9,990-character string in itself costs 999 * 999 (cel-go charges a tenth of
/// each string's length, multiplied): ten such validations fit the 10,000,000 budget, an
/// eleventh does not; with ten, a messageExpression of the same cost does not.
#[tokio::test]
async fn validations_and_message_expressions_share_the_budget() {
    let s = Server::start().await;
    let costly = "object.data.s.contains(object.data.s)";
    let data = json!({"s": "x".repeat(9_990)});
    let validations: Vec<Value> = (0..11).map(|_| json!({"expression": costly})).collect();
    install(&s, policy("eleven", "Fail", json!(validations))).await;
    let (code, body, _) = create(&s.router, configmap("a", data.clone())).await;
    assert_eq!(
        code,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        body["message"]
    );
    assert_eq!(body["message"], denial("a", "eleven", OUT_OF_BUDGET));
    let (code, body) = s
        .call(Method::DELETE, &format!("{POLICIES}/eleven"), None)
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");

    let mut validations: Vec<Value> = (0..10).map(|_| json!({"expression": costly})).collect();
    validations.push(
        json!({"expression": "object.data.s == ''", "message": "static",
        "messageExpression": format!("{costly} ? 'costly' : 'cheap'")}),
    );
    install(&s, policy("messages", "Fail", json!(validations))).await;
    let (code, body, _) = create(&s.router, configmap("b", data.clone())).await;
    assert_eq!(
        code,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        body["message"]
    );
    assert_eq!(
        body["message"],
        denial(
            "b",
            "messages",
            &format!("failed messageExpression: {OUT_OF_BUDGET}")
        )
    );
    let (code, body) = s
        .call(Method::DELETE, &format!("{POLICIES}/messages"), None)
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");

    // A messageExpression past the per-call limit, within the budget: the static message.
    let quadratic = "object.data.all(k, object.data.exists_one(j, j == k))";
    install(
        &s,
        policy(
            "fallback",
            "Fail",
            json!([{"expression": "size(object.data) < 10", "message": "static",
                "messageExpression": format!("{quadratic} ? 'pairs' : 'no pairs'")}]),
        ),
    )
    .await;
    let (code, body, _) = create(&s.router, configmap("c", many_keys(8_000))).await;
    assert_eq!(
        code,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        body["message"]
    );
    assert_eq!(body["message"], denial("c", "fallback", "static"));
}
