//! `rollwright set image KIND/NAME CONTAINER=IMAGE...`: kubectl's `set image` for the three
//! workload kinds (`*` names every container), as one strategic merge patch that also records
//! the change cause.

use super::{
    change_cause::{cause, with_cause},
    failure::Explain,
    kubeconfig::Target,
    rollout::revisions::workload_api,
    workload::WorkloadRef,
};
use anyhow::bail;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// `set` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Set {
    /// Change container images of a workload (records the change cause).
    Image(ImageArgs),
}

/// `set image` flags.
#[derive(clap::Args, Debug)]
pub struct ImageArgs {
    /// The workload (KIND/NAME), then CONTAINER=IMAGE pairs (`*=IMAGE` for all containers).
    #[arg(required = true, num_args = 2.., value_name = "KIND/NAME CONTAINER=IMAGE")]
    pub args: Vec<String>,
    #[command(flatten)]
    pub target: Target,
}

/// Splits the arguments into the workload and `(container, image)` pairs.
pub fn parse(args: &[String]) -> anyhow::Result<(WorkloadRef, Vec<(String, String)>)> {
    let split = args
        .iter()
        .position(|a| a.contains('='))
        .unwrap_or(args.len());
    let workload = WorkloadRef::parse(&args[..split])?;
    let mut pairs = Vec::new();
    for a in &args[split..] {
        match a.split_once('=') {
            Some((c, i)) if !c.is_empty() && !i.is_empty() => {
                pairs.push((c.to_string(), i.to_string()))
            }
            _ => bail!("{a:?} is not CONTAINER=IMAGE, e.g. web=nginx:1.28"),
        }
    }
    if pairs.is_empty() {
        bail!("name at least one CONTAINER=IMAGE, e.g. web=nginx:1.28");
    }
    Ok((workload, pairs))
}

fn names(template: &Value, list: &str) -> Vec<String> {
    template
        .pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

/// The patch setting the images of `pairs` in `template`, or why it cannot.
pub fn patch(template: &Value, pairs: &[(String, String)]) -> anyhow::Result<Value> {
    let containers = names(template, "containers");
    let init = names(template, "initContainers");
    let mut patch_containers = Vec::new();
    let mut patch_init = Vec::new();
    for (name, image) in pairs {
        let mut found = false;
        for (list, out) in [
            (&containers, &mut patch_containers),
            (&init, &mut patch_init),
        ] {
            for c in list.iter().filter(|c| name == "*" || *c == name) {
                out.push(json!({"name": c, "image": image}));
                found = true;
            }
        }
        if !found {
            bail!(
                "unable to find container named {name:?} (containers: {})",
                containers
                    .iter()
                    .chain(&init)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let mut spec = serde_json::Map::new();
    if !patch_containers.is_empty() {
        spec.insert("containers".into(), Value::Array(patch_containers));
    }
    if !patch_init.is_empty() {
        spec.insert("initContainers".into(), Value::Array(patch_init));
    }
    Ok(json!({"spec": {"template": {"spec": spec}}}))
}

/// Runs `set image`.
pub async fn run(set: Set) -> anyhow::Result<()> {
    let Set::Image(args) = set;
    let (workload, pairs) = parse(&args.args)?;
    let session = args.target.connect().await?;
    let ns = session.namespace.clone();
    let api = workload_api(&session, workload.kind);
    let obj = api.get(&workload.name).await.explain(&session, Some(&ns))?;
    let template = obj
        .data
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_default();
    let what: Vec<String> = pairs.iter().map(|(c, i)| format!("{c}={i}")).collect();
    let body = with_cause(
        patch(&template, &pairs)?,
        &cause(&format!("set image {}", what.join(" "))),
    );
    api.patch(
        &workload.name,
        &PatchParams::default(),
        &Patch::Strategic(&body),
    )
    .await
    .explain(&session, Some(&ns))?;
    super::output::confirm(format_args!("{workload} image updated"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_and_patches() {
        let (w, pairs) = parse(&strings(&["deploy/web", "web=nginx:1.28"])).expect("parse");
        assert_eq!(w.to_string(), "deployment.apps/web");
        assert_eq!(pairs, vec![("web".to_string(), "nginx:1.28".to_string())]);
        let (w, _) = parse(&strings(&["ds", "agent", "*=a:2"])).expect("parse");
        assert_eq!(w.to_string(), "daemonset.apps/agent");
        assert!(parse(&strings(&["deploy/web"])).is_err());
        assert!(parse(&strings(&["deploy/web", "web="])).is_err());

        let template = json!({"spec": {"initContainers": [{"name": "init", "image": "i:1"}],
            "containers": [{"name": "web", "image": "w:1"}, {"name": "side", "image": "s:1"}]}});
        assert_eq!(
            patch(&template, &[("web".into(), "w:2".into())]).expect("patch"),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "w:2"}]}}}})
        );
        assert_eq!(
            patch(&template, &[("*".into(), "x:9".into())]).expect("patch"),
            json!({"spec": {"template": {"spec": {
                "containers": [{"name": "web", "image": "x:9"}, {"name": "side", "image": "x:9"}],
                "initContainers": [{"name": "init", "image": "x:9"}]}}}})
        );
        let err = patch(&template, &[("nope".into(), "x".into())])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "unable to find container named \"nope\" (containers: web, side, init)"
        );
    }
}
