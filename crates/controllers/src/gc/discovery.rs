//! Reads what the API server serves (upstream's `ServerPreferredResources`, as the collector's
//! `Sync` calls it): `/api`, `/apis`, then every group version's resource list. Works the same
//! against this server and a real cluster.

use super::resources::ServedGroup;
use futures::future::join_all;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIResource};
use kube::Client;
use std::collections::HashMap;

/// Every served group with its versions' resources. A group whose versions cannot be read (an
/// aggregated API whose backend is down) keeps what `previous` knew of it, if anything, rather
/// than have its watches stopped and restarted each time it flaps (upstream leaves such a group
/// out of that round).
pub async fn discover(
    client: &Client,
    previous: &[ServedGroup],
) -> Result<Vec<ServedGroup>, kube::Error> {
    let core = client.list_core_api_versions().await?;
    let groups = client.list_api_groups().await?;
    let mut wanted: Vec<(String, Vec<(String, String)>)> = vec![(
        String::new(),
        core.versions
            .iter()
            .map(|v| (v.clone(), v.clone()))
            .collect(),
    )];
    wanted.extend(groups.groups.iter().map(|g| (g.name.clone(), versions(g))));

    let reads = wanted.into_iter().map(|(name, versions)| async move {
        let core = name.is_empty();
        let lists = join_all(versions.iter().map(|(gv, v)| async move {
            let list = if core {
                client.list_core_api_resources(v).await
            } else {
                client.list_api_group_resources(gv).await
            };
            list.map(|l| (v.clone(), l.resources))
        }))
        .await;
        let versions: Result<Vec<(String, Vec<APIResource>)>, kube::Error> =
            lists.into_iter().collect();
        (name, versions)
    });
    let known: HashMap<&str, &ServedGroup> =
        previous.iter().map(|g| (g.name.as_str(), g)).collect();
    let mut served = Vec::new();
    for (name, versions) in join_all(reads).await {
        match versions {
            Ok(versions) => served.push(ServedGroup { name, versions }),
            Err(error) => {
                tracing::info!(group = %name, %error, "failed to discover a group's resources");
                if let Some(old) = known.get(name.as_str()) {
                    served.push((*old).clone());
                }
            }
        }
    }
    Ok(served)
}

/// A group's `(groupVersion, version)` pairs, the preferred version first.
fn versions(group: &APIGroup) -> Vec<(String, String)> {
    let preferred = group.preferred_version.as_ref().map(|p| p.version.as_str());
    let mut versions: Vec<(String, String)> = group
        .versions
        .iter()
        .map(|v| (v.group_version.clone(), v.version.clone()))
        .collect();
    // A stable sort: the preferred version first, the others in the server's order.
    versions.sort_by_key(|(_, v)| Some(v.as_str()) != preferred);
    versions
}
