use super::*;
use crate::defaults;
use serde_json::json;

fn pod(spec: Value) -> Value {
    let mut pod = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec});
    defaults::tests::apply("", "Pod", &mut pod);
    pod
}

fn errors(pod: &Value) -> Vec<String> {
    validate_pod(pod).iter().map(ToString::to_string).collect()
}

fn container(extra: Value) -> Value {
    let mut c = json!({"name": "app", "image": "nginx:1.25"});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            c.insert(k.clone(), v.clone());
        }
    }
    c
}

#[test]
fn pod_spec_rules() {
    // (spec, expected errors); each invalid case is paired with a valid one above it.
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"containers": [container(json!({}))]}), vec![]),
        (
            json!({"containers": []}),
            vec!["spec.containers: Required value"],
        ),
        (
            json!({"containers": [{"name": "app"}]}),
            vec!["spec.containers[0].image: Required value"],
        ),
        (
            json!({"containers": [container(json!({})), container(json!({}))]}),
            vec!["spec.containers[1].name: Duplicate value: \"app\""],
        ),
        (
            json!({"initContainers": [container(json!({}))], "containers": [container(json!({}))]}),
            vec!["spec.containers[0].name: Duplicate value: \"app\""],
        ),
        (
            json!({"containers": [container(json!({"ports": [{"containerPort": 8080, "protocol": "UDP"}]}))]}),
            vec![],
        ),
        (
            json!({"containers": [container(json!({"ports": [{"containerPort": 70000}]}))]}),
            vec![
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ],
        ),
        (
            json!({"containers": [container(json!({"ports": [{"containerPort": 80, "protocol": "HTTP"}]}))]}),
            vec![
                "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ],
        ),
        (
            json!({"restartPolicy": "OnFailure", "containers": [container(json!({}))]}),
            vec![],
        ),
        (
            json!({"restartPolicy": "Sometimes", "containers": [container(json!({}))]}),
            vec![
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ],
        ),
        (
            json!({"containers": [container(json!({"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}))]}),
            vec![],
        ),
        (
            json!({"containers": [container(json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}))]}),
            vec![
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            ],
        ),
        (
            json!({"containers": [container(json!({"resources": {"limits": {"memory": "1GB"}}}))]}),
            // Pod defaulting copies the limit into requests, so both are reported.
            vec![
                "spec.containers[0].resources.limits[memory]: Invalid value: \"1GB\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"1GB\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ],
        ),
        (
            json!({"containers": [container(json!({"resources": {"requests": {"cpus": "1"}}}))]}),
            vec![
                "spec.containers[0].resources.requests[cpus]: Invalid value: \"cpus\": must be a standard resource for containers",
            ],
        ),
        (
            json!({"volumes": [{"name": "data"}], "containers": [container(json!({"volumeMounts": [{"name": "data", "mountPath": "/d"}]}))]}),
            vec![],
        ),
        (
            json!({"volumes": [{"name": "data"}, {"name": "data"}], "containers": [container(json!({}))]}),
            vec!["spec.volumes[1].name: Duplicate value: \"data\""],
        ),
        (
            json!({"containers": [container(json!({"volumeMounts": [{"name": "data", "mountPath": "/d"}]}))]}),
            vec!["spec.containers[0].volumeMounts[0].name: Not found: \"data\""],
        ),
        (
            json!({"volumes": [{"name": "a", "emptyDir": {}, "hostPath": {"path": "/x"}}], "containers": [container(json!({}))]}),
            vec!["spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"],
        ),
        (
            json!({"terminationGracePeriodSeconds": 0, "containers": [container(json!({}))]}),
            vec![],
        ),
        (
            json!({"terminationGracePeriodSeconds": -5, "containers": [container(json!({}))]}),
            vec![
                "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0",
            ],
        ),
        (
            json!({"activeDeadlineSeconds": 0, "containers": [container(json!({}))]}),
            vec![
                "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            ],
        ),
        (
            json!({"nodeSelector": {"disktype": "ssd"}, "containers": [container(json!({}))]}),
            vec![],
        ),
        (
            json!({"nodeSelector": {"disktype": "ssd!"}, "containers": [container(json!({}))]}),
            vec![
                "spec.nodeSelector: Invalid value: \"ssd!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ],
        ),
        (
            json!({"containers": [container(json!({"readinessProbe": {"httpGet": {"port": 80}, "periodSeconds": -1}}))]}),
            vec![
                "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        (
            json!({"containers": [container(json!({"livenessProbe": {"periodSeconds": 5}}))]}),
            vec!["spec.containers[0].livenessProbe: Required value: must specify a handler type"],
        ),
        (
            json!({"containers": [container(json!({"livenessProbe": {"exec": {"command": ["true"]}, "successThreshold": 2}}))]}),
            vec!["spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(errors(&pod(spec.clone())), want, "{spec}");
    }
}

#[test]
fn toleration_rules() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}),
            vec![],
        ),
        (json!({"key": "gpu", "operator": "Exists"}), vec![]),
        (
            json!({"key": "gpu", "operator": "Exists", "value": "x"}),
            vec![
                "spec.tolerations[0].operator: Invalid value: core.Toleration{Key:\"gpu\", Operator:\"Exists\", Value:\"x\", Effect:\"\", TolerationSeconds:(*int64)(nil)}: value must be empty when `operator` is 'Exists'",
            ],
        ),
        (
            json!({"key": "gpu", "operator": "Like"}),
            vec![
                "spec.tolerations[0].operator: Unsupported value: \"Like\": supported values: \"Equal\", \"Exists\"",
            ],
        ),
        (
            json!({"key": "gpu", "operator": "Exists", "effect": "NoRun"}),
            vec![
                "spec.tolerations[0].effect: Unsupported value: \"NoRun\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            ],
        ),
        (
            json!({"operator": "Equal", "value": "x"}),
            vec![
                "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ],
        ),
        (
            json!({"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}),
            vec![
                "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
            ],
        ),
    ];
    for (toleration, want) in cases {
        let got: Vec<String> = validate_tolerations(
            std::slice::from_ref(&toleration),
            &Path::new("spec").child("tolerations"),
        )
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(got, want, "{toleration}");
    }
}

#[test]
fn pod_update_rules() {
    let old = pod(json!({"containers": [container(json!({}))], "activeDeadlineSeconds": 100}));
    let with = |f: &dyn Fn(&mut Value)| {
        let mut new = old.clone();
        f(&mut new);
        defaults::tests::apply("", "Pod", &mut new);
        validate_pod_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    let forbidden = format!("spec: Forbidden: {POD_UPDATE_FORBIDDEN}");
    assert!(with(&|p| p["spec"]["containers"][0]["image"] = json!("nginx:1.26")).is_empty());
    assert!(with(&|p| p["metadata"]["labels"] = json!({"a": "b"})).is_empty());
    assert!(with(&|p| p["spec"]["activeDeadlineSeconds"] = json!(50)).is_empty());
    assert_eq!(
        with(&|p| p["spec"]["activeDeadlineSeconds"] = json!(200)),
        vec![
            "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
        ]
    );
    assert!(with(&|p| p["spec"]["nodeName"] = json!("node-1")).is_empty());
    assert_eq!(
        with(&|p| p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}])),
        vec![forbidden.clone()]
    );
    assert_eq!(
        with(&|p| p["spec"]["restartPolicy"] = json!("Never")),
        vec![forbidden.clone()]
    );
    assert_eq!(
        with(&|p| p["spec"]["containers"] =
            json!([container(json!({})), container(json!({"name": "b"}))])),
        vec!["spec.containers: Forbidden: pod updates may not add or remove containers"]
    );
    assert!(
        with(&|p| {
            if let Some(list) = p["spec"]["tolerations"].as_array_mut() {
                list.push(json!({"key": "gpu", "operator": "Exists"}));
            }
        })
        .is_empty()
    );
    assert_eq!(
        // Tolerating everything keeps admission from re-adding the default tolerations.
        with(&|p| p["spec"]["tolerations"] = json!([{"operator": "Exists"}])),
        vec![
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
        ]
    );

    let bound = {
        let mut b = old.clone();
        b["spec"]["nodeName"] = json!("node-1");
        b
    };
    let mut moved = bound.clone();
    moved["spec"]["nodeName"] = json!("node-2");
    let got: Vec<String> = validate_pod_update(&moved, &bound)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, vec![forbidden]);
}

#[test]
fn sysctl_names_are_checked_as_upstream_checks_them() {
    let spec = json!({"containers": [{"name": "c", "image": "i"}], "securityContext": {"sysctls": [
        {"name": "foo-", "value": "bar"},
        {"name": "kernel.shmmax", "value": "1"},
        {"name": "safe-and-unsafe", "value": "1"},
        {"name": "bar..", "value": "42"},
        {"name": "net/ipv4/ip_forward", "value": "1"},
        {"name": "kernel.shmmax", "value": "2"},
    ]}});
    let msgs = crate::validation::messages(validate_pod_spec(&spec, &Path::new("spec"), &[]));
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs[0].starts_with("spec.securityContext.sysctls[0].name: Invalid value: \"foo-\": must have at most 253 characters"), "{msgs:?}");
    assert!(
        msgs[1].starts_with("spec.securityContext.sysctls[3].name: Invalid value: \"bar..\""),
        "{msgs:?}"
    );
    assert_eq!(
        msgs[2],
        "spec.securityContext.sysctls[5].name: Duplicate value: \"kernel.shmmax\""
    );
}

#[test]
fn a_containers_security_context_is_checked_as_upstream_checks_it() {
    let with = |sc: Value| pod(json!({"containers": [container(json!({"securityContext": sc}))]}));
    let at = "spec.containers[0].securityContext";
    assert_eq!(
        errors(&with(json!({"privileged": true}))),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&with(
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
        )),
        Vec::<String>::new()
    );
    let msgs = errors(&with(
        json!({"allowPrivilegeEscalation": false, "privileged": true}),
    ));
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(
        msgs[0].starts_with(&format!("{at}: Invalid value: ")),
        "{msgs:?}"
    );
    assert!(
        msgs[0]
            .ends_with("cannot set `allowPrivilegeEscalation` to false and `privileged` to true"),
        "{msgs:?}"
    );
    let msgs = errors(&with(
        json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["CAP_SYS_ADMIN"]}}),
    ));
    assert!(
        msgs[0].ends_with("and `capabilities.Add` CAP_SYS_ADMIN"),
        "{msgs:?}"
    );
    assert_eq!(
        errors(&with(json!({"runAsUser": -1}))),
        [format!(
            "{at}.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"
        )]
    );
    assert_eq!(
        errors(&with(json!({"procMount": "Masked"}))),
        [format!(
            "{at}.procMount: Unsupported value: \"Masked\": supported values: \"Default\", \"Unmasked\""
        )]
    );
    assert_eq!(
        errors(&with(json!({"seccompProfile": {"type": "Localhost"}}))),
        [format!(
            "{at}.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"
        )]
    );
    assert_eq!(
        errors(&with(json!({"seccompProfile": {}}))),
        [format!(
            "{at}.seccompProfile.type: Required value: type is required when seccompProfile is set"
        )]
    );
    let msgs = errors(&with(
        json!({"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}}),
    ));
    assert!(
        msgs[0].starts_with(&format!(
            "{at}.seccompProfile.localhostProfile: Invalid value: "
        )) && msgs[0].ends_with("can only be set when seccomp type is Localhost"),
        "{msgs:?}"
    );
}

#[test]
fn a_pods_security_context_is_checked_as_upstream_checks_it() {
    let with = |sc: Value, extra: Value| {
        let mut spec = json!({"containers": [container(json!({}))], "securityContext": sc});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        pod(spec)
    };
    let at = "spec.securityContext";
    assert_eq!(
        errors(&with(
            json!({"runAsNonRoot": true, "fsGroup": 2000, "supplementalGroups": [1, 2]}),
            json!({})
        )),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&with(
            json!({"fsGroup": -1, "supplementalGroups": [3, -2]}),
            json!({})
        )),
        [
            format!("{at}.fsGroup: Invalid value: -1: must be between 0 and 2147483647, inclusive"),
            format!(
                "{at}.supplementalGroups[1]: Invalid value: -2: must be between 0 and 2147483647, inclusive"
            ),
        ]
    );
    assert_eq!(
        errors(&with(
            json!({}),
            json!({"shareProcessNamespace": true, "hostPID": true})
        )),
        [format!(
            "{at}.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled"
        )]
    );
    assert_eq!(
        errors(&with(
            json!({"seccompProfile": {"type": "Default"}}),
            json!({})
        )),
        [format!(
            "{at}.seccompProfile.type: Unsupported value: \"Default\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\""
        )]
    );
}
