//! ValidatingAdmissionPolicy through the API, with the examples of the Kubernetes
//! documentation's "Validating Admission Policy" page and upstream's (v1.28) answers: denials as
//! `NewForbidden` with the decision's reason (Invalid, 422, by default), `Warn` as Warning
//! headers, parameters, `messageExpression`, `failurePolicy`, `matchConditions` and `variables`.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{Server, call};
use apiserver::{ServerOptions, audit::Auditor, audit::Policy};

use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use serde_json::{Value, json};
use tower::ServiceExt;

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

/// One POST; the status, the Warning headers' texts, and the body.
async fn post(s: &Server, uri: &str, body: Value) -> (StatusCode, Vec<String>, Value) {
    let req = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| {
            let quoted = v.to_str().unwrap().strip_prefix("299 - ").unwrap();
            serde_json::from_str::<String>(quoted).unwrap()
        })
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

async fn created(s: &Server, uri: &str, body: Value) {
    let (code, _, body) = post(s, uri, body).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

async fn policy(s: &Server, name: &str, spec: Value) {
    let p = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec});
    created(s, POLICIES, p).await;
}

async fn binding(s: &Server, name: &str, spec: Value) {
    let b = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec});
    created(s, BINDINGS, b).await;
}

async fn namespace(s: &Server, name: &str, labels: Value) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}});
    created(s, "/api/v1/namespaces", ns).await;
}

fn deployment(name: &str, replicas: i64, labels: Value, images: &[&str]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": containers}}}})
}

fn deployments(ns: &str) -> String {
    format!("/apis/apps/v1/namespaces/{ns}/deployments")
}

/// The docs' `demo-policy.example.com`: at most 5 replicas for Deployments.
fn replicas_policy() -> Value {
    json!({
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}]
    })
}

/// Upstream's denial: `NewForbidden`'s message, reason Invalid and 422 unless the validation
/// names another reason, and the message as the only cause.
fn assert_denied(code: StatusCode, body: &Value, want_code: StatusCode, message: &str) {
    assert_eq!(code, want_code, "{body}");
    assert_eq!(body["message"], message, "{body}");
    let reason = if want_code == StatusCode::FORBIDDEN {
        "Forbidden"
    } else {
        "Invalid"
    };
    assert_eq!(body["reason"], reason, "{body}");
    assert_eq!(body["code"], want_code.as_u16(), "{body}");
    let causes = body["details"]["causes"].as_array().unwrap();
    let why = message.split_once("is forbidden: ").unwrap().1;
    assert_eq!(causes, &vec![json!({"message": why})], "{body}");
}

#[tokio::test]
async fn binding_with_a_namespace_selector_denies_too_many_replicas() {
    let s = Server::start().await;
    namespace(&s, "test", json!({"environment": "test"})).await;
    namespace(&s, "prod", json!({"environment": "prod"})).await;
    policy(&s, "demo-policy.example.com", replicas_policy()).await;
    binding(
        &s,
        "demo-binding-test.example.com",
        json!({"policyName": "demo-policy.example.com", "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"environment": "test"}}}}),
    )
    .await;

    let (code, _, body) = post(
        &s,
        &deployments("test"),
        deployment("nginx", 6, json!({}), &["nginx"]),
    )
    .await;
    assert_denied(
        code,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "deployments.apps \"nginx\" is forbidden: ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5",
    );
    // Within the limit, and outside the selected namespaces, the write goes through.
    created(
        &s,
        &deployments("test"),
        deployment("small", 5, json!({}), &["nginx"]),
    )
    .await;
    created(
        &s,
        &deployments("prod"),
        deployment("nginx", 6, json!({}), &["nginx"]),
    )
    .await;
    // Other kinds are not matched by the policy's constraints.
    created(
        &s,
        "/api/v1/namespaces/test/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
    )
    .await;
}

#[tokio::test]
async fn a_policy_without_a_binding_does_nothing() {
    let s = Server::start().await;
    policy(&s, "demo-policy.example.com", replicas_policy()).await;
    created(
        &s,
        &deployments("default"),
        deployment("nginx", 6, json!({}), &["nginx"]),
    )
    .await;
}

#[tokio::test]
async fn warn_action_warns_and_admits() {
    let s = Server::start().await;
    policy(&s, "demo-policy.example.com", replicas_policy()).await;
    binding(
        &s,
        "demo-binding-warn.example.com",
        json!({"policyName": "demo-policy.example.com", "validationActions": ["Warn", "Audit"]}),
    )
    .await;
    let (code, warnings, body) = post(
        &s,
        &deployments("default"),
        deployment("nginx", 6, json!({}), &["nginx"]),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(
        warnings,
        vec![
            "Validation failed for ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-warn.example.com': failed expression: object.spec.replicas <= 5"
        ]
    );
}

/// The docs' parameter example, with a ConfigMap as the parameter resource, and
/// `messageExpression` built from the parameter.
#[tokio::test]
async fn params_and_message_expression() {
    let s = Server::start().await;
    namespace(&s, "limits", json!({})).await;
    policy(
        &s,
        "replicalimit-policy.example.com",
        json!({
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{
                "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                "messageExpression": "'object.spec.replicas must be no greater than ' + params.data.maxReplicas",
                "reason": "Forbidden"
            }]
        }),
    )
    .await;
    created(
        &s,
        "/api/v1/namespaces/limits/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "replica-limit-test.example.com"},
            "data": {"maxReplicas": "3"}}),
    )
    .await;
    binding(
        &s,
        "replicalimit-binding-test.example.com",
        json!({"policyName": "replicalimit-policy.example.com", "validationActions": ["Deny"],
            "paramRef": {"name": "replica-limit-test.example.com", "namespace": "limits",
                "parameterNotFoundAction": "Deny"}}),
    )
    .await;
    let (code, _, body) = post(
        &s,
        &deployments("default"),
        deployment("nginx", 4, json!({}), &["nginx"]),
    )
    .await;
    assert_denied(
        code,
        &body,
        StatusCode::FORBIDDEN,
        "deployments.apps \"nginx\" is forbidden: ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'replicalimit-binding-test.example.com' denied request: object.spec.replicas must be no greater than 3",
    );
    created(
        &s,
        &deployments("default"),
        deployment("small", 3, json!({}), &["nginx"]),
    )
    .await;
}

#[tokio::test]
async fn missing_params_deny_or_allow_per_parameter_not_found_action() {
    let s = Server::start().await;
    policy(
        &s,
        "replicalimit-policy.example.com",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= int(params.data.maxReplicas)"}]
        }),
    )
    .await;
    // Without parameters, a binding that allows a missing parameter evaluates nothing.
    binding(
        &s,
        "allow.example.com",
        json!({"policyName": "replicalimit-policy.example.com", "validationActions": ["Deny"],
            "paramRef": {"selector": {"matchLabels": {"limits": "replicas"}},
                "parameterNotFoundAction": "Allow"}}),
    )
    .await;
    created(
        &s,
        &deployments("default"),
        deployment("first", 9, json!({}), &["nginx"]),
    )
    .await;
    // A parameter selected by labels in the request's namespace applies.
    created(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "limit", "labels": {"limits": "replicas"}},
            "data": {"maxReplicas": "2"}}),
    )
    .await;
    let (code, _, body) = post(
        &s,
        &deployments("default"),
        deployment("second", 9, json!({}), &["nginx"]),
    )
    .await;
    assert_denied(
        code,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "deployments.apps \"second\" is forbidden: ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'allow.example.com' denied request: failed expression: object.spec.replicas <= int(params.data.maxReplicas)",
    );
    // A binding that denies a missing parameter refuses the write (failurePolicy Fail).
    binding(
        &s,
        "deny.example.com",
        json!({"policyName": "replicalimit-policy.example.com", "validationActions": ["Deny"],
            "paramRef": {"name": "absent", "parameterNotFoundAction": "Deny"}}),
    )
    .await;
    let (code, _, body) = post(
        &s,
        &deployments("default"),
        deployment("third", 1, json!({}), &["nginx"]),
    )
    .await;
    assert_denied(
        code,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "deployments.apps \"third\" is forbidden: ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'deny.example.com' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
    );
}

#[tokio::test]
async fn failure_policy_decides_what_an_expression_error_does() {
    let s = Server::start().await;
    let spec = |failure: &str| {
        json!({
            "failurePolicy": failure,
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}],
                "namespaceSelector": {"matchLabels": {"policy": failure}}},
            "validations": [{"expression": "object.data.missing == 'x'"}]
        })
    };
    for failure in ["Fail", "Ignore"] {
        let name = failure.to_lowercase();
        namespace(&s, &name, json!({"policy": failure})).await;
        policy(&s, &name, spec(failure)).await;
        binding(
            &s,
            &name,
            json!({"policyName": name, "validationActions": ["Deny"]}),
        )
        .await;
    }
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
        "data": {"present": "y"}});
    let (code, _, body) = post(&s, "/api/v1/namespaces/fail/configmaps", cm.clone()).await;
    assert_denied(
        code,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'fail' with binding 'fail' denied request: expression 'object.data.missing == 'x'' resulted in error: no such key: missing",
    );
    created(&s, "/api/v1/namespaces/ignore/configmaps", cm).await;
}

/// The docs' `matchConditions` example: requests the conditions exclude are not validated.
#[tokio::test]
async fn match_conditions_exclude_requests() {
    let s = Server::start().await;
    namespace(&s, "demo", json!({})).await;
    policy(
        &s,
        "demo-policy.example.com",
        json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["*"]}]},
            "matchConditions": [
                {"name": "exclude-leases", "expression":
                    "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')"},
                {"name": "exclude-kubelet-requests", "expression":
                    "!('system:nodes' in request.userInfo.groups)"},
                {"name": "exclude-configmaps", "expression": "request.resource.resource != 'configmaps'"}
            ],
            "validations": [{"expression":
                "!object.metadata.name.contains('demo') || object.metadata.namespace == 'demo'"}]
        }),
    )
    .await;
    binding(
        &s,
        "demo-binding.example.com",
        json!({"policyName": "demo-policy.example.com", "validationActions": ["Deny"]}),
    )
    .await;
    let secret = |ns: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "demo-secret", "namespace": ns}})
    };
    let (code, _, body) = post(&s, "/api/v1/namespaces/default/secrets", secret("default")).await;
    assert_denied(
        code,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "secrets \"demo-secret\" is forbidden: ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding.example.com' denied request: failed expression: !object.metadata.name.contains('demo') || object.metadata.namespace == 'demo'",
    );
    created(&s, "/api/v1/namespaces/demo/secrets", secret("demo")).await;
    // The third condition is false for ConfigMaps: the policy does not apply.
    created(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-cm"}}),
    )
    .await;
}

/// The docs' `variables` example, with `namespaceObject` in the message.
#[tokio::test]
async fn variables_and_namespace_object() {
    let s = Server::start().await;
    policy(
        &s,
        "image-matches-namespace-environment.policy.example.com",
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "variables": [
                {"name": "environment", "expression":
                    "'environment' in namespaceObject.metadata.labels ? namespaceObject.metadata.labels['environment'] : 'prod'"},
                {"name": "exempt", "expression":
                    "'exempt' in object.metadata.labels && object.metadata.labels['exempt'] == 'true'"},
                {"name": "containers", "expression": "object.spec.template.spec.containers"},
                {"name": "containersToCheck", "expression":
                    "variables.containers.filter(c, c.image.contains('example.com/'))"}
            ],
            "validations": [{
                "expression": "variables.exempt || variables.containersToCheck.all(c, c.image.startsWith(variables.environment + '.'))",
                "messageExpression": "'only ' + variables.environment + ' images are allowed in namespace ' + namespaceObject.metadata.name"
            }]
        }),
    )
    .await;
    binding(
        &s,
        "image-binding.example.com",
        json!({"policyName": "image-matches-namespace-environment.policy.example.com",
            "validationActions": ["Deny"]}),
    )
    .await;
    namespace(&s, "staging", json!({"environment": "staging"})).await;
    let (code, _, body) = post(
        &s,
        &deployments("staging"),
        deployment(
            "app",
            1,
            json!({"team": "a"}),
            &["prod.example.com/app", "busybox"],
        ),
    )
    .await;
    assert_denied(
        code,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "deployments.apps \"app\" is forbidden: ValidatingAdmissionPolicy 'image-matches-namespace-environment.policy.example.com' with binding 'image-binding.example.com' denied request: only staging images are allowed in namespace staging",
    );
    created(
        &s,
        &deployments("staging"),
        deployment("ok", 1, json!({"team": "a"}), &["staging.example.com/app"]),
    )
    .await;
    created(
        &s,
        &deployments("staging"),
        deployment(
            "exempt",
            1,
            json!({"exempt": "true"}),
            &["prod.example.com/app"],
        ),
    )
    .await;
}

/// The `Audit` action and `auditAnnotations`, as the audit log's events carry them.
#[tokio::test]
async fn audit_action_and_audit_annotations_reach_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let policy_yaml = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";
    let auditor = std::sync::Arc::new(
        Auditor::new(Policy::from_bytes(policy_yaml.as_bytes()).unwrap(), &log).unwrap(),
    );
    let s = Server::start_with(ServerOptions {
        audit: Some(auditor.clone()),
        ..Default::default()
    })
    .await;
    let mut spec = replicas_policy();
    spec["auditAnnotations"] = json!([
        {"key": "high-replica-count",
         "valueExpression": "object.spec.replicas > 3 ? 'Deployment spec.replicas set to ' + string(object.spec.replicas) : null"}
    ]);
    policy(&s, "demo-policy.example.com", spec).await;
    binding(
        &s,
        "demo-binding-audit.example.com",
        json!({"policyName": "demo-policy.example.com", "validationActions": ["Audit"]}),
    )
    .await;
    let router = s.admin_router();
    let uri = deployments("default");
    let (code, body) = call(
        &router,
        Method::POST,
        &uri,
        Some(deployment("nginx", 6, json!({}), &["nginx"])),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    auditor.flush().await;
    let events: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let event = events
        .iter()
        .find(|e| {
            e["verb"] == "create" && e["requestURI"] == uri && e["stage"] == "ResponseComplete"
        })
        .unwrap();
    let annotations = &event["annotations"];
    let failure: Value = serde_json::from_str(
        annotations["validation.policy.admission.k8s.io/validation_failure"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        failure,
        json!([{"message": "failed expression: object.spec.replicas <= 5",
            "policy": "demo-policy.example.com", "binding": "demo-binding-audit.example.com",
            "expressionIndex": 0, "validationActions": ["Audit"]}])
    );
    assert_eq!(
        annotations["demo-policy.example.com/high-replica-count"],
        "Deployment spec.replicas set to 6"
    );
}

/// The `authorizer` variable asks the server's authorizer: for the requesting user (the admin
/// here), for `requestResource`, and for a ServiceAccount through RBAC.
#[tokio::test]
async fn authorizer_checks_ask_the_servers_authorizer() {
    let s = Server::start().await;
    policy(
        &s,
        "authz.example.com",
        json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [
                {"expression": "authorizer.group('').resource('secrets').namespace('default').check('get').allowed()"},
                {"expression": "authorizer.requestResource.check('create').allowed()"},
                {"expression": "authorizer.path('/healthz').check('get').allowed()"},
                {"expression": "authorizer.serviceAccount('default', 'reader').group('').resource('secrets').namespace('default').check('get').allowed()",
                 "messageExpression": "'reader may not read secrets: ' + authorizer.serviceAccount('default', 'reader').group('').resource('secrets').namespace('default').check('get').reason()"}
            ]
        }),
    )
    .await;
    binding(
        &s,
        "authz.example.com",
        json!({"policyName": "authz.example.com", "validationActions": ["Deny"]}),
    )
    .await;
    let cm =
        |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let (code, _, body) = post(&s, "/api/v1/namespaces/default/configmaps", cm("a")).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // RBAC gives no reason when nothing allows; the message is trimmed, as upstream's.
    assert_eq!(
        body["message"],
        "configmaps \"a\" is forbidden: ValidatingAdmissionPolicy 'authz.example.com' with binding 'authz.example.com' denied request: reader may not read secrets:",
        "{body}"
    );
    created(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "secret-reader"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
    )
    .await;
    created(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]}),
    )
    .await;
    created(&s, "/api/v1/namespaces/default/configmaps", cm("b")).await;
}

/// Stored policies and bindings get upstream's defaults, and the validation a client meets most:
/// unparsable expressions, missing actions, Deny with Warn.
#[tokio::test]
async fn policies_and_bindings_are_defaulted_and_validated() {
    let s = Server::start().await;
    let mut spec = replicas_policy();
    spec.as_object_mut().unwrap().remove("failurePolicy");
    policy(&s, "demo-policy.example.com", spec).await;
    let (code, stored) = s
        .call(
            Method::GET,
            &format!("{POLICIES}/demo-policy.example.com"),
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{stored}");
    assert_eq!(stored["spec"]["failurePolicy"], "Fail");
    assert_eq!(
        stored["spec"]["matchConstraints"]["matchPolicy"],
        "Equivalent"
    );
    assert_eq!(
        stored["spec"]["matchConstraints"]["namespaceSelector"],
        json!({})
    );

    let mut bad = replicas_policy();
    bad["validations"] = json!([{"expression": "object.spec.replicas <= "}]);
    let p = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "bad"}, "spec": bad});
    let (code, _, body) = post(&s, POLICIES, p).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: spec.validations[0].expression: Invalid value: \"object.spec.replicas <= \": compilation failed: "
        ),
        "{body}"
    );

    let b = |actions: Value| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
            "spec": {"policyName": "demo-policy.example.com", "validationActions": actions}})
    };
    let (code, _, body) = post(&s, BINDINGS, b(json!([]))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"b\" is invalid: spec.validationActions: Required value: at least one validation action is required",
        "{body}"
    );
    let (code, _, body) = post(&s, BINDINGS, b(json!(["Deny", "Warn"]))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.ends_with(": must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"),
        "{body}"
    );
}

/// `request`, `oldObject` and `namespaceObject` as upstream builds them, on create and update.
#[tokio::test]
async fn request_old_object_and_namespace_object() {
    let s = Server::start().await;
    policy(
        &s,
        "request.example.com",
        json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": [
                {"expression": "request.kind.kind == 'ConfigMap' && request.resource.resource == 'configmaps' && request.requestKind.version == 'v1' && !has(request.subResource)"},
                {"expression": "request.namespace == 'default' && request.name == object.metadata.name && namespaceObject.metadata.name == 'default'"},
                {"expression": "request.operation == 'CREATE' ? oldObject == null : oldObject.data.v == '1'",
                 "messageExpression": "'was ' + oldObject.data.v"},
                {"expression": "'system:masters' in request.userInfo.groups && !request.dryRun"}
            ]
        }),
    )
    .await;
    binding(
        &s,
        "request.example.com",
        json!({"policyName": "request.example.com", "validationActions": ["Deny"]}),
    )
    .await;
    let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"v": v}});
    created(&s, "/api/v1/namespaces/default/configmaps", cm("1")).await;
    let uri = "/api/v1/namespaces/default/configmaps/cm";
    let (code, body) = s.call(Method::PUT, uri, Some(cm("2"))).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, body) = s.call(Method::PUT, uri, Some(cm("3"))).await;
    assert_denied(
        code,
        &body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'request.example.com' with binding 'request.example.com' denied request: was 2",
    );
}
