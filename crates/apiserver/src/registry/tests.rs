#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use super::*;
use crate::admission::{self, Part};
use serde_json::{Value, json};

/// A cluster with nothing in it.
struct Empty;

impl Cluster for Empty {
    fn objects(&self, _: &str, _: &str) -> Vec<Value> {
        Vec::new()
    }
}

/// What a status write keeps from the request: spec, labels, annotations, finalizers, owner
/// references (`true`: the request's value is stored; `false`: the stored one stays), per kind,
/// as upstream's status strategies' `PrepareForUpdate` (`pkg/registry/<group>/<kind>/strategy.go`).
const STATUS_WRITES: &[(&str, &str, [bool; 5])] = &[
    // newPod.Spec = oldPod.Spec; DeletionTimestamp = nil; OwnerReferences = old.
    ("", "Pod", [false, true, true, true, false]),
    ("", "Node", [false, true, true, true, true]),
    ("", "Namespace", [false, true, true, true, true]),
    ("", "PersistentVolumeClaim", [false, true, true, true, true]),
    ("", "PersistentVolume", [false, true, true, true, true]),
    // newDeployment.Spec = old.Spec; newDeployment.Labels = old.Labels.
    ("apps", "Deployment", [false, false, true, true, true]),
    ("apps", "ReplicaSet", [false, true, true, true, true]),
    ("apps", "StatefulSet", [false, true, true, true, true]),
    ("apps", "DaemonSet", [false, true, true, true, true]),
    ("", "Service", [false, true, true, true, true]),
    ("", "ReplicationController", [false, true, true, true, true]),
    ("", "ResourceQuota", [false, true, true, true, true]),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        [false, true, true, true, true],
    ),
    ("batch", "CronJob", [false, true, true, true, true]),
    ("batch", "Job", [false, true, true, true, true]),
    (
        "certificates.k8s.io",
        "CertificateSigningRequest",
        [false, true, true, true, true],
    ),
    (
        "networking.k8s.io",
        "Ingress",
        [false, true, true, true, true],
    ),
    (
        "policy",
        "PodDisruptionBudget",
        [false, true, true, true, true],
    ),
    (
        "storage.k8s.io",
        "VolumeAttachment",
        [false, true, true, true, true],
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        [false, true, true, true, true],
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        [false, false, false, true, false],
    ),
    (
        "apiregistration.k8s.io",
        "APIService",
        [false, false, false, false, false],
    ),
    // newFlowSchema.ObjectMeta = old.ObjectMeta; Spec = old.Spec (the same for levels).
    (
        "flowcontrol.apiserver.k8s.io",
        "FlowSchema",
        [false, false, false, false, false],
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        [false, false, false, false, false],
    ),
];

/// A minimal object of `def` the strategy accepts, with a spec to change.
fn minimal(def: &Kind) -> Value {
    let mut obj = json!({
        "metadata": {"name": "x", "labels": {"a": "1"}, "annotations": {"b": "1"},
            "finalizers": ["example.com/f"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"}]},
    });
    if def.namespaced {
        obj["metadata"]["namespace"] = json!("default");
    }
    let template = json!({"metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let spec = match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => json!({"containers": [{"name": "c", "image": "nginx"}]}),
        ("", "PersistentVolumeClaim") => json!({"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}),
        ("", "PersistentVolume") => json!({"accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}),
        ("apps", "StatefulSet") => json!({"selector": {"matchLabels": {"app": "x"}},
            "serviceName": "x", "template": template}),
        ("apps", _) => json!({"selector": {"matchLabels": {"app": "x"}}, "template": template}),
        ("", "Service") => json!({"ports": [{"port": 80}]}),
        ("", "ReplicationController") => json!({"selector": {"app": "x"}, "template": template}),
        ("autoscaling", _) => json!({"maxReplicas": 3,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}}),
        ("batch", "Job") => json!({"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "i"}]}}}),
        ("batch", "CronJob") => {
            json!({"schedule": "* * * * *", "jobTemplate": {"spec": {"template":
            {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}})
        }
        ("certificates.k8s.io", _) => json!({"request": "eA==", "signerName": "example.com/x",
            "usages": ["client auth"]}),
        ("policy", _) => json!({"maxUnavailable": 1}),
        ("apiregistration.k8s.io", _) => {
            obj["metadata"]["name"] = json!("v1.x.example.com");
            json!({"group": "x.example.com", "version": "v1", "groupPriorityMinimum": 100,
                "versionPriority": 10})
        }
        ("node.k8s.io", _) => {
            obj["handler"] = json!("runc");
            json!({})
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""],
                "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                "validations": [{"expression": "true"}]})
        }
        ("storage.k8s.io", "VolumeAttachment") => json!({"attacher": "x", "nodeName": "n",
            "source": {"persistentVolumeName": "pv"}}),
        ("apiextensions.k8s.io", _) => {
            obj["metadata"]["name"] = json!("xs.example.com");
            json!({"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "X", "plural": "xs"},
                "versions": [{"name": "v1", "served": true, "storage": true}]})
        }
        _ => json!({}),
    };
    obj["spec"] = spec;
    obj
}

/// Changes the spec in a way the kind allows (workloads: `minReadySeconds`, pods:
/// `activeDeadlineSeconds`; others: an unknown
/// field, which the shape check ignores) so that a kept spec is told apart.
fn probe_spec(obj: &mut Value) {
    if obj["spec"].get("selector").is_some() {
        obj["spec"]["minReadySeconds"] = json!(5);
    } else if obj["spec"].get("containers").is_some() {
        obj["spec"]["activeDeadlineSeconds"] = json!(30);
    } else {
        obj["spec"]["rollwrightProbe"] = json!(true);
    }
}

#[test]
fn status_writes_keep_what_upstream_keeps() {
    let registry = Registry::new();
    let with_status: Vec<Arc<Kind>> = registry
        .kinds()
        .iter()
        .filter(|k| k.has(Subresource::Status) && matches!(k.storage, Storage::Own))
        .cloned()
        .collect();
    for def in &with_status {
        let Some((_, _, keeps)) = STATUS_WRITES
            .iter()
            .find(|(g, k, _)| *g == def.group && *k == def.kind)
        else {
            panic!(
                "{}: add its status strategy to STATUS_WRITES",
                def.group_kind()
            );
        };
        let mut old = minimal(def);
        admission::prepare_create(
            def,
            &mut old,
            def.namespaced.then_some("default"),
            &Empty,
            admission::Pass::VALIDATED,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", def.kind));
        let mut req = old.clone();
        probe_spec(&mut req);
        req["metadata"]["labels"]["a"] = json!("2");
        req["metadata"]["annotations"]["b"] = json!("2");
        req["metadata"]["finalizers"] = json!(["example.com/f", "example.com/g"]);
        req["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": "u2"}]);
        req["status"] = json!({"observedGeneration": 7});
        let mut new = req.clone();
        admission::prepare_update(def, &mut new, &old, Part::Status, &Empty)
            .unwrap_or_else(|e| panic!("{}: {e}", def.kind));
        let parts: [(&str, &str); 5] = [
            ("", "spec"),
            ("metadata", "labels"),
            ("metadata", "annotations"),
            ("metadata", "finalizers"),
            ("metadata", "ownerReferences"),
        ];
        for ((parent, field), keep) in parts.iter().zip(keeps) {
            let at = |v: &Value| {
                let holder = if parent.is_empty() { v } else { &v[*parent] };
                holder.get(*field).cloned()
            };
            let want = if *keep { at(&req) } else { at(&old) };
            assert_eq!(at(&new), want, "{} status write: {field}", def.group_kind());
        }
        assert_eq!(new["status"]["observedGeneration"], 7, "{}", def.kind);
        assert_eq!(
            new["metadata"]["uid"], old["metadata"]["uid"],
            "{}",
            def.kind
        );
        assert_eq!(
            new["metadata"].get("generation"),
            old["metadata"].get("generation"),
            "{}: a status write never moves the generation",
            def.kind
        );
    }
}

#[test]
fn main_writes_keep_status_and_move_generation_as_upstream() {
    let registry = Registry::new();
    // (group, kind, generation after a spec change, after an annotation change)
    let cases = [
        ("apps", "Deployment", Some(2), Some(2)),
        ("apps", "ReplicaSet", Some(2), Some(1)),
        ("apps", "StatefulSet", Some(2), Some(1)),
        ("apps", "DaemonSet", Some(2), Some(1)),
        ("", "Pod", None, None),
        ("", "Node", None, None),
    ];
    for (group, kind, after_spec, after_annotation) in cases {
        let def = registry.find_kind(group, kind).unwrap();
        let mut old = minimal(&def);
        admission::prepare_create(
            &def,
            &mut old,
            def.namespaced.then_some("default"),
            &Empty,
            admission::Pass::VALIDATED,
        )
        .unwrap();
        old["status"] = json!({"observedGeneration": 1});
        let generation = |v: &Value| v["metadata"].get("generation").and_then(Value::as_i64);
        let mut spec = old.clone();
        probe_spec(&mut spec);
        spec["status"] = json!({"observedGeneration": 9});
        admission::prepare_update(&def, &mut spec, &old, Part::Main, &Empty).unwrap();
        assert_eq!(generation(&spec), after_spec, "{kind} spec");
        assert_eq!(
            spec["status"]["observedGeneration"], 1,
            "{kind} keeps status"
        );
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"] = json!({"b": "2"});
        admission::prepare_update(&def, &mut annotated, &old, Part::Main, &Empty).unwrap();
        assert_eq!(
            generation(&annotated),
            after_annotation,
            "{kind} annotations"
        );
    }
}

#[test]
fn every_kind_is_named_once_and_lookups_agree() {
    let registry = Registry::new();
    let kinds = registry.kinds();
    for (i, k) in kinds.iter().enumerate() {
        assert!(
            !kinds[..i]
                .iter()
                .any(|o| o.group == k.group && o.version == k.version && o.plural == k.plural),
            "{} twice",
            k.group_resource()
        );
        let found = registry.find(&k.group, &k.version, &k.plural).unwrap();
        assert!(Arc::ptr_eq(&found, k));
        let owner = registry.storage_of(k);
        assert!(
            matches!(owner.storage, Storage::Own | Storage::Nowhere),
            "{k:?}"
        );
        assert_eq!(owner.key_prefix(), k.key_prefix());
    }
}

#[test]
fn kinds_register_and_go_at_run_time() {
    let registry = Registry::new();
    let before = registry.revision();
    let widget = Kind::new("example.com", "v1", "Widget", "widgets", true);
    registry.register(widget);
    assert!(registry.revision() > before);
    let w = registry.find("example.com", "v1", "widgets").unwrap();
    assert_eq!(w.key(Some("ns"), "a"), "/registry/example.com/widgets/ns/a");
    assert!(
        registry
            .group_versions()
            .contains(&("example.com".into(), "v1".into()))
    );
    registry.remove("example.com", "widgets");
    assert!(registry.find("example.com", "v1", "widgets").is_none());
    // Another registry never saw it.
    assert!(
        Registry::new()
            .find("example.com", "v1", "widgets")
            .is_none()
    );
}
