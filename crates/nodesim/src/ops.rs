//! Runtime node operations for the CLI (`rollwright nodes add|remove|stop|start|pressure`). Each
//! is a plain API write, so `kubectl` can do the same and a running simulation picks it up from
//! its watch.

use crate::{
    Error, Identities,
    config::{
        HEARTBEAT_ANNOTATION, LEASE_NAMESPACE, NodeSim, PRESSURE_ANNOTATION, SIMULATED_LABEL,
    },
    node::{self, Pressure},
};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use std::collections::HashSet;

/// Nodes are registered with this many creates in flight.
const CONCURRENCY: usize = 64;

/// Registers `node-0` ... `node-{n-1}` (those of this simulator's shard): creates each, or adopts
/// an existing one (adding the simulated label), as a kubelet re-registering after a restart does.
/// Each node does so through its own client, as upstream's Node authorizer lets a kubelet create
/// and update its own Node.
pub async fn register(identities: &Identities, cfg: &NodeSim) -> Result<Vec<String>, Error> {
    let indices: Vec<u32> = (0..cfg.nodes as u32)
        .filter(|i| cfg.shard.owns(&cfg.node_name(*i as usize)))
        .collect();
    create_nodes(identities, cfg, &indices).await
}

/// Adds `count` nodes with the next free names.
pub async fn add(client: &Client, cfg: &NodeSim, count: usize) -> Result<Vec<String>, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let existing = api.list_metadata(&ListParams::default()).await?;
    let names: HashSet<String> = existing.items.iter().map(|n| n.name_any()).collect();
    let mut taken: HashSet<u32> = names
        .iter()
        .filter_map(|n| {
            n.strip_prefix(&cfg.name_prefix)
                .and_then(|s| s.parse().ok())
        })
        .collect();
    // Indices also name pod CIDRs; nodes created by others may hold one under another name.
    let full = api.list(&ListParams::default()).await?;
    taken.extend(full.items.iter().filter_map(|n| {
        n.spec
            .as_ref()?
            .pod_cidr
            .as_deref()
            .and_then(node::index_from_cidr)
    }));
    let indices: Vec<u32> = (0u32..)
        .filter(|i| !taken.contains(i) && !names.contains(&cfg.node_name(*i as usize)))
        .take(count)
        .collect();
    create_nodes(&Identities::single(client.clone()), cfg, &indices).await
}

async fn create_nodes(
    identities: &Identities,
    cfg: &NodeSim,
    indices: &[u32],
) -> Result<Vec<String>, Error> {
    stream::iter(indices.iter().copied())
        .map(|i| {
            let name = cfg.node_name(i as usize);
            let api: Api<Node> = Api::all(identities.node(&name));
            async move {
                let obj: Node = serde_json::from_value(node::registration(cfg, &name, i))?;
                match api.create(&PostParams::default(), &obj).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        let patch = json!({"metadata": {"labels": {SIMULATED_LABEL: "true"}}});
                        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                            .await?;
                    }
                    Err(e) => return Err(Error::Api(e)),
                }
                Ok(name)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
}

/// Removes a node: deletes the Node and its Lease (the garbage collector would remove the Lease
/// through its owner reference; doing it here keeps a cluster without one tidy).
pub async fn remove(client: &Client, name: &str) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.delete(name, &DeleteParams::default()).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    match leases.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Stops a node's kubelet: no more lease renewals or status posts, as if it died.
pub async fn stop(client: &Client, name: &str) -> Result<(), Error> {
    annotate(client, name, HEARTBEAT_ANNOTATION, Some("stopped")).await
}

/// Starts a stopped node again: it renews its lease and posts `Ready=True`.
pub async fn start(client: &Client, name: &str) -> Result<(), Error> {
    annotate(client, name, HEARTBEAT_ANNOTATION, None).await
}

/// Sets the pressures a node reports (none clears them).
pub async fn set_pressure(client: &Client, name: &str, pressure: Pressure) -> Result<(), Error> {
    let value = pressure.to_annotation();
    annotate(
        client,
        name,
        PRESSURE_ANNOTATION,
        Some(value.as_str()).filter(|v| !v.is_empty()),
    )
    .await
}

async fn annotate(
    client: &Client,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}
