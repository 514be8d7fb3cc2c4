//! `difftest`: compare two API servers on seeded request sequences, record upstream's answers,
//! replay a recording. See README.md.

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use difftest::compare::{Difference, Known};
use difftest::run::Target;
use difftest::{corpus, generate};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Differential test of an API server against upstream kube-apiserver")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the sequences against A and B and print every difference and a summary.
    Compare {
        /// Kubeconfig of side A (upstream, by convention).
        #[arg(long)]
        a: PathBuf,
        /// Kubeconfig of side B (rollwright, by convention), or `in-process` for rollwright's API
        /// server in this process configured as upstream's bare one (ServiceAccount admission on).
        #[arg(long)]
        b: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Run the sequences against upstream (twice, keeping those it answers the same way both
    /// times) and write its normalized answers to DIR/corpus.jsonl.
    Record {
        /// Kubeconfig of upstream kube-apiserver.
        #[arg(long)]
        upstream: PathBuf,
        /// The corpus directory.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Print the sequences of the seeds (their requests, references unresolved), to reproduce a
    /// difference by hand.
    Show {
        /// Seeds, as for compare.
        #[arg(long)]
        seeds: String,
    },
    /// Replay a recorded corpus against a server and print every difference and a summary.
    Replay {
        /// The corpus directory.
        #[arg(long)]
        corpus: PathBuf,
        /// Kubeconfig of the server to replay against, or `in-process`.
        #[arg(long)]
        against: PathBuf,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct Common {
    /// Seeds: `A..B` (B excluded), `A..=B`, or one number. Ignored by replay.
    #[arg(long, default_value = "0..100")]
    seeds: String,
    /// Sequences run at once.
    #[arg(long, default_value_t = 4)]
    jobs: usize,
    /// Appended to each namespace (`dt-<seed>-<suffix>`), to run seeds again on the same servers:
    /// without controllers a deleted namespace stays Terminating.
    #[arg(long, default_value = "")]
    suffix: String,
    /// Known differences (markdown table of class globs and reasons).
    #[arg(long, default_value = "crates/difftest/KNOWN-DIFFERENCES.md")]
    known: PathBuf,
    /// Print at most this many examples of each class of difference (0: all).
    #[arg(long, default_value_t = 0)]
    max_per_class: usize,
    /// Also print differences that follow from an earlier one (after the states diverged).
    #[arg(long)]
    consequential: bool,
    /// Write every difference, as JSON lines, to this file.
    #[arg(long)]
    report: Option<PathBuf>,
}

fn seeds(s: &str) -> Result<Vec<u64>> {
    let parse = |x: &str| {
        x.trim()
            .parse::<u64>()
            .with_context(|| format!("bad seed {x:?}"))
    };
    if let Some((a, b)) = s.split_once("..=") {
        Ok((parse(a)?..=parse(b)?).collect())
    } else if let Some((a, b)) = s.split_once("..") {
        Ok((parse(a)?..parse(b)?).collect())
    } else {
        Ok(vec![parse(s)?])
    }
}

fn known(path: &Path) -> Result<Known> {
    if !path.exists() {
        eprintln!("difftest: no {}, every difference counts", path.display());
        return Ok(Known::default());
    }
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    Ok(Known::parse(&text))
}

/// What a run adds up to.
#[derive(Default)]
struct Tally {
    sequences: usize,
    requests: usize,
    failed: Vec<(u64, String)>,
    differing: usize,
    unknown_sequences: usize,
    consequential: usize,
    classes: BTreeMap<String, (usize, Difference, Option<String>)>,
    printed: BTreeMap<String, usize>,
}

impl Tally {
    fn add(
        &mut self,
        steps: usize,
        result: Result<Vec<Difference>, difftest::Error>,
        seed: u64,
        c: &Common,
        known: &Known,
        report: &mut Option<std::fs::File>,
    ) -> Result<()> {
        self.sequences += 1;
        self.requests += steps;
        let diffs = match result {
            Ok(d) => d,
            Err(e) => {
                println!("seed {seed}: not run to the end: {e}");
                self.failed.push((seed, e.to_string()));
                return Ok(());
            }
        };
        if let Some(f) = report {
            for d in &diffs {
                serde_json::to_writer(&mut *f, d)?;
                f.write_all(b"\n")?;
            }
        }
        let primary: Vec<&Difference> = diffs.iter().filter(|d| !d.consequential).collect();
        self.consequential += diffs.len() - primary.len();
        if !primary.is_empty() {
            self.differing += 1;
        }
        let mut unknown = false;
        for d in &diffs {
            if d.consequential && !c.consequential {
                continue;
            }
            let reason = known.reason(d).map(str::to_string);
            unknown |= reason.is_none() && !d.consequential;
            let class = d.class();
            if !d.consequential {
                let e = self
                    .classes
                    .entry(class.clone())
                    .or_insert((0, d.clone(), reason.clone()));
                e.0 += 1;
            }
            let n = self.printed.entry(class).or_insert(0);
            *n += 1;
            if c.max_per_class == 0 || *n <= c.max_per_class {
                print_difference(d, reason.as_deref());
            }
        }
        if unknown {
            self.unknown_sequences += 1;
        }
        Ok(())
    }

    fn summary(&self, started: Instant) {
        let secs = started.elapsed().as_secs_f64();
        println!();
        println!("== summary");
        println!("sequences run:            {}", self.sequences);
        println!("requests per side:        {}", self.requests);
        println!(
            "time:                     {secs:.1} s ({:.0} requests/s per side)",
            self.requests as f64 / secs.max(0.001)
        );
        println!("sequences not run to end: {}", self.failed.len());
        println!(
            "sequences with differences: {} ({} with unknown ones)",
            self.differing, self.unknown_sequences
        );
        println!(
            "consequential differences (after the states diverged, not classified): {}",
            self.consequential
        );
        let (mut known_n, mut unknown_n) = (0, 0);
        for (n, _, r) in self.classes.values() {
            if r.is_some() {
                known_n += n
            } else {
                unknown_n += n
            }
        }
        println!(
            "differences: {} unknown, {} known, in {} classes",
            unknown_n,
            known_n,
            self.classes.len()
        );
        let mut classes: Vec<_> = self.classes.iter().collect();
        classes.sort_by(|x, y| y.1.0.cmp(&x.1.0).then(x.0.cmp(y.0)));
        for (class, (n, d, reason)) in classes {
            let tag = if reason.is_some() { "known" } else { "UNKNOWN" };
            println!(
                "  {n:6}  {tag:7}  {class}   (e.g. seed {} step {})",
                d.seed, d.step
            );
        }
        for (seed, e) in self.failed.iter().take(20) {
            println!("  not run to end: seed {seed}: {e}");
        }
    }
}

fn print_difference(d: &Difference, known: Option<&str>) {
    let tag = match (known, d.consequential) {
        (_, true) => "consequential".to_string(),
        (Some(r), _) => format!("known: {r}"),
        (None, _) => "UNKNOWN".to_string(),
    };
    println!(
        "seed {} step {} [{}] {} -- {} ({tag})",
        d.seed, d.step, d.label, d.request, d.aspect
    );
    println!("  a: {}", clip(&d.a.to_string()));
    println!("  b: {}", clip(&d.b.to_string()));
}

fn clip(s: &str) -> String {
    const MAX: usize = 1500;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

fn open_report(c: &Common) -> Result<Option<std::fs::File>> {
    c.report
        .as_ref()
        .map(|p| std::fs::File::create(p).with_context(|| p.display().to_string()))
        .transpose()
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let started = Instant::now();
    match cli.cmd {
        Cmd::Compare { a, b, common } => {
            let ta = Target::named(&a).await?;
            let tb = Target::named(&b).await?;
            let known = known(&common.known)?;
            let mut report = open_report(&common)?;
            let mut tally = Tally::default();
            let suffix = common.suffix.clone();
            let mut runs = futures::stream::iter(seeds(&common.seeds)?)
                .map(|seed| {
                    let (ta, tb, suffix) = (&ta, &tb, &suffix);
                    async move {
                        let seq = generate::sequence(seed);
                        let r = difftest::compare_sequence(ta, tb, &seq, suffix).await;
                        (seed, seq.steps.len(), r)
                    }
                })
                .buffer_unordered(common.jobs.max(1));
            while let Some((seed, steps, r)) = runs.next().await {
                tally.add(steps, r, seed, &common, &known, &mut report)?;
                if tally.sequences % 500 == 0 {
                    eprintln!(
                        "difftest: {} sequences, {:.0} s",
                        tally.sequences,
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            tally.summary(started);
            if tally.unknown_sequences > 0 || !tally.failed.is_empty() {
                std::process::exit(1);
            }
        }
        Cmd::Record {
            upstream,
            out,
            common,
        } => {
            let t = Target::named(&upstream).await?;
            let suffix = common.suffix.clone();
            let mut recorded = Vec::new();
            // Each sequence runs twice on upstream; one whose two normalized recordings differ
            // (upstream's own nondeterminism, e.g. a watch from resourceVersion 0 served by a
            // watch cache a write behind) is left out, so that the corpus replays the same way
            // every time.
            let mut unstable = Vec::new();
            let mut runs = futures::stream::iter(seeds(&common.seeds)?)
                .map(|seed| {
                    let (t, suffix) = (&t, &suffix);
                    async move {
                        let first =
                            difftest::record_sequence(t, generate::sequence(seed), suffix).await?;
                        let again = format!("{suffix}again");
                        let second =
                            difftest::record_sequence(t, generate::sequence(seed), &again).await?;
                        Ok::<_, difftest::Error>((first.answers == second.answers, first))
                    }
                })
                .buffer_unordered(common.jobs.max(1));
            while let Some(r) = runs.next().await {
                let (stable, rec) = r?;
                if stable {
                    recorded.push(rec);
                } else {
                    unstable.push(rec.sequence.seed);
                }
            }
            unstable.sort_unstable();
            if !unstable.is_empty() {
                println!("left out, upstream answered differently twice: seeds {unstable:?}");
            }
            corpus::write(&out, &mut recorded)?;
            let steps: usize = recorded.iter().map(|r| r.sequence.steps.len()).sum();
            println!(
                "recorded {} sequences, {steps} requests, in {:.1} s to {}",
                recorded.len(),
                started.elapsed().as_secs_f64(),
                out.join(corpus::FILE).display()
            );
        }
        Cmd::Show { seeds: s } => {
            for seed in seeds(&s)? {
                let seq = generate::sequence(seed);
                println!("# seed {seed}, namespace {}", seq.namespace);
                for (i, step) in seq.steps.iter().enumerate() {
                    let r = &step.request;
                    println!("{i:3} [{}] {}", step.label, r.line());
                    if let Some(b) = &r.body {
                        println!("      {} {b}", r.content_type.as_deref().unwrap_or(""));
                    }
                    if let Some(w) = &r.watch {
                        println!(
                            "      then (sentinel) {} {}",
                            w.sentinel.line(),
                            w.sentinel.body.as_deref().unwrap_or("")
                        );
                    }
                }
            }
        }
        Cmd::Replay {
            corpus: dir,
            against,
            common,
        } => {
            let t = Target::named(&against).await?;
            let known = known(&common.known)?;
            let recorded = corpus::read(&dir)?;
            if recorded.is_empty() {
                bail!("{}: no sequences", dir.display());
            }
            let mut report = open_report(&common)?;
            let mut tally = Tally::default();
            let suffix = common.suffix.clone();
            let mut runs = futures::stream::iter(recorded.iter())
                .map(|rec| {
                    let (t, suffix) = (&t, &suffix);
                    async move {
                        let r = difftest::replay_sequence(t, rec, suffix).await;
                        (rec.sequence.seed, rec.sequence.steps.len(), r)
                    }
                })
                .buffer_unordered(common.jobs.max(1));
            while let Some((seed, steps, r)) = runs.next().await {
                tally.add(steps, r, seed, &common, &known, &mut report)?;
            }
            tally.summary(started);
            if tally.unknown_sequences > 0 || !tally.failed.is_empty() {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}
