//! A phase's aftermath: the Events its pods caused that are still being written once its rollout
//! is done.
//!
//! The simulated kubelets write Events last, behind every status (`nodesim`'s writer), so on a
//! slower server they are written after the rollout is done: in issue 42's side-by-side run,
//! upstream's kube-apiserver had taken 12,769 of the four phases' Events when the last phase
//! ended where `rollwright up` had taken 20,347 of about as many. A phase measured only to its
//! rollout's end charged the faster server with work the slower one did after it. A phase's CPU
//! is therefore measured until its Events stop: this module waits for that.

use futures::TryStreamExt as _;
use k8s_openapi::api::core::v1::Event;
use kube::{
    Api,
    api::{ListParams, WatchEvent, WatchParams},
};
use std::time::{Duration, Instant};

/// How long no Event may be written for a phase's aftermath to count as over.
pub const QUIET: Duration = Duration::from_secs(1);

/// Waits until no Event has been written in `namespace` for [`QUIET`], or `limit` has passed;
/// returns how long Events went on being written (0 when none came).
pub async fn events_settled(
    client: &kube::Client,
    namespace: &str,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    // Watch from now: what was written before is not the aftermath's.
    let now = api
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut last = Duration::ZERO;
    let timeout_secs = u32::try_from(limit.as_secs().max(1)).unwrap_or(u32::MAX);
    let mut events = Box::pin(
        api.watch(&WatchParams::default().timeout(timeout_secs), &now)
            .await?,
    );
    while start.elapsed() < limit {
        match tokio::time::timeout(QUIET, events.try_next()).await {
            // Nothing for a whole QUIET: the aftermath is over.
            Err(_) => break,
            Ok(Ok(Some(WatchEvent::Added(_) | WatchEvent::Modified(_)))) => last = start.elapsed(),
            Ok(Ok(Some(WatchEvent::Error(e)))) => {
                anyhow::bail!("watching Events in {namespace}: {}", e.message)
            }
            Ok(Ok(Some(_))) => {}
            // The server ended the watch (its timeout, which is `limit`).
            Ok(Ok(None)) => break,
            Ok(Err(e)) => return Err(e.into()),
        }
    }
    Ok(last)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::control_plane::{ControlPlane, Options, StoreKind};
    use kube::api::PostParams;
    use serde_json::json;

    async fn server(dir: &tempfile::TempDir) -> ControlPlane {
        ControlPlane::start(Options {
            data_dir: dir.path().to_path_buf(),
            port: 0,
            store: StoreKind::Memory,
            ..Default::default()
        })
        .await
        .unwrap()
    }

    fn event(n: usize) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("pod-{n}.started")},
            "involvedObject": {"kind": "Pod", "name": format!("pod-{n}"), "namespace": "default"},
            "reason": "Started",
            "message": "Started container app",
            "type": "Normal",
        }))
        .unwrap()
    }

    /// Events written one after another, each within a quiet second of the last, are one
    /// aftermath: the wait ends only once the last of them is in.
    #[tokio::test]
    async fn the_wait_lasts_until_the_events_stop() {
        let dir = tempfile::tempdir().unwrap();
        let cp = server(&dir).await;
        let client = embedded::client_for(&cp.server);
        let api: Api<Event> = Api::namespaced(client.clone(), "default");
        let writer = tokio::spawn(async move {
            for n in 0..4 {
                api.create(&PostParams::default(), &event(n)).await.unwrap();
                // The writes' pace is the scenario: each comes well within QUIET of the last.
                tokio::time::sleep(QUIET / 4).await;
            }
        });
        let went_on = events_settled(&client, "default", Duration::from_secs(30))
            .await
            .unwrap();
        assert!(
            writer.is_finished(),
            "the wait ended while Events were still being written"
        );
        assert!(went_on > Duration::ZERO);
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn without_events_the_aftermath_is_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cp = server(&dir).await;
        let client = embedded::client_for(&cp.server);
        let went_on = events_settled(&client, "default", Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(went_on, Duration::ZERO);
    }
}
