//! Authorization: upstream's bootstrap policy reconciled at start, RBAC and the Node authorizer
//! deciding over what the server holds, and the escalation checks on RBAC writes.

use crate::common::Server;
use apiserver::{ApiServer, ServerOptions};
use authz::{Attributes, Decision, UserInfo};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use store::Store;

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

fn resource(
    user: &UserInfo,
    verb: &str,
    group: &str,
    res: &str,
    ns: &str,
    name: &str,
) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        resource_request: true,
        api_group: group.into(),
        resource: res.into(),
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    }
}

async fn create_namespace(s: &Server, name: &str) {
    let (status, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces",
            Some(json!({"metadata": {"name": name}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

/// The server's decision on `attrs` once its watch cache holds every write made so far: a
/// consistent list (no `resourceVersion`) makes the cache catch up with the store, and RBAC and
/// the Node authorizer decide by the cache as it is then, with nothing else to wait for.
async fn decision_now(s: &Server, attrs: &Attributes) -> Decision {
    let (status, _) = s.call(Method::GET, "/api/v1/namespaces", None).await;
    assert_eq!(status, StatusCode::OK);
    s.server.authorize_for_test(attrs)
}

#[tokio::test]
async fn bootstrap_policy_is_created_with_upstreams_labels_and_annotations() {
    let s = Server::start().await;
    let (status, admin) = s
        .call(
            Method::GET,
            &format!("{RBAC}/clusterroles/cluster-admin"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        admin["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
    assert_eq!(
        admin["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "true"
    );
    assert_eq!(
        admin["rules"],
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
               {"nonResourceURLs": ["*"], "verbs": ["*"]}])
    );
    let (status, binding) = s
        .call(
            Method::GET,
            &format!("{RBAC}/clusterrolebindings/system:basic-user"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        binding["subjects"],
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}])
    );
    let (status, _) = s
        .call(
            Method::GET,
            &format!(
                "{RBAC}/namespaces/kube-system/roles/extension-apiserver-authentication-reader"
            ),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Through the bootstrap bindings: anyone authenticated may discover, the scheduler bind.
    let anyone = UserInfo::new("alice", &["system:authenticated"]);
    let api = Attributes {
        user: anyone.clone(),
        verb: "get".into(),
        path: "/apis".into(),
        ..Default::default()
    };
    assert!(s.server.authorize_for_test(&api).allowed());
    let pods = resource(&anyone, "list", "", "pods", "default", "");
    assert_eq!(
        s.server.authorize_for_test(&pods),
        Decision::NoOpinion(String::new())
    );
}

/// The server is handed out with the bootstrap policy in its cache: the system components'
/// first requests are allowed, not refused until the cache catches up (before, the controller
/// manager's first lists could get 403 and its informers backed off for up to a second).
#[tokio::test]
async fn system_components_are_authorized_from_the_first_request() {
    let s = Server::start().await;
    let authenticated = [authz::AUTHENTICATED_GROUP];
    let kcm = UserInfo::new("system:kube-controller-manager", &authenticated);
    let scheduler = UserInfo::new("system:kube-scheduler", &authenticated);
    for attrs in [
        resource(&kcm, "list", "", "nodes", "", ""),
        resource(&kcm, "watch", "apps", "daemonsets", "", ""),
        resource(&kcm, "list", "apps", "controllerrevisions", "", ""),
        resource(&scheduler, "list", "", "persistentvolumeclaims", "", ""),
        resource(&scheduler, "watch", "storage.k8s.io", "csinodes", "", ""),
        resource(&scheduler, "create", "", "pods", "default", "p"),
    ] {
        let decision = s.server.authorize_for_test(&attrs);
        let expect_allowed = attrs.verb != "create";
        assert_eq!(
            decision.allowed(),
            expect_allowed,
            "{attrs:?}: {decision:?}"
        );
    }
}

#[tokio::test]
async fn reconciliation_restores_bootstrap_rules_unless_autoupdate_is_false() {
    let s = Server::start().await;
    let url = format!("{RBAC}/clusterroles/system:basic-user");
    let (_, mut role) = s.call(Method::GET, &url, None).await;
    let rules = role["rules"].clone();
    role["rules"] = json!([]);
    let (status, _) = s.call(Method::PUT, &url, Some(role.clone())).await;
    assert_eq!(status, StatusCode::OK);
    let protected_url = format!("{RBAC}/clusterroles/system:discovery");
    let (_, mut protected) = s.call(Method::GET, &protected_url, None).await;
    protected["rules"] = json!([]);
    protected["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] =
        json!("false");
    let (status, _) = s.call(Method::PUT, &protected_url, Some(protected)).await;
    assert_eq!(status, StatusCode::OK);

    // A server starting over the same store reconciles.
    let again = ApiServer::start(s.store.clone() as Arc<dyn Store>, ServerOptions::default())
        .await
        .unwrap();
    let router = again.in_process_router();
    let (_, restored) = crate::common::call(&router, Method::GET, &url, None).await;
    // Upstream appends the missing rules as its coverage check breaks them down: one resource
    // and verb each.
    assert_ne!(restored["rules"], rules);
    assert_eq!(
        restored["rules"],
        json!([
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
        ])
    );
    let (_, left) = crate::common::call(&router, Method::GET, &protected_url, None).await;
    assert_eq!(left["rules"], json!([]));
}

#[tokio::test]
async fn rbac_follows_bindings_and_reports_missing_roles() {
    let s = Server::start().await;
    create_namespace(&s, "team").await;
    let bob = UserInfo::new("bob", &["system:authenticated"]);
    let get_pods = resource(&bob, "get", "", "pods", "team", "");
    assert!(!s.server.authorize_for_test(&get_pods).allowed());

    let (status, _) = s
        .call(
            Method::POST,
            &format!("{RBAC}/namespaces/team/rolebindings"),
            Some(json!({
                "metadata": {"name": "bob-view", "namespace": "team"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let missing = decision_now(&s, &get_pods).await;
    assert_eq!(
        missing,
        Decision::NoOpinion(
            r#"RBAC: clusterrole.rbac.authorization.k8s.io "pod-reader" not found"#.into()
        )
    );

    let (status, _) = s
        .call(
            Method::POST,
            &format!("{RBAC}/clusterroles"),
            Some(json!({
                "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        decision_now(&s, &get_pods).await,
        Decision::Allow(
            r#"RBAC: allowed by RoleBinding "bob-view/team" of ClusterRole "pod-reader" to User "bob""#
                .into()
        )
    );
    // Only in the binding's namespace.
    let elsewhere = resource(&bob, "get", "", "pods", "other", "");
    assert!(!s.server.authorize_for_test(&elsewhere).allowed());

    let rules = s.server.rules_for_test(&bob, "team");
    assert!(
        rules["resourceRules"]
            .as_array()
            .unwrap()
            .contains(&json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]})),
        "{rules}"
    );
    assert_eq!(rules["incomplete"], false);
    assert_eq!(rules["evaluationError"], "");
}

#[tokio::test]
async fn the_node_authorizer_lets_a_node_read_only_what_its_pods_use() {
    let s = Server::start().await;
    for name in ["used", "unused"] {
        let (status, _) = s
            .call(
                Method::POST,
                "/api/v1/namespaces/default/secrets",
                Some(json!({"metadata": {"name": name}})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, _) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/pods",
            Some(json!({
                "metadata": {"name": "p"},
                "spec": {
                    "nodeName": "node-1",
                    "containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [{"name": "s", "secret": {"secretName": "used"}}]
                }
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let node = UserInfo::new(
        "system:node:node-1",
        &["system:nodes", "system:authenticated"],
    );
    let used = resource(&node, "get", "", "secrets", "default", "used");
    assert!(decision_now(&s, &used).await.allowed());
    let unused = resource(&node, "get", "", "secrets", "default", "unused");
    assert_eq!(
        s.server.authorize_for_test(&unused),
        Decision::NoOpinion("no relationship found between node 'node-1' and this object".into())
    );
    let other = UserInfo::new("system:node:node-2", &["system:nodes"]);
    assert!(
        !s.server
            .authorize_for_test(&resource(&other, "get", "", "secrets", "default", "used"))
            .allowed()
    );
    // Beyond its graph, a node holds upstream's NodeRules.
    assert!(
        s.server
            .authorize_for_test(&resource(&node, "list", "", "pods", "", ""))
            .allowed()
    );
    let rules = s.server.rules_for_test(&node, "default");
    assert_eq!(rules["incomplete"], true);
    assert_eq!(
        rules["evaluationError"],
        "node authorizer does not support user rule resolution"
    );
}

#[tokio::test]
async fn writes_of_rbac_objects_cannot_grant_more_than_the_writer_holds() {
    let s = Server::start().await;
    create_namespace(&s, "team").await;
    let alice = UserInfo::new("alice", &["devs", "system:authenticated"]);
    // She may create ClusterRoles (the authorizer lets the request through); what she may put
    // in them is the escalation check's to say.
    let (status, _) = s
        .call(
            Method::POST,
            &format!("{RBAC}/clusterroles"),
            Some(json!({
                "metadata": {"name": "role-writer"},
                "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create"]}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = s
        .call(
            Method::POST,
            &format!("{RBAC}/clusterrolebindings"),
            Some(json!({
                "metadata": {"name": "alice-role-writer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "role-writer"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        decision_now(
            &s,
            &resource(
                &alice,
                "create",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "",
            ),
        )
        .await
        .allowed()
    );
    let alice_router = s.server.in_process_router_as(alice.clone());
    let as_alice = |method: Method, uri: String, body: Value| {
        let router = alice_router.clone();
        async move { crate::common::call(&router, method, &uri, Some(body)).await }
    };
    let role = json!({
        "metadata": {"name": "pods-get"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    });
    let (status, body) = as_alice(Method::POST, format!("{RBAC}/clusterroles"), role.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "clusterroles.rbac.authorization.k8s.io \"pods-get\" is forbidden: user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\"]}"
    );
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(body["details"]["kind"], "clusterroles");

    // Given a Role over pods (and creating roles and bindings) in `team`, she may make a Role
    // within it there and bind what she holds, but not bind cluster-admin.
    let (status, _) = s
        .call(
            Method::POST,
            &format!("{RBAC}/namespaces/team/roles"),
            Some(json!({
                "metadata": {"name": "pod-admin"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]},
                          {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create"]}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = s
        .call(
            Method::POST,
            &format!("{RBAC}/namespaces/team/rolebindings"),
            Some(json!({
                "metadata": {"name": "alice-pods"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        decision_now(&s, &resource(&alice, "delete", "", "pods", "team", "x"),)
            .await
            .allowed()
    );

    let namespaced = json!({
        "metadata": {"name": "pods-get", "namespace": "team"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    });
    let (status, body) = as_alice(
        Method::POST,
        format!("{RBAC}/namespaces/team/roles"),
        namespaced,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let binding = |name: &str, kind: &str, role: &str| {
        json!({
            "metadata": {"name": name, "namespace": "team"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]
        })
    };
    let (status, body) = as_alice(
        Method::POST,
        format!("{RBAC}/namespaces/team/rolebindings"),
        binding("bob-pods", "Role", "pods-get"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = as_alice(
        Method::POST,
        format!("{RBAC}/namespaces/team/rolebindings"),
        binding("bob-admin", "ClusterRole", "cluster-admin"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "rolebindings.rbac.authorization.k8s.io \"bob-admin\" is forbidden: user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"
        ),
        "{message}"
    );
    assert!(
        message.contains("{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"),
        "{message}"
    );
    // Binding a role that does not exist is upstream's NotFound of the role.
    let (status, body) = as_alice(
        Method::POST,
        format!("{RBAC}/namespaces/team/rolebindings"),
        binding("bob-nothing", "Role", "nothing"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["message"],
        "roles.rbac.authorization.k8s.io \"nothing\" not found"
    );
}

/// Upstream's `authorization_attempts_total` counts each decision by result: a request RBAC has
/// no rule for is `no-opinion` (and refused), one it allows is `allowed`.
#[tokio::test]
async fn authorization_attempts_are_counted_by_result() {
    let s = Server::start().await;
    let user = UserInfo::new("alice", &[authz::AUTHENTICATED_GROUP]);
    let discovery = Attributes {
        user: user.clone(),
        verb: "get".into(),
        path: "/api".into(),
        ..Default::default()
    };
    // The server starts with the bootstrap policy in force.
    assert!(s.server.authorize_for_test(&discovery).allowed());
    let alice = s.server.in_process_router_as(user);
    let (status, _) = crate::common::call(
        &alice,
        Method::GET,
        "/api/v1/namespaces/default/secrets",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Any authenticated user may read discovery (system:discovery).
    let (status, _) = crate::common::call(&alice, Method::GET, "/api", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = crate::common::call_raw(&s.router, Method::GET, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8_lossy(&body);
    let mut counted: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("authorization_attempts_total{"))
        .collect();
    counted.sort();
    assert_eq!(
        counted,
        [
            r#"authorization_attempts_total{result="allowed"} 1"#,
            r#"authorization_attempts_total{result="no-opinion"} 1"#,
        ],
        "{text}"
    );
}

/// Impersonation headers answered as kube-apiserver v1.28.4 answers them (checked against it:
/// `curl -H "Impersonate-Group: devs"` with an admin token, and `Impersonate-User: jane`).
#[tokio::test]
async fn impersonation_is_answered_as_upstream() {
    let s = Server::start().await;
    let router = s.admin_router();
    let get = |headers: &[(&str, &str)]| {
        let mut req = axum::http::Request::builder().uri("/api/v1/namespaces/default/pods");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let router = router.clone();
        let req = req.body(axum::body::Body::empty()).unwrap();
        async move {
            use tower::ServiceExt;
            let resp = router.oneshot(req).await.unwrap();
            let code = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            (code, String::from_utf8_lossy(&body).into_owned())
        }
    };
    // Groups without a user: upstream's plain-text internal error.
    let (code, body) = get(&[("impersonate-group", "devs")]).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        "Internal Server Error: \"/api/v1/namespaces/default/pods\": requested [{Group  devs    }] without impersonating a user\n"
    );
    // A user the admin may impersonate, who holds nothing.
    let (code, body) = get(&[("impersonate-user", "jane")]).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["message"],
        "pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
}

/// `system:serviceaccount:NS:NAME` is a ServiceAccount only when it splits as upstream's
/// `SplitUsername` splits it; `system:serviceaccount:a:adm:x` is a user, so "impersonate
/// serviceaccounts in a" does not let anyone act as it.
#[tokio::test]
async fn impersonating_a_malformed_service_account_name_needs_impersonate_users() {
    let s = Server::start().await;
    create_namespace(&s, "a").await;
    for (path, body) in [
        (
            format!("{RBAC}/namespaces/a/roles"),
            json!({"metadata": {"name": "sa-impersonator"},
                   "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}]}),
        ),
        (
            format!("{RBAC}/namespaces/a/rolebindings"),
            json!({"metadata": {"name": "imp"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sa-impersonator"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "imp"}]}),
        ),
    ] {
        let (status, created) = s.call(Method::POST, &path, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
    }
    // A consistent list brings the watch cache, which RBAC decides by, up to the binding.
    let (status, _) = s.call(Method::GET, "/api/v1/namespaces", None).await;
    assert_eq!(status, StatusCode::OK);
    let imp = s
        .server
        .in_process_router_as(UserInfo::new("imp", &["system:authenticated"]));
    let get = |user: &str| {
        let req = axum::http::Request::builder()
            .uri("/api/v1/namespaces/a/pods")
            .header("impersonate-user", user)
            .body(axum::body::Body::empty())
            .unwrap();
        let imp = imp.clone();
        async move {
            use tower::ServiceExt;
            let resp = imp.oneshot(req).await.unwrap();
            let code = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            (code, serde_json::from_slice::<Value>(&body).unwrap())
        }
    };
    // The ServiceAccount is impersonated; it may not list pods itself.
    let (code, body) = get("system:serviceaccount:a:adm").await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "pods is forbidden: User \"system:serviceaccount:a:adm\" cannot list resource \"pods\" in API group \"\" in the namespace \"a\""
    );
    let (code, body) = get("system:serviceaccount:a:adm:x").await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "users \"system:serviceaccount:a:adm:x\" is forbidden: User \"imp\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
}

/// A rule must say what it grants: upstream's `ValidatePolicyRule` refuses one without verbs.
#[tokio::test]
async fn a_role_rule_without_verbs_is_refused() {
    let s = Server::start().await;
    create_namespace(&s, "a").await;
    let (status, body) = s
        .call(
            Method::POST,
            &format!("{RBAC}/namespaces/a/roles"),
            Some(json!({"metadata": {"name": "idle"},
                        "rules": [{"apiGroups": [""], "resources": ["pods"]}]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        "Role.rbac.authorization.k8s.io \"idle\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
    );
}
