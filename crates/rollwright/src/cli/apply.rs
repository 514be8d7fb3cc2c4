//! `rollwright apply -f FILE|DIR|-`: create or update with client-side apply's semantics, the
//! last applied configuration kept in kubectl's annotation so `kubectl apply` and
//! `rollwright apply` take turns on the same objects. A change to a workload's pod template
//! records its change cause.

use super::{
    change_cause::{cause, with_cause},
    discovery::{Catalog, Resource},
    failure::Explain,
    kubeconfig::{Session, Target},
    manifest::{self, Manifest},
    rollout::model::CHANGE_CAUSE,
    three_way,
};
use anyhow::Context;
use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// kubectl's annotation holding the last applied configuration.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Groups whose kinds take strategic merge patches (custom resources take JSON merge patches).
const BUILTIN_GROUPS: [&str; 12] = [
    "",
    "apps",
    "batch",
    "policy",
    "autoscaling",
    "coordination.k8s.io",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "discovery.k8s.io",
    "node.k8s.io",
];

/// `apply` flags.
#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// Files, directories, or - for standard input.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    #[command(flatten)]
    pub target: Target,
}

/// The manifest as it is written to the server: with the last-applied annotation holding the
/// manifest itself.
pub fn with_last_applied(object: &Value) -> anyhow::Result<Value> {
    let mut clean = object.clone();
    if let Some(meta) = clean
        .pointer_mut("/metadata")
        .and_then(Value::as_object_mut)
        && let Some(Value::Object(a)) = meta.get_mut("annotations")
    {
        a.remove(LAST_APPLIED);
        if a.is_empty() {
            meta.remove("annotations");
        }
    }
    let text = serde_json::to_string(&clean)?;
    let mut out = clean;
    let meta = out
        .as_object_mut()
        .context("a manifest is a map")?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    let annotations = meta
        .as_object_mut()
        .context("metadata is a map")?
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if let Value::Object(a) = annotations {
        a.insert(LAST_APPLIED.into(), Value::String(text));
    }
    Ok(out)
}

/// Whether a patch (or a new object) changes a pod template that the manifest did not give a
/// change cause of its own.
pub fn needs_cause(manifest: &Value, patch_or_object: &Value) -> bool {
    let has_template = patch_or_object.pointer("/spec/template").is_some()
        || patch_or_object.pointer("/spec/jobTemplate").is_some();
    let own = manifest
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CHANGE_CAUSE))
        .is_some();
    has_template && !own
}

/// What happened to one object.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Created,
    Configured,
    Unchanged,
}

async fn apply_one(
    session: &Session,
    resource: &Resource,
    m: &Manifest,
    files: &str,
) -> anyhow::Result<Outcome> {
    let ns = m.namespace().unwrap_or(&session.namespace).to_string();
    let api: Api<DynamicObject> = if resource.namespaced {
        Api::namespaced_with(session.client.clone(), &ns, &resource.api_resource())
    } else {
        Api::all_with(session.client.clone(), &resource.api_resource())
    };
    let ns_shown = resource.namespaced.then_some(ns.as_str());
    let modified = with_last_applied(&m.object)?;
    let cause_text = cause(&format!("apply -f {files}"));
    let live = api.get_opt(m.name()).await.explain(session, ns_shown)?;
    let Some(live) = live else {
        let mut object = modified.clone();
        if resource.namespaced {
            object["metadata"]["namespace"] = json!(ns);
        }
        if needs_cause(&m.object, &object) {
            object = with_cause(object, &cause_text);
        }
        let object: DynamicObject = serde_json::from_value(object)?;
        api.create(&PostParams::default(), &object)
            .await
            .explain(session, ns_shown)?;
        return Ok(Outcome::Created);
    };
    let current = serde_json::to_value(&live)?;
    let original: Option<Value> = current
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok());
    let strategic = BUILTIN_GROUPS.contains(&resource.group.as_str());
    let Some(mut patch) = three_way::patch(original.as_ref(), &modified, &current, strategic)
    else {
        return Ok(Outcome::Unchanged);
    };
    if needs_cause(&m.object, &patch) {
        patch = with_cause(patch, &cause_text);
    }
    let body = if strategic {
        Patch::Strategic(&patch)
    } else {
        Patch::Merge(&patch)
    };
    api.patch(m.name(), &PatchParams::default(), &body)
        .await
        .explain(session, ns_shown)?;
    Ok(Outcome::Configured)
}

/// Runs `apply`.
pub async fn run(args: ApplyArgs) -> anyhow::Result<()> {
    let manifests = manifest::read(&args.files)?;
    let session = args.target.connect().await?;
    let catalog = Catalog::discover(&session).await?;
    let files = args.files.join(",");
    for m in &manifests {
        let resource = catalog
            .for_kind(m.api_version(), m.kind())
            .with_context(|| {
                format!(
                    "{}: the server has no kind {:?} in {:?} (check apiVersion and kind)",
                    m.source,
                    m.kind(),
                    m.api_version()
                )
            })?;
        let outcome = apply_one(&session, &resource, m, &files)
            .await
            .with_context(|| format!("{}: {}/{}", m.source, resource.type_name(), m.name()))?;
        let word = match outcome {
            Outcome::Created => "created",
            Outcome::Configured => "configured",
            Outcome::Unchanged => "unchanged",
        };
        super::output::confirm(format_args!("{}/{} {word}", resource.type_name(), m.name()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_applied_annotation_holds_the_manifest() {
        let m = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
        let out = with_last_applied(&m).expect("annotate");
        let text = out["metadata"]["annotations"][LAST_APPLIED]
            .as_str()
            .expect("text");
        assert_eq!(serde_json::from_str::<Value>(text).expect("json"), m);
        // Applying the annotated object again stores the same text.
        let again = with_last_applied(&out).expect("annotate");
        assert_eq!(again, out);
    }

    #[test]
    fn causes_only_for_template_changes_without_one_of_their_own() {
        let m = json!({"metadata": {"name": "web"}});
        assert!(needs_cause(&m, &json!({"spec": {"template": {}}})));
        assert!(!needs_cause(&m, &json!({"spec": {"replicas": 3}})));
        let own = json!({"metadata": {"annotations": {CHANGE_CAUSE: "mine"}}});
        assert!(!needs_cause(&own, &json!({"spec": {"template": {}}})));
    }
}
