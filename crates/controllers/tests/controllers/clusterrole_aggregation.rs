//! The ClusterRole aggregation controller against an in-process API server: a ClusterRole with
//! an aggregation rule gains the rules of each ClusterRole its selector matches, and upstream's
//! bootstrap `admin`, `edit` and `view` fill from their `aggregate-to-*` roles.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::{Api, Client, api::PostParams, runtime::wait::await_condition};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["clusterrole-aggregation"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

fn rule(verbs: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

/// Waits until ClusterRole `name` satisfies `f`; returns it.
async fn wait_for(
    api: &Api<ClusterRole>,
    name: &str,
    f: impl Fn(&ClusterRole) -> bool,
) -> ClusterRole {
    tokio::time::timeout(
        TIMEOUT,
        await_condition(api.clone(), name, |r: Option<&ClusterRole>| {
            r.is_some_and(&f)
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("ClusterRole {name} never got there"))
    .unwrap()
    .unwrap()
}

#[tokio::test]
async fn an_aggregated_cluster_role_gains_the_rules_of_a_new_matching_role() {
    let (_server, client) = start().await;
    let api: Api<ClusterRole> = Api::all(client.clone());
    let create = |v: serde_json::Value| {
        let api = api.clone();
        async move {
            let role: ClusterRole = serde_json::from_value(v).unwrap();
            api.create(&PostParams::default(), &role).await.unwrap()
        }
    };
    create(json!({
        "metadata": {"name": "monitoring"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}]},
        "rules": []
    }))
    .await;
    create(json!({
        "metadata": {"name": "monitoring-pods", "labels": {"example.com/aggregate-to-monitoring": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    }))
    .await;
    let got = wait_for(&api, "monitoring", |r| {
        r.rules.as_ref().is_some_and(|r| !r.is_empty())
    })
    .await;
    assert_eq!(got.rules.unwrap(), vec![rule(&["get", "list"], &["pods"])]);

    // A second matching role adds its rules after the first's (roles in name order).
    create(json!({
        "metadata": {"name": "monitoring-endpoints", "labels": {"example.com/aggregate-to-monitoring": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["endpoints"], "verbs": ["watch"]}]
    }))
    .await;
    let got = wait_for(&api, "monitoring", |r| {
        r.rules.as_ref().is_some_and(|r| r.len() == 2)
    })
    .await;
    assert_eq!(
        got.rules.unwrap(),
        vec![
            rule(&["watch"], &["endpoints"]),
            rule(&["get", "list"], &["pods"])
        ]
    );
    // A role outside the selector adds nothing: once a later matching role is in, the
    // unrelated one's rule is still not.
    create(json!({
        "metadata": {"name": "unrelated", "labels": {"example.com/aggregate-to-monitoring": "false"}},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    }))
    .await;
    create(json!({
        "metadata": {"name": "monitoring-zz", "labels": {"example.com/aggregate-to-monitoring": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    }))
    .await;
    let got = wait_for(&api, "monitoring", |r| {
        r.rules.as_ref().is_some_and(|r| r.len() == 3)
    })
    .await;
    assert_eq!(got.rules.unwrap()[2], rule(&["get"], &["nodes"]));
    let managed = api.get("monitoring").await.unwrap();
    assert!(
        managed
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|m| m.manager.as_deref()
                == Some(controllers::clusterrole_aggregation::FIELD_MANAGER))
    );
}

#[tokio::test]
async fn bootstrap_admin_edit_and_view_are_filled() {
    let (_server, client) = start().await;
    let api: Api<ClusterRole> = Api::all(client);
    let grants = |r: &ClusterRole, verb: &str, resource: &str| {
        r.rules.iter().flatten().any(|rule| {
            rule.verbs.iter().any(|v| v == verb)
                && rule.resources.iter().flatten().any(|x| x == resource)
        })
    };
    let view = wait_for(&api, "view", |r| grants(r, "get", "pods")).await;
    assert!(!grants(&view, "get", "secrets"));
    // admin holds edit's rules once edit holds view's: aggregation reaches through.
    wait_for(&api, "admin", |r| {
        grants(r, "create", "rolebindings") && grants(r, "watch", "pods")
    })
    .await;
}
