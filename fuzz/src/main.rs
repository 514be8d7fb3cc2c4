//! `rollwright-fuzz [TARGET] [--seconds N] [--seed S]`: runs one target (or all) for a bounded
//! time and prints executions and findings. Exits non-zero on a finding.

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let seconds = flag("--seconds").unwrap_or(10);
    let seed = flag("--seed").unwrap_or(1);
    let only = args.first().filter(|a| !a.starts_with("--"));
    let mut found = 0;
    for (name, target, corpus) in fuzz::targets::all() {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let out = fuzz::run(
            target,
            &corpus,
            std::time::Duration::from_secs(seconds),
            seed,
        );
        println!(
            "{name:16} {:>9} executions  {} findings",
            out.executions,
            out.findings.len()
        );
        for (input, why) in &out.findings {
            println!("  {why}\n    input: {:?}", String::from_utf8_lossy(input));
        }
        found += out.findings.len();
    }
    anyhow::ensure!(found == 0, "{found} findings");
    Ok(())
}
