//! Bodies are built by encoding with the `k8s-pb` crate (an independent prost encoder of the
//! same messages) and by a body captured from kubectl 1.32; decoding them must give the JSON
//! the same client would have sent.

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use super::*;

/// `k8s\0` + a `runtime.Unknown` wrapping `object`, as kubectl sends it.
fn envelope(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(object.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

/// ObjectMeta as Go writes it: every non-pointer string present even when empty, and the zero
/// creationTimestamp as an empty message.
fn go_meta(name: &str, namespace: &str, l: &[(&str, &str)]) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(namespace),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        creation_timestamp: Some(meta::Time::default()),
        labels: labels(l),
        ..Default::default()
    }
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// `kubectl create deployment web --image=nginx:1.27 --replicas=3` (kubectl v1.32.4), as
/// printed by `-v=9`.
const KUBECTL_CREATE_DEPLOYMENT: &str = concat!(
    "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412b0010a1f",
    "0a0377656212001a0022002a003200380042005a0a0a03617070120377656212",
    "7f0803120c0a0a0a0361707012037765621a650a1c0a0012001a0022002a0032",
    "00380042005a0a0a036170701203776562124512270a056e67696e78120a6e67",
    "696e783a312e32372a0042006a007200800100880100900100a201001a003200",
    "42004a0052005800600068008201008a01009a0100c2010022020a0028003800",
    "1a0c0800100018002000280038001a002200",
);

#[test]
fn kubectl_create_deployment_body() {
    let got = decode(&hex(KUBECTL_CREATE_DEPLOYMENT)).unwrap();
    // What kubectl sends as JSON for the same command: Go's zero values of non-pointer fields
    // are dropped (`omitempty`); `status.replicas` is kept since `replicas` is a pointer in specs
    // (the server resets status on create anyway).
    let want = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "nginx",
                        "image": "nginx:1.27",
                        "resources": {},
                    }],
                },
            },
            "strategy": {},
        },
        "status": {
            "replicas": 0,
        },
    });
    assert_eq!(got, want);
}

#[test]
fn other_kubectl_bodies() {
    // `kubectl create namespace team-a` and `kubectl create service clusterip foo
    // --tcp=80:8080` (kubectl v1.32.4, captured with -v=9).
    let cases = [
        (
            concat!(
                "6b3873000a0f0a02763112094e616d657370616365121e0a160a067465616d2d",
                "6112001a0022002a0032003800420012001a020a001a002200",
            ),
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "team-a"},
                "spec": {},
                "status": {},
            }),
        ),
        (
            concat!(
                "6b3873000a0d0a02763112075365727669636512690a1f0a03666f6f12001a00",
                "22002a003200380042005a0a0a036170701203666f6f12420a1b0a0738302d38",
                "303830120354435018502207080010903f1a002800120a0a036170701203666f",
                "6f1a002209436c757374657249503a00420052005a00600068001a020a001a00",
                "2200",
            ),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "foo", "labels": {"app": "foo"}},
                "spec": {
                    "ports": [{
                        "name": "80-8080",
                        "protocol": "TCP",
                        "port": 80,
                        "targetPort": 8080,
                    }],
                    "selector": {"app": "foo"},
                    "type": "ClusterIP",
                },
                "status": {"loadBalancer": {}},
            }),
        ),
    ];
    for (body, want) in cases {
        assert_eq!(decode(&hex(body)).unwrap(), want);
    }
}

fn deployment() -> apps::Deployment {
    let container = core::Container {
        name: s("web"),
        image: s("nginx:1.27"),
        working_dir: s(""),
        ports: vec![core::ContainerPort {
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: s(""),
            ..Default::default()
        }],
        env: vec![
            core::EnvVar {
                name: s("MODE"),
                value: s("prod"),
                value_from: None,
            },
            core::EnvVar {
                name: s("POD"),
                value: s(""),
                value_from: Some(core::EnvVarSource {
                    field_ref: Some(core::ObjectFieldSelector {
                        api_version: s("v1"),
                        field_path: s("metadata.name"),
                    }),
                    ..Default::default()
                }),
            },
            core::EnvVar {
                name: s("KEY"),
                value: None,
                value_from: Some(core::EnvVarSource {
                    secret_key_ref: Some(core::SecretKeySelector {
                        local_object_reference: Some(core::LocalObjectReference {
                            name: s("creds"),
                        }),
                        key: s("token"),
                        optional: Some(false),
                    }),
                    ..Default::default()
                }),
            },
        ],
        resources: Some(core::ResourceRequirements {
            limits: [("cpu".to_string(), quantity("500m"))].into(),
            requests: [("memory".to_string(), quantity("64Mi"))].into(),
            ..Default::default()
        }),
        readiness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: s("/healthz"),
                    port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("http"),
                    }),
                    host: s(""),
                    scheme: s("HTTP"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            period_seconds: Some(10),
            ..Default::default()
        }),
        args: vec!["--port".into(), String::new()],
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(go_meta("web", "prod", &[("app", "web")])),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: labels(&[("app", "web")]),
                match_expressions: vec![meta::LabelSelectorRequirement {
                    key: s("tier"),
                    operator: s("In"),
                    values: vec!["a".into(), "b".into()],
                }],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(go_meta("", "", &[("app", "web"), ("empty", "")])),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    volumes: vec![core::Volume {
                        name: s("data"),
                        volume_source: Some(core::VolumeSource {
                            empty_dir: Some(core::EmptyDirVolumeSource {
                                medium: s(""),
                                size_limit: Some(quantity("1Gi")),
                            }),
                            ..Default::default()
                        }),
                    }],
                    termination_grace_period_seconds: Some(0),
                    priority: Some(-5),
                    host_ipc: Some(false),
                    dns_policy: s("ClusterFirst"),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("25%"),
                    }),
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: s(""),
                    }),
                }),
            }),
            progress_deadline_seconds: Some(600),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn deployment_round_trips_to_json() {
    let got = decode(&envelope("apps/v1", "Deployment", &deployment())).unwrap();
    let want = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web"}},
        "spec": {
            "replicas": 0,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
            },
            "template": {
                "metadata": {"labels": {"app": "web", "empty": ""}},
                "spec": {
                    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
                    "containers": [{
                        "name": "web",
                        "image": "nginx:1.27",
                        "args": ["--port", ""],
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [
                            {"name": "MODE", "value": "prod"},
                            {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token", "optional": false}}},
                        ],
                        "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}},
                        "readinessProbe": {
                            "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                            "periodSeconds": 10,
                        },
                    }],
                    "terminationGracePeriodSeconds": 0,
                    "dnsPolicy": "ClusterFirst",
                    "priority": -5,
                },
            },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1},
            },
            "progressDeadlineSeconds": 600,
        },
    });
    assert_eq!(got, want);
}

#[test]
fn pod_as_kubectl_run_sends_it() {
    let pod = core::Pod {
        metadata: Some(go_meta("nginx", "", &[("run", "nginx")])),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: s("nginx"),
                image: s("nginx"),
                resources: Some(core::ResourceRequirements::default()),
                termination_message_path: s(""),
                stdin: Some(false),
                ..Default::default()
            }],
            restart_policy: s("Always"),
            dns_policy: s("ClusterFirst"),
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            phase: s(""),
            ..Default::default()
        }),
    };
    let got = decode(&envelope("v1", "Pod", &pod)).unwrap();
    let want = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nginx", "labels": {"run": "nginx"}},
        "spec": {
            "containers": [{"name": "nginx", "image": "nginx", "resources": {}}],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
        },
        "status": {},
    });
    assert_eq!(got, want);
}

#[test]
fn namespace() {
    let ns = core::Namespace {
        metadata: Some(go_meta("team-a", "", &[])),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus::default()),
    };
    let got = decode(&envelope("v1", "Namespace", &ns)).unwrap();
    let want = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a"},
        "spec": {},
        "status": {},
    });
    assert_eq!(got, want);
}

#[test]
fn eviction_with_delete_options() {
    let eviction = policy::Eviction {
        metadata: Some(go_meta("web-1", "prod", &[])),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(30),
            preconditions: Some(meta::Preconditions {
                uid: s("abc"),
                resource_version: None,
            }),
            dry_run: vec!["All".into()],
            ..Default::default()
        }),
    };
    let got = decode(&envelope("policy/v1", "Eviction", &eviction)).unwrap();
    let want = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": "prod"},
        "deleteOptions": {"gracePeriodSeconds": 30, "preconditions": {"uid": "abc"}, "dryRun": ["All"]},
    });
    assert_eq!(got, want);

    let options = meta::DeleteOptions {
        propagation_policy: s("Foreground"),
        orphan_dependents: Some(false),
        ..Default::default()
    };
    let got = decode(&envelope("v1", "DeleteOptions", &options)).unwrap();
    let want = json!({
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "orphanDependents": false,
    });
    assert_eq!(got, want);
}

#[test]
fn special_messages() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: s("creds"),
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_714_564_800),
                nanos: Some(5),
            }),
            deletion_timestamp: Some(meta::Time {
                seconds: Some(0),
                nanos: None,
            }),
            managed_fields: vec![meta::ManagedFieldsEntry {
                manager: s("kubectl"),
                time: Some(meta::Time {
                    seconds: Some(1_714_564_800),
                    nanos: None,
                }),
                fields_type: s("FieldsV1"),
                fields_v1: Some(meta::FieldsV1 {
                    raw: Some(br#"{"f:data":{}}"#.to_vec()),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        data: [("token".to_string(), b"\x00hi".to_vec())].into(),
        string_data: labels(&[("plain", "")]),
        r#type: s("Opaque"),
        immutable: None,
    };
    let got = decode(&envelope("v1", "Secret", &secret)).unwrap();
    let want = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "creds",
            "creationTimestamp": "2024-05-01T12:00:00Z",
            "deletionTimestamp": "1970-01-01T00:00:00Z",
            "managedFields": [{
                "manager": "kubectl",
                "time": "2024-05-01T12:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {}},
            }],
        },
        "data": {"token": "AGhp"},
        "stringData": {"plain": ""},
        "type": "Opaque",
    });
    assert_eq!(got, want);

    let event = core::Event {
        metadata: Some(go_meta("e1", "default", &[])),
        event_time: Some(meta::MicroTime {
            seconds: Some(1_714_564_800),
            nanos: Some(123_456_789),
        }),
        series: Some(core::EventSeries {
            count: Some(2),
            last_observed_time: Some(meta::MicroTime {
                seconds: Some(1_714_564_801),
                nanos: None,
            }),
        }),
        ..Default::default()
    };
    let got = decode(&envelope("v1", "Event", &event)).unwrap();
    assert_eq!(got["eventTime"], json!("2024-05-01T12:00:00.123456Z"));
    assert_eq!(
        got["series"],
        json!({"count": 2, "lastObservedTime": "2024-05-01T12:00:01.000000Z"})
    );

    let pvc = core::PersistentVolumeClaim {
        metadata: Some(go_meta("data", "", &[])),
        spec: Some(core::PersistentVolumeClaimSpec {
            storage_class_name: s(""),
            volume_name: s(""),
            ..Default::default()
        }),
        status: None,
    };
    let got = decode(&envelope("v1", "PersistentVolumeClaim", &pvc)).unwrap();
    assert_eq!(
        got["spec"],
        json!({"storageClassName": ""}),
        "a PVC's empty class is meaningful"
    );

    let revision = apps::ControllerRevision {
        metadata: Some(go_meta("web-1", "", &[])),
        data: Some(RawExtension {
            raw: Some(br#"{"spec":{"x":[1,2]}}"#.to_vec()),
        }),
        revision: Some(2),
    };
    let got = decode(&envelope("apps/v1", "ControllerRevision", &revision)).unwrap();
    assert_eq!(got["data"], json!({"spec": {"x": [1, 2]}}));
    assert_eq!(got["revision"], json!(2));
}

#[test]
fn durations_format_as_go_does() {
    let cases = [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (1_500_000, "1.5ms"),
        (100_000_000, "100ms"),
        (1_000_000_000, "1s"),
        (1_500_000_000, "1.5s"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_723_000_000_000, "1h2m3s"),
        (-5_000_000_000, "-5s"),
    ];
    for (nanos, want) in cases {
        assert_eq!(go_duration(nanos), want, "{nanos}");
    }
    // The message form, inside a table (meta.v1.Duration on the wire is field 1 varint).
    let decoder = Decoder {
        schema: schema::schema().unwrap(),
    };
    let bytes = [vec![0x08], varint(3_600_000_000_000)].concat();
    let got = decoder.message("apimachinery.pkg.apis.meta.v1.Duration", &bytes, 0);
    assert_eq!(got.unwrap(), Some(json!("1h0m0s")));
    let got = decoder.message("apimachinery.pkg.apis.meta.v1.Duration", &[], 0);
    assert_eq!(got.unwrap(), Some(json!("0s")));
}

#[test]
fn wire_details() {
    let decoder = Decoder {
        schema: schema::schema().unwrap(),
    };
    let object = |name: &str, bytes: &[u8]| decoder.object(name, bytes, 0).map(Value::Object);
    let cases: Vec<(&str, Vec<u8>, Option<Value>)> = vec![
        // Unpacked and packed repeated int32 (ContainerStateTerminated... uses unpacked;
        // NodeSelectorRequirement has no ints, so take ContainerRestartRuleOnExitCodes.values).
        (
            "api.core.v1.ContainerRestartRuleOnExitCodes",
            vec![0x0a, 0x02, b'I', b'n', 0x10, 0x01, 0x12, 0x02, 0x02, 0x03],
            Some(json!({"operator": "In", "values": [1, 2, 3]})),
        ),
        // Negative int32 as a ten-byte varint.
        (
            "api.core.v1.ContainerPort",
            vec![
                0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            Some(json!({"containerPort": -1})),
        ),
        // A non-repeated message sent twice merges.
        (
            "api.core.v1.PodSpec",
            vec![0x72, 0x02, 0x10, 0x01, 0x72, 0x02, 0x18, 0x01],
            Some(json!({"securityContext": {"runAsUser": 1, "runAsNonRoot": true}})),
        ),
        // Unknown fields of every wire type are skipped.
        (
            "api.core.v1.ContainerPort",
            vec![
                0xf8, 0x07, 0x01, 0xfa, 0x07, 0x00, 0xfd, 0x07, 1, 2, 3, 4, 0x18, 0x50,
            ],
            Some(json!({"containerPort": 80})),
        ),
        // Wrong wire type for a known field.
        ("api.core.v1.ContainerPort", vec![0x1a, 0x00], None),
        ("api.core.v1.PodSpec", vec![0x72, 0x00, 0x10], None),
        // Truncated length.
        ("api.core.v1.ContainerPort", vec![0x0a, 0x05, b'a'], None),
    ];
    for (name, bytes, want) in cases {
        let got = object(name, &bytes);
        match want {
            Some(want) => assert_eq!(got.unwrap(), want, "{name} {bytes:02x?}"),
            None => assert!(got.is_err(), "{name} {bytes:02x?} gave {got:?}"),
        }
    }
}

#[test]
fn envelope_errors() {
    let valid = envelope("apps/v1", "Deployment", &deployment());
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            b"{\"kind\":\"Pod\"}".to_vec(),
            "expected prefix [107 56 115 0]",
        ),
        (MAGIC.to_vec(), "Object 'Kind' is missing"),
        (
            envelope("apps/v1", "Gadget", &deployment()),
            "no kind \"Gadget\" is registered for version \"apps/v1\"",
        ),
        (
            {
                let mut unknown = Unknown::decode(&valid[4..]).unwrap();
                unknown.content_encoding = s("gzip");
                [MAGIC.as_slice(), &unknown.encode_to_vec()].concat()
            },
            "unsupported protobuf content encoding \"gzip\"",
        ),
        (
            {
                let mut unknown = Unknown::decode(&valid[4..]).unwrap();
                unknown.raw = Some(b"{not json".to_vec());
                unknown.content_type = s("application/json");
                [MAGIC.as_slice(), &unknown.encode_to_vec()].concat()
            },
            "not valid JSON",
        ),
        (
            [valid.as_slice(), &[0x12]].concat(),
            "malformed protobuf body",
        ),
    ];
    for (body, want) in cases {
        let err = decode(&body).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }

    // A JSON payload inside the envelope is accepted as is.
    let mut unknown = Unknown::decode(&valid[4..]).unwrap();
    unknown.raw = Some(br#"{"metadata":{"name":"x"}}"#.to_vec());
    unknown.content_type = s("application/json");
    let got = decode(&[MAGIC.as_slice(), &unknown.encode_to_vec()].concat()).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}})
    );
}

#[test]
fn deep_nesting_is_refused() {
    // A RawExtension may carry a whole protobuf envelope, which may carry another...
    let mut body = envelope(
        "apps/v1",
        "ControllerRevision",
        &apps::ControllerRevision::default(),
    );
    let nest = |body: Vec<u8>| {
        let revision = apps::ControllerRevision {
            data: Some(RawExtension { raw: Some(body) }),
            ..Default::default()
        };
        envelope("apps/v1", "ControllerRevision", &revision)
    };
    for _ in 0..10 {
        body = nest(body);
    }
    let got = decode(&body).unwrap();
    assert_eq!(got["data"]["data"]["kind"], json!("ControllerRevision"));
    for _ in 0..200 {
        body = nest(body);
    }
    let err = decode(&body).unwrap_err();
    assert!(err.to_string().contains("nested deeper"), "{err}");
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

#[test]
fn truncations_and_noise_never_panic() {
    let valid = hex(KUBECTL_CREATE_DEPLOYMENT);
    // Every cut errors except at the envelope's own field boundaries: right after its TypeMeta
    // (no object yet: an empty Deployment) and after the object, before the two empty strings
    // (contentEncoding, contentType) kubectl appends.
    let raw_key = 4 + 2 + usize::from(valid[5]);
    let boundaries = [raw_key, valid.len() - 4, valid.len() - 2];
    for cut in 0..valid.len() {
        let result = decode(&valid[..cut]);
        assert_eq!(
            result.is_ok(),
            boundaries.contains(&cut),
            "cut at {cut}: {result:?}"
        );
    }

    // Random bytes and random corruptions of a valid body: errors or values, never panics.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2000 {
        let len = (next() % 64) as usize;
        let mut body = MAGIC.to_vec();
        body.extend((0..len).map(|_| next() as u8));
        let _ = decode(&body);

        let mut corrupt = valid.clone();
        for _ in 0..1 + next() % 4 {
            let i = 4 + (next() as usize) % (corrupt.len() - 4);
            corrupt[i] = next() as u8;
        }
        let _ = decode(&corrupt);
    }
}

#[test]
fn runtime_class_as_client_go_sends_it() {
    use k8s_pb::api::node::v1 as node;
    let rc = node::RuntimeClass {
        metadata: Some(go_meta("gvisor", "", &[])),
        handler: s("runsc"),
        overhead: Some(node::Overhead {
            pod_fixed: [("cpu".to_string(), quantity("250m"))].into(),
        }),
        scheduling: None,
    };
    let got = decode(&envelope("node.k8s.io/v1", "RuntimeClass", &rc)).unwrap();
    assert_eq!(
        got,
        json!({
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "gvisor"},
            "handler": "runsc",
            "overhead": {"podFixed": {"cpu": "250m"}},
        })
    );
}

#[test]
fn access_reviews_and_token_requests_decode_as_kubectl_sends_them() {
    use k8s_pb::api::authentication::v1 as authn;
    use k8s_pb::api::authorization::v1 as authz;
    let review = authz::SubjectAccessReview {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authz::SubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: s("prod"),
                verb: s("list"),
                resource: s("pods"),
                ..Default::default()
            }),
            user: s("alice"),
            groups: vec!["devs".into()],
            extra: BTreeMap::from([(
                "scopes".to_string(),
                authz::ExtraValue {
                    items: vec!["a".into(), "b".into()],
                },
            )]),
            ..Default::default()
        }),
        status: None,
    };
    let got = decode(&envelope(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &review,
    ))
    .unwrap();
    assert_eq!(
        got["spec"],
        json!({
            "resourceAttributes": {"namespace": "prod", "verb": "list", "resource": "pods"},
            "user": "alice", "groups": ["devs"], "extra": {"scopes": ["a", "b"]},
        })
    );
    let request = authn::TokenRequest {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authn::TokenRequestSpec {
            audiences: vec!["vault".into()],
            expiration_seconds: Some(600),
            bound_object_ref: Some(authn::BoundObjectReference {
                kind: s("Pod"),
                api_version: s("v1"),
                name: s("web-1"),
                u_id: s("u1"),
            }),
        }),
        status: None,
    };
    let got = decode(&envelope(
        "authentication.k8s.io/v1",
        "TokenRequest",
        &request,
    ))
    .unwrap();
    assert_eq!(got["kind"], "TokenRequest");
    assert_eq!(
        got["spec"],
        json!({"audiences": ["vault"], "expirationSeconds": 600,
               "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web-1", "uid": "u1"}})
    );
}
