//! `rollwright delete TYPE NAME... | TYPE/NAME... | -f FILE`: deletes and, as kubectl does by
//! default, waits until the objects are gone (on a watch).

use super::{
    discovery::{Catalog, Resource},
    failure::Explain,
    get::requests,
    kubeconfig::{Session, Target},
    manifest,
};
use anyhow::{Context, bail};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, DynamicObject, PropagationPolicy},
    runtime::wait::{await_condition, conditions::is_deleted},
};
use std::time::Duration;

/// How long `delete` waits for objects to go.
const WAIT: Duration = Duration::from_secs(60);

/// Propagation to dependents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Cascade {
    /// Dependents are deleted in the background (the default).
    Background,
    /// The object goes only after its dependents.
    Foreground,
    /// Dependents are left, without owner.
    Orphan,
}

/// `delete` flags.
#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// TYPE NAME..., or TYPE/NAME...
    #[arg(value_name = "TYPE NAME")]
    pub args: Vec<String>,
    /// Delete the objects of these files, directories or - (stdin).
    #[arg(short = 'f', long = "filename")]
    pub files: Vec<String>,
    /// What happens to dependents.
    #[arg(long, value_enum, default_value_t = Cascade::Background)]
    pub cascade: Cascade,
    /// Wait until the objects are gone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub wait: bool,
    #[command(flatten)]
    pub target: Target,
}

async fn delete_one(
    session: &Session,
    resource: &Resource,
    namespace: &str,
    name: &str,
    args: &DeleteArgs,
) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = if resource.namespaced {
        Api::namespaced_with(session.client.clone(), namespace, &resource.api_resource())
    } else {
        Api::all_with(session.client.clone(), &resource.api_resource())
    };
    let ns_shown = resource.namespaced.then_some(namespace);
    let params = DeleteParams {
        propagation_policy: Some(match args.cascade {
            Cascade::Background => PropagationPolicy::Background,
            Cascade::Foreground => PropagationPolicy::Foreground,
            Cascade::Orphan => PropagationPolicy::Orphan,
        }),
        ..Default::default()
    };
    let uid = api
        .get(name)
        .await
        .explain(session, ns_shown)?
        .uid()
        .unwrap_or_default();
    api.delete(name, &params).await.explain(session, ns_shown)?;
    super::output::confirm(format_args!("{} {name:?} deleted", resource.type_name()));
    if args.wait {
        tokio::time::timeout(WAIT, await_condition(api, name, is_deleted(&uid)))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "{} {name:?} is still there after {}s (finalizers? see `rollwright get {} {name} -o yaml`)",
                    resource.type_name(),
                    WAIT.as_secs(),
                    resource.qualified()
                )
            })?
            .context("waiting for the deletion")?;
    }
    Ok(())
}

/// Runs `delete`.
pub async fn run(args: DeleteArgs) -> anyhow::Result<()> {
    if args.args.is_empty() == args.files.is_empty() {
        bail!("name what to delete: TYPE NAME, TYPE/NAME, or -f FILE");
    }
    let session = args.target.connect().await?;
    let catalog = Catalog::discover(&session).await?;
    if !args.files.is_empty() {
        for m in manifest::read(&args.files)? {
            let resource = catalog
                .for_kind(m.api_version(), m.kind())
                .with_context(|| {
                    format!(
                        "{}: the server has no kind {:?} in {:?}",
                        m.source,
                        m.kind(),
                        m.api_version()
                    )
                })?;
            let ns = m.namespace().unwrap_or(&session.namespace).to_string();
            delete_one(&session, &resource, &ns, m.name(), &args).await?;
        }
        return Ok(());
    }
    let requests = requests(&args.args)?;
    for request in &requests {
        if request.names.is_empty() {
            bail!(
                "name the {} to delete, e.g. `rollwright delete {} NAME`",
                request.type_name,
                request.type_name
            );
        }
        let resource = catalog.resolve(&request.type_name)?;
        for name in &request.names {
            delete_one(&session, resource, &session.namespace, name, &args).await?;
        }
    }
    Ok(())
}
