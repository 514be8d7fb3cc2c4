//! `rollwright rollout restart KIND/NAME`: kubectl's restart (a `restartedAt` annotation on the
//! pod template, which makes a new revision and rolls every pod), with a change cause.

use super::{pause::is_paused, revisions::workload_api};
use crate::cli::{
    change_cause::{cause, with_cause},
    failure::Explain,
    kubeconfig::Target,
    workload::WorkloadRef,
};
use anyhow::bail;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// The pod-template annotation kubectl's restart sets.
pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

/// `rollout restart` flags.
#[derive(clap::Args, Debug)]
pub struct RestartArgs {
    /// The workload: KIND/NAME or KIND NAME.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND/NAME")]
    pub workload: Vec<String>,
    #[command(flatten)]
    pub target: Target,
}

/// The patch restarting a workload at `now` (RFC 3339, seconds).
pub fn patch(now: &str) -> Value {
    with_cause(
        json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}}}),
        &cause("rollout restart"),
    )
}

/// Runs `rollout restart`.
pub async fn run(args: RestartArgs) -> anyhow::Result<()> {
    let workload = WorkloadRef::parse(&args.workload)?;
    let session = args.target.connect().await?;
    let ns = session.namespace.clone();
    let api = workload_api(&session, workload.kind);
    let obj = api.get(&workload.name).await.explain(&session, Some(&ns))?;
    if is_paused(workload.kind, &serde_json::to_value(&obj)?) {
        bail!(
            "can't restart paused {} (run `rollwright rollout resume {}` first)",
            workload.kind.spoken(),
            workload.short()
        );
    }
    let now = clock::now().round(jiff::Unit::Second)?.to_string();
    api.patch(
        &workload.name,
        &PatchParams::default(),
        &Patch::Strategic(&patch(&now)),
    )
    .await
    .explain(&session, Some(&ns))?;
    crate::cli::output::confirm(format_args!("{workload} restarted"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_annotates_the_template_and_says_why() {
        assert_eq!(
            patch("2025-01-01T00:00:00Z"),
            json!({"metadata": {"annotations": {"kubernetes.io/change-cause": "rollout restart by rollwright"}},
                   "spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"}}}}})
        );
    }
}
