//! Pod Security admission through the API, with upstream's (kube-apiserver v1.28) answers: a
//! namespace's `enforce` level refuses pods with upstream's Forbidden status, `warn` sends
//! Warning headers, workloads are only warned about, namespace labels must be readable, and a
//! tightened `enforce` level reports the namespace's existing pods.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use serde_json::{Value, json};
use tower::ServiceExt;

/// One request; the status, the Warning headers' texts, and the body.
async fn call(
    s: &Server,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Value,
) -> (StatusCode, Vec<String>, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    // `299 - "<text>"`, the text quoted as a JSON string.
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| {
            let v = v.to_str().unwrap();
            let quoted = v.strip_prefix("299 - ").unwrap();
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

async fn post(s: &Server, uri: &str, body: Value) -> (StatusCode, Vec<String>, Value) {
    call(s, Method::POST, uri, "application/json", body).await
}

async fn merge_patch(s: &Server, uri: &str, body: Value) -> (StatusCode, Vec<String>, Value) {
    call(s, Method::PATCH, uri, "application/merge-patch+json", body).await
}

/// Creates namespace `name` with `pod-security.kubernetes.io/<mode>` labels.
async fn namespace(s: &Server, name: &str, labels: &[(&str, &str)]) {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (format!("pod-security.kubernetes.io/{k}"), json!(v)))
        .collect();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}});
    let (code, _, body) = post(s, "/api/v1/namespaces", ns).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "busybox:1.36"}]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

/// A pod that passes the restricted level.
fn restricted_pod(name: &str, image: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": image, "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}})
}

#[tokio::test]
async fn enforce_refuses_violating_pods_with_upstreams_status() {
    let s = Server::start().await;
    namespace(&s, "locked", &[("enforce", "restricted")]).await;
    let (code, warnings, status) = post(
        &s,
        "/api/v1/namespaces/locked/pods",
        pod("x", json!({"hostNetwork": true})),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        concat!(
            r#"pods "x" is forbidden: violates PodSecurity "restricted:latest": "#,
            "host namespaces (hostNetwork=true), ",
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        )
    );
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["code"], 403);
    // Upstream's StatusDetails omits the empty (core) group.
    assert_eq!(status["details"], json!({"name": "x", "kind": "pods"}));
    // A refused write carries no warnings (upstream adds none to a request it rejects).
    assert!(warnings.is_empty(), "{warnings:?}");
    // Nothing was stored.
    let (code, _) = s
        .call(Method::GET, "/api/v1/namespaces/locked/pods/x", None)
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    // A generated name is the name upstream's message gives.
    let generated = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-"},
        "spec": {"hostPID": true, "containers": [{"name": "c", "image": "busybox"}]}});
    let (code, _, status) = post(&s, "/api/v1/namespaces/locked/pods", generated).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    let name = status["details"]["name"].as_str().unwrap();
    assert!(name.starts_with("web-") && name.len() == 9, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!(r#"pods "{name}" is forbidden: violates PodSecurity "restricted:latest": host namespaces (hostPID=true), "#)),
        "{status}"
    );

    let (code, warnings, body) = post(
        &s,
        "/api/v1/namespaces/locked/pods",
        restricted_pod("ok", "busybox:1.36"),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[tokio::test]
async fn enforce_honours_the_version_label() {
    let s = Server::start().await;
    // net.ipv4.ip_local_reserved_ports became a safe sysctl in v1.27.
    let sysctl = json!({"securityContext": {"sysctls": [
        {"name": "net.ipv4.ip_local_reserved_ports", "value": "1024-4999"}]}});
    namespace(
        &s,
        "old",
        &[("enforce", "baseline"), ("enforce-version", "v1.26")],
    )
    .await;
    let (code, _, status) = post(&s, "/api/v1/namespaces/old/pods", pod("p", sysctl.clone())).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        r#"pods "p" is forbidden: violates PodSecurity "baseline:v1.26": forbidden sysctls (net.ipv4.ip_local_reserved_ports)"#
    );
    namespace(&s, "new", &[("enforce", "baseline")]).await;
    let (code, _, body) = post(&s, "/api/v1/namespaces/new/pods", pod("p", sysctl)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn warn_level_warns_about_pods_and_workload_templates_without_refusing() {
    let s = Server::start().await;
    namespace(&s, "watched", &[("warn", "baseline")]).await;
    let privileged = json!({"name": "c", "image": "nginx",
        "securityContext": {"privileged": true}});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [privileged]}}}});
    let (code, warnings, body) = post(
        &s,
        "/apis/apps/v1/namespaces/watched/deployments",
        deployment,
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(
        warnings,
        [
            r#"would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#
        ]
    );

    let (code, warnings, body) = post(
        &s,
        "/api/v1/namespaces/watched/pods",
        pod("p", json!({"hostPID": true})),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(
        warnings,
        [r#"would violate PodSecurity "baseline:latest": host namespaces (hostPID=true)"#]
    );
}

#[tokio::test]
async fn workloads_are_never_refused_by_enforce() {
    let s = Server::start().await;
    // Unset `warn` follows a stricter `enforce`, so the workload is warned about at that level.
    namespace(&s, "locked", &[("enforce", "baseline")]).await;
    let job = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "hostIPC": true,
            "containers": [{"name": "c", "image": "busybox"}]}}}}}});
    let (code, warnings, body) = post(&s, "/apis/batch/v1/namespaces/locked/cronjobs", job).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(
        warnings,
        [r#"would violate PodSecurity "baseline:latest": host namespaces (hostIPC=true)"#]
    );
}

#[tokio::test]
async fn unlabelled_namespaces_admit_anything() {
    let s = Server::start().await;
    let (code, _, body) = post(
        &s,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1",
        "kind": "Namespace", "metadata": {"name": "open"}}),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let worst = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root"},
        "spec": {"hostNetwork": true, "hostPID": true,
            "securityContext": {"runAsUser": 0},
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "c", "image": "busybox",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}}}]}});
    let (code, warnings, body) = post(&s, "/api/v1/namespaces/open/pods", worst).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[tokio::test]
async fn invalid_labels_are_refused_as_upstream() {
    let s = Server::start().await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bad",
        "labels": {"pod-security.kubernetes.io/enforce": "strict",
                   "pod-security.kubernetes.io/warn-version": "1.28"}}});
    let (code, _, status) = post(&s, "/api/v1/namespaces", ns).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        concat!(
            r#"Namespace "bad" is invalid: ["#,
            r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted, "#,
            r#"metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.28": must be "latest" or "v1.x"]"#,
        )
    );
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "FieldValueInvalid",
            "message": r#"Invalid value: "strict": must be one of privileged, baseline, restricted"#,
            "field": "metadata.labels[pod-security.kubernetes.io/enforce]"})
    );

    namespace(&s, "good", &[]).await;
    let (code, _, status) = merge_patch(
        &s,
        "/api/v1/namespaces/good",
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/audit": "Baseline"}}}),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(
        status["message"],
        r#"Namespace "good" is invalid: metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "Baseline": must be one of privileged, baseline, restricted"#
    );
}

#[tokio::test]
async fn tightening_enforce_reports_existing_pods() {
    let s = Server::start().await;
    namespace(&s, "busy", &[]).await;
    for name in ["b", "a"] {
        let (code, _, body) = post(
            &s,
            "/api/v1/namespaces/busy/pods",
            pod(name, json!({"hostNetwork": true})),
        )
        .await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let (code, _, body) = post(
        &s,
        "/api/v1/namespaces/busy/pods",
        pod(
            "c",
            json!({"volumes": [{"name": "v", "hostPath": {"path": "/"}}]}),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");

    let labels = |level: &str| json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": level}}});
    let (code, warnings, body) =
        merge_patch(&s, "/api/v1/namespaces/busy", labels("baseline")).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(
        warnings,
        [
            r#"existing pods in namespace "busy" violate the new PodSecurity enforce level "baseline:latest""#,
            "a (and 1 other pod): host namespaces",
            "c: hostPath volumes",
        ]
    );
    // Relaxing the level at the same version checks nothing.
    let (code, warnings, body) =
        merge_patch(&s, "/api/v1/namespaces/busy", labels("privileged")).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[tokio::test]
async fn pod_updates_are_checked_only_when_images_or_containers_change() {
    let s = Server::start().await;
    namespace(&s, "later", &[]).await;
    let (code, _, body) = post(
        &s,
        "/api/v1/namespaces/later/pods",
        pod("old", json!({"hostNetwork": true})),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, _, body) = merge_patch(
        &s,
        "/api/v1/namespaces/later",
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    // A label change is not significant: the pod predating the level keeps being updatable.
    let (code, _, body) = merge_patch(
        &s,
        "/api/v1/namespaces/later/pods/old",
        json!({"metadata": {"labels": {"team": "a"}}}),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    // A new image is.
    let (code, _, status) = merge_patch(
        &s,
        "/api/v1/namespaces/later/pods/old",
        json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        status["message"],
        r#"pods "old" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)"#
    );
}

/// The tutorial manifests of `shared/realworld` create unchanged where no level is set.
#[tokio::test]
async fn realworld_manifests_apply_in_unlabelled_namespaces() {
    let s = Server::start().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realworld");
    let mut created = 0;
    for file in [
        "web.yaml",
        "zookeeper.yaml",
        "guestbook.yaml",
        "fluentd-daemonset.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
        for doc in docs.into_iter().filter(|d| d.is_object()) {
            let api_version = doc["apiVersion"].as_str().unwrap();
            let plural = format!("{}s", doc["kind"].as_str().unwrap().to_lowercase());
            let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
            let prefix = if api_version == "v1" {
                "/api/v1".to_string()
            } else {
                format!("/apis/{api_version}")
            };
            let uri = format!("{prefix}/namespaces/{ns}/{plural}");
            let (code, warnings, body) = post(&s, &uri, doc).await;
            assert_eq!(code, StatusCode::CREATED, "{file}: {body}");
            assert!(warnings.is_empty(), "{file}: {warnings:?}");
            created += 1;
        }
    }
    assert_eq!(created, 11);
}
