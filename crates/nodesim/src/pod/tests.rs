use super::*;
use crate::distribution::pod_rng;

struct Harness {
    cfg: NodeSim,
    profile: Profile,
    start: Distribution,
    ready: Distribution,
    images: HashSet<String>,
    files: HashSet<String>,
    objects: Objects,
    t0: Instant,
}

impl Harness {
    fn new(profile: &str) -> Harness {
        Harness {
            cfg: NodeSim {
                grace_scale: 0.01,
                backoff_scale: 1.0,
                ..NodeSim::default()
            },
            profile: Profile::from_yaml(profile).unwrap(),
            start: Distribution::Fixed(Duration::from_secs(1)),
            ready: Distribution::Fixed(Duration::from_secs(2)),
            images: HashSet::new(),
            files: HashSet::new(),
            objects: Objects::default(),
            t0: Instant::now(),
        }
    }

    fn ctx(&mut self, at_ms: u64) -> Ctx<'_> {
        Ctx {
            cfg: &self.cfg,
            profile: &self.profile,
            start_delay: &self.start,
            readiness_delay: &self.ready,
            node_images: &mut self.images,
            node_files: &mut self.files,
            objects: &self.objects,
            now: self.t0 + Duration::from_millis(at_ms),
            wall: format!("t+{at_ms}ms"),
        }
    }

    fn pod(&mut self, spec: Value, annotations: Value) -> PodSim {
        let v = view(spec, annotations);
        let rng = pod_rng(self.profile.seed, &v.namespace, &v.name, &v.uid);
        let mut ctx = self.ctx(0);
        PodSim::new(
            &v,
            Some(Ipv4Addr::new(10, 64, 0, 2)),
            Ipv4Addr::new(10, 0, 0, 2),
            rng,
            &mut ctx,
        )
    }

    fn at(&mut self, pod: &mut PodSim, ms: u64) -> Outcome {
        let mut ctx = self.ctx(ms);
        pod.advance(&mut ctx)
    }
}

fn view(spec: Value, annotations: Value) -> PodView {
    let mut spec = spec;
    spec["nodeName"] = json!("node-0");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-1", "annotations": annotations},
        "spec": spec,
    }))
    .unwrap();
    PodView::from_pod(&pod).unwrap()
}

fn nginx() -> Value {
    json!({"containers": [{"name": "app", "image": "nginx:1.27"}]})
}

fn reasons(out: &Outcome) -> Vec<String> {
    out.events.iter().map(|e| e.reason.to_string()).collect()
}

fn ctr_status(pod: &PodSim) -> Value {
    pod.status("")["containerStatuses"][0].clone()
}

fn cond(pod: &PodSim, kind: &str) -> Value {
    pod.status("")["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap()
        .clone()
}

#[test]
fn back_off_doubles_to_five_minutes() {
    let cases = [
        (0, 10),
        (1, 20),
        (2, 40),
        (3, 80),
        (4, 160),
        (5, 300),
        (30, 300),
    ];
    for (n, secs) in cases {
        assert_eq!(backoff(n), Duration::from_secs(secs), "{n}");
    }
}

#[test]
fn a_pod_starts_then_becomes_ready() {
    let mut h = Harness::new("");
    let mut pod = h.pod(nginx(), json!({}));
    assert_eq!(pod.phase(), Phase::Pending);
    assert_eq!(
        ctr_status(&pod)["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    assert_eq!(cond(&pod, "Ready")["reason"], "ContainersNotReady");
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(1)));

    assert!(!h.at(&mut pod, 500).status_changed, "nothing due yet");
    let out = h.at(&mut pod, 1000);
    assert_eq!(reasons(&out), ["Pulling", "Pulled", "Created", "Started"]);
    assert_eq!(out.events[1].message, "Successfully pulled image \"nginx:1.27\" in 1s (1s including waiting). Image size: 1 bytes.".replace("1 bytes", &format!("{} bytes", image::size("nginx:1.27"))));
    assert!(out.status_changed);
    assert_eq!(pod.phase(), Phase::Running);
    assert_eq!(
        ctr_status(&pod)["state"]["running"]["startedAt"],
        "t+1000ms"
    );
    assert_eq!(ctr_status(&pod)["started"], true);
    assert_eq!(ctr_status(&pod)["ready"], false);

    let out = h.at(&mut pod, 3000);
    assert!(out.status_changed && out.events.is_empty());
    assert!(pod.is_ready());
    assert_eq!(cond(&pod, "Ready")["lastTransitionTime"], "t+3000ms");
    assert_eq!(cond(&pod, "Initialized")["lastTransitionTime"], "t+0ms");
    assert_eq!(pod.wake(), None);

    // The image is now on the node: the next pod does not pull.
    let mut second = h.pod(nginx(), json!({}));
    let out = h.at(&mut second, 1000);
    assert_eq!(reasons(&out), ["Pulled", "Created", "Started"]);
    assert_eq!(
        out.events[0].message,
        "Container image \"nginx:1.27\" already present on machine"
    );
}

#[test]
fn an_image_that_never_pulls_backs_off() {
    let mut h = Harness::new("rules:\n- match: {image: '*broken*'}\n  fault: imagePullFailure\n");
    let mut pod = h.pod(
        json!({"containers": [{"name": "app", "image": "nginx:broken"}]}),
        json!({}),
    );
    let out = h.at(&mut pod, 1000);
    assert_eq!(reasons(&out), ["Pulling", "Failed", "Failed"]);
    assert_eq!(out.events[2].message, "Error: ErrImagePull");
    assert_eq!(
        ctr_status(&pod)["state"]["waiting"]["reason"],
        "ErrImagePull"
    );
    let out = h.at(&mut pod, 2000);
    assert_eq!(reasons(&out), ["BackOff", "Failed"]);
    assert_eq!(out.events[1].message, "Error: ImagePullBackOff");
    let waiting = &ctr_status(&pod)["state"]["waiting"];
    assert_eq!(waiting["reason"], "ImagePullBackOff");
    assert!(
        waiting["message"]
            .as_str()
            .unwrap()
            .starts_with("Back-off pulling image \"nginx:broken\": ErrImagePull: ")
    );
    assert_eq!(pod.phase(), Phase::Pending);
    // The retry comes after 10s, then the wait doubles.
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(12)));
    h.at(&mut pod, 12_000);
    h.at(&mut pod, 13_000);
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(33)));
}

#[test]
fn a_crash_looping_container_restarts_with_back_off() {
    let mut h = Harness::new(
        "rules:\n- name: c\n  match: {namespace: none}\n  fault: {crashLoop: {after: 5s, exitCode: 3}}\n",
    );
    let mut pod = h.pod(nginx(), json!({"rollwright.io/fault": "c"}));
    h.at(&mut pod, 1000); // started
    h.at(&mut pod, 3000); // ready
    assert!(pod.is_ready());
    // First exit: restarted at once.
    let out = h.at(&mut pod, 6000);
    assert_eq!(reasons(&out), ["Pulled", "Created", "Started"]);
    assert_eq!(ctr_status(&pod)["restartCount"], 1);
    assert_eq!(ctr_status(&pod)["lastState"]["terminated"]["exitCode"], 3);
    assert_eq!(
        ctr_status(&pod)["lastState"]["terminated"]["reason"],
        "Error"
    );
    assert!(!pod.is_ready());
    // Second exit: CrashLoopBackOff for 10s.
    let out = h.at(&mut pod, 11_000);
    assert_eq!(reasons(&out), ["BackOff"]);
    assert_eq!(
        out.events[0].message,
        "Back-off restarting failed container app in pod p_default(uid-1)"
    );
    let waiting = &ctr_status(&pod)["state"]["waiting"];
    assert_eq!(waiting["reason"], "CrashLoopBackOff");
    assert_eq!(
        waiting["message"],
        "back-off 10s restarting failed container=app pod=p_default(uid-1)"
    );
    assert_eq!(
        pod.phase(),
        Phase::Running,
        "a restarting container keeps the pod Running"
    );
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(21)));
    h.at(&mut pod, 21_000);
    assert_eq!(ctr_status(&pod)["restartCount"], 2);
    h.at(&mut pod, 26_000);
    assert_eq!(
        ctr_status(&pod)["state"]["waiting"]["message"],
        "back-off 20s restarting failed container=app pod=p_default(uid-1)"
    );
}

#[test]
fn restart_policy_decides_the_phase_after_an_exit() {
    let profile = "rules:\n- name: c\n  match: {namespace: none}\n  fault: {crashLoop: {after: 5s, exitCode: EXIT}}\n";
    let cases = [
        ("Never", 1, Phase::Failed, 0),
        ("Never", 0, Phase::Succeeded, 0),
        ("OnFailure", 0, Phase::Succeeded, 0),
        ("OnFailure", 1, Phase::Running, 1),
        ("Always", 0, Phase::Running, 1),
    ];
    for (policy, exit, phase, restarts) in cases {
        let mut h = Harness::new(&profile.replace("EXIT", &exit.to_string()));
        let mut spec = nginx();
        spec["restartPolicy"] = json!(policy);
        let mut pod = h.pod(spec, json!({"rollwright.io/fault": "c"}));
        h.at(&mut pod, 1000);
        h.at(&mut pod, 6000);
        assert_eq!(pod.phase(), phase, "{policy} exit {exit}");
        assert_eq!(
            ctr_status(&pod)["restartCount"],
            restarts,
            "{policy} exit {exit}"
        );
        if phase.is_terminal() {
            assert_eq!(
                cond(&pod, "Ready")["reason"],
                if phase == Phase::Failed {
                    "PodFailed"
                } else {
                    "PodCompleted"
                }
            );
        }
    }
}

#[test]
fn run_to_completion_pods_exit_after_run_for() {
    // (policy, exit-code annotation, phase after the first run, restarts, final reason)
    let cases = [
        ("Never", None, Phase::Succeeded, 0, "Completed"),
        ("Never", Some("3"), Phase::Failed, 0, "Error"),
        ("OnFailure", None, Phase::Succeeded, 0, "Completed"),
        ("OnFailure", Some("2"), Phase::Running, 1, "Error"),
    ];
    for (policy, code, phase, restarts, reason) in cases {
        let mut h = Harness::new("runFor: 4s\n");
        let mut spec = nginx();
        spec["restartPolicy"] = json!(policy);
        let annotations = match code {
            Some(c) => json!({"rollwright.io/exit-code": c}),
            None => json!({}),
        };
        let mut pod = h.pod(spec, annotations);
        h.at(&mut pod, 1000); // started
        h.at(&mut pod, 3000); // ready
        assert_eq!(pod.phase(), Phase::Running, "{policy} {code:?}");
        h.at(&mut pod, 5000); // ran 4s
        assert_eq!(pod.phase(), phase, "{policy} {code:?}");
        let status = ctr_status(&pod);
        assert_eq!(status["restartCount"], restarts, "{policy} {code:?}");
        let terminated = if restarts > 0 {
            &status["lastState"]["terminated"]
        } else {
            &status["state"]["terminated"]
        };
        assert_eq!(terminated["reason"], reason, "{policy} {code:?}");
        let want: i64 = code.map_or(0, |c| c.parse().unwrap());
        assert_eq!(terminated["exitCode"], want, "{policy} {code:?}");
        if phase.is_terminal() {
            assert_eq!(pod.wake(), None, "nothing more happens to a finished pod");
        }
    }
}

#[test]
fn a_profile_failure_probability_fails_runs() {
    let mut h = Harness::new("runFor: 1s\nfailureProbability: 1\nfailureExitCode: 42\n");
    let mut spec = nginx();
    spec["restartPolicy"] = json!("Never");
    let mut pod = h.pod(spec, json!({}));
    h.at(&mut pod, 1000);
    h.at(&mut pod, 2000);
    assert_eq!(pod.phase(), Phase::Failed);
    assert_eq!(ctr_status(&pod)["state"]["terminated"]["exitCode"], 42);
    assert!(Profile::from_yaml("failureProbability: 1.5").is_err());
}

#[test]
fn always_pods_keep_running_and_killed_jobs_fail() {
    let mut h = Harness::new("runFor: 1s\n");
    let mut pod = h.pod(nginx(), json!({}));
    h.at(&mut pod, 1000);
    h.at(&mut pod, 10_000);
    assert_eq!(pod.phase(), Phase::Running, "Always pods ignore runFor");

    let mut spec = nginx();
    spec["restartPolicy"] = json!("Never");
    let mut h = Harness::new("runFor: 60s\n");
    let mut pod = h.pod(spec, json!({}));
    h.at(&mut pod, 1000);
    let mut ctx = h.ctx(2000);
    let out = pod.observe_deletion(30, &mut ctx);
    assert!(!out.finish);
    h.at(&mut pod, 3000);
    assert_eq!(pod.phase(), Phase::Failed, "a killed job container failed");
    assert_eq!(ctr_status(&pod)["state"]["terminated"]["exitCode"], 137);
}

#[test]
fn a_never_ready_container_reports_probe_failures() {
    let mut h = Harness::new("");
    let mut pod = h.pod(nginx(), json!({"rollwright.io/fault": "neverReady"}));
    h.at(&mut pod, 1000);
    let out = h.at(&mut pod, 3000);
    assert_eq!(reasons(&out), ["Unhealthy"]);
    assert_eq!(
        out.events[0].message,
        "Readiness probe failed: HTTP probe failed with statuscode: 503"
    );
    assert!(!pod.is_ready());
    assert_eq!(pod.phase(), Phase::Running);
    assert_eq!(
        pod.wake(),
        Some(h.t0 + Duration::from_secs(13)),
        "probed again a period later"
    );
}

#[test]
fn fail_after_fails_the_pod() {
    let mut h = Harness::new(
        "rules:\n- fault: {failAfter: {after: 10s, reason: Evicted, message: gone, exitCode: 137}}\n",
    );
    let mut pod = h.pod(nginx(), json!({}));
    h.at(&mut pod, 1000);
    let out = h.at(&mut pod, 11_000);
    assert_eq!(reasons(&out), ["Evicted"]);
    assert_eq!(pod.phase(), Phase::Failed);
    let s = pod.status("");
    assert_eq!(
        (s["reason"].as_str(), s["message"].as_str()),
        (Some("Evicted"), Some("gone"))
    );
    assert_eq!(ctr_status(&pod)["state"]["terminated"]["exitCode"], 137);
    assert_eq!(pod.wake(), None);
}

#[test]
fn deletion_kills_then_finishes_after_the_scaled_grace() {
    let mut h = Harness::new("");
    let mut pod = h.pod(nginx(), json!({}));
    h.at(&mut pod, 1000);
    let out = {
        let mut ctx = h.ctx(2000);
        pod.observe_deletion(30, &mut ctx)
    };
    assert_eq!(reasons(&out), ["Killing"]);
    assert_eq!(out.events[0].message, "Stopping container app");
    assert!(!out.finish);
    assert_eq!(
        pod.wake(),
        Some(h.t0 + Duration::from_millis(2300)),
        "30s x 0.01"
    );
    let out = h.at(&mut pod, 2300);
    assert!(out.finish);
    assert_eq!(
        ctr_status(&pod)["state"]["terminated"]["reason"],
        "Completed"
    );
    assert!(pod.phase().is_terminal());
    // A terminal pod finishes at once.
    let mut h = Harness::new("rules:\n- fault: {failAfter: {after: 1s}}\n");
    let mut failed = h.pod(nginx(), json!({}));
    h.at(&mut failed, 1000);
    h.at(&mut failed, 2000);
    let mut ctx = h.ctx(3000);
    assert!(failed.observe_deletion(30, &mut ctx).finish);
}

#[test]
fn an_image_change_restarts_only_that_container() {
    let mut h = Harness::new("");
    let two = json!({"containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "side", "image": "busybox:1.36"}]});
    let mut pod = h.pod(two.clone(), json!({}));
    h.at(&mut pod, 1000);
    h.at(&mut pod, 3000);
    assert!(pod.is_ready());
    let mut changed = two;
    changed["containers"][0]["image"] = json!("nginx:1.28");
    let out = {
        let mut ctx = h.ctx(4000);
        pod.observe_spec(&view(changed, json!({})), &mut ctx)
    };
    assert_eq!(reasons(&out), ["Killing"]);
    assert_eq!(
        out.events[0].message,
        "Container app definition changed, will be restarted"
    );
    assert!(!pod.is_ready());
    let out = h.at(&mut pod, 5000);
    assert_eq!(reasons(&out), ["Pulling", "Pulled", "Created", "Started"]);
    let s = pod.status("");
    assert_eq!(s["containerStatuses"][0]["restartCount"], 1);
    assert_eq!(
        s["containerStatuses"][0]["image"],
        "docker.io/library/nginx:1.28"
    );
    assert_eq!(
        s["containerStatuses"][1]["restartCount"], 0,
        "the other container keeps running"
    );
    assert!(!pod.is_ready());
    h.at(&mut pod, 7000);
    assert!(pod.is_ready());
}

#[test]
fn init_containers_run_in_order_before_the_app() {
    let mut h = Harness::new("");
    let spec = json!({
        "initContainers": [{"name": "a", "image": "busybox:1.36"}, {"name": "b", "image": "busybox:1.36"}],
        "containers": [{"name": "app", "image": "nginx:1.27"}],
    });
    let mut pod = h.pod(spec, json!({}));
    assert_eq!(
        cond(&pod, "Initialized")["message"],
        "containers with incomplete status: [a b]"
    );
    assert_eq!(
        ctr_status(&pod)["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    h.at(&mut pod, 1000); // a starts
    h.at(&mut pod, 3000); // a done, b scheduled at 4s
    assert_eq!(
        cond(&pod, "Initialized")["message"],
        "containers with incomplete status: [b]"
    );
    h.at(&mut pod, 4000); // b starts
    h.at(&mut pod, 6000); // b done, app at 7s
    assert_eq!(cond(&pod, "Initialized")["status"], "True");
    assert_eq!(pod.phase(), Phase::Pending);
    h.at(&mut pod, 7000);
    assert_eq!(pod.phase(), Phase::Running);
    h.at(&mut pod, 9000);
    assert!(pod.is_ready());
}

#[test]
fn an_adopted_pod_running_but_not_ready_becomes_ready() {
    // The simulator restarted between a container's start and its readiness.
    let mut h = Harness::new("");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-1"},
        "spec": {"nodeName": "node-0", "containers": [{"name": "app", "image": "nginx:1.27"}]},
        "status": {"phase": "Running", "startTime": "2025-01-01T00:00:00Z", "containerStatuses": [{
            "name": "app", "ready": false, "restartCount": 0, "started": true,
            "image": "nginx:1.27", "imageID": "", "containerID": "containerd://1",
            "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}]}
    }))
    .unwrap();
    let v = PodView::from_pod(&pod).unwrap();
    let rng = pod_rng(h.profile.seed, &v.namespace, &v.name, &v.uid);
    let mut adopted = {
        let mut ctx = h.ctx(0);
        PodSim::new(&v, None, Ipv4Addr::new(10, 0, 0, 2), rng, &mut ctx)
    };
    assert_eq!(adopted.phase(), Phase::Running);
    assert!(!adopted.is_ready());
    assert_eq!(
        adopted.wake(),
        Some(h.t0 + Duration::from_secs(2)),
        "probed again"
    );
    let out = h.at(&mut adopted, 2000);
    assert!(
        out.events.is_empty(),
        "nothing restarts: {:?}",
        reasons(&out)
    );
    assert!(adopted.is_ready());
}

/// A run-to-completion pod of one busybox container with `command`.
fn job_pod(policy: &str, command: Value) -> Value {
    json!({"restartPolicy": policy, "containers": [{"name": "c", "image": "busybox:1.36", "command": command}]})
}

#[test]
fn a_sleeping_job_container_runs_as_long_as_its_command_says() {
    let mut h = Harness::new("");
    let mut pod = h.pod(job_pod("Never", json!(["sleep", "300"])), json!({}));
    h.at(&mut pod, 1000); // started
    h.at(&mut pod, 3000); // ready
    assert_eq!(pod.phase(), Phase::Running);
    // Without its command it would have exited 3s after starting; it runs on.
    h.at(&mut pod, 1000 + 3000 + 1);
    assert_eq!(pod.phase(), Phase::Running);
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(301)));
    h.at(&mut pod, 300_999);
    assert_eq!(pod.phase(), Phase::Running);
    assert!(pod.is_ready());
    h.at(&mut pod, 301_000);
    assert_eq!(pod.phase(), Phase::Succeeded);
    assert_eq!(ctr_status(&pod)["state"]["terminated"]["exitCode"], 0);
    assert_eq!(
        ctr_status(&pod)["state"]["terminated"]["reason"],
        "Completed"
    );
}

#[test]
fn commands_decide_exit_codes_and_run_times() {
    // (policy, command, when to look (ms), phase then, exit code, restarts)
    let cases = [
        (
            "Never",
            json!(["/bin/sh", "-c", "exit 1"]),
            1000,
            Phase::Failed,
            1,
            0,
        ),
        (
            "Never",
            json!(["/bin/sh", "-c", "sleep 1; exit 0"]),
            1500,
            Phase::Running,
            -1,
            0,
        ),
        (
            "Never",
            json!(["/bin/sh", "-c", "sleep 1; exit 0"]),
            2000,
            Phase::Succeeded,
            0,
            0,
        ),
        (
            "Never",
            json!(["/bin/sh", "-c", "sleep 10; exit 1"]),
            11_000,
            Phase::Failed,
            1,
            0,
        ),
        ("Never", json!(["/bin/false"]), 1000, Phase::Failed, 1, 0),
        (
            "OnFailure",
            json!(["/bin/true"]),
            1000,
            Phase::Succeeded,
            0,
            0,
        ),
        // OnFailure restarts a failure at once, then backs off 10s.
        (
            "OnFailure",
            json!(["sh", "-c", "exit 7"]),
            1000,
            Phase::Running,
            -1,
            1,
        ),
        // Not interpreted: the profile's 3 seconds, exit 0.
        (
            "Never",
            json!(["sh", "-c", "wget http://x"]),
            3999,
            Phase::Running,
            -1,
            0,
        ),
        (
            "Never",
            json!(["sh", "-c", "wget http://x"]),
            4000,
            Phase::Succeeded,
            0,
            0,
        ),
    ];
    for (policy, command, at, phase, code, restarts) in cases {
        let mut h = Harness::new("");
        let mut pod = h.pod(job_pod(policy, command.clone()), json!({}));
        h.at(&mut pod, at.min(1000));
        h.at(&mut pod, at);
        assert_eq!(pod.phase(), phase, "{policy} {command} at {at}");
        let status = ctr_status(&pod);
        assert_eq!(status["restartCount"], restarts, "{policy} {command}");
        if code >= 0 {
            assert_eq!(
                status["state"]["terminated"]["exitCode"], code,
                "{policy} {command}"
            );
        }
        if restarts > 0 {
            assert_eq!(status["lastState"]["terminated"]["exitCode"], 7);
        }
    }
}

#[test]
fn a_container_that_never_ends_has_no_exit_scheduled() {
    for command in [
        json!(["sleep", "infinity"]),
        json!(["sh", "-c", "trap exit TERM; while true; do sleep 1; done"]),
    ] {
        let mut h = Harness::new("");
        let mut pod = h.pod(job_pod("OnFailure", command.clone()), json!({}));
        h.at(&mut pod, 1000);
        h.at(&mut pod, 3000);
        assert_eq!(pod.phase(), Phase::Running, "{command}");
        assert_eq!(pod.wake(), None, "{command}: nothing more is due");
        // Deleted, it is killed.
        let mut ctx = h.ctx(4000);
        pod.observe_deletion(0, &mut ctx);
        assert_eq!(pod.phase(), Phase::Failed);
        assert_eq!(ctr_status(&pod)["state"]["terminated"]["exitCode"], 137);
    }
}

#[test]
fn the_profile_and_the_annotation_override_the_command() {
    let mut h = Harness::new("runFor: 2s\n");
    let mut pod = h.pod(job_pod("Never", json!(["sleep", "300"])), json!({}));
    h.at(&mut pod, 1000);
    h.at(&mut pod, 3000);
    assert_eq!(pod.phase(), Phase::Succeeded, "the profile's runFor wins");

    let mut h = Harness::new("");
    let mut pod = h.pod(
        job_pod("Never", json!(["sh", "-c", "exit 1"])),
        json!({"rollwright.io/exit-code": "0"}),
    );
    h.at(&mut pod, 1000);
    assert_eq!(pod.phase(), Phase::Succeeded, "the annotation wins");

    let mut h = Harness::new("failureProbability: 1\nfailureExitCode: 42\n");
    let mut pod = h.pod(job_pod("Never", json!(["sh", "-c", "sleep 5"])), json!({}));
    h.at(&mut pod, 1000);
    h.at(&mut pod, 5999);
    assert_eq!(pod.phase(), Phase::Running, "the command's run time");
    h.at(&mut pod, 6000);
    assert_eq!(ctr_status(&pod)["state"]["terminated"]["exitCode"], 42);
}

#[test]
fn fail_once_with_local_restarts_fails_then_succeeds() {
    // Upstream's "failOnce" Job pod under OnFailure: the marker file is in an emptyDir, so the
    // restarted container sees it.
    let mut h = Harness::new("");
    let spec = json!({
        "restartPolicy": "OnFailure",
        "volumes": [{"name": "data", "emptyDir": {}}],
        "containers": [{"name": "c", "image": "busybox:1.36",
            "command": ["/bin/sh", "-c", "if [[ -r /data/foo ]] ; then exit 0 ; else touch /data/foo ; exit 1 ; fi"],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
    });
    let mut pod = h.pod(spec, json!({}));
    h.at(&mut pod, 1000);
    assert_eq!(pod.phase(), Phase::Succeeded);
    let status = ctr_status(&pod);
    assert_eq!(status["restartCount"], 1);
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 1);
    assert_eq!(status["state"]["terminated"]["exitCode"], 0);
}

#[test]
fn a_failed_init_container_fails_a_never_pod_and_restarts_otherwise() {
    let spec = |policy: &str| {
        json!({
            "restartPolicy": policy,
            "initContainers": [{"name": "init1", "image": "busybox:1.36", "command": ["/bin/false"]}],
            "containers": [{"name": "app", "image": "busybox:1.36", "command": ["/bin/true"]}],
        })
    };
    let mut h = Harness::new("");
    let mut pod = h.pod(spec("Never"), json!({}));
    h.at(&mut pod, 1000);
    assert_eq!(pod.phase(), Phase::Failed);
    let init = &pod.status("")["initContainerStatuses"][0];
    assert_eq!(init["state"]["terminated"]["exitCode"], 1);
    assert_eq!(cond(&pod, "Initialized")["status"], "False");
    assert_eq!(
        cond(&pod, "Initialized")["reason"],
        "ContainersNotInitialized"
    );
    assert_eq!(
        ctr_status(&pod)["state"]["waiting"]["reason"],
        "PodInitializing"
    );

    let mut h = Harness::new("");
    let mut pod = h.pod(spec("Always"), json!({}));
    h.at(&mut pod, 1000);
    assert_eq!(pod.phase(), Phase::Pending);
    assert_eq!(
        pod.status("")["initContainerStatuses"][0]["restartCount"],
        1
    );

    // An init container that succeeds at once lets the app start after the start delay.
    let mut h = Harness::new("");
    let mut pod = h.pod(
        json!({"restartPolicy": "Never",
               "initContainers": [{"name": "i", "image": "busybox", "command": ["/bin/true"]}],
               "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "2"]}]}),
        json!({}),
    );
    h.at(&mut pod, 1000); // init ran and exited 0
    assert_eq!(cond(&pod, "Initialized")["status"], "True");
    h.at(&mut pod, 2000); // app started
    assert_eq!(pod.phase(), Phase::Running);
    h.at(&mut pod, 4000);
    assert_eq!(pod.phase(), Phase::Succeeded);
}

fn probed(probes: Value) -> Value {
    let mut c = json!({"name": "app", "image": "nginx:1.27"});
    for (k, v) in probes.as_object().unwrap() {
        c[k] = v.clone();
    }
    json!({"containers": [c]})
}

/// Runs every wake-up of `pod` up to `until_ms`, collecting the events with when they came.
fn run_until(h: &mut Harness, pod: &mut PodSim, until_ms: u64) -> Vec<(u64, String, String)> {
    let mut seen = vec![];
    while let Some(t) = pod.wake() {
        let ms = (t - h.t0).as_millis() as u64;
        if ms > until_ms {
            break;
        }
        for e in h.at(pod, ms).events {
            seen.push((ms, e.reason.to_string(), e.message));
        }
    }
    seen
}

#[test]
fn a_readiness_probe_holds_ready_until_its_initial_delay() {
    let mut h = Harness::new("");
    let mut pod = h.pod(
        probed(json!({"readinessProbe": {"httpGet": {"port": 80}, "initialDelaySeconds": 20}})),
        json!({}),
    );
    h.at(&mut pod, 1000); // started at 1s
    assert_eq!(ctr_status(&pod)["started"], true);
    // Not before 1s + 20s, plus the 2s readiness delay; one wake-up, no timer per period.
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(23)));
    h.at(&mut pod, 22_999);
    assert!(!pod.is_ready());
    h.at(&mut pod, 23_000);
    assert!(pod.is_ready());
    assert_eq!(cond(&pod, "Ready")["lastTransitionTime"], "t+23000ms");
    assert_eq!(pod.wake(), None);
}

#[test]
fn a_success_threshold_takes_that_many_periods() {
    let mut h = Harness::new("");
    let mut pod = h.pod(
        probed(json!({"readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5, "successThreshold": 3}})),
        json!({}),
    );
    h.at(&mut pod, 1000);
    let events = run_until(&mut h, &mut pod, 12_999);
    assert!(events.is_empty());
    assert!(!pod.is_ready());
    h.at(&mut pod, 13_000); // 1s + 2s, then 2 periods
    assert!(pod.is_ready());
}

#[test]
fn the_startup_probe_gates_started_readiness_and_liveness() {
    let mut h = Harness::new("rules:\n- fault: {startupFailure: {after: 0s, for: 12s}}\n");
    let mut pod = h.pod(
        probed(json!({
            "startupProbe": {"httpGet": {"port": 80}, "periodSeconds": 5, "failureThreshold": 10},
            "livenessProbe": {"httpGet": {"port": 80}},
        })),
        json!({}),
    );
    let out = h.at(&mut pod, 1000);
    assert_eq!(reasons(&out).last().unwrap(), "Unhealthy");
    assert_eq!(ctr_status(&pod)["started"], false);
    // Fails at 1s, 6s and 11s; passes at 16s; no readiness probe: ready 2s later.
    let events = run_until(&mut h, &mut pod, 17_999);
    let at: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(at, [6000, 11_000]);
    assert_eq!(
        events[0].2,
        "Startup probe failed: HTTP probe failed with statuscode: 503"
    );
    assert_eq!(ctr_status(&pod)["started"], true);
    assert!(!pod.is_ready());
    h.at(&mut pod, 18_000);
    assert!(pod.is_ready());
    assert_eq!(pod.wake(), None, "a passing liveness probe needs no timer");
}

#[test]
fn a_failing_liveness_probe_kills_and_restarts_the_container() {
    let mut h = Harness::new(
        "rules:\n- name: sick\n  match: {namespace: none}\n  fault: {livenessFailure: {after: 5s, message: boom}}\n",
    );
    let mut pod = h.pod(
        probed(json!({"livenessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 2, "failureThreshold": 3}})),
        json!({"rollwright.io/fault": "sick"}),
    );
    h.at(&mut pod, 1000);
    h.at(&mut pod, 3000);
    assert!(pod.is_ready());
    // Fails from 6s: probes at 7s, 9s and 11s, then the kill and an immediate restart.
    let events = run_until(&mut h, &mut pod, 11_000);
    let got: Vec<(u64, &str, &str)> = events
        .iter()
        .map(|(t, r, m)| (*t, r.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got[..5],
        [
            (7000, "Unhealthy", "Liveness probe failed: boom"),
            (9000, "Unhealthy", "Liveness probe failed: boom"),
            (11_000, "Unhealthy", "Liveness probe failed: boom"),
            (
                11_000,
                "Killing",
                "Container app failed liveness probe, will be restarted"
            ),
            (
                11_000,
                "Pulled",
                "Container image \"nginx:1.27\" already present on machine"
            ),
        ]
    );
    let s = ctr_status(&pod);
    assert_eq!(s["restartCount"], 1);
    assert_eq!(s["lastState"]["terminated"]["exitCode"], 137);
    assert_eq!(s["lastState"]["terminated"]["reason"], "Error");
    assert_eq!(s["ready"], false);
    // The next run fails again; its restart waits in CrashLoopBackOff.
    let events = run_until(&mut h, &mut pod, 21_000);
    assert!(events.iter().any(|e| e.1 == "BackOff"), "{events:?}");
    assert_eq!(
        ctr_status(&pod)["state"]["waiting"]["reason"],
        "CrashLoopBackOff"
    );
}

#[test]
fn a_readiness_failure_makes_the_container_unready_for_its_window() {
    let mut h = Harness::new("rules:\n- fault: {readinessFailure: {after: 10s, for: 20s}}\n");
    let mut pod = h.pod(
        probed(json!({"readinessProbe": {"httpGet": {"port": 80}, "periodSeconds": 5, "failureThreshold": 2}})),
        json!({}),
    );
    h.at(&mut pod, 1000);
    h.at(&mut pod, 3000);
    assert!(pod.is_ready());
    // The window is [11s, 31s): failures at 13s and 18s flip it; passes again at 33s.
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(13)));
    run_until(&mut h, &mut pod, 17_999);
    assert!(pod.is_ready());
    run_until(&mut h, &mut pod, 18_000);
    assert!(!pod.is_ready());
    assert_eq!(cond(&pod, "Ready")["lastTransitionTime"], "t+18000ms");
    let events = run_until(&mut h, &mut pod, 33_000);
    assert_eq!(
        events.iter().map(|e| e.0).collect::<Vec<_>>(),
        [23_000, 28_000]
    );
    assert!(pod.is_ready());
    assert_eq!(pod.wake(), None);
}

#[test]
fn a_missing_secret_holds_the_pod_in_container_creating() {
    let mut h = Harness::new("");
    h.objects.listed(crate::mounts::Kind::Secret);
    h.objects.listed(crate::mounts::Kind::ConfigMap);
    let mut spec = nginx();
    spec["volumes"] = json!([
        {"name": "creds", "secret": {"secretName": "db"}},
        {"name": "maybe", "configMap": {"name": "absent", "optional": true}},
    ]);
    let mut pod = h.pod(spec, json!({}));
    let out = h.at(&mut pod, 0);
    assert_eq!(reasons(&out), ["FailedMount"]);
    assert_eq!(
        out.events[0].message,
        "MountVolume.SetUp failed for volume \"creds\" : secret \"db\" not found"
    );
    assert_eq!(out.events[0].kind, EventType::Warning);
    assert_eq!(pod.phase(), Phase::Pending);
    assert_eq!(
        ctr_status(&pod)["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    assert_eq!(cond(&pod, "PodReadyToStartContainers")["status"], "False");
    assert!(pod.status("").get("podIP").is_none(), "no sandbox yet");
    // Retried after 500ms, 1s, 2s...
    let events = run_until(&mut h, &mut pod, 3500);
    assert_eq!(
        events.iter().map(|e| e.0).collect::<Vec<_>>(),
        [500, 1500, 3500]
    );
    h.objects
        .added(crate::mounts::Kind::Secret, "default", "db");
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_millis(7500)));
    let out = h.at(&mut pod, 7500);
    assert!(out.events.is_empty() && out.status_changed);
    assert_eq!(cond(&pod, "PodReadyToStartContainers")["status"], "True");
    assert!(pod.status("").get("podIP").is_some());
    let out = h.at(&mut pod, 8500);
    assert_eq!(reasons(&out), ["Pulling", "Pulled", "Created", "Started"]);
    assert_eq!(pod.phase(), Phase::Running);
}

#[test]
fn volumes_that_exist_start_the_pod_at_once_and_host_network_is_seen() {
    let mut h = Harness::new("");
    h.objects.listed(crate::mounts::Kind::Secret);
    h.objects.listed(crate::mounts::Kind::ConfigMap);
    h.objects.added(
        crate::mounts::Kind::ConfigMap,
        "default",
        "kube-root-ca.crt",
    );
    let mut spec = nginx();
    spec["hostNetwork"] = json!(true);
    spec["volumes"] = json!([{"name": "api", "projected": {"sources": [
        {"configMap": {"name": "kube-root-ca.crt"}}]}}]);
    let v = view(spec.clone(), json!({}));
    assert!(v.host_network);
    assert!(!view(nginx(), json!({})).host_network);
    let mut pod = h.pod(spec, json!({}));
    let out = h.at(&mut pod, 0);
    assert!(out.events.is_empty());
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_secs(1)));
}

#[test]
fn before_the_objects_are_known_no_failure_is_reported() {
    let mut h = Harness::new("");
    let mut spec = nginx();
    spec["volumes"] = json!([{"name": "creds", "secret": {"secretName": "db"}}]);
    let mut pod = h.pod(spec, json!({}));
    assert!(h.at(&mut pod, 0).events.is_empty());
    assert_eq!(pod.wake(), Some(h.t0 + Duration::from_millis(200)));
}
