//! The `kube` client against the embedded control plane over HTTPS: typed CRUD, the three patch
//! types, optimistic concurrency, selectors and pagination, graceful deletion, subresources,
//! generation, `generateName`, finalizers and namespace deletion.

use crate::common;

use common::{Cluster, DEADLINE};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::{
    apps::v1::Deployment,
    coordination::v1::Lease,
    core::v1::{Namespace, Node, Pod},
};
use kube::{
    Api, Client,
    api::{
        DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent,
        WatchParams,
    },
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    typed(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
            }
        }
    }))
}

fn pod(name: &str, labels: Value) -> Pod {
    typed(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    }))
}

/// The API error's status, failing the test if the call succeeded or failed otherwise.
fn api_error<T: std::fmt::Debug>(r: kube::Result<T>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Binds a pod to a node through the binding subresource, as a scheduler does.
async fn bind(pods: &Api<Pod>, name: &str, node: &str) {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let _: Value = pods
        .create_subresource("binding", name, &PostParams::default(), &binding)
        .await
        .expect("bind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_crud_of_deployments_pods_nodes_and_leases() {
    let c = Cluster::start().await;
    let client = c.client().await;
    let pp = PostParams::default();

    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let created = deploys
        .create(&pp, &deployment("web", 2))
        .await
        .expect("create deployment");
    let spec = created.spec.as_ref().expect("spec");
    let strategy = spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .expect("defaulted strategy");
    assert_eq!(
        format!("{:?}", strategy.max_surge),
        r#"Some(String("25%"))"#
    );
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        deploys.get("web").await.expect("get").metadata.uid,
        created.metadata.uid
    );
    let err = api_error(deploys.create(&pp, &deployment("web", 2)).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(err.message, "deployments.apps \"web\" already exists");

    let mut changed = created.clone();
    changed.spec.as_mut().expect("spec").replicas = Some(4);
    let replaced = deploys
        .replace("web", &pp, &changed)
        .await
        .expect("replace");
    assert_eq!(replaced.spec.as_ref().and_then(|s| s.replicas), Some(4));
    assert_eq!(replaced.metadata.generation, Some(2));

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let p = pods
        .create(&pp, &pod("p", json!({"a": "1"})))
        .await
        .expect("create pod");
    assert_eq!(
        p.spec.as_ref().and_then(|s| s.restart_policy.as_deref()),
        Some("Always")
    );
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    assert_eq!(
        pods.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );

    let nodes: Api<Node> = Api::all(client.clone());
    let n: Node = typed(json!({"metadata": {"name": "node-1", "labels": {"zone": "a"}}}));
    nodes.create(&pp, &n).await.expect("create node");
    let n = nodes.get("node-1").await.expect("get node");
    assert!(n.metadata.namespace.is_none(), "nodes are cluster-scoped");

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let l: Lease = typed(
        json!({"metadata": {"name": "node-1"}, "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}}),
    );
    let l = leases.create(&pp, &l).await.expect("create lease");
    let mut renewed = l.clone();
    renewed.spec.as_mut().expect("spec").renew_time = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now()),
    );
    let renewed = leases
        .replace("node-1", &pp, &renewed)
        .await
        .expect("renew lease");
    assert!(
        renewed
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .is_some()
    );
    assert_ne!(
        renewed.metadata.resource_version,
        l.metadata.resource_version
    );

    // Deletion: non-graceful kinds go at once.
    deploys
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete deployment");
    assert!(deploys.get_opt("web").await.expect("get_opt").is_none());
    leases
        .delete("node-1", &DeleteParams::default())
        .await
        .expect("delete lease");
    assert!(leases.get_opt("node-1").await.expect("get_opt").is_none());
    nodes
        .delete("node-1", &DeleteParams::default())
        .await
        .expect("delete node");
    assert!(nodes.get_opt("node-1").await.expect("get_opt").is_none());
    // A pod on no node goes at once too.
    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete pod");
    assert!(pods.get_opt("p").await.expect("get_opt").is_none());
    let err = api_error(pods.get("p").await);
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (404, "NotFound", "pods \"p\" not found")
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_strategic_merge_and_json() {
    let c = Cluster::start().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.client().await);
    deploys
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .expect("create");
    let pp = PatchParams::default();

    let d = deploys
        .patch(
            "web",
            &pp,
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "busybox:1.36"}
            ]}}}})),
        )
        .await
        .expect("strategic patch");
    let containers = &d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec")
        .containers;
    let app = containers
        .iter()
        .find(|c| c.name == "app")
        .expect("app kept");
    assert_eq!(app.image.as_deref(), Some("nginx:1.25"));
    assert_eq!(app.env.as_ref().map(|e| e[0].name.as_str()), Some("A"));
    assert!(containers.iter().any(|c| c.name == "side"));
    assert_eq!(d.metadata.generation, Some(2));

    // A merge patch replaces the whole containers list.
    let d = deploys
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "only", "image": "redis:7"}
            ]}}}})),
        )
        .await
        .expect("merge patch");
    let names: Vec<&str> = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["only"]);

    let patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/replicas", "value": 6},
        {"op": "add", "path": "/metadata/annotations", "value": {"note": "json"}}
    ]))
    .expect("json patch");
    let d = deploys
        .patch("web", &pp, &Patch::Json::<()>(patch))
        .await
        .expect("json patch");
    assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(6));
    assert_eq!(
        d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("note"))
            .map(String::as_str),
        Some("json")
    );

    // A patch that makes the object invalid is refused and stores nothing.
    let err = api_error(
        deploys
            .patch("web", &pp, &Patch::Merge(json!({"spec": {"replicas": -3}})))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(err.message.contains("spec.replicas"), "{}", err.message);
    assert_eq!(
        deploys
            .get("web")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.replicas),
        Some(6)
    );
    // Dry run answers with the patched object but stores nothing.
    let dry = deploys
        .patch(
            "web",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("dry run");
    assert_eq!(dry.spec.and_then(|s| s.replicas), Some(1));
    assert_eq!(
        deploys
            .get("web")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.replicas),
        Some(6)
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_with_a_stale_resource_version_is_a_conflict() {
    let c = Cluster::start().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.client().await);
    let v1 = deploys
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .expect("create");
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .expect("patch");
    let mut stale = v1.clone();
    stale.spec.as_mut().expect("spec").replicas = Some(9);
    let err = api_error(deploys.replace("web", &PostParams::default(), &stale).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(
        deploys
            .get("web")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.replicas),
        Some(2)
    );

    // A precondition on delete is checked the same way.
    let dp = DeleteParams::default().preconditions(kube::api::Preconditions {
        resource_version: v1.metadata.resource_version.clone(),
        uid: None,
    });
    let err = api_error(deploys.delete("web", &dp).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(deploys.get_opt("web").await.expect("get").is_some());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_with_selectors_and_pages() {
    let c = Cluster::start().await;
    let client = c.client().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for i in 0..10 {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        pods.create(
            &PostParams::default(),
            &pod(&format!("p{i}"), json!({"tier": tier, "i": i.to_string()})),
        )
        .await
        .expect("create");
    }
    bind(&pods, "p3", "node-a").await;
    let names = |l: kube::core::ObjectList<Pod>| -> Vec<String> {
        let mut v: Vec<String> = l
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        v.sort();
        v
    };
    let even = names(
        pods.list(&ListParams::default().labels("tier=even"))
            .await
            .expect("list"),
    );
    assert_eq!(even, ["p0", "p2", "p4", "p6", "p8"]);
    let some = names(
        pods.list(&ListParams::default().labels("tier=odd,i in (1,3,4),i notin (3)"))
            .await
            .expect("list"),
    );
    assert_eq!(some, ["p1"]);
    let bound = names(
        pods.list(&ListParams::default().fields("spec.nodeName=node-a"))
            .await
            .expect("list"),
    );
    assert_eq!(bound, ["p3"]);
    let unbound = names(
        pods.list(
            &ListParams::default()
                .fields("spec.nodeName=,metadata.name!=p0")
                .labels("tier=odd"),
        )
        .await
        .expect("list"),
    );
    assert_eq!(unbound, ["p1", "p5", "p7", "p9"]);
    let err = api_error(
        pods.list(&ListParams::default().fields("spec.bogus=1"))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));

    // Pages of 4 over a consistent snapshot: a create between pages does not show up.
    let first = pods
        .list(&ListParams::default().limit(4))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 4);
    let token = first.metadata.continue_.clone().expect("continue token");
    assert_eq!(first.metadata.remaining_item_count, Some(6));
    pods.create(&PostParams::default(), &pod("zz-late", json!({})))
        .await
        .expect("create");
    let mut all: Vec<String> = first
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let mut next = Some(token);
    let mut pages = 1;
    while let Some(token) = next {
        let page = pods
            .list(&ListParams::default().limit(4).continue_token(&token))
            .await
            .expect("next page");
        assert_eq!(
            page.metadata.resource_version, first.metadata.resource_version,
            "pages are one snapshot"
        );
        all.extend(page.items.iter().filter_map(|p| p.metadata.name.clone()));
        next = page.metadata.continue_.filter(|t| !t.is_empty());
        pages += 1;
    }
    assert_eq!(pages, 3);
    assert_eq!(all, (0..10).map(|i| format!("p{i}")).collect::<Vec<_>>());
    // An exact list shows the collection as it was, without the late pod; a newer one shows it.
    let at = first.metadata.resource_version.clone().expect("rv");
    let exact = pods
        .list(&ListParams::default().at(&at).matching(VersionMatch::Exact))
        .await
        .expect("exact list");
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(at.as_str())
    );
    assert_eq!(exact.items.len(), 10);
    let odd_then = pods
        .list(
            &ListParams::default()
                .labels("tier=odd")
                .at(&at)
                .matching(VersionMatch::Exact),
        )
        .await
        .expect("exact list");
    assert_eq!(odd_then.items.len(), 5);
    // kube refuses to send an exact list at "0"; the server refuses it too.
    let raw = http::Request::get(
        "/api/v1/namespaces/default/pods?resourceVersion=0&resourceVersionMatch=Exact",
    )
    .body(Vec::new())
    .expect("request");
    let err = api_error(client.request_text(raw).await);
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"), "{err:?}");
    let not_older = pods
        .list(
            &ListParams::default()
                .at(&at)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .expect("list");
    assert_eq!(not_older.items.len(), 11);
    // A fresh list sees the late pod; a selector pages too.
    assert_eq!(
        pods.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        11
    );
    let odd = pods
        .list(&ListParams::default().labels("tier=odd").limit(2))
        .await
        .expect("list");
    assert_eq!(odd.items.len(), 2);
    assert!(odd.metadata.continue_.is_some_and(|t| !t.is_empty()));
    let err = api_error(
        pods.list(&ListParams::default().limit(2).continue_token("garbage"))
            .await,
    );
    assert_eq!(err.code, 400);

    // Listing across namespaces.
    let everywhere: Api<Pod> = Api::all(client);
    assert_eq!(
        everywhere
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        11
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_bound_pod_is_graceful() {
    let c = Cluster::start().await;
    let pods: Api<Pod> = Api::default_namespaced(c.client().await);
    pods.create(&PostParams::default(), &pod("runner", json!({})))
        .await
        .expect("create");
    bind(&pods, "runner", "node-a").await;
    let bound = pods.get("runner").await.expect("get");
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("node-a")
    );
    // A second binding is refused: a pod is bound once.
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "runner"}, "target": {"kind": "Node", "name": "node-b"}});
    let err = api_error(
        pods.create_subresource::<_, Value>("binding", "runner", &PostParams::default(), &binding)
            .await,
    );
    assert_eq!(err.code, 409, "{err:?}");

    let first = pods
        .delete("runner", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = first.left().expect("a graceful delete returns the object");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    let still = pods.get("runner").await.expect("still there");
    assert!(still.metadata.deletion_timestamp.is_some());
    // A shorter grace period shortens it; a longer one does not lengthen it.
    pods.delete("runner", &DeleteParams::default().grace_period(10))
        .await
        .expect("shorten");
    assert_eq!(
        pods.get("runner")
            .await
            .expect("get")
            .metadata
            .deletion_grace_period_seconds,
        Some(10)
    );
    pods.delete("runner", &DeleteParams::default().grace_period(20))
        .await
        .expect("no lengthen");
    assert_eq!(
        pods.get("runner")
            .await
            .expect("get")
            .metadata
            .deletion_grace_period_seconds,
        Some(10)
    );
    // Grace period 0, as the kubelet sends when the containers are gone, removes it.
    pods.delete("runner", &DeleteParams::default().grace_period(0))
        .await
        .expect("final delete");
    assert!(pods.get_opt("runner").await.expect("get").is_none());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_main_resource_are_separate() {
    let c = Cluster::start().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.client().await);
    deploys
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .expect("create");
    let pp = PatchParams::default();

    // Through the main resource a status change is dropped.
    let d = deploys
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 7}})),
        )
        .await
        .expect("patch");
    assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(d.status.as_ref().and_then(|s| s.replicas), None);
    assert_eq!(d.metadata.generation, Some(2));

    // Through status a spec change is dropped, and the generation stays.
    let d = deploys
        .patch_status("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 9}, "status": {"replicas": 3, "observedGeneration": 2}})))
        .await
        .expect("patch status");
    assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(d.status.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(
        d.status.as_ref().and_then(|s| s.observed_generation),
        Some(2)
    );
    assert_eq!(d.metadata.generation, Some(2));

    // replace_status with a full object, spec changed in it, changes status only.
    let mut full = deploys.get_status("web").await.expect("get status");
    full.spec.as_mut().expect("spec").replicas = Some(11);
    full.status.as_mut().expect("status").ready_replicas = Some(1);
    let d = deploys
        .replace_status("web", &PostParams::default(), &full)
        .await
        .expect("replace status");
    assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(d.status.as_ref().and_then(|s| s.ready_replicas), Some(1));
    // A replace of the main resource keeps the stored status.
    let mut main = deploys.get("web").await.expect("get");
    main.status = None;
    let d = deploys
        .replace("web", &PostParams::default(), &main)
        .await
        .expect("replace");
    assert_eq!(d.status.as_ref().and_then(|s| s.ready_replicas), Some(1));

    // Pods likewise: status through /status only.
    let pods: Api<Pod> = Api::default_namespaced(Client::from(deploys.clone()));
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .expect("create pod");
    let p = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .expect("patch");
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    let p = pods
        .patch_status(
            "p",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Running"}, "spec": {"nodeName": "sneaky"}})),
        )
        .await
        .expect("patch status");
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    assert_eq!(p.spec.and_then(|s| s.node_name), None);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_bumps_on_spec_and_annotation_changes() {
    let c = Cluster::start().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.client().await);
    let pp = PatchParams::default();
    let d = deploys
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .expect("create");
    assert_eq!(d.metadata.generation, Some(1));
    // Upstream's Deployment strategy also counts annotation changes (they are copied to the
    // ReplicaSets); labels never count.
    let steps: [(Value, i64); 5] = [
        (json!({"metadata": {"labels": {"x": "1"}}}), 1),
        (json!({"metadata": {"annotations": {"a": "b"}}}), 2),
        (json!({"spec": {"replicas": 2}}), 3),
        (json!({"spec": {"replicas": 2}}), 3),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.26"}]}}}}),
            4,
        ),
    ];
    for (patch, want) in steps {
        let d = deploys
            .patch("web", &pp, &Patch::Strategic(patch.clone()))
            .await
            .expect("patch");
        assert_eq!(d.metadata.generation, Some(want), "after {patch}");
    }
    // A no-op write keeps even the resourceVersion.
    let before = deploys.get("web").await.expect("get");
    let after = deploys
        .patch("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 2}})))
        .await
        .expect("patch");
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_name_makes_unique_names() {
    let c = Cluster::start().await;
    let pods: Api<Pod> = Api::default_namespaced(c.client().await);
    let template: Pod = typed(
        json!({"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    );
    let mut names = std::collections::HashSet::new();
    for _ in 0..5 {
        let p = pods
            .create(&PostParams::default(), &template)
            .await
            .expect("create");
        let name = p.metadata.name.expect("a name was generated");
        assert!(
            name.starts_with("web-") && name.len() == "web-".len() + 5,
            "{name}"
        );
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-"));
        names.insert(name);
    }
    assert_eq!(names.len(), 5);
    assert_eq!(
        pods.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        5
    );
    // Neither a name nor generateName: 422 naming the field.
    let nameless: Pod =
        typed(json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}));
    let err = api_error(pods.create(&PostParams::default(), &nameless).await);
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("metadata.name: Required value"),
        "{}",
        err.message
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_hold_deletion_until_removed() {
    let c = Cluster::start().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.client().await);
    let mut d = deployment("held", 1);
    d.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create");

    // Watch the object so its disappearance is seen, not polled for.
    let wp = WatchParams::default().fields("metadata.name=held");
    let start = deploys
        .get("held")
        .await
        .expect("get")
        .metadata
        .resource_version
        .expect("rv");
    let mut events = deploys.watch(&wp, &start).await.expect("watch").boxed();

    let res = deploys
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = res.left().expect("object still there");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.metadata.finalizers.as_deref(),
        Some(&["example.com/hold".to_string()][..])
    );
    assert!(deploys.get_opt("held").await.expect("get").is_some());
    // Spec changes are still allowed; new finalizers are not.
    let err = api_error(deploys.patch("held", &PatchParams::default(), &Patch::Json::<()>(serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/another"}
    ])).expect("patch"))).await);
    assert_eq!(err.code, 422, "{err:?}");

    deploys
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "remove", "path": "/metadata/finalizers"}
                ]))
                .expect("patch"),
            ),
        )
        .await
        .expect("remove finalizer");
    let deleted = tokio::time::timeout(DEADLINE, async {
        while let Some(ev) = events.try_next().await.expect("watch event") {
            if let WatchEvent::Deleted(d) = ev {
                return Some(d);
            }
        }
        None
    })
    .await
    .expect("deletion within the deadline")
    .expect("a DELETED event");
    assert_eq!(deleted.metadata.name.as_deref(), Some("held"));
    assert!(deploys.get_opt("held").await.expect("get").is_none());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_removes_its_content() {
    let c = Cluster::with_controllers(&["namespace"]).await;
    let client = c.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created = namespaces
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "team"}})),
        )
        .await
        .expect("create ns");
    let uid = created.metadata.uid.expect("uid");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "team");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team");
    deploys
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .expect("create deployment");
    pods.create(&PostParams::default(), &pod("loose", json!({})))
        .await
        .expect("create pod");
    pods.create(&PostParams::default(), &pod("bound", json!({})))
        .await
        .expect("create pod");
    bind(&pods, "bound", "node-a").await;
    let elsewhere: Api<Pod> = Api::default_namespaced(client.clone());
    elsewhere
        .create(&PostParams::default(), &pod("keep", json!({})))
        .await
        .expect("create pod");

    let ns_gone = kube::runtime::wait::await_condition(
        namespaces.clone(),
        "team",
        kube::runtime::wait::conditions::is_deleted(&uid),
    );
    let ns = namespaces
        .delete("team", &DeleteParams::default())
        .await
        .expect("delete ns")
        .left()
        .expect("namespace");
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    // While it is terminating nothing new may be created in it.
    let err = api_error(
        pods.create(&PostParams::default(), &pod("late", json!({})))
            .await,
    );
    assert!(matches!(err.code, 403 | 404), "{err:?}");

    // The bound pod waits for its kubelet; finish its deletion as a kubelet would.
    let bound_gone = async {
        let mut stream = watcher(pods.clone(), watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(p) = stream.try_next().await.expect("watch pods") {
            if p.metadata.name.as_deref() == Some("bound")
                && p.metadata.deletion_timestamp.is_some()
            {
                pods.delete("bound", &DeleteParams::default().grace_period(0))
                    .await
                    .expect("final delete");
                return;
            }
        }
    };
    tokio::time::timeout(DEADLINE, bound_gone)
        .await
        .expect("the bound pod was marked for deletion");
    tokio::time::timeout(DEADLINE, ns_gone)
        .await
        .expect("namespace deleted within the deadline")
        .expect("await");

    assert!(namespaces.get_opt("team").await.expect("get").is_none());
    assert!(
        Api::<Pod>::all(client.clone())
            .list(&ListParams::default().fields("metadata.namespace=team"))
            .await
            .expect("list")
            .items
            .is_empty()
    );
    assert!(
        Api::<Deployment>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    assert!(
        elsewhere.get_opt("keep").await.expect("get").is_some(),
        "other namespaces are untouched"
    );
    // System namespaces cannot be deleted.
    let err = api_error(namespaces.delete("default", &DeleteParams::default()).await);
    assert_eq!(err.code, 403);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_watcher_sees_initial_and_live_objects() {
    let c = Cluster::start().await;
    let pods: Api<Pod> = Api::default_namespaced(c.client().await);
    for name in ["s0", "s1"] {
        pods.create(&PostParams::default(), &pod(name, json!({"w": "yes"})))
            .await
            .expect("create");
    }
    pods.create(&PostParams::default(), &pod("other", json!({})))
        .await
        .expect("create");
    // `sendInitialEvents`: the current objects come as events, then a bookmark ends them.
    let cfg = watcher::Config::default().streaming_lists().labels("w=yes");
    let mut events = watcher(pods.clone(), cfg).boxed();
    let mut initial = Vec::new();
    let done = tokio::time::timeout(DEADLINE, async {
        while let Some(ev) = events.try_next().await.expect("event") {
            match ev {
                watcher::Event::InitApply(p) => initial.extend(p.metadata.name),
                watcher::Event::InitDone => return true,
                _ => {}
            }
        }
        false
    })
    .await;
    assert_eq!(done.ok(), Some(true), "the initial events end");
    initial.sort();
    assert_eq!(initial, ["s0", "s1"]);
    pods.create(&PostParams::default(), &pod("s2", json!({"w": "yes"})))
        .await
        .expect("create");
    pods.create(&PostParams::default(), &pod("not-me", json!({})))
        .await
        .expect("create");
    pods.delete("s0", &DeleteParams::default())
        .await
        .expect("delete");
    let mut seen = Vec::new();
    let live = tokio::time::timeout(DEADLINE, async {
        while let Some(ev) = events.try_next().await.expect("event") {
            match ev {
                watcher::Event::Apply(p) => {
                    seen.push(format!("apply {}", p.metadata.name.unwrap_or_default()))
                }
                watcher::Event::Delete(p) => {
                    seen.push(format!("delete {}", p.metadata.name.unwrap_or_default()));
                    return;
                }
                _ => {}
            }
        }
    })
    .await;
    assert!(live.is_ok(), "live events arrive: {seen:?}");
    assert_eq!(seen, ["apply s2", "delete s0"]);
    c.stop().await;
}
