//! A short `rollwright chaos` run, as CI runs it: a few SIGKILLs of the control plane and of the
//! controllers during rollouts of every strategy; no acknowledged write may be lost and no
//! invariant broken. (The full campaign, 100 kills, is run on purpose; see RELIABILITY.md.)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_chaos_run_loses_nothing_and_breaks_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_rollwright"))
        .args([
            "chaos",
            "--kills",
            "4",
            "--rollouts",
            "7",
            "--every",
            "3s",
            "--deadline",
            "5m",
            "--seed",
            "7",
            "--data-dir",
        ])
        .arg(dir.path())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(330), run)
        .await
        .expect("the run ends by itself within its deadline")
        .expect("rollwright chaos runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let logs = ["watcher.log", "controllers.log", "control-plane.log"]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            format!(
                "--- {f}\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(out.status.success(), "{stdout}\n{logs}");
    for line in [
        "acknowledged writes lost  0 of",
        "invariant violations      0",
        "duplicate daemon pods     0",
        "restarts                  4",
    ] {
        assert!(stdout.contains(line), "{line} in\n{stdout}");
    }
    // Every rollout reached its image: the controllers kept working between the kills.
    let completed = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("rollouts completed"))
        .and_then(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            Some((
                words.first()?.parse::<u32>().ok()?,
                words.get(2)?.parse::<u32>().ok()?,
            ))
        });
    assert!(
        matches!(completed, Some((done, started)) if done == started && started > 0),
        "{completed:?} in\n{stdout}\n{logs}"
    );
}
