#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]
use super::{render::table, *};
use crate::registry::{Kind, Registry};
use std::sync::Arc;

fn find_kind(group: &str, kind: &str) -> Option<Arc<Kind>> {
    Registry::new().find_kind(group, kind)
}

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

fn row(group: &str, kind: &str, obj: Value) -> Vec<Value> {
    let def = find_kind(group, kind).unwrap();
    let t = table(&def.printer, &[&obj], now(), IncludeObject::None, json!({}));
    t["rows"][0]["cells"].as_array().unwrap().clone()
}

fn pod(status: Value) -> Value {
    json!({
        "metadata": {"name": "p", "creationTimestamp": "2024-05-01T11:59:55Z"},
        "spec": {"containers": [{"name": "a", "image": "x"}], "nodeName": "n1"},
        "status": status,
    })
}

#[test]
fn human_duration_matches_upstream() {
    const S: i64 = 1_000_000_000;
    let cases = [
        (-2 * S, "<invalid>"),
        (-S, "0s"),
        (-S / 2, "0s"),
        (0, "0s"),
        (5 * S, "5s"),
        (119 * S, "119s"),
        (120 * S, "2m"),
        (182 * S, "3m2s"),
        (599 * S, "9m59s"),
        (600 * S, "10m"),
        (179 * 60 * S, "179m"),
        (3 * 3600 * S, "3h"),
        (3 * 3600 * S + 5 * 60 * S, "3h5m"),
        (8 * 3600 * S, "8h"),
        (47 * 3600 * S, "47h"),
        (51 * 3600 * S, "2d3h"),
        (48 * 3600 * S, "2d"),
        (8 * 24 * 3600 * S, "8d"),
        (729 * 24 * 3600 * S, "729d"),
        (730 * 24 * 3600 * S, "2y"),
        (775 * 24 * 3600 * S, "2y45d"),
        (8 * 365 * 24 * 3600 * S, "8y"),
    ];
    for (d, want) in cases {
        assert_eq!(human_duration(d), want, "{d}");
    }
}

#[test]
fn pod_status_cases() {
    let running = |ready: bool, restarts: i64| json!({"name": "a", "ready": ready, "restartCount": restarts, "state": {"running": {"startedAt": "2024-05-01T11:00:00Z"}}});
    let cases: Vec<(&str, Value, &str, &str, &str)> = vec![
        (
            "pending",
            json!({"phase": "Pending"}),
            "0/1",
            "Pending",
            "0",
        ),
        (
            "running",
            json!({"phase": "Running", "containerStatuses": [running(true, 0)], "conditions": [{"type": "Ready", "status": "True"}]}),
            "1/1",
            "Running",
            "0",
        ),
        (
            "image pull backoff",
            json!({"phase": "Pending", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}),
            "0/1",
            "ImagePullBackOff",
            "0",
        ),
        (
            "crash loop with last restart",
            json!({"phase": "Running", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2024-05-01T11:59:48Z"}}}]}),
            "0/1",
            "CrashLoopBackOff",
            "3 (12s ago)",
        ),
        (
            "completed",
            json!({"phase": "Succeeded", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
            "0/1",
            "Completed",
            "0",
        ),
        (
            "terminated without reason, signal",
            json!({"phase": "Failed", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
            "0/1",
            "Signal:9",
            "0",
        ),
        (
            "terminated without reason, exit code",
            json!({"phase": "Failed", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 2}}}]}),
            "0/1",
            "ExitCode:2",
            "0",
        ),
        (
            "evicted",
            json!({"phase": "Failed", "reason": "Evicted"}),
            "0/1",
            "Evicted",
            "0",
        ),
        (
            "scheduling gated",
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
            "0/1",
            "SchedulingGated",
            "0",
        ),
    ];
    for (name, status, ready, reason, restarts) in cases {
        let cells = row("", "Pod", pod(status));
        assert_eq!(cells[0], "p", "{name}");
        assert_eq!(cells[1], ready, "{name}");
        assert_eq!(cells[2], reason, "{name}");
        assert_eq!(cells[3], restarts, "{name}");
        assert_eq!(cells[4], "5s", "{name}");
    }
}

#[test]
fn pod_terminating_and_node_lost() {
    let mut p = pod(
        json!({"phase": "Running", "containerStatuses": [{"name": "a", "ready": true, "state": {"running": {}}}]}),
    );
    p["metadata"]["deletionTimestamp"] = json!("2024-05-01T12:00:00Z");
    assert_eq!(row("", "Pod", p.clone())[2], "Terminating");
    p["status"]["reason"] = json!("NodeLost");
    assert_eq!(row("", "Pod", p.clone())[2], "Unknown");
    let mut done = pod(json!({"phase": "Succeeded"}));
    done["metadata"]["deletionTimestamp"] = json!("2024-05-01T12:00:00Z");
    assert_eq!(row("", "Pod", done)[2], "Succeeded");
}

#[test]
fn pod_init_containers() {
    let base = |init_statuses: Value, conditions: Value| {
        json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": init_statuses, "conditions": conditions,
                       "containerStatuses": [{"name": "a", "state": {"waiting": {"reason": "PodInitializing"}}}]},
        })
    };
    let cases = [
        (
            json!([{"name": "i1", "state": {"terminated": {"exitCode": 0}}}, {"name": "i2", "state": {"running": {}}}]),
            "Init:1/2",
        ),
        (
            json!([{"name": "i1", "state": {"waiting": {"reason": "ErrImagePull"}}}]),
            "Init:ErrImagePull",
        ),
        (
            json!([{"name": "i1", "state": {"terminated": {"exitCode": 3}}}]),
            "Init:ExitCode:3",
        ),
        (
            json!([{"name": "i1", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]),
            "Init:Error",
        ),
        (
            json!([{"name": "i1", "state": {"waiting": {"reason": "PodInitializing"}}}]),
            "Init:0/2",
        ),
        (
            json!([{"name": "i1", "state": {"terminated": {"exitCode": 0}}}, {"name": "i2", "state": {"terminated": {"exitCode": 0}}}]),
            "PodInitializing",
        ),
    ];
    for (statuses, want) in cases {
        assert_eq!(
            row("", "Pod", base(statuses.clone(), json!([])))[2],
            want,
            "{statuses}"
        );
    }
    // A restartable (sidecar) init container counts towards readiness once started.
    let sidecar = json!({
        "metadata": {"name": "p"},
        "spec": {"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{"name": "a"}]},
        "status": {"phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "initContainerStatuses": [{"name": "s", "started": true, "ready": true, "restartCount": 2, "state": {"running": {}}}],
            "containerStatuses": [{"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}}]},
    });
    let cells = row("", "Pod", sidecar);
    assert_eq!(cells[1], "2/2");
    assert_eq!(cells[2], "Running");
    assert_eq!(cells[3], "3");
}

#[test]
fn pod_completed_with_running_sibling_and_wide_cells() {
    let p = json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "readinessGates": [{"conditionType": "x/gate"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
            "conditions": [{"type": "x/gate", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "state": {"running": {}}},
                {"name": "b", "ready": false, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]},
    });
    let cells = row("", "Pod", p);
    assert_eq!(cells[1], "1/2");
    assert_eq!(cells[2], "NotReady");
    assert_eq!(cells[4], "<unknown>");
    assert_eq!(cells[5], "10.0.0.5");
    assert_eq!(cells[6], "<none>");
    assert_eq!(cells[7], "<none>");
    assert_eq!(cells[8], "1/1");
}

#[test]
fn workload_cells() {
    let template = json!({"spec": {"containers": [{"name": "web", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]}});
    let cases: Vec<(&str, &str, Value, Value)> = vec![
        (
            "apps",
            "Deployment",
            json!({"metadata": {"name": "d", "creationTimestamp": "2024-05-01T11:57:00Z"},
                   "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
                   "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}),
            json!([
                "d",
                "2/3",
                3,
                2,
                "3m",
                "web,side",
                "nginx:1,busybox",
                "app=web"
            ]),
        ),
        (
            "apps",
            "ReplicaSet",
            json!({"metadata": {"name": "rs"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"b": "2", "a": "1"},
                            "matchExpressions": [{"key": "c", "operator": "In", "values": ["z", "y"]}]}, "template": template},
                   "status": {"replicas": 2, "readyReplicas": 1}}),
            json!([
                "rs",
                2,
                2,
                1,
                "<unknown>",
                "web,side",
                "nginx:1,busybox",
                "a=1,b=2,c in (y,z)"
            ]),
        ),
        (
            "apps",
            "DaemonSet",
            json!({"metadata": {"name": "ds"},
                   "spec": {"selector": {}, "template": {"spec": {"nodeSelector": {"zone": "a", "disk": "ssd"}, "containers": [{"name": "c", "image": "i"}]}}},
                   "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 1, "numberAvailable": 2}}),
            json!([
                "ds",
                3,
                3,
                2,
                1,
                2,
                "disk=ssd,zone=a",
                "<unknown>",
                "c",
                "i",
                "<none>"
            ]),
        ),
        (
            "apps",
            "StatefulSet",
            json!({"metadata": {"name": "sts"}, "spec": {"replicas": 3, "template": template}, "status": {"readyReplicas": 3}}),
            json!(["sts", "3/3", "<unknown>", "web,side", "nginx:1,busybox"]),
        ),
        (
            "apps",
            "ControllerRevision",
            json!({"metadata": {"name": "ds-abc", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x", "uid": "u", "controller": true}]}, "revision": 4}),
            json!(["ds-abc", "daemonset.apps/x", 4, "<unknown>"]),
        ),
        (
            "apps",
            "ControllerRevision",
            json!({"metadata": {"name": "orphan"}, "revision": 1}),
            json!(["orphan", "<none>", 1, "<unknown>"]),
        ),
        (
            "coordination.k8s.io",
            "Lease",
            json!({"metadata": {"name": "node-1"}, "spec": {"holderIdentity": "node-1"}}),
            json!(["node-1", "node-1", "<unknown>"]),
        ),
        (
            "",
            "Namespace",
            json!({"metadata": {"name": "default", "creationTimestamp": "2024-04-29T09:00:00Z"}, "status": {"phase": "Active"}}),
            json!(["default", "Active", "2d3h"]),
        ),
    ];
    for (group, kind, obj, want) in cases {
        assert_eq!(Value::Array(row(group, kind, obj)), want, "{kind}");
    }
}

#[test]
fn selector_formats() {
    let cases = [
        (json!({}), Some("")),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "DoesNotExist"}]}),
            Some("a,!b"),
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}),
            Some("a notin (x)"),
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            None,
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}),
            None,
        ),
    ];
    for (sel, want) in cases {
        assert_eq!(selector_string(&sel).as_deref(), want, "{sel}");
    }
    assert_eq!(format_label_selector(None), "<none>");
    assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
    assert_eq!(
        format_label_selector(Some(
            &json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
        )),
        "<error>"
    );
}

#[test]
fn node_cells_cases() {
    let node = |conditions: Value, unschedulable: bool, labels: Value| {
        json!({"metadata": {"name": "n1", "labels": labels},
               "spec": {"unschedulable": unschedulable},
               "status": {"conditions": conditions,
                          "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
                          "nodeInfo": {"kubeletVersion": "v1.32.4", "osImage": "Linux"}}})
    };
    let cases = [
        (
            json!([{"type": "Ready", "status": "True"}]),
            false,
            json!({}),
            "Ready",
            "<none>",
        ),
        (
            json!([{"type": "Ready", "status": "False"}]),
            false,
            json!({"node-role.kubernetes.io/control-plane": ""}),
            "NotReady",
            "control-plane",
        ),
        (
            json!([{"type": "Ready", "status": "Unknown"}]),
            true,
            json!({"kubernetes.io/role": "worker", "node-role.kubernetes.io/infra": ""}),
            "NotReady,SchedulingDisabled",
            "infra,worker",
        ),
        (
            json!([]),
            true,
            json!({"node-role.kubernetes.io/": ""}),
            "Unknown,SchedulingDisabled",
            "<none>",
        ),
    ];
    for (conditions, unsched, labels, status, roles) in cases {
        let cells = row("", "Node", node(conditions, unsched, labels));
        assert_eq!(cells[1], status);
        assert_eq!(cells[2], roles);
        assert_eq!(cells[4], "v1.32.4");
        assert_eq!(cells[5], "10.0.0.1");
        assert_eq!(cells[6], "<none>");
        assert_eq!(cells[7], "Linux");
        assert_eq!(cells[8], "<unknown>");
    }
}

#[test]
fn event_cells_cases() {
    let ev = json!({"metadata": {"name": "p.123"}, "type": "Normal", "reason": "Scheduled",
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
        "source": {"component": "default-scheduler"}, "message": " Assigned \n",
        "firstTimestamp": "2024-05-01T11:50:00Z", "lastTimestamp": "2024-05-01T11:59:00Z", "count": 2});
    assert_eq!(
        Value::Array(row("", "Event", ev)),
        json!([
            "60s",
            "Normal",
            "Scheduled",
            "pod/p",
            "spec.containers{a}",
            "default-scheduler",
            "Assigned",
            "10m",
            2,
            "p.123"
        ])
    );
    let new_style = json!({"metadata": {"name": "e"}, "type": "Warning", "reason": "X",
        "involvedObject": {"kind": "Node"}, "eventTime": "2024-05-01T11:59:30.000000Z",
        "reportingComponent": "kubelet", "reportingInstance": "n1", "message": "m"});
    assert_eq!(
        Value::Array(row("", "Event", new_style)),
        json!([
            "30s",
            "Warning",
            "X",
            "node",
            "",
            "kubelet, n1",
            "m",
            "30s",
            1,
            "e"
        ])
    );
    let series = json!({"metadata": {"name": "s"}, "involvedObject": {"kind": "Pod", "name": "p"},
        "eventTime": "2024-05-01T11:00:00.000000Z", "series": {"count": 7, "lastObservedTime": "2024-05-01T11:59:55.000000Z"}});
    let cells = row("", "Event", series);
    assert_eq!(cells[0], "5s");
    assert_eq!(cells[8], 7);
}

#[test]
fn pvc_cells_cases() {
    let bound = json!({"metadata": {"name": "data"},
        "spec": {"volumeName": "pv-1", "storageClassName": "standard", "volumeMode": "Filesystem"},
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]}});
    assert_eq!(
        Value::Array(row("", "PersistentVolumeClaim", bound)),
        json!([
            "data",
            "Bound",
            "pv-1",
            "1Gi",
            "RWO,RWX",
            "standard",
            "<unset>",
            "<unknown>",
            "Filesystem"
        ])
    );
    let pending = json!({"metadata": {"name": "p", "deletionTimestamp": "2024-05-01T12:00:00Z",
        "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}}, "spec": {}, "status": {"phase": "Pending"}});
    assert_eq!(
        Value::Array(row("", "PersistentVolumeClaim", pending)),
        json!([
            "p",
            "Terminating",
            "",
            "",
            "",
            "old",
            "<unset>",
            "<unknown>",
            "<unset>"
        ])
    );
}

#[test]
fn storage_cells_cases() {
    let pv = json!({"metadata": {"name": "pv-1", "creationTimestamp": "2024-05-01T11:59:00Z"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
            "claimRef": {"namespace": "default", "name": "www-web-0"}, "volumeMode": "Filesystem"},
        "status": {"phase": "Bound"}});
    assert_eq!(
        Value::Array(row("", "PersistentVolume", pv)),
        json!([
            "pv-1",
            "1Gi",
            "RWO",
            "Delete",
            "Bound",
            "default/www-web-0",
            "standard",
            "<unset>",
            "",
            "60s",
            "Filesystem"
        ])
    );
    let sc = json!({"metadata": {"name": "standard", "creationTimestamp": "2024-05-01T11:00:00Z",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rollwright.io/simulated", "volumeBindingMode": "WaitForFirstConsumer"});
    assert_eq!(
        Value::Array(row("storage.k8s.io", "StorageClass", sc)),
        json!([
            "standard (default)",
            "rollwright.io/simulated",
            "Delete",
            "WaitForFirstConsumer",
            "false",
            "60m"
        ])
    );
}

#[test]
fn table_shape_and_include_object() {
    let def = find_kind("apps", "Deployment").unwrap();
    let obj = json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {}, "status": {}});
    let t = table(
        &def.printer,
        &[&obj],
        now(),
        IncludeObject::Metadata,
        json!({"resourceVersion": "7"}),
    );
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"], json!({"resourceVersion": "7"}));
    let cols = t["columnDefinitions"].as_array().unwrap();
    let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(cols[0]["format"], "name");
    assert_eq!(cols[1]["format"], "");
    assert_eq!(cols[5]["priority"], 1);
    assert_eq!(cols[0]["priority"], 0);
    assert!(!cols[0]["description"].as_str().unwrap().is_empty());
    assert!(!cols[2]["description"].as_str().unwrap().is_empty());
    let row = &t["rows"][0];
    assert_eq!(
        row["object"],
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "d", "labels": {"a": "b"}}})
    );
    let full = table(
        &def.printer,
        &[&obj],
        now(),
        IncludeObject::Object,
        json!({}),
    );
    assert_eq!(full["rows"][0]["object"], obj);
    let none = table(&def.printer, &[&obj], now(), IncludeObject::None, json!({}));
    assert!(none["rows"][0].get("object").is_none());
    let empty = table(&def.printer, &[], now(), IncludeObject::Metadata, json!({}));
    assert_eq!(empty["rows"], json!([]));
    assert_eq!(IncludeObject::parse("Object"), Some(IncludeObject::Object));
    assert_eq!(IncludeObject::parse("nope"), None);
    assert_eq!(IncludeObject::default(), IncludeObject::Metadata);
}

#[test]
fn every_resource_has_matching_column_and_cell_counts() {
    for def in Registry::new().kinds().iter() {
        let obj = json!({"metadata": {"name": "x"}});
        let t = table(&def.printer, &[&obj], now(), IncludeObject::None, json!({}));
        let cols = t["columnDefinitions"].as_array().unwrap().len();
        let cells = t["rows"][0]["cells"].as_array().unwrap().len();
        assert_eq!(cols, cells, "{}", def.kind);
        if !matches!(def.storage, crate::registry::Storage::Own) {
            // A view's tables are printed by the kind it views.
            continue;
        }
        // Upstream prints these with its fallback (Name, Created At).
        let fallback = matches!(
            def.kind.as_str(),
            "LimitRange"
                | "Role"
                | "ClusterRole"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "CustomResourceDefinition"
        );
        assert_eq!(
            cols == 2,
            fallback,
            "{} prints {cols} columns",
            def.group_kind()
        );
        for c in t["columnDefinitions"].as_array().unwrap() {
            assert!(
                !c["description"].as_str().unwrap().is_empty(),
                "{} {}",
                def.kind,
                c["name"]
            );
        }
    }
}

#[test]
fn finished_pods_get_row_conditions() {
    let def = find_kind("", "Pod").unwrap();
    let p = pod(json!({"phase": "Succeeded"}));
    let t = table(&def.printer, &[&p], now(), IncludeObject::None, json!({}));
    assert_eq!(t["rows"][0]["conditions"][0]["reason"], "Succeeded");
    let p = pod(json!({"phase": "Running"}));
    let t = table(&def.printer, &[&p], now(), IncludeObject::None, json!({}));
    assert!(t["rows"][0].get("conditions").is_none());
}
