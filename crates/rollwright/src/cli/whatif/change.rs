//! The changes a rehearsal makes: rollwright's own CLI verbs, run against the rehearsal's
//! control plane exactly as they would run against the real cluster, and `drain NODE`, which
//! cordons a node and evicts its pods through the Eviction API as `kubectl drain` does, retrying
//! what a PodDisruptionBudget refuses.

use super::measure::WorkloadId;
use anyhow::{Context, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{EvictParams, ListParams, Patch, PatchParams},
};
use serde_json::json;
use std::{
    collections::HashSet,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

/// One change, as given on the command line.
#[derive(Debug)]
pub enum Change {
    /// A CLI verb (`set image ...`, `rollout restart ...`, `scale ...`, `apply -f ...`).
    Cli(Vec<String>),
    /// `drain NODE`.
    Drain(String),
}

/// The verbs that change a cluster; the others only read.
const VERBS: &str = "set image, scale, apply, delete, rollout restart|undo|pause|resume, drain";

#[derive(Parser)]
#[command(no_binary_name = true)]
struct Verb {
    #[command(subcommand)]
    command: crate::cli::Command,
}

impl Change {
    /// Reads one `--change` (`"set image deploy/web web=nginx:1.28"`), checking it parses.
    pub fn parse(text: &str) -> anyhow::Result<Change> {
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        match words.first().map(String::as_str) {
            None => bail!("an empty --change: give one of {VERBS}"),
            Some("drain") => match words.as_slice() {
                [_, node] => return Ok(Change::Drain(node.clone())),
                _ => bail!("--change {text:?}: drain takes one node name (drain node-7)"),
            },
            _ => {}
        }
        let verb = Verb::try_parse_from(&words)
            .map_err(|e| anyhow::anyhow!("--change {text:?}: {}", first_line(&e.to_string())))?;
        use crate::cli::{Command, rollout::Rollout};
        match verb.command {
            Command::Set(_) | Command::Scale(_) | Command::Apply(_) | Command::Delete(_) => {}
            Command::Rollout(
                Rollout::Restart(_) | Rollout::Undo(_) | Rollout::Pause(_) | Rollout::Resume(_),
            ) => {}
            _ => bail!("--change {text:?} changes nothing: give one of {VERBS}"),
        }
        Ok(Change::Cli(words))
    }

    /// Makes the change on the cluster `kubeconfig` names. A drain runs on in the background
    /// (it waits for budgets), writing the evictions refused so far into `refused`.
    pub async fn make(
        &self,
        kubeconfig: &Path,
        client: &Client,
        refused: Arc<Mutex<Vec<(WorkloadId, String)>>>,
        owners: impl Fn(&Pod) -> Option<WorkloadId> + Send + 'static,
    ) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
        match self {
            Change::Cli(words) => {
                let mut words = words.clone();
                words.push("--kubeconfig".into());
                words.push(kubeconfig.display().to_string());
                let verb = Verb::try_parse_from(&words).map_err(|e| anyhow::anyhow!("{e}"))?;
                crate::cli::run(verb.command).await?;
                Ok(None)
            }
            Change::Drain(node) => {
                cordon(client, node).await?;
                let (client, node) = (client.clone(), node.clone());
                Ok(Some(tokio::spawn(async move {
                    evict_all(&client, &node, &refused, owners).await;
                })))
            }
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

async fn cordon(client: &Client, node: &str) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .with_context(|| format!("cordoning node {node}"))?;
    eprintln!("node/{node} cordoned");
    Ok(())
}

/// Whether `kubectl drain --ignore-daemonsets` leaves the pod alone: DaemonSet pods (their
/// controller would put them back) and mirror pods (upstream's `daemonSetFilter` and
/// `mirrorPodFilter`). Everything else goes, finished pods, pods of no controller and pods with
/// `emptyDir` volumes included, as with `--force --delete-emptydir-data`: a rehearsal asks what
/// the drain does, not whether kubectl would start it.
fn stays(pod: &Pod) -> bool {
    let daemon = pod
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.kind == "DaemonSet");
    let mirror = pod
        .annotations()
        .contains_key("kubernetes.io/config.mirror");
    daemon || mirror
}

/// How long `kubectl drain` waits before asking again for an eviction a budget refused.
const EVICTION_RETRY: Duration = Duration::from_secs(5);

/// Evicts every pod on `node` but those that stay, retrying refused evictions as `kubectl drain`
/// does, until all are gone. It says what it does as `kubectl drain` does (`evicting pod`,
/// `pod/NAME evicted`, the budget's refusal), each refusal once rather than at every retry.
async fn evict_all(
    client: &Client,
    node: &str,
    refused: &Mutex<Vec<(WorkloadId, String)>>,
    owners: impl Fn(&Pod) -> Option<WorkloadId>,
) {
    let pods: Api<Pod> = Api::all(client.clone());
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let mut told: HashSet<String> = HashSet::new();
    loop {
        let list = match pods.list(&on_node).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(node, error = %e, "listing the pods to drain");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let left: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| !stays(p) && p.metadata.deletion_timestamp.is_none())
            .collect();
        if left.is_empty() {
            eprintln!("node/{node} drained");
            return;
        }
        let mut blocked = Vec::new();
        for pod in &left {
            let ns = pod.namespace().unwrap_or_default();
            let name = pod.name_any();
            if told.insert(format!("{ns}/{name}")) {
                eprintln!("evicting pod {ns}/{name}");
            }
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            match api.evict(&name, &EvictParams::default()).await {
                Ok(_) => eprintln!("pod/{name} evicted"),
                Err(kube::Error::Api(s)) if s.code == 429 => {
                    if told.insert(format!("refused {ns}/{name}")) {
                        eprintln!(
                            "error when evicting pods/{name:?} -n {ns:?} (will retry after {}s): {}",
                            EVICTION_RETRY.as_secs(),
                            s.message
                        );
                    }
                    if let Some(owner) = owners(pod) {
                        blocked.push((owner, format!("pod {ns}/{name}: {}", s.message)));
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => eprintln!("error when evicting pods/{name:?} -n {ns:?}: {e}"),
            }
        }
        let wait = if blocked.is_empty() {
            Duration::from_secs(1)
        } else {
            EVICTION_RETRY
        };
        if let Ok(mut r) = refused.lock() {
            *r = blocked;
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_verbs_that_change_something() {
        assert!(matches!(
            Change::parse("set image deploy/web web=nginx:2").expect("set image"),
            Change::Cli(w) if w.len() == 4
        ));
        assert!(Change::parse("rollout restart ds/agent").is_ok());
        assert!(Change::parse("scale deploy/web --replicas 3").is_ok());
        assert!(matches!(
            Change::parse("drain node-7").expect("drain"),
            Change::Drain(n) if n == "node-7"
        ));
        let read_only = Change::parse("rollout status deploy/web")
            .unwrap_err()
            .to_string();
        assert!(read_only.contains("changes nothing"), "{read_only}");
        assert!(Change::parse("drain").is_err());
        assert!(Change::parse("frobnicate x").is_err());
        assert!(Change::parse("").is_err());
    }
}
