//! `rollwright snapshot --from` on a cluster recorded from upstream Kubernetes v1.28.4 itself
//! (tests/data/README.md says how): upstream's own object shapes (managed fields, defaults, the
//! status its controllers wrote) made into a snapshot, and an update rehearsed on it to the end.
//! No server is started for the snapshot: the recording is all there is. Durations are printed,
//! never asserted.

use crate::common::{DEADLINE, ROLLWRIGHT};
use serde_json::Value;
use std::{path::Path, process::Output};

/// The recording, as `kubectl get ... -A -o json` printed it.
const RECORDING: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/upstream-v1.28.4-cluster.json"
);

/// The rehearsal loads, settles and rolls a dozen nodes and their pods: more than [`DEADLINE`].
const REHEARSAL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

async fn rollwright(args: &[&str], within: std::time::Duration) -> Output {
    let run = tokio::process::Command::new(ROLLWRIGHT)
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(within, run)
        .await
        .unwrap_or_else(|_| panic!("rollwright {} ends in time", args.join(" ")))
        .expect("rollwright runs")
}

async fn succeeds(args: &[&str], within: std::time::Duration) -> (String, String) {
    let out = rollwright(args, within).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "rollwright {} failed: {stderr}{stdout}",
        args.join(" ")
    );
    (stdout, stderr)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file written")).expect("JSON")
}

/// The recording's items of `kind`.
fn recorded<'a>(recording: &'a Value, kind: &str) -> Vec<&'a Value> {
    recording["items"]
        .as_array()
        .expect("a List")
        .iter()
        .filter(|o| o["kind"] == kind)
        .collect()
}

fn count(snapshot: &Value, key: &str) -> usize {
    snapshot["objects"][key]
        .as_array()
        .unwrap_or_else(|| panic!("objects.{key} is a list"))
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_upstream_cluster_is_snapshotted_and_an_update_rehearsed_on_it() {
    let recording = read(Path::new(RECORDING));
    let dir = tempfile::tempdir().expect("temporary dir");
    let snapshot_file = dir.path().join("cluster.json");
    let snapshot_path = snapshot_file.to_string_lossy().into_owned();
    succeeds(
        &["snapshot", "--from", RECORDING, "-o", &snapshot_path],
        DEADLINE,
    )
    .await;
    let snapshot = read(&snapshot_file);
    assert_eq!(snapshot["kind"], "ClusterSnapshot");
    // Every kind the snapshot reads was recorded, so nothing is unreadable.
    assert_eq!(
        snapshot["unreadable"],
        serde_json::json!([]),
        "{}",
        snapshot["unreadable"]
    );
    for (key, kind) in [
        ("nodes", "Node"),
        ("namespaces", "Namespace"),
        ("deployments", "Deployment"),
        ("replicaSets", "ReplicaSet"),
        ("daemonSets", "DaemonSet"),
        ("statefulSets", "StatefulSet"),
        ("jobs", "Job"),
        ("pods", "Pod"),
        ("podDisruptionBudgets", "PodDisruptionBudget"),
        ("persistentVolumes", "PersistentVolume"),
    ] {
        assert_eq!(
            count(&snapshot, key),
            recorded(&recording, kind).len(),
            "{key}"
        );
    }
    let pods = snapshot["objects"]["pods"].as_array().expect("pods");
    assert!(
        pods.iter()
            .all(|p| p["kind"] == "Pod" && p["metadata"]["managedFields"].is_null())
    );
    // Upstream's kubelet status, as the simulated kubelets wrote it, gives every Ready pod its
    // timing.
    let ready = pods
        .iter()
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .count();
    let timed = snapshot["timings"]
        .as_object()
        .expect("timings")
        .values()
        .filter(|t| t["readyAfterSeconds"].is_f64())
        .count();
    assert_eq!(timed, ready);
    // The recording was made without Secrets, and the Secret the database reads is only named.
    let text = std::fs::read_to_string(&snapshot_file).expect("snapshot");
    assert!(!text.contains("\"kind\": \"Secret\""));

    // One namespace: its pods, and the cluster-scoped objects whole.
    let (one, _) = succeeds(
        &["snapshot", "--from", RECORDING, "-n", "payments"],
        DEADLINE,
    )
    .await;
    let one: Value = serde_json::from_str(&one).expect("snapshot on stdout");
    assert!(
        one["objects"]["pods"]
            .as_array()
            .expect("pods")
            .iter()
            .all(|p| p["metadata"]["namespace"] == "payments")
    );
    assert_eq!(count(&one, "namespaces"), 1);
    assert_eq!(count(&one, "nodes"), count(&snapshot, "nodes"));

    // An update of the recorded checkout Deployment (4 replicas, maxSurge 1, maxUnavailable 0,
    // a budget of maxUnavailable 1, spread over the zones) rehearsed to the end.
    let report_file = dir.path().join("update.json");
    let (out, err) = succeeds(
        &[
            "whatif",
            "--snapshot",
            &snapshot_path,
            "--change",
            "set image deploy/checkout checkout=registry.example.com/shop/checkout:1.6.0 -n payments",
            "--report",
            &report_file.to_string_lossy(),
        ],
        REHEARSAL_DEADLINE,
    )
    .await;
    println!("{err}{out}");
    assert!(
        out.lines().any(|l| l.starts_with("predicted duration: ")),
        "{out}"
    );
    let live = pods
        .iter()
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .count();
    let loaded = format!(
        "loaded {} nodes and {live} pods ({ready} Ready)",
        count(&snapshot, "nodes")
    );
    assert!(err.contains(&loaded), "{loaded} in {err}");
    let report = read(&report_file);
    assert_eq!(report["finished"], true, "{report}");
    let checkout = report["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["workload"] == "deployment/payments/checkout")
        .unwrap_or_else(|| panic!("checkout in {report}"));
    assert_eq!(checkout["desired"], 4);
    assert_eq!(checkout["doneInRuns"], 1);
    assert_eq!(checkout["maxUnavailable"], 0);
    assert_eq!(checkout["lowestAvailable"], 4, "{checkout}");
    assert_eq!(checkout["budgetMinAvailable"], 3);
    let timing = report["timing"].as_array().expect("timing");
    assert!(
        timing
            .iter()
            .any(|t| t["workload"] == "deployment/payments/checkout" && t["pods"] == 4),
        "{timing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_no_recording_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().expect("temporary dir");
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: List\nitems: []\n").expect("written");
    let path = file.to_string_lossy().into_owned();
    let out = rollwright(&["snapshot", "--from", &path], DEADLINE).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("error: {path} is not JSON (")),
        "{err}"
    );
    assert!(
        err.contains("record it with `kubectl get nodes,namespaces,deployments,"),
        "{err}"
    );
    // A recording and a live cluster are not both read.
    let out = rollwright(
        &["snapshot", "--from", &path, "--kubeconfig", &path],
        DEADLINE,
    )
    .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A DaemonSet update on the recording: every node's pod replaced, one at a time.
///
/// Upstream's pods carry `pod-template-generation: "1"`, and the DaemonSet controller counts a
/// pod whose label equals the DaemonSet's `deprecated.daemonset.template.generation` as updated.
/// The API server raises that annotation with every template change, as upstream's strategy
/// does (`pkg/registry/apps/daemonset/strategy.go`, `PrepareForUpdate`); before it did, the
/// recorded "1" stayed after `set image` and the rehearsal ended at once, replacing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_update_on_the_recording_replaces_every_pod() {
    let dir = tempfile::tempdir().expect("temporary dir");
    let snapshot = dir
        .path()
        .join("cluster.json")
        .to_string_lossy()
        .into_owned();
    succeeds(
        &["snapshot", "--from", RECORDING, "-o", &snapshot],
        DEADLINE,
    )
    .await;
    let report_file = dir.path().join("update.json");
    let (out, err) = succeeds(
        &[
            "whatif",
            "--snapshot",
            &snapshot,
            "--change",
            "set image ds/kube-proxy kube-proxy=registry.k8s.io/kube-proxy:v1.28.5 -n kube-system",
            "--report",
            &report_file.to_string_lossy(),
        ],
        REHEARSAL_DEADLINE,
    )
    .await;
    println!("{err}{out}");
    let report = read(&report_file);
    assert_eq!(report["finished"], true, "{report}");
    let proxy = &report["workloads"][0];
    assert_eq!(proxy["workload"], "daemonset/kube-system/kube-proxy");
    assert_eq!(proxy["desired"], 12);
    // maxUnavailable 1: one node at a time without its proxy.
    assert_eq!(proxy["lowestAvailable"], 11, "{proxy}");
    let frames = report["runs"][0]["nodes"]["frames"]
        .as_array()
        .expect("frames");
    assert_eq!(
        frames.last().map(|f| &f["cells"]),
        Some(&Value::from("n".repeat(12))),
        "{frames:?}"
    );
}
