//! `rollwright get|apply|delete|scale` and the CLI's errors end to end (issue 12): the binary
//! against an API server started by the test, each error one line with its fix and a non-zero
//! exit.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use common::{Cluster, ROLLWRIGHT};

const WEB: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_scale_delete_as_kubectl() {
    let c = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    std::fs::write(&file, WEB).unwrap();
    let f = file.to_str().unwrap();
    assert_eq!(
        c.rollwright(&["apply", "-f", f]).await,
        "deployment.apps/web created\n"
    );
    assert_eq!(
        c.rollwright(&["apply", "-f", f]).await,
        "deployment.apps/web unchanged\n"
    );
    // kubectl sees what rollwright applied as its own last applied configuration.
    let last = c
        .kubectl(&["apply", "view-last-applied", "deploy/web", "-o", "json"])
        .await;
    let last: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(
        last["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );

    // A label dropped from the manifest goes, a new image comes, with its change cause.
    std::fs::write(
        &file,
        WEB.replace("1.27", "1.28").replace(", tier: front", ""),
    )
    .unwrap();
    assert_eq!(
        c.rollwright(&["apply", "-f", f]).await,
        "deployment.apps/web configured\n"
    );
    let d = c
        .kubectl_json(&["get", "deploy", "web", "-o", "json"])
        .await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    assert_eq!(d["metadata"]["labels"], serde_json::json!({"app": "web"}));
    assert_eq!(
        d["metadata"]["annotations"]["kubernetes.io/change-cause"],
        format!("apply -f {f} by rollwright")
    );
    // A directory and stdin work too.
    let cm = "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: settings}\nspec: {holderIdentity: b}\n";
    std::fs::write(dir.path().join("settings.yaml"), cm).unwrap();
    let out = c
        .rollwright(&["apply", "-f", dir.path().to_str().unwrap()])
        .await;
    assert_eq!(
        out,
        "lease.coordination.k8s.io/settings created\ndeployment.apps/web unchanged\n"
    );
    let out = c
        .rollwright_raw(
            &["apply", "-f", "-"],
            Some(&cm.replace("Identity: b", "Identity: c")),
        )
        .await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "lease.coordination.k8s.io/settings configured\n"
    );

    // get: the server's columns, as kubectl prints them.
    let ours = c.rollwright(&["get", "deploy"]).await;
    let header: Vec<&str> = ours.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert!(ours.lines().nth(1).unwrap().starts_with("web "), "{ours}");
    let wide = c
        .rollwright(&["get", "deployments.apps", "web", "-o", "wide"])
        .await;
    assert!(wide.lines().next().unwrap().contains("SELECTOR"), "{wide}");
    assert_eq!(
        c.rollwright(&["get", "deploy/web", "-o", "name"]).await,
        "deployment.apps/web\n"
    );
    let yaml = c.rollwright(&["get", "deploy", "web", "-o", "yaml"]).await;
    assert!(
        yaml.contains("kind: Deployment") && yaml.contains("image: nginx:1.28"),
        "{yaml}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&c.rollwright(&["get", "leases", "-o", "json"]).await).unwrap();
    assert_eq!(json["kind"], "List");
    assert_eq!(json["items"][0]["spec"]["holderIdentity"], "c");
    let all = c.rollwright(&["get", "deploy", "-A"]).await;
    assert!(all.starts_with("NAMESPACE "), "{all}");
    let out = c
        .rollwright_raw(&["get", "pods", "-l", "app=nothing"], None)
        .await;
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "No resources found in default namespace.\n"
    );

    assert_eq!(
        c.rollwright(&["scale", "deploy/web", "--replicas", "5"])
            .await,
        "deployment.apps/web scaled\n"
    );
    let d = c
        .kubectl_json(&["get", "deploy", "web", "-o", "json"])
        .await;
    assert_eq!(d["spec"]["replicas"], 5);

    assert_eq!(
        c.rollwright(&["delete", "deploy", "web"]).await,
        "deployment.apps \"web\" deleted\n"
    );
    assert_eq!(
        c.rollwright(&[
            "delete",
            "-f",
            dir.path().join("settings.yaml").to_str().unwrap()
        ])
        .await,
        "lease.coordination.k8s.io \"settings\" deleted\n"
    );
    let gone = c.kubectl_fails(&["get", "deploy", "web"], None).await;
    assert!(gone.contains("not found"), "{gone}");
    c.stop().await;
}

/// Asserts a failing command printed exactly one line, starting `error: ` and containing
/// every one of `want`.
fn one_line(stderr: &str, want: &[&str]) {
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    for w in want {
        assert!(stderr.contains(w), "{stderr:?} lacks {w:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_one_line_with_the_fix() {
    let c = Cluster::start().await;

    // No kubeconfig anywhere.
    let empty = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(ROLLWRIGHT)
        .args(["get", "pods"])
        .env_remove("KUBECONFIG")
        .env("HOME", empty.path())
        .current_dir(empty.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    one_line(
        &String::from_utf8_lossy(&out.stderr),
        &["no kubeconfig found", "--kubeconfig", "KUBECONFIG"],
    );
    // A kubeconfig that names a server nobody listens on.
    let dead = empty.path().join("dead");
    let config = std::fs::read_to_string(c.kubeconfig()).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let server = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .to_string();
    std::fs::write(
        &dead,
        config.replace(&server, &format!("https://127.0.0.1:{port}")),
    )
    .unwrap();
    let (_, err) = c
        .rollwright_fails(
            &[
                "rollout",
                "status",
                "deploy/web",
                "--kubeconfig",
                dead.to_str().unwrap(),
            ],
            None,
        )
        .await;
    one_line(
        &err,
        &[
            "cannot reach the API server at https://127.0.0.1:",
            "onnection refused",
            "rollwright up",
        ],
    );
    // An unknown context.
    let (_, err) = c
        .rollwright_fails(&["get", "pods", "--context", "nope"], None)
        .await;
    one_line(&err, &["context \"nope\" is not in kubeconfig"]);
    // Unknown kinds.
    let (_, err) = c
        .rollwright_fails(&["rollout", "status", "rs/web"], None)
        .await;
    one_line(&err, &["unknown kind \"rs\"", "deploy", "ds", "sts"]);
    let (_, err) = c.rollwright_fails(&["get", "widgets"], None).await;
    one_line(&err, &["unknown resource type \"widgets\"", "deployments"]);
    // A name that does not exist.
    let (_, err) = c
        .rollwright_fails(&["rollout", "history", "deploy/nope"], None)
        .await;
    one_line(
        &err,
        &[
            "deployments.apps \"nope\" not found in namespace \"default\"",
            "rollwright get deployments.apps",
        ],
    );
    let (_, err) = c
        .rollwright_fails(&["get", "ds", "nope", "-n", "kube-system"], None)
        .await;
    one_line(&err, &["\"nope\" not found in namespace \"kube-system\""]);
    // An invalid manifest: the server's field causes, readable.
    let bad = WEB
        .replace("replicas: 2", "replicas: -1")
        .replace("image: \"nginx:1.27\"", "image: \"\"");
    let (_, err) = c.rollwright_fails(&["apply", "-f", "-"], Some(&bad)).await;
    one_line(
        &err,
        &[
            "-: deployment.apps/web: ",
            "is invalid: ",
            "spec.replicas: ",
            "fix these fields",
        ],
    );
    // Not YAML.
    let (_, err) = c
        .rollwright_fails(&["apply", "-f", "-"], Some("a: [b\n"))
        .await;
    one_line(&err, &["-: not valid YAML or JSON"]);
    // A missing file.
    let (_, err) = c
        .rollwright_fails(&["apply", "-f", "/nonexistent.yaml"], None)
        .await;
    one_line(&err, &["cannot read /nonexistent.yaml"]);
    // A bad timeout.
    let (_, err) = c
        .rollwright_fails(
            &["rollout", "status", "deploy/web", "--timeout", "soon"],
            None,
        )
        .await;
    one_line(&err, &["--timeout", "e.g. 500ms, 2s, 1m30s"]);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_a_row_per_change() {
    let nodes = nodesim::NodeSim {
        nodes: 1,
        start_delay: nodesim::distribution::Distribution::Fixed(std::time::Duration::from_millis(
            100,
        )),
        readiness_delay: nodesim::distribution::Distribution::Fixed(
            std::time::Duration::from_millis(100),
        ),
        ..Default::default()
    };
    let mut rig = common::Rig::start(nodes, "seed: 1\n").await;
    rig.start_scheduler_and_controllers();
    rig.kubectl(&["run", "first", "--image=busybox:1.36"]).await;
    let mut watch = rig.c.rollwright_spawn(&["get", "pods", "-w"]);
    let header = watch.until("the header", |l| l.starts_with("NAME")).await;
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(columns, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    watch
        .until("the listed pod", |l| l.starts_with("first "))
        .await;
    rig.kubectl(&["run", "second", "--image=busybox:1.36"])
        .await;
    let ready = watch
        .until("the new pod running and ready", |l| {
            l.starts_with("second ") && l.contains("1/1") && l.contains("Running")
        })
        .await;
    // One cell per column (a name longer than the listed ones pushes its row right, as in kubectl).
    let cells: Vec<&str> = ready.split_whitespace().collect();
    assert_eq!(
        cells[..4],
        ["second", "1/1", "Running", "0"],
        "{header}\n{ready}"
    );
    assert!(
        ready.find("1/1") >= header.find("READY"),
        "{header}\n{ready}"
    );
    rig.stop().await;
}
