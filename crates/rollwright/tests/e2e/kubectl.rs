//! Real `kubectl` against the embedded control plane: every command of issue 2, each test on its
//! own cluster, asserting on what kubectl prints and on what the server then holds.

use crate::common;

use common::{Cluster, deployment_yaml, pod_yaml};
use serde_json::Value;

/// `kubectl get KIND NAME -o json` as a value.
async fn get_json(c: &Cluster, kind: &str, name: &str) -> Value {
    c.kubectl_json(&["get", kind, name, "-o", "json"]).await
}

/// The names `kubectl get pods -o name` prints, sorted.
async fn pod_names(c: &Cluster, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["get", "pods", "-o", "name"];
    args.extend_from_slice(extra);
    let mut names: Vec<String> = c.kubectl(&args).await.lines().map(str::to_string).collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_from_yaml_and_get_in_every_format() {
    let c = Cluster::start().await;
    let out = c
        .kubectl_stdin(
            &["create", "-f", "-"],
            &deployment_yaml("web", 2, "nginx:1.25"),
        )
        .await;
    assert_eq!(out.trim(), "deployment.apps/web created");

    let yaml = c.kubectl(&["get", "deployment", "web", "-o", "yaml"]).await;
    for want in [
        "kind: Deployment",
        "maxSurge: 25%",
        "maxUnavailable: 25%",
        "type: RollingUpdate",
        "protocol: TCP",
        "revisionHistoryLimit: 10",
        "progressDeadlineSeconds: 600",
        "imagePullPolicy: IfNotPresent",
        "restartPolicy: Always",
        "terminationGracePeriodSeconds: 30",
        "generation: 1",
    ] {
        assert!(
            yaml.contains(want),
            "`{want}` missing from -o yaml:\n{yaml}"
        );
    }

    let json = get_json(&c, "deploy", "web").await;
    assert_eq!(json["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(
        json["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"],
        "TCP"
    );
    assert_eq!(json["spec"]["replicas"], 2);
    assert_eq!(json["metadata"]["namespace"], "default");
    assert!(
        json["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36),
        "uid: {}",
        json["metadata"]["uid"]
    );
    assert!(json["metadata"]["creationTimestamp"].is_string());
    assert!(
        json["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<u64>().is_ok())
    );

    let wide = c.kubectl(&["get", "deployments", "-o", "wide"]).await;
    let mut lines = wide.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row.len(), header.len(), "{wide}");
    assert_eq!(
        (row[0], row[1], row[5], row[6], row[7]),
        ("web", "0/2", "app", "nginx:1.25", "app=web"),
        "{wide}"
    );

    c.kubectl_stdin(&["create", "-f", "-"], &pod_yaml("solo", &[("tier", "db")]))
        .await;
    let wide = c.kubectl(&["get", "pods", "-o", "wide"]).await;
    let header: Vec<&str> = wide
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    let row: Vec<&str> = wide
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        (row[0], row[1], row[2]),
        ("solo", "0/1", "Pending"),
        "{wide}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_twice_patches_and_a_removed_field_goes() {
    let c = Cluster::start().await;
    let first = deployment_yaml("web", 2, "nginx:1.25");
    assert_eq!(
        c.kubectl_stdin(&["apply", "-f", "-"], &first).await.trim(),
        "deployment.apps/web created"
    );
    let created = get_json(&c, "deploy", "web").await;
    assert!(
        created["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );

    // The second apply changes replicas and adds a label: kubectl sends a strategic merge patch.
    let second = first
        .replace("replicas: 2", "replicas: 3")
        .replace("    app: web\nspec:", "    app: web\n    team: blue\nspec:");
    let out = c
        .kubectl_raw(&["apply", "-f", "-", "-v=8"], Some(&second))
        .await;
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("deployment.apps/web configured"));
    assert!(
        log.contains("PATCH https://"),
        "apply did not PATCH:\n{log}"
    );
    assert!(
        log.contains("application/strategic-merge-patch+json"),
        "apply did not send a strategic merge patch:\n{log}"
    );
    let applied = get_json(&c, "deploy", "web").await;
    assert_eq!(applied["spec"]["replicas"], 3, "changed field");
    assert_eq!(applied["metadata"]["labels"]["team"], "blue", "added field");
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.25",
        "unchanged field"
    );
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 80,
        "unchanged field"
    );
    assert_eq!(applied["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(applied["metadata"]["generation"], 2);

    // Applying the same again changes nothing.
    let out = c.kubectl_stdin(&["apply", "-f", "-"], &second).await;
    assert_eq!(out.trim(), "deployment.apps/web unchanged");

    // The third apply drops the ports and the label: both go from the stored object.
    let third = second
        .replace("        ports:\n        - containerPort: 80\n", "")
        .replace("    team: blue\n", "");
    assert_ne!(third, second);
    c.kubectl_stdin(&["apply", "-f", "-"], &third).await;
    let pruned = get_json(&c, "deploy", "web").await;
    let container = &pruned["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container.get("ports").is_none(),
        "ports survived the third apply: {container}"
    );
    assert!(
        pruned["metadata"]["labels"].get("team").is_none(),
        "label survived: {}",
        pruned["metadata"]["labels"]
    );
    assert_eq!(pruned["metadata"]["labels"]["app"], "web");
    assert_eq!(pruned["spec"]["replicas"], 3);
    assert_eq!(container["image"], "nginx:1.25");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_receives_events() {
    let c = Cluster::start().await;
    c.kubectl_stdin(&["create", "-f", "-"], &pod_yaml("early", &[]))
        .await;
    let mut watch = c.kubectl_spawn(&["get", "pods", "-w", "--output-watch-events"]);
    let is = |event: &'static str, name: &'static str| {
        move |line: &str| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            cols.len() >= 2 && cols[0] == event && cols[1] == name
        }
    };
    watch.until("ADDED early", is("ADDED", "early")).await;

    c.kubectl(&["label", "pod", "early", "seen=yes"]).await;
    watch.until("MODIFIED early", is("MODIFIED", "early")).await;
    c.kubectl_stdin(&["create", "-f", "-"], &pod_yaml("late", &[]))
        .await;
    watch.until("ADDED late", is("ADDED", "late")).await;
    c.kubectl(&["delete", "pod", "late"]).await;
    watch.until("DELETED late", is("DELETED", "late")).await;

    // `-o name` prints each object as it changes.
    let mut names = c.kubectl_spawn(&["get", "pods", "-w", "--output-watch-events", "-o", "name"]);
    names.until("pod/early", |l| l.trim() == "pod/early").await;
    c.kubectl_stdin(&["create", "-f", "-"], &pod_yaml("third", &[]))
        .await;
    names.until("pod/third", |l| l.trim() == "pod/third").await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_and_set_image() {
    let c = Cluster::start().await;
    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("web", 2, "nginx:1.25"),
    )
    .await;
    let before = get_json(&c, "deploy", "web").await;

    let out = c
        .kubectl_raw(&["scale", "deployment/web", "--replicas=5", "-v=6"], None)
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "deployment.apps/web scaled"
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("/deployments/web/scale"),
        "kubectl scale did not use the scale subresource:\n{log}"
    );
    let scaled = get_json(&c, "deploy", "web").await;
    assert_eq!(scaled["spec"]["replicas"], 5);
    assert_eq!(
        scaled["metadata"]["generation"],
        before["metadata"]["generation"].as_i64().unwrap_or(0) + 1
    );

    let scale: Value = serde_json::from_str(
        &c.kubectl(&[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ])
        .await,
    )
    .expect("scale is JSON");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["selector"], "app=web");
    assert_eq!(scale["metadata"]["uid"], before["metadata"]["uid"]);

    // `--current-replicas` is a precondition kubectl checks against the scale subresource.
    let err = c
        .kubectl_fails(
            &[
                "scale",
                "deployment/web",
                "--replicas=1",
                "--current-replicas=2",
            ],
            None,
        )
        .await;
    assert!(err.contains("Expected replicas to be 2, was 5"), "{err}");

    let generation = scaled["metadata"]["generation"]
        .as_i64()
        .expect("generation");
    let out = c
        .kubectl(&["set", "image", "deployment/web", "app=nginx:1.26"])
        .await;
    assert_eq!(out.trim(), "deployment.apps/web image updated");
    let updated = get_json(&c, "deploy", "web").await;
    assert_eq!(
        updated["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.26"
    );
    assert_eq!(updated["metadata"]["generation"], generation + 1);
    assert_eq!(updated["spec"]["replicas"], 5);

    // A label change is metadata only: the generation stays.
    c.kubectl(&["label", "deployment/web", "touched=yes"]).await;
    assert_eq!(
        get_json(&c, "deploy", "web").await["metadata"]["generation"],
        generation + 1
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_json_merge_and_strategic() {
    let c = Cluster::start().await;
    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("web", 2, "nginx:1.25"),
    )
    .await;

    let out = c.kubectl(&["patch", "deployment", "web", "--type=json", "-p", r#"[{"op":"replace","path":"/spec/replicas","value":4},{"op":"add","path":"/metadata/labels/j","value":"1"}]"#]).await;
    assert_eq!(out.trim(), "deployment.apps/web patched");
    let d = get_json(&c, "deploy", "web").await;
    assert_eq!(
        (
            d["spec"]["replicas"].as_i64(),
            d["metadata"]["labels"]["j"].as_str()
        ),
        (Some(4), Some("1"))
    );
    // A JSON patch whose test fails changes nothing and says so.
    let err = c.kubectl_fails(&["patch", "deployment", "web", "--type=json", "-p", r#"[{"op":"test","path":"/spec/replicas","value":9},{"op":"replace","path":"/spec/replicas","value":1}]"#], None).await;
    assert!(err.contains("The request is invalid"), "{err}");
    assert_eq!(get_json(&c, "deploy", "web").await["spec"]["replicas"], 4);

    // A merge patch replaces lists wholesale and deletes with null.
    c.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"j":null,"m":"2"}},"spec":{"minReadySeconds":5}}"#,
    ])
    .await;
    let d = get_json(&c, "deploy", "web").await;
    assert!(
        d["metadata"]["labels"].get("j").is_none(),
        "{}",
        d["metadata"]["labels"]
    );
    assert_eq!(d["metadata"]["labels"]["m"], "2");
    assert_eq!(d["spec"]["minReadySeconds"], 5);

    // A strategic merge patch merges containers by name: a new one is added, the old one kept,
    // and env of the old one merged by name.
    c.kubectl(&["patch", "deployment", "web", "--type=strategic", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox:1.36"},{"name":"app","env":[{"name":"A","value":"1"}]}]}}}}"#]).await;
    let d = get_json(&c, "deploy", "web").await;
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["app", "side"]);
    let app = containers
        .iter()
        .find(|c| c["name"] == "app")
        .expect("app container");
    assert_eq!(app["image"], "nginx:1.25");
    assert_eq!(app["env"][0]["name"], "A");
    assert_eq!(app["ports"][0]["containerPort"], 80);
    let side = containers
        .iter()
        .find(|c| c["name"] == "side")
        .expect("side container");
    assert_eq!(
        side["imagePullPolicy"], "IfNotPresent",
        "the added container is defaulted"
    );

    // `$patch: delete` removes one container by its merge key.
    c.kubectl(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"}]}}}}"#,
    ])
    .await;
    let d = get_json(&c, "deploy", "web").await;
    let names: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["app"]);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_orphan_cascade() {
    let c = Cluster::start().await;
    c.kubectl_stdin(&["create", "-f", "-"], &pod_yaml("gone", &[]))
        .await;
    assert_eq!(
        c.kubectl(&["delete", "pod", "gone"]).await.trim(),
        "pod \"gone\" deleted"
    );
    let err = c.kubectl_fails(&["get", "pod", "gone"], None).await;
    assert!(
        err.contains("NotFound") && err.contains("pods \"gone\" not found"),
        "{err}"
    );

    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("bg", 1, "nginx:1.25"),
    )
    .await;
    c.kubectl(&["delete", "deployment", "bg"]).await;
    c.kubectl_fails(&["get", "deployment", "bg"], None).await;

    // Orphan: the orphan finalizer holds the object, marked for deletion, until a garbage collector
    // removes the finalizer. None runs here, so it stays, as upstream without its GC would.
    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("orph", 1, "nginx:1.25"),
    )
    .await;
    let out = c
        .kubectl(&[
            "delete",
            "deployment",
            "orph",
            "--cascade=orphan",
            "--wait=false",
        ])
        .await;
    assert_eq!(out.trim(), "deployment.apps \"orph\" deleted");
    let d = get_json(&c, "deploy", "orph").await;
    assert_eq!(d["metadata"]["finalizers"], serde_json::json!(["orphan"]));
    assert!(
        d["metadata"]["deletionTimestamp"].is_string(),
        "{}",
        d["metadata"]
    );
    assert_eq!(d["metadata"]["deletionGracePeriodSeconds"], 0);
    // Removing the finalizer lets the deletion finish.
    c.kubectl(&[
        "patch",
        "deployment",
        "orph",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let err = c.kubectl_fails(&["get", "deployment", "orph"], None).await;
    assert!(err.contains("not found"), "{err}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_field_selectors() {
    let c = Cluster::start().await;
    let pods: String = [
        pod_yaml("a1", &[("tier", "web"), ("env", "prod")]),
        pod_yaml("a2", &[("tier", "web"), ("env", "dev")]),
        pod_yaml("b1", &[("tier", "db"), ("env", "prod")]),
        pod_yaml("c1", &[("tier", "cache")]),
    ]
    .join("---\n");
    c.kubectl_stdin(&["create", "-f", "-"], &pods).await;

    assert_eq!(
        pod_names(&c, &["-l", "tier=web"]).await,
        ["pod/a1", "pod/a2"]
    );
    assert_eq!(
        pod_names(&c, &["-l", "tier=web,env!=prod"]).await,
        ["pod/a2"]
    );
    assert_eq!(
        pod_names(&c, &["-l", "tier in (db,cache)"]).await,
        ["pod/b1", "pod/c1"]
    );
    assert_eq!(
        pod_names(&c, &["-l", "tier notin (web),env"]).await,
        ["pod/b1"]
    );
    assert_eq!(pod_names(&c, &["-l", "!env"]).await, ["pod/c1"]);
    let none = c
        .kubectl_raw(&["get", "pods", "-l", "tier=nothing"], None)
        .await;
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("No resources found in default namespace.")
    );

    assert_eq!(
        pod_names(&c, &["--field-selector", "metadata.name=b1"]).await,
        ["pod/b1"]
    );
    assert_eq!(
        pod_names(
            &c,
            &["--field-selector", "metadata.name!=b1,status.phase=Pending"]
        )
        .await,
        ["pod/a1", "pod/a2", "pod/c1"]
    );
    assert_eq!(
        pod_names(&c, &["--field-selector", "spec.nodeName="])
            .await
            .len(),
        4
    );
    assert_eq!(
        pod_names(
            &c,
            &["-l", "env=prod", "--field-selector", "metadata.name!=a1"]
        )
        .await,
        ["pod/b1"]
    );
    let all = c
        .kubectl(&[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "metadata.namespace=default",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(all.lines().count(), 4);

    let err = c
        .kubectl_fails(&["get", "pods", "--field-selector", "spec.image=x"], None)
        .await;
    assert!(
        err.contains("field label not supported: spec.image"),
        "{err}"
    );
    let err = c
        .kubectl_fails(&["get", "pods", "-l", "tier in (web"], None)
        .await;
    assert!(!err.is_empty());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_with_chunk_size() {
    let c = Cluster::start().await;
    let pods: String = (0..7)
        .map(|i| pod_yaml(&format!("p{i}"), &[]))
        .collect::<Vec<_>>()
        .join("---\n");
    c.kubectl_stdin(&["create", "-f", "-"], &pods).await;
    let out = c
        .kubectl_raw(
            &["get", "pods", "--chunk-size=3", "-o", "name", "-v=6"],
            None,
        )
        .await;
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let requests: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("GET https://") && l.contains("/api/v1/namespaces/default/pods?"))
        .collect();
    assert_eq!(requests.len(), 3, "three pages of 3, 3 and 1:\n{log}");
    assert!(requests.iter().all(|r| r.contains("limit=3")), "{log}");
    assert!(!requests[0].contains("continue="), "{log}");
    assert!(
        requests[1..].iter().all(|r| r.contains("continue=")),
        "{log}"
    );
    let names: Vec<&str> = std::str::from_utf8(&out.stdout)
        .unwrap_or_default()
        .lines()
        .collect();
    let want: Vec<String> = (0..7).map(|i| format!("pod/p{i}")).collect();
    assert_eq!(names, want);

    // The table output pages the same way and prints one header.
    let table = c.kubectl(&["get", "pods", "--chunk-size=2"]).await;
    assert_eq!(
        table.lines().filter(|l| l.starts_with("NAME")).count(),
        1,
        "{table}"
    );
    assert_eq!(table.lines().count(), 8, "{table}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_replace_conflicts() {
    let c = Cluster::start().await;
    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("web", 2, "nginx:1.25"),
    )
    .await;
    let stale = c.kubectl(&["get", "deployment", "web", "-o", "yaml"]).await;
    c.kubectl(&["scale", "deployment/web", "--replicas=3"])
        .await;
    let err = c
        .kubectl_fails(
            &["replace", "-f", "-"],
            Some(&stale.replace("replicas: 2", "replicas: 7")),
        )
        .await;
    assert!(err.contains("Error from server (Conflict)"), "{err}");
    assert!(err.contains("Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"), "{err}");
    assert_eq!(get_json(&c, "deploy", "web").await["spec"]["replicas"], 3);

    // A fresh copy replaces fine.
    let fresh = c.kubectl(&["get", "deployment", "web", "-o", "yaml"]).await;
    c.kubectl_stdin(
        &["replace", "-f", "-"],
        &fresh.replace("replicas: 3", "replicas: 7"),
    )
    .await;
    assert_eq!(get_json(&c, "deploy", "web").await["spec"]["replicas"], 7);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_deployment_is_422_with_field_paths() {
    let c = Cluster::start().await;
    let bad = deployment_yaml("bad", 1, "nginx:1.25")
        .replace("replicas: 1", "replicas: -1")
        .replace(
            "      labels:\n        app: bad",
            "      labels:\n        app: other",
        )
        .replace("image: nginx:1.25", "image: \"\"");
    let err = c.kubectl_fails(&["create", "-f", "-"], Some(&bad)).await;
    assert!(err.contains("The Deployment \"bad\" is invalid"), "{err}");
    for path in [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        "spec.template.metadata.labels: Invalid value",
        "`selector` does not match template `labels`",
        "spec.template.spec.containers[0].image: Required value",
    ] {
        assert!(err.contains(path), "`{path}` missing from:\n{err}");
    }
    let out = c
        .kubectl_raw(&["create", "-f", "-", "-v=6"], Some(&bad))
        .await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("422 Unprocessable Entity"));
    c.kubectl_fails(&["get", "deployment", "bad"], None).await;

    let err = c
        .kubectl_fails(
            &["create", "-f", "-"],
            Some(&deployment_yaml("Bad_Name", 1, "nginx")),
        )
        .await;
    assert!(
        err.contains("metadata.name: Invalid value: \"Bad_Name\""),
        "{err}"
    );

    // Changing the selector of a stored Deployment is refused: it is immutable.
    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("web", 1, "nginx:1.25"),
    )
    .await;
    let err = c.kubectl_fails(&["patch", "deployment", "web", "--type=merge", "-p", r#"{"spec":{"selector":{"matchLabels":{"app":"web","x":"y"}},"template":{"metadata":{"labels":{"app":"web","x":"y"}}}}}"#], None).await;
    assert!(
        err.contains("spec.selector") && err.contains("field is immutable"),
        "{err}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_401_and_none_is_anonymous() {
    let c = Cluster::start().await;
    let good = std::fs::read_to_string(c.kubeconfig()).expect("kubeconfig");
    let token = good
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token line")
        .to_string();
    let wrong = c.dir.path().join("wrong-kubeconfig");
    std::fs::write(&wrong, good.replace(&token, "not-the-token")).expect("write");
    let none = c.dir.path().join("anonymous-kubeconfig");
    std::fs::write(
        &none,
        good.replace(&format!("token: {token}"), "username: nobody"),
    )
    .expect("write");
    let run = |kubeconfig: std::path::PathBuf, args: &'static [&'static str]| {
        let home = c.dir.path().to_path_buf();
        async move {
            let out = tokio::process::Command::new(common::KUBECTL)
                .args(args)
                .env("KUBECONFIG", kubeconfig)
                .env("HOME", home)
                .output()
                .await
                .expect("kubectl runs");
            assert!(!out.status.success());
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    // A token nobody issued: 401.
    let err = run(wrong.clone(), &["get", "pods", "-v=6"]).await;
    assert!(err.contains("401 Unauthorized"), "{err}");
    assert!(
        err.contains("error: You must be logged in to the server"),
        "{err}"
    );
    // No credentials: system:anonymous, whom upstream's default policy refuses (403).
    let err = run(
        none.clone(),
        &["get", "--raw", "/api/v1/namespaces/default/pods"],
    )
    .await;
    assert!(
        err.contains(r#"Error from server (Forbidden): pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default""#),
        "{err}"
    );
    // The right token still works.
    c.kubectl(&["get", "pods"]).await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_run() {
    let c = Cluster::start().await;
    let out = c
        .kubectl(&[
            "run",
            "one",
            "--image=busybox:1.36",
            "--labels=app=one",
            "--",
            "sleep",
            "3600",
        ])
        .await;
    assert_eq!(out.trim(), "pod/one created");
    let pod = get_json(&c, "pod", "one").await;
    assert_eq!(pod["spec"]["containers"][0]["image"], "busybox:1.36");
    assert_eq!(
        pod["spec"]["containers"][0]["args"],
        serde_json::json!(["sleep", "3600"])
    );
    assert_eq!(pod["metadata"]["labels"]["app"], "one");
    assert_eq!(pod["status"]["phase"], "Pending");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_deployment_and_namespace() {
    let c = Cluster::start().await;
    let out = c
        .kubectl(&[
            "create",
            "deployment",
            "made",
            "--image=nginx:1.25",
            "--replicas=2",
            "--port=8080",
        ])
        .await;
    assert_eq!(out.trim(), "deployment.apps/made created");
    let d = get_json(&c, "deploy", "made").await;
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "made");
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        (container["name"].as_str(), container["image"].as_str()),
        (Some("nginx"), Some("nginx:1.25"))
    );
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    assert_eq!(container["ports"][0]["protocol"], "TCP");
    // The same protobuf body fails validation readably.
    let err = c
        .kubectl_fails(&["create", "deployment", "Bad_Name", "--image=nginx"], None)
        .await;
    assert!(
        err.contains("metadata.name: Invalid value: \"Bad_Name\""),
        "{err}"
    );
    let err = c
        .kubectl_fails(&["create", "deployment", "made", "--image=nginx"], None)
        .await;
    assert!(
        err.contains("deployments.apps \"made\" already exists"),
        "{err}"
    );
    // A server dry run of a protobuf create stores nothing.
    c.kubectl(&[
        "create",
        "deployment",
        "dry",
        "--image=nginx",
        "--dry-run=server",
    ])
    .await;
    c.kubectl_fails(&["get", "deployment", "dry"], None).await;

    assert_eq!(
        c.kubectl(&["create", "namespace", "team-a"]).await.trim(),
        "namespace/team-a created"
    );
    let ns = get_json(&c, "namespace", "team-a").await;
    assert_eq!(ns["status"]["phase"], "Active");
    c.kubectl(&["run", "inside", "-n", "team-a", "--image=busybox:1.36"])
        .await;
    assert_eq!(
        c.kubectl(&["get", "pods", "-n", "team-a", "-o", "name"])
            .await
            .trim(),
        "pod/inside"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_and_explain() {
    let c = Cluster::start().await;
    let out = c.kubectl(&["api-resources"]).await;
    let short: std::collections::HashMap<&str, &str> = out
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            // NAME SHORTNAMES APIVERSION NAMESPACED KIND, SHORTNAMES possibly empty.
            (cols.len() == 5).then(|| (cols[0], cols[1]))
        })
        .collect();
    for (plural, want) in [
        ("pods", "po"),
        ("deployments", "deploy"),
        ("replicasets", "rs"),
        ("daemonsets", "ds"),
        ("statefulsets", "sts"),
        ("nodes", "no"),
        ("namespaces", "ns"),
        ("events", "ev"),
        ("persistentvolumeclaims", "pvc"),
    ] {
        assert_eq!(
            short.get(plural),
            Some(&want),
            "short name of {plural} in:\n{out}"
        );
    }
    assert!(
        out.contains("leases") && out.contains("controllerrevisions"),
        "{out}"
    );

    // Short names and the `all` category resolve.
    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("web", 1, "nginx:1.25"),
    )
    .await;
    assert_eq!(
        c.kubectl(&["get", "deploy", "-o", "name"]).await.trim(),
        "deployment.apps/web"
    );
    assert!(
        c.kubectl(&["get", "all", "-o", "name"])
            .await
            .contains("deployment.apps/web")
    );
    let ns = c.kubectl(&["get", "ns", "-o", "name"]).await;
    for want in [
        "namespace/default",
        "namespace/kube-system",
        "namespace/kube-public",
        "namespace/kube-node-lease",
    ] {
        assert!(ns.contains(want), "{ns}");
    }

    let explain = c.kubectl(&["explain", "deployment.spec.strategy"]).await;
    assert!(explain.contains("KIND:       Deployment"), "{explain}");
    assert!(
        explain.contains("FIELD: strategy <DeploymentStrategy>"),
        "{explain}"
    );
    assert!(
        explain.contains("rollingUpdate") && explain.contains("<RollingUpdateDeployment>"),
        "{explain}"
    );
    let explain = c.kubectl(&["explain", "pods.spec.containers.ports"]).await;
    assert!(
        explain.contains("containerPort") && explain.contains("-required-"),
        "{explain}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_server_creates_nothing() {
    let c = Cluster::start().await;
    let out = c
        .kubectl_stdin(
            &["create", "-f", "-", "--dry-run=server", "-o", "json"],
            &deployment_yaml("dry", 2, "nginx:1.25"),
        )
        .await;
    let shown: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        shown["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%",
        "dry run still defaults"
    );
    let err = c.kubectl_fails(&["get", "deployment", "dry"], None).await;
    assert!(err.contains("not found"), "{err}");

    c.kubectl_stdin(
        &["create", "-f", "-"],
        &deployment_yaml("web", 2, "nginx:1.25"),
    )
    .await;
    c.kubectl(&[
        "scale",
        "deployment/web",
        "--replicas=9",
        "--dry-run=server",
    ])
    .await;
    c.kubectl(&[
        "set",
        "image",
        "deployment/web",
        "app=nginx:2",
        "--dry-run=server",
    ])
    .await;
    c.kubectl(&["delete", "deployment", "web", "--dry-run=server"])
        .await;
    let d = get_json(&c, "deploy", "web").await;
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
    assert!(d["metadata"].get("deletionTimestamp").is_none());
    // A dry run is checked as the real request would be: the name is taken.
    let err = c
        .kubectl_fails(
            &["create", "-f", "-", "--dry-run=server"],
            Some(&deployment_yaml("web", 1, "nginx")),
        )
        .await;
    assert!(err.contains("AlreadyExists"), "{err}");
    c.stop().await;
}

/// A namespace and a workload of each other kind in one file.
const MULTI: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: shop
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: postgres:16
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: shop
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: a
        image: agent:1
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: claim
  namespace: shop
  labels: {tier: storage}
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 500Mi
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_document_apply_delete_by_label_and_namespace_deletion() {
    let c = Cluster::with_controllers(&["namespace"]).await;
    let out = c.kubectl_stdin(&["apply", "-f", "-"], MULTI).await;
    for want in [
        "namespace/shop created",
        "statefulset.apps/db created",
        "daemonset.apps/agent created",
        "persistentvolumeclaim/claim created",
    ] {
        assert!(out.contains(want), "{out}");
    }
    let ds = c
        .kubectl_json(&["get", "ds", "agent", "-n", "shop", "-o", "json"])
        .await;
    assert_eq!(
        ds["spec"]["updateStrategy"],
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0,
            "podUpdatePolicy": "Recreate", "paused": false}})
    );
    let sts = c
        .kubectl_json(&["get", "sts", "db", "-n", "shop", "-o", "json"])
        .await;
    assert_eq!(
        sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        0
    );
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    let pvc = c
        .kubectl_json(&["get", "pvc", "claim", "-n", "shop", "-o", "json"])
        .await;
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    assert_eq!(pvc["status"]["phase"], "Pending");
    c.kubectl(&["scale", "sts", "db", "-n", "shop", "--replicas=3"])
        .await;
    assert_eq!(
        c.kubectl_json(&["get", "sts", "db", "-n", "shop", "-o", "json"])
            .await["spec"]["replicas"],
        3
    );

    // Delete a collection by label: exactly the selected objects go.
    let pods: String = ["x1", "x2", "y1"]
        .iter()
        .map(|n| pod_yaml(n, &[("grp", &n[..1])]))
        .collect::<Vec<_>>()
        .join("---\n");
    c.kubectl_stdin(&["create", "-n", "shop", "-f", "-"], &pods)
        .await;
    let out = c
        .kubectl(&["delete", "pods", "-n", "shop", "-l", "grp=x"])
        .await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["pod \"x1\" deleted", "pod \"x2\" deleted"]
    );
    assert_eq!(
        c.kubectl(&["get", "pods", "-n", "shop", "-o", "name"])
            .await
            .trim(),
        "pod/y1"
    );

    // Deleting the namespace removes what is in it; `kubectl wait` watches for the end.
    c.kubectl(&["delete", "namespace", "shop", "--wait=false"])
        .await;
    c.kubectl(&["wait", "--for=delete", "namespace/shop", "--timeout=20s"])
        .await;
    let left = c
        .kubectl(&["get", "pods,sts,ds,pvc", "-A", "-o", "name"])
        .await;
    assert_eq!(left.trim(), "", "content left behind: {left}");
    c.stop().await;
}

/// The NAME column of what `kubectl get` printed, in order.
fn names_printed(out: &str) -> Vec<String> {
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// `kubectl get --sort-by` on a field outside `metadata` asks for a Table with
/// `includeObject=Object` and sorts the rows by the embedded objects; upstream's asTable embeds
/// the whole object there (PartialObjectMetadata only for the default `Metadata`), so the rows
/// come back sorted by events' `.lastTimestamp`, pods' `.status.startTime` and Deployments'
/// `.spec.replicas`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_sorted_by_fields_outside_metadata() {
    let c = Cluster::start().await;
    for (name, replicas) in [("three", 3), ("one", 1), ("two", 2)] {
        c.kubectl_stdin(
            &["apply", "-f", "-"],
            &deployment_yaml(name, replicas, "nginx:1.25"),
        )
        .await;
    }
    let out = c
        .kubectl(&["get", "deployments", "--sort-by=.spec.replicas"])
        .await;
    assert_eq!(names_printed(&out), ["one", "two", "three"], "{out}");

    for (name, time) in [
        ("late", "2024-01-01T00:00:03Z"),
        ("early", "2024-01-01T00:00:01Z"),
        ("middle", "2024-01-01T00:00:02Z"),
    ] {
        let event = format!(
            "apiVersion: v1
kind: Event
metadata: {{name: {name}}}
involvedObject: {{kind: Deployment, name: one, namespace: default}}
reason: Test
message: {name}
type: Normal
count: 1
firstTimestamp: \"{time}\"
lastTimestamp: \"{time}\"
"
        );
        c.kubectl_stdin(&["create", "-f", "-"], &event).await;
    }
    let out = c
        .kubectl(&["get", "events", "--sort-by=.lastTimestamp"])
        .await;
    // kubectl's event columns end with MESSAGE, which here is the event's name.
    let messages: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(messages, ["early", "middle", "late"], "{out}");

    for (name, time) in [
        ("b", "2024-01-01T00:00:02Z"),
        ("c", "2024-01-01T00:00:03Z"),
        ("a", "2024-01-01T00:00:01Z"),
    ] {
        c.kubectl_stdin(&["apply", "-f", "-"], &pod_yaml(name, &[("app", "x")]))
            .await;
        let patch = format!(r#"{{"status":{{"startTime":"{time}"}}}}"#);
        c.kubectl(&[
            "patch",
            "pod",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ])
        .await;
    }
    let out = c
        .kubectl(&["get", "pods", "--sort-by=.status.startTime"])
        .await;
    assert_eq!(names_printed(&out), ["a", "b", "c"], "{out}");
}
