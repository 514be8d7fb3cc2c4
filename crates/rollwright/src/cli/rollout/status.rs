//! `rollwright rollout status KIND/NAME`: follows a rollout until kubectl would call it done,
//! showing per revision how far it is, its pace and ETA, and the pods it waits for. On a terminal
//! a live display (indicatif); otherwise one line per change, for logs and CI.

use super::{
    cache::{Cache, Extras},
    pace::{self, Pace},
    progress::{self, Progress, Verdict},
};
use crate::cli::{kubeconfig::Target, workload::WorkloadRef};
use anyhow::{Context, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::{
    io::IsTerminal,
    time::{Duration, Instant},
};

/// `rollout status` flags.
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The workload: KIND/NAME (deploy/web, ds/agent, sts/db) or KIND NAME.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND/NAME")]
    pub workload: Vec<String>,
    /// Give up after this long, e.g. 5m (0: wait for ever).
    #[arg(long, default_value = "0")]
    pub timeout: String,
    /// Follow the rollout until it ends; `--watch=false` prints where it stands once.
    #[arg(
        short = 'w',
        long,
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub watch: bool,
    /// Line-by-line output even on a terminal.
    #[arg(long)]
    pub plain: bool,
    #[command(flatten)]
    pub target: Target,
}

/// How progress is shown.
trait Display {
    /// The rollout moved (or time passed).
    fn update(&mut self, workload: &WorkloadRef, p: &Progress, pace: &str);
    /// Removes whatever is live on the screen.
    fn clear(&mut self);
}

/// One line per change of state, for pipes and logs.
#[derive(Default)]
struct Plain {
    last: String,
}

impl Display for Plain {
    fn update(&mut self, workload: &WorkloadRef, p: &Progress, pace: &str) {
        let line = format!(
            "{} {:?} {}",
            workload.kind.spoken(),
            workload.name,
            progress::summary(p)
        );
        if line != self.last {
            if pace.is_empty() {
                println!("{line}");
            } else {
                println!("{line} ({pace})");
            }
            self.last = line;
        }
    }

    fn clear(&mut self) {}
}

/// A progress bar of available pods on the new revision, and lines for older revisions and
/// what the rollout waits on.
struct Live {
    _multi: MultiProgress,
    bar: ProgressBar,
    detail: ProgressBar,
}

impl Live {
    fn new() -> Live {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let bar = multi.add(ProgressBar::new(1));
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner:.cyan} {prefix:.bold} [{bar:32.green/white}] {pos}/{len} available  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("█▓░"),
        );
        let detail = multi.add(ProgressBar::new_spinner());
        detail.set_style(
            ProgressStyle::with_template("  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Live {
            _multi: multi,
            bar,
            detail,
        }
    }
}

impl Display for Live {
    fn update(&mut self, workload: &WorkloadRef, p: &Progress, pace: &str) {
        let revision = p
            .revision
            .map_or("new revision".into(), |r| format!("revision {r}"));
        self.bar
            .set_prefix(format!("{} {revision}", workload.short()));
        self.bar
            .set_length(u64::try_from(p.target.max(1)).unwrap_or(1));
        self.bar
            .set_position(u64::try_from(p.available.max(0)).unwrap_or(0));
        self.bar.set_message(format!(
            "{} updated · {} ready{}",
            p.updated,
            p.ready,
            if pace.is_empty() {
                String::new()
            } else {
                format!(" · {pace}")
            }
        ));
        let mut lines: Vec<String> = p
            .revisions
            .iter()
            .filter(|c| !c.current)
            .map(|c| {
                let name = c
                    .number
                    .map_or("unknown revision".into(), |n| format!("revision {n}"));
                format!(
                    "{name}: {} pods ({} available, {} terminating)",
                    c.pods, c.available, c.terminating
                )
            })
            .collect();
        if !p.waiting_on.is_empty() {
            lines.push(p.waiting_on.clone());
        }
        self.detail.set_message(lines.join("\n  "));
    }

    fn clear(&mut self) {
        self.bar.finish_and_clear();
        self.detail.finish_and_clear();
    }
}

/// Runs `rollout status`.
pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let workload = WorkloadRef::parse(&args.workload)?;
    let timeout = nodesim::distribution::parse_duration(&args.timeout)
        .map_err(|e| anyhow::anyhow!("--timeout: {e}"))?;
    let session = args.target.connect().await?;
    let deadline = (!timeout.is_zero()).then(|| tokio::time::Instant::now() + timeout);
    let timed_out = |what: &str| {
        anyhow::anyhow!(
            "timed out after {} waiting for {workload} to roll out: {what} (wait longer with --timeout)",
            pace::format_duration(timeout)
        )
    };
    let mut cache =
        Cache::start(&session, &workload, &session.namespace, Extras::default()).await?;
    match deadline {
        Some(at) => tokio::time::timeout_at(at, cache.wait_synced())
            .await
            .map_err(|_| timed_out("the first list of its objects"))??,
        None => cache.wait_synced().await?,
    }
    let mut display: Box<dyn Display> =
        if args.watch && !args.plain && std::io::stdout().is_terminal() {
            Box::new(Live::new())
        } else {
            Box::new(Plain::default())
        };
    let started = Instant::now();
    let mut pace = Pace::default();
    let mut paced_revision = None;
    // Redraws between changes only advance the clock (ages, minReadySeconds, the ETA): the
    // state comes from the watches.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let snapshot = cache
            .snapshot()
            .with_context(|| format!("{workload} was deleted during the rollout"))?;
        let p = progress::assess(&snapshot, clock::now());
        let elapsed = started.elapsed();
        // The pace is of the current revision's pods: a new revision starts it over.
        if p.revision != paced_revision {
            pace = Pace::default();
            paced_revision = p.revision;
        }
        pace.observe(elapsed, p.available);
        let pace_text = pace::describe(&pace, elapsed, p.target - p.available);
        match &p.verdict {
            Verdict::Done(message) => {
                display.clear();
                println!("{message}");
                if let Some(b) = &snapshot.workload.rollback {
                    println!("{}", b.describe());
                }
                return Ok(());
            }
            Verdict::Failed(message) => {
                display.update(&workload, &p, "");
                display.clear();
                bail!("{message}: {}", p.waiting_on);
            }
            Verdict::Unsupported(message) => {
                display.clear();
                bail!("{message} ({workload} uses OnDelete; its pods change only when deleted)");
            }
            // A single look has no pace to tell.
            Verdict::Waiting(_) if !args.watch => display.update(&workload, &p, ""),
            Verdict::Waiting(_) => display.update(&workload, &p, &pace_text),
        }
        if !args.watch {
            display.clear();
            return Ok(());
        }
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = cache.changed() => r?,
            _ = tick.tick() => {}
            () = sleep => {
                display.clear();
                return Err(timed_out(&p.waiting_on));
            }
        }
    }
}
