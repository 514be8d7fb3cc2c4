//! apiregistration.k8s.io APIServices as upstream's kube-aggregator keeps them (answers checked
//! against kube-apiserver v1.28.4): the local ones exist when the server starts, validation and
//! the status strategy are upstream's, and a remote APIService gets its `Available` condition
//! from the availability controller.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{DEADLINE, Server};

const API_SERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

fn available(obj: &Value) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn local_api_services_exist_once_the_server_has_started() {
    let s = Server::start().await;
    let (code, list) = s.call(Method::GET, API_SERVICES, None).await;
    assert_eq!(code, StatusCode::OK);
    let items = list["items"].as_array().unwrap();
    let names: Vec<&str> = items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    for want in [
        "v1.",
        "v1.apps",
        "v1.autoscaling",
        "v2.autoscaling",
        "v1.batch",
        "v1.policy",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    assert!(!names.contains(&"v1.apiregistration.k8s.io"));
    for item in items {
        let c = available(item);
        assert_eq!(
            (&c["status"], &c["reason"]),
            (&json!("True"), &json!("Local")),
            "{item}"
        );
        assert_eq!(c["message"], "Local APIServices are always available");
        assert_eq!(
            item["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
            "onstart"
        );
    }
    let core = items
        .iter()
        .find(|i| i["metadata"]["name"] == "v1.")
        .unwrap();
    assert_eq!(
        core["spec"],
        json!({"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1})
    );
}

#[tokio::test]
async fn validation_gives_upstreams_messages() {
    let s = Server::start().await;
    let bad = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v2."},
        "spec": {"version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1}});
    let (code, status) = s.call(Method::POST, API_SERVICES, Some(bad)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        status["message"],
        "APIService.apiregistration.k8s.io \"v2.\" is invalid: spec.group: Required value: only v1 may have an empty group and it better be legacy kube"
    );
    let bad = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "wardle"},
        "spec": {"group": "wardle.example.com", "version": "v1alpha1",
            "groupPriorityMinimum": 20001, "versionPriority": 0, "insecureSkipTLSVerify": true,
            "caBundle": "YWJj", "service": {"namespace": "ns", "port": 70000}}});
    let (code, status) = s.call(Method::POST, API_SERVICES, Some(bad)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.groupPriorityMinimum",
            "spec.versionPriority",
            "spec.service.name",
            "spec.service.port",
            "spec.insecureSkipTLSVerify"
        ]
    );
}

#[tokio::test]
async fn status_is_the_servers_on_create_and_the_status_writers_after() {
    let s = Server::start().await;
    // A local APIService is available from its creation, whatever status it was sent with.
    let local = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.example.org"},
        "spec": {"group": "example.org", "version": "v1", "groupPriorityMinimum": 10,
            "versionPriority": 10},
        "status": {"conditions": [{"type": "Available", "status": "False", "reason": "Nope"}]}});
    let (code, created) = s.call(Method::POST, API_SERVICES, Some(local)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(available(&created)["reason"], "Local");

    // A status write keeps the spec; a main write keeps the status. (The Available condition
    // is the availability controller's, so the test writes another one.)
    let tested = json!({"type": "Tested", "status": "True", "reason": "ByTheTest"});
    let mut write = created.clone();
    write["spec"]["versionPriority"] = json!(99);
    write["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(tested.clone());
    let uri = format!("{API_SERVICES}/v1.example.org");
    let (code, after) = s
        .call(Method::PUT, &format!("{uri}/status"), Some(write.clone()))
        .await;
    assert_eq!(code, StatusCode::OK, "{after}");
    assert_eq!(after["spec"]["versionPriority"], 10);
    assert_eq!(after["status"]["conditions"][1], tested);
    let mut main = after.clone();
    main["spec"]["versionPriority"] = json!(99);
    main["status"] = json!({});
    let (code, after) = s.call(Method::PUT, &uri, Some(main)).await;
    assert_eq!(code, StatusCode::OK, "{after}");
    assert_eq!(after["spec"]["versionPriority"], 99);
    assert_eq!(after["status"]["conditions"][1], tested);

    // Conditions say True, False or Unknown.
    let mut bad = after.clone();
    bad["status"]["conditions"][1]["status"] = json!("Maybe");
    let (code, status) = s
        .call(Method::PUT, &format!("{uri}/status"), Some(bad))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        status["details"]["causes"][0]["field"],
        "status.conditions[1].status"
    );
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
    );
}

#[tokio::test]
async fn an_api_service_without_its_service_is_unavailable() {
    let s = Server::start().await;
    let remote = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1beta1.metrics.k8s.io"},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
            "versionPriority": 100, "insecureSkipTLSVerify": true,
            "service": {"namespace": "kube-system", "name": "metrics-server"}}});
    let (code, created) = s.call(Method::POST, API_SERVICES, Some(remote)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["service"]["port"], 443);
    let mut watch = s
        .stream(&format!(
            "{API_SERVICES}?watch=true&fieldSelector=metadata.name%3Dv1beta1.metrics.k8s.io"
        ))
        .await;
    let condition = tokio::time::timeout(DEADLINE, async {
        loop {
            let event = watch.next().await.expect("the watch goes on");
            let c = available(&event["object"]);
            if !c.is_null() {
                return c;
            }
        }
    })
    .await
    .expect("a condition within the deadline");
    assert_eq!(
        (
            &condition["status"],
            &condition["reason"],
            &condition["message"]
        ),
        (
            &json!("False"),
            &json!("ServiceNotFound"),
            &json!("service/metrics-server in \"kube-system\" is not present")
        )
    );
    // Its group is listed, and its requests are refused as upstream's proxy refuses them.
    let (code, group) = s.call(Method::GET, "/apis/metrics.k8s.io", None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(group["preferredVersion"]["version"], "v1beta1");
    let (code, body) = crate::common::call_raw(
        &s.router,
        Method::GET,
        "/apis/metrics.k8s.io/v1beta1/pods",
        None,
    )
    .await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(&body[..], b"service unavailable\n");
}

/// Waits for the APIService `name` to have an `Available` condition with `reason`.
async fn wait_reason(s: &Server, name: &str, reason: &str) -> Value {
    let mut watch = s
        .stream(&format!(
            "{API_SERVICES}?watch=true&fieldSelector=metadata.name%3D{name}"
        ))
        .await;
    tokio::time::timeout(DEADLINE, async {
        loop {
            let event = watch.next().await.expect("the watch goes on");
            let c = available(&event["object"]);
            if c["reason"] == reason {
                return c;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{name} never had reason {reason}"))
}

#[tokio::test]
async fn a_wrong_port_and_a_refusing_endpoint_are_reported_as_upstream_words_them() {
    let s = Server::start().await;
    // A port nothing listens on: bound, then let go.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "api", "namespace": "default"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}});
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/services",
            Some(service),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "api", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port}]}]});
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/endpoints",
            Some(endpoints),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let api_service = |name: &str, group: &str, port: u16| {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 100,
                "versionPriority": 100, "insecureSkipTLSVerify": true,
                "service": {"namespace": "default", "name": "api", "port": port}}})
    };
    let (code, body) = s
        .call(
            Method::POST,
            API_SERVICES,
            Some(api_service(
                "v1.wrong-port.example.com",
                "wrong-port.example.com",
                8443,
            )),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let c = wait_reason(&s, "v1.wrong-port.example.com", "ServicePortError").await;
    assert_eq!(
        c["message"],
        "service/api in \"default\" is not listening on port 8443"
    );
    let (code, body) = s
        .call(
            Method::POST,
            API_SERVICES,
            Some(api_service(
                "v1.refused.example.com",
                "refused.example.com",
                443,
            )),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let c = wait_reason(&s, "v1.refused.example.com", "FailedDiscoveryCheck").await;
    let url = format!("https://127.0.0.1:{port}/apis/refused.example.com/v1");
    assert_eq!(c["status"], "False");
    assert_eq!(
        c["message"],
        format!(
            "failing or missing response from {url}: Get \"{url}\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
}
