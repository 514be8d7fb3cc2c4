//! Garbage collection end to end, with real kubectl: what `kubectl delete --cascade=background|
//! foreground|orphan` leaves of a Job, a CronJob, a Service and a custom resource, each against
//! upstream's documented behaviour
//! (<https://kubernetes.io/docs/concepts/architecture/garbage-collection/>):
//! - background (kubectl's default): "the Kubernetes API server deletes the owner object
//!   immediately and the garbage collector controller cleans up the dependents in the
//!   background";
//! - foreground: "the owner object you're deleting first enters a deletion in progress state"
//!   (a `deletionTimestamp` and the `foregroundDeletion` finalizer), "the controller deletes the
//!   dependents", and only "after deleting all the dependent objects, the controller deletes the
//!   owner object"; dependents with `blockOwnerDeletion` hold it until they are gone;
//! - orphan: the owner goes, "the dependents left behind are called orphan objects", their
//!   `ownerReferences` to it removed;
//! - "a namespaced dependent can specify either cluster-scoped or namespaced owners ... a
//!   namespaced owner must exist in the same namespace as the dependent. If it does not, the
//!   owner reference is treated as absent, and the dependent is subject to deletion once all
//!   owners are verified absent", with an `OwnerRefInvalidNamespace` warning event.
//!
//! The collector learns what to watch from discovery, so a CRD created while it runs (as every
//! CRD here is) has its objects' dependents collected too.

use crate::common;

use common::{Cluster, DEADLINE};
use futures::TryStreamExt;
use k8s_openapi::api::{
    batch::v1::Job,
    core::v1::{ConfigMap, Pod},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        wait::{await_condition, conditions},
        watcher,
    },
};
use rollwright::components::Components;
use std::collections::BTreeMap;

/// Pods that start at once and run until deleted.
const PROFILE: &str = "startDelay: 100ms\nreadinessDelay: 100ms\n";

/// A cluster with one simulated node, the scheduler and every controller.
async fn cluster() -> (Cluster, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = dir.path().join("profile.yaml");
    std::fs::write(&profile, PROFILE).expect("profile written");
    let c = Cluster::start_with(Components {
        nodes: Some(nodesim::NodeSim {
            nodes: 1,
            ..Default::default()
        }),
        profile: Some(profile),
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
    })
    .await;
    (c, dir)
}

/// A Job of `parallelism` pods that run until deleted.
fn job_yaml(name: &str, parallelism: u32) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  parallelism: {parallelism}
  completions: {parallelism}
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers:
      - name: work
        image: busybox:1.36
        command: ["sleep", "3600"]
"#
    )
}

/// Waits until the objects `api` lists with `selector` satisfy `done` (by name), and returns
/// them; fails the test with what it saw at the deadline.
async fn wait_for_set<K>(
    api: &Api<K>,
    selector: &str,
    what: &str,
    done: impl Fn(&BTreeMap<String, K>) -> bool,
) -> BTreeMap<String, K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut seen = BTreeMap::new();
    let mut listing = BTreeMap::new();
    let mut listed = false;
    let config = watcher::Config::default().labels(selector);
    let mut events = std::pin::pin!(watcher(api.clone(), config));
    let outcome = tokio::time::timeout(DEADLINE, async {
        while let Some(event) = events.try_next().await.expect("watch") {
            match event {
                watcher::Event::Init => listing.clear(),
                watcher::Event::InitApply(o) => {
                    listing.insert(o.name_any(), o);
                }
                watcher::Event::InitDone => {
                    seen = std::mem::take(&mut listing);
                    listed = true;
                }
                watcher::Event::Apply(o) => {
                    seen.insert(o.name_any(), o);
                }
                watcher::Event::Delete(o) => {
                    seen.remove(&o.name_any());
                }
            }
            if listed && done(&seen) {
                return;
            }
        }
    })
    .await;
    if outcome.is_err() {
        panic!(
            "{what}: not so after {DEADLINE:?}; saw {:?}",
            seen.keys().collect::<Vec<_>>()
        );
    }
    seen
}

/// Waits until the object `name` (of uid `uid`) is gone.
async fn wait_deleted<K>(api: &Api<K>, name: &str, uid: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let gone = await_condition(api.clone(), name, conditions::is_deleted(uid));
    tokio::time::timeout(DEADLINE, gone)
        .await
        .unwrap_or_else(|_| panic!("{name} still exists after {DEADLINE:?}"))
        .expect("watch");
}

/// Creates the Job `name` and waits for its `parallelism` pods.
async fn job_with_pods(c: &Cluster, name: &str, parallelism: usize) -> (Job, Vec<Pod>) {
    c.kubectl_stdin(&["apply", "-f", "-"], &job_yaml(name, parallelism as u32))
        .await;
    let client = c.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let selector = format!("job-name={name}");
    let found = wait_for_set(&pods, &selector, "the Job's pods", |s| {
        s.len() == parallelism
    })
    .await;
    let job = Api::<Job>::namespaced(client, "default")
        .get(name)
        .await
        .unwrap();
    (job, found.into_values().collect())
}

#[tokio::test]
async fn deleting_a_job_in_the_background_deletes_its_pods() {
    let (c, _dir) = cluster().await;
    let (job, pods) = job_with_pods(&c, "bg", 2).await;
    for pod in &pods {
        assert_eq!(
            pod.owner_references()[0].uid,
            job.uid().unwrap(),
            "a Job's pods are owned by it"
        );
    }
    // kubectl's default cascade is background: the Job goes at once, its pods after it.
    let out = c.kubectl(&["delete", "job", "bg"]).await;
    assert_eq!(out.trim(), "job.batch \"bg\" deleted");
    let jobs: Api<Job> = Api::namespaced(c.client().await, "default");
    assert!(jobs.get_opt("bg").await.unwrap().is_none());
    let api: Api<Pod> = Api::namespaced(c.client().await, "default");
    wait_for_set(&api, "job-name=bg", "the Job's pods gone", |s| s.is_empty()).await;
    c.stop().await;
}

#[tokio::test]
async fn deleting_a_job_in_the_foreground_waits_for_its_pods() {
    let (c, _dir) = cluster().await;
    let (job, pods) = job_with_pods(&c, "fg", 2).await;
    let client = c.client().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    // One pod cannot go until the test lets it: the Job must wait for it.
    let held = pods[0].name_any();
    c.kubectl(&[
        "patch",
        "pod",
        &held,
        "--type=json",
        "-p",
        r#"[{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/hold"}]"#,
    ])
    .await;

    c.kubectl(&[
        "delete",
        "job",
        "fg",
        "--cascade=foreground",
        "--wait=false",
    ])
    .await;
    // The other pod goes, the held one is being deleted...
    let left = wait_for_set(&api, "job-name=fg", "only the held pod, deleting", |s| {
        s.len() == 1
            && s.get(&held)
                .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert!(left.contains_key(&held));
    // ...and the Job waits for it, deleting, with the foregroundDeletion finalizer.
    let waiting = jobs.get("fg").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .finalizers()
            .iter()
            .any(|f| f == "foregroundDeletion"),
        "{:?}",
        waiting.finalizers()
    );

    // The last pod goes: so does the Job.
    c.kubectl(&[
        "patch",
        "pod",
        &held,
        "--type=merge",
        "-p",
        r#"{"metadata": {"finalizers": null}}"#,
    ])
    .await;
    wait_deleted(&jobs, "fg", &job.uid().unwrap()).await;
    wait_for_set(&api, "job-name=fg", "the Job's pods gone", |s| s.is_empty()).await;
    c.stop().await;
}

#[tokio::test]
async fn deleting_a_job_with_orphan_leaves_its_pods_without_owner() {
    let (c, _dir) = cluster().await;
    let (_job, pods) = job_with_pods(&c, "orphan", 2).await;
    // kubectl waits until the Job is gone, which the collector allows once the pods are
    // orphaned.
    c.kubectl(&["delete", "job", "orphan", "--cascade=orphan"])
        .await;
    let api: Api<Pod> = Api::namespaced(c.client().await, "default");
    for pod in &pods {
        let now = api.get(&pod.name_any()).await.unwrap();
        assert_eq!(now.uid(), pod.uid(), "the pod is the same");
        assert!(now.metadata.deletion_timestamp.is_none());
        assert!(
            now.owner_references().is_empty(),
            "{:?}",
            now.owner_references()
        );
    }
    c.stop().await;
}

#[tokio::test]
async fn deleting_a_cronjob_deletes_its_jobs_and_their_pods() {
    let (c, _dir) = cluster().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 0
          containers:
          - name: work
            image: busybox:1.36
            command: ["sleep", "3600"]
"#,
    )
    .await;
    // kubectl makes the Job a dependent of the CronJob, as the CronJob controller does.
    c.kubectl(&["create", "job", "now", "--from=cronjob/nightly"])
        .await;
    let client = c.client().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = jobs.get("now").await.unwrap();
    assert_eq!(job.owner_references()[0].kind, "CronJob");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    wait_for_set(&pods, "job-name=now", "the Job's pod", |s| s.len() == 1).await;

    c.kubectl(&["delete", "cronjob", "nightly"]).await;
    wait_deleted(&jobs, "now", &job.uid().unwrap()).await;
    wait_for_set(&pods, "job-name=now", "the Job's pods gone", |s| {
        s.is_empty()
    })
    .await;
    c.stop().await;
}

#[tokio::test]
async fn deleting_a_service_deletes_its_endpointslices() {
    let c = Cluster::with_controllers(&["endpointslice", "garbagecollector"]).await;
    c.kubectl(&["create", "service", "clusterip", "web", "--tcp=80:8080"])
        .await;
    let slices: Api<EndpointSlice> = Api::namespaced(c.client().await, "default");
    let selector = "kubernetes.io/service-name=web";
    let found = wait_for_set(&slices, selector, "the Service's slice", |s| !s.is_empty()).await;
    for slice in found.values() {
        let owner = &slice.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Service", "web")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
    }
    c.kubectl(&["delete", "service", "web"]).await;
    wait_for_set(&slices, selector, "the Service's slices gone", |s| {
        s.is_empty()
    })
    .await;
    c.stop().await;
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

/// Creates the Gadget `name` and a ConfigMap `name-config` it owns; returns the ConfigMap.
async fn gadget_with_config_map(c: &Cluster, name: &str) -> ConfigMap {
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!("apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: {name}\n"),
    )
    .await;
    let uid = c
        .kubectl(&["get", "gadget", name, "-o", "jsonpath={.metadata.uid}"])
        .await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-config
  ownerReferences:
  - apiVersion: example.com/v1
    kind: Gadget
    name: {name}
    uid: {uid}
    blockOwnerDeletion: true
data:
  k: v
"#
        ),
    )
    .await;
    Api::<ConfigMap>::namespaced(c.client().await, "default")
        .get(&format!("{name}-config"))
        .await
        .unwrap()
}

#[tokio::test]
async fn deleting_a_custom_resource_deletes_what_it_owns() {
    let c = Cluster::with_controllers(&["garbagecollector"]).await;
    // The CRD comes after the control plane, and its collector, started.
    c.kubectl_stdin(&["apply", "-f", "-"], CRD).await;
    c.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.example.com",
        "--timeout=20s",
    ])
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client().await, "default");

    // Background: the Gadget goes, its ConfigMap after it.
    let cm = gadget_with_config_map(&c, "one").await;
    c.kubectl(&["delete", "gadget", "one"]).await;
    wait_deleted(&config_maps, "one-config", &cm.uid().unwrap()).await;

    // Foreground: the Gadget goes only once its ConfigMap is gone.
    let cm = gadget_with_config_map(&c, "two").await;
    c.kubectl(&["delete", "gadget", "two", "--cascade=foreground"])
        .await;
    assert!(
        config_maps.get_opt("two-config").await.unwrap().is_none(),
        "the owner went before its blocking dependent"
    );
    let _ = cm;

    // Orphan: the ConfigMap stays, without its reference.
    let cm = gadget_with_config_map(&c, "three").await;
    c.kubectl(&["delete", "gadget", "three", "--cascade=orphan"])
        .await;
    let left = config_maps.get("three-config").await.unwrap();
    assert_eq!(left.uid(), cm.uid());
    assert!(left.owner_references().is_empty());
    c.stop().await;
}

#[tokio::test]
async fn a_reference_to_an_owner_in_another_namespace_is_reported_and_collected() {
    let c = Cluster::with_controllers(&["garbagecollector"]).await;
    c.kubectl(&["create", "namespace", "other"]).await;
    c.kubectl(&["create", "configmap", "owner", "-n", "other"])
        .await;
    let uid = c
        .kubectl(&[
            "get",
            "configmap",
            "owner",
            "-n",
            "other",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .await;
    // A dependent in `default` naming, by uid, the owner in `other`.
    let child_uid = c
        .kubectl_stdin(
            &["create", "-f", "-", "-o", "jsonpath={.metadata.uid}"],
            &format!(
                r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: child
  ownerReferences:
  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}}}
"#
            ),
        )
        .await;
    let event = common::wait_event(
        c.client().await,
        "default",
        Some("child"),
        "OwnerRefInvalidNamespace",
        "",
    )
    .await;
    assert_eq!(
        event.message.as_deref(),
        Some(
            format!(
                "ownerRef [v1/ConfigMap, namespace: default, name: owner, uid: {uid}] does not exist in namespace \"default\""
            )
            .as_str()
        )
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.source.and_then(|s| s.component).as_deref(),
        Some("garbage-collector-controller")
    );
    // Its only owner is absent where it must be: the dependent is collected, the owner stays.
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    wait_deleted(&config_maps, "child", &child_uid).await;
    c.kubectl(&["get", "configmap", "owner", "-n", "other"])
        .await;
    c.stop().await;
}

/// A ConfigMap in `default` owned by a `kind` of `api_version` that does not exist (uid `n`).
async fn owned_config_map(
    c: &Cluster,
    name: &str,
    api_version: &str,
    kind: &str,
    n: u32,
) -> String {
    c.kubectl_stdin(
        &["create", "-f", "-", "-o", "jsonpath={.metadata.uid}"],
        &format!(
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  ownerReferences:
  - {{apiVersion: {api_version}, kind: {kind}, name: missing, uid: 6d1c9f4e-0000-4000-8000-{n:012}}}
"#
        ),
    )
    .await
}

#[tokio::test]
async fn an_owner_of_a_kind_not_served_is_not_taken_for_absent() {
    let c = Cluster::with_controllers(&["garbagecollector"]).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client().await, "default");
    // Upstream cannot map a kind the server does not serve: it leaves the dependent and tries
    // again, rather than take the owner for gone.
    let unmapped = owned_config_map(&c, "unmapped", "example.com/v1", "Gizmo", 1).await;
    // A dependent of an absent owner of a served kind is collected meanwhile.
    let orphan = owned_config_map(&c, "orphaned", "v1", "ConfigMap", 2).await;
    wait_deleted(&config_maps, "orphaned", &orphan).await;
    let still = config_maps.get("unmapped").await.unwrap();
    assert_eq!(still.uid().as_deref(), Some(unmapped.as_str()));

    // Once the kind is served, the owner can be looked up: it is absent, the dependent goes.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &CRD.replace("gadget", "gizmo").replace("Gadget", "Gizmo"),
    )
    .await;
    wait_deleted(&config_maps, "unmapped", &unmapped).await;
    c.stop().await;
}
