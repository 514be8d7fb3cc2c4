//! Each fuzz target for a few seconds, as CI runs them: no finding.

#[test]
fn every_target_runs_clean_for_a_bounded_time() {
    let seconds = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mut report = Vec::new();
    for (name, target, corpus) in fuzz::targets::all() {
        let out = fuzz::run(target, &corpus, std::time::Duration::from_secs(seconds), 7);
        assert!(out.executions > 0, "{name} ran");
        for (input, why) in out.findings {
            report.push(format!(
                "{name}: {why}\n  input: {:?}",
                String::from_utf8_lossy(&input)
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
