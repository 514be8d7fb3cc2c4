//! A watch of some pods that hands every state it sees to a check, from the moment it has
//! listed: the invariant watchers of the end-to-end tests are each a check over it.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, runtime::watcher};
use std::{collections::HashMap, time::Duration};

/// Watches the pods of the default namespace that `labels` selects and calls `check` with all
/// of them after every event once the watch has listed. Returns once it has listed, so nothing
/// the test does next goes unseen; the watch ends by itself after `limit`, so a test that hangs
/// still ends. Abort the returned task to stop it.
pub async fn checked(
    client: kube::Client,
    labels: &str,
    limit: Duration,
    mut check: impl FnMut(&HashMap<String, Pod>) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let api: Api<Pod> = Api::default_namespaced(client);
    let config = watcher::Config::default().labels(labels);
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        let mut pods: HashMap<String, Pod> = HashMap::new();
        let mut events = watcher(api, config).boxed();
        let _ = tokio::time::timeout(limit, async {
            while let Some(Ok(event)) = events.next().await {
                match event {
                    watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                        pods.insert(p.name_any(), p);
                    }
                    watcher::Event::Delete(p) => {
                        pods.remove(&p.name_any());
                    }
                    watcher::Event::InitDone => {
                        if let Some(tx) = listed_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    watcher::Event::Init => {}
                }
                if listed_tx.is_none() {
                    check(&pods);
                }
            }
        })
        .await;
    });
    tokio::time::timeout(limit, listed_rx)
        .await
        .expect("the watch lists in time")
        .expect("the watch lists");
    task
}
