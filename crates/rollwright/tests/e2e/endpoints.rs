//! Services have endpoints (issue 10), end to end with real kubectl against a whole cluster
//! (simulated nodes, scheduler, controllers): every tutorial manifest of `../shared/realworld/`
//! with a Service lists its workload's ready pods in `kubectl get endpoints` and `kubectl get
//! endpointslices`; a named `targetPort` resolves per pod; `publishNotReadyAddresses` lists
//! pods that are not ready; Endpoints written by hand are left alone. Every wait is a watch with
//! a deadline.

use crate::common;

use common::{Cluster, DEADLINE};
use embedded::wait_until;
use k8s_openapi::api::{
    core::v1::{Endpoints, Pod},
    discovery::v1::EndpointSlice,
};
use kube::{Api, api::ListParams};
use nodesim::{NodeSim, distribution::Distribution};
use rollwright::components::Components;
use serde_json::Value;
use std::{collections::BTreeSet, time::Duration};

/// A whole cluster of three quick simulated nodes; deletions end at once (grace scale 0).
pub fn components() -> Components {
    Components {
        nodes: Some(NodeSim {
            nodes: 3,
            heartbeat_interval: Duration::from_millis(500),
            start_delay: Distribution::Fixed(Duration::from_millis(100)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
            grace_scale: 0.0,
            backoff_scale: 0.01,
            ..Default::default()
        }),
        profile: None,
        scheduler: Some(scheduler::SchedulerConfig {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
            ..Default::default()
        }),
        controllers: Some(Default::default()),
    }
}

/// The tutorial manifests, relative to this crate.
pub(crate) fn realworld(file: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realworld")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

/// A pod as the test compares it with endpoints: name, IP, ready.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Member {
    name: String,
    ip: String,
    ready: bool,
}

/// The pods `service` selects that have an IP, read through kubectl.
async fn members(c: &Cluster, service: &str) -> Vec<Member> {
    let svc = c
        .kubectl_json(&["get", "service", service, "-o", "json"])
        .await;
    let selector: Vec<String> = svc["spec"]["selector"]
        .as_object()
        .expect("a selector")
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    let pods = c
        .kubectl_json(&["get", "pods", "-l", &selector.join(","), "-o", "json"])
        .await;
    let mut out: Vec<Member> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| {
            let ip = p["status"]["podIP"].as_str()?.to_string();
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            Some(Member {
                name: p["metadata"]["name"].as_str()?.to_string(),
                ip,
                ready,
            })
        })
        .collect();
    out.sort();
    out
}

fn ips(members: &[Member], ready: bool) -> BTreeSet<String> {
    members
        .iter()
        .filter(|m| m.ready == ready)
        .map(|m| m.ip.clone())
        .collect()
}

fn endpoint_ips(ep: &Endpoints, ready: bool) -> BTreeSet<String> {
    ep.subsets
        .iter()
        .flatten()
        .flat_map(|s| {
            if ready {
                s.addresses.iter().flatten()
            } else {
                s.not_ready_addresses.iter().flatten()
            }
        })
        .map(|a| a.ip.clone())
        .collect()
}

fn slice_ips(slices: &[EndpointSlice], ready: bool) -> BTreeSet<String> {
    slices
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false) == ready)
        .flat_map(|e| e.addresses.clone())
        .collect()
}

/// Waits (on watches) until the Service's Endpoints and EndpointSlices list exactly `want`'s
/// ready and not-ready IPs (`publish`: all as ready), then checks what kubectl prints.
async fn assert_listed(c: &Cluster, service: &str, want: &[Member], publish: bool) {
    let client = c.client().await;
    let (ready, not_ready) = if publish {
        (want.iter().map(|m| m.ip.clone()).collect(), BTreeSet::new())
    } else {
        (ips(want, true), ips(want, false))
    };
    let eps: Api<Endpoints> = Api::default_namespaced(client.clone());
    wait_until(&eps, &format!("endpoints {service}"), DEADLINE, |ep| {
        ep.metadata.name.as_deref() == Some(service)
            && endpoint_ips(ep, true) == ready
            && endpoint_ips(ep, false) == not_ready
    })
    .await
    .unwrap_or_else(|e| panic!("endpoints of {service} list {want:?}: {e}"));
    let slices: Api<EndpointSlice> = Api::default_namespaced(client);
    let label = format!("kubernetes.io/service-name={service}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    // The slices of a Service are several objects: wait on a watch of any of them, then list.
    loop {
        let list = slices
            .list(&ListParams::default().labels(&label))
            .await
            .unwrap();
        if slice_ips(&list.items, true) == ready && slice_ips(&list.items, false) == not_ready {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "slices of {service} never listed {want:?}: {:?}",
            list.items
        );
        let rv = list.metadata.resource_version.unwrap_or_default();
        let params = kube::api::WatchParams::default().labels(&label).timeout(2);
        use futures::StreamExt;
        let mut events = slices.watch(&params, &rv).await.unwrap().boxed();
        let _ = tokio::time::timeout(Duration::from_secs(3), events.next()).await;
    }

    // What kubectl shows.
    let ep = c
        .kubectl_json(&["get", "endpoints", service, "-o", "json"])
        .await;
    let mut names: Vec<String> = ep["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| {
            let mut all: Vec<&Value> = s["addresses"].as_array().into_iter().flatten().collect();
            all.extend(s["notReadyAddresses"].as_array().into_iter().flatten());
            all
        })
        .map(|a| {
            assert_eq!(a["targetRef"]["kind"], "Pod", "{a}");
            assert!(
                a["nodeName"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("node-")),
                "{a}"
            );
            a["targetRef"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    names.sort();
    names.dedup();
    let want_names: Vec<String> = want.iter().map(|m| m.name.clone()).collect();
    assert_eq!(names, want_names, "kubectl get endpoints {service}: {ep}");
    assert_eq!(
        ep["metadata"]["labels"]["endpoints.kubernetes.io/managed-by"], "endpoint-controller",
        "{ep}"
    );
    let slices = c
        .kubectl_json(&["get", "endpointslices", "-l", &label, "-o", "json"])
        .await;
    let items = slices["items"].as_array().unwrap();
    assert!(!items.is_empty(), "no slices for {service}");
    let mut slice_names: Vec<String> = Vec::new();
    for s in items {
        assert_eq!(s["addressType"], "IPv4", "{s}");
        assert_eq!(
            s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            "endpointslice-controller.k8s.io"
        );
        assert_eq!(s["metadata"]["ownerReferences"][0]["kind"], "Service");
        assert_eq!(s["metadata"]["ownerReferences"][0]["name"], service);
        let endpoints = s["endpoints"].as_array().cloned().unwrap_or_default();
        assert!(endpoints.len() <= 100);
        for e in endpoints {
            slice_names.push(e["targetRef"]["name"].as_str().unwrap().to_string());
        }
    }
    slice_names.sort();
    assert_eq!(
        slice_names, want_names,
        "kubectl get endpointslices: {slices}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_realworld_service_lists_its_ready_pods() {
    let c = Cluster::start_with(components()).await;
    for file in ["guestbook.yaml", "web.yaml", "zookeeper.yaml"] {
        c.kubectl(&["apply", "-f", &realworld(file)]).await;
    }
    for workload in [
        "deployment/frontend",
        "deployment/redis-leader",
        "statefulset/web",
    ] {
        c.kubectl(&["rollout", "status", workload, "--timeout=50s"])
            .await;
    }
    // ZooKeeper asks for pod anti-affinity; where its pods cannot all be placed yet, its
    // Services are still checked against the pods that run.
    let zk = c
        .kubectl_raw(
            &["rollout", "status", "statefulset/zk", "--timeout=50s"],
            None,
        )
        .await;
    let zk_ready = zk.status.success();

    // frontend: three ready pods, a LoadBalancer Service on port 80.
    let frontend = members(&c, "frontend").await;
    assert_eq!(frontend.len(), 3, "{frontend:?}");
    assert!(frontend.iter().all(|m| m.ready));
    assert_listed(&c, "frontend", &frontend, false).await;
    // redis-leader: the tutorial's Service selects `app: redis` while its pods are labelled
    // `app.kubernetes.io/name: redis`, so it has no endpoints, exactly as on a real cluster.
    let leader = members(&c, "redis-leader").await;
    assert!(leader.is_empty(), "{leader:?}");
    assert_listed(&c, "redis-leader", &leader, false).await;
    // nginx: headless, the StatefulSet's two pods with their hostnames.
    let nginx = members(&c, "nginx").await;
    assert_eq!(nginx.len(), 2, "{nginx:?}");
    assert_listed(&c, "nginx", &nginx, false).await;
    let ep = c
        .kubectl_json(&["get", "endpoints", "nginx", "-o", "json"])
        .await;
    let hostnames: BTreeSet<&str> = ep["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["hostname"].as_str())
        .collect();
    assert_eq!(hostnames, BTreeSet::from(["web-0", "web-1"]), "{ep}");
    assert_eq!(
        ep["metadata"]["labels"]["service.kubernetes.io/headless"],
        ""
    );
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], 80);
    assert_eq!(ep["subsets"][0]["ports"][0]["name"], "web");
    // ZooKeeper: both Services list its pods.
    let zk_members = members(&c, "zk-hs").await;
    if zk_ready {
        assert_eq!(zk_members.len(), 3, "{zk_members:?}");
        assert_listed(&c, "zk-hs", &zk_members, false).await;
        assert_listed(&c, "zk-cs", &zk_members, false).await;
        let ep = c.kubectl(&["get", "endpoints", "zk-hs"]).await;
        assert!(ep.contains(":2888") || ep.contains(":3888"), "{ep}");
    } else {
        eprintln!("zk did not roll out; its endpoints are checked only for existence");
        c.kubectl(&["get", "endpoints", "zk-hs", "zk-cs"]).await;
    }
    let table = c.kubectl(&["get", "endpoints", "frontend"]).await;
    for m in &frontend {
        assert!(table.contains(&m.ip), "{table}");
    }
    c.stop().await;
}

/// A Deployment whose containers name their port `http` (8080), a pod that never becomes
/// ready naming `http` 9090, a Service reaching `http`, and one publishing not-ready pods.
const NAMED_PORTS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: example/api:1
        ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: api-warming
  labels: {app: api}
  annotations: {rollwright.io/fault: neverReady}
spec:
  containers:
  - name: api
    image: example/api:1
    ports: [{name: http, containerPort: 9090}]
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{name: web, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: api-all}
spec:
  selector: {app: api}
  publishNotReadyAddresses: true
  clusterIP: None
  ports: [{name: web, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: outside}
spec:
  ports: [{port: 5432}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: outside}
subsets: [{addresses: [{ip: 192.0.2.10}], ports: [{port: 5432}]}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_ports_not_ready_pods_and_hand_written_endpoints() {
    let c = Cluster::start_with(components()).await;
    c.kubectl_stdin(&["apply", "-f", "-"], NAMED_PORTS).await;
    c.kubectl(&["rollout", "status", "deployment/api", "--timeout=50s"])
        .await;
    let pods: Api<Pod> = Api::default_namespaced(c.client().await);
    wait_until(&pods, "api-warming running", DEADLINE, |p| {
        p.metadata.name.as_deref() == Some("api-warming")
            && p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some()
    })
    .await
    .unwrap();
    let all = members(&c, "api").await;
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all.iter().filter(|m| m.ready).count(), 2, "{all:?}");
    assert_listed(&c, "api", &all, false).await;
    assert_listed(&c, "api-all", &all, true).await;

    // The named port resolves per pod: 8080 for the ready pods, 9090 for the warming one.
    let ep = c
        .kubectl_json(&["get", "endpoints", "api", "-o", "json"])
        .await;
    for subset in ep["subsets"].as_array().unwrap() {
        let port = subset["ports"][0]["port"].as_i64().unwrap();
        assert_eq!(subset["ports"][0]["name"], "web");
        if subset["addresses"].is_array() {
            assert_eq!(port, 8080, "{subset}");
            assert!(subset["notReadyAddresses"].is_null(), "{subset}");
        } else {
            assert_eq!(port, 9090, "{subset}");
        }
    }
    let slices = c
        .kubectl_json(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=api",
            "-o",
            "json",
        ])
        .await;
    let ports: BTreeSet<i64> = slices["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ports"][0]["port"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, BTreeSet::from([8080, 9090]), "{slices}");
    let warming = slices["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .find(|e| e["targetRef"]["name"] == "api-warming")
        .unwrap();
    assert_eq!(
        warming["conditions"],
        serde_json::json!({"ready": false, "serving": false, "terminating": false})
    );
    // Published: ready although not serving.
    let published = c
        .kubectl_json(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=api-all",
            "-o",
            "json",
        ])
        .await;
    let warming = published["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .find(|e| e["targetRef"]["name"] == "api-warming")
        .unwrap();
    assert_eq!(warming["conditions"]["ready"], true);
    assert_eq!(warming["conditions"]["serving"], false);

    // Scaling down takes the pod out of the endpoints.
    c.kubectl(&["scale", "deployment/api", "--replicas=1"])
        .await;
    c.kubectl(&["rollout", "status", "deployment/api", "--timeout=50s"])
        .await;
    let fewer = members(&c, "api").await;
    assert_eq!(fewer.len(), 2, "{fewer:?}");
    assert_listed(&c, "api", &fewer, false).await;

    // A deleted Service takes its Endpoints along.
    c.kubectl(&["delete", "service", "api-all"]).await;
    c.kubectl(&["wait", "--for=delete", "endpoints/api-all", "--timeout=20s"])
        .await;
    // The hand-written Endpoints of the Service without a selector stay as written.
    let outside = c
        .kubectl_json(&["get", "endpoints", "outside", "-o", "json"])
        .await;
    assert_eq!(outside["subsets"][0]["addresses"][0]["ip"], "192.0.2.10");
    assert!(outside["metadata"]["labels"].is_null(), "{outside}");
    let none = c
        .kubectl(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=outside",
            "-o",
            "name",
        ])
        .await;
    assert!(none.trim().is_empty(), "{none}");
    c.stop().await;
}
