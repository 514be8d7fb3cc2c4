//! The endpoints, endpointslice and disruption controllers against an in-process API server,
//! with pods whose status the test writes by hand (no simulated kubelets): Endpoints come back
//! when deleted and orphans of this controller go, a Service of 250 pods gets slices of at most
//! 100, and the eviction subresource spends a budget the disruption controller computes.

use futures::StreamExt;
use k8s_openapi::api::{
    core::v1::{Endpoints, Pod, Service},
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api, Client,
    api::{DeleteParams, EvictParams, ListParams, PostParams},
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start() -> (embedded::Embedded, Client) {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["endpoint", "endpointslice", "disruption"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    tokio::spawn(controllers::run(&informers, &settings).unwrap());
    (server, client)
}

/// Creates a Running pod labelled `app` with IP `ip`, ready or not.
async fn running_pod(client: &Client, name: &str, app: &str, ip: &str, ready: bool) {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "x",
            "ports": [{"name": "http", "containerPort": 8080}]}]}}))
    .unwrap();
    let mut pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    pod.status = Some(
        serde_json::from_value(json!({"phase": "Running", "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                "lastTransitionTime": "2024-01-01T00:00:00Z"}]}))
        .unwrap(),
    );
    pods.replace_status(name, &PostParams::default(), &pod)
        .await
        .unwrap();
}

async fn service(client: &Client, name: &str, app: &str) {
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": "http"}]}}))
    .unwrap();
    Api::<Service>::default_namespaced(client.clone())
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

fn ready_ips(ep: &Endpoints) -> usize {
    ep.subsets
        .iter()
        .flatten()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_come_back_and_orphans_of_the_controller_go() {
    let (_server, client) = start().await;
    let eps: Api<Endpoints> = Api::default_namespaced(client.clone());
    // Left over from a stopped controller (its label), and one written by hand.
    for (name, labels) in [
        (
            "stale",
            json!({"endpoints.kubernetes.io/managed-by": "endpoint-controller"}),
        ),
        ("manual", json!({})),
    ] {
        let ep: Endpoints = serde_json::from_value(json!({"metadata": {"name": name,
            "labels": labels}, "subsets": [{"addresses": [{"ip": "192.0.2.1"}],
            "ports": [{"port": 1}]}]}))
        .unwrap();
        eps.create(&PostParams::default(), &ep).await.unwrap();
    }
    running_pod(&client, "a", "web", "10.244.0.2", true).await;
    service(&client, "web", "web").await;
    let first = embedded::wait_until(&eps, "web endpoints", TIMEOUT, |ep| {
        ep.metadata.name.as_deref() == Some("web") && ready_ips(ep) == 1
    })
    .await
    .unwrap();
    assert_eq!(
        first.subsets.unwrap()[0].ports.as_ref().unwrap()[0].port,
        8080
    );
    eps.delete("web", &DeleteParams::default()).await.unwrap();
    embedded::wait_until(&eps, "web endpoints again", TIMEOUT, |ep| {
        ep.metadata.name.as_deref() == Some("web")
            && ep.metadata.uid != first.metadata.uid
            && ready_ips(ep) == 1
    })
    .await
    .unwrap();
    // The orphan the controller wrote is gone; the hand-written one stays.
    let names: Vec<String> = eps
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert!(names.contains(&"manual".to_string()), "{names:?}");
    tokio::time::timeout(
        TIMEOUT,
        kube::runtime::wait::await_condition(eps, "stale", |e: Option<&Endpoints>| e.is_none()),
    )
    .await
    .expect("the stale Endpoints are deleted")
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pods_make_slices_of_at_most_100() {
    let (_server, client) = start().await;
    service(&client, "big", "big").await;
    for i in 0..250 {
        let ip = format!("10.244.{}.{}", i / 200, i % 200 + 2);
        running_pod(&client, &format!("big-{i}"), "big", &ip, i % 10 != 0).await;
    }
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let params = ListParams::default().labels("kubernetes.io/service-name=big");
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let list = slices.list(&params).await.unwrap();
        let total: usize = list.items.iter().map(|s| s.endpoints.len()).sum();
        if total == 250 {
            let mut sizes: Vec<usize> = list.items.iter().map(|s| s.endpoints.len()).collect();
            sizes.sort();
            assert!(sizes.iter().all(|n| *n <= 100), "{sizes:?}");
            // At least three; how the endpoints were packed depends on how the pods arrived (as
            // upstream, which fills slices as changes come and does not repack them).
            assert!(sizes.len() >= 3, "{sizes:?}");
            let ready = list
                .items
                .iter()
                .flat_map(|s| &s.endpoints)
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .count();
            assert_eq!(ready, 225);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "slices hold {total}"
        );
        // Wait for the next change of any slice of the Service.
        let rv = list.metadata.resource_version.unwrap_or_default();
        let watch = kube::api::WatchParams::default()
            .labels("kubernetes.io/service-name=big")
            .timeout(5);
        let mut events = slices.watch(&watch, &rv).await.unwrap().boxed();
        let _ = tokio::time::timeout(Duration::from_secs(6), events.next()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_spend_the_budget_the_controller_computes() {
    let (_server, client) = start().await;
    for (name, ip) in [
        ("a", "10.244.0.2"),
        ("b", "10.244.0.3"),
        ("c", "10.244.0.4"),
    ] {
        running_pod(&client, name, "db", ip, true).await;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "db"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}}))
    .unwrap();
    let budgets: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    budgets.create(&PostParams::default(), &pdb).await.unwrap();
    let status = |p: &PodDisruptionBudget| {
        let s = p.status.clone().unwrap_or_default();
        (s.current_healthy, s.desired_healthy, s.disruptions_allowed)
    };
    embedded::wait_until(&budgets, "db allows 1", TIMEOUT, |p| status(p) == (3, 2, 1))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.evict("a", &EvictParams::default()).await.unwrap();
    // The eviction spent the allowance and recorded the pod, a record the controller drops as
    // soon as it sees the pod terminating (it may already have).
    let spent = budgets.get_status("db").await.unwrap();
    let s = spent.status.unwrap();
    assert_eq!(s.disruptions_allowed, 0);
    let recorded = s
        .disrupted_pods
        .as_ref()
        .is_some_and(|m| m.contains_key("a"));
    assert!(recorded || s.current_healthy == 2, "{s:?}");
    // Once the controller has seen a go, b may not.
    embedded::wait_until(&budgets, "db recomputed", TIMEOUT, |p| {
        status(p) == (2, 2, 0)
            && p.status
                .as_ref()
                .is_some_and(|s| s.disrupted_pods.as_ref().is_none_or(|m| m.is_empty()))
    })
    .await
    .unwrap();
    let err = pods.evict("b", &EvictParams::default()).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 429);
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    // An unready pod may go while the budget is healthy without it, spending nothing.
    running_pod(&client, "d", "db", "10.244.0.5", false).await;
    embedded::wait_until(&budgets, "db sees d", TIMEOUT, |p| {
        p.status.as_ref().is_some_and(|s| s.expected_pods == 3)
    })
    .await
    .unwrap();
    pods.evict("d", &EvictParams::default()).await.unwrap();
    assert!(
        pods.get_opt("d").await.unwrap().is_none(),
        "d (on no node) is deleted at once"
    );
    assert_eq!(
        budgets
            .get_status("db")
            .await
            .unwrap()
            .status
            .unwrap()
            .disruptions_allowed,
        0
    );
}
