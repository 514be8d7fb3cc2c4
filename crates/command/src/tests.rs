use super::*;
use rand::{SeedableRng, rngs::StdRng};
use serde_json::{Value, json};

fn pod(container: Value, volumes: Value, annotations: Value) -> (Pod, Container) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": annotations},
        "spec": {"containers": [container], "volumes": volumes, "nodeName": "node-0"},
    }))
    .unwrap();
    let c = pod.spec.as_ref().unwrap().containers[0].clone();
    (pod, c)
}

fn program(container: Value) -> Option<Program> {
    let (pod, c) = pod(container, json!([]), json!({}));
    Program::of(&c, &pod)
}

fn busybox(command: Value) -> Value {
    json!({"name": "c", "image": "busybox:1.36", "command": command})
}

fn once(p: &Program) -> Result<Run, String> {
    let (mut pf, mut nf) = (HashSet::new(), HashSet::new());
    p.run(
        Files {
            pod: &mut pf,
            node: &mut nf,
        },
        &mut StdRng::seed_from_u64(1),
    )
}

fn exits(secs: f64, code: i32) -> Result<Run, String> {
    Ok(Run::Exits {
        after: Duration::from_secs_f64(secs),
        code,
    })
}

#[test]
fn commands_that_state_their_outcome() {
    let cases: Vec<(Value, Result<Run, String>)> = vec![
        (json!(["sleep", "300"]), exits(300.0, 0)),
        (json!(["/bin/sleep", "1.5"]), exits(1.5, 0)),
        (json!(["sleep", "1000000"]), exits(1_000_000.0, 0)),
        (json!(["sleep", "infinity"]), Ok(Run::Forever)),
        (json!(["sleep", "2m"]), exits(120.0, 0)),
        (json!(["sh", "-c", "sleep 300"]), exits(300.0, 0)),
        (json!(["/bin/sh", "-c", "sleep 10; exit 1"]), exits(10.0, 1)),
        (json!(["/bin/sh", "-c", "sleep 1; exit 0"]), exits(1.0, 0)),
        (json!(["/bin/sh", "-c", "exit 1"]), exits(0.0, 1)),
        (json!(["/bin/sh", "-c", "exit 0"]), exits(0.0, 0)),
        (json!(["/bin/sh", "-c", "exit 300"]), exits(0.0, 44)),
        (json!(["/bin/true"]), exits(0.0, 0)),
        (json!(["/bin/false"]), exits(0.0, 1)),
        (json!(["true"]), exits(0.0, 0)),
        (json!(["sh", "-c", "false"]), exits(0.0, 1)),
        (
            json!(["sh", "-c", "echo hi; sleep 2 && exit 3"]),
            exits(2.0, 3),
        ),
        (json!(["sh", "-c", "false || exit 4"]), exits(0.0, 4)),
        (json!(["sh", "-c", "true && false"]), exits(0.0, 1)),
        (json!(["sh", "-c", "! false"]), exits(0.0, 0)),
        (json!(["sh", "-ec", "false; sleep 5"]), exits(0.0, 1)),
        (json!(["sh", "-c", "false; sleep 5"]), exits(5.0, 0)),
        (
            json!(["sh", "-c", "set -e\nif false; then exit 9; fi\necho ok"]),
            exits(0.0, 0),
        ),
        (
            json!(["sh", "-c", "trap exit TERM; while true; do sleep 1; done"]),
            Ok(Run::Forever),
        ),
        (json!(["sh", "-c", "while :; do :; done"]), Ok(Run::Forever)),
        (
            json!(["sh", "-c", "for i in 1 2 3; do sleep $i; done; exit $i"]),
            exits(6.0, 3),
        ),
        (
            json!([
                "sh",
                "-c",
                "i=0; while [ $i -lt 3 ]; do i=$((i+1)); sleep 1; done"
            ]),
            exits(3.0, 0),
        ),
        (json!(["sh", "-c", "exec sleep 7"]), exits(7.0, 0)),
        (json!(["sh", "-c", "tail -f /dev/null"]), Ok(Run::Forever)),
        (
            json!(["sh", "-c", "sh -c 'exit 2'; echo $?"]),
            exits(0.0, 0),
        ),
        (
            json!(["sh", "-c", "sh -c 'exit 2'; exit $?"]),
            exits(0.0, 2),
        ),
        (
            json!(["sh", "-c", "echo x > /tmp/f; [ -f /tmp/f ]"]),
            exits(0.0, 0),
        ),
        (
            json!(["sh", "-c", "[ \"a\" = 'a' ] && exit 5"]),
            exits(0.0, 5),
        ),
    ];
    for (command, want) in cases {
        let p = program(busybox(command.clone())).unwrap();
        assert_eq!(once(&p), want, "{command}");
    }
}

#[test]
fn what_the_simulator_cannot_know_is_not_interpreted() {
    let cases = [
        json!(["nginx", "-g", "daemon off;"]),
        json!(["sh", "-c", "wget -O- http://svc"]),
        json!(["sh", "-c", "cat /etc/hostname"]),
        json!(["sh", "-c", "echo $(date)"]),
        json!(["sh", "-c", "sleep 1 | cat"]),
        json!(["sh", "-c", "sleep 10 &"]),
        json!(["sh", "-c", "exit $UNSET_BY_US"]),
        json!(["sh", "script.sh"]),
        json!(["sh", "-c", "f() { exit 1; }; f"]),
        json!(["sh", "-c", "if true; then"]),
        json!(["sleep"]),
        json!(["sleep", "soon"]),
    ];
    for command in cases {
        let p = program(busybox(command.clone())).unwrap();
        assert!(once(&p).is_err(), "{command}: {:?}", once(&p));
    }
    // No command: the image's entrypoint, which says nothing.
    assert_eq!(program(json!({"name": "c", "image": "nginx"})), None);
    assert_eq!(
        program(json!({"name": "c", "image": "nginx", "args": ["sleep", "1"]})),
        None
    );
}

#[test]
fn args_alone_run_on_busybox_and_name_an_agnhost_subcommand() {
    let p = program(json!({"name": "c", "image": "busybox", "args": ["sleep", "3"]})).unwrap();
    assert_eq!(once(&p), exits(3.0, 0));
    let p = program(json!({"name": "c", "image": "registry.k8s.io/e2e-test-images/agnhost:2.45", "args": ["pause"]}))
        .unwrap();
    assert_eq!(once(&p), Ok(Run::Forever));
    let p = program(json!({"name": "c", "image": "registry.k8s.io/e2e-test-images/agnhost:2.45", "args": ["netexec", "--http-port=8080"]}))
        .unwrap();
    assert_eq!(once(&p), Ok(Run::Forever));
    let p = program(
        json!({"name": "c", "image": "agnhost:2.45", "command": ["/agnhost", "mounttest"]}),
    )
    .unwrap();
    assert!(once(&p).is_err());
    // Command and args together.
    let p = program(
        json!({"name": "c", "image": "busybox", "command": ["sh", "-c"], "args": ["exit 6"]}),
    )
    .unwrap();
    assert_eq!(once(&p), exits(0.0, 6));
}

#[test]
fn random_exits_are_zero_or_one_and_seeded() {
    // Upstream's randomlySucceedOrFail.
    let p = program(busybox(json!([
        "/bin/sh",
        "-c",
        "exit $(( $RANDOM / 16384 ))"
    ])))
    .unwrap();
    let mut seen = HashSet::new();
    for seed in 0..64 {
        let (mut pf, mut nf) = (HashSet::new(), HashSet::new());
        let files = Files {
            pod: &mut pf,
            node: &mut nf,
        };
        match p.run(files, &mut StdRng::seed_from_u64(seed)).unwrap() {
            Run::Exits { code, after } => {
                assert!(code == 0 || code == 1);
                assert_eq!(after, Duration::ZERO);
                seen.insert(code);
            }
            Run::Forever => panic!("exit runs for ever"),
        }
    }
    assert_eq!(seen.len(), 2, "both outcomes over 64 seeds");
}

const FAIL_ONCE: &str = "if [[ -r /data/foo ]] ; then exit 0 ; else touch /data/foo ; exit 1 ; fi";

#[test]
fn fail_once_fails_then_succeeds_on_the_same_volume() {
    // An emptyDir: the pod's files, seen again by the restarted container.
    let (pod_obj, c) = pod(
        busybox(json!(["/bin/sh", "-c", FAIL_ONCE])),
        json!([{"name": "data", "emptyDir": {}}]),
        json!({}),
    );
    let mut c = c;
    c.volume_mounts = Some(vec![
        serde_json::from_value(json!({"name": "data", "mountPath": "/data"})).unwrap(),
    ]);
    let p = Program::of(&c, &pod_obj).unwrap();
    let (mut pod_files, mut node_files) = (HashSet::new(), HashSet::new());
    let mut rng = StdRng::seed_from_u64(0);
    let mut run = || {
        p.run(
            Files {
                pod: &mut pod_files,
                node: &mut node_files,
            },
            &mut rng,
        )
    };
    assert_eq!(run(), exits(0.0, 1));
    assert_eq!(run(), exits(0.0, 0));
    assert!(node_files.is_empty());

    // A hostPath: the node's files, seen by the next pod on the node.
    let (pod_obj, mut c) = pod(
        busybox(json!(["/bin/sh", "-c", FAIL_ONCE])),
        json!([{"name": "data", "hostPath": {"path": "/tmp/job-e2e/abc", "type": "DirectoryOrCreate"}}]),
        json!({}),
    );
    c.volume_mounts = Some(vec![
        serde_json::from_value(json!({"name": "data", "mountPath": "/data"})).unwrap(),
    ]);
    let p = Program::of(&c, &pod_obj).unwrap();
    let mut node_files = HashSet::new();
    for want in [1, 0, 0] {
        let mut fresh_pod = HashSet::new();
        let got = p.run(
            Files {
                pod: &mut fresh_pod,
                node: &mut node_files,
            },
            &mut StdRng::seed_from_u64(0),
        );
        assert_eq!(got, exits(0.0, want));
        assert!(fresh_pod.is_empty());
    }
    assert!(node_files.contains("/tmp/job-e2e/abc/foo"));

    // Without a volume the file is the container's own, which the simulator cannot know.
    let p = program(busybox(json!(["/bin/sh", "-c", FAIL_ONCE]))).unwrap();
    assert!(once(&p).is_err());
}

#[test]
fn environment_from_the_spec_and_the_downward_api() {
    // Upstream's notTerminateOnce, for index 0 and 1.
    let script = "if [[ -r /data/foo ]] ; then exit 0 ; elif [[ $JOB_COMPLETION_INDEX -eq 0 ]] ; then touch /data/foo ; sleep 1000000 ; else exit 1 ; fi";
    let mut node_files = HashSet::new();
    for (index, want) in [
        ("1", exits(0.0, 1)),
        ("0", exits(1_000_000.0, 0)),
        ("1", exits(0.0, 0)),
    ] {
        let (pod_obj, mut c) = pod(
            busybox(json!(["/bin/sh", "-c", script])),
            json!([{"name": "data", "hostPath": {"path": "/tmp/x"}}]),
            json!({"batch.kubernetes.io/job-completion-index": index}),
        );
        c.volume_mounts = Some(vec![
            serde_json::from_value(json!({"name": "data", "mountPath": "/data"})).unwrap(),
        ]);
        c.env = Some(vec![serde_json::from_value(json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}})).unwrap()]);
        let p = Program::of(&c, &pod_obj).unwrap();
        let got = p.run(
            Files {
                pod: &mut HashSet::new(),
                node: &mut node_files,
            },
            &mut StdRng::seed_from_u64(0),
        );
        assert_eq!(got, want, "index {index}");
    }

    // Literal values and the kubelet's $(VAR) expansion.
    let mut c = busybox(json!(["sh", "-c", "sleep $(DELAY); exit $CODE"]));
    c["env"] = json!([{"name": "DELAY", "value": "4"}, {"name": "CODE", "value": "$(DELAY)"}]);
    assert_eq!(once(&program(c).unwrap()), exits(4.0, 4));
    // A variable from a Secret is unknown.
    let mut c = busybox(json!(["sh", "-c", "exit $CODE"]));
    c["env"] = json!([{"name": "CODE", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]);
    assert!(once(&program(c).unwrap()).is_err());
    let mut c = busybox(json!(["sleep", "$(T)"]));
    c["envFrom"] = json!([{"configMapRef": {"name": "cm"}}]);
    assert_eq!(program(c), None);
}

fn printed(command: Value) -> Vec<(f64, String)> {
    let p = program(busybox(command)).unwrap();
    let t = p.transcript(&mut StdRng::seed_from_u64(1)).unwrap();
    t.printed
        .into_iter()
        .map(|(at, s)| (at.as_secs_f64(), s))
        .collect()
}

#[test]
fn what_a_command_prints_is_kept_with_its_time() {
    assert_eq!(printed(json!(["echo", "hello"])), [(0.0, "hello\n".into())]);
    assert_eq!(
        printed(json!([
            "sh",
            "-c",
            "echo one; sleep 5; echo -n two; printf '%s=%d\\n' a 1 b 2"
        ])),
        [
            (0.0, "one\n".into()),
            (5.0, "two".into()),
            (5.0, "a=1\nb=2\n".into())
        ]
    );
    // Redirected to a file or /dev/null, it is not in the log; onto standard error, it is.
    assert_eq!(
        printed(json!([
            "sh",
            "-c",
            "echo a > /tmp/f; echo b >/dev/null 2>&1; echo c >&2; echo d 2>/dev/null; pwd"
        ])),
        [
            (0.0, "c\n".into()),
            (0.0, "d\n".into()),
            (0.0, "/\n".into())
        ]
    );
    assert_eq!(
        printed(json!(["sh", "-c", "echo -e 'x\\ty'; echo $((1+2))"])),
        [(0.0, "x\ty\n".into()), (0.0, "3\n".into())]
    );
    // A command that prints nothing it states.
    assert_eq!(printed(json!(["sleep", "3"])), []);
    let p = program(busybox(json!(["sh", "-c", "echo hi; sleep 2; exit 3"]))).unwrap();
    let t = p.transcript(&mut StdRng::seed_from_u64(1)).unwrap();
    assert_eq!(
        t.run,
        Run::Exits {
            after: Duration::from_secs(2),
            code: 3
        }
    );
}
