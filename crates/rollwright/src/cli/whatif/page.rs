//! The report as one self-contained HTML page (`--report out.html`): the verdict, the workload
//! table, the stall reasons, and per changed workload its available and updated pods over time
//! as an inline SVG chart, one line per run, and its pods per revision (old and new) over the
//! first run. No script, no stylesheet or font to fetch: the page
//! renders the same offline.

use super::{measure::Followed, report::Report};
use std::fmt::Write;

/// Escapes text for HTML (five characters; a crate for this would be more code to read).
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 200.0;
const PAD: f64 = 36.0;

/// A chart's frame: axes, the desired count dotted, and the scales `x` (seconds) and `y` (pods)
/// that put a point in it.
struct Plot {
    svg: String,
    end: f64,
    top: i32,
}

impl Plot {
    fn new(label: &str, end: f64, top: i32, desired: i32) -> Self {
        let mut plot = Plot {
            svg: format!(
                r##"<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{}">"##,
                esc(label)
            ),
            end: end.max(1.0),
            top: top.max(desired).max(1),
        };
        let _ = write!(
            plot.svg,
            r##"<line x1="{PAD}" y1="{0}" x2="{1}" y2="{0}" stroke="#999"/><line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{0}" stroke="#999"/>"##,
            HEIGHT - PAD,
            WIDTH - PAD
        );
        let _ = write!(
            plot.svg,
            r##"<line x1="{PAD}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#4a4" stroke-dasharray="2 4"/><text x="4" y="{2:.1}" font-size="11">{desired}</text><text x="4" y="{3}" font-size="11">0</text><text x="{4}" y="{5}" font-size="11" text-anchor="end">{6:.1} s</text>"##,
            plot.y(desired),
            WIDTH - PAD,
            plot.y(desired) + 4.0,
            HEIGHT - PAD + 4.0,
            WIDTH - PAD,
            HEIGHT - PAD + 16.0,
            plot.end
        );
        plot
    }

    fn x(&self, t: f64) -> f64 {
        PAD + t / self.end * (WIDTH - 2.0 * PAD)
    }

    fn y(&self, n: i32) -> f64 {
        HEIGHT - PAD - f64::from(n) / f64::from(self.top) * (HEIGHT - 2.0 * PAD)
    }

    /// A step line through `(seconds, count)`: each count holds until the next, the last until
    /// the end.
    fn steps(&mut self, points: impl Iterator<Item = (f64, i32)>, colour: &str, dash: &str) {
        let mut line = String::new();
        let mut last: Option<i32> = None;
        for (t, n) in points {
            if let Some(prev) = last {
                let _ = write!(line, "{:.1},{:.1} ", self.x(t), self.y(prev));
            }
            let _ = write!(line, "{:.1},{:.1} ", self.x(t), self.y(n));
            last = Some(n);
        }
        if let Some(prev) = last {
            let _ = write!(line, "{:.1},{:.1}", self.x(self.end), self.y(prev));
        }
        let _ = write!(
            self.svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{line}"/>"#
        );
    }

    fn done(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

const COLOURS: [&str; 5] = ["#1f77b4", "#d62728", "#9467bd", "#ff7f0e", "#8c564b"];
const DASHED: &str = r#" stroke-dasharray="6 3""#;

/// The workload as each run followed it.
fn followed<'a>(report: &'a Report, workload: &'a str) -> impl Iterator<Item = &'a Followed> {
    report
        .runs
        .iter()
        .flat_map(|r| &r.outcome.workloads)
        .filter(move |f| f.workload == workload)
}

/// One workload's chart: available (solid) and updated (dashed) pods per run over time.
fn chart(report: &Report, workload: &str, desired: i32) -> String {
    let series: Vec<&Vec<(f64, i32, i32)>> =
        followed(report, workload).map(|f| &f.timeline).collect();
    let end = series
        .iter()
        .filter_map(|t| t.last().map(|p| p.0))
        .fold(1.0_f64, f64::max);
    let top = series
        .iter()
        .flat_map(|t| t.iter().map(|p| p.1.max(p.2)))
        .fold(desired, i32::max);
    let mut plot = Plot::new(workload, end, top, desired);
    for (i, timeline) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        plot.steps(timeline.iter().map(|p| (p.0, p.1)), colour, "");
        plot.steps(timeline.iter().map(|p| (p.0, p.2)), colour, DASHED);
    }
    plot.done()
}

/// Revisions in order: by number where they have one.
fn revision_order(a: &String, b: &String) -> std::cmp::Ordering {
    match (a.parse::<i64>(), b.parse::<i64>()) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// One workload's pods per revision over the first run: Ready (solid) and all (dashed), a
/// colour per revision, and the legend that says which.
fn revision_chart(report: &Report, workload: &str, desired: i32) -> String {
    let Some(f) = followed(report, workload).next() else {
        return String::new();
    };
    let mut revisions: Vec<&String> = f.revisions.iter().flat_map(|r| r.pods.keys()).collect();
    revisions.sort_by(|a, b| revision_order(a, b));
    revisions.dedup();
    if revisions.is_empty() {
        return String::new();
    }
    let end = f
        .revisions
        .last()
        .map_or(1.0, |r| r.at)
        .max(f.timeline.last().map_or(1.0, |p| p.0));
    let top = f
        .revisions
        .iter()
        .flat_map(|r| r.pods.values().map(|c| c.0))
        .fold(desired, i32::max);
    let mut plot = Plot::new(&format!("{workload} per revision"), end, top, desired);
    let mut legend = String::from("<p class=\"legend\">");
    for (i, revision) in revisions.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let count = |pick: fn(&(i32, i32)) -> i32| {
            f.revisions
                .iter()
                .map(move |r| (r.at, r.pods.get(*revision).map_or(0, pick)))
        };
        plot.steps(count(|c| c.1), colour, "");
        plot.steps(count(|c| c.0), colour, DASHED);
        let _ = write!(
            legend,
            "<span style=\"color:{colour}\">&#9632;</span> revision {} ",
            esc(revision)
        );
    }
    legend.push_str("</p>");
    plot.done() + &legend
}

/// The nodes of the first run at up to six moments, a square per node: what it runs of the
/// changed workloads.
fn node_grids(report: &Report) -> String {
    let Some(run) = report.runs.first() else {
        return String::new();
    };
    let frames = &run.outcome.nodes;
    let n = frames.nodes.len();
    if n == 0 || frames.frames.is_empty() {
        return String::new();
    }
    let cols = ((n as f64 * 1.6).sqrt().ceil() as usize).max(1);
    let rows = n.div_ceil(cols);
    let cell = (240.0 / cols as f64).clamp(2.0, 12.0);
    let (w, h) = (cols as f64 * cell, rows as f64 * cell);
    let mut out = String::from(
        "<h2>The nodes as the rollout moves</h2><p>A square per node (run 1): \
         <span style=\"color:#8aa\">&#9632;</span> pods from before the change, \
         <span style=\"color:#2a2\">&#9632;</span> new pods, \
         <span style=\"color:#e90\">&#9632;</span> both, \
         <span style=\"color:#ddd\">&#9632;</span> none of the changed workloads'.</p><div class=\"grids\">",
    );
    for frame in frames.spread(6) {
        let _ = write!(
            out,
            r#"<figure><svg viewBox="0 0 {w} {h}" width="{w}" height="{h}">"#
        );
        for (i, c) in frame.cells.chars().enumerate() {
            let colour = match super::frames::Cell::of(c) {
                super::frames::Cell::Empty => "#ddd",
                super::frames::Cell::Old => "#8aa",
                super::frames::Cell::New => "#2a2",
                super::frames::Cell::Both => "#e90",
            };
            let (x, y) = ((i % cols) as f64 * cell, (i / cols) as f64 * cell);
            let side = (cell - 1.0).max(1.0);
            let _ = write!(
                out,
                r#"<rect x="{x}" y="{y}" width="{side}" height="{side}" fill="{colour}"/>"#
            );
        }
        let _ = write!(
            out,
            "</svg><figcaption>{:.1} s</figcaption></figure>",
            frame.at
        );
    }
    out.push_str("</div>");
    out
}

/// The page.
pub fn html(report: &Report) -> String {
    let mut body = String::new();
    let verdict = if report.finished {
        format!(
            "Predicted duration: {:.1} s (median of {} runs; {:.1}-{:.1} s)",
            report.predicted_seconds,
            report.runs.len(),
            report.spread_seconds.0,
            report.spread_seconds.1
        )
    } else {
        format!(
            "Stalls: nothing moves after {:.1} s",
            report.predicted_seconds
        )
    };
    let _ = write!(
        body,
        "<h1>rollwright whatif</h1><p class=\"verdict\">{}</p><p>Snapshot <code>{}</code>; changes: {}; API requests per run (median): {}.</p>",
        esc(&verdict),
        esc(&report.snapshot),
        report
            .changes
            .iter()
            .map(|c| format!("<code>{}</code>", esc(c)))
            .collect::<Vec<_>>()
            .join(", "),
        report.api_requests
    );
    // What the control plane was assumed to be: as much a part of the prediction as the pods'
    // timing.
    let _ = write!(
        body,
        "<p>Control plane (<code>--control-plane {}</code>):</p><ul>",
        esc(&report.control_plane.mode)
    );
    for c in &report.control_plane.components {
        let _ = write!(body, "<li>{}: {}</li>", esc(c.component), esc(&c.summary));
    }
    body.push_str("</ul>");
    body.push_str("<table><tr><th>Workload</th><th>Desired</th><th>Lowest available</th><th>Max unavailable</th><th>PDB min</th><th>Done after</th></tr>");
    let dash = || "-".to_string();
    for w in &report.workloads {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.workload),
            w.desired,
            w.lowest_available,
            w.max_unavailable.map_or_else(dash, |m| m.to_string()),
            w.budget_min_available.map_or_else(dash, |m| m.to_string()),
            w.median_seconds
                .map_or_else(|| "never".to_string(), |s| format!("{s:.1} s")),
        );
    }
    body.push_str("</table>");
    if !report.stalls.is_empty() {
        body.push_str("<h2>Why it stalls</h2><ul>");
        for s in &report.stalls {
            let pods = match s.pods {
                0 => String::new(),
                1 => " (1 pod)".to_string(),
                n => format!(" ({n} pods)"),
            };
            let _ = write!(
                body,
                "<li><b>{}</b>: {}{pods}: {}</li>",
                esc(&s.workload),
                esc(&s.reason),
                esc(&s.message)
            );
        }
        body.push_str("</ul>");
    }
    body.push_str("<h2>Pods over time</h2><p>Per workload: available (solid) and updated (dashed) pods from the change on, one colour per run; then, for run 1, each revision's Ready (solid) and all (dashed) pods. The dotted line is the desired count.</p>");
    for w in &report.workloads {
        let _ = write!(
            body,
            "<h3>{}</h3>{}{}",
            esc(&w.workload),
            chart(report, &w.workload, w.desired),
            revision_chart(report, &w.workload, w.desired)
        );
    }
    body.push_str(&node_grids(report));
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>rollwright whatif</title><style>body{{font-family:sans-serif;margin:2em;max-width:60em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:right}}td:first-child,th:first-child{{text-align:left}}.verdict{{font-size:1.3em;font-weight:bold}}.grids{{display:flex;flex-wrap:wrap;gap:1em}}figure{{margin:0}}figcaption{{text-align:center;font-size:.9em}}</style></head><body>{body}</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::whatif::{
        measure::{Followed, Outcome, RevisionCounts, Stall},
        report::Run,
    };
    use std::collections::BTreeMap;

    #[test]
    fn the_page_stands_alone_and_charts_each_workload() {
        let run = Run {
            seed: 1,
            api_requests: 10,
            pace: Default::default(),
            outcome: Outcome {
                seconds: 4.0,
                finished: false,
                workloads: vec![Followed {
                    workload: "deployment/shop/<web>".into(),
                    desired: 4,
                    lowest_available: 3,
                    max_unavailable: Some(1),
                    budget_min_available: None,
                    done_after_seconds: None,
                    timeline: vec![(0.0, 4, 0), (1.0, 3, 1), (4.0, 4, 2)],
                    revisions: vec![
                        RevisionCounts {
                            at: 0.0,
                            pods: BTreeMap::from([("1".into(), (4, 4))]),
                        },
                        RevisionCounts {
                            at: 1.0,
                            pods: BTreeMap::from([("1".into(), (3, 3)), ("2".into(), (1, 0))]),
                        },
                        RevisionCounts {
                            at: 4.0,
                            pods: BTreeMap::from([("1".into(), (2, 2)), ("2".into(), (2, 2))]),
                        },
                    ],
                    waits: vec![],
                }],
                nodes: {
                    let mut f =
                        crate::cli::whatif::frames::Frames::new(vec!["n1".into(), "n2".into()]);
                    let old = std::collections::HashSet::from(["a".to_string()]);
                    f.record(0.0, [("n1", "a")].into_iter(), &old);
                    f.record(4.0, [("n1", "a"), ("n2", "b")].into_iter(), &old);
                    f
                },
                stalls: vec![Stall {
                    workload: "deployment/shop/<web>".into(),
                    reason: "ImagePullBackOff".into(),
                    message: "Back-off pulling image \"x\"".into(),
                    pods: 2,
                }],
            },
        };
        let report = Report::of(
            "s.json".into(),
            vec!["drain n".into()],
            &[],
            crate::cli::whatif::pace::Rates::resolve(
                Some(&crate::cli::whatif::pace::Choice::KubeDefaults),
                None,
            ),
            vec![run],
        );
        let page = html(&report);
        assert!(page.starts_with("<!doctype html>"));
        // Nothing to fetch: no script, no link, no external reference.
        for banned in [
            "<script", "<link", "src=", "href=", "http://", "https://", "url(",
        ] {
            assert!(!page.contains(banned), "{banned} in the page");
        }
        assert!(page.contains("deployment/shop/&lt;web&gt;"), "escaped");
        assert!(page.contains("Stalls: nothing moves after 4.0 s"));
        assert!(
            page.contains(
                "<li>controllers: pods created at most 20/s (burst 30), \
                 kube-controller-manager&#39;s default (--control-plane kube-defaults)</li>"
            ),
            "{page}"
        );
        assert!(page.contains("Back-off pulling image &quot;x&quot;"));
        // Two charts for the workload, a grid for each of the two moments.
        assert_eq!(page.matches("<svg").count(), 4);
        assert_eq!(page.matches("<rect").count(), 4);
        assert!(page.contains(r##"fill="#2a2""##), "the new pod's node");
        // Available and updated, then Ready and all of each of the two revisions: a step line
        // each.
        assert_eq!(page.matches("<polyline").count(), 2 + 2 * 2);
        assert!(page.contains("revision 1 ") && page.contains("revision 2 "));
    }
}
