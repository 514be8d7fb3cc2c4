//! `rollwright rollout pause|resume KIND/NAME` for all three kinds. A Deployment has
//! `spec.paused`. DaemonSets and StatefulSets have no such field upstream (kubectl pauses
//! Deployments only); rollwright's API server serves
//! `spec.updateStrategy.rollingUpdate.paused`, and on any other cluster the switch is the
//! annotation `rollwright.io/paused: "true"`, which rollwright's controllers read as well.
//!
//! Which one a server takes is asked, not guessed: the server's OpenAPI v3 schema of
//! `apps/v1` (`/openapi/v3/apis/apps/v1`, the document kubectl reads for validation) lists
//! `paused` among the properties of `RollingUpdateDaemonSet` / `RollingUpdateStatefulSetStrategy`
//! exactly when the server stores the field. A server without the document gets the annotation.

use super::{
    model::{PAUSED_ANNOTATION, workload_paused},
    revisions::workload_api,
};
use crate::cli::{
    failure::Explain,
    kubeconfig::{Session, Target},
    workload::{Kind, WorkloadRef},
};
use anyhow::bail;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// `rollout pause` / `rollout resume` flags.
#[derive(clap::Args, Debug)]
pub struct PauseArgs {
    /// The workload: KIND/NAME or KIND NAME.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND/NAME")]
    pub workload: Vec<String>,
    #[command(flatten)]
    pub target: Target,
}

/// Where a DaemonSet's or StatefulSet's pause lives on a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    /// `spec.updateStrategy.rollingUpdate.paused` (rollwright's API server).
    Field,
    /// The `rollwright.io/paused` annotation (any other cluster).
    Annotation,
}

/// The OpenAPI schema holding the kind's `rollingUpdate` parameters.
fn rolling_update_schema(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::DaemonSet => Some("io.k8s.api.apps.v1.RollingUpdateDaemonSet"),
        Kind::StatefulSet => Some("io.k8s.api.apps.v1.RollingUpdateStatefulSetStrategy"),
        Kind::Deployment => None,
    }
}

/// Reads the switch off the server's `apps/v1` OpenAPI v3 document.
pub fn switch_in(doc: &Value, kind: Kind) -> Switch {
    let has_field = rolling_update_schema(kind).is_some_and(|schema| {
        doc.pointer("/components/schemas")
            .and_then(|s| s.get(schema))
            .and_then(|s| s.pointer("/properties/paused"))
            .is_some()
    });
    if has_field {
        Switch::Field
    } else {
        Switch::Annotation
    }
}

/// Asks the server which switch it takes.
pub async fn switch(session: &Session, kind: Kind) -> Switch {
    async fn get(session: &Session, path: &str) -> Option<Value> {
        let req = http::Request::get(path).body(Vec::new()).ok()?;
        let text = session.client.request_text(req).await.ok()?;
        serde_json::from_str(&text).ok()
    }
    let Some(index) = get(session, "/openapi/v3").await else {
        return Switch::Annotation;
    };
    let Some(url) = index
        .pointer("/paths/apis~1apps~1v1/serverRelativeURL")
        .and_then(Value::as_str)
    else {
        return Switch::Annotation;
    };
    match get(session, url).await {
        Some(doc) => switch_in(&doc, kind),
        None => Switch::Annotation,
    }
}

/// The patch that pauses (`pause`) or resumes a rollout. Resuming clears both switches, so a
/// workload paused through either comes back.
pub fn patch(kind: Kind, switch: Switch, pause: bool) -> Value {
    match (kind, pause) {
        (Kind::Deployment, true) => json!({"spec": {"paused": true}}),
        (Kind::Deployment, false) => json!({"spec": {"paused": null}}),
        (_, true) => match switch {
            Switch::Field => {
                json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": true}}}})
            }
            Switch::Annotation => {
                json!({"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}})
            }
        },
        (_, false) => {
            let mut p = json!({"metadata": {"annotations": {PAUSED_ANNOTATION: null}}});
            if switch == Switch::Field {
                p["spec"] = json!({"updateStrategy": {"rollingUpdate": {"paused": null}}});
            }
            p
        }
    }
}

/// Whether the workload is paused now.
pub fn is_paused(kind: Kind, obj: &Value) -> bool {
    match kind {
        Kind::Deployment => obj.pointer("/spec/paused").and_then(Value::as_bool) == Some(true),
        Kind::DaemonSet | Kind::StatefulSet => workload_paused(obj),
    }
}

/// Runs `rollout pause` (`pause`) or `rollout resume`.
pub async fn run(args: PauseArgs, pause: bool) -> anyhow::Result<()> {
    let workload = WorkloadRef::parse(&args.workload)?;
    let session = args.target.connect().await?;
    crate::cli::output::confirm(set(&session, &workload, pause).await?);
    Ok(())
}

/// Pauses (`pause`) or resumes the rollout of `workload`; says what it did.
pub async fn set(session: &Session, workload: &WorkloadRef, pause: bool) -> anyhow::Result<String> {
    let session = session.clone();
    let ns = session.namespace.clone();
    let api = workload_api(&session, workload.kind);
    let obj = api.get(&workload.name).await.explain(&session, Some(&ns))?;
    let obj = serde_json::to_value(&obj)?;
    let resource = format!("{}.apps {:?}", workload.kind.plural(), workload.name);
    match (pause, is_paused(workload.kind, &obj)) {
        (true, true) => bail!("{resource} is already paused"),
        (false, false) => bail!("{resource} is not paused"),
        _ => {}
    }
    if workload.kind != Kind::Deployment
        && obj
            .pointer("/spec/updateStrategy/type")
            .and_then(Value::as_str)
            == Some("OnDelete")
    {
        bail!(
            "{workload} uses the OnDelete strategy: its pods change only when deleted, there is no rollout to {}",
            if pause { "pause" } else { "resume" }
        );
    }
    let switch = match workload.kind {
        Kind::Deployment => Switch::Field,
        _ => switch(&session, workload.kind).await,
    };
    let body = patch(workload.kind, switch, pause);
    api.patch(
        &workload.name,
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await
    .explain(&session, Some(&ns))?;
    let how = match (workload.kind, switch) {
        (Kind::Deployment, _) => "",
        (_, Switch::Field) => " (spec.updateStrategy.rollingUpdate.paused)",
        (_, Switch::Annotation) => " (annotation rollwright.io/paused)",
    };
    Ok(format!(
        "{workload} {}{how}",
        if pause { "paused" } else { "resumed" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_is_what_the_schema_says() {
        let with = json!({"components": {"schemas": {
            "io.k8s.api.apps.v1.RollingUpdateDaemonSet": {"properties": {"maxSurge": {}, "paused": {"type": "boolean"}}},
            "io.k8s.api.apps.v1.RollingUpdateStatefulSetStrategy": {"properties": {"partition": {}}}
        }}});
        assert_eq!(switch_in(&with, Kind::DaemonSet), Switch::Field);
        assert_eq!(switch_in(&with, Kind::StatefulSet), Switch::Annotation);
        assert_eq!(switch_in(&json!({}), Kind::DaemonSet), Switch::Annotation);
    }

    #[test]
    fn patches_per_kind_and_switch() {
        assert_eq!(
            patch(Kind::DaemonSet, Switch::Field, true),
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": true}}}})
        );
        assert_eq!(
            patch(Kind::StatefulSet, Switch::Annotation, true),
            json!({"metadata": {"annotations": {"rollwright.io/paused": "true"}}})
        );
        assert_eq!(
            patch(Kind::DaemonSet, Switch::Field, false),
            json!({"metadata": {"annotations": {"rollwright.io/paused": null}},
                   "spec": {"updateStrategy": {"rollingUpdate": {"paused": null}}}})
        );
        assert_eq!(
            patch(Kind::Deployment, Switch::Field, true),
            json!({"spec": {"paused": true}})
        );
        assert!(is_paused(
            Kind::StatefulSet,
            &json!({"metadata": {"annotations": {"rollwright.io/paused": "true"}}})
        ));
        assert!(!is_paused(Kind::Deployment, &json!({"spec": {}})));
    }
}
