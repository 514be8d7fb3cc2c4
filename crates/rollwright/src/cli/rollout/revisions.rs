//! A workload, its revisions and pods read once, for the commands that act on a rollout
//! rather than follow it (`history`, `undo`, `pause`, `resume`, `restart`).

use super::model::{
    CONTROLLER_REVISION_HASH, POD_TEMPLATE_HASH, PodView, RevisionView, Snapshot, WorkloadView,
};
use crate::cli::{
    failure::Explain,
    kubeconfig::Session,
    workload::{Kind, WorkloadRef},
};
use anyhow::Context;
use k8s_openapi::api::{
    apps::v1::{ControllerRevision, ReplicaSet},
    core::v1::Pod,
};
use kube::{
    Api,
    api::{DynamicObject, ListParams},
};
use serde_json::Value;
use std::sync::Arc;

/// A workload as read now.
pub struct Loaded {
    /// Its JSON.
    pub object: Value,
    /// Its revisions and (when asked for) pods.
    pub snapshot: Snapshot,
}

/// The API of the workload's kind in the session's namespace.
pub fn workload_api(session: &Session, kind: Kind) -> Api<DynamicObject> {
    Api::namespaced_with(
        session.client.clone(),
        &session.namespace,
        &kind.api_resource(),
    )
}

/// Reads the workload, its revisions, and its pods if `with_pods`.
pub async fn load(
    session: &Session,
    workload: &WorkloadRef,
    with_pods: bool,
) -> anyhow::Result<Loaded> {
    let ns = session.namespace.as_str();
    let obj = workload_api(session, workload.kind)
        .get(&workload.name)
        .await
        .explain(session, Some(ns))?;
    let object = serde_json::to_value(&obj).context("reading the workload")?;
    let view = WorkloadView::from_json(workload.kind, &object);
    let selector = api::selector::LabelSelector::from_json(
        object.pointer("/spec/selector").unwrap_or(&Value::Null),
    )
    .with_context(|| format!("reading the selector of {workload}"))?
    .to_string();
    let params = ListParams::default().labels(&selector);
    let client = session.client.clone();
    let mut revisions: Vec<RevisionView> = match workload.kind {
        Kind::Deployment => Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .list(&params)
            .await
            .explain(session, Some(ns))?
            .items
            .iter()
            .map(RevisionView::from_replica_set)
            .collect(),
        Kind::DaemonSet | Kind::StatefulSet => {
            Api::<ControllerRevision>::namespaced(client.clone(), ns)
                .list(&params)
                .await
                .explain(session, Some(ns))?
                .items
                .iter()
                .map(|cr| RevisionView::from_controller_revision(workload.kind, cr))
                .collect()
        }
    };
    revisions.retain(|r| r.owner_uid.as_deref() == Some(view.uid.as_str()));
    revisions.sort_by_key(|r| r.number);
    let pods = if with_pods {
        let label = match workload.kind {
            Kind::Deployment => POD_TEMPLATE_HASH,
            _ => CONTROLLER_REVISION_HASH,
        };
        let owners: Vec<&str> = match workload.kind {
            Kind::Deployment => revisions.iter().map(|r| r.uid.as_str()).collect(),
            _ => vec![view.uid.as_str()],
        };
        Api::<Pod>::namespaced(client, ns)
            .list(&params)
            .await
            .explain(session, Some(ns))?
            .items
            .iter()
            .map(|p| PodView::from_pod(p, label))
            .filter(|p| p.owner_uid.as_deref().is_some_and(|o| owners.contains(&o)))
            .map(Arc::new)
            .collect()
    } else {
        Vec::new()
    };
    Ok(Loaded {
        object,
        snapshot: Snapshot {
            workload: view,
            revisions,
            pods,
            ..Default::default()
        },
    })
}
