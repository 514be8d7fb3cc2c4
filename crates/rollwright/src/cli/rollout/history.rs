//! `rollwright rollout history KIND/NAME [--revision N] [--diff A B]`: the revisions with their
//! change cause, age and the pods still on each; one revision's pod template; or a unified diff
//! of two revisions' pod templates (which kubectl cannot show). An automatic rollback
//! ([`controllers::autorollback`]) marks the revision it left `(rolled back)` and is told under
//! the table ([`super::rollback::Rollback`]), as `rollout status` and `rollout watch` tell it too.

use super::{
    model::{RevisionView, Snapshot},
    revisions,
};
use crate::cli::{
    kubeconfig::Target,
    output::{self, age},
    workload::WorkloadRef,
};
use anyhow::bail;
use jiff::Timestamp;

/// `rollout history` flags.
#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// The workload: KIND/NAME or KIND NAME.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND/NAME")]
    pub workload: Vec<String>,
    /// Show the pod template of this revision.
    #[arg(long, conflicts_with = "diff")]
    pub revision: Option<i64>,
    /// Show a unified diff of the pod templates of two revisions.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub diff: Option<Vec<i64>>,
    #[command(flatten)]
    pub target: Target,
}

/// The history table: one row per revision, oldest first.
pub fn table(snap: &Snapshot, now: Timestamp) -> String {
    let mut rows = vec![vec![
        "REVISION".to_string(),
        "PODS".into(),
        "AGE".into(),
        "CHANGE-CAUSE".into(),
    ]];
    let current = snap.current_revision().map(|r| r.number);
    for r in &snap.revisions {
        let pods = snap
            .pods
            .iter()
            .filter(|p| !p.terminating && p.revision_key.as_deref() == Some(r.key.as_str()))
            .count();
        let mut number = if Some(r.number) == current {
            format!("{} (current)", r.number)
        } else {
            r.number.to_string()
        };
        if snap
            .workload
            .rollback
            .as_ref()
            .is_some_and(|b| b.from == r.key || r.key.ends_with(&format!("-{}", b.from)))
        {
            number.push_str(" (rolled back)");
        }
        rows.push(vec![
            number,
            pods.to_string(),
            age(r.created, now),
            r.change_cause.clone().unwrap_or_else(|| "<none>".into()),
        ]);
    }
    output::table(&rows)
}

/// The revision numbered `n`.
pub fn find(snap: &Snapshot, n: i64) -> anyhow::Result<&RevisionView> {
    match snap.revisions.iter().find(|r| r.number == n) {
        Some(r) => Ok(r),
        None => {
            let known: Vec<String> = snap
                .revisions
                .iter()
                .map(|r| r.number.to_string())
                .collect();
            bail!(
                "unable to find specified revision {n} in history (revisions: {})",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            )
        }
    }
}

/// A revision's pod template as YAML, keys sorted so two revisions compare line by line.
fn template_yaml(r: &RevisionView) -> anyhow::Result<String> {
    output::yaml(&output::sorted(&r.template))
}

/// One revision: its change cause and pod template.
pub fn show(workload: &WorkloadRef, r: &RevisionView) -> anyhow::Result<String> {
    let mut out = format!("{workload} with revision #{}\n", r.number);
    out.push_str(&format!(
        "Change cause: {}\n",
        r.change_cause.as_deref().unwrap_or("<none>")
    ));
    out.push_str("Pod Template:\n");
    for line in template_yaml(r)?.lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// A unified diff from revision `a`'s pod template to revision `b`'s.
pub fn diff(a: &RevisionView, b: &RevisionView) -> anyhow::Result<String> {
    let (old, new) = (template_yaml(a)?, template_yaml(b)?);
    if old == new {
        return Ok(format!(
            "revisions {} and {} have the same pod template\n",
            a.number, b.number
        ));
    }
    let header = |r: &RevisionView| {
        format!(
            "revision {} ({})",
            r.number,
            r.change_cause.as_deref().unwrap_or("no change cause")
        )
    };
    Ok(similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&header(a), &header(b))
        .to_string())
}

/// Runs `rollout history`.
pub async fn run(args: HistoryArgs) -> anyhow::Result<()> {
    let workload = WorkloadRef::parse(&args.workload)?;
    let session = args.target.connect().await?;
    let loaded = revisions::load(&session, &workload, true).await?;
    let snap = &loaded.snapshot;
    if let Some(pair) = &args.diff {
        let [a, b] = pair.as_slice() else {
            bail!("--diff takes two revisions, e.g. --diff 1 2");
        };
        print!("{}", diff(find(snap, *a)?, find(snap, *b)?)?);
        return Ok(());
    }
    if let Some(n) = args.revision {
        print!("{}", show(&workload, find(snap, n)?)?);
        return Ok(());
    }
    if snap.revisions.is_empty() {
        println!("{workload}: no revisions yet");
        return Ok(());
    }
    println!("{workload}");
    print!("{}", table(snap, clock::now()));
    if let Some(b) = &snap.workload.rollback {
        println!("\n{}", b.describe());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{
        rollout::{
            model::{PodView, WorkloadView},
            rollback::Rollback,
        },
        workload::Kind,
    };
    use serde_json::json;
    use std::sync::Arc;

    fn revision(n: i64, image: &str, cause: Option<&str>) -> RevisionView {
        RevisionView {
            number: n,
            name: format!("web-{n}"),
            key: format!("h{n}"),
            change_cause: cause.map(str::to_string),
            created: Some("2025-01-01T00:00:00Z".parse().expect("time")),
            template: json!({"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]}}),
            ..Default::default()
        }
    }

    fn snapshot() -> Snapshot {
        let pod = |name: &str, key: &str, terminating: bool| {
            Arc::new(PodView {
                name: name.into(),
                revision_key: Some(key.into()),
                terminating,
                ..Default::default()
            })
        };
        Snapshot {
            workload: WorkloadView {
                kind: Some(Kind::Deployment),
                template: revision(2, "nginx:1.28", None).template,
                ..Default::default()
            },
            revisions: vec![
                revision(1, "nginx:1.27", None),
                revision(
                    2,
                    "nginx:1.28",
                    Some("set image web=nginx:1.28 by rollwright"),
                ),
            ],
            pods: vec![
                pod("a", "h1", false),
                pod("b", "h2", false),
                pod("c", "h2", false),
                pod("d", "h1", true),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn the_table_has_causes_ages_and_pods() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().expect("time");
        assert_eq!(
            table(&snapshot(), now),
            "REVISION      PODS   AGE   CHANGE-CAUSE\n\
             1             1      5m    <none>\n\
             2 (current)   2      5m    set image web=nginx:1.28 by rollwright\n"
        );
    }

    #[test]
    fn an_automatic_rollback_is_marked() {
        let mut snap = snapshot();
        snap.workload.rollback = Some(Rollback {
            from: "h2".into(),
            ..Default::default()
        });
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().expect("time");
        assert_eq!(
            table(&snap, now),
            "REVISION                    PODS   AGE   CHANGE-CAUSE\n\
             1                           1      5m    <none>\n\
             2 (current) (rolled back)   2      5m    set image web=nginx:1.28 by rollwright\n"
        );
    }

    #[test]
    fn a_diff_of_two_templates() {
        let snap = snapshot();
        let d = diff(find(&snap, 1).expect("1"), find(&snap, 2).expect("2")).expect("diff");
        assert!(d.starts_with("--- revision 1 (no change cause)\n+++ revision 2 (set image web=nginx:1.28 by rollwright)\n@@"), "{d}");
        let changed: Vec<&str> = d
            .lines()
            .filter(|l| {
                (l.starts_with('-') || l.starts_with('+'))
                    && !l.starts_with("---")
                    && !l.starts_with("+++")
            })
            .collect();
        assert_eq!(changed.len(), 2, "{d}");
        assert!(
            changed[0].starts_with('-') && changed[0].ends_with("image: nginx:1.27"),
            "{d}"
        );
        assert!(
            changed[1].starts_with('+') && changed[1].ends_with("image: nginx:1.28"),
            "{d}"
        );
        let same = diff(find(&snap, 2).expect("2"), find(&snap, 2).expect("2")).expect("diff");
        assert_eq!(same, "revisions 2 and 2 have the same pod template\n");
        let err = find(&snap, 9).unwrap_err().to_string();
        assert_eq!(
            err,
            "unable to find specified revision 9 in history (revisions: 1, 2)"
        );
    }
}
