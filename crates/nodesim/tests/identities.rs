//! Who the simulator acts as: run over the in-process API server with a client per user, every
//! request recorded on the server's side with the user it was made as, then checked: each node
//! writes only its own Node, Lease, pods and events as `system:node:NAME`, and the shared watches
//! read as `rollwright:node-simulator` and write nothing.
//!
//! Until the RBAC authorizer is merged the server allows only `system:masters`, so the clients
//! here add that group to each user; the users' names, which this test checks, are unchanged.

#![allow(clippy::unwrap_used)] // tests may unwrap

use axum::{body::Body, extract::Request, middleware::Next};
use embedded::{Embedded, wait_until};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use nodesim::{
    Identities, NodeSim, Profile,
    bench::bind,
    distribution::Distribution,
    identity::{READER, node_user, reader_user},
};
use serde_json::{Value, json};
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

const T: Duration = Duration::from_secs(20);

/// One request as the server received it.
#[derive(Clone, Debug)]
struct Seen {
    user: String,
    method: String,
    path: String,
    body: Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A client acting as `user` whose every request is recorded before the server handles it.
fn recorded_client(e: &Embedded, log: &Log, mut user: authz::UserInfo) -> Client {
    let name = user.username.clone();
    // Only until RBAC lands (see the module's doc): the name is what this test checks.
    user.groups.push(authz::MASTERS_GROUP.into());
    let log = log.clone();
    let router = e
        .server
        .in_process_router_as(user)
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let (log, user) = (log.clone(), name.clone());
                async move {
                    let (parts, body) = req.into_parts();
                    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                    log.lock().unwrap().push(Seen {
                        user,
                        method: parts.method.to_string(),
                        path: parts.uri.path().to_string(),
                        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                    });
                    next.run(Request::from_parts(parts, Body::from(bytes)))
                        .await
                }
            },
        ));
    Client::new(router, "default")
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What `req`, made as node `node`, writes: `Ok` when it is that node's own object.
fn owned_by(req: &Seen, node: &str) -> Result<(), String> {
    let segments: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    let ok = match (req.method.as_str(), segments.as_slice()) {
        // Its own Node: registered, adopted, its status posted.
        ("POST", ["api", "v1", "nodes"]) => req.body["metadata"]["name"] == node,
        ("PATCH", ["api", "v1", "nodes", name] | ["api", "v1", "nodes", name, "status"]) => {
            *name == node
        }
        // Its own Lease.
        (
            "POST",
            [
                "apis",
                "coordination.k8s.io",
                "v1",
                "namespaces",
                "kube-node-lease",
                "leases",
            ],
        ) => req.body["metadata"]["name"] == node,
        (
            "PATCH",
            [
                "apis",
                "coordination.k8s.io",
                "v1",
                "namespaces",
                "kube-node-lease",
                "leases",
                name,
            ],
        ) => *name == node,
        // Only pod `bound` of this test is on a node (`node-1`).
        (
            "PATCH",
            [
                "api",
                "v1",
                "namespaces",
                "default",
                "pods",
                "bound",
                "status",
            ],
        )
        | ("DELETE", ["api", "v1", "namespaces", "default", "pods", "bound"]) => node == "node-1",
        // Events it reports as their source.
        ("POST", ["api", "v1", "namespaces", _, "events"]) => {
            req.body["source"]["host"] == node && req.body["reportingInstance"] == node
        }
        // Counting up an event it recorded before: the event's name starts with its object's.
        ("PATCH", ["api", "v1", "namespaces", _, "events", name]) => {
            match name.split_once('.').map(|(object, _)| object) {
                Some("bound") => node == "node-1",
                object => object == Some(node),
            }
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{} {} {}", req.method, req.path, req.body))
    }
}

#[tokio::test]
async fn each_node_writes_as_itself_and_the_shared_watches_read_as_the_reader() {
    let e = Embedded::memory().await.unwrap();
    let admin = e.client();
    // node-0 exists before the simulator starts: it adopts it (as its own kubelet).
    let nodes: Api<Node> = Api::all(admin.clone());
    let existing: Node = serde_json::from_value(json!({"metadata": {"name": "node-0"}})).unwrap();
    nodes
        .create(&PostParams::default(), &existing)
        .await
        .unwrap();

    let log: Log = Arc::default();
    let identities = {
        let (e, l) = (e.clone(), log.clone());
        Identities::new(
            recorded_client(&e, &log, reader_user()),
            Arc::new(move |name: &str| recorded_client(&e, &l, node_user(name))),
        )
    };
    let cfg = NodeSim {
        nodes: 2,
        heartbeat_interval: Duration::from_millis(50),
        start_delay: Distribution::Fixed(Duration::from_millis(10)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(10)),
        grace_scale: 0.01,
        ..NodeSim::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sim = tokio::spawn(nodesim::run_as(
        identities,
        cfg,
        Profile::default(),
        async move {
            let _ = stopped.await;
        },
    ));

    for name in ["node-0", "node-1"] {
        wait_until(&nodes, &format!("{name} Ready"), T, |n| {
            n.name_any() == name && ready(n)
        })
        .await
        .unwrap();
    }
    let pods: Api<Pod> = Api::default_namespaced(admin.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "bound"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    bind(&admin, "default", "bound", "node-1").await.unwrap();
    wait_until(&pods, "bound Running", T, |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await
    .unwrap();
    let uid = pods.get("bound").await.unwrap().uid();
    pods.delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(
        T,
        await_condition(pods.clone(), "bound", conditions::is_deleted(&uid.unwrap())),
    )
    .await
    .unwrap()
    .unwrap();
    stop.send(()).unwrap();
    sim.await.unwrap().unwrap();

    let log = log.lock().unwrap().clone();
    let mut wrong = Vec::new();
    for req in &log {
        let verdict = match req.user.strip_prefix("system:node:") {
            Some(node) => owned_by(req, node),
            None if req.user == READER => {
                let watched = [
                    "/api/v1/nodes",
                    "/api/v1/pods",
                    "/api/v1/persistentvolumeclaims",
                    "/api/v1/secrets",
                    "/api/v1/configmaps",
                ];
                if req.method == "GET" && watched.contains(&req.path.as_str()) {
                    Ok(())
                } else {
                    Err(format!("{} {}", req.method, req.path))
                }
            }
            None => Err(format!("unexpected user: {} {}", req.method, req.path)),
        };
        if let Err(what) = verdict {
            wrong.push(format!("{}: {what}", req.user));
        }
    }
    assert!(wrong.is_empty(), "requests by the wrong user: {wrong:#?}");

    // And each write was made at all (by its owner, as checked above).
    let made = |user: &str, method: &str, path: &str| {
        log.iter()
            .any(|r| r.user == user && r.method == method && r.path == path)
    };
    let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    for node in ["node-0", "node-1"] {
        let user = format!("system:node:{node}");
        assert!(made(&user, "POST", "/api/v1/nodes"), "{node} registered");
        assert!(made(
            &user,
            "PATCH",
            &format!("/api/v1/nodes/{node}/status")
        ));
        assert!(made(&user, "POST", lease), "{node} created its Lease");
    }
    assert!(
        made("system:node:node-0", "PATCH", "/api/v1/nodes/node-0"),
        "node-0 adopted its existing Node"
    );
    let pod = "/api/v1/namespaces/default/pods/bound";
    assert!(made(
        "system:node:node-1",
        "PATCH",
        &format!("{pod}/status")
    ));
    assert!(made("system:node:node-1", "DELETE", pod));
    assert!(
        log.iter().any(|r| r.user == "system:node:node-1"
            && r.method == "POST"
            && r.body["involvedObject"]["name"] == "bound"),
        "node-1 recorded the pod's events"
    );
    for path in [
        "/api/v1/nodes",
        "/api/v1/pods",
        "/api/v1/persistentvolumeclaims",
        "/api/v1/secrets",
        "/api/v1/configmaps",
    ] {
        assert!(made(READER, "GET", path), "the reader watches {path}");
    }
}
