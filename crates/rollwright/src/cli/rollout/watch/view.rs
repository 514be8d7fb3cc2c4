//! Lays a [`Screen`] out with ratatui: the header (verdict, what it waits on, pace), the counts
//! per revision, the grid of cells, a sparkline of available pods, the latest events and the
//! keys. Nothing here decides anything; it only draws.

use super::screen::{CellState, Screen};
use crate::cli::rollout::model::EventView;
use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph, Sparkline, Wrap},
};

/// What the view needs besides the screen.
pub struct Extras<'a> {
    /// `pace 1.2 pods/s, ETA 12s`.
    pub pace: &'a str,
    /// Available pods of the current revision, one sample per second.
    pub spark: &'a [u64],
    /// The latest events.
    pub events: &'a [EventView],
    /// The footer: keys, a confirmation question, or what the last action did.
    pub footer: &'a str,
    /// A watch error while the watches retry.
    pub error: Option<&'a str>,
}

/// The glyph of a state (readable in a plain-text capture too).
pub fn glyph(state: CellState) -> &'static str {
    match state {
        CellState::NewReady => "●",
        CellState::NewPending => "◐",
        CellState::OldReady => "○",
        CellState::OldNotReady => "◌",
        CellState::Terminating => "×",
        CellState::Failed => "!",
        CellState::Empty => "·",
    }
}

/// Colours: the current revision green (ready) and yellow (on its way), older revisions in
/// their own colour, terminating grey, failing red.
fn style(state: CellState, revision: Option<i64>, current: Option<i64>) -> Style {
    let old = match current.zip(revision).map(|(c, r)| c - r) {
        Some(1) | None => Color::Blue,
        Some(2) => Color::Magenta,
        _ => Color::Cyan,
    };
    let color = match state {
        CellState::NewReady => Color::Green,
        CellState::NewPending => Color::Yellow,
        CellState::OldReady | CellState::OldNotReady => old,
        CellState::Terminating | CellState::Empty => Color::DarkGray,
        CellState::Failed => Color::Red,
    };
    Style::default().fg(color)
}

fn grid(screen: &Screen, area: Rect) -> (Vec<Line<'static>>, String) {
    let inner_w = usize::from(area.width.saturating_sub(2)).max(1);
    let inner_h = usize::from(area.height.saturating_sub(2)).max(1);
    let n = screen.cells.len();
    // Two columns per cell while they fit, one when there are many.
    let cell_w = if n * 2 <= inner_w * inner_h { 2 } else { 1 };
    let per_row = (inner_w / cell_w).max(1);
    let capacity = per_row * inner_h;
    let shown = n.min(capacity);
    let mut lines = Vec::new();
    for row in screen.cells[..shown].chunks(per_row) {
        // One span per run of equal cells: thousands of cells make a few dozen spans.
        let mut spans: Vec<Span<'static>> = Vec::new();
        let mut run = String::new();
        let mut run_style = None;
        for c in row {
            let s = style(c.state, c.revision, screen.revision);
            if run_style.is_some_and(|r| r != s) {
                spans.push(Span::styled(
                    std::mem::take(&mut run),
                    run_style.unwrap_or_default(),
                ));
            }
            run_style = Some(s);
            run.push_str(glyph(c.state));
            if cell_w == 2 {
                run.push(' ');
            }
        }
        if let Some(s) = run_style {
            spans.push(Span::styled(run, s));
        }
        lines.push(Line::from(spans));
    }
    let title = if shown < n {
        format!(" {} ({n}, showing {shown}) ", screen.cells_of)
    } else {
        format!(" {} ({n}) ", screen.cells_of)
    };
    (lines, title)
}

/// Draws the screen.
pub fn draw(frame: &mut Frame, screen: &Screen, extras: &Extras) {
    let counts_h = u16::try_from(screen.counts.len() + 1).unwrap_or(u16::MAX);
    let [header, counts, cells, spark, events, footer] = Layout::vertical([
        Constraint::Length(6),
        Constraint::Length(counts_h + 2),
        Constraint::Min(4),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let revision = screen
        .revision
        .map_or("new revision".to_string(), |r| format!("revision {r}"));
    let state = if screen.done {
        Span::styled(
            " rolled out ",
            Style::default().fg(Color::Black).bg(Color::Green),
        )
    } else if screen.paused {
        Span::styled(
            " paused ",
            Style::default().fg(Color::Black).bg(Color::Yellow),
        )
    } else {
        Span::styled(
            " rolling out ",
            Style::default().fg(Color::Black).bg(Color::Cyan),
        )
    };
    let mut head = vec![
        Line::from(vec![
            Span::styled(
                format!("{} {revision} ", screen.title),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            state,
            Span::raw(format!("  {}", extras.pace)),
        ]),
        Line::from(screen.verdict.clone()),
    ];
    if !screen.waiting_on.is_empty() {
        head.push(Line::from(Span::styled(
            screen.waiting_on.clone(),
            Style::default().fg(Color::Yellow),
        )));
    }
    for line in screen.rollback.iter().flat_map(|r| r.lines()) {
        head.push(Line::from(Span::styled(
            line.to_string(),
            Style::default().fg(Color::Red),
        )));
    }
    if let Some(e) = extras.error {
        head.push(Line::from(Span::styled(
            format!("watch interrupted, retrying: {e}"),
            Style::default().fg(Color::Red),
        )));
    }
    frame.render_widget(
        Paragraph::new(head).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" rollwright rollout watch "),
        ),
        header,
    );

    let mut lines: Vec<Line> = screen
        .counts
        .iter()
        .map(|c| Line::from(c.clone()))
        .collect();
    let legend: Vec<Span> = screen
        .tally
        .iter()
        .flat_map(|(s, n)| {
            [
                Span::styled(glyph(*s), style(*s, None, None)),
                Span::raw(format!(" {} {n}   ", s.label())),
            ]
        })
        .collect();
    lines.push(Line::from(legend));
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" revisions ")),
        counts,
    );

    let (grid_lines, title) = grid(screen, cells);
    frame.render_widget(
        Paragraph::new(grid_lines).block(Block::default().borders(Borders::ALL).title(title)),
        cells,
    );

    let width = usize::from(spark.width.saturating_sub(2));
    let data = &extras.spark[extras.spark.len().saturating_sub(width)..];
    frame.render_widget(
        Sparkline::default()
            .data(data.iter().copied())
            .max(u64::try_from(screen.progress.target.max(1)).unwrap_or(1))
            .style(Style::default().fg(Color::Green))
            .block(Block::default().borders(Borders::ALL).title(format!(
                " available on {revision}: {}/{} ",
                screen.progress.available, screen.progress.target
            ))),
        spark,
    );

    let rows = usize::from(events.height.saturating_sub(2));
    let event_lines: Vec<Line> = extras.events[extras.events.len().saturating_sub(rows)..]
        .iter()
        .map(|e| {
            let time = e
                .time
                .map(|t| t.strftime("%H:%M:%S").to_string())
                .unwrap_or_default();
            let color = if e.type_ == "Warning" {
                Color::Red
            } else {
                Color::Gray
            };
            Line::from(vec![
                Span::raw(format!("{time} ")),
                Span::styled(format!("{} ", e.reason), Style::default().fg(color)),
                Span::raw(format!("{} {}", e.object, e.message)),
            ])
        })
        .collect();
    frame.render_widget(
        Paragraph::new(event_lines).block(Block::default().borders(Borders::ALL).title(" events ")),
        events,
    );
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(
            extras.footer.to_string(),
            Style::default().add_modifier(Modifier::REVERSED),
        ))),
        footer,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{
        rollout::{
            model::{NodeView, PodView, RevisionView, Snapshot, WorkloadView},
            watch::screen::screen,
        },
        workload::{Kind, WorkloadRef},
    };
    use ratatui::{Terminal, backend::TestBackend};
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn five_thousand_nodes_fit_and_draw() {
        let template = json!({"spec": {"containers": [{"name": "c", "image": "v2"}]}});
        let nodes: Vec<Arc<NodeView>> = (0..5000)
            .map(|i| {
                Arc::new(NodeView {
                    name: format!("node-{i:04}"),
                    ready: true,
                })
            })
            .collect();
        let pods: Vec<Arc<PodView>> = (0..5000)
            .map(|i| {
                Arc::new(PodView {
                    name: format!("agent-{i}"),
                    node: Some(format!("node-{i:04}")),
                    revision_key: Some(if i % 3 == 0 { "b" } else { "a" }.into()),
                    phase: "Running".into(),
                    ready_since: Some("2025-01-01T00:00:00Z".parse().expect("time")),
                    ..Default::default()
                })
            })
            .collect();
        let snap = Snapshot {
            workload: WorkloadView {
                kind: Some(Kind::DaemonSet),
                name: "agent".into(),
                desired: 5000,
                rolling: true,
                template: template.clone(),
                ..Default::default()
            },
            revisions: vec![
                RevisionView {
                    number: 1,
                    key: "a".into(),
                    ..Default::default()
                },
                RevisionView {
                    number: 2,
                    key: "b".into(),
                    template,
                    ..Default::default()
                },
            ],
            pods,
            nodes,
            ..Default::default()
        };
        let w = WorkloadRef {
            kind: Kind::DaemonSet,
            name: "agent".into(),
        };
        let s = screen(&w, &snap, "2025-01-01T00:01:00Z".parse().expect("time"));
        assert_eq!(s.cells.len(), 5000);
        let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
        let extras = Extras {
            pace: "",
            spark: &[1, 2, 3],
            events: &[],
            footer: "q quit",
            error: None,
        };
        term.draw(|f| draw(f, &s, &extras)).expect("draw");
        let text: String = term
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        assert!(text.contains("nodes (5000)"), "every node has its cell");
        assert!(
            text.contains("revision 2 (current): 1667/5000 updated, 1667 ready, 1667 available")
        );
        assert!(text.matches(glyph(CellState::NewReady)).count() >= 1667);
    }
}
