//! CustomResourceDefinitions end to end: a definition with a status subresource, printer
//! columns, a defaulted field and two versions is Established and served at once; its objects
//! are created, listed, watched, patched and deleted with kubectl and with kube's
//! `Api<DynamicObject>`; bad objects get upstream's 422; deleting the definition removes them.

use crate::common;

use common::Cluster;
use futures::StreamExt;
use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    },
    runtime::watcher,
};
use serde_json::json;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              color: {type: string, default: red, enum: [red, blue]}
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_definition_is_served_at_once() {
    let c = Cluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], CRD).await;
    let crd = c
        .kubectl_json(&["get", "crd", "widgets.example.com", "-o", "json"])
        .await;
    let established = crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|cond| cond["type"] == "Established" && cond["status"] == "True");
    assert!(established, "{crd}");

    // kubectl: create, defaulting, printer columns, both versions, scale, status.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n",
    )
    .await;
    let table = c.kubectl(&["get", "widgets"]).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "SIZE", "COLOR", "READY", "AGE"], "{table}");
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["w1", "3", "red"], "{table}");
    let all = c.kubectl(&["get", "all"]).await;
    assert!(all.contains("widget.example.com/w1"), "category all: {all}");
    let beta = c
        .kubectl_json(&["get", "widgets.v1beta1.example.com", "w1", "-o", "json"])
        .await;
    assert_eq!(beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(beta["spec"]["color"], "red");
    c.kubectl(&["scale", "widget", "w1", "--replicas=4"]).await;
    c.kubectl(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":9},"status":{"replicas":4,"conditions":[{"type":"Ready","status":"True"}]}}"#,
    ])
    .await;
    let w1 = c.kubectl_json(&["get", "widget", "w1", "-o", "json"]).await;
    assert_eq!(w1["spec"]["replicas"], 4);
    assert_eq!(w1["spec"]["size"], 3, "a status write keeps the spec");
    assert_eq!(w1["status"]["replicas"], 4);
    assert_eq!(
        w1["metadata"]["generation"], 2,
        "the scale moved the spec once"
    );
    // Server-side apply on a custom resource merges by its structural schema: a second manager
    // that sets another field shares the object, a change to kubectl's field conflicts.
    let manifest =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: applied}\nspec: {size: 2}\n";
    let out = c
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], manifest)
        .await;
    assert_eq!(out.trim(), "widget.example.com/applied serverside-applied");
    c.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=painter", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: applied}\nspec: {size: 2, color: blue}\n",
    )
    .await;
    let applied = c
        .kubectl_json(&[
            "get",
            "widget",
            "applied",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(
        (
            applied["spec"]["size"].clone(),
            applied["spec"]["color"].clone()
        ),
        (2.into(), "blue".into())
    );
    let managers: Vec<&str> = applied["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["kubectl", "painter"], "{applied}");
    let conflict = c
        .kubectl_fails(
            &[
                "apply",
                "--server-side",
                "--field-manager=painter",
                "-f",
                "-",
            ],
            Some(
                "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: applied}\nspec: {size: 5}\n",
            ),
        )
        .await;
    assert!(
        conflict.contains("conflict with \"kubectl\"") && conflict.contains(".spec.size"),
        "{conflict}"
    );
    c.kubectl(&["delete", "widget", "applied"]).await;
    let explain = c.kubectl(&["explain", "widget.spec"]).await;
    assert!(explain.contains("size\t<integer> -required-"), "{explain}");

    // An invalid object: upstream's 422 with the field named.
    let err = c
        .kubectl_fails(
            &["apply", "-f", "-"],
            Some("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {size: 0, color: green}\n"),
        )
        .await;
    assert!(err.contains("The Widget \"bad\" is invalid"), "{err}");
    assert!(
        err.contains(
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\""
        ),
        "{err}"
    );

    // kube: Api<DynamicObject> lists, watches, creates, patches and deletes.
    let client = c.client().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let mut events = watcher(widgets.clone(), watcher::Config::default()).boxed();
    // The watcher's initial list ends before the test acts.
    loop {
        match events.next().await {
            Some(Ok(watcher::Event::InitDone)) => break,
            Some(Ok(_)) => {}
            other => panic!("watch: {other:?}"),
        }
    }
    let w2: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w2"}, "spec": {"size": 2, "color": "blue"},
    }))
    .expect("object");
    widgets
        .create(&PostParams::default(), &w2)
        .await
        .expect("create");
    let listed = widgets.list(&Default::default()).await.expect("list");
    let names: Vec<String> = listed
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["w1", "w2"]);
    let patched = widgets
        .patch(
            "w2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 7}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.data["spec"]["size"], 7);
    let err = widgets
        .patch(
            "w2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": "big"}})),
        )
        .await
        .expect_err("a string is not an integer");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message
                    .contains("spec.size in body must be of type integer: \"string\""),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    let seen = async {
        while let Some(ev) = events.next().await {
            if let Ok(watcher::Event::Apply(o)) = ev
                && o.metadata.name.as_deref() == Some("w2")
                && o.data["spec"]["size"] == 7
            {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), seen)
        .await
        .expect("the watch sees the patched object");
    widgets
        .delete("w2", &DeleteParams::default())
        .await
        .expect("delete");

    // Deleting the definition removes its objects and stops serving them.
    c.kubectl(&["delete", "crd", "widgets.example.com"]).await;
    let err = widgets.list(&Default::default()).await.expect_err("gone");
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 404),
        other => panic!("{other:?}"),
    }
    c.kubectl_stdin(&["apply", "-f", "-"], CRD).await;
    let again = c.kubectl(&["get", "widgets", "-o", "name"]).await;
    assert_eq!(
        again.trim(),
        "",
        "objects went with their definition: {again}"
    );
    c.stop().await;
}

/// `kubectl apply` of a custom resource whose CRD is not installed (or of a directory holding a
/// `kustomization.yaml`): kubectl validates it on the client against `/openapi/v2`, which
/// client-go fetches as protobuf only, finds no schema for the kind, and then fails to map it
/// with upstream's advice to install the CRDs. A server that cannot answer the protobuf request
/// made kubectl stop at "unable to respond with a content type that the client supports".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_of_a_kind_without_its_crd_says_to_install_the_crds() {
    let c = Cluster::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let foo = dir.path().join("foo.yaml");
    std::fs::write(
        &foo,
        "apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: x\n  namespace: default\n",
    )
    .expect("manifest");
    let err = c
        .kubectl_fails(&["apply", "-f", &foo.to_string_lossy()], None)
        .await;
    assert!(
        err.contains(r#"no matches for kind "Foo" in version "example.com/v1""#)
            && err.contains("ensure CRDs are installed first"),
        "{err}"
    );
    // kubectl reads every definition of the protobuf document before it looks for Foo's, so
    // this also says the whole document parses for it.
    assert!(!err.contains("content type"), "{err}");

    let kustomize = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        kustomize.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n",
    )
    .expect("kustomization");
    let err = c
        .kubectl_fails(&["apply", "-f", &kustomize.path().to_string_lossy()], None)
        .await;
    assert!(
        err.contains(
            r#"no matches for kind "Kustomization" in version "kustomize.config.k8s.io/v1beta1""#
        ) && err.contains("ensure CRDs are installed first"),
        "{err}"
    );
}
