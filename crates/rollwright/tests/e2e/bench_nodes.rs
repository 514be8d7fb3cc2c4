//! `rollwright bench nodes --daemonset` at 20 nodes, as issue 24's 65,000-node run goes but in a
//! few seconds: the nodes register and renew their leases, the DaemonSet is created and rolled,
//! no node goes NotReady, its invariants hold, and every figure is printed. Timings are not
//! asserted (CI's machine is loaded); the run fails by itself when an invariant breaks.

use std::time::Duration;

/// Runs the benchmark with `extra` flags; its standard output, after asserting it succeeded.
async fn bench(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("dir");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_rollwright"))
        .args([
            "bench",
            "nodes",
            "--daemonset",
            "--nodes",
            "20",
            // Four waves of five nodes, 100ms each: the update takes well under a second.
            "--max-unavailable",
            "25%",
            "--readiness-delay-ms",
            "100",
            "--timeout-secs",
            "120",
            "--data-dir",
        ])
        .arg(dir.path())
        .args(extra)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the run ends within its timeouts")
        .expect("rollwright bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for figure in [
        "nodes: 20 registered and Ready in",
        "create: 20 daemon pods available in",
        "ideal (1 wave of 0.10s)",
        "update (maxUnavailable 25% = 5 nodes): every pod replaced in",
        "ideal (4 waves of",
        "0 breaches",
        "nodes NotReady: 0 (0 transitions",
        "total: peak RSS",
        "KiB per node",
        "CPU s",
    ] {
        assert!(stdout.contains(figure), "{figure:?} in\n{stdout}");
    }
    stdout
}

/// Each simulator's lease-renewal line.
fn lease_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("lease renewals (simulator "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_rolls_over_simulated_nodes_with_every_figure_printed() {
    let stdout = bench(&[]).await;
    let leases = lease_lines(&stdout);
    assert_eq!(leases.len(), 1, "{stdout}");
    assert!(leases[0].contains("simulator 0/1, 20 nodes"), "{stdout}");
    assert!(stdout.contains("simulator in this process"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_can_be_sharded_over_two_processes_on_etcd() {
    if std::process::Command::new("etcd")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("no etcd binary on PATH; skipped");
        return;
    }
    let stdout = bench(&["--shards", "2", "--store", "etcd"]).await;
    let leases = lease_lines(&stdout);
    assert_eq!(leases.len(), 2, "one lease line per shard:\n{stdout}");
    assert!(leases[0].contains("simulator 0/2"), "{stdout}");
    assert!(leases[1].contains("simulator 1/2"), "{stdout}");
    for process in ["shard 0/2 (pid", "shard 1/2 (pid", "etcd"] {
        assert!(stdout.contains(process), "{process} in\n{stdout}");
    }
}
