//! API aggregation through real kubectl, next to what upstream's kube-apiserver (v1.28.4, which
//! runs the aggregator in front of itself) shows: a local APIService for every built-in
//! group/version, Available with reason `Local`; an APIService whose Service is missing or has
//! no ready endpoint is `Available=False` with upstream's reason and message while discovery of
//! every other group keeps working; and one whose Service's endpoint is a test server on
//! 127.0.0.1 becomes Available and has its requests proxied there, with the user in the
//! front-proxy headers.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    extract::{Request, State},
    routing::get,
};
use base64::Engine as _;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    service::TowerToHyperService,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Api;
use serde_json::{Value, json};

use crate::common::{self, Cluster};

/// The names upstream's kube-apiserver v1.28.4 lists in `kubectl get apiservices` on a bare
/// cluster (checked against it), less flowcontrol.apiserver.k8s.io, which rollwright does not
/// serve.
const UPSTREAM_LOCAL: &[&str] = &[
    "v1.",
    "v1.admissionregistration.k8s.io",
    "v1.apiextensions.k8s.io",
    "v1.apps",
    "v1.authentication.k8s.io",
    "v1.authorization.k8s.io",
    "v1.autoscaling",
    "v1.batch",
    "v1.certificates.k8s.io",
    "v1.coordination.k8s.io",
    "v1.discovery.k8s.io",
    "v1.events.k8s.io",
    "v1.networking.k8s.io",
    "v1.node.k8s.io",
    "v1.policy",
    "v1.rbac.authorization.k8s.io",
    "v1.scheduling.k8s.io",
    "v1.storage.k8s.io",
    "v2.autoscaling",
];

/// metrics-server's published manifest (v0.7), less its Deployment's pod details: no node runs
/// here, so its Service has no ready endpoint.
const METRICS_SERVER: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata:
  labels: {k8s-app: metrics-server}
  name: metrics-server
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    k8s-app: metrics-server
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-view: "true"
  name: system:aggregated-metrics-reader
rules:
- apiGroups: [metrics.k8s.io]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  labels: {k8s-app: metrics-server}
  name: metrics-server-auth-reader
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects:
- kind: ServiceAccount
  name: metrics-server
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  labels: {k8s-app: metrics-server}
  name: metrics-server:system:auth-delegator
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:auth-delegator
subjects:
- kind: ServiceAccount
  name: metrics-server
  namespace: kube-system
---
apiVersion: v1
kind: Service
metadata:
  labels: {k8s-app: metrics-server}
  name: metrics-server
  namespace: kube-system
spec:
  ports:
  - name: https
    port: 443
    protocol: TCP
    targetPort: https
  selector: {k8s-app: metrics-server}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  labels: {k8s-app: metrics-server}
  name: v1beta1.metrics.k8s.io
spec:
  group: metrics.k8s.io
  groupPriorityMinimum: 100
  insecureSkipTLSVerify: true
  service:
    name: metrics-server
    namespace: kube-system
  version: v1beta1
  versionPriority: 100
"#;

/// Waits until the APIService `name` has an `Available` condition with `reason`; returns it.
async fn wait_available(c: &Cluster, name: &str, reason: &str) -> Value {
    let api: Api<APIService> = Api::all(c.client().await);
    let found = embedded::wait_until(
        &api,
        &format!("{name} Available with reason {reason}"),
        common::DEADLINE,
        |s| {
            s.metadata.name.as_deref() == Some(name)
                && s.status
                    .as_ref()
                    .and_then(|st| st.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "Available" && c.reason.as_deref() == Some(reason))
                    })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let obj = serde_json::to_value(found).unwrap();
    obj["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .cloned()
        .unwrap()
}

/// Every built-in group/version has its local APIService, Available as upstream shows it.
#[tokio::test]
async fn local_api_services_are_listed_available() {
    let c = Cluster::start().await;
    let out = c.kubectl(&["get", "apiservices"]).await;
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows.first().map(Vec::as_slice),
        Some(&["NAME", "SERVICE", "AVAILABLE", "AGE"][..]),
        "{out}"
    );
    let names: Vec<&str> = rows[1..].iter().map(|r| r[0]).collect();
    for want in UPSTREAM_LOCAL {
        assert!(names.contains(want), "{want} missing from {out}");
    }
    // The aggregator's own group has none, as upstream.
    assert!(!names.contains(&"v1.apiregistration.k8s.io"), "{out}");
    for row in &rows[1..] {
        assert_eq!(&row[1..3], ["Local", "True"], "{out}");
    }
    let apps = c
        .kubectl_json(&["get", "apiservice", "v1.apps", "-o", "json"])
        .await;
    assert_eq!(
        apps["metadata"]["labels"],
        json!({"kube-aggregator.kubernetes.io/automanaged": "onstart"})
    );
    assert_eq!(
        apps["spec"],
        json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15})
    );
    let cond = &apps["status"]["conditions"][0];
    assert_eq!(
        (
            &cond["type"],
            &cond["status"],
            &cond["reason"],
            &cond["message"]
        ),
        (
            &json!("Available"),
            &json!("True"),
            &json!("Local"),
            &json!("Local APIServices are always available")
        )
    );
    c.stop().await;
}

/// A CustomResourceDefinition's served versions get local APIServices, kept while it lives
/// (upstream's crdregistration controller), and lose them with it.
#[tokio::test]
async fn definitions_get_local_api_services_while_they_live() {
    let c = Cluster::start().await;
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1beta1, served: false, storage: false, schema: {openAPIV3Schema: {type: object}}}
"#;
    c.kubectl_stdin(&["apply", "-f", "-"], crd).await;
    let cond = wait_available(&c, "v1.example.com", "Local").await;
    assert_eq!(cond["status"], "True");
    let obj = c
        .kubectl_json(&["get", "apiservice", "v1.example.com", "-o", "json"])
        .await;
    assert_eq!(
        obj["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    assert_eq!(obj["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(obj["spec"]["versionPriority"], 100);
    let none = c
        .kubectl_raw(&["get", "apiservice", "v1beta1.example.com"], None)
        .await;
    assert!(
        !none.status.success(),
        "an unserved version has no APIService"
    );
    let uid = obj["metadata"]["uid"].as_str().unwrap().to_string();
    c.kubectl(&["delete", "crd", "gadgets.example.com"]).await;
    let api: Api<APIService> = Api::all(c.client().await);
    let gone = kube::runtime::wait::await_condition(
        api,
        "v1.example.com",
        kube::runtime::wait::conditions::is_deleted(&uid),
    );
    tokio::time::timeout(common::DEADLINE, gone)
        .await
        .expect("the definition's APIService goes with it")
        .unwrap();
    c.stop().await;
}

/// An APIService whose Service is absent, and metrics-server's manifest whose Service has no
/// ready endpoint, are `Available=False` with upstream's reasons and messages (observed on
/// kube-apiserver v1.28.4); discovery and every other group keep working.
#[tokio::test]
async fn unavailable_api_services_leave_discovery_working() {
    let c = Cluster::with_controllers(&["endpoint"]).await;
    let absent = r#"
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.wardle.example.com}
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
  service: {name: api, namespace: wardle}
"#;
    c.kubectl_stdin(&["apply", "-f", "-"], absent).await;
    let cond = wait_available(&c, "v1alpha1.wardle.example.com", "ServiceNotFound").await;
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["message"], "service/api in \"wardle\" is not present");
    let out = c
        .kubectl(&["get", "apiservice", "v1alpha1.wardle.example.com"])
        .await;
    assert!(
        out.contains("wardle/api   False (ServiceNotFound)"),
        "{out}"
    );

    c.kubectl_stdin(&["apply", "-f", "-"], METRICS_SERVER).await;
    let cond = wait_available(&c, "v1beta1.metrics.k8s.io", "MissingEndpoints").await;
    assert_eq!(cond["status"], "False");
    assert_eq!(
        cond["message"],
        "endpoints for service/metrics-server in \"kube-system\" have no addresses with port name \"https\""
    );
    let obj = c
        .kubectl_json(&["get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "json"])
        .await;
    assert_eq!(obj["spec"]["service"]["port"], 443, "the port is defaulted");

    // Legacy discovery lists the groups, available or not, as upstream's does.
    let apis: Value = serde_json::from_str(&c.kubectl(&["get", "--raw", "/apis"]).await).unwrap();
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(
        groups.contains(&"apps") && groups.contains(&"metrics.k8s.io"),
        "{groups:?}"
    );
    let group: Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", "/apis/metrics.k8s.io"]).await).unwrap();
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        "metrics.k8s.io/v1beta1"
    );
    // The group's own requests get upstream's 503.
    let err = c
        .kubectl_fails(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/pods"], None)
        .await;
    assert!(
        err.contains("Error from server (ServiceUnavailable): the server is currently unable to handle the request"),
        "{err}"
    );
    // kubectl's discovery skips the stale group and lists all the others, without an error (as
    // kubectl does against upstream: exit 0, nothing on stderr).
    let out = c.kubectl_raw(&["api-resources"], None).await;
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    for resource in [
        "deployments",
        "apiservices",
        "pods",
        "customresourcedefinitions",
    ] {
        assert!(
            listed.lines().any(|l| l.starts_with(resource)),
            "{resource} missing: {listed}"
        );
    }
    assert!(!listed.contains("metrics.k8s.io"), "{listed}");
    c.kubectl(&["get", "deployments", "-A"]).await;
    c.stop().await;
}

/// What the test backend saw: the user headers and whether credentials came along.
#[derive(Clone, Debug, Default)]
struct Seen {
    user: Option<String>,
    groups: Vec<String>,
    authorization: bool,
}

/// An aggregated API server for `wardle.example.com/v1alpha1` on 127.0.0.1, with a certificate
/// for `api.wardle.svc` from its own CA.
struct Backend {
    addr: SocketAddr,
    ca_bundle: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn record(State(seen): State<Arc<Mutex<Vec<Seen>>>>, req: Request) -> Request {
    let h = req.headers();
    seen.lock().unwrap().push(Seen {
        user: h
            .get("x-remote-user")
            .map(|v| v.to_str().unwrap().to_string()),
        groups: h
            .get_all("x-remote-group")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect(),
        authorization: h.get("authorization").is_some(),
    });
    req
}

/// A CA named `name`: its certificate and what signs with it.
fn ca(name: &str) -> (rcgen::Certificate, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    (ca_cert, rcgen::Issuer::new(ca_params, ca_key))
}

impl Backend {
    async fn start() -> Backend {
        let (ca_cert, issuer) = ca("wardle-ca");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["api.wardle.svc".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
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
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let gv = "/apis/wardle.example.com/v1alpha1";
        let app = Router::new()
            .route(
                gv,
                get(|| async {
                    Json(json!({"kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": "wardle.example.com/v1alpha1",
                        "resources": [{"name": "flunders", "singularName": "flunder",
                            "namespaced": true, "kind": "Flunder", "shortNames": ["fl"],
                            "verbs": ["get", "list"]}]}))
                }),
            )
            .route(
                &format!("{gv}/namespaces/{{ns}}/flunders"),
                get(|| async {
                    Json(
                        json!({"kind": "FlunderList", "apiVersion": "wardle.example.com/v1alpha1",
                        "metadata": {"resourceVersion": "7"},
                        "items": [{"kind": "Flunder", "apiVersion": "wardle.example.com/v1alpha1",
                            "metadata": {"name": "first", "namespace": "default",
                                "creationTimestamp": "2024-01-01T00:00:00Z"}}]}),
                    )
                }),
            )
            .layer(axum::middleware::map_request_with_state(
                seen.clone(),
                record,
            ));
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
        Backend {
            addr,
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_cert.pem()),
            seen,
        }
    }
}

/// A backend on 127.0.0.1 behind a Service with hand-written Endpoints becomes Available once
/// its discovery answers, is listed in discovery with its resources, and gets the group's
/// requests with the caller in the front-proxy headers and without the caller's token. Without
/// its endpoint it is unavailable again.
#[tokio::test]
async fn a_reachable_backend_becomes_available_and_is_proxied_to() {
    let c = Cluster::start().await;
    let backend = Backend::start().await;
    let manifest = format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: wardle}}
---
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: wardle}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: api, namespace: wardle}}
subsets:
- addresses: [{{ip: 127.0.0.1}}]
  ports: [{{name: https, port: {port}}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1alpha1.wardle.example.com}}
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: {ca}
  service: {{name: api, namespace: wardle}}
"#,
        port = backend.addr.port(),
        ca = backend.ca_bundle
    );
    c.kubectl_stdin(&["apply", "-f", "-"], &manifest).await;
    let cond = wait_available(&c, "v1alpha1.wardle.example.com", "Passed").await;
    assert_eq!(
        (&cond["status"], &cond["message"]),
        (&json!("True"), &json!("all checks passed"))
    );
    let out = c
        .kubectl(&["get", "apiservice", "v1alpha1.wardle.example.com"])
        .await;
    assert!(out.contains("wardle/api   True"), "{out}");
    // The discovery check came as the aggregator, in system:masters.
    let first = backend.seen.lock().unwrap()[0].clone();
    assert_eq!(first.user.as_deref(), Some("system:kube-aggregator"));
    assert_eq!(first.groups, ["system:masters"]);

    let list: Value = serde_json::from_str(
        &c.kubectl(&[
            "get",
            "--raw",
            "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "first");
    let proxied = backend.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(proxied.user.as_deref(), Some(apiserver::ADMIN_USER));
    assert!(
        proxied.groups.contains(&"system:masters".to_string()),
        "{proxied:?}"
    );
    assert!(
        !proxied.authorization,
        "the caller's token is not passed on"
    );

    let resources = c
        .kubectl(&["api-resources", "--api-group=wardle.example.com"])
        .await;
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("flunders") && l.contains("Flunder")),
        "{resources}"
    );
    let names = c.kubectl(&["get", "flunders", "-o", "name"]).await;
    assert_eq!(names.trim(), "flunder.wardle.example.com/first");

    // The backend's certificate is checked against caBundle: with another CA's bundle the
    // request fails (the discovery check skips verification, as upstream's, so the APIService
    // stays Available). The proxy reads the APIService from the watch cache, which may trail
    // the patch by a moment.
    let (other, _) = ca("other-ca");
    let patch = json!({"spec": {"caBundle":
        base64::engine::general_purpose::STANDARD.encode(other.pem())}});
    c.kubectl(&[
        "patch",
        "apiservice",
        "v1alpha1.wardle.example.com",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ])
    .await;
    let flunders = "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders";
    let refused = tokio::time::timeout(common::DEADLINE, async {
        loop {
            let out = c.kubectl_raw(&["get", "--raw", flunders], None).await;
            if !out.status.success() {
                return String::from_utf8_lossy(&out.stderr).into_owned();
            }
        }
    })
    .await
    .expect("the request fails once the bundle is another CA's");
    assert!(refused.contains("ServiceUnavailable"), "{refused}");

    // Without its endpoint the APIService is unavailable and its requests get 503.
    c.kubectl(&["delete", "endpoints", "api", "-n", "wardle"])
        .await;
    let cond = wait_available(&c, "v1alpha1.wardle.example.com", "EndpointsNotFound").await;
    assert_eq!(
        cond["message"],
        "cannot find endpoints for service/api in \"wardle\""
    );
    let err = c
        .kubectl_fails(
            &[
                "get",
                "--raw",
                "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
            ],
            None,
        )
        .await;
    assert!(err.contains("ServiceUnavailable"), "{err}");
    c.stop().await;
}
