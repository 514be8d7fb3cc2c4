//! `rollwright whatif` on a snapshot of a running cluster (the guestbook tutorial, unchanged, with
//! a PodDisruptionBudget): an image update rehearsed to the end within its bounds, a broken image
//! reported with the kubelet's reason in an HTML report headless Chromium renders, a drain held
//! to its budget, the real cluster untouched, and bad input refused with the fix. Durations are
//! printed, never asserted.

use crate::{common::Cluster, endpoints};
use serde_json::Value;

fn workload<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["workload"] == name)
        .unwrap_or_else(|| panic!("{name} in {report}"))
}

/// Runs headless Chromium (`tools/setup` installs Debian's) with `args`; its stdout.
async fn chromium(dir: &std::path::Path, args: &[&str]) -> String {
    let profile = dir.join(format!("chromium-{}", args.len()));
    let out = tokio::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(args)
        .output();
    let out = tokio::time::timeout(crate::common::DEADLINE, out)
        .await
        .expect("chromium ends in time")
        .expect("chromium runs (tools/setup installs it)");
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("report written")).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatif_rehearses_an_update_a_broken_image_and_a_drain_without_touching_the_cluster() {
    let c = Cluster::start_with(endpoints::components()).await;
    crate::snapshot::guestbook_in_shop(&c).await;
    c.kubectl(&[
        "create",
        "pdb",
        "frontend",
        "-n",
        "shop",
        "--selector=app=guestbook,tier=frontend",
        "--min-available=2",
    ])
    .await;
    let dir = c.dir.path();
    let snapshot = dir.join("cluster.json").to_string_lossy().into_owned();
    c.rollwright(&["snapshot", "-o", &snapshot]).await;

    // An image update, twice with different seeds.
    let report = dir.join("update.json");
    let out = c
        .rollwright(&[
            "whatif",
            "--snapshot",
            &snapshot,
            "--change",
            "set image deploy/frontend php-redis=docker.io/corelab/gb-frontend:v6 -n shop",
            "--runs",
            "2",
            "--report",
            &report.to_string_lossy(),
        ])
        .await;
    println!("{out}");
    assert!(
        out.lines().any(|l| l.starts_with("predicted duration: ")),
        "{out}"
    );
    let r = read(&report);
    assert_eq!(r["finished"], true, "{r}");
    assert_eq!(r["runs"].as_array().map(Vec::len), Some(2));
    let frontend = workload(&r, "deployment/shop/frontend");
    assert_eq!(frontend["desired"], 3);
    assert_eq!(frontend["doneInRuns"], 2);
    // 25% of 3 rounds down to 0 unavailable: the rehearsal never went below 3.
    assert_eq!(frontend["maxUnavailable"], 0);
    assert_eq!(frontend["lowestAvailable"], 3, "{frontend}");
    assert_eq!(frontend["budgetMinAvailable"], 2);
    assert!(r["apiRequests"].as_u64().is_some_and(|n| n > 0), "{r}");
    // The timing came from the snapshot's three frontend pods.
    let timing = r["timing"].as_array().expect("timing");
    assert!(
        timing
            .iter()
            .any(|t| t["workload"] == "deployment/shop/frontend" && t["pods"] == 3),
        "{timing:?}"
    );
    // Only the rehearsal changed: the real Deployment still runs v5.
    let image = c
        .kubectl(&[
            "get",
            "deploy/frontend",
            "-n",
            "shop",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(image, "docker.io/corelab/gb-frontend:v5");

    // A broken image: the profile makes it fail to pull; the rollout stalls and says why.
    let profile = dir.join("broken.yaml");
    std::fs::write(
        &profile,
        "rules:\n- match: {image: \"*broken*\"}\n  fault: imagePullFailure\n",
    )
    .expect("profile written");
    let report = dir.join("broken.html");
    let out = c
        .rollwright(&[
            "whatif",
            "--snapshot",
            &snapshot,
            "--profile",
            &profile.to_string_lossy(),
            "--change",
            "set image deploy/frontend php-redis=gb-frontend:broken -n shop",
            "--stall-after",
            "10s",
            "--report",
            &report.to_string_lossy(),
        ])
        .await;
    println!("{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("stalls: nothing moves after")),
        "{out}"
    );
    assert!(
        out.contains("deployment/shop/frontend: ImagePullBackOff")
            || out.contains("deployment/shop/frontend: ErrImagePull"),
        "{out}"
    );
    // The HTML report, rendered by headless Chromium: its DOM after rendering, and a screenshot.
    let url = format!("file://{}", report.display());
    let dom = chromium(dir, &["--dump-dom", &url]).await;
    assert!(dom.contains("Stalls: nothing moves after"), "{dom}");
    assert!(dom.contains("ImagePullBackOff"), "{dom}");
    assert_eq!(
        dom.matches(r#"aria-label="deployment/shop/frontend""#)
            .count(),
        1,
        "a chart of the one workload changed: {dom}"
    );
    assert!(dom.contains("The nodes as the rollout moves"), "{dom}");
    let png = dir.join("report.png");
    chromium(
        dir,
        &[
            "--window-size=900,900",
            &format!("--screenshot={}", png.display()),
            &url,
        ],
    )
    .await;
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
    // A blank 900x900 page compresses to a few kilobytes; text, a table and charts do not.
    assert!(
        bytes.len() > 20_000,
        "the page drew little: {} bytes",
        bytes.len()
    );

    // A drain of a node running a frontend pod: evictions wait for the budget.
    let node = c
        .kubectl(&[
            "get",
            "pods",
            "-n",
            "shop",
            "-l",
            "tier=frontend",
            "-o",
            "jsonpath={.items[0].spec.nodeName}",
        ])
        .await;
    let report = dir.join("drain.json");
    let out = c
        .rollwright(&[
            "whatif",
            "--snapshot",
            &snapshot,
            "--change",
            &format!("drain {node}"),
            "--report",
            &report.to_string_lossy(),
        ])
        .await;
    println!("{out}");
    let r = read(&report);
    assert_eq!(r["finished"], true, "{r}");
    let frontend = workload(&r, "deployment/shop/frontend");
    assert!(
        frontend["lowestAvailable"].as_i64().is_some_and(|n| n >= 2),
        "the budget keeps 2 available: {frontend}"
    );
    assert_eq!(frontend["doneInRuns"], 1);
    let cordoned = c
        .kubectl(&["get", "node", &node, "-o", "jsonpath={.spec.unschedulable}"])
        .await;
    assert_eq!(cordoned, "", "the real node is not cordoned");

    // Bad input: a verb that changes nothing, and a file that is not a snapshot.
    let (_, err) = c
        .rollwright_fails(
            &[
                "whatif",
                "--snapshot",
                &snapshot,
                "--change",
                "rollout status deploy/frontend",
            ],
            None,
        )
        .await;
    assert!(
        err.contains("changes nothing: give one of set image"),
        "{err}"
    );
    let (_, err) = c
        .rollwright_fails(
            &[
                "whatif",
                "--snapshot",
                &profile.to_string_lossy(),
                "--change",
                "drain x",
            ],
            None,
        )
        .await;
    assert!(
        err.contains("is not a snapshot (make one with `rollwright snapshot -o FILE`)"),
        "{err}"
    );
    c.stop().await;
}

/// A Deployment of 100 replicas that replaces all its pods at once (maxSurge 100%,
/// maxUnavailable 0): an update is 100 creates and then 100 deletes by the replicaset
/// controller, all through its one client.
const HUNDRED: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 100
  selector:
    matchLabels:
      app: web
  strategy:
    rollingUpdate:
      maxSurge: 100%
      maxUnavailable: 0
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: web
        image: nginx:1.27
"#;

/// `--control-plane`: under `kube-defaults` the rehearsal's replicaset controller sends at
/// most 20 requests a second after a burst of 30, as kube-controller-manager's client does, so
/// 100 creates and 100 deletes take at least (200 - 30) / 20 = 8.5 s of the rehearsal's clock;
/// `unlimited` is not held to it. The verdict says what the control plane was assumed to be.
/// Figures are the rehearsal's own (its clock, its pods' timestamps), never the test's wall
/// clock.
///
/// A second's count of creates is not bounded by the bucket: the server stamps a pod when it
/// handles the request, a little after its token, and creates delayed from one second land in
/// the next. Only the total is: the 200th write cannot be sent before its token exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatif_paces_pod_creates_under_kube_defaults_and_not_when_unlimited() {
    const BURST: f64 = 30.0;
    const QPS: f64 = 20.0;
    let c = Cluster::start_with(endpoints::components()).await;
    c.kubectl_stdin(&["apply", "-f", "-"], HUNDRED).await;
    c.rollwright(&["rollout", "status", "deploy/web", "--timeout", "120s"])
        .await;
    let dir = c.dir.path();
    let snapshot = dir.join("hundred.json");
    c.rollwright(&[
        "snapshot",
        "-n",
        "default",
        "-o",
        &snapshot.to_string_lossy(),
    ])
    .await;
    // The snapshot measured the Deployment's rollout: its 100 pods, whatever pace it shows.
    let taken = read(&snapshot);
    let rollouts = taken["controlPlane"]["rollouts"]
        .as_array()
        .expect("the snapshot measured the control plane");
    assert!(
        rollouts
            .iter()
            .any(|r| r["workload"] == "deployment/default/web" && r["pods"] == 100),
        "{rollouts:?}"
    );

    // `None`: the default, what the snapshot measured.
    let rehearse = |mode: Option<&'static str>| {
        let (snapshot, report) = (
            snapshot.to_string_lossy().into_owned(),
            dir.join(format!("{}.json", mode.unwrap_or("default"))),
        );
        let c = &c;
        async move {
            let report_path = report.to_string_lossy().into_owned();
            let mut args = vec![
                "whatif",
                "--snapshot",
                &snapshot,
                "--change",
                "set image deploy/web web=nginx:1.28",
                "--report",
                &report_path,
            ];
            if let Some(mode) = mode {
                args.extend(["--control-plane", mode]);
            }
            let out = c.rollwright(&args).await;
            println!("{out}");
            (out, read(&report))
        }
    };

    // By default, what the snapshot measured (the source runs unlimited: whatever its one
    // rollout showed, the verdict says where each limit came from).
    let (out, measured) = rehearse(None).await;
    assert!(
        out.contains("control plane (measured):\n  controllers: "),
        "{out}"
    );
    assert_eq!(measured["finished"], true, "{measured}");

    let (out, paced) = rehearse(Some("kube-defaults")).await;
    assert!(
        out.contains(
            "control plane (kube-defaults):\n  controllers: pods created at most 20/s (burst 30), \
             kube-controller-manager's default (--control-plane kube-defaults)\n"
        ),
        "{out}"
    );
    assert_eq!(paced["finished"], true, "{paced}");
    assert_eq!(paced["controlPlane"]["components"][0]["qps"], 20.0);
    let run = &paced["runs"][0]["pace"];
    let created = run["podsCreated"].as_u64().expect("pods created");
    assert!(created >= 100, "{run}");
    let floor = (2.0 * 100.0 - BURST) / QPS;
    let predicted = paced["predictedSeconds"].as_f64().expect("a prediction");
    assert!(
        predicted >= floor,
        "200 writes through a 20/30 bucket take at least {floor} s, predicted {predicted} s"
    );

    let (out, free) = rehearse(Some("unlimited")).await;
    assert!(
        out.contains("  controllers: pods created unpaced: no client limit"),
        "{out}"
    );
    assert_eq!(free["finished"], true, "{free}");
    let run = &free["runs"][0]["pace"];
    let predicted = free["predictedSeconds"].as_f64().expect("a prediction");
    let busiest = run["busiestSecond"].as_f64().expect("busiest second");
    // Either is impossible through a 20/30 bucket: the creates were not paced by one.
    assert!(
        predicted < floor || busiest > BURST + QPS,
        "unlimited, yet paced as a 20/30 bucket paces: {predicted} s, at most {busiest} in one second: {run}"
    );
    c.stop().await;
}

/// A budget-aware Deployment (`rollwright.io/honor-disruption-budgets`) whose budget keeps all
/// three pods: each old pod goes only once a surge pod is available and frees a disruption, so
/// the rehearsal's rollout is held between steps, finishes, and the verdict says by what (issue
/// 41: whatif rehearses budget holds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatif_shows_a_rollout_a_budget_would_hold_and_the_budget() {
    let c = Cluster::start_with(endpoints::components()).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    rollwright.io/honor-disruption-budgets: "true"
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 1}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 3
  selector: {matchLabels: {app: web}}
"#,
    )
    .await;
    c.rollwright(&["rollout", "status", "deploy/web", "--timeout", "120s"])
        .await;
    let dir = c.dir.path();
    let snapshot = dir.join("held.json").to_string_lossy().into_owned();
    c.rollwright(&["snapshot", "-n", "default", "-o", &snapshot])
        .await;
    let report = dir.join("held-report.json");
    let out = c
        .rollwright(&[
            "whatif",
            "--snapshot",
            &snapshot,
            "--change",
            "set image deploy/web web=nginx:1.28",
            "--stall-after",
            "5s",
            "--report",
            &report.to_string_lossy(),
        ])
        .await;
    println!("{out}");
    assert!(
        out.contains(
            "held back by its controller (a budget, pacing):\n  deployment/default/web: \
             DisruptionBudget for "
        ) && out.contains("waiting on pdb/web (0 disruptions allowed)"),
        "{out}"
    );
    let r = read(&report);
    assert_eq!(r["finished"], true, "{r}");
    let web = workload(&r, "deployment/default/web");
    assert_eq!(web["held"][0]["reason"], "DisruptionBudget", "{web}");
    // The budget kept every pod: the rehearsal never went below 3 available.
    assert_eq!(web["lowestAvailable"], 3, "{web}");
    c.stop().await;
}
