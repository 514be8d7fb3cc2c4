//! What server-side apply's bookkeeping costs on the API server's hottest writes, measured on
//! purpose (`cargo test -p api --release --test apply_cost -- --ignored --nocapture`), never in CI:
//! the `Update` entry of a pod's create and of a kubelet's status write, next to a deep copy of
//! the same pod for scale.

use api::apply::{OpenApi, Requested, Scope, Writer, builtin, update};
use k8s_openapi::api::core::v1::Pod;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Value, json};
use std::{hint::black_box, time::Instant};

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d4b9-abc12", "namespace": "default", "generateName": "web-7d4b9-",
            "labels": {"app": "web", "pod-template-hash": "7d4b9"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9",
                "uid": "0b7e3f52-4b2c-4a57-9a8e-3c1d2f1e5a10", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "securityContext": {}, "schedulerName": "default-scheduler", "enableServiceLinks": true,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort"}})
}

fn per_op(n: u32, mut f: impl FnMut()) -> std::time::Duration {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed() / n
}

#[test]
#[ignore = "a measurement, run on purpose"]
fn bookkeeping_cost_per_write() {
    let mut g = SchemaGenerator::new(SchemaSettings::openapi3());
    g.subschema_for::<Pod>();
    let mut schemas = g.take_definitions(true);
    builtin::decorate(&mut schemas);
    let schema = OpenApi::new(&schemas["io.k8s.api.core.v1.Pod"], &schemas);
    let n = 20_000;
    let creator = Writer {
        manager: "kube-controller-manager",
        api_version: "v1",
        subresource: "",
        now: "2024-01-01T00:00:00Z",
    };
    let mut created = pod();
    update(
        None,
        &mut created,
        &Requested::Keep,
        &schema,
        &creator,
        Scope::Except("status"),
    );
    let create = per_op(n, || {
        let mut p = pod();
        update(
            None,
            &mut p,
            &Requested::Keep,
            &schema,
            &creator,
            Scope::Except("status"),
        );
        black_box(p);
    });
    let kubelet = Writer {
        manager: "kubelet",
        api_version: "v1",
        subresource: "status",
        now: "2024-01-01T00:00:01Z",
    };
    let mut running = created.clone();
    running["status"] = json!({"phase": "Running", "podIP": "10.64.0.7", "podIPs": [{"ip": "10.64.0.7"}],
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "nginx:1.27",
            "imageID": "nginx@sha256:0", "started": true, "state": {"running": {"startedAt": "2024-01-01T00:00:01Z"}}}]});
    let status = per_op(n, || {
        let mut p = running.clone();
        update(
            Some(&created),
            &mut p,
            &Requested::Keep,
            &schema,
            &kubelet,
            Scope::Only("status"),
        );
        black_box(p);
    });
    let copy = per_op(n, || {
        black_box(running.clone());
    });
    let bytes = created["metadata"]["managedFields"].to_string().len();
    eprintln!(
        "per write: create {create:?} (managedFields {bytes} bytes), status {status:?}; a deep copy of the pod {copy:?}"
    );
}
