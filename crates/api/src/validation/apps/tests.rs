use super::*;
use crate::{defaults, validation::validate_create, validation::validate_update};
use serde_json::json;

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}})
}

fn workload(kind: &str, spec: Value) -> Value {
    let mut obj = json!({"metadata": {"name": "w", "namespace": "default"}, "spec": spec});
    defaults::tests::apply("apps", kind, &mut obj);
    obj
}

fn base_spec() -> Value {
    json!({"selector": {"matchLabels": {"app": "x"}}, "template": template()})
}

/// The base spec with `patch`'s top-level keys replaced (null removes).
fn spec_with(patch: Value) -> Value {
    let mut spec = base_spec();
    if let (Some(s), Some(p)) = (spec.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            if v.is_null() {
                s.remove(k);
            } else {
                s.insert(k.clone(), v.clone());
            }
        }
    }
    spec
}

fn errors(kind: &str, spec: Value) -> Vec<String> {
    validate_create("apps", kind, &workload(kind, spec))
        .iter()
        .map(ToString::to_string)
        .collect()
}

const MISMATCH: &str = "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"x\"}: `selector` does not match template `labels`";

#[test]
fn deployment_rules() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (base_spec(), vec![]),
        (
            spec_with(json!({"selector": null})),
            vec!["spec.selector: Required value", MISMATCH],
        ),
        (
            spec_with(json!({"selector": {}})),
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
            ],
        ),
        (
            spec_with(json!({"selector": {"matchLabels": {"app": "y"}}})),
            vec![MISMATCH],
        ),
        (
            spec_with(
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}}),
            ),
            vec![],
        ),
        (
            spec_with(
                json!({"template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}]}}}),
            ),
            vec!["spec.template.spec.containers[0].image: Required value"],
        ),
        (
            spec_with(
                json!({"template": {"metadata": {"labels": {"app": "x"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i:1"}]}}}),
            ),
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ],
        ),
        (
            spec_with(json!({"replicas": -1})),
            vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
        ),
        (
            spec_with(json!({"minReadySeconds": -1})),
            vec!["spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"],
        ),
        (
            spec_with(json!({"revisionHistoryLimit": -1})),
            vec![
                "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        (
            spec_with(json!({"minReadySeconds": 10, "progressDeadlineSeconds": 11})),
            vec![],
        ),
        (
            spec_with(json!({"minReadySeconds": 10, "progressDeadlineSeconds": 10})),
            vec![
                "spec.progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds",
            ],
        ),
        (spec_with(json!({"strategy": {"type": "Recreate"}})), vec![]),
        (
            spec_with(json!({"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}})),
            vec![
                "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
            ],
        ),
        (
            spec_with(json!({"strategy": {"type": "BlueGreen"}})),
            vec![
                "spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:\"BlueGreen\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\"",
            ],
        ),
        (
            spec_with(
                json!({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "100%"}}}),
            ),
            vec![],
        ),
        (
            spec_with(json!({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}})),
            vec![
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
            ],
        ),
        (
            spec_with(
                json!({"strategy": {"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "0%"}}}),
            ),
            vec![
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0%: may not be 0 when `maxSurge` is 0",
            ],
        ),
        (
            spec_with(
                json!({"strategy": {"rollingUpdate": {"maxSurge": "abc", "maxUnavailable": 1}}}),
            ),
            vec![
                "spec.strategy.rollingUpdate.maxSurge: Invalid value: abc: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            ],
        ),
        (
            spec_with(
                json!({"strategy": {"rollingUpdate": {"maxSurge": -1, "maxUnavailable": 1}}}),
            ),
            vec![
                "spec.strategy.rollingUpdate.maxSurge: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        (
            spec_with(
                json!({"strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "150%"}}}),
            ),
            vec![
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 150%: must not be greater than 100%",
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(errors("Deployment", spec.clone()), want, "{spec}");
    }
}

#[test]
fn replica_set_rules() {
    assert!(errors("ReplicaSet", base_spec()).is_empty());
    assert_eq!(
        errors(
            "ReplicaSet",
            spec_with(json!({"selector": {"matchLabels": {}}}))
        ),
        vec![
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        ]
    );
    assert_eq!(
        errors(
            "ReplicaSet",
            spec_with(
                json!({"template": {"metadata": {"labels": {"app": "x"}}, "spec": {"activeDeadlineSeconds": 5, "containers": [{"name": "c", "image": "i:1"}]}}})
            )
        ),
        vec![
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported"
        ]
    );
}

#[test]
fn daemon_set_rules() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (base_spec(), vec![]),
        (spec_with(json!({"selector": null})), vec![MISMATCH]),
        (
            spec_with(json!({"updateStrategy": {"type": "OnDelete"}})),
            vec![],
        ),
        (
            spec_with(json!({"updateStrategy": {"type": "Replace"}})),
            vec![
                "spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Replace\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\"",
            ],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "10%"}}}),
            ),
            vec![],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}}),
            ),
            vec![
                "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0",
            ],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}}),
            ),
            vec![
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero",
            ],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": "101%", "maxSurge": 0}}}),
            ),
            vec![
                "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 101%: must not be greater than 100%",
            ],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1, "podUpdatePolicy": "InPlaceIfPossible"}}}),
            ),
            vec![],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1, "podUpdatePolicy": "Magic"}}}),
            ),
            vec![
                "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Unsupported value: \"Magic\": supported values: \"Recreate\", \"InPlaceIfPossible\"",
            ],
        ),
        (
            spec_with(json!({"revisionHistoryLimit": -2})),
            vec![
                "spec.revisionHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(errors("DaemonSet", spec.clone()), want, "{spec}");
    }
}

#[test]
fn stateful_set_rules() {
    let with_claims = spec_with(json!({
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i:1", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
    }));
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (base_spec(), vec![]),
        (with_claims, vec![]),
        (
            spec_with(json!({"selector": null})),
            vec!["spec.selector: Required value", MISMATCH],
        ),
        (
            spec_with(json!({"podManagementPolicy": "Parallel"})),
            vec![],
        ),
        (
            spec_with(json!({"podManagementPolicy": "Random"})),
            vec![
                "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
            ],
        ),
        (
            spec_with(json!({"updateStrategy": {"type": "OnDelete"}})),
            vec![],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}}),
            ),
            vec![
                "spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:1, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'",
            ],
        ),
        (
            spec_with(json!({"updateStrategy": {"type": "Sideways"}})),
            vec![
                "spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Sideways\", RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete'",
            ],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": -1}}}),
            ),
            vec![
                "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}}),
            ),
            vec![],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0}}}),
            ),
            vec!["spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: cannot be 0"],
        ),
        (
            spec_with(
                json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "Never"}}}),
            ),
            vec![
                "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Unsupported value: \"Never\": supported values: \"Recreate\", \"InPlaceIfPossible\"",
            ],
        ),
        (
            spec_with(
                json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Keep"}}),
            ),
            vec![
                "spec.persistentVolumeClaimRetentionPolicy.whenScaled: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"",
            ],
        ),
        (
            spec_with(json!({"ordinals": {"start": -1}})),
            vec!["spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0"],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(errors("StatefulSet", spec.clone()), want, "{spec}");
    }
    // StatefulSet names are DNS labels.
    let mut dotted = workload("StatefulSet", base_spec());
    dotted["metadata"]["name"] = json!("web.v1");
    assert_eq!(validate_create("apps", "StatefulSet", &dotted).len(), 1);
}

#[test]
fn selector_is_immutable() {
    for kind in ["Deployment", "ReplicaSet", "DaemonSet"] {
        let old = workload(kind, base_spec());
        let mut scaled = old.clone();
        scaled["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
        assert!(
            validate_update("apps", kind, &scaled, &old).is_empty(),
            "{kind}"
        );
        let new = workload(
            kind,
            spec_with(json!({
                "selector": {"matchLabels": {"app": "y"}},
                "template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}},
            })),
        );
        let got: Vec<String> = validate_update("apps", kind, &new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"y\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
            ],
            "{kind}"
        );
    }
}

#[test]
fn stateful_set_updates() {
    let old = workload("StatefulSet", base_spec());
    let update = |f: &dyn Fn(&mut Value)| {
        let mut new = old.clone();
        f(&mut new);
        validate_update("apps", "StatefulSet", &new, &old)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    for allowed in [
        json!({"replicas": 5}),
        json!({"minReadySeconds": 5}),
        json!({"revisionHistoryLimit": 3}),
        json!({"updateStrategy": {"type": "OnDelete"}}),
        json!({"ordinals": {"start": 2}}),
        json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}}),
    ] {
        let got = update(&|s| {
            if let (Some(spec), Some(change)) = (s["spec"].as_object_mut(), allowed.as_object()) {
                spec.extend(change.clone());
            }
        });
        assert!(got.is_empty(), "{allowed}: {got:?}");
    }
    assert_eq!(
        update(&|s| s["spec"]["podManagementPolicy"] = json!("Parallel")),
        vec![format!("spec: Forbidden: {STATEFULSET_UPDATE_FORBIDDEN}")]
    );
    assert_eq!(
        update(&|s| s["spec"]["serviceName"] = json!("web")),
        vec![format!("spec: Forbidden: {STATEFULSET_UPDATE_FORBIDDEN}")]
    );
}

#[test]
fn controller_revisions() {
    let rev = json!({"metadata": {"name": "ds-abc", "namespace": "default"}, "data": {"spec": {}}, "revision": 1});
    assert!(validate_create("apps", "ControllerRevision", &rev).is_empty());
    let mut no_data = rev.clone();
    no_data.as_object_mut().map(|m| m.remove("data"));
    let got: Vec<String> = validate_create("apps", "ControllerRevision", &no_data)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, vec!["data: Required value: data is mandatory"]);

    let mut bumped = rev.clone();
    bumped["revision"] = json!(3);
    assert!(validate_update("apps", "ControllerRevision", &bumped, &rev).is_empty());
    let mut changed = rev.clone();
    changed["data"] = json!({"spec": {"x": 1}});
    let got: Vec<String> = validate_update("apps", "ControllerRevision", &changed, &rev)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec!["data: Invalid value: {\"spec\":{\"x\":1}}: field is immutable"]
    );
}
