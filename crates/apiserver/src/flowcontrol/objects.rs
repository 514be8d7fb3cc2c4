//! What the server keeps of the flow-control objects: upstream's defaults created and kept up to
//! date as the `apf.kubernetes.io/autoupdate-spec` rules say, and the FlowSchemas' `Dangling`
//! conditions written when the configuration is read.

use std::sync::Arc;

use serde_json::Value;

use super::{GROUP, Snapshot, bootstrap, status};
use crate::{change::Change, error::ApiResult, registry::Kind, state::ApiServer};

impl ApiServer {
    /// Reads the flow-control configuration now (and so writes the FlowSchemas' status), as the
    /// server starts.
    pub(crate) fn load_flow_control(&self) {
        self.snapshot_flow_control();
    }

    /// The flow-control configuration now; when it was rebuilt, the FlowSchemas' `Dangling`
    /// conditions it found are written in the background.
    pub(super) fn snapshot_flow_control(&self) -> Arc<Snapshot> {
        let (snapshot, updates) = self.flow_control.snapshot(&self.cache, &self.metrics);
        if !updates.is_empty() {
            let server = self.clone();
            tokio::spawn(async move { server.write_dangling(updates).await });
        }
        snapshot
    }

    /// Writes FlowSchemas' `Dangling` conditions (upstream's controller writes them the same
    /// way, after reading a new configuration). A write lost to a race is made again at the
    /// next configuration read, which the write itself causes.
    async fn write_dangling(&self, updates: Vec<(String, Value)>) {
        let Some(def) = self.registry().owner(GROUP, "flowschemas") else {
            return;
        };
        for (name, condition) in updates {
            let outcome = self
                .guaranteed_update(&def, None, &name, false, |old, _| {
                    let mut new = old.clone();
                    status::set_condition(&mut new, condition.clone());
                    Ok(Change::Write(new))
                })
                .await;
            if let Err(e) = outcome
                && e.code != 404
            {
                tracing::warn!(name, error = %e, "unable to write the FlowSchema's status");
            }
        }
    }

    /// Creates the default FlowSchemas and PriorityLevelConfigurations that are missing and puts
    /// back those the server keeps up to date ([`bootstrap::revise`]).
    pub(crate) async fn ensure_flow_control_objects(&self) -> ApiResult<()> {
        for (kind, default) in bootstrap::objects() {
            let plural = match default.get("kind").and_then(Value::as_str) {
                Some("FlowSchema") => "flowschemas",
                _ => "prioritylevelconfigurations",
            };
            let Some(def) = self.registry().owner(GROUP, plural) else {
                continue;
            };
            let name = crate::object::name(&default).to_string();
            match self.cache.get(&def, None, &name).map(|e| e.value()) {
                None => {
                    let mut obj = default.clone();
                    self.ensure_object(&mut obj).await?;
                }
                Some(existing) => {
                    if bootstrap::revise(kind, &existing, &default).is_some() {
                        self.revise_default(&def, &name, kind, &default).await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn revise_default(
        &self,
        def: &Arc<Kind>,
        name: &str,
        kind: bootstrap::Ensure,
        default: &Value,
    ) -> ApiResult<()> {
        let outcome = self
            .guaranteed_update(def, None, name, false, |old, _| {
                Ok(Change::Write(
                    bootstrap::revise(kind, old, default).unwrap_or_else(|| old.clone()),
                ))
            })
            .await;
        match outcome {
            Err(e) if e.code == 404 => Ok(()),
            other => other.map(|_| ()),
        }
    }
}
