//! Server-side apply end to end: real `kubectl apply --server-side` and kube-rs `Patch::Apply`
//! against the embedded control plane, `managedFields` as kubectl shows them, conflicts and
//! forced applies, and the move from client-side to server-side apply.

use crate::common;

use common::{Cluster, deployment_yaml};
use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

/// `kubectl get KIND NAME -o json --show-managed-fields`.
async fn get_json(c: &Cluster, kind: &str, name: &str) -> Value {
    c.kubectl_json(&["get", kind, name, "-o", "json", "--show-managed-fields"])
        .await
}

fn rv(obj: &Value) -> &str {
    obj["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

/// The `managedFields` entry of a manager (and operation), failing the test when there is none.
fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| {
            entries
                .iter()
                .find(|e| e["manager"] == manager && e["operation"] == operation)
        })
        .unwrap_or_else(|| {
            panic!(
                "no {operation} entry of {manager:?}: {}",
                obj["metadata"]["managedFields"]
            )
        })
}

fn managers(obj: &Value) -> Vec<String> {
    let mut m: Vec<String> = obj["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    format!(
                        "{}/{}{}",
                        e["manager"].as_str().unwrap_or(""),
                        e["operation"].as_str().unwrap_or(""),
                        e["subresource"]
                            .as_str()
                            .map(|s| format!("/{s}"))
                            .unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    m.sort();
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_twice_changes_nothing() {
    let c = Cluster::start().await;
    let manifest = deployment_yaml("web", 2, "nginx:1.27");
    let out = c
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], &manifest)
        .await;
    assert_eq!(out.trim(), "deployment.apps/web serverside-applied");
    let first = get_json(&c, "deploy", "web").await;
    assert_eq!(first["spec"]["replicas"], 2);
    // Defaults still apply to an applied object.
    assert_eq!(first["spec"]["strategy"]["type"], "RollingUpdate");
    let applied = entry(&first, "kubectl", "Apply");
    assert_eq!(applied["apiVersion"], "apps/v1");
    assert_eq!(applied["fieldsType"], "FieldsV1");
    assert!(applied["time"].is_string(), "{applied}");
    assert!(applied.get("subresource").is_none(), "{applied}");
    assert_eq!(
        applied["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        })
    );
    assert_eq!(managers(&first), ["kubectl/Apply"]);

    // The same manifest again: no conflict, and nothing is written.
    let out = c
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], &manifest)
        .await;
    assert_eq!(out.trim(), "deployment.apps/web serverside-applied");
    let second = get_json(&c, "deploy", "web").await;
    assert_eq!(rv(&second), rv(&first), "a no-op apply wrote the object");
    assert_eq!(second, first);

    // kubectl shows the entries in upstream's layout.
    let yaml = c
        .kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .await;
    for want in [
        "managedFields:",
        "- apiVersion: apps/v1",
        "fieldsType: FieldsV1",
        "fieldsV1:",
        "f:replicas: {}",
        "k:{\"name\":\"app\"}:",
        "manager: kubectl",
        "operation: Apply",
    ] {
        assert!(yaml.contains(want), "`{want}` missing:\n{yaml}");
    }
    let hidden = c.kubectl(&["get", "deploy", "web", "-o", "yaml"]).await;
    assert!(!hidden.contains("managedFields"), "{hidden}");

    // A field dropped from the manifest goes from the object.
    let fewer = manifest.replace("        ports:\n        - containerPort: 80\n", "");
    c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &fewer)
        .await;
    let third = get_json(&c, "deploy", "web").await;
    assert!(
        third["spec"]["template"]["spec"]["containers"][0]
            .get("ports")
            .is_none(),
        "{}",
        third["spec"]["template"]
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_conflicts_with_apply_until_forced() {
    let c = Cluster::start().await;
    let manifest = deployment_yaml("web", 2, "nginx:1.27");
    c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &manifest)
        .await;
    c.kubectl(&["scale", "deploy", "web", "--replicas=5"]).await;
    let scaled = get_json(&c, "deploy", "web").await;
    assert_eq!(scaled["spec"]["replicas"], 5);
    let scaler = scaled["metadata"]["managedFields"]
        .as_array()
        .and_then(|m| m.iter().find(|e| e["subresource"] == "scale"))
        .unwrap_or_else(|| panic!("no scale entry: {}", scaled["metadata"]));
    assert_eq!(scaler["operation"], "Update");
    assert_eq!(scaler["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    // kubectl names no manager for `scale`: the server takes its user agent's product.
    let scale_manager = scaler["manager"].as_str().unwrap_or("").to_string();
    assert_eq!(scale_manager, "kubectl");
    // The applier no longer owns replicas.
    assert!(
        entry(&scaled, "kubectl", "Apply")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );

    let err = c
        .kubectl_fails(&["apply", "--server-side", "-f", "-"], Some(&manifest))
        .await;
    let want = format!(
        "Apply failed with 1 conflict: conflict with \"{scale_manager}\" with subresource \"scale\" using apps/v1: .spec.replicas"
    );
    assert!(err.contains(&want), "{err}");
    assert!(err.contains("--force-conflicts"), "{err}");
    assert_eq!(get_json(&c, "deploy", "web").await["spec"]["replicas"], 5);

    c.kubectl_stdin(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        &manifest,
    )
    .await;
    let forced = get_json(&c, "deploy", "web").await;
    assert_eq!(forced["spec"]["replicas"], 2);
    assert_eq!(managers(&forced), ["kubectl/Apply"]);
    assert!(
        entry(&forced, "kubectl", "Apply")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_some()
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_moves_to_server_side() {
    let c = Cluster::start().await;
    let manifest = deployment_yaml("web", 2, "nginx:1.27");
    c.kubectl_stdin(&["apply", "-f", "-"], &manifest).await;
    let created = get_json(&c, "deploy", "web").await;
    let csa = entry(&created, "kubectl-client-side-apply", "Update");
    assert!(
        csa["fieldsV1"]["f:spec"].get("f:replicas").is_some(),
        "{csa}"
    );

    // Another manager changing what client-side apply set conflicts with it...
    let changed = manifest.replace("replicas: 2", "replicas: 4");
    let err = c
        .kubectl_fails(
            &["apply", "--server-side", "--field-manager=ci", "-f", "-"],
            Some(&changed),
        )
        .await;
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
        ),
        "{err}"
    );
    // ...but kubectl takes over its own client-side apply, and keeps the annotation in step.
    c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &changed)
        .await;
    let migrated = get_json(&c, "deploy", "web").await;
    assert_eq!(migrated["spec"]["replicas"], 4);
    let last: Value = serde_json::from_str(
        migrated["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("annotation kept"),
    )
    .expect("annotation is JSON");
    assert_eq!(last["spec"]["replicas"], 4);
    entry(&migrated, "kubectl", "Apply");

    // Client-side apply still works afterwards.
    let out = c
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &changed.replace("nginx:1.27", "nginx:1.28"),
        )
        .await;
    assert_eq!(out.trim(), "deployment.apps/web configured");
    let back = get_json(&c, "deploy", "web").await;
    assert_eq!(
        back["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_writes_record_update_entries() {
    let c = Cluster::start().await;
    c.kubectl(&["create", "deployment", "shop", "--image=nginx:1.27"])
        .await;
    let created = get_json(&c, "deploy", "shop").await;
    let create = entry(&created, "kubectl-create", "Update");
    assert_eq!(create["apiVersion"], "apps/v1");
    assert!(
        create["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
            .get("k:{\"name\":\"nginx\"}")
            .is_some(),
        "{create}"
    );
    // Server-owned metadata and status are nobody's.
    assert!(create["fieldsV1"].get("f:status").is_none(), "{create}");
    assert!(
        create["fieldsV1"]["f:metadata"].get("f:uid").is_none()
            && create["fieldsV1"]["f:metadata"].get("f:name").is_none(),
        "{create}"
    );

    c.kubectl(&["label", "deploy", "shop", "tier=web"]).await;
    c.kubectl(&["set", "image", "deploy/shop", "nginx=nginx:1.28"])
        .await;
    let edited = get_json(&c, "deploy", "shop").await;
    let label = entry(&edited, "kubectl-label", "Update");
    assert_eq!(
        label["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}})
    );
    let image = entry(&edited, "kubectl-set", "Update");
    assert_eq!(
        image["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({"k:{\"name\":\"nginx\"}": {"f:image": {}}})
    );
    // The image moved from its creator to `kubectl set`.
    let create = entry(&edited, "kubectl-create", "Update");
    assert_eq!(
        create["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
            .get("f:image"),
        None
    );
    c.stop().await;
}

/// A Lease with the given spec (ConfigMaps are not served yet; a Lease's spec is as free).
fn lease(name: &str, spec: Value) -> Lease {
    serde_json::from_value(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name}, "spec": spec}),
    )
    .expect("lease")
}

/// The API error's status, failing the test if the call succeeded or failed otherwise.
fn api_error<T: std::fmt::Debug>(r: kube::Result<T>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_patch_apply_conflicts_and_force() {
    let c = Cluster::start().await;
    let client = c.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let holder = |l: &Lease| l.spec.as_ref().and_then(|s| s.holder_identity.clone());
    let duration = |l: &Lease| l.spec.as_ref().and_then(|s| s.lease_duration_seconds);

    // Apply creates.
    let mine = PatchParams::apply("my-manager");
    let made = leases
        .patch(
            "lock",
            &mine,
            &Patch::Apply(lease(
                "lock",
                json!({"holderIdentity": "a", "leaseDurationSeconds": 15}),
            )),
        )
        .await
        .expect("apply creates");
    assert_eq!(holder(&made).as_deref(), Some("a"));
    let entries = made.metadata.managed_fields.clone().unwrap_or_default();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].manager.as_deref(), Some("my-manager"));
    assert_eq!(entries[0].operation.as_deref(), Some("Apply"));

    // Another manager sharing a value is fine; changing one is a conflict.
    let theirs = PatchParams::apply("other-manager");
    leases
        .patch(
            "lock",
            &theirs,
            &Patch::Apply(lease("lock", json!({"leaseDurationSeconds": 15}))),
        )
        .await
        .expect("same value: shared ownership");
    let changing = lease(
        "lock",
        json!({"holderIdentity": "b", "leaseDurationSeconds": 15}),
    );
    let status = api_error(
        leases
            .patch("lock", &theirs, &Patch::Apply(&changing))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"my-manager\": .spec.holderIdentity"
    );
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert_eq!(causes.len(), 1, "{status:?}");
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".spec.holderIdentity");
    assert_eq!(causes[0].message, "conflict with \"my-manager\"");

    // Forced: the value changes and ownership moves.
    let forced = leases
        .patch("lock", &theirs.clone().force(), &Patch::Apply(&changing))
        .await
        .expect("forced apply");
    assert_eq!(holder(&forced).as_deref(), Some("b"));
    let raw = serde_json::to_value(&forced.metadata.managed_fields).expect("json");
    let of = |m: &str| {
        raw.as_array()
            .and_then(|a| a.iter().find(|e| e["manager"] == m))
            .map(|e| e["fieldsV1"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        of("my-manager"),
        json!({"f:spec": {"f:leaseDurationSeconds": {}}})
    );
    assert_eq!(
        of("other-manager"),
        json!({"f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}})
    );

    // my-manager gives up the duration: the other manager still owns it, so it stays.
    let after = leases
        .patch("lock", &mine, &Patch::Apply(lease("lock", json!({}))))
        .await
        .expect("apply without the duration");
    assert_eq!(duration(&after), Some(15));

    // A typed Deployment through kube's apply, with a dry run first.
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": {"app": "api"}},
                "spec": {"containers": [{"name": "api", "image": "nginx:1.27"}]}}}}))
    .expect("deployment");
    let dry = deployments
        .patch(
            "api",
            &PatchParams::apply("my-manager").dry_run(),
            &Patch::Apply(&d),
        )
        .await
        .expect("dry run");
    assert_eq!(dry.spec.as_ref().and_then(|s| s.replicas), Some(1));
    assert!(
        deployments.get_opt("api").await.expect("get").is_none(),
        "a dry run created the object"
    );
    deployments
        .patch("api", &PatchParams::apply("my-manager"), &Patch::Apply(&d))
        .await
        .expect("apply deployment");
    assert!(deployments.get_opt("api").await.expect("get").is_some());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_apply_requests_are_refused_as_upstream_does() {
    let c = Cluster::start().await;
    let client = c.client().await;
    let patch = |query: &str, body: &str| {
        http::Request::patch(format!(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/x{query}"
        ))
        .header("Content-Type", "application/apply-patch+yaml")
        .body(body.as_bytes().to_vec())
        .expect("request")
    };
    let body = "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: x\nspec:\n  holderIdentity: a\n";
    let err = api_error(client.request_text(patch("", body)).await);
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"), "{err:?}");
    assert_eq!(
        err.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let err = api_error(
        client
            .request_text(patch("?fieldManager=m", &body.replace("/v1\n", "/v2\n")))
            .await,
    );
    assert_eq!(err.code, 400, "{err:?}");
    assert!(
        err.message
            .contains("Incorrect version specified in apply patch")
    );
    let err = api_error(
        client
            .request_text(patch(
                "?fieldManager=m",
                &body.replace(
                    "  name: x\n",
                    "  name: x\n  managedFields:\n  - manager: x\n",
                ),
            ))
            .await,
    );
    assert_eq!(err.code, 400, "{err:?}");
    assert_eq!(err.message, "metadata.managedFields must be nil");
    // `force` belongs to applies only.
    let merge =
        http::Request::patch("/apis/coordination.k8s.io/v1/namespaces/default/leases/x?force=true")
            .header("Content-Type", "application/merge-patch+json")
            .body(b"{}".to_vec())
            .expect("request");
    let err = api_error(client.request_text(merge).await);
    assert_eq!(err.code, 422, "{err:?}");
    assert!(err.message.contains("force: Forbidden"), "{}", err.message);
    // Nothing was created by the refused requests.
    let leases: Api<Lease> = Api::default_namespaced(client);
    assert!(leases.get_opt("x").await.expect("get").is_none());
    c.stop().await;
}
