//! `rollwright rollout undo KIND/NAME [--to-revision N]`, with kubectl's semantics: the
//! previous revision by default (the second highest number), a skipped rollback when the
//! template already matches, a Deployment gets the revision's template and annotations, a
//! DaemonSet or StatefulSet gets the revision's recorded patch. The change cause says which
//! revision came back.

use super::{
    history::find,
    model::{RevisionView, Snapshot, strip_template_hash},
    revisions::{self, workload_api},
};
use crate::cli::{
    change_cause::{cause, with_cause},
    failure::Explain,
    kubeconfig::{Session, Target},
    workload::{Kind, WorkloadRef},
};
use anyhow::bail;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};

/// `rollout undo` flags.
#[derive(clap::Args, Debug)]
pub struct UndoArgs {
    /// The workload: KIND/NAME or KIND NAME.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND/NAME")]
    pub workload: Vec<String>,
    /// The revision to go back to (0: the previous one).
    #[arg(long, default_value_t = 0)]
    pub to_revision: i64,
    #[command(flatten)]
    pub target: Target,
}

/// The revision to roll back to: `to` if given, else the second newest.
pub fn pick(snap: &Snapshot, to: i64) -> anyhow::Result<&RevisionView> {
    if to > 0 {
        return find(snap, to);
    }
    let mut numbers: Vec<&RevisionView> = snap.revisions.iter().collect();
    numbers.sort_by_key(|r| r.number);
    match numbers.len() {
        0 | 1 => bail!(
            "no rollout history found for {} {:?}: there is no earlier revision",
            snap.workload.kind().spoken(),
            snap.workload.name
        ),
        n => Ok(numbers[n - 2]),
    }
}

/// The annotations a Deployment gets on rollback: its own bookkeeping ones, the ReplicaSet's
/// others ([`controllers::deployment::rollback::undo_annotations`]), and the new change cause.
pub fn deployment_annotations(
    deployment: &Map<String, Value>,
    replica_set: &Map<String, Value>,
    cause: &str,
) -> Map<String, Value> {
    let mut out: Map<String, Value> = controllers::deployment::rollback::undo_annotations(
        deployment.iter().map(|(k, v)| (k.clone(), v.clone())),
        replica_set.iter().map(|(k, v)| (k.clone(), v.clone())),
    )
    .into_iter()
    .collect();
    out.insert(
        super::model::CHANGE_CAUSE.into(),
        Value::String(cause.to_string()),
    );
    out
}

/// The change cause of a rollback to `r`.
fn undo_cause(r: &RevisionView) -> String {
    let was = r
        .change_cause
        .as_deref()
        .map_or(String::new(), |c| format!(" ({c})"));
    cause(&format!("rollout undo to revision {}{was}", r.number))
}

/// Runs `rollout undo`.
pub async fn run(args: UndoArgs) -> anyhow::Result<()> {
    let workload = WorkloadRef::parse(&args.workload)?;
    let session = args.target.connect().await?;
    crate::cli::output::confirm(undo(&session, &workload, args.to_revision).await?);
    Ok(())
}

/// Rolls `workload` back to revision `to_revision` (0: the previous one); says what it did.
pub async fn undo(
    session: &Session,
    workload: &WorkloadRef,
    to_revision: i64,
) -> anyhow::Result<String> {
    let ns = session.namespace.clone();
    let loaded = revisions::load(session, workload, false).await?;
    let snap = &loaded.snapshot;
    let to = pick(snap, to_revision)?;
    if snap
        .current_revision()
        .is_some_and(|c| c.number == to.number)
    {
        return Ok(format!(
            "{workload} skipped rollback (current template already matches revision {})",
            to.number
        ));
    }
    let cause = undo_cause(to);
    // `$patch: replace` makes the revision's template the whole template (a plain merge would
    // keep fields only the current one has).
    let mut template = strip_template_hash(to.template.clone());
    if let Value::Object(t) = &mut template {
        t.insert("$patch".into(), json!("replace"));
    }
    let patch = match workload.kind {
        Kind::Deployment => {
            if snap.workload.paused {
                bail!(
                    "you cannot roll back a paused deployment; resume it first with \
                     `rollwright rollout resume {}` and try again",
                    workload.short()
                );
            }
            let rs = kube::Api::<ReplicaSet>::namespaced(session.client.clone(), &ns)
                .get(&to.name)
                .await
                .explain(session, Some(&ns))?;
            let rs_annotations: Map<String, Value> = rs
                .metadata
                .annotations
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            let own = loaded
                .object
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let mut annotations = deployment_annotations(&own, &rs_annotations, &cause);
            annotations.insert("$patch".into(), json!("replace"));
            json!({"metadata": {"annotations": annotations}, "spec": {"template": template}})
        }
        Kind::DaemonSet | Kind::StatefulSet => {
            with_cause(json!({"spec": {"template": template}}), &cause)
        }
    };
    workload_api(session, workload.kind)
        .patch(
            &workload.name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .explain(session, Some(&ns))?;
    Ok(format!("{workload} rolled back to revision {}", to.number))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(numbers: &[i64]) -> Snapshot {
        Snapshot {
            revisions: numbers
                .iter()
                .map(|&n| RevisionView {
                    number: n,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_previous_revision_is_the_second_newest() {
        assert_eq!(pick(&snap(&[1, 2, 3]), 0).expect("pick").number, 2);
        assert_eq!(pick(&snap(&[5, 3, 4]), 0).expect("pick").number, 4);
        assert_eq!(pick(&snap(&[1, 2, 3]), 1).expect("pick").number, 1);
        assert!(pick(&snap(&[1]), 0).is_err());
        assert!(pick(&snap(&[1, 2]), 7).is_err());
    }

    #[test]
    fn a_deployment_takes_the_replica_set_annotations_but_keeps_its_bookkeeping() {
        let own = json!({"deployment.kubernetes.io/revision": "3", "team": "a",
            "kubectl.kubernetes.io/last-applied-configuration": "{}"});
        let rs = json!({"deployment.kubernetes.io/revision": "1", "team": "b",
            "kubernetes.io/change-cause": "old", "deployment.kubernetes.io/desired-replicas": "3"});
        let got = deployment_annotations(
            own.as_object().expect("map"),
            rs.as_object().expect("map"),
            "rollout undo to revision 1 by rollwright",
        );
        assert_eq!(
            Value::Object(got),
            json!({"deployment.kubernetes.io/revision": "3",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "team": "b",
                "kubernetes.io/change-cause": "rollout undo to revision 1 by rollwright"})
        );
    }

    #[test]
    fn the_undo_cause_names_the_revision_and_its_cause() {
        let r = RevisionView {
            number: 1,
            change_cause: Some("set image web=nginx:1.27 by rollwright".into()),
            ..Default::default()
        };
        assert_eq!(
            undo_cause(&r),
            "rollout undo to revision 1 (set image web=nginx:1.27 by rollwright) by rollwright"
        );
    }
}
