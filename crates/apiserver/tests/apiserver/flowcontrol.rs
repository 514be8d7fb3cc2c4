//! API Priority and Fairness (issue 36): requests are classified by FlowSchema into priority
//! levels, so one user filling its level leaves `system:masters` and the controllers served;
//! within a level a flood from one user does not starve another; a full queue answers 429 with
//! `Retry-After`, counted in upstream's metric; and kubectl prints the default objects.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{self, DEADLINE, Server, pod};
use apiserver::{ServerOptions, inflight::InFlightLimits};
use authz::UserInfo;
use axum::{
    Router,
    body::Body,
    http::{self, Method, StatusCode},
};
use bytes::Bytes;
use serde_json::{Value, json};
use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};
use tower::ServiceExt;

const FLOWCONTROL: &str = "/apis/flowcontrol.apiserver.k8s.io/v1beta3";

/// A server whose levels share 4 seats: `global-default` (20 of 245 shares) and
/// `workload-high` (40) get one each.
async fn small_server() -> Server {
    Server::start_with(ServerOptions {
        in_flight: InFlightLimits {
            read_only: 2,
            mutating: 2,
            ..Default::default()
        },
        ..Default::default()
    })
    .await
}

/// Lets `users` read and write pods in `default` (as `edit` does; the test server runs no
/// controller to aggregate `edit`'s rules).
async fn edit_in_default(s: &Server, users: &[&str]) {
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            Some(json!({
                "metadata": {"name": "pod-editor"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}],
            })),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let subjects: Vec<Value> = users
        .iter()
        .map(|u| json!({"kind": "User", "name": u, "apiGroup": "rbac.authorization.k8s.io"}))
        .collect();
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            Some(json!({
                "metadata": {"name": "editors"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-editor"},
                "subjects": subjects,
            })),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    // A consistent list: the cache (which authorization and flow control read) holds the write.
    let (code, _) = s.call(Method::GET, "/api/v1/namespaces", None).await;
    assert_eq!(code, StatusCode::OK);
}

/// A request over the whole chain as `user` (the admin impersonating it: flow control sees the
/// impersonated user, as upstream's does).
fn as_user(user: &str, method: Method, uri: &str, body: Body) -> http::Request<Body> {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("impersonate-user", user)
        .body(body)
        .unwrap()
}

/// The rest of a slow request's body, held back until [`Rest::send`].
struct Rest {
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    tail: Bytes,
}

impl Rest {
    /// Sends the rest of the body and ends it.
    fn send(self) {
        let _ = self.tx.try_send(Ok(self.tail));
    }
}

/// A pod creation whose body stops after its first bytes until its [`Rest`] is sent (a slow
/// client).
fn slow_create(user: &str, name: &str) -> (http::Request<Body>, Rest) {
    let full = pod(name).to_string();
    let (head, tail) = full.split_at(10);
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    tx.try_send(Ok(Bytes::from(head.to_string()))).unwrap();
    let req = as_user(
        user,
        Method::POST,
        "/api/v1/namespaces/default/pods",
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx)),
    );
    (
        req,
        Rest {
            tx,
            tail: Bytes::from(tail.to_string()),
        },
    )
}

/// Sends `req`; its status, headers and body.
async fn send(router: &Router, req: http::Request<Body>) -> (StatusCode, http::HeaderMap, Bytes) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (parts.status, parts.headers, bytes)
}

/// The value of the metric line `name{labels...}` (labels in any order), 0 when absent.
async fn metric(s: &Server, name: &str, labels: &[(&str, &str)]) -> f64 {
    let (_, text) = common::call_raw(&s.router, Method::GET, "/metrics", None).await;
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Waits until the metric reads `want`.
async fn until_metric(s: &Server, name: &str, labels: &[(&str, &str)], want: f64) {
    tokio::time::timeout(DEADLINE, async {
        loop {
            if metric(s, name, labels).await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{name}{labels:?} never reached {want}"));
}

#[tokio::test]
async fn one_users_slow_bodies_leave_admins_and_controllers_served() {
    let s = small_server().await;
    edit_in_default(&s, &["alice"]).await;
    let router = s.admin_router();
    // Alice sends more slow bodies than her level has seats: one runs, the rest queue.
    let mut rests = Vec::new();
    let mut slow = Vec::new();
    for i in 0..5 {
        let (req, rest) = slow_create("alice", &format!("slow-{i}"));
        rests.push(rest);
        let router = router.clone();
        slow.push(tokio::spawn(async move { send(&router, req).await.0 }));
    }
    let level = [("priority_level", "global-default")];
    until_metric(
        &s,
        "apiserver_flowcontrol_current_executing_requests",
        &level,
        1.0,
    )
    .await;
    until_metric(
        &s,
        "apiserver_flowcontrol_current_inqueue_requests",
        &level,
        4.0,
    )
    .await;

    // The administrator (system:masters: exempt) is served at once, writes and reads.
    let (code, headers, body) = tokio::time::timeout(
        DEADLINE,
        send(
            &router,
            http::Request::post("/api/v1/namespaces/default/pods")
                .header("content-type", "application/json")
                .body(Body::from(pod("admins").to_string()))
                .unwrap(),
        ),
    )
    .await
    .expect("the administrator's write is served while alice fills her level");
    assert_eq!(
        code,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    // Upstream's headers name the exempt FlowSchema and level by UID.
    let (_, exempt) = s
        .call(
            Method::GET,
            &format!("{FLOWCONTROL}/flowschemas/exempt"),
            None,
        )
        .await;
    assert_eq!(
        headers["x-kubernetes-pf-flowschema-uid"].to_str().unwrap(),
        exempt["metadata"]["uid"].as_str().unwrap()
    );
    assert!(headers.contains_key("x-kubernetes-pf-prioritylevel-uid"));

    // A controller (the ReplicaSet controller's ServiceAccount, at `workload-high`) is served.
    let controller = s.server.in_process_router_as(UserInfo::new(
        "system:serviceaccount:kube-system:replicaset-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    ));
    let (code, body) = tokio::time::timeout(
        DEADLINE,
        common::call(
            &controller,
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(pod("controllers")),
        ),
    )
    .await
    .expect("the controller's write is served while alice fills her level");
    assert_eq!(code, StatusCode::CREATED, "{body}");

    // Alice's requests were queued, not refused: each is served once her bodies arrive.
    for rest in rests {
        rest.send();
    }
    for task in slow {
        assert_eq!(task.await.unwrap(), StatusCode::CREATED);
    }
}

#[tokio::test]
async fn a_flood_from_one_user_does_not_starve_another_at_the_same_level() {
    let s = small_server().await;
    edit_in_default(&s, &["alice", "bob"]).await;
    let router = s.admin_router();
    let level = [("priority_level", "global-default")];
    // Alice's slow request takes the level's one seat.
    let (req, rest) = slow_create("alice", "holder");
    let holder = {
        let router = router.clone();
        tokio::spawn(async move { send(&router, req).await.0 })
    };
    until_metric(
        &s,
        "apiserver_flowcontrol_current_executing_requests",
        &level,
        1.0,
    )
    .await;
    // Then she floods the level; Bob asks once, after her.
    let done = Arc::new(AtomicUsize::new(0));
    let create = |user: &'static str, name: String| {
        let router = router.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let req = as_user(
                user,
                Method::POST,
                "/api/v1/namespaces/default/pods",
                Body::from(pod(&name).to_string()),
            );
            let code = send(&router, req).await.0;
            (code, done.fetch_add(1, Ordering::SeqCst))
        })
    };
    const FLOOD: usize = 20;
    let flood: Vec<_> = (0..FLOOD)
        .map(|i| create("alice", format!("flood-{i}")))
        .collect();
    until_metric(
        &s,
        "apiserver_flowcontrol_current_inqueue_requests",
        &level,
        FLOOD as f64,
    )
    .await;
    let bob = create("bob", "bobs".into());
    until_metric(
        &s,
        "apiserver_flowcontrol_current_inqueue_requests",
        &level,
        FLOOD as f64 + 1.0,
    )
    .await;

    rest.send();
    assert_eq!(holder.await.unwrap(), StatusCode::CREATED);
    let (code, bobs_turn) = tokio::time::timeout(DEADLINE, bob).await.unwrap().unwrap();
    assert_eq!(code, StatusCode::CREATED);
    // One seat serves one request at a time: Bob's queue is served in turn with each of the
    // queues Alice's flow was dealt (a hand of 6), not after her 20 requests.
    assert!(
        bobs_turn <= 8,
        "bob was served {}th of {}",
        bobs_turn + 1,
        FLOOD + 1
    );
    for task in flood {
        assert_eq!(task.await.unwrap().0, StatusCode::CREATED);
    }
}

#[tokio::test]
async fn a_full_queue_answers_429_with_retry_after_and_is_counted() {
    let s = small_server().await;
    edit_in_default(&s, &["carol"]).await;
    // Carol's own level: one queue of one.
    let (code, level) = s
        .call(
            Method::POST,
            &format!("{FLOWCONTROL}/prioritylevelconfigurations"),
            Some(json!({
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3",
                "kind": "PriorityLevelConfiguration",
                "metadata": {"name": "tiny"},
                "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                    "limitResponse": {"type": "Queue", "queuing": {
                        "queues": 1, "handSize": 1, "queueLengthLimit": 1}}}},
            })),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{level}");
    let (code, schema) = s
        .call(
            Method::POST,
            &format!("{FLOWCONTROL}/flowschemas"),
            Some(json!({
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3",
                "kind": "FlowSchema",
                "metadata": {"name": "tiny"},
                "spec": {
                    "priorityLevelConfiguration": {"name": "tiny"},
                    "matchingPrecedence": 500,
                    "distinguisherMethod": {"type": "ByUser"},
                    "rules": [{
                        "subjects": [{"kind": "User", "user": {"name": "carol"}}],
                        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                            "namespaces": ["*"], "clusterScope": true}],
                    }],
                },
            })),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{schema}");
    let (code, _) = s.call(Method::GET, "/api/v1/namespaces", None).await;
    assert_eq!(code, StatusCode::OK);
    let router = s.admin_router();
    let (code, headers, body) = send(
        &router,
        as_user(
            "carol",
            Method::GET,
            "/api/v1/namespaces/default/pods",
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        headers["x-kubernetes-pf-flowschema-uid"].to_str().unwrap(),
        schema["metadata"]["uid"].as_str().unwrap(),
        "carol's requests match her FlowSchema"
    );
    assert_eq!(
        headers["x-kubernetes-pf-prioritylevel-uid"]
            .to_str()
            .unwrap(),
        level["metadata"]["uid"].as_str().unwrap()
    );

    let tiny = [("priority_level", "tiny"), ("flow_schema", "tiny")];
    let (req, rest) = slow_create("carol", "running");
    let running = {
        let router = router.clone();
        tokio::spawn(async move { send(&router, req).await.0 })
    };
    until_metric(
        &s,
        "apiserver_flowcontrol_current_executing_requests",
        &tiny,
        1.0,
    )
    .await;
    let queued = {
        let router = router.clone();
        tokio::spawn(async move {
            let req = as_user(
                "carol",
                Method::POST,
                "/api/v1/namespaces/default/pods",
                Body::from(pod("queued").to_string()),
            );
            send(&router, req).await.0
        })
    };
    until_metric(
        &s,
        "apiserver_flowcontrol_current_inqueue_requests",
        &tiny,
        1.0,
    )
    .await;

    let (code, headers, body) = tokio::time::timeout(
        DEADLINE,
        send(
            &router,
            as_user(
                "carol",
                Method::POST,
                "/api/v1/namespaces/default/pods",
                Body::from(pod("refused").to_string()),
            ),
        ),
    )
    .await
    .expect("a request to a full queue is answered at once");
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(body, "Too many requests, please try again later.\n");
    assert_eq!(
        headers["x-kubernetes-pf-prioritylevel-uid"]
            .to_str()
            .unwrap(),
        level["metadata"]["uid"].as_str().unwrap()
    );
    let refused = [
        ("priority_level", "tiny"),
        ("flow_schema", "tiny"),
        ("reason", "queue-full"),
    ];
    assert_eq!(
        metric(
            &s,
            "apiserver_flowcontrol_rejected_requests_total",
            &refused
        )
        .await,
        1.0
    );

    rest.send();
    assert_eq!(running.await.unwrap(), StatusCode::CREATED);
    assert_eq!(queued.await.unwrap(), StatusCode::CREATED);
    assert!(metric(&s, "apiserver_flowcontrol_dispatched_requests_total", &tiny).await >= 3.0);
    assert!(
        metric(
            &s,
            "apiserver_flowcontrol_nominal_limit_seats",
            &[("priority_level", "tiny")]
        )
        .await
            >= 1.0
    );
}

#[tokio::test]
async fn the_default_objects_are_created_and_v1beta2_names_the_shares_as_it_did() {
    let s = Server::start().await;
    let (code, list) = s
        .call(Method::GET, &format!("{FLOWCONTROL}/flowschemas"), None)
        .await;
    assert_eq!(code, StatusCode::OK);
    let mut names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "catch-all",
            "endpoint-controller",
            "exempt",
            "global-default",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "probes",
            "service-accounts",
            "system-leader-election",
            "system-node-high",
            "system-nodes",
            "workload-leader-election",
        ]
    );
    let (code, pl) = s
        .call(
            Method::GET,
            "/apis/flowcontrol.apiserver.k8s.io/v1beta2/prioritylevelconfigurations/workload-low",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(pl["spec"]["limited"]["assuredConcurrencyShares"], 100);
    assert_eq!(
        pl["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
        "true"
    );
}

/// `kubectl get flowschemas` and `kubectl get prioritylevelconfigurations` against the server
/// over TLS: upstream's columns, the default objects.
#[tokio::test]
async fn kubectl_prints_the_default_flowschemas_and_priority_levels() {
    let dir = tempfile::tempdir().unwrap();
    let creds = apiserver::tls::Credentials::load_or_create(dir.path()).unwrap();
    let s = Server::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(apiserver::serve_tls_with(
        listener,
        s.server.router(),
        creds.server_config().unwrap(),
        apiserver::ConnectionLimits::default(),
        std::future::pending(),
    ));
    let ca = dir.path().join("kubectl-ca.crt");
    std::fs::write(&ca, &creds.ca_pem).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://{addr}\n    certificate-authority: {}\n    tls-server-name: localhost\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
            ca.display(),
            common::ADMIN_TOKEN
        ),
    )
    .unwrap();
    let kubectl = |args: &'static [&'static str]| {
        let kubeconfig = kubeconfig.clone();
        async move {
            let out = tokio::time::timeout(
                DEADLINE,
                tokio::process::Command::new("/usr/bin/kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(args)
                    .output(),
            )
            .await
            .expect("kubectl finishes")
            .unwrap();
            assert!(
                out.status.success(),
                "kubectl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        }
    };
    // The server writes each FlowSchema's Dangling condition once it has read them.
    tokio::time::timeout(DEADLINE, async {
        loop {
            let (_, list) = s
                .call(Method::GET, &format!("{FLOWCONTROL}/flowschemas"), None)
                .await;
            let items = list["items"].as_array().cloned().unwrap_or_default();
            if items.len() == 13
                && items
                    .iter()
                    .all(|fs| fs["status"]["conditions"][0]["status"] == "False")
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every default FlowSchema's level is found");
    let fs = kubectl(&["get", "flowschemas"]).await;
    let header: Vec<&str> = fs.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ]
    );
    let row = |out: &str, name: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|cells| cells.first().map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no row {name} in\n{out}"))
    };
    assert_eq!(row(&fs, "exempt")[1..4], ["exempt", "1", "<none>"]);
    assert_eq!(row(&fs, "exempt").last().unwrap(), "False", "MissingPL");
    assert_eq!(
        row(&fs, "kube-system-service-accounts")[1..4],
        ["workload-high", "900", "ByNamespace"]
    );
    assert_eq!(
        row(&fs, "global-default")[1..4],
        ["global-default", "9900", "ByUser"]
    );
    assert_eq!(fs.lines().count(), 1 + 13, "{fs}");

    let pl = kubectl(&["get", "prioritylevelconfigurations"]).await;
    let header: Vec<&str> = pl.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ]
    );
    assert_eq!(
        row(&pl, "exempt")[1..6],
        ["Exempt", "<none>", "<none>", "<none>", "<none>"]
    );
    assert_eq!(
        row(&pl, "catch-all")[1..6],
        ["Limited", "5", "<none>", "<none>", "<none>"]
    );
    assert_eq!(
        row(&pl, "workload-high")[1..6],
        ["Limited", "40", "128", "6", "50"]
    );
}
