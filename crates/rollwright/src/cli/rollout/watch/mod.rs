//! `rollwright rollout watch KIND/NAME`: a full-screen view of a rollout across the cluster,
//! redrawn from the watch-fed cache (never a list per frame, at most ten frames a second,
//! only when something changed or a second passed), with keys to pause, resume and undo
//! after a confirmation.

pub mod screen;
pub mod view;

use super::{
    cache::{Cache, Extras},
    pace::{self, Pace},
    pause, undo,
};
use crate::cli::{
    kubeconfig::{Session, Target},
    workload::WorkloadRef,
};
use anyhow::{Context, bail};
use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use futures::StreamExt;
use std::{
    collections::VecDeque,
    io::IsTerminal,
    time::{Duration, Instant},
};

/// `rollout watch` flags.
#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// The workload: KIND/NAME or KIND NAME.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND/NAME")]
    pub workload: Vec<String>,
    #[command(flatten)]
    pub target: Target,
}

/// An action a key asks for, once confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Pause the rollout.
    Pause,
    /// Resume it.
    Resume,
    /// Roll back to the previous revision.
    Undo,
}

impl Action {
    fn question(self, workload: &WorkloadRef) -> String {
        let what = match self {
            Action::Pause => "Pause the rollout of",
            Action::Resume => "Resume the rollout of",
            Action::Undo => "Roll back to the previous revision:",
        };
        format!(" {what} {}? y / n ", workload.short())
    }
}

/// What a key does.
#[derive(Debug, PartialEq, Eq)]
pub enum Key {
    /// Leave.
    Quit,
    /// Ask to confirm an action.
    Ask(Action),
    /// Confirmed.
    Confirm(Action),
    /// Declined, or nothing.
    Cancel,
    /// Not a key of ours.
    Ignore,
}

/// The meaning of `key` while `asking` (a confirmation is open) or not.
pub fn interpret(key: &KeyEvent, asking: Option<Action>) -> Key {
    if key.kind != KeyEventKind::Press {
        return Key::Ignore;
    }
    let ctrl_c = key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
    if ctrl_c {
        return Key::Quit;
    }
    match (asking, key.code) {
        (Some(a), KeyCode::Char('y' | 'Y')) => Key::Confirm(a),
        (Some(_), _) => Key::Cancel,
        (None, KeyCode::Char('q') | KeyCode::Esc) => Key::Quit,
        (None, KeyCode::Char('p')) => Key::Ask(Action::Pause),
        (None, KeyCode::Char('r')) => Key::Ask(Action::Resume),
        (None, KeyCode::Char('u')) => Key::Ask(Action::Undo),
        _ => Key::Ignore,
    }
}

const KEYS: &str = " p pause · r resume · u undo · q quit ";

async fn perform(session: &Session, workload: &WorkloadRef, action: Action) -> String {
    let result = match action {
        Action::Pause => pause::set(session, workload, true).await,
        Action::Resume => pause::set(session, workload, false).await,
        Action::Undo => undo::undo(session, workload, 0).await,
    };
    match result {
        Ok(done) => format!(" {done} ·{KEYS}"),
        Err(e) => format!(" error: {e} ·{KEYS}"),
    }
}

/// Runs `rollout watch`.
pub async fn run(args: WatchArgs) -> anyhow::Result<()> {
    let workload = WorkloadRef::parse(&args.workload)?;
    if !std::io::stdout().is_terminal() {
        bail!(
            "rollout watch draws on a terminal; in scripts use `rollwright rollout status {}`",
            workload.short()
        );
    }
    let session = args.target.connect().await?;
    let extras = Extras {
        nodes: workload.kind == crate::cli::workload::Kind::DaemonSet,
        events: true,
    };
    let mut cache = Cache::start(&session, &workload, &session.namespace, extras).await?;
    cache.wait_synced().await?;
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let result = event_loop(&mut terminal, &session, &workload, &mut cache).await;
    ratatui::restore();
    result
}

async fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    session: &Session,
    workload: &WorkloadRef,
    cache: &mut Cache,
) -> anyhow::Result<()> {
    const SPARK_KEPT: usize = 600;
    let started = Instant::now();
    let mut pace = Pace::default();
    let mut spark: VecDeque<u64> = VecDeque::new();
    // The pace and the sparkline are of the current revision: a new one starts them over.
    let mut revision = None;
    let mut footer = KEYS.to_string();
    let mut asking: Option<Action> = None;
    let mut keys = EventStream::new();
    let mut frame = tokio::time::interval(Duration::from_millis(100));
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut second = tokio::time::interval(Duration::from_secs(1));
    second.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    loop {
        tokio::select! {
            r = cache.changed() => { r?; dirty = true; }
            _ = second.tick() => {
                if let Some(snap) = cache.snapshot() {
                    let p = super::progress::assess(&snap, clock::now());
                    if p.revision != revision {
                        revision = p.revision;
                        spark.clear();
                        pace = Pace::default();
                    }
                    spark.push_back(u64::try_from(p.available.max(0)).unwrap_or(0));
                    if spark.len() > SPARK_KEPT {
                        spark.pop_front();
                    }
                }
                dirty = true;
            }
            _ = frame.tick() => {
                if !dirty {
                    continue;
                }
                dirty = false;
                let Some(snap) = cache.snapshot() else {
                    bail!("{workload} was deleted");
                };
                let s = screen::screen(workload, &snap, clock::now());
                let elapsed = started.elapsed();
                pace.observe(elapsed, s.progress.available);
                let pace_text = pace::describe(&pace, elapsed, s.progress.target - s.progress.available);
                let spark_data: Vec<u64> = spark.iter().copied().collect();
                let error = cache.error();
                let shown = asking.map_or_else(|| footer.clone(), |a| a.question(workload));
                let extras = view::Extras {
                    pace: &pace_text,
                    spark: &spark_data,
                    events: &snap.events,
                    footer: &shown,
                    error: error.as_deref(),
                };
                terminal.draw(|f| view::draw(f, &s, &extras)).context("drawing")?;
            }
            event = keys.next() => {
                let Some(event) = event else { return Ok(()) };
                match event.context("reading the keyboard")? {
                    Event::Key(key) => match interpret(&key, asking) {
                        Key::Quit => return Ok(()),
                        Key::Ask(a) => asking = Some(a),
                        Key::Confirm(a) => {
                            asking = None;
                            footer = perform(session, workload, a).await;
                        }
                        Key::Cancel => asking = None,
                        Key::Ignore => {}
                    },
                    Event::Resize(..) => {}
                    _ => continue,
                }
                dirty = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn keys_ask_before_they_act() {
        assert_eq!(
            interpret(&press(KeyCode::Char('p')), None),
            Key::Ask(Action::Pause)
        );
        assert_eq!(
            interpret(&press(KeyCode::Char('u')), None),
            Key::Ask(Action::Undo)
        );
        assert_eq!(
            interpret(&press(KeyCode::Char('y')), Some(Action::Undo)),
            Key::Confirm(Action::Undo)
        );
        assert_eq!(
            interpret(&press(KeyCode::Char('n')), Some(Action::Pause)),
            Key::Cancel
        );
        assert_eq!(
            interpret(&press(KeyCode::Char('q')), Some(Action::Pause)),
            Key::Cancel
        );
        assert_eq!(interpret(&press(KeyCode::Char('q')), None), Key::Quit);
        assert_eq!(interpret(&press(KeyCode::Char('y')), None), Key::Ignore);
        assert_eq!(
            interpret(
                &KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
                Some(Action::Undo)
            ),
            Key::Quit
        );
    }
}
