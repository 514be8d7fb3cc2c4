//! ServiceAccount admission mounts the projected API-access volume into every container, as
//! upstream's plugin does, unless the pod or its ServiceAccount opts out (the conformance spec
//! "ServiceAccounts should allow opting out of API token automount").

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use apiserver::ServerOptions;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn pod(name: &str, account: &str, automount: Option<bool>) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"serviceAccountName": account,
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "c", "image": "busybox"},
                {"name": "own", "image": "busybox",
                 "volumeMounts": [{"name": "mine", "mountPath": PATH}]}],
            "volumes": [{"name": "mine", "emptyDir": {}}]}});
    if let Some(a) = automount {
        p["spec"]["automountServiceAccountToken"] = json!(a);
    }
    p
}

fn mounted(p: &Value, list: &str, i: usize) -> bool {
    p["spec"][list][i]["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| {
            m["mountPath"] == PATH && m["name"].as_str().unwrap().starts_with("kube-api-access-")
        })
}

#[tokio::test]
async fn pods_mount_their_service_account_token_unless_told_not_to() {
    let s = Server::start_with(ServerOptions {
        service_accounts: true,
        ..Default::default()
    })
    .await;
    for (name, automount) in [("default", None), ("quiet", Some(false))] {
        let mut sa =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
        if let Some(a) = automount {
            sa["automountServiceAccountToken"] = json!(a);
        }
        let (code, body) = s
            .call(
                Method::POST,
                "/api/v1/namespaces/default/serviceaccounts",
                Some(sa),
            )
            .await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let pods = "/api/v1/namespaces/default/pods";
    let (code, p) = s
        .call(Method::POST, pods, Some(pod("a", "default", None)))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{p}");
    assert!(
        mounted(&p, "initContainers", 0) && mounted(&p, "containers", 0),
        "{p}"
    );
    // A container with its own mount at the path keeps it.
    assert!(!mounted(&p, "containers", 1), "{p}");
    let volume = p["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str().unwrap().starts_with("kube-api-access-"))
        .unwrap();
    assert_eq!(
        volume["projected"]["sources"][0]["serviceAccountToken"],
        json!({"expirationSeconds": 3607, "path": "token"})
    );
    assert_eq!(
        volume["projected"]["sources"][1]["configMap"]["name"],
        "kube-root-ca.crt"
    );

    for (name, account, automount, want) in [
        ("b", "quiet", None, false),
        ("c", "quiet", Some(true), true),
        ("d", "default", Some(false), false),
    ] {
        let (code, p) = s
            .call(Method::POST, pods, Some(pod(name, account, automount)))
            .await;
        assert_eq!(code, StatusCode::CREATED, "{p}");
        assert_eq!(mounted(&p, "containers", 0), want, "{name}: {p}");
    }
}
