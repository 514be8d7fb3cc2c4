#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use super::*;
use std::sync::LazyLock;

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);

fn doc(path: &str) -> Value {
    group_version(&REGISTRY, path).unwrap_or_else(|| panic!("{path} missing"))
}

/// Every document's path.
fn all_paths() -> Vec<String> {
    index(&REGISTRY)["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[test]
fn index_lists_every_group_version_with_hash() {
    let idx = index(&REGISTRY);
    let paths = idx["paths"].as_object().unwrap();
    let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
    for want in [
        "api/v1",
        "apis/apps/v1",
        "apis/coordination.k8s.io/v1",
        "apis/storage.k8s.io/v1",
    ] {
        assert!(keys.contains(&want), "{want} in {keys:?}");
    }
    let url = paths["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
    let hash = group_version_hash(&REGISTRY, "apis/apps/v1").unwrap();
    assert_eq!(url, format!("/openapi/v3/apis/apps/v1?hash={hash}"));
    assert_eq!(hash.len(), 32);
    assert!(group_version(&REGISTRY, "apis/example.com/v1").is_none());
    assert_eq!(
        group_version_bytes(&REGISTRY, "apis/apps/v1").unwrap(),
        Bytes::from(serde_json::to_vec(&doc("apis/apps/v1")).unwrap())
    );
}

#[test]
fn deployment_patch_declares_field_validation_and_smp() {
    let d = doc("apis/apps/v1");
    let op = &d["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(op["operationId"], "patchAppsV1NamespacedDeployment");
    assert_eq!(op["x-kubernetes-action"], "patch");
    assert_eq!(
        op["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    let names: Vec<&str> = op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["in"] == "query")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for want in ["fieldValidation", "dryRun", "fieldManager", "force"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let content = op["requestBody"]["content"].as_object().unwrap();
    for t in [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ] {
        assert!(content.contains_key(t), "{t}");
    }
}

#[test]
fn every_patch_op_of_a_kind_has_field_validation() {
    // kubectl stops at the first PATCH whose GVK matches (map order), so all must have it.
    for path in all_paths() {
        let d = doc(&path);
        for (p, item) in d["paths"].as_object().unwrap() {
            if let Some(op) = item.get("patch") {
                let has = op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|q| q["name"] == "fieldValidation" && q["in"] == "query");
                assert!(has, "{p}");
                assert!(op["x-kubernetes-group-version-kind"].is_object(), "{p}");
            }
        }
    }
}

#[test]
fn operation_ids_follow_upstream() {
    let cases = [
        (
            "api/v1",
            "/api/v1/namespaces/{namespace}/pods",
            "get",
            "listCoreV1NamespacedPod",
        ),
        (
            "api/v1",
            "/api/v1/namespaces/{namespace}/pods/{name}/binding",
            "post",
            "createCoreV1NamespacedPodBinding",
        ),
        (
            "api/v1",
            "/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            "post",
            "createCoreV1NamespacedPodEviction",
        ),
        (
            "api/v1",
            "/api/v1/namespaces/{namespace}/pods/{name}/status",
            "patch",
            "patchCoreV1NamespacedPodStatus",
        ),
        (
            "api/v1",
            "/api/v1/pods",
            "get",
            "listCoreV1PodForAllNamespaces",
        ),
        (
            "api/v1",
            "/api/v1/nodes",
            "delete",
            "deleteCoreV1CollectionNode",
        ),
        ("api/v1", "/api/v1/nodes/{name}", "get", "readCoreV1Node"),
        (
            "api/v1",
            "/api/v1/watch/nodes/{name}",
            "get",
            "watchCoreV1Node",
        ),
        (
            "api/v1",
            "/api/v1/watch/namespaces/{namespace}/pods",
            "get",
            "watchCoreV1NamespacedPodList",
        ),
        (
            "apis/apps/v1",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
            "put",
            "replaceAppsV1NamespacedDeploymentScale",
        ),
        (
            "apis/apps/v1",
            "/apis/apps/v1/watch/daemonsets",
            "get",
            "watchAppsV1DaemonSetListForAllNamespaces",
        ),
        (
            "apis/apps/v1",
            "/apis/apps/v1/namespaces/{namespace}/replicasets",
            "delete",
            "deleteAppsV1CollectionNamespacedReplicaSet",
        ),
        (
            "apis/coordination.k8s.io/v1",
            "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            "put",
            "replaceCoordinationV1NamespacedLease",
        ),
    ];
    for (d, path, method, id) in cases {
        let d = doc(d);
        assert_eq!(
            d["paths"][path][method]["operationId"], id,
            "{path} {method}"
        );
    }
    let core = doc("api/v1");
    assert!(core["paths"]["/api/v1/namespaces"].get("delete").is_none());
    let scale = &doc("apis/apps/v1")["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
        ["get"];
    assert_eq!(
        scale["x-kubernetes-group-version-kind"],
        json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
    );
    let binding = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"];
    assert_eq!(
        binding["x-kubernetes-group-version-kind"],
        json!({"group": "", "kind": "Binding", "version": "v1"})
    );
}

#[test]
fn kind_schemas_carry_gvk() {
    let d = doc("apis/apps/v1");
    let s = &d["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        s["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    assert_eq!(
        d["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentList"]["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "DeploymentList", "version": "v1"}])
    );
    for name in [
        "io.k8s.api.autoscaling.v1.Scale",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    ] {
        assert!(d["components"]["schemas"].get(name).is_some(), "{name}");
    }
    let core = doc("api/v1");
    for name in [
        "io.k8s.api.core.v1.Binding",
        "io.k8s.api.policy.v1.Eviction",
        "io.k8s.api.core.v1.PodList",
    ] {
        assert!(core["components"]["schemas"].get(name).is_some(), "{name}");
    }
    // Every served kind resolves.
    for def in REGISTRY.kinds().iter() {
        let s = schema_of(def).unwrap();
        assert_eq!(s["x-kubernetes-group-version-kind"][0]["kind"], def.kind);
        if !def.is_stored() {
            continue;
        }
        let list =
            COMPONENTS
                .by_gvk
                .get(&(def.group.clone(), def.version.clone(), def.list_kind()));
        assert!(list.is_some(), "{}", def.list_kind());
    }
}

#[test]
fn all_refs_resolve_within_each_document() {
    for path in all_paths() {
        let d = doc(&path);
        let mut refs = Vec::new();
        collect_refs(&d, &mut refs);
        assert!(!refs.is_empty());
        let schemas = d["components"]["schemas"].as_object().unwrap();
        for r in refs {
            assert!(schemas.contains_key(&r), "{path}: {r} unresolved");
        }
        // And no ref escapes the components namespace (e.g. schemars' `#/$defs/`).
        let text = serde_json::to_string(&d).unwrap();
        assert!(
            !text.contains("#/$defs/") && !text.contains("#/definitions/"),
            "{path}"
        );
    }
}

#[test]
fn patch_meta_is_placed_everywhere() {
    let mut schemas = COMPONENTS.schemas.clone();
    assert_eq!(
        api::apply::builtin::place_patch_strategies(&mut schemas),
        api::apply::builtin::patch_strategy_count()
    );
    let d = doc("apis/apps/v1");
    let s = &d["components"]["schemas"];
    let containers = &s["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    let ports = &s["io.k8s.api.core.v1.Container"]["properties"]["ports"];
    assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
    let mounts = &s["io.k8s.api.core.v1.Container"]["properties"]["volumeMounts"];
    assert_eq!(mounts["x-kubernetes-patch-merge-key"], "mountPath");
    let fin = &s["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["finalizers"];
    assert_eq!(fin["x-kubernetes-patch-strategy"], "merge");
    assert!(fin.get("x-kubernetes-patch-merge-key").is_none());
}

#[test]
fn pod_update_policy_is_in_the_schemas() {
    let d = doc("apis/apps/v1");
    for schema in POD_UPDATE_POLICY_IN {
        assert_eq!(
            d["components"]["schemas"][*schema]["properties"]["podUpdatePolicy"]["type"], "string",
            "{schema}"
        );
    }
}

#[test]
fn unknown_fields_cases() {
    let cases: Vec<(&str, &str, Value, Vec<&str>)> = vec![
        (
            "apps",
            "Deployment",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "labels": {"x": "y"}},
                   "spec": {"replicaz": 3, "selector": {"matchLabels": {"a": "b"}},
                            "template": {"spec": {"containers": [{"name": "c", "image": "i", "imagez": "j"}]}}}}),
            vec![
                "unknown field \"spec.replicaz\"",
                "unknown field \"spec.template.spec.containers[0].imagez\"",
            ],
        ),
        (
            "apps",
            "DaemonSet",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "a"},
                   "spec": {"updateStrategy": {"type": "RollingUpdate",
                            "rollingUpdate": {"maxUnavailable": 1, "podUpdatePolicy": "InPlaceIfPossible"}}}}),
            vec![],
        ),
        (
            "apps",
            "StatefulSet",
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0, "podUpdatePolicy": "Recreate"}}}}),
            vec![],
        ),
        (
            "",
            "Pod",
            json!({"metadata": {"annotations": {"a": "b"}, "managedFields": [{"fieldsV1": {"f:spec": {}}}]},
                   "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]},
                   "status": {"bogus": 1}}),
            vec!["unknown field \"status.bogus\""],
        ),
        (
            "apps",
            "ControllerRevision",
            json!({"data": {"anything": {"goes": true}}, "revision": 1, "extra": 1}),
            vec!["unknown field \"extra\""],
        ),
        ("apps", "Nope", json!({"x": 1}), vec![]),
    ];
    for (group, kind, obj, want) in cases {
        let got = REGISTRY
            .find_kind(group, kind)
            .map(|def| unknown_fields(&def, &obj))
            .unwrap_or_default();
        assert_eq!(got, want, "{kind}");
    }
}

#[test]
fn property_descriptions_come_from_k8s_openapi() {
    assert!(property_description("io.k8s.api.core.v1.PodStatus", "podIP").is_some());
    assert!(property_description("io.k8s.api.core.v1.PodStatus", "nope").is_none());
}

#[test]
fn gv_names() {
    let cases = [
        ("", "v1", "/api/v1", "CoreV1", "core_v1"),
        ("apps", "v1", "/apis/apps/v1", "AppsV1", "apps_v1"),
        (
            "coordination.k8s.io",
            "v1",
            "/apis/coordination.k8s.io/v1",
            "CoordinationV1",
            "coordination_v1",
        ),
        (
            "rbac.authorization.k8s.io",
            "v1beta1",
            "/apis/rbac.authorization.k8s.io/v1beta1",
            "RbacAuthorizationV1beta1",
            "rbacAuthorization_v1beta1",
        ),
    ];
    for (g, v, prefix, op, tag) in cases {
        let gv = Gv::new(g, v);
        assert_eq!(
            (gv.prefix.as_str(), gv.op.as_str(), gv.tag.as_str()),
            (prefix, op, tag)
        );
    }
}
