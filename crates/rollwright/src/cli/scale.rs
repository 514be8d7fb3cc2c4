//! `rollwright scale KIND/NAME --replicas N`, through the scale subresource as kubectl does.
//! No change cause: scaling makes no revision (see `change_cause`).

use super::{
    failure::Explain,
    kubeconfig::Target,
    rollout::revisions::workload_api,
    workload::{Kind, WorkloadRef},
};
use anyhow::bail;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// `scale` flags.
#[derive(clap::Args, Debug)]
pub struct ScaleArgs {
    /// The workload: KIND/NAME or KIND NAME (deployments and statefulsets).
    #[arg(required = true, num_args = 1..=2, value_name = "KIND/NAME")]
    pub workload: Vec<String>,
    /// The number of pods wanted.
    #[arg(long)]
    pub replicas: i32,
    #[command(flatten)]
    pub target: Target,
}

/// Runs `scale`.
pub async fn run(args: ScaleArgs) -> anyhow::Result<()> {
    let workload = WorkloadRef::parse(&args.workload)?;
    if workload.kind == Kind::DaemonSet {
        bail!(
            "a daemonset runs one pod per eligible node and has no replicas to scale; change its node selector instead"
        );
    }
    if args.replicas < 0 {
        bail!("--replicas must be 0 or more, not {}", args.replicas);
    }
    let session = args.target.connect().await?;
    let ns = session.namespace.clone();
    workload_api(&session, workload.kind)
        .patch_scale(
            &workload.name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": args.replicas}})),
        )
        .await
        .explain(&session, Some(&ns))?;
    super::output::confirm(format_args!("{workload} scaled"));
    Ok(())
}
