//! Table tests of apply and update against the built-in kinds' real schemas (k8s-openapi's, with
//! [`super::builtin`]'s list types), following upstream's documented behaviour
//! (kubernetes.io "Server-Side Apply") step by step.

use super::*;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use std::sync::LazyLock;

static COMPONENTS: LazyLock<Map<String, Value>> = LazyLock::new(|| {
    let mut g = SchemaGenerator::new(SchemaSettings::openapi3());
    g.subschema_for::<Deployment>();
    g.subschema_for::<ConfigMap>();
    let mut schemas = g.take_definitions(true);
    assert!(builtin::decorate(&mut schemas) > 20);
    schemas
});

fn schema_of(kind: &str) -> OpenApi<'static> {
    let name = match kind {
        "Deployment" => "io.k8s.api.apps.v1.Deployment",
        _ => "io.k8s.api.core.v1.ConfigMap",
    };
    OpenApi::new(&COMPONENTS[name], &COMPONENTS)
}

/// One write in a scenario.
enum Step {
    /// Server-side apply of a configuration.
    Apply {
        by: &'static str,
        config: Value,
        force: bool,
    },
    /// A non-apply write of a whole object (`sub`: through a subresource).
    Update {
        by: &'static str,
        object: Value,
        sub: &'static str,
    },
}

/// What a step must produce.
enum Want {
    /// Success: the object (without `managedFields`) and each manager's fields, as
    /// (manager, operation, fieldsV1), in any order.
    Object(Value, Vec<(&'static str, &'static str, Value)>),
    /// Success that changed nothing at all (bookkeeping included).
    Unchanged,
    /// Refused with this message.
    Error(&'static str),
}

fn apply_step(kind: &str, live: Option<&Value>, step: &Step, t: &str) -> Result<Value, ApplyError> {
    let schema = schema_of(kind);
    let api_version = if kind == "Deployment" {
        "apps/v1"
    } else {
        "v1"
    };
    let scope = if kind == "Deployment" {
        Scope::Except("status")
    } else {
        Scope::Whole
    };
    match step {
        Step::Apply { by, config, force } => {
            let w = Writer {
                manager: by,
                api_version,
                subresource: "",
                now: t,
            };
            apply(live, config, &schema, &w, scope, *force)
        }
        Step::Update { by, object, sub } => {
            let w = Writer {
                manager: by,
                api_version,
                subresource: sub,
                now: t,
            };
            let mut new = object.clone();
            let scope = if *sub == "status" {
                Scope::Only("status")
            } else {
                scope
            };
            update(live, &mut new, &Requested::of(object), &schema, &w, scope);
            Ok(new)
        }
    }
}

fn without_managed(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(Value::Object(m)) = v.get_mut("metadata") {
        m.remove("managedFields");
    }
    v
}

fn owners(v: &Value) -> Vec<(String, String, Value)> {
    let mut out: Vec<(String, String, Value)> = ManagedFields::of(v)
        .unwrap()
        .entries
        .into_iter()
        .map(|e| {
            (
                e.manager,
                e.operation.as_str().to_string(),
                e.fields.to_fields_v1(),
            )
        })
        .collect();
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

fn run(name: &str, kind: &str, steps: Vec<(Step, Want)>) {
    let mut live: Option<Value> = None;
    for (i, (step, want)) in steps.into_iter().enumerate() {
        let t = format!("2024-01-01T00:00:{i:02}Z");
        let got = apply_step(kind, live.as_ref(), &step, &t);
        let at = format!("{name}, step {i}");
        match want {
            Want::Error(msg) => {
                assert_eq!(got.map(|_| ()).unwrap_err().to_string(), msg, "{at}");
            }
            Want::Unchanged => {
                let got = got.unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_eq!(Some(&got), live.as_ref(), "{at}");
            }
            Want::Object(obj, managers) => {
                let got = got.unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_eq!(without_managed(&got), obj, "{at}");
                let mut want: Vec<(String, String, Value)> = managers
                    .into_iter()
                    .map(|(m, o, f)| (m.to_string(), o.to_string(), f))
                    .collect();
                want.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
                assert_eq!(owners(&got), want, "{at}");
                live = Some(got);
            }
        }
    }
}

fn apply_by(by: &'static str, config: Value) -> Step {
    Step::Apply {
        by,
        config,
        force: false,
    }
}

fn force_by(by: &'static str, config: Value) -> Step {
    Step::Apply {
        by,
        config,
        force: true,
    }
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "test-cm", "namespace": "default"}, "data": data})
}

#[test]
fn configmap_scenarios() {
    // The SSA page's first example: the applier owns its label and its data key.
    let doc_example = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "test-cm", "namespace": "default", "labels": {"test-label": "test"}},
        "data": {"key": "some value"}});
    run(
        "apply to empty, then again unchanged",
        "ConfigMap",
        vec![
            (
                apply_by("kubectl", doc_example.clone()),
                Want::Object(
                    doc_example.clone(),
                    vec![(
                        "kubectl",
                        "Apply",
                        json!({"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {"f:test-label": {}}}}),
                    )],
                ),
            ),
            (apply_by("kubectl", doc_example.clone()), Want::Unchanged),
        ],
    );
    run(
        "a field no longer applied is removed",
        "ConfigMap",
        vec![
            (
                apply_by("a", cm(json!({"k": "1", "gone": "2"}))),
                Want::Object(
                    cm(json!({"k": "1", "gone": "2"})),
                    vec![("a", "Apply", json!({"f:data": {"f:gone": {}, "f:k": {}}}))],
                ),
            ),
            (
                apply_by("a", cm(json!({"k": "1"}))),
                Want::Object(
                    cm(json!({"k": "1"})),
                    vec![("a", "Apply", json!({"f:data": {"f:k": {}}}))],
                ),
            ),
        ],
    );
    run(
        "two managers share a field; either may give it up",
        "ConfigMap",
        vec![
            (
                apply_by("a", cm(json!({"k": "v"}))),
                Want::Object(
                    cm(json!({"k": "v"})),
                    vec![("a", "Apply", json!({"f:data": {"f:k": {}}}))],
                ),
            ),
            (
                apply_by("b", cm(json!({"k": "v"}))),
                Want::Object(
                    cm(json!({"k": "v"})),
                    vec![
                        ("a", "Apply", json!({"f:data": {"f:k": {}}})),
                        ("b", "Apply", json!({"f:data": {"f:k": {}}})),
                    ],
                ),
            ),
            (
                apply_by("a", cm(json!({"other": "x"}))),
                Want::Object(
                    cm(json!({"k": "v", "other": "x"})),
                    vec![
                        ("a", "Apply", json!({"f:data": {"f:other": {}}})),
                        ("b", "Apply", json!({"f:data": {"f:k": {}}})),
                    ],
                ),
            ),
            (
                apply_by("a", cm(json!({"k": "changed"}))),
                Want::Error(r#"Apply failed with 1 conflict: conflict with "b": .data.k"#),
            ),
        ],
    );
    run(
        "conflict, then force moves ownership",
        "ConfigMap",
        vec![
            (
                apply_by("a", cm(json!({"k": "v", "j": "1"}))),
                Want::Object(
                    cm(json!({"k": "v", "j": "1"})),
                    vec![("a", "Apply", json!({"f:data": {"f:j": {}, "f:k": {}}}))],
                ),
            ),
            (
                apply_by("b", cm(json!({"k": "w", "j": "2"}))),
                Want::Error(
                    "Apply failed with 2 conflicts: conflicts with \"a\":\n- .data.j\n- .data.k",
                ),
            ),
            (
                force_by("b", cm(json!({"k": "w"}))),
                Want::Object(
                    cm(json!({"k": "w", "j": "1"})),
                    vec![
                        ("a", "Apply", json!({"f:data": {"f:j": {}}})),
                        ("b", "Apply", json!({"f:data": {"f:k": {}}})),
                    ],
                ),
            ),
            // The previous owner must now agree or force back.
            (
                apply_by("a", cm(json!({"k": "v", "j": "1"}))),
                Want::Error(r#"Apply failed with 1 conflict: conflict with "b": .data.k"#),
            ),
        ],
    );
    run(
        "an update takes the fields it changes from appliers",
        "ConfigMap",
        vec![
            (
                apply_by("a", cm(json!({"k": "v", "j": "1"}))),
                Want::Object(
                    cm(json!({"k": "v", "j": "1"})),
                    vec![("a", "Apply", json!({"f:data": {"f:j": {}, "f:k": {}}}))],
                ),
            ),
            (
                Step::Update {
                    by: "kube-controller-manager",
                    object: cm(json!({"k": "edited", "j": "1", "new": "n"})),
                    sub: "",
                },
                Want::Object(
                    cm(json!({"k": "edited", "j": "1", "new": "n"})),
                    vec![
                        ("a", "Apply", json!({"f:data": {"f:j": {}}})),
                        (
                            "kube-controller-manager",
                            "Update",
                            json!({"f:data": {"f:k": {}, "f:new": {}}}),
                        ),
                    ],
                ),
            ),
            (
                apply_by("a", cm(json!({"k": "v", "j": "1"}))),
                Want::Error(
                    r#"Apply failed with 1 conflict: conflict with "kube-controller-manager" using v1: .data.k"#,
                ),
            ),
            // Removing a field in an update takes it from everyone.
            (
                Step::Update {
                    by: "kube-controller-manager",
                    object: cm(json!({"k": "edited", "new": "n"})),
                    sub: "",
                },
                Want::Object(
                    cm(json!({"k": "edited", "new": "n"})),
                    vec![(
                        "kube-controller-manager",
                        "Update",
                        json!({"f:data": {"f:k": {}, "f:new": {}}}),
                    )],
                ),
            ),
        ],
    );
    run(
        "bad configurations",
        "ConfigMap",
        vec![(
            apply_by(
                "a",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "x", "managedFields": [{"manager": "m"}]}}),
            ),
            Want::Error("metadata.managedFields must be nil"),
        )],
    );
}

fn deploy(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn containers(c: Value) -> Value {
    json!({"selector": {"matchLabels": {"app": "web"}},
           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": c}}})
}

/// The fields of `containers(...)` besides the containers.
fn template_fields(c: Value) -> Value {
    json!({"f:spec": {"f:selector": {}, "f:template": {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": c}}}})
}

#[test]
fn associative_lists_merge_by_key() {
    let nginx = json!({"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]});
    let sidecar = json!({"name": "sidecar", "image": "busybox"});
    let nginx_fields = json!({"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {},
        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}});
    let sidecar_fields = json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
        "k:{\"name\":\"sidecar\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
    run(
        "a second manager adds its own container; the first removes its own",
        "Deployment",
        vec![
            (
                apply_by("kubectl", deploy(containers(json!([nginx])))),
                Want::Object(
                    deploy(containers(json!([nginx]))),
                    vec![("kubectl", "Apply", template_fields(nginx_fields.clone()))],
                ),
            ),
            (
                apply_by(
                    "mesh",
                    deploy(json!({"template": {"spec": {"containers": [sidecar]}}})),
                ),
                Want::Object(
                    deploy(containers(json!([nginx, sidecar]))),
                    vec![
                        ("kubectl", "Apply", template_fields(nginx_fields.clone())),
                        ("mesh", "Apply", sidecar_fields.clone()),
                    ],
                ),
            ),
            (
                apply_by(
                    "kubectl",
                    deploy(containers(json!([{"name": "nginx", "image": "nginx:1.28",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}]}]))),
                ),
                Want::Object(
                    deploy(containers(json!([{"name": "nginx", "image": "nginx:1.28",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}]}, sidecar]))),
                    vec![
                        (
                            "kubectl",
                            "Apply",
                            template_fields(
                                json!({"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {},
                                "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {},
                                    "f:containerPort": {}, "f:protocol": {}}}}}),
                            ),
                        ),
                        ("mesh", "Apply", sidecar_fields.clone()),
                    ],
                ),
            ),
            // kubectl stops applying its container; the sidecar's owner keeps its own.
            (
                apply_by("kubectl", deploy(containers(json!([])))),
                Want::Object(
                    deploy(containers(json!([sidecar]))),
                    vec![
                        (
                            "kubectl",
                            "Apply",
                            json!({"f:spec": {"f:selector": {}, "f:template": {
                                "f:metadata": {"f:labels": {"f:app": {}}}}}}),
                        ),
                        ("mesh", "Apply", sidecar_fields),
                    ],
                ),
            ),
        ],
    );
    run(
        "duplicate keys in a configuration are refused",
        "Deployment",
        vec![(
            apply_by(
                "kubectl",
                deploy(containers(json!([{"name": "a"}, {"name": "a"}]))),
            ),
            Want::Error(r#".spec.template.spec.containers: duplicate entries for key [name="a"]"#),
        )],
    );
}

#[test]
fn sets_and_atomic_lists() {
    let with = |fin: Value, args: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "finalizers": fin},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "args": args}]}}}})
    };
    let c_fields = |args: bool| {
        let mut c = json!({".": {}, "f:name": {}});
        if args {
            c["f:args"] = json!({});
        }
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": c}}}}})
    };
    let fields = |fin: Value, args: bool| {
        let mut f = c_fields(args);
        f["f:metadata"] = json!({"f:finalizers": fin});
        f
    };
    run(
        "set items are owned one by one; atomic lists as a whole",
        "Deployment",
        vec![
            (
                apply_by("a", with(json!(["x"]), json!(["--a"]))),
                Want::Object(
                    with(json!(["x"]), json!(["--a"])),
                    vec![("a", "Apply", fields(json!({"v:\"x\"": {}}), true))],
                ),
            ),
            (
                apply_by("b", with(json!(["y"]), json!(["--b"]))),
                Want::Error(
                    r#"Apply failed with 1 conflict: conflict with "a": .spec.template.spec.containers[name="c"].args"#,
                ),
            ),
            (
                apply_by("b", with(json!(["y"]), json!(["--a"]))),
                Want::Object(
                    with(json!(["x", "y"]), json!(["--a"])),
                    vec![
                        ("a", "Apply", fields(json!({"v:\"x\"": {}}), true)),
                        ("b", "Apply", fields(json!({"v:\"y\"": {}}), true)),
                    ],
                ),
            ),
            (
                force_by("b", with(json!(["y"]), json!(["--b"]))),
                Want::Object(
                    with(json!(["x", "y"]), json!(["--b"])),
                    vec![
                        ("a", "Apply", fields(json!({"v:\"x\"": {}}), false)),
                        ("b", "Apply", fields(json!({"v:\"y\"": {}}), true)),
                    ],
                ),
            ),
            (
                apply_by(
                    "a",
                    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}),
                ),
                Want::Object(
                    with(json!(["y"]), json!(["--b"])),
                    vec![("b", "Apply", fields(json!({"v:\"y\"": {}}), true))],
                ),
            ),
        ],
    );
}

#[test]
fn replicas_handover_to_an_autoscaler() {
    // The SSA page's "Transferring ownership": the user shares `replicas` with the autoscaler's
    // manager by applying the same value under it, then drops it from the manifest; the value
    // stays, owned by the autoscaler alone.
    let full = |replicas: Option<i64>| {
        let mut spec = containers(json!([{"name": "nginx", "image": "nginx:1.14.2"}]));
        if let Some(r) = replicas {
            spec["replicas"] = json!(r);
        }
        deploy(spec)
    };
    let user_fields = |replicas: bool| {
        let mut f = template_fields(
            json!({"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}}),
        );
        if replicas {
            f["f:spec"]["f:replicas"] = json!({});
        }
        f
    };
    let hpa = json!({"f:spec": {"f:replicas": {}}});
    run(
        "replicas handover",
        "Deployment",
        vec![
            (
                apply_by("kubectl", full(Some(3))),
                Want::Object(full(Some(3)), vec![("kubectl", "Apply", user_fields(true))]),
            ),
            (
                apply_by("handover-to-hpa", deploy(json!({"replicas": 3}))),
                Want::Object(
                    full(Some(3)),
                    vec![
                        ("handover-to-hpa", "Apply", hpa.clone()),
                        ("kubectl", "Apply", user_fields(true)),
                    ],
                ),
            ),
            (
                apply_by("kubectl", full(None)),
                Want::Object(
                    full(Some(3)),
                    vec![
                        ("handover-to-hpa", "Apply", hpa.clone()),
                        ("kubectl", "Apply", user_fields(false)),
                    ],
                ),
            ),
            // The autoscaler scales through `scale`; the user's next apply does not fight it.
            (
                Step::Update {
                    by: "horizontal-pod-autoscaler",
                    object: full(Some(7)),
                    sub: "scale",
                },
                Want::Object(
                    full(Some(7)),
                    vec![
                        ("horizontal-pod-autoscaler", "Update", hpa.clone()),
                        ("kubectl", "Apply", user_fields(false)),
                    ],
                ),
            ),
            (apply_by("kubectl", full(None)), Want::Unchanged),
            (
                apply_by("kubectl", full(Some(3))),
                Want::Error(
                    r#"Apply failed with 1 conflict: conflict with "horizontal-pod-autoscaler" with subresource "scale" using apps/v1: .spec.replicas"#,
                ),
            ),
        ],
    );
}

#[test]
fn taking_over_from_client_side_apply() {
    let manifest = |replicas: i64| {
        let mut d = deploy(containers(
            json!([{"name": "nginx", "image": "nginx:1.27"}]),
        ));
        d["spec"]["replicas"] = json!(replicas);
        d
    };
    let mut created = manifest(1);
    created["metadata"]["annotations"] =
        json!({ operation::LAST_APPLIED: manifest(1).to_string() });
    let schema = schema_of("Deployment");
    let w = |manager| Writer {
        manager,
        api_version: "apps/v1",
        subresource: "",
        now: "2024-01-01T00:00:00Z",
    };
    let mut live = created.clone();
    update(
        None,
        &mut live,
        &Requested::Keep,
        &schema,
        &w("kubectl-client-side-apply"),
        Scope::Except("status"),
    );
    let csa = ManagedFields::of(&live).unwrap();
    assert_eq!(csa.entries.len(), 1);
    assert!(
        csa.entries[0]
            .fields
            .has(&Path::fields(&["spec", "replicas"]).0)
    );

    // Another manager conflicts with client-side apply's fields...
    let other = apply(
        Some(&live),
        &manifest(2),
        &schema,
        &w("ci"),
        Scope::Except("status"),
        false,
    );
    assert_eq!(
        other.unwrap_err().to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
    );
    // ...kubectl takes over the fields its last client-side apply set, and keeps the annotation
    // in step so a later client-side apply still works.
    let taken = apply(
        Some(&live),
        &manifest(2),
        &schema,
        &w("kubectl"),
        Scope::Except("status"),
        false,
    )
    .unwrap();
    assert_eq!(taken["spec"]["replicas"], 2);
    let last: Value = serde_json::from_str(
        taken["metadata"]["annotations"][operation::LAST_APPLIED]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last, manifest(2));
    let m = ManagedFields::of(&taken).unwrap();
    let csa = m
        .entries
        .iter()
        .find(|e| e.manager == "kubectl-client-side-apply")
        .unwrap();
    assert!(!csa.fields.has(&Path::fields(&["spec", "replicas"]).0));
}

#[test]
fn objects_nobody_tracked_belong_to_before_first_apply() {
    let live = deploy(json!({"replicas": 1}));
    let schema = schema_of("Deployment");
    let w = Writer {
        manager: "a",
        api_version: "apps/v1",
        subresource: "",
        now: "2024-01-01T00:00:00Z",
    };
    let err = apply(
        Some(&live),
        &deploy(json!({"replicas": 2})),
        &schema,
        &w,
        Scope::Except("status"),
        false,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas"#
    );
}

#[test]
fn updates_track_creation_subresources_and_resets() {
    let schema = schema_of("Deployment");
    let w = |manager, subresource| Writer {
        manager,
        api_version: "apps/v1",
        subresource,
        now: "2024-01-01T00:00:00Z",
    };
    // Creation: everything the creator sent, list items owned with their fields.
    let mut created = deploy(containers(json!([{"name": "nginx", "image": "nginx"}])));
    created["status"] = json!({"replicas": 0});
    update(
        None,
        &mut created,
        &Requested::Keep,
        &schema,
        &w("kubectl-create", ""),
        Scope::Except("status"),
    );
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {".": {}, "f:selector": {}, "f:template": {".": {},
                "f:metadata": {".": {}, "f:labels": {".": {}, "f:app": {}}},
                "f:spec": {".": {}, "f:containers": {".": {}, "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}}])
    );
    // A status write owns status only, recorded with its subresource.
    let mut status = created.clone();
    status["status"] = json!({"replicas": 1});
    update(
        Some(&created),
        &mut status,
        &Requested::Keep,
        &schema,
        &w("controller", "status"),
        Scope::Only("status"),
    );
    let m = ManagedFields::of(&status).unwrap();
    let ctl = m
        .entries
        .iter()
        .find(|e| e.manager == "controller")
        .unwrap();
    assert_eq!(ctl.subresource, "status");
    assert_eq!(
        ctl.fields.to_fields_v1(),
        json!({"f:status": {"f:replicas": {}}})
    );
    // A write that changes nothing leaves the bookkeeping as it was.
    let mut same = status.clone();
    update(
        Some(&status),
        &mut same,
        &Requested::Keep,
        &schema,
        &w("someone", ""),
        Scope::Except("status"),
    );
    assert_eq!(same, status);
    // `managedFields: [{}]` resets the bookkeeping to just this write.
    let mut reset = status.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    let requested = Requested::of(&reset);
    reset["spec"]["paused"] = json!(true);
    update(
        Some(&status),
        &mut reset,
        &requested,
        &schema,
        &w("editor", ""),
        Scope::Except("status"),
    );
    let m = ManagedFields::of(&reset).unwrap();
    assert_eq!(m.entries.len(), 1);
    assert_eq!(
        m.entries[0].fields.to_fields_v1(),
        json!({"f:spec": {"f:paused": {}}})
    );
}

#[test]
fn settling_keeps_bookkeeping_of_a_write_that_changed_nothing() {
    let schema = schema_of("ConfigMap");
    let w = |now| Writer {
        manager: "a",
        api_version: "v1",
        subresource: "",
        now,
    };
    let live = apply(
        None,
        &cm(json!({"cpu": "100m"})),
        &schema,
        &w("2024-01-01T00:00:00Z"),
        Scope::Whole,
        false,
    )
    .unwrap();
    // The configuration spells the value differently; admission would store it as before.
    let mut next = apply(
        Some(&live),
        &cm(json!({"cpu": "0.1"})),
        &schema,
        &w("2024-01-01T00:00:09Z"),
        Scope::Whole,
        false,
    )
    .unwrap();
    next["data"]["cpu"] = json!("100m");
    assert_ne!(next, live, "apply stamped a new time");
    settle(&live, &mut next);
    assert_eq!(next, live);
    // A real change keeps its new bookkeeping.
    let mut changed = next.clone();
    changed["data"]["cpu"] = json!("200m");
    changed["metadata"]["managedFields"][0]["time"] = json!("2024-01-01T00:00:10Z");
    let before = changed.clone();
    settle(&live, &mut changed);
    assert_eq!(changed, before);
}
