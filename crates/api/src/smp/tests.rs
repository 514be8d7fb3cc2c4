use super::*;
use serde_json::json;

/// Wraps a pod spec the way a Deployment, DaemonSet or StatefulSet holds it.
fn workload(kind: &str, pod_spec: Value) -> Value {
    json!({"kind": kind, "spec": {"template": {"spec": pod_spec}}})
}

#[test]
fn merges_as_upstream() {
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "set image: one container changes, the rest of it and its siblings stay",
            workload(
                "Deployment",
                json!({"containers": [
                    {"name": "nginx", "image": "nginx:1.0", "ports": [{"containerPort": 80}]},
                    {"name": "sidecar", "image": "envoy:1"}
                ]}),
            ),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.1"}
            ]}}}}),
            workload(
                "Deployment",
                json!({"containers": [
                    {"name": "nginx", "image": "nginx:1.1", "ports": [{"containerPort": 80}]},
                    {"name": "sidecar", "image": "envoy:1"}
                ]}),
            ),
        ),
        (
            "set image as kubectl sends it, with $setElementOrder",
            workload(
                "DaemonSet",
                json!({"containers": [
                    {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}
                ]}),
            ),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b", "image": "b:2"}]
            }}}}),
            workload(
                "DaemonSet",
                json!({"containers": [
                    {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}
                ]}),
            ),
        ),
        (
            "nested template in a StatefulSet; volumeClaimTemplates have no strategy",
            json!({"spec": {
                "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
                "template": {"spec": {"containers": [{"name": "db", "image": "pg:15"}]}}
            }}),
            json!({"spec": {
                "volumeClaimTemplates": [{"metadata": {"name": "logs"}}],
                "template": {"spec": {"containers": [{"name": "db", "image": "pg:16"}]}}
            }}),
            json!({"spec": {
                "volumeClaimTemplates": [{"metadata": {"name": "logs"}}],
                "template": {"spec": {"containers": [{"name": "db", "image": "pg:16"}]}}
            }}),
        ),
        (
            "update an env var in place",
            json!({"spec": {"containers": [{"name": "c", "env": [
                {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
            ]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "3"}]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [
                {"name": "A", "value": "1"}, {"name": "B", "value": "3"}
            ]}]}}),
        ),
        (
            "add an env var without $setElementOrder: upstream puts it before unmentioned items",
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [
                {"name": "B", "value": "2"}, {"name": "A", "value": "1"}
            ]}]}}),
        ),
        (
            "add an env var with $setElementOrder (kubectl set env / apply): appended",
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}}),
            json!({"spec": {"containers": [{"name": "c",
                "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
                "env": [{"name": "B", "value": "2"}]
            }]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [
                {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
            ]}]}}),
        ),
        (
            "patch order wins over live order for mentioned items",
            json!({"spec": {"volumes": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}),
            json!({"spec": {"volumes": [{"name": "c", "emptyDir": {}}, {"name": "a"}]}}),
            json!({"spec": {"volumes": [{"name": "b"}, {"name": "c", "emptyDir": {}}, {"name": "a"}]}}),
        ),
        (
            "delete a container with $patch: delete",
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
            json!({"spec": {"containers": [{"name": "b"}]}}),
        ),
        (
            "delete an env var and add another in one patch",
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A"}, {"name": "B"}]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [
                {"name": "A", "$patch": "delete"}, {"name": "B", "value": "x"}
            ]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "x"}]}]}}),
        ),
        (
            "container ports merge on containerPort; 80 and 80.0 are the same key",
            json!({"spec": {"containers": [{"name": "c", "ports": [
                {"containerPort": 80, "name": "http"}
            ]}]}}),
            json!({"spec": {"containers": [{"name": "c", "ports": [
                {"containerPort": 80.0, "protocol": "TCP"}, {"containerPort": 443}
            ]}]}}),
            json!({"spec": {"containers": [{"name": "c", "ports": [
                {"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 443}
            ]}]}}),
        ),
        (
            "volumeMounts merge on mountPath",
            json!({"spec": {"initContainers": [{"name": "i", "volumeMounts": [
                {"name": "data", "mountPath": "/data"}, {"name": "tmp", "mountPath": "/tmp"}
            ]}]}}),
            json!({"spec": {"initContainers": [{"name": "i", "volumeMounts": [
                {"mountPath": "/data", "readOnly": true}
            ]}]}}),
            json!({"spec": {"initContainers": [{"name": "i", "volumeMounts": [
                {"name": "data", "mountPath": "/data", "readOnly": true},
                {"name": "tmp", "mountPath": "/tmp"}
            ]}]}}),
        ),
        (
            "volumes merge on name in a DaemonSet template",
            workload(
                "DaemonSet",
                json!({"volumes": [{"name": "v", "hostPath": {"path": "/a"}}]}),
            ),
            json!({"spec": {"template": {"spec": {"volumes": [
                {"name": "v", "hostPath": {"path": "/b"}}
            ]}}}}),
            workload(
                "DaemonSet",
                json!({"volumes": [{"name": "v", "hostPath": {"path": "/b"}}]}),
            ),
        ),
        (
            "null deletes a key; null for an absent key adds nothing",
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 3}}),
            json!({"metadata": {"labels": {"a": null, "c": null}}, "spec": {"paused": null}}),
            json!({"metadata": {"labels": {"b": "2"}}, "spec": {"replicas": 3}}),
        ),
        (
            "scalars replace, new keys are added, a type change takes the patch value",
            json!({"spec": {"replicas": 1, "strategy": "x"}}),
            json!({"spec": {"replicas": 5, "minReadySeconds": 10, "strategy": {"type": "Recreate"}}}),
            json!({"spec": {"replicas": 5, "strategy": {"type": "Recreate"}, "minReadySeconds": 10}}),
        ),
        (
            "$patch: replace replaces a map",
            json!({"spec": {"securityContext": {"runAsUser": 1, "fsGroup": 2}}}),
            json!({"spec": {"securityContext": {"$patch": "replace", "runAsUser": 3}}}),
            json!({"spec": {"securityContext": {"runAsUser": 3}}}),
        ),
        (
            "$patch: delete in a map leaves an empty map, as upstream",
            json!({"spec": {"securityContext": {"runAsUser": 1}, "replicas": 1}}),
            json!({"spec": {"securityContext": {"$patch": "delete"}}}),
            json!({"spec": {"securityContext": {}, "replicas": 1}}),
        ),
        (
            "the ControllerRevision form: the whole template replaced",
            workload(
                "DaemonSet",
                json!({"containers": [{"name": "a", "image": "a:1"}], "hostNetwork": true}),
            ),
            json!({"spec": {"template": {"$patch": "replace", "spec": {
                "containers": [{"name": "a", "image": "a:2"}]
            }}}}),
            workload(
                "DaemonSet",
                json!({"containers": [{"name": "a", "image": "a:2"}]}),
            ),
        ),
        (
            "{$patch: replace} marker replaces a merge-keyed list",
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            json!({"spec": {"containers": [{"name": "c", "image": "x"}, {"$patch": "replace"}]}}),
            json!({"spec": {"containers": [{"name": "c", "image": "x"}]}}),
        ),
        (
            "$retainKeys drops live keys it does not list",
            json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
            json!({"spec": {"strategy": {"type": "Recreate"}}}),
        ),
        (
            "$setElementOrder alone reorders; unknown entries are ignored",
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}),
            json!({"spec": {"$setElementOrder/containers": [
                {"name": "x"}, {"name": "c"}, {"name": "b"}, {"name": "a"}
            ]}}),
            json!({"spec": {"containers": [{"name": "c"}, {"name": "b"}, {"name": "a"}]}}),
        ),
        (
            "an item $setElementOrder omits keeps its live position relative to the listed ones",
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}),
            json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]}}),
            json!({"spec": {"containers": [{"name": "b"}, {"name": "c"}, {"name": "a"}]}}),
        ),
        (
            "$setElementOrder places a new item where it says",
            json!({"spec": {"containers": [{"name": "a"}, {"name": "c"}]}}),
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
                "containers": [{"name": "b", "image": "b"}]
            }}),
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "image": "b"}, {"name": "c"}]}}),
        ),
        (
            "finalizers merge as a set",
            json!({"metadata": {"finalizers": ["a", "b"]}}),
            json!({"metadata": {"finalizers": ["b", "c"]}}),
            json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
        ),
        (
            "$deleteFromPrimitiveList with $setElementOrder on finalizers",
            json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
            json!({"metadata": {
                "$setElementOrder/finalizers": ["c", "a", "d"],
                "$deleteFromPrimitiveList/finalizers": ["b"],
                "finalizers": ["d"]
            }}),
            json!({"metadata": {"finalizers": ["c", "a", "d"]}}),
        ),
        (
            "ownerReferences merge on uid",
            json!({"metadata": {"ownerReferences": [
                {"uid": "1", "kind": "ReplicaSet", "name": "rs"},
                {"uid": "2", "kind": "Foo", "name": "f"}
            ]}}),
            json!({"metadata": {"ownerReferences": [{"uid": "1", "controller": true}]}}),
            json!({"metadata": {"ownerReferences": [
                {"uid": "1", "kind": "ReplicaSet", "name": "rs", "controller": true},
                {"uid": "2", "kind": "Foo", "name": "f"}
            ]}}),
        ),
        (
            "tolerations, args, command and envFrom are replaced",
            json!({"spec": {
                "tolerations": [{"key": "a", "operator": "Exists"}],
                "containers": [{"name": "c", "args": ["x", "y"], "command": ["sh"], "envFrom": [{"configMapRef": {"name": "a"}}]}]
            }}),
            json!({"spec": {
                "tolerations": [{"key": "b", "operator": "Exists"}],
                "containers": [{"name": "c", "args": ["z"], "command": ["bash"], "envFrom": [{"secretRef": {"name": "s"}}]}]
            }}),
            json!({"spec": {
                "tolerations": [{"key": "b", "operator": "Exists"}],
                "containers": [{"name": "c", "args": ["z"], "command": ["bash"], "envFrom": [{"secretRef": {"name": "s"}}]}]
            }}),
        ),
        (
            "status conditions merge on type",
            json!({"status": {"conditions": [
                {"type": "Available", "status": "False"},
                {"type": "Progressing", "status": "True"}
            ]}}),
            json!({"status": {"conditions": [{"type": "Available", "status": "True"}]}}),
            json!({"status": {"conditions": [
                {"type": "Available", "status": "True"},
                {"type": "Progressing", "status": "True"}
            ]}}),
        ),
        (
            "node: addresses merge on type, taints are replaced",
            json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
                   "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                            {"type": "Hostname", "address": "n1"}]}}),
            json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
                   "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}),
            json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
                   "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"},
                                            {"type": "Hostname", "address": "n1"}]}}),
        ),
        (
            "pod containerStatuses are replaced",
            json!({"status": {"containerStatuses": [{"name": "a", "ready": true}, {"name": "b"}]}}),
            json!({"status": {"containerStatuses": [{"name": "a", "ready": false}]}}),
            json!({"status": {"containerStatuses": [{"name": "a", "ready": false}]}}),
        ),
        (
            "directives inside a value the live object lacks are applied, never stored",
            json!({"metadata": {"name": "p"}}),
            json!({"spec": {
                "containers": [{"name": "a", "image": "a", "env": [{"name": "X", "$patch": "delete"}]},
                               {"name": "gone", "$patch": "delete"}],
                "securityContext": {"$patch": "replace", "runAsUser": 1},
                "$setElementOrder/volumes": [{"name": "v"}],
                "volumes": [{"name": "v", "emptyDir": {"medium": null}}]
            }}),
            json!({"metadata": {"name": "p"}, "spec": {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [{"name": "a", "image": "a", "env": []}],
                "securityContext": {"runAsUser": 1}
            }}),
        ),
        (
            "a null original is an empty object",
            Value::Null,
            json!({"metadata": {"finalizers": ["a", "a"]}}),
            json!({"metadata": {"finalizers": ["a"]}}),
        ),
        (
            "a merge list item keyed by name merges only with the same name",
            json!({"spec": {"imagePullSecrets": [{"name": "a"}], "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["a"]}]}}),
            json!({"spec": {"imagePullSecrets": [{"name": "b"}], "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["b"]}]}}),
            json!({"spec": {"imagePullSecrets": [{"name": "b"}, {"name": "a"}], "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["b"]}]}}),
        ),
    ];
    for (name, original, patch, expected) in cases {
        let got = apply(&original, &patch, &Builtin);
        assert_eq!(got.as_ref(), Ok(&expected), "{name}");
        let got_text = serde_json::to_string(&got.unwrap_or_default()).unwrap_or_default();
        assert!(
            !got_text.contains('$'),
            "{name}: directive left in {got_text}"
        );
    }
}

#[test]
fn keeps_key_order() {
    let original = json!({"a": 1, "b": 2, "c": 3});
    let patch = json!({"b": null, "d": 4, "a": 5});
    let got = apply(&original, &patch, &Builtin).unwrap();
    let keys: Vec<&str> = got
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(keys, ["a", "c", "d"]);
    assert_eq!(got, json!({"a": 5, "c": 3, "d": 4}));
}

#[test]
fn reports_upstream_errors() {
    let cases: Vec<(&str, Value, Value, &str)> = vec![
        (
            "patch not an object",
            json!({}),
            json!([1]),
            "invalid JSON document",
        ),
        (
            "original not an object",
            json!("x"),
            json!({}),
            "invalid JSON document",
        ),
        (
            "merge-keyed item without its key",
            json!({"spec": {"containers": [{"name": "a"}]}}),
            json!({"spec": {"containers": [{"image": "nginx"}]}}),
            "map: map[image:nginx] does not contain declared merge key: name",
        ),
        (
            "delete directive without the key",
            json!({"spec": {"containers": [{"name": "a"}]}}),
            json!({"spec": {"containers": [{"$patch": "delete"}]}}),
            "map: map[$patch:delete] does not contain declared merge key: name",
        ),
        (
            "unknown $patch value in a map",
            json!({"spec": {}}),
            json!({"spec": {"$patch": "explode", "a": 1}}),
            "unknown patch type: explode in map: map[$patch:explode a:1]",
        ),
        (
            "unknown $patch value in a list item",
            json!({"spec": {"volumes": []}}),
            json!({"spec": {"volumes": [{"name": "v", "$patch": 7}]}}),
            "unknown patch type: 7 in map: map[$patch:7 name:v]",
        ),
        (
            "$patch: merge in a list",
            json!({"spec": {"volumes": [{"name": "v"}]}}),
            json!({"spec": {"volumes": [{"$patch": "merge"}]}}),
            "merging lists cannot yet be specified in the patch",
        ),
        (
            "a string where a merge-keyed list needs a map",
            json!({"spec": {"containers": [{"name": "a"}]}}),
            json!({"spec": {"containers": ["nginx"]}}),
            "expected a map[string]interface {}, but received a string",
        ),
        (
            "$retainKeys not a list",
            json!({"spec": {"strategy": {}}}),
            json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
            "invalid patch format of retainKeys",
        ),
        (
            "patch sets a key $retainKeys drops",
            json!({"spec": {"strategy": {}}}),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
            "invalid patch format of retainKeys",
        ),
        (
            "$setElementOrder not a list",
            json!({"spec": {}}),
            json!({"spec": {"$setElementOrder/containers": {"name": "a"}}}),
            "invalid patch format of setElementOrder list",
        ),
        (
            "patch list out of $setElementOrder order",
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b"}, {"name": "a"}]
            }}),
            "The order in patch list:\n[map[name:b] map[name:a]]\n doesn't match $setElementOrder list:\n[map[name:a] map[name:b]]\n",
        ),
        (
            "maps in a set-merged list",
            json!({"metadata": {"finalizers": []}}),
            json!({"metadata": {"finalizers": [{"a": 1}]}}),
            "cannot merge lists without merge key for metadata.finalizers",
        ),
        (
            "mixed primitive types in a set-merged list",
            json!({"metadata": {"finalizers": ["a"]}}),
            json!({"metadata": {"finalizers": [1]}}),
            "list element types are not identical: [[a] [1]]",
        ),
        (
            "lists of lists",
            json!({"metadata": {"finalizers": [["a"]]}}),
            json!({"metadata": {"finalizers": ["b"]}}),
            "lists of lists are not supported",
        ),
        (
            "$deleteFromPrimitiveList not a list",
            json!({"metadata": {"finalizers": ["a"]}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
            "invalid patch format of primitive list",
        ),
    ];
    for (name, original, patch, message) in cases {
        match apply(&original, &patch, &Builtin) {
            Ok(v) => panic!("{name}: expected an error, got {v}"),
            Err(e) => assert_eq!(e.to_string(), message, "{name}"),
        }
    }
}

#[test]
fn builtin_strategies() {
    use ListStrategy::*;
    let cases: Vec<(&[&str], ListStrategy)> = vec![
        (&["spec", "containers"], Merge { key: "name" }),
        (
            &["spec", "template", "spec", "initContainers"],
            Merge { key: "name" },
        ),
        (
            &[
                "spec",
                "jobTemplate",
                "spec",
                "template",
                "spec",
                "containers",
            ],
            Merge { key: "name" },
        ),
        (
            &["spec", "template", "spec", "containers", "env"],
            Merge { key: "name" },
        ),
        (
            &["spec", "containers", "ports"],
            Merge {
                key: "containerPort",
            },
        ),
        (&["spec", "ports"], Merge { key: "port" }),
        (
            &["spec", "ephemeralContainers", "volumeMounts"],
            Merge { key: "mountPath" },
        ),
        (
            &["spec", "containers", "volumeDevices"],
            Merge { key: "devicePath" },
        ),
        (
            &["spec", "topologySpreadConstraints"],
            Merge { key: "topologyKey" },
        ),
        (&["spec", "resourceClaims"], Merge { key: "name" }),
        (&["spec", "containers", "resources", "claims"], Replace),
        (&["metadata", "finalizers"], SetMerge),
        (&["spec", "finalizers"], Replace),
        (
            &["spec", "template", "metadata", "ownerReferences"],
            Merge { key: "uid" },
        ),
        (&["status", "conditions"], Merge { key: "type" }),
        (&["spec", "tolerations"], Replace),
        (&["spec", "taints"], Replace),
        (&["spec", "containers", "envFrom"], Replace),
        (&["spec", "env"], Replace),
        (&["containers"], Replace),
        (&[], Replace),
    ];
    for (path, expected) in cases {
        assert_eq!(Builtin.list_strategy(path), expected, "{path:?}");
    }
}

#[test]
fn never_panics_on_odd_input() {
    let values = [
        json!(null),
        json!(1),
        json!(1.5e300),
        json!("s"),
        json!(true),
        json!([]),
        json!([1, "a"]),
        json!([[1]]),
        json!([null]),
        json!([{}]),
        json!([{"name": null}]),
        json!([{"$patch": "replace"}]),
        json!([{"$patch": "delete"}]),
        json!([{"name": "a", "$patch": "delete"}]),
        json!([{"name": "a", "$patch": "replace"}]),
        json!({}),
        json!({"$patch": "delete"}),
        json!({"$patch": "replace"}),
        json!({"$patch": null}),
        json!({"$retainKeys": [1, null]}),
        json!({"$setElementOrder/containers": [1, {"name": "a"}]}),
        json!({"$setElementOrder/finalizers": [{"x": 1}]}),
        json!({"$setElementOrder/env": []}),
        json!({"$deleteFromPrimitiveList/finalizers": [{}]}),
        json!({"$deleteFromPrimitiveList/": []}),
        json!({"$setElementOrder/": []}),
    ];
    let fields = ["containers", "finalizers", "env", "tolerations", "x"];
    for field in fields {
        for live in &values {
            for patch in &values {
                let original = json!({"spec": {field: live, "containers": [{"name": "c", field: live}]},
                                      "metadata": {field: live}});
                let patch = json!({"spec": {field: patch, "containers": [{"name": "c", field: patch}]},
                                   "metadata": {field: patch}});
                let _ = apply(&original, &patch, &Builtin);
                let _ = apply(&original, &original, &Builtin);
            }
        }
    }
}

#[test]
fn go_formatting_of_numbers() {
    let cases = [
        (json!(80), "80"),
        (json!(-3), "-3"),
        (json!(1.5), "1.5"),
        (json!(1500000.5), "1.5000005e+06"),
        (json!(0.00001), "1e-05"),
    ];
    for (value, text) in cases {
        assert_eq!(go_string(&value), text);
    }
}
